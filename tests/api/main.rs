//! End-to-end tests: the real server over HTTP, on both stores.

mod access;
mod agui;
mod bad_input;
mod data_keys;
mod erasure;
mod helpers;
mod injection;
mod interviewer;
mod journey;
mod limits;
mod llm;
mod llm_budget;
mod llm_final;
mod llm_realistic;
mod llm_servers;
mod llm_waits;
mod metrics;
mod operations;
mod overview;
mod pg_restart;
mod places;
mod process;
mod research;
mod research_data;
mod restart;
mod scale_out;
mod scenarios;
mod security;
mod sessions;
mod sse;
mod sso;
mod stored_once;
mod stream;
mod studies;
mod sweeper;
mod traces;
mod webhook_receiver;
mod webhooks;
mod webhooks_api;
mod webhooks_restart;

// What the tests share with the replay tests, the evaluation and the benchmarks.
pub(crate) use interview_test_kit::{both_stores, participant, scripted_model, widget_values};
