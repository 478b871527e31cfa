//! What is live: the per-session fan-out of committed events and interviewer words to every
//! open stream in this process (`stream_hub`), fed across processes by PostgreSQL NOTIFY — the
//! commits, and the words as they stream (`across`) — and one reader's view of it (`feed`). The
//! routes that stream it are `http::routes::stream` (SSE) and `http::routes::agui` (AG-UI).

pub mod across;
pub mod feed;
pub mod peers;
pub mod pieces;
pub mod stream_hub;
