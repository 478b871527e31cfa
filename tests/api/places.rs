//! A study's places and its participants' references (issue 30): a place is taken at consent,
//! so anonymous creates cannot fill a study; a reference is held only by a consented, open
//! session, so a stranger cannot lock its owner out, and no refusal names another session; a
//! study that signs its links takes a reference only with its signature. Racing consents hold
//! the cap in one process and across two on PostgreSQL.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, json_of, Store, TestApp};

fn study(slug: &str, max_sessions: Option<u32>) -> Value {
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!(slug);
    if let Some(max) = max_sessions {
        study["limits"]["max_sessions"] = json!(max);
    }
    study
}

/// A created session: (id, token).
async fn create(app: &TestApp, slug: &str, body: Value) -> reqwest::Response {
    app.post(&paths::join(slug), None, &body).await
}

async fn created(app: &TestApp, slug: &str, body: Value) -> (String, String) {
    let res = create(app, slug, body).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let body = json_of(res).await;
    (
        body["session_id"].as_str().unwrap().to_string(),
        body["participant_token"].as_str().unwrap().to_string(),
    )
}

/// How many sessions the store has.
async fn sessions(app: &TestApp) -> i64 {
    interview_projections::on_db!(read(app.db()), |pool| {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM session_state")
            .fetch_one(pool)
            .await
            .unwrap()
    })
}

/// Accepts the pending consent of a session, through the server at `base`.
async fn consent(app: &TestApp, base: &str, session: &str, token: &str) -> reqwest::Response {
    let id = pending_consent(app, session).await;
    accept(app, base, session, token, &id).await
}

/// The id of the consent widget a session waits on.
async fn pending_consent(app: &TestApp, session: &str) -> String {
    let s = app.run(session).await;
    assert_eq!(s["pending_interaction"]["type"], "consent", "{s}");
    s["pending_interaction"]["interaction_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Accepts consent widget `id` of a session, through the server at `base`.
async fn accept(
    app: &TestApp,
    base: &str,
    session: &str,
    token: &str,
    id: &str,
) -> reqwest::Response {
    app.client
        .post(format!(
            "{base}/api/sessions/{session}/interactions/{id}/submit"
        ))
        .bearer_auth(token)
        .json(&json!({"status": "submitted", "value": {"accepted": true}}))
        .send()
        .await
        .unwrap()
}

async fn unconsented_sessions_hold_no_place(store: Store) {
    let app = TestApp::spawn(store).await;
    app.publish_study(&study("capped", Some(3))).await;
    // Five strangers start and never consent: the study is not full.
    for _ in 0..5 {
        created(&app, "capped", json!({})).await;
    }
    let mut sessions = Vec::new();
    for _ in 0..4 {
        sessions.push(created(&app, "capped", json!({})).await);
    }
    // Four real participants race to consent for three places.
    let racing = futures_util::future::join_all(
        sessions
            .iter()
            .map(|(id, token)| consent(&app, &app.address, id, token)),
    )
    .await;
    let passed: Vec<bool> = racing
        .iter()
        .map(|r| r.status() == StatusCode::OK)
        .collect();
    assert_eq!(passed.iter().filter(|p| **p).count(), 3, "{racing:?}");
    let (refused, _) = sessions.iter().zip(&passed).find(|(_, p)| !**p).unwrap();
    // The one too late is told, kindly, and its session ends with the reason in the log.
    let s = app.run(&refused.0).await;
    assert_eq!(s["status"], "abandoned", "{s}");
    assert_eq!(s["end_reason"], "study_full", "{s}");
    // The study is now full for newcomers too.
    assert_error(
        create(&app, "capped", json!({})).await,
        StatusCode::CONFLICT,
        "study_full",
    )
    .await;
    // A participant who withdraws gives the place back.
    let (id, token) = sessions
        .iter()
        .zip(&passed)
        .find(|(_, p)| **p)
        .map(|(s, _)| s.clone())
        .unwrap();
    let res = app
        .post(&paths::withdraw(&id), Some(&token), &json!({}))
        .await;
    assert!(res.status().is_success(), "{}", res.status());
    let (late, late_token) = created(&app, "capped", json!({})).await;
    let res = consent(&app, &app.address, &late, &late_token).await;
    assert_eq!(res.status(), StatusCode::OK);
}

// Long by design: one participant reference through its life: a stranger takes it first, the owner
// consents anyway and the stranger's consent ends theirs, creates stay open, racing consents for a
// new reference (one wins), the owner's session ended and the reference free again, then a study
// that allows several at once.
async fn a_stranger_with_someone_s_reference_locks_nobody_out(store: Store) {
    let app = TestApp::spawn(store).await;
    let panel = |r: &str| json!({ "participant_ref": r });
    // A stranger starts with the owner's reference (and even two sessions of it).
    let (squatter, squatter_token) = created(&app, "demo", panel("panel-7")).await;
    created(&app, "demo", panel("panel-7")).await;
    // The owner is not locked out, and consents first.
    let (owner, owner_token) = created(&app, "demo", panel("panel-7")).await;
    assert_eq!(
        consent(&app, &app.address, &owner, &owner_token)
            .await
            .status(),
        StatusCode::OK
    );
    // Now the reference is taken: the stranger's consent ends their session, and no refusal
    // names the owner's session.
    let res = consent(&app, &app.address, &squatter, &squatter_token).await;
    let body = assert_error(res, StatusCode::CONFLICT, "active_session_exists").await;
    assert!(!body.to_string().contains(&owner), "{body}");
    let s = app.run(&squatter).await;
    assert_eq!(s["end_reason"], "duplicate_participant", "{s}");
    // An unsigned reference is checked at consent only: a create never tells a stranger
    // whether its owner is taking part.
    assert_eq!(
        create(&app, "demo", panel("panel-7")).await.status(),
        StatusCode::CREATED
    );
    // Racing consents for a new reference: exactly one wins.
    let mut sessions = Vec::new();
    for _ in 0..6 {
        sessions.push(created(&app, "demo", panel("panel-8")).await);
    }
    let racing = futures_util::future::join_all(
        sessions
            .iter()
            .map(|(id, token)| consent(&app, &app.address, id, token)),
    )
    .await;
    let passed = racing
        .iter()
        .filter(|r| r.status() == StatusCode::OK)
        .count();
    assert_eq!(passed, 1, "{racing:?}");
    // Once the owner's session has ended, the reference may start again.
    app.run(&owner).await;
    let ended = app
        .post(&paths::end(&owner), Some(&owner_token), &json!({}))
        .await;
    assert_eq!(ended.status(), StatusCode::OK);
    app.run(&owner).await;
    let ended = app
        .post(&paths::end(&owner), Some(&owner_token), &json!({}))
        .await;
    assert!(ended.status().is_success() || ended.status() == StatusCode::GONE);
    let s = app.run(&owner).await;
    assert!(
        ["completed", "abandoned"].contains(&s["status"].as_str().unwrap()),
        "{s}"
    );
    assert_eq!(
        create(&app, "demo", panel("panel-7")).await.status(),
        StatusCode::CREATED
    );
    // A study may allow several at once.
    let mut parallel = study("parallel", None);
    parallel["one_active_session_per_participant"] = json!(false);
    app.publish_study(&parallel).await;
    for _ in 0..2 {
        let (id, token) = created(&app, "parallel", panel("panel-9")).await;
        assert_eq!(
            consent(&app, &app.address, &id, &token).await.status(),
            StatusCode::OK
        );
    }
}

// Long by design: one study's link secret through its life: set and its example checked, badly
// signed creates refused with nothing written, a signed owner taking part, an uppercase signature
// and an anonymous create accepted, the secret hidden and guarded, turned off, then set again to
// require a reference.
async fn a_study_that_signs_its_links_takes_only_signed_references(store: Store) {
    let app = TestApp::spawn(store).await;
    let (study_id, _, _) = app.publish_study(&study("signed", None)).await;
    let path = format!("/api/studies/{study_id}/participant-link-secret");
    let res = app
        .post(&path, Some(crate::helpers::RESEARCHER_TOKEN), &json!({}))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let body = json_of(res).await;
    let secret = body["secret"].as_str().unwrap().to_string();
    assert_eq!(secret.len(), 64);
    let example = &body["example"];
    assert_eq!(
        example["link"],
        format!(
            "/interview/signed?ref=panel-12345&sig={}",
            example["participant_ref_signature"].as_str().unwrap()
        )
    );
    let sign = |r: &str| {
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(r.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    };
    assert_eq!(example["participant_ref_signature"], sign("panel-12345"));
    let before = app.total_events().await;
    for bad in [
        json!({"participant_ref": "panel-1"}),
        json!({"participant_ref": "panel-1", "participant_ref_signature": sign("panel-2")}),
        json!({"participant_ref": "panel-1", "participant_ref_signature": "zz"}),
        json!({"participant_ref": "panel-1", "participant_ref_signature": ""}),
    ] {
        assert_error(
            create(&app, "signed", bad).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
    }
    assert_eq!(
        app.total_events().await,
        before,
        "a refused create writes nothing"
    );
    let signed =
        json!({"participant_ref": "panel-1", "participant_ref_signature": sign("panel-1")});
    let (owner, owner_token) = created(&app, "signed", signed.clone()).await;
    // Its owner, and only its owner, learns at create that the reference is taking part; the
    // answer names no session.
    assert_eq!(
        consent(&app, &app.address, &owner, &owner_token)
            .await
            .status(),
        StatusCode::OK
    );
    let body = assert_error(
        create(&app, "signed", signed).await,
        StatusCode::CONFLICT,
        "active_session_exists",
    )
    .await;
    assert!(!body.to_string().contains(&owner), "{body}");
    assert!(body["error"]["details"].is_null(), "{body}");
    let upper = json!({"participant_ref": "panel-3", "participant_ref_signature": sign("panel-3").to_uppercase()});
    assert_eq!(
        create(&app, "signed", upper).await.status(),
        StatusCode::CREATED
    );
    // Anonymous participants are still welcome.
    assert_eq!(
        create(&app, "signed", json!({})).await.status(),
        StatusCode::CREATED
    );
    // The secret is not shown again, and only researchers may set it.
    let s = app
        .get(
            &paths::study(&study_id),
            Some(crate::helpers::RESEARCHER_TOKEN),
        )
        .await;
    assert!(!json_of(s).await.to_string().contains(&secret));
    assert_eq!(
        app.post(&path, None, &json!({})).await.status(),
        StatusCode::UNAUTHORIZED
    );
    // Turned off, references are taken unsigned again.
    let res = app
        .client
        .delete(app.url(&path))
        .bearer_auth(crate::helpers::RESEARCHER_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let unsigned = json!({"participant_ref": "panel-4"});
    assert_eq!(
        create(&app, "signed", unsigned).await.status(),
        StatusCode::CREATED
    );
    // A study may take only its panel's signed participants: no anonymous create then.
    let res = app
        .post(
            &path,
            Some(crate::helpers::RESEARCHER_TOKEN),
            &json!({"require_reference": true}),
        )
        .await;
    let body = json_of(res).await;
    assert_eq!(body["require_reference"], true);
    let secret = body["secret"].as_str().unwrap().to_string();
    // (Sessions, not events: the interviewers of the sessions above may still be writing.)
    let before = sessions(&app).await;
    assert_error(
        create(&app, "signed", json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert_eq!(
        sessions(&app).await,
        before,
        "a refused create writes nothing"
    );
    let sig = {
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(b"panel-6");
        hex::encode(mac.finalize().into_bytes())
    };
    let signed = json!({"participant_ref": "panel-6", "participant_ref_signature": sig});
    assert_eq!(
        create(&app, "signed", signed).await.status(),
        StatusCode::CREATED
    );
}

/// Two consents of one session at once (two tabs, a retried request) never end it: the
/// session is not counted against itself.
async fn a_double_consent_does_not_end_its_own_session(store: Store) {
    let app = TestApp::spawn(store).await;
    app.publish_study(&study("one-place", Some(1))).await;
    let (id, token) = created(&app, "one-place", json!({"participant_ref": "panel-5"})).await;
    // The same widget answered twice at once (read once: the first answer may land before a
    // second read would see the widget).
    let widget = pending_consent(&app, &id).await;
    let (a, b) = tokio::join!(
        accept(&app, &app.address, &id, &token, &widget),
        accept(&app, &app.address, &id, &token, &widget)
    );
    assert!(
        a.status() == StatusCode::OK || b.status() == StatusCode::OK,
        "{a:?} {b:?}"
    );
    let s = app.run(&id).await;
    assert_ne!(s["status"], "abandoned", "{s}");
    assert!(s["end_reason"].is_null(), "{s}");
}

both_stores!(
    a_double_consent_does_not_end_its_own_session,
    unconsented_sessions_hold_no_place,
    a_stranger_with_someone_s_reference_locks_nobody_out,
    a_study_that_signs_its_links_takes_only_signed_references,
);

/// The cap and the reference rule hold across processes: this test's server and a second
/// server process (the real binary) on one database race consents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn places_hold_across_processes() {
    let a = TestApp::spawn_with(Store::Postgres, |s| {
        s.create_rate_per_address = 0;
        s.create_rate_per_study = 0;
    })
    .await;
    let url = a.state.settings.database_url.clone().unwrap();
    std::fs::create_dir_all(a.data_dir()).unwrap();
    let b =
        crate::restart::Server::start_on(a.data_dir(), "http://127.0.0.1:9/v1", Some(&url)).await;
    a.publish_study(&study("capped", Some(5))).await;
    let race = |slug: &'static str, body: Value, n: usize| {
        let (a, b) = (&a, &b);
        async move {
            let mut sessions = Vec::new();
            for _ in 0..n {
                sessions.push(created(a, slug, body.clone()).await);
            }
            let consents = sessions.iter().enumerate().map(|(i, (id, token))| {
                let base = if i % 2 == 0 {
                    a.address.clone()
                } else {
                    b.base.clone()
                };
                async move { consent(a, &base, id, token).await.status() }
            });
            futures_util::future::join_all(consents).await
        }
    };
    let count = |statuses: &[StatusCode], status: StatusCode| {
        statuses.iter().filter(|s| **s == status).count()
    };
    let statuses = race("capped", json!({}), 16).await;
    assert_eq!(count(&statuses, StatusCode::OK), 5, "{statuses:?}");
    assert_eq!(count(&statuses, StatusCode::CONFLICT), 11, "{statuses:?}");

    let statuses = race("demo", json!({"participant_ref": "panel-42"}), 10).await;
    assert_eq!(count(&statuses, StatusCode::OK), 1, "{statuses:?}");
    assert_eq!(count(&statuses, StatusCode::CONFLICT), 9, "{statuses:?}");
}
