//! End-to-end tests: the real server over HTTP, on both stores.

mod bad_input;
mod harness;
mod helpers;
mod operations;
mod sessions;
mod sse;
mod stream;
mod studies;
