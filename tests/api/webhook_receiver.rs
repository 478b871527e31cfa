//! A webhook receiver for the tests: a real HTTP server that keeps every request and can be told
//! to fail (500) the next N deliveries. Signatures are checked by hand from the Standard
//! Webhooks text — HMAC-SHA256 over `id.timestamp.body` under the secret's bytes, base64 —
//! not with the crate the server signs with, so a shared mistake cannot pass.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;

/// One request the receiver got, and what it answered.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) id: String,
    pub(crate) timestamp: String,
    pub(crate) signature: String,
    pub(crate) raw: Vec<u8>,
    pub(crate) body: Value,
    pub(crate) status: u16,
}

pub(crate) struct Receiver {
    pub(crate) url: String,
    seen: Arc<Mutex<Vec<Received>>>,
    handle: actix_web::dev::ServerHandle,
}

fn header(req: &HttpRequest, name: &str) -> String {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

impl Receiver {
    /// A receiver on 127.0.0.1 that answers 500 to its first `fail_first` requests.
    pub(crate) async fn start(fail_first: usize) -> Self {
        Self::holding_first(fail_first, Duration::ZERO).await
    }

    /// The same, and it answers its first request only `hold` after taking it in (the sender
    /// may be gone by then).
    pub(crate) async fn holding_first(fail_first: usize, hold: Duration) -> Self {
        let seen: Arc<Mutex<Vec<Received>>> = Arc::default();
        let failures_left = Arc::new(AtomicUsize::new(fail_first));
        let requests = Arc::new(AtomicUsize::new(0));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (kept, failing) = (seen.clone(), failures_left.clone());
        let server = HttpServer::new(move || {
            let (kept, failing, requests) = (kept.clone(), failing.clone(), requests.clone());
            App::new().route(
                "/hook",
                web::post().to(move |req: HttpRequest, body: web::Bytes| {
                    let (kept, failing) = (kept.clone(), failing.clone());
                    let first = requests.fetch_add(1, Ordering::SeqCst) == 0;
                    async move {
                        let fail = failing
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                            .is_ok();
                        let status = if fail { 500 } else { 204 };
                        kept.lock().unwrap().push(Received {
                            id: header(&req, "webhook-id"),
                            timestamp: header(&req, "webhook-timestamp"),
                            signature: header(&req, "webhook-signature"),
                            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                            raw: body.to_vec(),
                            status,
                        });
                        // Taken in, but answered late: the sender may not hear the answer.
                        if first {
                            tokio::time::sleep(hold).await;
                        }
                        if fail {
                            HttpResponse::InternalServerError().body("not now")
                        } else {
                            HttpResponse::NoContent().finish()
                        }
                    }
                }),
            )
        })
        .workers(1)
        .listen(listener)
        .unwrap()
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Self {
            url: format!("http://127.0.0.1:{port}/hook"),
            seen,
            handle,
        }
    }

    /// Every request so far, in the order they came.
    pub(crate) fn all(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests answered with a 2xx.
    pub(crate) fn accepted(&self) -> Vec<Received> {
        self.all().into_iter().filter(|r| r.status < 300).collect()
    }

    /// Waits until `pred` holds of the accepted requests (or panics after `wait`).
    pub(crate) async fn until(
        &self,
        wait: Duration,
        pred: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = Instant::now() + wait;
        loop {
            let accepted = self.accepted();
            if pred(&accepted) {
                return accepted;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver did not get what was expected: {:#?}",
                self.all().iter().map(|r| &r.body).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `n` requests were accepted.
    pub(crate) async fn until_accepted(&self, n: usize, wait: Duration) -> Vec<Received> {
        self.until(wait, |a| a.len() >= n).await
    }

    pub(crate) async fn stop(self) {
        self.handle.stop(false).await;
    }
}

/// Whether `r` carries a valid Standard Webhooks signature under `secret`, made within five
/// minutes.
pub(crate) fn signed_by(secret: &str, r: &Received) -> bool {
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64
        .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
        .unwrap();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{}.{}.", r.id, r.timestamp).as_bytes());
    mac.update(&r.raw);
    let expected = format!("v1,{}", b64.encode(mac.finalize().into_bytes()));
    let fresh = r
        .timestamp
        .parse::<i64>()
        .is_ok_and(|ts| (chrono::Utc::now().timestamp() - ts).abs() < 300);
    fresh && r.signature.split(' ').any(|s| s == expected)
}
