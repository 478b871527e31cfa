//! The idle sweeper: abandons idle sessions, completes ones idle at the summary, leaves the rest.

use chrono::{Duration, Utc};
use reqwest::StatusCode;

use crate::both_stores;
use crate::helpers::{assert_error, Store, TestApp};
use interview_runtime::sweeper::sweep_once;

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

both_stores!(idle_sessions_are_closed_and_active_ones_left_alone);
