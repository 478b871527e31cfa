//! The front door: what every connection and request passes before a route sees it.
//!
//! - **Connections per client address** are capped ([`ConnectionCap`]): a connection over the
//!   cap is shut at once, before a byte is read. Loopback peers (a reverse proxy on this host)
//!   are exempt by default, since behind a proxy every client shares its address.
//! - **Bodies are read here, against a deadline** (`BODY_READ_TIMEOUT_SECS` → 408) and the
//!   size limit (`MAX_BODY_BYTES` → 413), and handed to the route from memory. A client that
//!   announces a body and never sends it holds a connection, nothing else.
//! - **A request counts against `MAX_INFLIGHT_REQUESTS` only once its body is in**, so stalled
//!   uploads cannot crowd out real work; the probes `/healthz` and `/readyz` never count.
//! - **JSON routes insist on `Content-Type: application/json`** (415): every `POST`/`PUT` under
//!   `/api/` with a body, and one authenticated by the participant cookie alone even without a
//!   body — a page on another site can send a form or a "simple" fetch, never a JSON type.
//! - **`HEAD` is answered as `GET`** (the HTTP codec already knows to leave the body out).

use std::any::Any;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Extensions, ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};

use crate::http::error::ApiError;
use crate::http::limits::{BodyBudget, HeldBytes};
use crate::settings::Exempt;
use crate::state::AppState;

/// Open connections per client address, against a cap.
pub struct ConnectionCap {
    max: usize,
    exempt: Exempt,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One admitted connection; kept in the connection's data, so it drops when the connection
/// closes and frees its place.
pub struct Ticket {
    cap: Arc<ConnectionCap>,
    addr: IpAddr,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.cap.open.lock().expect("connection counts");
        if let Some(n) = open.get_mut(&self.addr) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.addr);
            }
        }
    }
}

impl ConnectionCap {
    /// `max` 0 means no cap.
    pub fn new(max: usize, exempt: Exempt) -> Arc<Self> {
        Arc::new(Self {
            max,
            exempt,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A ticket for one more connection from `addr`, or `None` when it has its fill.
    pub fn admit(self: &Arc<Self>, addr: IpAddr) -> Option<Option<Ticket>> {
        let addr = client_key(addr);
        if self.max == 0 || self.exempt.covers(&addr) {
            return Some(None);
        }
        let mut open = self.open.lock().expect("connection counts");
        let n = open.entry(addr).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(Some(Ticket {
            cap: self.clone(),
            addr,
        }))
    }

    /// Connections open from `addr` that count against the cap.
    pub fn open_from(&self, addr: &IpAddr) -> usize {
        self.open
            .lock()
            .expect("connection counts")
            .get(&client_key(*addr))
            .copied()
            .unwrap_or(0)
    }
}

/// The address a client is counted under: an IPv4 address (also when it arrives mapped into
/// IPv6 on a dual-stack listener), or an IPv6 address's /64 — one host usually has a whole /64,
/// so counting single IPv6 addresses would give it billions of caps.
pub fn client_key(addr: IpAddr) -> IpAddr {
    match addr.to_canonical() {
        IpAddr::V6(v6) if !v6.is_loopback() => {
            let mut segments = v6.segments();
            segments[4..].fill(0);
            IpAddr::V6(segments.into())
        }
        other => other,
    }
}

/// Above this many connections from one address, a response closes its connection instead of
/// keeping it alive. HTTP/1.1's header deadline (actix-web's `client_request_timeout`) covers
/// only a connection's first request: a client that sends one quick request and then one byte
/// of the next would hold a kept-alive connection for ever. Under pressure from one address,
/// every request is a connection's first.
pub const KEEP_ALIVE_UP_TO: usize = 16;

/// Seconds an idle kept-alive connection stays open: above the 60 s idle timeout of common load
/// balancers and reverse proxies, so they close first (docs/security.md, "Keep-alive").
pub const KEEP_ALIVE_IDLE_SECS: u64 = 75;

/// `HttpServer::on_connect`: TCP_NODELAY, and the per-address cap.
pub fn on_connect(cap: &Arc<ConnectionCap>, conn: &dyn Any, data: &mut Extensions) {
    let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() else {
        return;
    };
    // Event streams write many small frames; without TCP_NODELAY a frame can wait on the
    // peer's delayed ACK (tens to hundreds of milliseconds) before it leaves.
    let _ = tcp.set_nodelay(true);
    let Ok(peer) = tcp.peer_addr() else {
        return;
    };
    match cap.admit(peer.ip()) {
        Some(Some(ticket)) => {
            data.insert(ticket);
        }
        Some(None) => {}
        None => {
            // Shutting the socket makes the server's first read see the end of the stream, so
            // the connection closes before any request on it is parsed.
            tracing::debug!(peer = %peer.ip(), "connection refused: too many from this address");
            let _ = socket2::SockRef::from(tcp).shutdown(std::net::Shutdown::Both);
        }
    }
}

fn is_json(content_type: Option<&header::HeaderValue>) -> bool {
    content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

fn has_body(req: &ServiceRequest) -> bool {
    let headers = req.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

/// 415 for a JSON route called with another content type (see the module doc).
fn check_content_type(req: &ServiceRequest, body: bool) -> Result<(), ApiError> {
    let json_route =
        matches!(*req.method(), Method::POST | Method::PUT) && req.path().starts_with("/api/");
    if !json_route {
        return Ok(());
    }
    let content_type = req.headers().get(header::CONTENT_TYPE);
    let needed = body || content_type.is_some() || crate::http::auth::cookie_only(req.request());
    if needed && !is_json(content_type) {
        return Err(ApiError::UnsupportedMediaType);
    }
    Ok(())
}

/// The most a route reads, known from its path before anything else is read: the door never
/// buffers more than the route would accept.
fn body_limit(path: &str, settings: &crate::settings::Settings) -> usize {
    let limit = if path.starts_with("/api/studies") {
        settings.max_study_bytes
    } else if path.ends_with("/messages") {
        settings.message_body_bytes()
    } else if path.starts_with("/api/public/") {
        16 * 1024
    } else {
        settings.max_body_bytes
    };
    limit.min(settings.max_body_bytes)
}

/// Reads the whole body within `deadline`, refusing more than `limit` bytes, holding what it
/// reads against the process's body budget.
async fn read_body(
    req: &mut ServiceRequest,
    limit: usize,
    deadline: Duration,
    budget: &BodyBudget,
    held: &mut HeldBytes,
) -> Result<web::Bytes, ApiError> {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::PayloadTooLarge {
            what: "request body",
            limit,
        });
    }
    let payload = req.take_payload();
    let read = async {
        let body = crate::http::body::collect(payload, limit, |bytes| {
            if budget.take(held, bytes) {
                Ok(())
            } else {
                Err(ApiError::Overloaded {
                    what: "request bodies being read",
                })
            }
        })
        .await?;
        Ok(body.freeze())
    };
    tokio::time::timeout(deadline, read)
        .await
        .unwrap_or(Err(ApiError::BodyTimeout {
            secs: deadline.as_secs(),
        }))
}

/// A refusal at the door. The connection is closed after it when part of a body may still be
/// on the wire (the next request could not be told apart from it).
fn refuse(req: ServiceRequest, error: ApiError, close: bool) -> ServiceResponse<BoxBody> {
    let mut res = req.error_response(error);
    if close {
        res.response_mut()
            .head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
    }
    res
}

/// U+0000 anywhere in the address (`%00`): PostgreSQL cannot compare such text, and no
/// resource has such a name.
fn nul_in_uri(req: &ServiceRequest) -> bool {
    let uri = req.uri().path_and_query().map_or("", |pq| pq.as_str());
    uri.as_bytes().windows(3).any(|w| w == b"%00")
}

/// Middleware: see the module doc.
// Long by design: the steps every request passes, in an order that is the behaviour: HEAD as GET,
// refused while draining, a NUL in the address, the content type, the body read against its
// deadline and size, and only then a place among the requests in flight (so a stalled upload holds
// none); then the route, and its response closed under pressure or emptied for HEAD; the body bytes
// held and the place are guards kept across the route's call.
pub async fn door(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let (Some(state), Some(guards)) = (
        req.app_data::<web::Data<AppState>>().cloned(),
        req.app_data::<web::Data<super::guards::Guards>>().cloned(),
    ) else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let head = req.method() == Method::HEAD;
    if head {
        req.head_mut().method = Method::GET;
    }
    let body = has_body(&req);
    if *state.draining.borrow() {
        return Ok(refuse(req, ApiError::ShuttingDown, body));
    }
    if nul_in_uri(&req) {
        let error = ApiError::BadRequest {
            code: "invalid_text",
            message: "the address may not contain the NUL character (%00)".into(),
            details: None,
        };
        return Ok(refuse(req, error, body));
    }
    if let Err(error) = check_content_type(&req, body) {
        return Ok(refuse(req, error, body));
    }
    let mut held = guards.body_budget.hold();
    if body {
        let deadline = Duration::from_secs(state.settings.body_read_timeout_secs.max(1));
        let limit = body_limit(req.path(), &state.settings);
        match read_body(&mut req, limit, deadline, &guards.body_budget, &mut held).await {
            Ok(bytes) => req.set_payload(bytes.into()),
            Err(error) => return Ok(refuse(req, error, true)),
        }
    }
    let probe = matches!(req.path(), "/healthz" | "/readyz");
    let _slot = if probe {
        None
    } else {
        match guards.inflight.try_open() {
            Some(slot) => Some(slot),
            None => {
                let error = ApiError::Overloaded {
                    what: "requests in flight",
                };
                return Ok(refuse(req, error, false));
            }
        }
    };
    let pressed = req
        .conn_data::<Ticket>()
        .is_some_and(|t| t.cap.open_from(&t.addr) > KEEP_ALIVE_UP_TO);
    let mut res = next.call(req).await?.map_into_boxed_body();
    drop(held);
    if pressed {
        res.response_mut()
            .head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
    }
    if head
        && matches!(
            res.response().body().size(),
            actix_web::body::BodySize::Stream
        )
    {
        // A stream (SSE) asked for with HEAD: the headers are the answer; dropping the body
        // ends the stream and frees its place at once.
        res = res.map_body(|_, _| BoxBody::new(()));
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_admits_up_to_its_fill_per_address_and_frees_on_drop() {
        let cap = ConnectionCap::new(2, Exempt::Addresses(vec![]));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = cap.admit(a).unwrap();
        let _second = cap.admit(a).unwrap();
        assert!(
            cap.admit(a).is_none(),
            "a third from one address is refused"
        );
        assert!(cap.admit(b).is_some(), "another address has its own count");
        drop(first);
        assert_eq!(cap.open_from(&a), 1);
        assert!(cap.admit(a).is_some());
    }

    #[test]
    fn exempt_addresses_are_not_counted() {
        let cap = ConnectionCap::new(1, Exempt::Loopback);
        let local: IpAddr = "127.0.0.2".parse().unwrap();
        let tickets: Vec<_> = (0..5).map(|_| cap.admit(local).unwrap()).collect();
        assert!(tickets.iter().all(Option::is_none));
        assert_eq!(cap.open_from(&local), 0);
    }
}
