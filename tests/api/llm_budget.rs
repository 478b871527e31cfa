//! What the model may spend: calls per turn, tokens per session (the study's
//! `model.max_tokens_per_session`, else `MODEL_TOKENS_PER_SESSION`), tokens per day per process
//! (`MODEL_TOKENS_PER_DAY`), per study (`MODEL_TOKENS_PER_STUDY_PER_DAY`) and per hour per client
//! address (`MODEL_TOKENS_PER_ADDRESS_PER_HOUR`) — every one on by default. Past a limit the
//! rules interviewer decides and its rationale names the limit. On both stores.

use serde_json::json;

use crate::helpers::{last_assistant, Store};
use crate::llm::{last_decision, Llm};
use crate::scripted_model::Reply;

fn probe(message: &str) -> Reply {
    Reply::Realistic(
        "probe",
        json!({"objective_id": "planning_habits", "trigger": "vague", "message": message, "rationale": "vague"}),
    )
}

fn ask() -> Reply {
    Reply::Realistic(
        "ask_question",
        json!({"objective_id": "planning_habits", "message": "How do you plan your shopping?", "rationale": "open"}),
    )
}

/// A model that only ever extracts: three calls for the participant's turn, then the rules
/// interviewer asks, and the session waits for the participant again.
async fn a_model_that_never_lets_go_is_stopped_within_the_turn(store: Store) {
    let llm = Llm::start(store).await;
    let (session, token, _) = llm.consented(vec![ask()]).await;
    llm.model.always(Reply::Tool(
        "extract_fields",
        json!({"fields": [{"field_id": "planning_method", "value": "a list", "confidence": 0.8,
                "evidence_turn_ids": [], "quote": "a list"}], "rationale": "extract again"}),
    ));
    let before = llm.model.calls();
    let s = llm
        .say(&session, &token, "I keep a list on the fridge.", vec![])
        .await;
    assert_eq!(
        llm.model.calls() - before,
        3,
        "three model calls, then the rules"
    );
    assert_eq!(s["status"], "waiting_for_user");
    let d = last_decision(&s);
    assert_eq!(d["model"], "rules");
    assert!(
        d["rationale"]
            .as_str()
            .unwrap()
            .starts_with("The model was called 3 times since the participant's last input"),
        "{d}"
    );
}

/// Two calls fit the study's per-session budget (`edit_study`), the third does not: the rules
/// interviewer decides, its rationale opening with `spent`.
async fn two_calls_then_the_rules(
    store: Store,
    edit_study: impl FnOnce(&mut serde_json::Value),
    spent: &str,
) {
    let llm = Llm::start_custom(store, |_| {}, edit_study).await;
    let (session, token, _) = llm.consented(vec![ask()]).await;
    let s = llm
        .say(
            &session,
            &token,
            "Not sure.",
            vec![probe("What do you mean by not sure?")],
        )
        .await;
    assert_eq!(last_assistant(&s), "What do you mean by not sure?");
    let before = llm.model.calls();
    let s = llm
        .say(&session, &token, "I just buy things.", vec![])
        .await;
    assert_eq!(llm.model.calls(), before, "no call past the budget");
    let d = last_decision(&s);
    assert_eq!(d["model"], "rules");
    assert!(d["rationale"].as_str().unwrap().starts_with(spent), "{d}");
    assert_eq!(s["status"], "waiting_for_user");
}

/// The study's per-session budget: once spent, every decision is the rules interviewer's. Each
/// call reports 150 tokens: the second call is still within 200, the third is not.
async fn the_study_s_token_budget_holds_for_the_session(store: Store) {
    let budget = |study: &mut serde_json::Value| {
        study["model"]["max_tokens_per_session"] = json!(200);
    };
    two_calls_then_the_rules(
        store,
        budget,
        "The session's model budget (200 tokens) is spent",
    )
    .await;
}

/// A study that gives a price may budget a session in money: each call here costs $0.0021
/// (120 prompt tokens at $10 and 30 completion tokens at $30 per million), so $0.004 allows two.
async fn the_study_s_money_budget_holds_for_the_session(store: Store) {
    let budget = |study: &mut serde_json::Value| {
        study["model"]["price_per_million_tokens"] = json!({"prompt": 10.0, "completion": 30.0});
        study["model"]["max_usd_per_session"] = json!(0.004);
    };
    two_calls_then_the_rules(
        store,
        budget,
        "The session's model budget ($0.004) is spent",
    )
    .await;
}

/// The operator's daily cap, over every session of the process.
async fn the_server_s_daily_cap_holds_across_sessions(store: Store) {
    let llm = Llm::start_custom(store, |s| s.model_tokens_per_day = 150, |_| {}).await;
    let (_, _, s) = llm.consented(vec![ask()]).await;
    assert_eq!(
        last_decision(&s)["model"],
        crate::scripted_model::ANSWERING_MODEL
    );
    let before = llm.model.calls();
    let (_, _, s) = llm.consented(vec![]).await;
    assert_eq!(llm.model.calls(), before);
    let d = last_decision(&s);
    assert!(
        d["rationale"]
            .as_str()
            .unwrap()
            .starts_with("The server's daily model cap (150 tokens) is spent"),
        "{d}"
    );
    assert_eq!(s["status"], "waiting_for_user");
}

/// Without a budget of its own, a study's sessions get the operator's default one.
async fn a_session_without_a_study_budget_gets_the_default(store: Store) {
    let llm = Llm::start_custom(store, |s| s.model_tokens_per_session = 200, |_| {}).await;
    let (session, token, _) = llm.consented(vec![ask()]).await;
    llm.say(
        &session,
        &token,
        "Not sure.",
        vec![probe("What do you mean by not sure?")],
    )
    .await;
    let before = llm.model.calls();
    let s = llm
        .say(&session, &token, "I just buy things.", vec![])
        .await;
    assert_eq!(llm.model.calls(), before, "no call past the default budget");
    assert!(
        last_decision(&s)["rationale"]
            .as_str()
            .unwrap()
            .starts_with("The session's model budget (200 tokens) is spent"),
        "{s}"
    );
}

/// One client address spends its hourly share, not everyone's: its next session gets the rules
/// interviewer, and says why.
async fn one_address_spends_its_share_not_everyone_s(store: Store) {
    let llm = Llm::start_custom(store, |s| s.model_tokens_per_address_per_hour = 150, |_| {}).await;
    let (_, _, s) = llm.consented(vec![ask()]).await;
    assert_eq!(
        last_decision(&s)["model"],
        crate::scripted_model::ANSWERING_MODEL
    );
    let before = llm.model.calls();
    let (_, _, s) = llm.consented(vec![]).await;
    assert_eq!(llm.model.calls(), before, "the address's hour is spent");
    let d = last_decision(&s);
    assert!(
        d["rationale"]
            .as_str()
            .unwrap()
            .starts_with("The hourly model cap for one network address (150 tokens) is spent"),
        "{d}"
    );
    assert_eq!(s["status"], "waiting_for_user");
}

/// A study's daily share on this server.
async fn a_study_spends_its_daily_share(store: Store) {
    let llm = Llm::start_custom(store, |s| s.model_tokens_per_study_per_day = 150, |_| {}).await;
    llm.consented(vec![ask()]).await;
    let before = llm.model.calls();
    let (_, _, s) = llm.consented(vec![]).await;
    assert_eq!(llm.model.calls(), before);
    assert!(
        last_decision(&s)["rationale"]
            .as_str()
            .unwrap()
            .starts_with("The study's daily model cap on this server (150 tokens) is spent"),
        "{s}"
    );
}

/// Every limit is on unless the operator says otherwise.
#[test]
fn spend_is_bounded_by_default() {
    let d = interview_runtime::Settings::default();
    assert!(d.model_tokens_per_day > 0);
    assert!(d.model_tokens_per_study_per_day > 0);
    assert!(d.model_tokens_per_session > 0);
    assert!(d.model_tokens_per_address_per_hour > 0);
    assert!(d.inputs_per_session_per_minute > 0);
}

/// Each limit reached is counted by name in `/metrics`.
async fn a_reached_limit_is_counted(store: Store) {
    let llm = Llm::start_custom(store, |s| s.model_tokens_per_day = 150, |_| {}).await;
    let (session, token, _) = llm.consented(vec![ask()]).await;
    llm.say(&session, &token, "Not sure.", vec![]).await;
    let text = llm
        .app
        .get("/metrics", Some(crate::helpers::RESEARCHER_TOKEN))
        .await
        .text()
        .await
        .unwrap();
    let counted = text
        .lines()
        .find(|l| l.starts_with("interview_model_budget_reached_total{limit=\"server_day\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok());
    assert!(counted.is_some_and(|n| n >= 1.0), "{text}");
}

crate::both_stores!(
    a_session_without_a_study_budget_gets_the_default,
    one_address_spends_its_share_not_everyone_s,
    a_study_spends_its_daily_share,
    a_model_that_never_lets_go_is_stopped_within_the_turn,
    the_study_s_token_budget_holds_for_the_session,
    the_study_s_money_budget_holds_for_the_session,
    a_reached_limit_is_counted,
    the_server_s_daily_cap_holds_across_sessions,
);
