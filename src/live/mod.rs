//! What is live: the per-session fan-out of committed events and interviewer words to every
//! open stream in this process, fed across processes by PostgreSQL NOTIFY (`stream_hub`). The
//! routes that stream it are `http::routes::stream` (SSE) and `http::routes::agui` (AG-UI).

pub mod feed;
pub mod pieces;
pub mod stream_hub;
