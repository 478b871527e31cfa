//! The idle sweeper: abandons idle sessions, completes ones idle at the summary, leaves the rest.

use chrono::{Duration, Utc};
use reqwest::StatusCode;

use crate::both_stores;
use crate::helpers::{assert_error, Store, TestApp};
use interview_runtime::jobs::sweeper::sweep_once;

async fn idle_sessions_are_closed_and_active_ones_left_alone(store: Store) {
    let app = TestApp::spawn(store).await;
    let (idle, token) = app.create_session("demo").await;
    app.run(&idle).await;
    // Bring the second one to the summary confirmation.
    let (at_summary, summary_token) = app.interviewing("demo").await;
    app.post_message(&at_summary, &summary_token, "stop").await;
    app.run(&at_summary).await;
    assert_eq!(
        app.researcher_view(&at_summary).await["current_phase"],
        "SUMMARY_CONFIRMATION"
    );

    // Nothing is idle yet.
    assert_eq!(sweep_once(&app.state, Utc::now()).await.unwrap(), 0);
    // A day later both are; two sweepers at once close each exactly once.
    let later = Utc::now() + Duration::hours(25);
    let (a, b) = tokio::join!(sweep_once(&app.state, later), sweep_once(&app.state, later));
    assert_eq!(a.unwrap() + b.unwrap(), 2);

    let s = app.researcher_view(&idle).await;
    assert_eq!(s["status"], "abandoned");
    assert_eq!(s["end_reason"], "timeout");
    assert_error(
        app.post_message(&idle, &token, "back!").await,
        StatusCode::GONE,
        "session_terminal",
    )
    .await;

    let s = app.researcher_view(&at_summary).await;
    assert_eq!(s["status"], "completed");
    assert_eq!(s["summary_confirmed"], false);
    assert_eq!(s["end_reason"], "timeout");
}

async fn final_extraction_events(app: &TestApp, session: &str) -> Vec<serde_json::Value> {
    interview_projections::read::events(app.db(), session)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.1 == "extraction.completed" && e.2["final"] == true)
        .map(|e| e.2)
        .collect()
}

/// A session completed while no extraction worker ran (as if the process died between the
/// completion commit and the work: background work is off in this one): the next process to
/// start finds the pending work and finishes it, once.
async fn the_post_session_extraction_survives_a_restart(store: Store) {
    let first = TestApp::spawn_with(store, |s| s.sweep_interval_secs = 0).await;
    let (session, token) = first.interviewing("demo").await;
    first
        .post_message(
            &session,
            &token,
            "We plan on Sundays with a shared list on our phones",
        )
        .await;
    first.run(&session).await;
    first.post_message(&session, &token, "stop").await;
    first.run(&session).await;
    first.post_message(&session, &token, "yes").await;
    let s = first.run(&session).await;
    assert_eq!(s["status"], "completed");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(final_extraction_events(&first, &session).await.is_empty());

    // "Restart": another server on the same database.
    let (dir, url) = (
        first.data_dir().to_path_buf(),
        first.state.settings.database_url.clone(),
    );
    let second = TestApp::spawn_with(store, move |s| {
        s.data_dir = dir;
        s.database_url = url;
        s.demo_study = false;
    })
    .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while final_extraction_events(&second, &session).await.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the extraction was not finished"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let done = final_extraction_events(&second, &session).await;
    assert_eq!(done.len(), 1);
    let fields = done[0]["fields"].as_array().unwrap();
    let method = fields
        .iter()
        .find(|f| f["field_id"] == "planning_method")
        .unwrap();
    assert!(!method["evidence_turn_ids"].as_array().unwrap().is_empty());
    let results = second
        .get(
            &format!("/api/studies/{}/results", s["study_id"].as_str().unwrap()),
            Some(crate::helpers::RESEARCHER_TOKEN),
        )
        .await;
    let results = crate::helpers::json_of(results).await;
    assert!(results.to_string().contains(&session), "{results}");
}

both_stores!(
    idle_sessions_are_closed_and_active_ones_left_alone,
    the_post_session_extraction_survives_a_restart
);
