//! The study overview read model (`GET /api/studies/{id}/overview`): a scripted mix of outcomes
//! gives exact counts, and every way of building it again (catch-up after it is lost, one
//! session's rebuild, a rebuild of every session) gives the same overview.

use chrono::{DateTime, Duration, Utc};
use interview_session::commands as cmd;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, json_of, Store, TestApp, RESEARCHER_TOKEN};
use interview_projections::Projector;

/// The demo study with two screening questions and a price for the model.
async fn screened_study(app: &TestApp) -> (String, String) {
    let mut study: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    study["public_slug"] = json!("overview");
    study["screening"] = json!({
        "questions": [
            {"id": "shops", "type": "yes_no", "prompt": "Do you do the grocery shopping?"},
            {"id": "often", "type": "single_choice", "prompt": "How often do you shop?",
             "options": [{"id": "weekly", "label": "Every week"}, {"id": "rarely", "label": "Rarely"}]}
        ],
        "rules": [
            {"question_id": "shops", "disqualify_if": [false]},
            {"question_id": "often", "qualify_if": ["weekly"]}
        ]
    });
    study["model"]["price_per_million_tokens"] = json!({"prompt": 0.15, "completion": 0.6});
    let (id, slug, _) = app.publish_study(&study).await;
    (id, slug)
}

/// Creates a session, answers consent (if given) and the screening answers given.
async fn start(
    app: &TestApp,
    slug: &str,
    consent: Option<bool>,
    screening: &[Value],
) -> (String, String, Value) {
    let (session, token) = app.create_session(slug).await;
    let mut s = app.run(&session).await;
    if let Some(accepted) = consent {
        app.answer(&session, &token, &s, json!({ "accepted": accepted }))
            .await;
        s = app.run(&session).await;
    }
    for answer in screening {
        app.answer(&session, &token, &s, answer.clone()).await;
        s = app.run(&session).await;
    }
    (session, token, s)
}

/// Answers until the interview completes and its post-session extraction is done.
async fn complete(app: &TestApp, session: &str, token: &str, mut s: Value, answer: &str) -> Value {
    for _ in 0..40 {
        if s["status"] == "completed" {
            break;
        }
        if s["status"] == "waiting_for_tool" {
            let value = match s["pending_interaction"]["type"].as_str().unwrap() {
                "likert" => json!(4),
                _ => json!("budget"),
            };
            app.answer(session, token, &s, value).await;
        } else {
            let reply = if s["current_phase"] == "SUMMARY_CONFIRMATION" {
                "yes"
            } else {
                answer
            };
            let res = app.post_message(session, token, reply).await;
            assert_eq!(res.status(), StatusCode::ACCEPTED, "{s}");
        }
        s = app.run(session).await;
    }
    assert_eq!(s["status"], "completed", "{s}");
    for _ in 0..200 {
        let state = state(app, session).await;
        if state["final_extraction_done"] == true {
            return state;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the post-session extraction did not complete");
}

async fn state(app: &TestApp, session: &str) -> Value {
    json_of(
        app.get(
            &format!("/api/sessions/{session}/state"),
            Some(RESEARCHER_TOKEN),
        )
        .await,
    )
    .await
}

async fn overview(app: &TestApp, study: &str) -> Value {
    let res = app
        .get(&paths::overview(study), Some(RESEARCHER_TOKEN))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    json_of(res).await
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

/// numpy's default percentile (linear between closest ranks).
fn percentile(mut values: Vec<f64>, p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = (values.len() - 1) as f64 * p;
    let low = rank.floor() as usize;
    let high = (low + 1).min(values.len() - 1);
    values[low] + (rank - low as f64) * (values[high] - values[low])
}

// Long by design: one study given a scripted mix of sessions (two completed, declined, screened
// out, ended, expired, one at consent, a preview), then its overview checked against them: funnel,
// stops, completions, objectives and fields, a late model error, then the same overview after a
// catch-up and rebuilds.
async fn an_overview_counts_a_scripted_mix_of_outcomes(store: Store) {
    let app = TestApp::spawn(store).await;
    let (study, slug) = screened_study(&app).await;
    let pass = [json!(true), json!("weekly")];

    // Completed, twice, with answers of different lengths.
    let mut completed = Vec::new();
    for answer in [
        "Last Sunday I sat down with my partner, checked the fridge and wrote a long list on my phone before driving to the market.",
        "I plan on the bus, from memory mostly, and I buy what is on offer at the shop near the station.",
    ] {
        let (session, token, s) = start(&app, &slug, Some(true), &pass).await;
        completed.push(complete(&app, &session, &token, s, answer).await);
    }
    // Declined consent; screened out; ended by the participant during screening.
    let (_, _, s) = start(&app, &slug, Some(false), &[]).await;
    assert_eq!(s["end_reason"], "consent_declined", "{s}");
    let (_, _, s) = start(&app, &slug, Some(true), &[json!(true), json!("rarely")]).await;
    assert_eq!(s["end_reason"], "screening_failed", "{s}");
    let (ended, token, _) = start(&app, &slug, Some(true), &[json!(true)]).await;
    let res = app
        .post(&paths::end(&ended), Some(&token), &json!({}))
        .await;
    assert!(res.status().is_success(), "{}", res.status());
    assert_eq!(state(&app, &ended).await["status"], "abandoned");
    // Screened in, then idle until it expired.
    let (idle, _, s) = start(&app, &slug, Some(true), &pass).await;
    let idle_phase = s["current_phase"].as_str().unwrap().to_string();
    app.execute(
        &idle,
        interview_session::SessionCommand::Expire(cmd::Expire {
            at: Utc::now() + Duration::hours(30),
        }),
    )
    .await;
    // Still at the consent; and a researcher's preview, which is not counted.
    start(&app, &slug, None, &[]).await;
    let res = app
        .post(
            &paths::join(&slug),
            Some(RESEARCHER_TOKEN),
            &json!({"preview": true}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);

    let o = overview(&app, &study).await;
    assert_eq!(o["study_id"], study.as_str());
    assert_eq!(
        o["funnel"],
        json!({"created": 7, "consented": 5, "screened_in": 3, "completed": 2}),
        "{o:#}"
    );
    assert_eq!(
        o["stopped"],
        json!({
            "in_progress": 1, "declined": 1, "screened_out": 1,
            "abandoned": {"total": 1, "by_phase": {"CONSENT_OR_SCREENING": 1}},
            "idle_expired": {"total": 1, "by_phase": {idle_phase: 1}},
            "withdrawn": 0,
        }),
        "{o:#}"
    );
    let c = &o["completed"];
    assert_eq!(c["count"], 2);
    assert_eq!(
        c["by_reason"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_i64().unwrap())
            .sum::<i64>(),
        2
    );
    let turns: Vec<f64> = completed
        .iter()
        .map(|s| s["turn_count"].as_f64().unwrap())
        .collect();
    assert_eq!(
        c["turns"]["median"],
        json!(percentile(turns.clone(), 0.5)),
        "{o:#}"
    );
    assert_eq!(c["turns"]["p90"], json!(percentile(turns, 0.9)), "{o:#}");
    let durations: Vec<f64> = completed
        .iter()
        .map(|s| (time(&s["ended_at"]) - time(&s["created_at"])).num_seconds() as f64)
        .collect();
    assert_eq!(
        c["duration_seconds"]["median"],
        json!(percentile(durations, 0.5))
    );

    // Objectives and fields, against what each completed session's own state says.
    let definition: Value =
        serde_json::from_str(include_str!("../../examples/demo-study.json")).unwrap();
    let objectives = o["objectives"].as_array().unwrap();
    let ids: Vec<&str> = objectives
        .iter()
        .map(|x| x["objective_id"].as_str().unwrap())
        .collect();
    let defined: Vec<&str> = definition["objectives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, defined, "in the definition's order");
    for x in objectives {
        let id = x["objective_id"].as_str().unwrap();
        let of = |s: &Value| s["covered_objectives"][id].clone();
        let covered = completed
            .iter()
            .filter(|s| of(s)["status"] == "covered")
            .count();
        let probes: i64 = completed
            .iter()
            .map(|s| of(s)["probes_used"].as_i64().unwrap())
            .sum();
        assert_eq!(x["sessions"], 2, "{x}");
        assert_eq!(x["covered"], covered as i64, "{x}");
        assert_eq!(x["covered_rate"], json!(covered as f64 / 2.0), "{x}");
        assert_eq!(x["probes_used"], probes, "{x}");
        assert!(x["title"].is_string(), "{x}");
    }
    for x in o["fields"].as_array().unwrap() {
        let id = x["field_id"].as_str().unwrap();
        let filled: Vec<f64> = completed
            .iter()
            .filter_map(|s| {
                let f = &s["extracted_fields"][id];
                (!f.is_null() && !f["value"].is_null()).then(|| f["confidence"].as_f64().unwrap())
            })
            .collect();
        assert_eq!(x["sessions"], 2, "{x}");
        assert_eq!(x["filled"], filled.len(), "{x}");
        if !filled.is_empty() {
            let mean = filled.iter().sum::<f64>() / filled.len() as f64;
            assert!(
                (x["mean_confidence"].as_f64().unwrap() - mean).abs() < 1e-6,
                "{x}"
            );
        }
    }
    // The rules interviewer calls no model.
    assert_eq!(o["model"]["sessions"], 0);
    assert_eq!(o["model"]["per_interview"]["spend_usd"], Value::Null);

    // A model call that fails after the interview ended (a run still going when the participant
    // ended it) is counted when it is recorded, as a rebuild would count it.
    let first = completed[0]["session_id"].as_str().unwrap();
    app.execute(
        first,
        interview_session::SessionCommand::RecordError(cmd::RecordError {
            source: "model".into(),
            code: "model_timeout".into(),
            message: "the model did not answer".into(),
            at: Utc::now(),
        }),
    )
    .await;
    let o = overview(&app, &study).await;
    assert_eq!(o["model"]["sessions"], 1, "{o:#}");
    assert_eq!(o["model"]["calls"], 1, "{o:#}");

    // Lost and caught up; one session rebuilt; every session rebuilt: the same overview.
    let projector = Projector::new(app.db().clone());
    interview_projections::on_db!(write(app.db()), |pool| {
        for table in ["study_overview", "session_overview"] {
            sqlx::query(&format!("DELETE FROM {table}"))
                .execute(pool)
                .await
                .unwrap();
        }
    });
    assert_eq!(overview(&app, &study).await["funnel"]["created"], 0);
    projector.catch_up().await.unwrap();
    assert_eq!(overview(&app, &study).await, o, "caught up");
    projector.rebuild(&ended).await.unwrap();
    assert_eq!(overview(&app, &study).await, o, "one session rebuilt");
    let ids = interview_projections::read::session_ids(app.db())
        .await
        .unwrap();
    projector.forget_overviews().await.unwrap();
    projector
        .rebuild_in_batches(&ids, 3, |_, _| {})
        .await
        .unwrap();
    assert_eq!(overview(&app, &study).await, o, "every session rebuilt");
}

async fn the_overview_is_for_researchers_and_known_studies(store: Store) {
    let app = TestApp::spawn(store).await;
    let (study, slug) = screened_study(&app).await;
    let (_, token) = app.create_session(&slug).await;
    let path = paths::overview(&study);
    assert_error(
        app.get(&path, None).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    assert_error(
        app.get(&path, Some(&token)).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert_error(
        app.get(
            "/api/studies/no-such-study/overview",
            Some(RESEARCHER_TOKEN),
        )
        .await,
        StatusCode::NOT_FOUND,
        "study_not_found",
    )
    .await;
    // A study with one session just started: no completed interview yet, so nulls, no error.
    let o = overview(&app, &study).await;
    assert_eq!(o["funnel"]["created"], 1);
    assert_eq!(o["completed"]["turns"]["median"], Value::Null);
}

both_stores!(
    an_overview_counts_a_scripted_mix_of_outcomes,
    the_overview_is_for_researchers_and_known_studies
);
