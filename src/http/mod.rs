//! HTTP: the front door every connection and request passes (`door`, `limits`), what a request
//! carries (`auth`, `body`, `query`), the one error body every path answers with (`error`), the
//! routes (`routes/`), the results exports they stream (`export`) and the OpenAPI document
//! (`openapi`).

pub mod access_log;
pub mod auth;
pub mod body;
pub mod door;
pub mod error;
pub mod export;
pub mod guards;
pub mod limits;
pub mod openapi;
pub mod query;
pub mod routes;
