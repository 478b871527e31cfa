//! The interview runtime server: HTTP API, authentication, study publishing and wiring of the
//! Session write model (`interview-session`) to its event store and projections.
#![forbid(unsafe_code)]

pub mod agui;
pub mod auth;
pub mod body;
pub mod demo;
pub mod door;
pub mod error;
pub mod event_store;
pub mod export;
pub mod extraction;
pub mod harness;
pub mod limits;
pub mod llm;
pub mod meters;
pub mod openapi;
pub mod query;
pub mod routes;
pub mod settings;
pub mod startup;
pub mod state;
pub mod store;
pub mod stream_hub;
pub mod studies;
pub mod sweeper;
pub mod telemetry;

pub use settings::Settings;
pub use startup::Application;
