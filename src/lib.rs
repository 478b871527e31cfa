//! The interview runtime server: HTTP API, authentication, study publishing and wiring of the
//! Session write model (`interview-session`) to its event store and projections.
//!
//! The folders say what lives in them (see `docs/architecture.md`): `http/` the front door and
//! the routes, `access/` researchers' identities and roles, `command/` the command side, `live/` streams and fan-out, `jobs/` background
//! work, `interviewer/` the interviewer and `llm/` its model client, `webhooks/` what a study pushes
//! to the research team's systems; at the top, settings, wiring
//! (`startup`, `state`, `demo`), metrics (`meters`), logs and traces (`telemetry`) and the clients' TLS (`tls`).
#![forbid(unsafe_code)]

pub mod access;
pub mod bounded;
pub mod command;
pub mod demo;
pub mod http;
pub mod interviewer;
pub mod jobs;
pub mod live;
pub mod llm;
pub mod meters;
pub mod settings;
pub mod startup;
pub mod state;
pub mod telemetry;
pub mod tls;
pub mod webhooks;

pub use settings::Settings;
pub use startup::Application;
