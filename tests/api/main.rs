//! End-to-end tests: the real server over HTTP, on both stores.

mod agui;
mod bad_input;
mod harness;
mod helpers;
mod journey;
mod limits;
mod llm;
mod llm_budget;
mod llm_final;
mod llm_realistic;
mod operations;
mod participant;
mod pg_restart;
mod process;
mod research;
mod restart;
mod scale_out;
mod scenarios;
mod scripted_model;
mod security;
mod sessions;
mod sse;
mod stream;
mod studies;
mod sweeper;
mod widget_values;
