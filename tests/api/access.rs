//! Researchers as people (issue 34): named identities with their own tokens, roles per study
//! enforced on every researcher route, revocation and expiry, the admin routes and the command
//! line — on both stores.

use std::process::Command;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{assert_error, json_of, paths, Store, TestApp, RESEARCHER_TOKEN};

/// Two published studies: the demo (A) and a copy of it under another slug (B).
async fn two_studies(app: &TestApp) -> (String, String) {
    let a = app.demo_study_id().await;
    let mut definition: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    definition["public_slug"] = json!("demo-b");
    let (b, _, _) = app.publish_study(&definition).await;
    (a, b)
}

/// Adds a researcher through the admin route; their token.
async fn add(app: &TestApp, body: Value) -> String {
    let res = app
        .post("/api/researchers", Some(RESEARCHER_TOKEN), &body)
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let issued = json_of(res).await;
    let token = issued["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("rt_") && token.len() == 67, "{token}");
    token
}

async fn status(app: &TestApp, method: Method, path: &str, token: &str) -> StatusCode {
    let body = (method != Method::GET).then(|| "{}".to_string());
    app.send(method, path, Some(token), body).await.status()
}

/// 403 `forbidden` naming the role the route needs.
async fn refused(app: &TestApp, method: Method, path: &str, token: &str, role: &str) {
    let body = (method != Method::GET).then(|| "{}".to_string());
    let res = app.send(method, path, Some(token), body).await;
    let body = assert_error(res, StatusCode::FORBIDDEN, "forbidden").await;
    assert_eq!(body["error"]["details"]["required_role"], role, "{path}");
}

// Long by design: one scenario of four researchers in order — a viewer, an analyst and an owner
// of study A, then a role given and a researcher revoked — each route's answer checked right
// after the step that decides it.
async fn each_researcher_may_do_what_their_role_allows(store: Store) {
    let app = TestApp::spawn(store).await;
    let (a, b) = two_studies(&app).await;
    let (session_a, _) = app.create_session("demo").await;
    let (session_b, _) = app.create_session("demo-b").await;
    let vera = add(
        &app,
        json!({"name": "Vera", "roles": [{"study_id": a, "role": "viewer"}]}),
    )
    .await;
    let ana = add(
        &app,
        json!({"name": "Ana", "roles": [{"study_id": a, "role": "analyst"}]}),
    )
    .await;
    let olga = add(
        &app,
        json!({"name": "Olga", "roles": [{"study_id": a, "role": "owner"}]}),
    )
    .await;

    // A viewer reads A, its sessions and their content, and nothing of B; no results.
    for path in [
        paths::study(&a),
        paths::overview(&a),
        format!("/api/studies/{a}/sessions"),
        paths::session(&session_a),
        format!("/api/sessions/{session_a}/transcript"),
        paths::events(&session_a),
    ] {
        assert_eq!(
            status(&app, Method::GET, &path, &vera).await,
            StatusCode::OK,
            "{path}"
        );
    }
    for path in [
        paths::study(&b),
        format!("/api/studies/{b}/sessions"),
        format!("/api/sessions/{session_b}/transcript"),
    ] {
        refused(&app, Method::GET, &path, &vera, "viewer").await;
    }
    for path in [
        paths::results(&a),
        format!("/api/studies/{a}/results.csv"),
        format!("/api/studies/{a}/results.jsonl"),
    ] {
        refused(&app, Method::GET, &path, &vera, "analyst").await;
    }
    refused(
        &app,
        Method::POST,
        &format!("/api/studies/{a}/pause"),
        &vera,
        "owner",
    )
    .await;
    refused(&app, Method::POST, "/api/studies", &vera, "admin").await;
    refused(&app, Method::GET, "/api/researchers", &vera, "admin").await;
    let listed = json_of(app.get("/api/studies", Some(&vera)).await).await;
    let ids: Vec<&str> = listed["studies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["study_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a.as_str()], "a researcher lists only their studies");

    // An analyst exports; an owner changes the study and gives roles on it.
    for path in [paths::results(&a), format!("/api/studies/{a}/results.csv")] {
        assert_eq!(
            status(&app, Method::GET, &path, &ana).await,
            StatusCode::OK,
            "{path}"
        );
    }
    refused(
        &app,
        Method::POST,
        &format!("/api/studies/{a}/pause"),
        &ana,
        "owner",
    )
    .await;
    refused(&app, Method::GET, &paths::results(&b), &ana, "analyst").await;
    refused(
        &app,
        Method::DELETE,
        &format!("/api/sessions/{session_a}/participant-data"),
        &ana,
        "owner",
    )
    .await;
    for (method, path) in [
        (Method::POST, format!("/api/studies/{a}/pause")),
        (Method::POST, format!("/api/studies/{a}/resume")),
        (Method::GET, format!("/api/studies/{a}/roles")),
        (Method::GET, paths::erasures(&a)),
    ] {
        assert_eq!(
            status(&app, method, &path, &olga).await,
            StatusCode::OK,
            "{path}"
        );
    }
    refused(
        &app,
        Method::POST,
        &format!("/api/studies/{b}/pause"),
        &olga,
        "owner",
    )
    .await;
    let granted = app
        .send(
            Method::PUT,
            &format!("/api/studies/{a}/roles/Vera"),
            Some(&olga),
            Some(json!({"role": "analyst"}).to_string()),
        )
        .await;
    assert_eq!(granted.status(), StatusCode::OK);
    // The role holds at once.
    assert_eq!(
        status(&app, Method::GET, &paths::results(&a), &vera).await,
        StatusCode::OK
    );
    let roles = json_of(
        app.get(&format!("/api/studies/{a}/roles"), Some(&olga))
            .await,
    )
    .await;
    let held: Vec<(&str, &str)> = roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["role"].as_str().unwrap()))
        .collect();
    assert_eq!(
        held,
        [("Ana", "analyst"), ("Olga", "owner"), ("Vera", "analyst")]
    );

    // A revoked researcher's token is refused at once, here and in another process.
    let other = app.spawn_on_same_database().await;
    assert_eq!(
        status(&other, Method::GET, &paths::study(&a), &ana).await,
        StatusCode::OK
    );
    let revoked = app
        .post(
            "/api/researchers/Ana/revoke",
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await;
    assert_eq!(revoked.status(), StatusCode::OK);
    for server in [&app, &other] {
        let res = server.get(&paths::study(&a), Some(&ana)).await;
        assert_error(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
    }
    // No token is ever listed.
    let list = app
        .get("/api/researchers", Some(RESEARCHER_TOKEN))
        .await
        .text()
        .await
        .unwrap();
    for token in [&vera, &ana, &olga] {
        assert!(!list.contains(token.as_str()));
    }
    assert!(list.contains("\"revoked_at\""));
}

/// A token past its expiry is refused; a further token keeps the researcher working.
async fn an_expired_token_is_refused(store: Store) {
    let app = TestApp::spawn(store).await;
    let (a, _) = two_studies(&app).await;
    // 0.00001 days: under a second.
    let short = add(
        &app,
        json!({"name": "Tim", "roles": [{"study_id": a, "role": "viewer"}], "expires_in_days": 0.00001}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let res = app.get(&paths::study(&a), Some(&short)).await;
    assert_error(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
    let again = app
        .post(
            "/api/researchers/Tim/tokens",
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await;
    assert_eq!(again.status(), StatusCode::CREATED);
    let fresh = json_of(again).await["token"].as_str().unwrap().to_string();
    assert_eq!(
        status(&app, Method::GET, &paths::study(&a), &fresh).await,
        StatusCode::OK
    );
}

/// Bad requests to the admin routes are refused with a clear error and write nothing.
// Long by design: a table of bad requests, one line each, then the count that shows none wrote.
async fn bad_researcher_requests_are_refused_and_write_nothing(store: Store) {
    let app = TestApp::spawn(store).await;
    let (a, _) = two_studies(&app).await;
    add(&app, json!({"name": "Vera"})).await;
    let count = || async {
        json_of(app.get("/api/researchers", Some(RESEARCHER_TOKEN)).await).await["researchers"]
            .as_array()
            .unwrap()
            .len()
    };
    let before = count().await;
    let cases = [
        (
            json!({"name": ""}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_name",
        ),
        (
            json!({"name": "token:abc"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_name",
        ),
        (
            json!({"name": "Vera"}),
            StatusCode::CONFLICT,
            "researcher_exists",
        ),
        (
            json!({"name": "X", "roles": [{"study_id": "nope", "role": "viewer"}]}),
            StatusCode::NOT_FOUND,
            "study_not_found",
        ),
        (
            json!({"name": "X", "roles": [{"study_id": a, "role": "boss"}]}),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            json!({"name": "X", "expires_in_days": -1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
        ),
        (
            json!({"name": "X", "password": "x"}),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
    ];
    for (body, code, error) in cases {
        let res = app
            .post("/api/researchers", Some(RESEARCHER_TOKEN), &body)
            .await;
        assert_error(res, code, error).await;
    }
    let res = app
        .post(
            "/api/researchers/Nobody/revoke",
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await;
    assert_error(res, StatusCode::NOT_FOUND, "researcher_not_found").await;
    let res = app
        .send(
            Method::PUT,
            &format!("/api/studies/{a}/roles/Nobody"),
            Some(RESEARCHER_TOKEN),
            Some(json!({"role": "viewer"}).to_string()),
        )
        .await;
    assert_error(res, StatusCode::NOT_FOUND, "researcher_not_found").await;
    assert_eq!(count().await, before);
}

/// `interview-runtime researchers …` on the server's database: the token it prints works.
async fn the_command_line_adds_grants_and_revokes(store: Store) {
    let app = TestApp::spawn(store).await;
    let (a, b) = two_studies(&app).await;
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_interview-runtime"))
            .args(args)
            .env("DATABASE_URL", app.database_url())
            .env_remove("CONFIG_FILE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let token = cli(&[
        "researchers",
        "add",
        "--name",
        "Cleo",
        "--study",
        &a,
        "--role",
        "viewer",
    ]);
    let token = token.trim().to_string();
    assert!(token.starts_with("rt_"), "{token}");
    assert_eq!(
        status(&app, Method::GET, &paths::study(&a), &token).await,
        StatusCode::OK
    );
    refused(&app, Method::GET, &paths::study(&b), &token, "viewer").await;
    cli(&[
        "researchers",
        "grant",
        "Cleo",
        "--study",
        &b,
        "--role",
        "analyst",
    ]);
    assert_eq!(
        status(&app, Method::GET, &paths::results(&b), &token).await,
        StatusCode::OK
    );
    let listed = cli(&["researchers", "list"]);
    assert!(
        listed.contains("Cleo") && !listed.contains(&token),
        "{listed}"
    );
    cli(&["researchers", "revoke", "Cleo"]);
    let res = app.get(&paths::study(&a), Some(&token)).await;
    assert_error(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
}

/// Rows of the access log as (researcher, method, route, status).
async fn entries(app: &TestApp, path: &str, token: &str) -> Vec<(String, String, String, u16)> {
    let res = app.get(path, Some(token)).await;
    assert_eq!(res.status(), StatusCode::OK);
    json_of(res).await["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["researcher"].as_str().unwrap().to_string(),
                e["method"].as_str().unwrap().to_string(),
                e["route"].as_str().unwrap().to_string(),
                e["status"].as_u64().unwrap() as u16,
            )
        })
        .collect()
}

// Long by design: one researcher's reads and refusals in order, then the study's log and the
// whole log read back, each row looked for right after.
async fn the_access_log_records_reads_and_refusals(store: Store) {
    let app = TestApp::spawn(store).await;
    let (a, b) = two_studies(&app).await;
    let (session, _) = app.create_session("demo").await;
    let vera = add(
        &app,
        json!({"name": "Vera", "roles": [{"study_id": a, "role": "viewer"}]}),
    )
    .await;
    let olga = add(
        &app,
        json!({"name": "Olga", "roles": [{"study_id": a, "role": "owner"}]}),
    )
    .await;
    let transcript = format!("/api/sessions/{session}/transcript");
    assert_eq!(
        status(&app, Method::GET, &transcript, &vera).await,
        StatusCode::OK
    );
    refused(
        &app,
        Method::GET,
        &format!("/api/studies/{a}/results.csv"),
        &vera,
        "analyst",
    )
    .await;
    refused(&app, Method::GET, &paths::study(&b), &vera, "viewer").await;
    app.post(
        "/api/researchers/Vera/revoke",
        Some(RESEARCHER_TOKEN),
        &json!({}),
    )
    .await;
    assert_eq!(
        status(&app, Method::GET, &transcript, &vera).await,
        StatusCode::UNAUTHORIZED
    );
    // A token that names no one leaves no row.
    assert_eq!(
        status(&app, Method::GET, &transcript, "rt_nobody").await,
        StatusCode::UNAUTHORIZED
    );

    // The study's owner reads the study's log: the read, the refusal, the revoked token's try.
    let log = entries(
        &app,
        &format!("/api/studies/{a}/access-log?researcher=Vera"),
        &olga,
    )
    .await;
    let r = |who: &str, route: &str, status: u16| {
        (
            who.to_string(),
            "GET".to_string(),
            route.to_string(),
            status,
        )
    };
    assert_eq!(
        log,
        [
            r("Vera", "/api/sessions/{session_id}/transcript", 200),
            r("Vera", "/api/studies/{study_id}/results.csv", 403),
            r("Vera", "/api/sessions/{session_id}/transcript", 401),
        ]
    );
    // Reads of the log are in it; the refusal on B is in B's log, not A's.
    let again = entries(&app, &format!("/api/studies/{a}/access-log"), &olga).await;
    assert!(again.contains(&r("Olga", "/api/studies/{study_id}/access-log", 200)));
    let whole = entries(&app, "/api/access-log?limit=1000", RESEARCHER_TOKEN).await;
    assert!(whole.contains(&r("Vera", "/api/studies/{study_id}", 403)));
    assert!(!again.contains(&r("Vera", "/api/studies/{study_id}", 403)));
    assert!(whole.iter().all(|(who, ..)| who != "unknown"), "{whole:?}");
    let created = whole.iter().filter(|e| e.2 == "/api/researchers").count();
    assert_eq!(created, 2, "each researcher added is in the log: {whole:?}");
    // Owners only (and admins): a viewer may not read it.
    let ana = add(
        &app,
        json!({"name": "Ana", "roles": [{"study_id": a, "role": "analyst"}]}),
    )
    .await;
    refused(
        &app,
        Method::GET,
        &format!("/api/studies/{a}/access-log"),
        &ana,
        "owner",
    )
    .await;
    // A bad page or filter is a 400 naming the field.
    for query in [
        "limit=0",
        "limit=5000",
        "cursor=abc",
        "from=yesterday",
        "colour=red",
    ] {
        let res = app
            .get(&format!("/api/studies/{a}/access-log?{query}"), Some(&olga))
            .await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{query}");
        let body = json_of(res).await;
        assert!(body["error"]["code"].is_string(), "{query}: {body}");
    }
    // Paged, oldest first.
    let page = json_of(
        app.get(&format!("/api/studies/{a}/access-log?limit=2"), Some(&olga))
            .await,
    )
    .await;
    assert_eq!(page["entries"].as_array().unwrap().len(), 2);
    let cursor = page["next_cursor"].as_i64().unwrap();
    let next = json_of(
        app.get(
            &format!("/api/studies/{a}/access-log?limit=2&cursor={cursor}"),
            Some(&olga),
        )
        .await,
    )
    .await;
    assert!(next["entries"][0]["seq"].as_i64().unwrap() > cursor);
}

/// A researcher's open event stream ends soon after their token is revoked.
async fn a_revoked_researchers_open_stream_ends(store: Store) {
    let app = TestApp::spawn(store).await;
    let (a, _) = two_studies(&app).await;
    let (session, _) = app.create_session("demo").await;
    let vera = add(
        &app,
        json!({"name": "Vera", "roles": [{"study_id": a, "role": "viewer"}]}),
    )
    .await;
    let mut stream = app
        .client
        .get(app.url(&paths::stream(&session)))
        .bearer_auth(&vera)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert!(stream.chunk().await.unwrap().is_some(), "the stream opened");
    app.post(
        "/api/researchers/Vera/revoke",
        Some(RESEARCHER_TOKEN),
        &json!({}),
    )
    .await;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(_)) = stream.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the stream still runs after the revoke");
}

both_stores!(
    a_revoked_researchers_open_stream_ends,
    the_access_log_records_reads_and_refusals,
    each_researcher_may_do_what_their_role_allows,
    an_expired_token_is_refused,
    bad_researcher_requests_are_refused_and_write_nothing,
    the_command_line_adds_grants_and_revokes,
);
