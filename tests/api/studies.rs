//! Study publishing, versioning, pause/resume and pinning.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, json_of, study_definition, Store, TestApp, RESEARCHER_TOKEN};

const VERSION_KEYS: [&str; 4] = [
    "study_config_version_id",
    "agent_config_version_id",
    "output_schema_version_id",
    "model_config_version_id",
];

async fn publishing_yields_four_version_ids_and_a_slug(store: Store) {
    let app = TestApp::spawn(store).await;
    let (study_id, slug, body) = app.publish_study(&study_definition()).await;
    assert_eq!(body["status"], "published");
    assert_eq!(body["study_id"], study_id.as_str());
    assert!(interview_session::study::is_valid_slug(&slug), "{slug}");
    for key in VERSION_KEYS {
        assert!(
            body["config_versions"][key]
                .as_str()
                .is_some_and(|v| v.len() > 8),
            "{key}: {body}"
        );
    }
}

async fn republishing_keeps_ids_of_unchanged_parts(store: Store) {
    let app = TestApp::spawn(store).await;
    let (study_id, slug, first) = app.publish_study(&study_definition()).await;
    let again = json_of(
        app.post(
            &paths::publish(&study_id),
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await,
    )
    .await;
    assert_eq!(again["config_versions"], first["config_versions"]);
    assert_eq!(again["public_slug"], slug.as_str());

    let mut changed = study_definition();
    changed["model"] = json!({"model": "gpt-4o", "temperature": 0.1});
    let put = app
        .send(
            reqwest::Method::PUT,
            &paths::study(&study_id),
            Some(RESEARCHER_TOKEN),
            Some(changed.to_string()),
        )
        .await;
    assert_eq!(put.status(), StatusCode::OK);
    let third = json_of(
        app.post(
            &paths::publish(&study_id),
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await,
    )
    .await;
    for key in &VERSION_KEYS[..3] {
        assert_eq!(
            third["config_versions"][key], first["config_versions"][key],
            "{key}"
        );
    }
    assert_ne!(
        third["config_versions"]["model_config_version_id"],
        first["config_versions"]["model_config_version_id"]
    );
}

async fn republishing_never_changes_a_running_session(store: Store) {
    let app = TestApp::spawn(store).await;
    let (study_id, slug, first) = app.publish_study(&study_definition()).await;
    let (session, token) = app.create_session(&slug).await;

    let mut changed = study_definition();
    changed["objectives"][0]["opening_question"] = json!("What did you drink this morning?");
    changed["limits"] = json!({"max_turn_count": 5});
    app.send(
        reqwest::Method::PUT,
        &paths::study(&study_id),
        Some(RESEARCHER_TOKEN),
        Some(changed.to_string()),
    )
    .await;
    let second = json_of(
        app.post(
            &paths::publish(&study_id),
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await,
    )
    .await;
    assert_ne!(second["config_versions"], first["config_versions"]);

    let running = json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    assert_eq!(running["config_versions"], first["config_versions"]);
    // The session's own first event holds the documents it pinned, unchanged.
    let events = interview_projections::read::events(app.db(), &session)
        .await
        .unwrap();
    let pinned = &events[0].2["study"];
    assert_eq!(pinned["config_versions"], first["config_versions"]);
    assert_eq!(
        pinned["study_config"]["objectives"][0]["opening_question"],
        "How do you make your coffee?"
    );
    assert_eq!(pinned["study_config"]["limits"]["max_turn_count"], 20);
    // A new session pins the new versions.
    let (newer, newer_token) = app.create_session(&slug).await;
    let fresh = json_of(app.get(&paths::session(&newer), Some(&newer_token)).await).await;
    assert_eq!(fresh["config_versions"], second["config_versions"]);
}

async fn a_paused_study_refuses_new_sessions_until_resumed(store: Store) {
    let app = TestApp::spawn(store).await;
    let (study_id, slug, _) = app.publish_study(&study_definition()).await;
    let paused = app
        .post(
            &format!("/api/studies/{study_id}/pause"),
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await;
    assert_eq!(json_of(paused).await["status"], "paused");
    let before = app.total_events().await;
    let refused = app.post(&paths::join(&slug), None, &json!({})).await;
    assert_error(refused, StatusCode::CONFLICT, "study_paused").await;
    assert_eq!(app.total_events().await, before);
    let resumed = app
        .post(
            &format!("/api/studies/{study_id}/resume"),
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await;
    assert_eq!(json_of(resumed).await["status"], "published");
    app.create_session(&slug).await;
}

async fn a_draft_cannot_be_paused(store: Store) {
    let app = TestApp::spawn(store).await;
    let created = json_of(
        app.post("/api/studies", Some(RESEARCHER_TOKEN), &study_definition())
            .await,
    )
    .await;
    assert_eq!(created["status"], "draft");
    let id = created["study_id"].as_str().unwrap();
    let res = app
        .post(
            &format!("/api/studies/{id}/pause"),
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await;
    assert_error(res, StatusCode::CONFLICT, "study_not_published").await;
}

async fn studies_are_listed_and_read(store: Store) {
    let app = TestApp::spawn(store).await;
    let (study_id, _, _) = app.publish_study(&study_definition()).await;
    let list = json_of(app.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await;
    let ids: Vec<&str> = list["studies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["study_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&study_id.as_str()));
    assert_eq!(ids.len(), 2, "the demo study and ours: {list}");
    let one = json_of(
        app.get(&paths::study(&study_id), Some(RESEARCHER_TOKEN))
            .await,
    )
    .await;
    assert_eq!(one["title"], "Coffee habits");
    assert_eq!(one["definition"]["objectives"][0]["max_probe_count"], 3);
}

async fn a_slug_is_used_by_one_study_only(store: Store) {
    let app = TestApp::spawn(store).await;
    let mut def = study_definition();
    def["public_slug"] = json!("coffee");
    app.publish_study(&def).await;
    let created = json_of(app.post("/api/studies", Some(RESEARCHER_TOKEN), &def).await).await;
    let id = created["study_id"].as_str().unwrap();
    let res = app
        .post(&paths::publish(id), Some(RESEARCHER_TOKEN), &json!({}))
        .await;
    assert_error(res, StatusCode::CONFLICT, "slug_taken").await;
}

async fn the_demo_study_is_published_at_start_up_once(store: Store) {
    let app = TestApp::spawn(store).await;
    let (session, token) = app.create_session("demo").await;
    app.run(&session).await;
    let body: Value = json_of(app.get(&paths::session(&session), Some(&token)).await).await;
    assert_eq!(body["pending_interaction"]["type"], "consent");
    // Publishing again at start-up is skipped when the slug exists.
    assert!(!interview_runtime::demo::ensure_demo_study(app.db())
        .await
        .unwrap());
    let none = TestApp::spawn_with(store, |s| s.demo_study = false).await;
    let res = none
        .post("/api/public/studies/demo/sessions", None, &json!({}))
        .await;
    assert_error(res, StatusCode::NOT_FOUND, "study_not_found").await;
}

async fn the_participant_page_is_served_for_a_published_study(store: Store) {
    let app = TestApp::spawn(store).await;
    let res = app.get("/interview/demo", None).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = res.text().await.unwrap();
    assert!(html.contains(r#""slug":"demo""#), "{html}");
    assert!(html.contains("/interview/assets/app.js"));
    // A link that leads nowhere is a 404, with the page saying so.
    let unknown = app.get("/interview/nope", None).await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert!(unknown.text().await.unwrap().contains("study_not_found"));
    for path in [
        format!("/interview/s/{}", uuid::Uuid::new_v4()),
        "/interview/s/not-an-id".to_string(),
    ] {
        let res = app.get(&path, None).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
        assert!(res.text().await.unwrap().contains("session_not_found"));
    }
    for (file, kind) in [("app.js", "text/javascript"), ("app.css", "text/css")] {
        let res = app.get(&format!("/interview/assets/{file}"), None).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert!(res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with(kind));
    }
    assert_eq!(
        app.get("/interview/assets/secret.txt", None).await.status(),
        StatusCode::NOT_FOUND
    );
    let (session, _) = app.create_session("demo").await;
    let html = app
        .get(&format!("/interview/s/{session}"), None)
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains(&session) && html.contains(r#""slug":"demo""#));
}

both_stores!(
    the_participant_page_is_served_for_a_published_study,
    publishing_yields_four_version_ids_and_a_slug,
    republishing_keeps_ids_of_unchanged_parts,
    republishing_never_changes_a_running_session,
    a_paused_study_refuses_new_sessions_until_resumed,
    a_draft_cannot_be_paused,
    studies_are_listed_and_read,
    a_slug_is_used_by_one_study_only,
    the_demo_study_is_published_at_start_up_once,
);
