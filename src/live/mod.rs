//! What is live: the per-session fan-out of committed events and interviewer words to every
//! open stream in this process, fed across processes by PostgreSQL NOTIFY (`stream_hub`), and
//! the interview over AG-UI (`agui/`). The SSE route is `http::routes::stream`.

pub mod agui;
pub mod pieces;
pub mod stream_hub;
