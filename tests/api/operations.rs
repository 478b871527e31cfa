//! Health, readiness, the OpenAPI document, and an unreachable database.

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::Value;

use crate::both_stores;
use crate::helpers::{assert_error, json_of, Store, TestApp};

async fn health_and_readiness_answer(store: Store) {
    let app = TestApp::spawn(store).await;
    assert_eq!(app.get("/healthz", None).await.status(), StatusCode::OK);
    let ready = json_of(app.get("/readyz", None).await).await;
    assert_eq!(ready["status"], "ready");
}

/// While the process stops, every request is refused at once with 503 `shutting_down` and
/// `Retry-After` (a client retries elsewhere); the flag is all that does it.
async fn a_stopping_server_refuses_requests_with_retry_after(store: Store) {
    let app = TestApp::spawn(store).await;
    app.state.draining.send_replace(true);
    for res in [
        app.get("/healthz", None).await,
        app.client
            .post(app.url("/api/public/studies/demo/sessions"))
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(res.headers().contains_key("retry-after"));
        let body = json_of(res).await;
        assert_eq!(body["error"]["code"], "shutting_down");
    }
    app.state.draining.send_replace(false);
    assert_eq!(app.get("/healthz", None).await.status(), StatusCode::OK);
}

/// Every route the server answers is in the OpenAPI document, and nothing else is.
// Long by design: the list of every route the server answers, one line each, compared with the
// OpenAPI document's, then each one sent to check it is really served.
async fn the_openapi_document_covers_every_route(store: Store) {
    let app = TestApp::spawn(store).await;
    let doc: Value = json_of(app.get("/api/openapi.json", None).await).await;
    let documented: BTreeSet<String> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .map(move |m| format!("{} {path}", m.to_uppercase()))
        })
        .collect();
    let served: BTreeSet<String> = [
        "GET /healthz",
        "GET /readyz",
        "POST /api/studies",
        "GET /api/studies",
        "GET /api/studies/{study_id}",
        "PUT /api/studies/{study_id}",
        "POST /api/studies/{study_id}/publish",
        "POST /api/studies/{study_id}/pause",
        "POST /api/studies/{study_id}/resume",
        "POST /api/public/studies/{public_slug}/sessions",
        "GET /api/sessions/{session_id}",
        "POST /api/sessions/{session_id}/messages",
        "POST /api/sessions/{session_id}/interactions/{interaction_id}/submit",
        "POST /api/sessions/{session_id}/end",
        "POST /api/sessions/{session_id}/agui",
        "GET /interview/{public_slug}",
        "GET /interview/s/{session_id}",
        "GET /interview/assets/{file}",
        "GET /favicon.ico",
        "GET /metrics",
        "GET /api/sessions/{session_id}/stream",
        "GET /api/studies/{study_id}/sessions",
        "GET /api/studies/{study_id}/overview",
        "GET /api/studies/{study_id}/results",
        "GET /api/studies/{study_id}/results.csv",
        "GET /api/studies/{study_id}/results.jsonl",
        "GET /api/sessions/{session_id}/transcript",
        "GET /api/sessions/{session_id}/state",
        "GET /api/sessions/{session_id}/decisions",
        "GET /api/sessions/{session_id}/tool-calls",
        "GET /api/sessions/{session_id}/interaction-events",
        "GET /api/sessions/{session_id}/events",
        "POST /api/sessions/{session_id}/withdraw",
        "DELETE /api/sessions/{session_id}/participant-data",
        "POST /api/studies/{study_id}/erasures",
        "GET /api/studies/{study_id}/erasures",
        "POST /api/studies/{study_id}/participant-link-secret",
        "DELETE /api/studies/{study_id}/participant-link-secret",
        "POST /api/researchers",
        "GET /api/researchers",
        "POST /api/researchers/{name}/revoke",
        "POST /api/researchers/{name}/tokens",
        "GET /api/studies/{study_id}/roles",
        "PUT /api/studies/{study_id}/roles/{name}",
        "DELETE /api/studies/{study_id}/roles/{name}",
        "GET /api/studies/{study_id}/access-log",
        "GET /api/access-log",
        "POST /api/studies/{study_id}/webhooks",
        "GET /api/studies/{study_id}/webhooks",
        "GET /api/studies/{study_id}/webhooks/{hook_id}",
        "DELETE /api/studies/{study_id}/webhooks/{hook_id}",
        "POST /api/studies/{study_id}/webhooks/{hook_id}/redeliver",
        "GET /api/studies/{study_id}/webhooks/{hook_id}/deliveries",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(documented, served);
    // And each documented route is really served (not a 404 route_not_found).
    for route in &served {
        let (method, path) = route.split_once(' ').unwrap();
        let concrete = path
            .replace("{study_id}", "x")
            .replace("{public_slug}", "x")
            .replace("{session_id}", "x")
            .replace("{interaction_id}", "x")
            .replace("{hook_id}", "x")
            .replace("{name}", "x");
        let res = app
            .send(method.parse().unwrap(), &concrete, None, Some("{}".into()))
            .await;
        let body: Value = res.json().await.unwrap_or_default();
        assert_ne!(body["error"]["code"], "route_not_found", "{route}");
    }
    // Each researcher route names the role it needs in its security requirement.
    let role = |method: &str, path: &str| {
        doc["paths"][path][method]["security"][0]["bearer"][0]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    for (method, path, needed) in [
        ("get", "/api/studies/{study_id}/sessions", "viewer"),
        ("get", "/api/sessions/{session_id}/transcript", "viewer"),
        ("post", "/api/studies/{study_id}/webhooks", "owner"),
        (
            "get",
            "/api/studies/{study_id}/webhooks/{hook_id}/deliveries",
            "owner",
        ),
        ("get", "/api/studies/{study_id}/results.csv", "analyst"),
        ("post", "/api/studies/{study_id}/publish", "owner"),
        (
            "delete",
            "/api/sessions/{session_id}/participant-data",
            "owner",
        ),
        ("get", "/api/studies/{study_id}/access-log", "owner"),
        ("post", "/api/studies", "admin"),
        ("post", "/api/researchers", "admin"),
    ] {
        assert_eq!(role(method, path), needed, "{method} {path}");
    }
}

async fn an_unreachable_database_answers_503_with_retry_after(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    app.db().close().await;
    let res = app.post_message(&session, &token, "hello").await;
    assert_eq!(
        res.headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string()),
        Some("2".into())
    );
    assert_error(res, StatusCode::SERVICE_UNAVAILABLE, "service_unavailable").await;
    assert_error(
        app.get("/readyz", None).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "service_unavailable",
    )
    .await;
}

/// A build started on a database a newer build has migrated (whose format it may not read:
/// shared rows, migration 0022) refuses to start, saying so, before it reads or writes anything.
async fn a_database_a_newer_build_migrated_is_refused_at_start(store: Store) {
    use interview_projections::db::{Db, DbError, PoolSettings};
    let app = TestApp::spawn(store).await;
    let insert = |checksum: &str| {
        format!(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (9999, 'from a newer build', TRUE, {checksum}, 0)"
        )
    };
    app.exec(&insert("X'00'"), &insert("'\\x00'::bytea")).await;
    let url = match store {
        Store::Postgres => app.state.settings.database_url.clone().unwrap(),
        Store::Sqlite => format!("sqlite://{}", app.data_dir().join("interview.db").display()),
    };
    let Err(error) = Db::connect(&url, &PoolSettings::default()).await else {
        panic!("a build started on a newer database's migrations is refused");
    };
    assert!(matches!(error, DbError::NewerDatabase(9999)), "{error:?}");
    assert!(error.to_string().contains("newer build"), "{error}");
}

both_stores!(
    a_stopping_server_refuses_requests_with_retry_after,
    health_and_readiness_answer,
    the_openapi_document_covers_every_route,
    an_unreachable_database_answers_503_with_retry_after,
    a_database_a_newer_build_migrated_is_refused_at_start,
);

#[tokio::test]
async fn postgres_refuses_to_start_without_researcher_tokens() {
    let url = crate::helpers::fresh_postgres_database().await;
    let dir =
        std::env::temp_dir().join(format!("interview-test-{}", uuid::Uuid::new_v4().simple()));
    let settings = interview_runtime::Settings {
        bind: "127.0.0.1:0".into(),
        database_url: Some(url),
        data_dir: dir.clone(),
        ..Default::default()
    };
    let err = interview_runtime::Application::build(settings)
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            interview_runtime::startup::StartupError::MissingResearcherTokens
        ),
        "{err}"
    );
    assert!(!dir.join("researcher-token").exists());
}

#[tokio::test]
async fn the_embedded_store_generates_a_private_researcher_token_file() {
    let app = TestApp::spawn_with(Store::Sqlite, |s| s.researcher_tokens.clear()).await;
    let path = app.data_dir().join("researcher-token");
    let token = std::fs::read_to_string(&path).unwrap().trim().to_string();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        app.get("/api/studies", Some(&token)).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        app.get("/api/studies", Some(crate::helpers::RESEARCHER_TOKEN))
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
}
