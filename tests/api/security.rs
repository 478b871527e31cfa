//! Hostile traffic at the front door, through the real server: connections that send headers
//! and never their body, too many connections from one address, a command the database refuses
//! inside a full batch, error bodies from places other than our routes, HEAD.

use interview_session::commands as cmd;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, json_of, Store, TestApp, RESEARCHER_TOKEN};

/// Opens `n` connections that each send a request's headers announcing a body, then nothing.
async fn idle_body_connections(port: u16, n: usize, path: &str) -> Vec<TcpStream> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n"
    );
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        conn.write_all(head.as_bytes()).await.unwrap();
        open.push(conn);
    }
    open
}

async fn timed(
    what: &str,
    request: impl std::future::Future<Output = reqwest::Response>,
) -> (reqwest::Response, Duration) {
    let started = Instant::now();
    let res = request.await;
    let took = started.elapsed();
    eprintln!(
        "{what}: {} in {:.1} ms",
        res.status(),
        took.as_secs_f64() * 1e3
    );
    (res, took)
}

/// 5,000 connections that announce a body and never send it (more than MAX_INFLIGHT_REQUESTS)
/// lock nobody out: the probe, a new session and a message on an open session are answered at
/// once, and the stalled requests are answered 408 when their time is up.
async fn idle_bodies_lock_nobody_out(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.body_read_timeout_secs = 8).await;
    let (session, token) = app.interviewing("demo").await;
    let port: u16 = app.address.rsplit(':').next().unwrap().parse().unwrap();
    let mut idle = idle_body_connections(port, 5_000, "/api/public/studies/demo/sessions").await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The measured figures are printed; the bound is loose, for a noisy shared machine (the
    // issue's figure, 100 ms, is what these answer in here, idle).
    let bound = Duration::from_millis(1_000);
    let (res, took) = timed("healthz", app.get("/healthz", None)).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(took < bound);
    let (res, took) = timed(
        "create",
        app.post("/api/public/studies/demo/sessions", None, &json!({})),
    )
    .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert!(took < bound);
    let (res, took) = timed(
        "message",
        app.post_message(&session, &token, "We plan on Sundays"),
    )
    .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    assert!(took < bound);

    // A stalled request is refused once its time is up, and its connection closed.
    let conn = &mut idle[0];
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(20), conn.read(&mut answer))
        .await
        .expect("the stalled request is answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
}

/// Connections from one address beyond MAX_CONNECTIONS_PER_ADDRESS are closed before a request
/// is read; closing one makes room again.
async fn connections_per_address_are_capped(store: Store) {
    let app = TestApp::spawn_with(store, |s| {
        s.max_connections_per_address = 10;
        s.connection_cap_exempt = interview_runtime::settings::Exempt::Addresses(vec![]);
    })
    .await;
    let port: u16 = app.address.rsplit(':').next().unwrap().parse().unwrap();
    let mut held = Vec::new();
    for _ in 0..10 {
        // One request answered on each, so all ten are surely counted before the next comes.
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 512];
        let n = conn.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        held.push(conn);
    }
    let over = async {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let _ = conn
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await;
        let mut buf = [0u8; 256];
        tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf))
            .await
            .expect("the server answers or closes at once")
            .unwrap_or(0)
    };
    assert_eq!(over.await, 0, "the 11th connection is closed unanswered");
    held.pop();
    // The freed place is noticed when the server sees the close; give it a moment.
    let mut answered = false;
    for _ in 0..50 {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let _ = conn
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await;
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut buf)).await;
        if buf.starts_with(b"HTTP/1.1 200") {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answered, "a place freed is given to the next connection");
}

/// A command the database refuses (U+0000 reaches PostgreSQL only behind the door's back)
/// fails alone: every other command committed in the same batches succeeds.
async fn a_poisoned_command_fails_alone_in_a_full_batch(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut sessions = Vec::new();
    for _ in 0..48 {
        sessions.push(app.interviewing("demo").await.0);
    }
    for round in 0..3 {
        let poisoned = [round, 17 + round, 40 + round];
        let commands = sessions.iter().enumerate().map(|(i, session)| {
            let store = app.state.store.clone();
            let content = if poisoned.contains(&i) {
                format!("round {round}: bad \u{0} text")
            } else {
                format!("round {round}: a fine answer")
            };
            let session = session.clone();
            tokio::spawn(async move {
                let command = interview_session::SessionCommand::PostMessage(cmd::PostMessage {
                    turn_id: uuid::Uuid::new_v4(),
                    client_message_id: None,
                    content,
                    at: chrono::Utc::now(),
                });
                store
                    .execute(
                        &session,
                        command,
                        interview_runtime::command::store::Actor::System,
                        "test",
                    )
                    .await
            })
        });
        let outcomes = futures_util::future::join_all(commands).await;
        for (i, outcome) in outcomes.into_iter().enumerate() {
            let outcome = outcome.unwrap();
            if poisoned.contains(&i) && store == Store::Postgres {
                assert!(
                    outcome.is_err(),
                    "round {round}: the poisoned command was written"
                );
            } else {
                assert!(
                    outcome.is_ok(),
                    "round {round}, session {i}: {:?}",
                    outcome.err()
                );
            }
        }
        // Let the interviewer answer, so every session waits for the participant again.
        for session in &sessions {
            app.run(session).await;
        }
    }
}

/// Errors answered by actix-web's machinery or the CORS layer have our envelope too; HEAD works
/// where GET does.
async fn every_error_has_the_envelope_and_head_works(store: Store) {
    let app = TestApp::spawn_with(store, |s| {
        s.cors_allowed_origins = vec!["https://survey.example".into()];
    })
    .await;
    let refused = app
        .client
        .request(
            reqwest::Method::OPTIONS,
            app.url("/api/public/studies/demo/sessions"),
        )
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    let body = assert_error(refused, StatusCode::BAD_REQUEST, "cors_refused").await;
    assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));

    let wrong_method = app.client.delete(app.url("/healthz")).send().await.unwrap();
    assert!(wrong_method.status().is_client_error());
    let body: Value = wrong_method.json().await.expect("a JSON body");
    assert!(body["error"]["code"].is_string(), "{body}");

    for path in [
        "/healthz",
        "/readyz",
        "/interview/demo",
        "/api/openapi.json",
    ] {
        let head = app.client.head(app.url(path)).send().await.unwrap();
        assert_eq!(head.status(), StatusCode::OK, "HEAD {path}");
        assert!(
            head.bytes().await.unwrap().is_empty(),
            "HEAD {path} has no body"
        );
    }
    let head = app
        .client
        .head(app.url("/api/studies"))
        .bearer_auth(RESEARCHER_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    let page = app.get("/interview/demo", None).await;
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert!(page.headers().contains_key("referrer-policy"));
}

/// A researcher token counts only in the Authorization header; a participant token still works
/// as `?token=` and as the cookie.
async fn token_carriers_are_scoped(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    let path = paths::session(&session);
    let by_query = |t: &str| app.client.get(app.url(&format!("{path}?token={t}"))).send();
    let by_cookie = |t: &str| {
        app.client
            .get(app.url(&path))
            .header("cookie", format!("participant_token={t}"))
            .send()
    };
    assert_eq!(by_query(&token).await.unwrap().status(), StatusCode::OK);
    assert_eq!(by_cookie(&token).await.unwrap().status(), StatusCode::OK);
    assert_error(
        by_query(RESEARCHER_TOKEN).await.unwrap(),
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    assert_error(
        by_cookie(RESEARCHER_TOKEN).await.unwrap(),
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    let researcher = json_of(app.get(&path, Some(RESEARCHER_TOKEN)).await).await;
    assert!(researcher.get("decision_log").is_some(), "{researcher}");
}

/// A token file others can read stops the start with a fix to apply; a new one is mode 600.
async fn the_token_file_must_be_private(store: Store) {
    if store == Store::Postgres {
        return; // the generated token is the embedded store's
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("token-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let settings = |dir: &std::path::Path| interview_runtime::Settings {
        bind: "127.0.0.1:0".into(),
        data_dir: dir.to_path_buf(),
        ..interview_runtime::Settings::default()
    };
    let file = dir.join("researcher-token");
    std::fs::write(&file, "rt_shared\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let Err(error) = interview_runtime::Application::build(settings(&dir)).await else {
        panic!("started with a world-readable token file");
    };
    let said = error.to_string();
    assert!(
        said.contains("chmod 600") && !said.contains("rt_shared"),
        "{said}"
    );

    std::fs::remove_file(&file).unwrap();
    let app = interview_runtime::Application::build(settings(&dir))
        .await
        .unwrap();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    drop(app);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under pressure from one address (more than KEEP_ALIVE_UP_TO connections), every answer
/// closes its connection: the next request is a new connection's first, whose headers have a
/// deadline. Below it, connections are kept alive.
async fn keep_alive_is_withdrawn_under_pressure_from_one_address(store: Store) {
    let app = TestApp::spawn_with(store, |s| {
        s.connection_cap_exempt = interview_runtime::settings::Exempt::Addresses(vec![]);
    })
    .await;
    let port: u16 = app.address.rsplit(':').next().unwrap().parse().unwrap();
    async fn ask(conn: &mut TcpStream) -> String {
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = conn.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase()
    }
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let answer = ask(&mut conn).await;
        assert!(!answer.contains("connection: close"), "{answer}");
        held.push(conn);
    }
    for _ in 0..interview_runtime::http::door::KEEP_ALIVE_UP_TO {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        ask(&mut conn).await;
        held.push(conn);
    }
    let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let answer = ask(&mut conn).await;
    assert!(answer.contains("connection: close"), "{answer}");
}

/// One session's token cannot take every stream; HEAD on a stream answers its headers and
/// frees the place at once.
async fn streams_are_capped_per_session_and_head_holds_none(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.max_streams_per_session = 2).await;
    let (session, token) = app.create_session("demo").await;
    let url = app.url(&paths::stream(&session));
    let head = app
        .client
        .head(&url)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    let open = || app.client.get(&url).bearer_auth(&token).send();
    let (a, b) = (open().await.unwrap(), open().await.unwrap());
    assert_eq!((a.status(), b.status()), (StatusCode::OK, StatusCode::OK));
    let third = open().await.unwrap();
    let body = assert_error(third, StatusCode::SERVICE_UNAVAILABLE, "overloaded").await;
    assert_eq!(
        body["error"]["details"]["limit"],
        "open event streams of this session"
    );
    // Another session's streams are its own.
    let (other, other_token) = app.create_session("demo").await;
    let res = app
        .client
        .get(app.url(&paths::stream(&other)))
        .bearer_auth(&other_token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(app.guards.streams.open(), 3, "the HEAD holds no stream");
}

/// Bodies being read at once share a budget: beyond it, 503 at once.
async fn bodies_being_read_share_a_budget(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.max_pending_body_bytes = 1_000).await;
    let (session, token) = app.interviewing("demo").await;
    let res = app.post_message(&session, &token, &"x".repeat(2_000)).await;
    let body = assert_error(res, StatusCode::SERVICE_UNAVAILABLE, "overloaded").await;
    assert_eq!(
        body["error"]["details"]["limit"],
        "request bodies being read"
    );
    let res = app.post_message(&session, &token, "a short answer").await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
}

both_stores!(
    keep_alive_is_withdrawn_under_pressure_from_one_address,
    streams_are_capped_per_session_and_head_holds_none,
    bodies_being_read_share_a_budget,
    idle_bodies_lock_nobody_out,
    connections_per_address_are_capped,
    a_poisoned_command_fails_alone_in_a_full_batch,
    every_error_has_the_envelope_and_head_works,
    token_carriers_are_scoped,
    the_token_file_must_be_private,
);
