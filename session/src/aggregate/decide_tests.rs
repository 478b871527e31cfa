//! One given/when/then test per guard on interviewer decisions.

use crate::commands as cmd;
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use uuid::Uuid;

use super::tests::{at, create, history, message, when};
use crate::commands::SessionCommand as C;
use crate::decision::{
    AgentAction as A, ConcludeReason as R, ExtractedField, FieldStatus, ProbeTrigger, Proposal,
    Provenance, TokenUsage,
};
use crate::error::SessionError;
use crate::events::{EventBody, Phase, SessionEvent, SessionStatus as S, SubmitStatus};

fn later(secs: i64) -> DateTime<Utc> {
    at() + Duration::seconds(secs)
}

fn proposal(action: A, message: Option<&str>) -> Proposal {
    Proposal {
        action,
        rationale: "the test says so".into(),
        message: message.map(String::from),
        interaction: None,
        fields: Vec::new(),
        summary: None,
        input_summary: "test".into(),
        provenance: Provenance {
            model: "rules".into(),
            prompt_version_id: "rules-v1".into(),
            latency_ms: 3,
            token_usage: TokenUsage::default(),
        },
        input_class: None,
        refused: None,
    }
}

fn claim(n: u128) -> C {
    C::StartAgentMessage(cmd::StartAgentMessage {
        message_id: Uuid::from_u128(n),
        run_id: Uuid::from_u128(n + 1000),
        process_id: None,
        takes_over: None,
        at: at(),
    })
}

fn decide_with(n: u128, p: Proposal) -> C {
    C::Decide(cmd::Decide {
        message_id: Uuid::from_u128(n),
        interaction_id: Some(format!("int-{n}")),
        proposal: Box::new(p),
        at: at(),
    })
}

fn decide(n: u128, action: A, message: Option<&str>) -> C {
    decide_with(n, proposal(action, message))
}

/// Claim + decision, as the harness sends them.
fn step(n: u128, action: A, message: Option<&str>) -> Vec<C> {
    vec![claim(n), decide(n, action, message)]
}

fn answer_consent(n: u128, accepted: bool) -> C {
    C::SubmitInteraction(cmd::SubmitInteraction {
        interaction_id: format!("int-{n}"),
        turn_id: Uuid::from_u128(n + 500),
        status: SubmitStatus::Submitted,
        value: Some(json!({ "accepted": accepted })),
        client_context: None,
        at: at(),
    })
}

fn ask(objective: &str) -> A {
    A::AskQuestion {
        objective_id: objective.into(),
    }
}

fn probe(objective: &str) -> A {
    A::Probe {
        objective_id: objective.into(),
        based_on_turn_id: None,
        trigger: ProbeTrigger::Vague,
    }
}

/// Created, started, consent shown and accepted.
/// Consent, the must objective asked and answered, then the summary (questioning may stop: every
/// must objective has been asked).
fn summarized() -> Vec<C> {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(30, "I use a moka pot every morning before work"));
    given.extend(step(3, A::SummarizeAndConfirm, None));
    given
}

fn consented() -> Vec<C> {
    let mut c = vec![create(), C::Start(cmd::Start { at: at() })];
    c.extend(step(1, A::RenderInteraction { objective_id: None }, None));
    c.push(answer_consent(1, true));
    c
}

fn decision(events: &[SessionEvent]) -> (A, Option<A>) {
    events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::DecisionRecorded {
                selected_action,
                proposed_action,
                ..
            } => Some((selected_action.clone(), proposed_action.clone())),
            _ => None,
        })
        .expect("a decision was recorded")
}

fn said(events: &[SessionEvent]) -> Option<String> {
    events.iter().find_map(|e| match &e.body {
        EventBody::AgentMessageCompleted { content, .. } => Some(content.clone()),
        _ => None,
    })
}

fn status_after(events: &[SessionEvent]) -> Option<S> {
    events.iter().rev().find_map(|e| match e.body {
        EventBody::StatusChanged { to, .. } => Some(to),
        _ => None,
    })
}

async fn expect_error(given: Vec<C>, command: C, expected: SessionError) {
    assert_eq!(when(given, command).await.unwrap_err(), expected);
}

#[tokio::test]
async fn every_decision_needs_a_rationale() {
    let mut given = consented();
    given.push(claim(2));
    let mut p = proposal(ask("o1"), None);
    p.rationale = " ".into();
    expect_error(
        given,
        decide_with(2, p),
        SessionError::InvalidValue {
            field: "rationale".into(),
            message: "every decision needs a rationale".into(),
        },
    )
    .await;
}

#[tokio::test]
async fn a_decision_needs_the_claim_it_was_made_under() {
    expect_error(
        consented(),
        decide(9, ask("o1"), None),
        SessionError::InvalidState { status: S::Active },
    )
    .await;
}

/// An unclaimed decision on the state `given` leaves.
async fn unclaimed_after(given: &[C], n: u128, p: Proposal) -> C {
    let head = super::tests::history(given.to_vec())
        .await
        .last()
        .map(|e| e.hash.clone())
        .expect("a history");
    unclaimed_on(head, n, p)
}

fn unclaimed_on(after_hash: String, n: u128, p: Proposal) -> C {
    C::DecideUnclaimed(cmd::DecideUnclaimed {
        after_hash,
        message_id: Uuid::from_u128(n),
        run_id: Uuid::from_u128(1000 + n),
        process_id: Some(Uuid::from_u128(99)),
        interaction_id: Some(format!("int-{n}")),
        proposal: Box::new(p),
        at: at(),
    })
}

fn extraction(confidence: f64) -> Proposal {
    let mut p = proposal(A::ExtractFields, None);
    p.fields = vec![ExtractedField {
        field_id: "f1".into(),
        value: json!("moka pot"),
        confidence,
        evidence_turn_ids: vec![Uuid::from_u128(10)],
        quote: Some("I use a moka pot".into()),
        status: FieldStatus::Answered,
    }];
    p
}

#[tokio::test]
async fn a_decision_records_the_input_class_and_the_proposal_it_replaces() {
    // Given an answer; when the decision carries the input's class and a refused proposal;
    // then both are on the recorded decision, as the researcher's log and replay read them.
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "Nothing more."));
    given.push(claim(3));
    let mut p = proposal(ask("o2"), Some("And the next one?"));
    p.input_class = Some(crate::input_class::InputClass::NonAnswer);
    p.refused = Some(Box::new(crate::decision::RefusedProposal {
        proposed_action: A::Conclude {
            reason: R::SafetyTriggered,
        },
        rationale: "unsure".into(),
        model: "gpt-test".into(),
        prompt_version_id: "llm-1".into(),
        reason: "SafetyTriggered does not hold for this session".into(),
    }));
    let events = when(given, decide_with(3, p)).await.unwrap();
    let recorded = events.iter().find_map(|e| match &e.body {
        EventBody::DecisionRecorded {
            input_class,
            refused_proposal,
            ..
        } => Some((*input_class, refused_proposal.clone())),
        _ => None,
    });
    let (class, refused) = recorded.expect("a decision");
    assert_eq!(class, Some(crate::input_class::InputClass::NonAnswer));
    assert_eq!(refused.unwrap().rationale, "unsure");
}

#[tokio::test]
async fn a_declined_field_covers_nothing() {
    // Given a required field the participant declined (recorded `refused`, confidence 1); then
    // it is not known: the objective is not covered by it and no required field is met.
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "I'd rather not say."));
    let mut p = extraction(1.0);
    p.fields[0].value = json!(null);
    p.fields[0].status = FieldStatus::Refused;
    given.extend(vec![claim(3), decide_with(3, p)]);
    let mut session = crate::Session::default();
    for e in history(given).await {
        cqrs_es::Aggregate::apply(&mut session, e);
    }
    assert_eq!(
        session.fields()["f1"].status,
        FieldStatus::Refused,
        "recorded as declined"
    );
    assert!(!session.objective_covered("o1"));
    assert!(!session.required_fields_met());
}

#[tokio::test]
async fn a_decision_that_shows_no_words_needs_no_claim() {
    // Given an answer to extract and no claim open; when the extraction is decided unclaimed;
    // then it is recorded as proposed, and no claim is written before it.
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "I use a moka pot every morning"));
    let decided = unclaimed_after(&given, 3, extraction(0.9)).await;
    let events = when(given.clone(), decided).await.unwrap();
    assert_eq!(decision(&events), (A::ExtractFields, None));
    assert!(events
        .iter()
        .all(|e| !matches!(e.body, EventBody::AgentMessageStarted { .. })));
    assert!(events
        .iter()
        .any(|e| matches!(e.body, EventBody::ExtractionCompleted { .. })));

    // An open claim holds the turn for its run.
    let mut claimed = given.clone();
    claimed.push(claim(5));
    let decided = unclaimed_after(&claimed, 6, extraction(0.9)).await;
    let refused = SessionError::InvalidState { status: S::Active };
    expect_error(claimed, decided, refused.clone()).await;
    // Decided on a state that has moved since (anything committed after it) it is refused.
    let seen = unclaimed_after(&given, 7, extraction(0.9)).await;
    let mut moved = given;
    moved.push(C::RecordError(cmd::RecordError {
        source: "model".into(),
        code: "timeout".into(),
        message: "the model did not answer".into(),
        at: at(),
    }));
    expect_error(moved, seen, refused).await;
}

#[tokio::test]
async fn an_unclaimed_decision_is_taken_as_proposed_or_not_at_all() {
    // Given consent given, where an objective must open with its question; when its widget is
    // decided unclaimed, which the guards would turn into that question; then it is refused
    // (a rewritten decision is not the one its run weighed).
    let refused = SessionError::InvalidState { status: S::Active };
    let widget = A::RenderInteraction {
        objective_id: Some("o1".into()),
    };
    let decided = unclaimed_after(&consented(), 2, proposal(widget, None)).await;
    expect_error(consented(), decided, refused.clone()).await;
    // Before consent every step becomes the consent widget, which shows no words: decided as
    // that widget it is taken unclaimed; as anything else it is refused, not rewritten.
    let started = vec![create(), C::Start(cmd::Start { at: at() })];
    let consent = A::RenderInteraction { objective_id: None };
    let decided = unclaimed_after(&started, 1, proposal(consent.clone(), None)).await;
    let events = when(started.clone(), decided).await.unwrap();
    assert_eq!(decision(&events), (consent, None));
    let decided = unclaimed_after(&started, 1, proposal(A::ExtractFields, None)).await;
    expect_error(started, decided, refused).await;
}

#[tokio::test]
async fn an_unclaimed_decision_with_words_writes_its_claim_in_the_same_commit() {
    // Given consent given; when the first question is decided unclaimed; then its claim comes
    // first, naming the run and its process, and the utterance it holds the turn for follows.
    let question = proposal(ask("o1"), Some("How do you make coffee?"));
    let decided = unclaimed_after(&consented(), 2, question.clone()).await;
    let events = when(consented(), decided).await.unwrap();
    let message = Uuid::from_u128(2);
    assert!(matches!(
        events[0].body,
        EventBody::AgentMessageStarted { message_id, run_id, process_id: Some(p), takes_over: None }
            if message_id == message && run_id == Uuid::from_u128(1002) && p == Uuid::from_u128(99)
    ));
    assert_eq!(decision(&events), (ask("o1"), None));
    assert!(events.iter().any(|e| matches!(
        &e.body,
        EventBody::AgentMessageCompleted { message_id, content }
            if *message_id == message && content == "How do you make coffee?"
    )));
    assert!(matches!(
        events.last().map(|e| &e.body),
        Some(EventBody::StatusChanged {
            to: S::WaitingForUser,
            ..
        })
    ));
    // An open claim holds the turn for its run: no second claim beside it.
    let mut claimed = consented();
    claimed.push(claim(5));
    let decided = unclaimed_after(&claimed, 6, question).await;
    expect_error(
        claimed,
        decided,
        SessionError::InvalidState { status: S::Active },
    )
    .await;
}

#[tokio::test]
async fn a_stale_claim_can_be_taken_over_but_a_fresh_one_cannot() {
    let mut given = consented();
    given.push(claim(2));
    let fresh = C::StartAgentMessage(cmd::StartAgentMessage {
        message_id: Uuid::from_u128(3),
        run_id: Uuid::from_u128(4),
        process_id: None,
        takes_over: None,
        at: later(10),
    });
    expect_error(
        given.clone(),
        fresh,
        SessionError::InvalidState { status: S::Active },
    )
    .await;
    let stale = C::StartAgentMessage(cmd::StartAgentMessage {
        message_id: Uuid::from_u128(3),
        run_id: Uuid::from_u128(4),
        process_id: None,
        takes_over: None,
        at: later(121),
    });
    assert_eq!(when(given, stale).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_fresh_claim_is_taken_over_only_by_naming_its_dead_run() {
    let mut given = consented();
    given.push(claim(2)); // run 1002 holds message 2
    let takeover = |dead: u128| {
        C::StartAgentMessage(cmd::StartAgentMessage {
            message_id: Uuid::from_u128(7),
            run_id: Uuid::from_u128(8),
            process_id: Some(Uuid::from_u128(99)),
            takes_over: Some(Uuid::from_u128(dead)),
            at: later(1),
        })
    };
    expect_error(
        given.clone(),
        takeover(42),
        SessionError::InvalidState { status: S::Active },
    )
    .await;
    let events = when(given, takeover(1002)).await.unwrap();
    assert!(matches!(
        events[0].body,
        EventBody::AgentMessageStarted {
            takes_over: Some(dead),
            process_id: Some(_),
            ..
        } if dead == Uuid::from_u128(1002)
    ));
}

#[tokio::test]
async fn consent_comes_before_any_question() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() }), claim(1)];
    given.truncate(3);
    let events = when(given, decide(1, ask("o1"), Some("How do you make coffee?")))
        .await
        .unwrap();
    let (selected, proposed) = decision(&events);
    assert_eq!(selected, A::RenderInteraction { objective_id: None });
    assert_eq!(proposed, Some(ask("o1")));
    let rendered = events.iter().find_map(|e| match &e.body {
        EventBody::InteractionRendered { interaction } => Some(interaction.clone()),
        _ => None,
    });
    let rendered = rendered.expect("the consent panel");
    assert_eq!(rendered.type_name(), "consent");
    assert_eq!(rendered.value_schema["required"], json!(["accepted"]));
    assert_eq!(status_after(&events), Some(S::WaitingForTool));
}

#[tokio::test]
async fn a_declined_consent_abandons_the_session_with_a_kind_word() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    given.extend(step(1, A::RenderInteraction { objective_id: None }, None));
    given.push(answer_consent(1, false));
    given.push(claim(2));
    let events = when(given, decide(2, ask("o1"), None)).await.unwrap();
    let (selected, _) = decision(&events);
    assert_eq!(
        selected,
        A::Conclude {
            reason: R::ConsentDeclined
        }
    );
    assert!(said(&events).unwrap().contains("thank you"));
    assert!(events.iter().any(|e| matches!(
        e.body,
        EventBody::SessionAbandoned {
            reason: R::ConsentDeclined
        }
    )));
    assert_eq!(status_after(&events), Some(S::Abandoned));
}

#[tokio::test]
async fn an_objective_opens_with_its_question() {
    for opening in [
        probe("o1"),
        A::RenderInteraction {
            objective_id: Some("o1".into()),
        },
    ] {
        let mut given = consented();
        given.push(claim(2));
        let events = when(given, decide(2, opening.clone(), Some("Tell me more?")))
            .await
            .unwrap();
        let (selected, proposed) = decision(&events);
        assert_eq!(selected, ask("o1"));
        assert_eq!(proposed, Some(opening));
        assert_eq!(said(&events).as_deref(), Some("How do you make coffee?"));
        assert_eq!(status_after(&events), Some(S::WaitingForUser));
        assert!(events.iter().any(|e| matches!(
            e.body,
            EventBody::PhaseChanged {
                to: Phase::Opening,
                ..
            }
        )));
    }
}

#[tokio::test]
async fn probes_stop_at_the_objectives_cap() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "I use a moka pot every morning"));
    given.extend(step(3, probe("o1"), Some("What do you like about it?")));
    given.push(message(11, "It is quick and the coffee is strong"));
    given.push(claim(4));
    // max_probe_count is 1: the second probe becomes the objective's widget…
    let events = when(
        given.clone(),
        decide(4, probe("o1"), Some("Anything else?")),
    )
    .await
    .unwrap();
    assert_eq!(
        decision(&events),
        (
            A::RenderInteraction {
                objective_id: Some("o1".into())
            },
            Some(probe("o1"))
        )
    );
    // …and once the widget was shown, an extraction.
    given.push(decide(
        4,
        A::RenderInteraction {
            objective_id: Some("o1".into()),
        },
        None,
    ));
    given.push(C::SubmitInteraction(cmd::SubmitInteraction {
        interaction_id: "int-4".into(),
        turn_id: Uuid::from_u128(12),
        status: SubmitStatus::Submitted,
        value: Some(json!(4)),
        client_context: None,
        at: at(),
    }));
    given.push(claim(5));
    let events = when(given, decide(5, probe("o1"), Some("And?")))
        .await
        .unwrap();
    assert_eq!(decision(&events), (A::ExtractFields, Some(probe("o1"))));
    assert_eq!(
        status_after(&events),
        None,
        "extraction keeps the interviewer's turn"
    );
}

#[tokio::test]
async fn at_the_turn_limit_questions_give_way_to_the_summary_then_the_conclusion() {
    let mut given = consented();
    let questions = [ask("o1"), probe("o1"), ask("o2"), probe("o2")];
    for (i, q) in questions.into_iter().enumerate() {
        given.extend(step(2 + i as u128, q, Some("more?")));
        given.push(message(20 + i as u128, "a long enough answer here"));
    }
    given.push(claim(9));
    let events = when(given.clone(), decide(9, probe("o2"), Some("Why?")))
        .await
        .unwrap();
    assert_eq!(
        decision(&events),
        (A::SummarizeAndConfirm, Some(probe("o2")))
    );
    assert!(events
        .iter()
        .any(|e| matches!(e.body, EventBody::SummaryProposed { .. })));
    given.push(decide(9, A::SummarizeAndConfirm, None));
    given.push(message(30, "yes"));
    given.push(C::ConfirmSummary(cmd::ConfirmSummary {
        confirmed: true,
        addition: None,
        at: at(),
    }));
    given.push(claim(10));
    let events = when(given, decide(10, probe("o2"), Some("And?")))
        .await
        .unwrap();
    assert_eq!(
        decision(&events).0,
        A::Conclude {
            reason: R::MaxTurnsReached
        }
    );
    assert!(events.iter().any(|e| matches!(
        &e.body,
        EventBody::SessionCompleted {
            reason: R::MaxTurnsReached,
            summary_confirmed: true,
            ..
        }
    )));
    assert_eq!(status_after(&events), Some(S::Completed));
}

#[tokio::test]
async fn the_reply_to_the_summary_is_not_a_turn() {
    let given = summarized();
    let events = history(given.clone()).await;
    let mut session = super::Session::default();
    for e in events {
        cqrs_es::Aggregate::apply(&mut session, e);
    }
    assert_eq!(session.phase(), Phase::SummaryConfirmation);
    let before = session.turn_count();
    for e in when(given, message(40, "yes")).await.unwrap() {
        cqrs_es::Aggregate::apply(&mut session, e);
    }
    assert_eq!(session.turn_count(), before);
}

#[tokio::test]
async fn an_end_request_stops_questions() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "结束"));
    given.push(claim(3));
    let events = when(given.clone(), decide(3, probe("o1"), Some("Why?")))
        .await
        .unwrap();
    assert_eq!(decision(&events).0, A::SummarizeAndConfirm);
    given.push(decide(3, A::SummarizeAndConfirm, None));
    given.push(message(11, "对"));
    given.push(claim(4));
    let events = when(
        given,
        decide(
            4,
            A::Conclude {
                reason: R::ParticipantRequestedEnd,
            },
            None,
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        decision(&events),
        (
            A::Conclude {
                reason: R::ParticipantRequestedEnd
            },
            None
        )
    );
}

#[tokio::test]
async fn three_one_word_answers_in_a_row_stop_the_probing() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "yes"));
    given.extend(step(3, probe("o1"), Some("How so?")));
    given.push(message(11, "fine"));
    given.extend(step(4, ask("o2"), None));
    given.push(message(12, "none"));
    given.push(claim(5));
    let events = when(given, decide(5, probe("o2"), Some("Why none?")))
        .await
        .unwrap();
    assert_eq!(
        decision(&events),
        (A::SummarizeAndConfirm, Some(probe("o2")))
    );
}

#[tokio::test]
async fn questioning_stops_at_the_duration_limit() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "every day with a moka pot"));
    given.push(C::StartAgentMessage(cmd::StartAgentMessage {
        message_id: Uuid::from_u128(3),
        run_id: Uuid::from_u128(4),
        process_id: None,
        takes_over: None,
        at: later(31 * 60),
    }));
    let late = C::Decide(cmd::Decide {
        message_id: Uuid::from_u128(3),
        interaction_id: None,
        proposal: Box::new(proposal(ask("o2"), None)),
        at: later(31 * 60),
    });
    let events = when(given, late).await.unwrap();
    assert_eq!(decision(&events).0, A::SummarizeAndConfirm);
}

/// An extracted value fits its field (text, not an echoed schema), cites the turns it rests on,
/// and a declined field holds none: else the extraction is refused.
#[tokio::test]
async fn an_extracted_value_must_fit_its_field() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "I use a moka pot"));
    given.push(claim(3));
    let schema_echo = json!({"confidence": {"type": "number"}});
    for (value, evidence, status) in [
        (schema_echo.clone(), true, FieldStatus::Answered),
        (json!(42), true, FieldStatus::Answered),
        (json!("moka pot"), false, FieldStatus::Answered),
        (json!("moka pot"), true, FieldStatus::Refused),
    ] {
        let mut p = extraction(0.9);
        p.fields[0].value = value.clone();
        p.fields[0].status = status;
        if !evidence {
            p.fields[0].evidence_turn_ids.clear();
        }
        let refused = when(given.clone(), decide_with(3, p)).await.unwrap_err();
        assert!(
            matches!(refused, SessionError::InvalidValue { ref field, .. } if field == "fields"),
            "{value}: {refused:?}"
        );
    }
    // Text that looks like JSON is a participant's right to write (`field_values::
    // check_model_fields` keeps a model from echoing its schema); the value as text with its
    // evidence is taken.
    let mut p = extraction(0.9);
    p.fields[0].value = json!(schema_echo.to_string());
    assert!(when(given.clone(), decide_with(3, p)).await.is_ok());
    assert!(when(given, decide_with(3, extraction(0.9))).await.is_ok());
}

#[tokio::test]
async fn a_conclusion_must_be_true() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "I use a moka pot"));
    given.push(claim(3));
    for reason in [
        R::AllMustObjectivesCovered,
        R::ConfidenceThresholdMet,
        R::MaxTurnsReached,
        R::ParticipantFatigue,
        R::Timeout,
        // A study's places are checked at consent, by the runtime: no interviewer ends on them.
        R::StudyFull,
        R::DuplicateParticipant,
    ] {
        let refused = when(given.clone(), decide(3, A::Conclude { reason }, None))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, SessionError::InvalidValue { ref field, .. } if field == "reason"),
            "{reason:?}: {refused:?}"
        );
    }
}

fn extract(n: u128, confidence: f64) -> Vec<C> {
    vec![claim(n), decide_with(n, extraction(confidence))]
}

#[tokio::test]
async fn covered_must_objectives_allow_concluding_after_the_summary() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "I use a moka pot every morning"));
    given.extend(extract(3, 0.9));
    given.push(claim(4));
    // Covered, but no summary yet: the conclusion becomes the summary.
    let events = when(
        given.clone(),
        decide(
            4,
            A::Conclude {
                reason: R::AllMustObjectivesCovered,
            },
            None,
        ),
    )
    .await
    .unwrap();
    assert_eq!(decision(&events).0, A::SummarizeAndConfirm);
    let summary = events.iter().find_map(|e| match &e.body {
        EventBody::SummaryProposed { summary } => Some(summary.clone()),
        _ => None,
    });
    assert!(
        summary
            .as_deref()
            .unwrap_or_default()
            .to_lowercase()
            .contains("moka pot"),
        "the default summary is written from the extracted fields: {summary:?}"
    );
    given.push(decide(4, A::SummarizeAndConfirm, None));
    given.push(message(11, "yes"));
    given.push(C::ConfirmSummary(cmd::ConfirmSummary {
        confirmed: true,
        addition: None,
        at: at(),
    }));
    given.push(claim(5));
    for reason in [R::AllMustObjectivesCovered, R::ConfidenceThresholdMet] {
        let events = when(given.clone(), decide(5, A::Conclude { reason }, None))
            .await
            .unwrap();
        assert_eq!(decision(&events), (A::Conclude { reason }, None));
        assert_eq!(status_after(&events), Some(S::Completed));
    }
}

#[tokio::test]
async fn low_confidence_does_not_meet_the_threshold() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(10, "I use a moka pot every morning"));
    given.extend(extract(3, 0.4));
    given.push(claim(4));
    let refused = when(
        given,
        decide(
            4,
            A::Conclude {
                reason: R::ConfidenceThresholdMet,
            },
            None,
        ),
    )
    .await;
    assert!(refused.is_err());
}

#[tokio::test]
async fn extractions_name_real_fields_with_sane_confidence() {
    let mut given = consented();
    given.push(claim(3));
    let mut p = proposal(A::ExtractFields, None);
    p.fields = vec![ExtractedField {
        field_id: "nope".into(),
        value: json!(1),
        confidence: 0.5,
        evidence_turn_ids: vec![],
        quote: None,
        status: FieldStatus::Answered,
    }];
    assert!(when(given.clone(), decide_with(3, p.clone()))
        .await
        .is_err());
    p.fields[0].field_id = "f1".into();
    p.fields[0].confidence = 1.5;
    assert!(when(given, decide_with(3, p)).await.is_err());
}

#[tokio::test]
async fn every_decision_is_logged_with_its_provenance() {
    let mut given = consented();
    given.push(claim(2));
    let events = when(
        given,
        decide(2, ask("o1"), Some("So, how do you make your coffee?")),
    )
    .await
    .unwrap();
    let logged = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::DecisionRecorded {
                rationale,
                model,
                prompt_version_id,
                latency_ms,
                phase,
                ..
            } => Some((
                rationale.clone(),
                model.clone(),
                prompt_version_id.clone(),
                *latency_ms,
                *phase,
            )),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        logged,
        (
            "the test says so".into(),
            "rules".into(),
            "rules-v1".into(),
            3,
            Phase::Opening
        )
    );
    assert_eq!(
        said(&events).as_deref(),
        Some("So, how do you make your coffee?")
    );
    assert_eq!(
        super::check_stream(
            &history({
                let mut all = consented();
                all.extend(step(2, ask("o1"), None));
                all
            })
            .await
        ),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn an_idle_session_is_abandoned_for_timeout() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    let day = 24 * 60 * 60;
    expect_error(
        given.clone(),
        C::Expire(cmd::Expire {
            at: later(day - 10),
        }),
        SessionError::InvalidState {
            status: S::WaitingForUser,
        },
    )
    .await;
    let events = when(given, C::Expire(cmd::Expire { at: later(day + 1) }))
        .await
        .unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e.body, EventBody::SessionAbandoned { reason: R::Timeout })));
    assert_eq!(status_after(&events), Some(S::Abandoned));
}

#[tokio::test]
async fn a_session_idle_at_the_summary_is_completed_unconfirmed() {
    let given = summarized();
    let events = when(
        given,
        C::Expire(cmd::Expire {
            at: later(24 * 60 * 60 + 1),
        }),
    )
    .await
    .unwrap();
    assert!(events.iter().any(|e| matches!(
        e.body,
        EventBody::SessionCompleted {
            summary_confirmed: false,
            reason: R::Timeout,
            ..
        }
    )));
    assert_eq!(status_after(&events), Some(S::Completed));
}

fn screened_study() -> crate::study::PinnedStudy {
    let d: crate::study::StudyDefinition = serde_json::from_value(json!({
        "title": "Coffee habits",
        "consent": {"text": "We keep your answers.", "version": "1"},
        "screening": {
            "questions": [{"id": "drinks", "type": "yes_no", "prompt": "Do you drink coffee?"}],
            "rules": [{"question_id": "drinks", "disqualify_if": [false]}]
        },
        "objectives": [{"id": "o1", "title": "Habits", "priority": "must", "opening_question": "How do you make coffee?"}],
        "output_schema": {"fields": [{"id": "f1", "type": "string", "objective_id": "o1"}]},
        "agent": {"safety_patterns": ["hurt myself"]}
    }))
    .unwrap();
    d.versioned_documents().pin("study-2", "screened")
}

fn screened() -> Vec<C> {
    let create = C::Create(cmd::Create {
        session_id: Uuid::nil(),
        study: Box::new(screened_study()),
        participant_ref: None,
        participant_token_sha256: String::new(),
        preview: false,
        chain_secret: None,
        at: at(),
    });
    let mut c = vec![create, C::Start(cmd::Start { at: at() })];
    c.extend(step(1, A::RenderInteraction { objective_id: None }, None));
    c.push(answer_consent(1, true));
    c
}

fn answer(n: u128, value: serde_json::Value) -> C {
    C::SubmitInteraction(cmd::SubmitInteraction {
        interaction_id: format!("int-{n}"),
        turn_id: Uuid::from_u128(n + 500),
        status: SubmitStatus::Submitted,
        value: Some(value),
        client_context: None,
        at: at(),
    })
}

#[tokio::test]
async fn screening_questions_follow_consent() {
    let mut given = screened();
    given.push(claim(2));
    let events = when(given, decide(2, ask("o1"), None)).await.unwrap();
    assert_eq!(
        decision(&events),
        (A::RenderInteraction { objective_id: None }, Some(ask("o1")))
    );
    let rendered = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::InteractionRendered { interaction } => Some(interaction.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(rendered.screening_question_id.as_deref(), Some("drinks"));
    assert_eq!(rendered.type_name(), "yes_no");
}

#[tokio::test]
async fn a_screening_verdict_needs_every_answer_and_a_failed_one_abandons() {
    let mut given = screened();
    let verdict = |eligible| {
        C::EvaluateScreening(cmd::EvaluateScreening {
            eligible,
            rationale: "drinks: false disqualifies".into(),
            decided_by: None,
            at: at(),
        })
    };
    expect_error(
        given.clone(),
        verdict(false),
        SessionError::InvalidState { status: S::Active },
    )
    .await;
    given.extend(step(2, A::RenderInteraction { objective_id: None }, None));
    given.push(answer(2, json!(false)));
    let events = when(given.clone(), verdict(false)).await.unwrap();
    assert!(
        matches!(&events[0].body, EventBody::ScreeningEvaluated { eligible: false, answers, .. } if answers["drinks"] == Some(json!(false)))
    );
    given.push(verdict(false));
    given.push(claim(3));
    let events = when(given, decide(3, ask("o1"), None)).await.unwrap();
    assert_eq!(
        decision(&events).0,
        A::Conclude {
            reason: R::ScreeningFailed
        }
    );
    assert!(said(&events).unwrap().contains("different situation"));
    assert_eq!(status_after(&events), Some(S::Abandoned));
}

#[tokio::test]
async fn a_safety_stop_no_pattern_confirms_is_refused() {
    let mut given = summarized();
    given.push(message(31, "I like my moka pot"));
    given.push(claim(4));
    let result = when(
        given,
        decide(
            4,
            A::Conclude {
                reason: R::SafetyTriggered,
            },
            None,
        ),
    )
    .await;
    assert!(
        matches!(result, Err(SessionError::InvalidValue { ref field, .. }) if field == "reason"),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_safety_pattern_ends_the_session_with_a_supportive_word() {
    let mut given = screened();
    given.extend(step(2, A::RenderInteraction { objective_id: None }, None));
    given.push(answer(2, json!(true)));
    given.push(C::EvaluateScreening(cmd::EvaluateScreening {
        eligible: true,
        rationale: "ok".into(),
        decided_by: None,
        at: at(),
    }));
    given.extend(step(3, ask("o1"), None));
    given.push(message(10, "Some days I want to hurt myself"));
    given.push(claim(4));
    let events = when(given, decide(4, probe("o1"), Some("Why?")))
        .await
        .unwrap();
    assert_eq!(
        decision(&events).0,
        A::Conclude {
            reason: R::SafetyTriggered
        }
    );
    assert!(said(&events).unwrap().contains("support"));
    assert_eq!(status_after(&events), Some(S::Abandoned));
}

#[tokio::test]
async fn a_summary_before_any_must_objective_is_asked_becomes_its_question() {
    let mut given = consented();
    given.push(claim(2));
    let events = when(given, decide(2, A::SummarizeAndConfirm, None))
        .await
        .unwrap();
    assert_eq!(decision(&events), (ask("o1"), Some(A::SummarizeAndConfirm)));
}

#[tokio::test]
async fn the_words_that_present_a_summary_hold_it() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(30, "I use a moka pot every morning before work"));
    given.push(claim(3));
    let summary = "- Coffee: a moka pot every morning";
    let presented = |message: &str| {
        let mut p = proposal(A::SummarizeAndConfirm, Some(message));
        p.summary = Some(summary.into());
        decide_with(3, p)
    };
    // Words without the summary: the participant would confirm what they never read. The
    // summary is put in — after a statement, then the confirming question; before a question.
    let events = when(
        given.clone(),
        presented("Your summary is ready. You can now proceed."),
    )
    .await
    .unwrap();
    let shown = said(&events).unwrap();
    assert!(
        shown.starts_with(&format!(
            "Your summary is ready. You can now proceed.\n{summary}\n"
        )),
        "{shown}"
    );
    assert!(
        shown.ends_with(crate::phrases::confirm_question("en")),
        "{shown}"
    );
    let events = when(given.clone(), presented("Did I get that right?"))
        .await
        .unwrap();
    let shown = said(&events).unwrap();
    assert!(
        shown.ends_with(&format!("\n{summary}\nDid I get that right?")),
        "{shown}"
    );
    // Words that hold it stand.
    let own = format!("Here is what I heard:\n{summary}\nDid I get that right?");
    let events = when(given, presented(&own)).await.unwrap();
    assert_eq!(said(&events), Some(own));
}

#[tokio::test]
async fn a_confirmed_summary_always_concludes_even_when_coverage_never_held() {
    // o1 asked and answered, its field never at the threshold: questioning stopped because
    // every must objective was asked. The confirmation concludes, whatever is proposed next.
    let mut given = summarized();
    given.push(message(31, "yes"));
    given.push(C::ConfirmSummary(cmd::ConfirmSummary {
        confirmed: true,
        addition: None,
        at: at(),
    }));
    for proposal in [
        A::Conclude {
            reason: R::ConfidenceThresholdMet,
        },
        A::SummarizeAndConfirm,
        ask("o2"),
        A::ExtractFields,
    ] {
        let mut g = given.clone();
        g.push(claim(4));
        let events = when(g, decide(4, proposal.clone(), None)).await.unwrap();
        assert!(
            events.iter().any(|e| matches!(
                e.body,
                EventBody::SessionCompleted {
                    reason: R::AllMustObjectivesAsked,
                    summary_confirmed: true,
                    ..
                }
            )),
            "{proposal:?}: {events:?}"
        );
    }
}

#[tokio::test]
async fn after_an_addition_one_extraction_then_the_summary_again() {
    let mut given = summarized();
    given.push(message(31, "add: and a notebook"));
    given.push(C::ConfirmSummary(cmd::ConfirmSummary {
        confirmed: false,
        addition: Some("add: and a notebook".into()),
        at: at(),
    }));
    given.extend(extract(4, 0.8));
    // A second extraction is not allowed before the participant sees the summary again.
    let mut p = proposal(A::ExtractFields, None);
    p.fields = vec![ExtractedField {
        field_id: "f1".into(),
        value: json!("again"),
        confidence: 0.9,
        evidence_turn_ids: vec![],
        quote: None,
        status: FieldStatus::Answered,
    }];
    given.push(claim(5));
    let events = when(given, decide_with(5, p)).await.unwrap();
    assert_eq!(decision(&events).0, A::SummarizeAndConfirm);
}

#[tokio::test]
async fn a_correction_to_the_summary_is_confirmed_before_the_end() {
    // Given a summary the participant corrected; when a policy proposes to conclude; then the
    // summary is shown again (with the correction), not the end — the results keep the summary
    // the participant corrected.
    let mut given = summarized();
    given.push(message(31, "Correction: I use a paper notebook"));
    given.push(C::ConfirmSummary(cmd::ConfirmSummary {
        confirmed: false,
        addition: Some("Correction: I use a paper notebook".into()),
        at: at(),
    }));
    given.push(claim(4));
    let conclude = A::Conclude {
        reason: R::AllMustObjectivesCovered,
    };
    let events = when(given.clone(), decide(4, conclude.clone(), None))
        .await
        .unwrap();
    assert_eq!(decision(&events).0, A::SummarizeAndConfirm);
    // Once the second summary is answered, the conclusion is carried out.
    given.push(decide(4, A::SummarizeAndConfirm, None));
    given.push(message(32, "yes"));
    given.push(C::ConfirmSummary(cmd::ConfirmSummary {
        confirmed: true,
        addition: None,
        at: at(),
    }));
    given.push(claim(5));
    let events = when(given, decide(5, conclude, None)).await.unwrap();
    assert!(
        matches!(decision(&events).0, A::Conclude { .. }),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_reply_to_the_summary_is_recorded_once() {
    let mut given = summarized();
    given.push(message(10, "yes"));
    let confirm = C::ConfirmSummary(cmd::ConfirmSummary {
        confirmed: true,
        addition: None,
        at: at(),
    });
    assert_eq!(when(given.clone(), confirm.clone()).await.unwrap().len(), 1);
    given.push(confirm.clone());
    expect_error(
        given,
        confirm,
        SessionError::InvalidState { status: S::Active },
    )
    .await;
}

fn end() -> C {
    C::RequestEnd(cmd::RequestEnd { at: at() })
}

fn types(events: &[SessionEvent]) -> Vec<&'static str> {
    events.iter().map(|e| e.body.event_type()).collect()
}

#[tokio::test]
async fn ending_before_consent_abandons_the_session() {
    let given = vec![create(), C::Start(cmd::Start { at: at() })];
    let events = when(given, end()).await.unwrap();
    assert!(events.iter().any(|e| matches!(
        e.body,
        EventBody::SessionAbandoned {
            reason: R::ParticipantRequestedEnd
        }
    )));
    assert_eq!(status_after(&events), Some(S::Abandoned));
}

#[tokio::test]
async fn ending_during_the_interview_leads_to_the_summary_not_a_question() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    let events = when(given.clone(), end()).await.unwrap();
    assert_eq!(
        types(&events),
        ["session.end_requested", "session.status_changed"]
    );
    assert_eq!(status_after(&events), Some(S::Active));
    given.push(end());
    given.push(claim(3));
    let events = when(given, decide(3, ask("o2"), None)).await.unwrap();
    assert_eq!(decision(&events).0, A::SummarizeAndConfirm);
}

#[tokio::test]
async fn ending_with_a_widget_open_records_it_as_skipped() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(
        10,
        "I grind beans every morning and use a moka pot",
    ));
    given.extend(step(
        3,
        A::RenderInteraction {
            objective_id: Some("o1".into()),
        },
        None,
    ));
    let events = when(given, end()).await.unwrap();
    assert!(events.iter().any(|e| matches!(
        e.body,
        EventBody::InteractionSubmitted {
            status: SubmitStatus::Skipped,
            ..
        }
    )));
    assert!(types(&events).contains(&"tool.call.completed"));
    assert_eq!(status_after(&events), Some(S::Active));
}

/// A model may write a widget only where the study has none: for an objective with its own,
/// the study's is shown whatever the model offers.
#[tokio::test]
async fn the_study_s_own_widget_is_shown_in_place_of_a_model_s() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(message(
        10,
        "I grind beans every morning and use a moka pot",
    ));
    given.push(claim(3));
    let mut offered = proposal(
        A::RenderInteraction {
            objective_id: Some("o1".into()),
        },
        None,
    );
    offered.interaction = Some(
        serde_json::from_value(json!({"type": "yes_no", "prompt": "Shall we skip the rest?", "research_intent": "model's own"}))
            .unwrap(),
    );
    let events = when(given, decide_with(3, offered)).await.unwrap();
    let shown = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::InteractionRendered { interaction } => Some(interaction.prompt.clone()),
            _ => None,
        })
        .expect("a widget is shown");
    assert_eq!(shown, "How much do you like it?");
}

#[tokio::test]
async fn ending_again_at_the_summary_completes_it_unconfirmed() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    given.push(end());
    given.extend(step(3, A::SummarizeAndConfirm, None));
    let events = when(given, end()).await.unwrap();
    assert!(events.iter().any(|e| matches!(
        e.body,
        EventBody::SessionCompleted {
            summary_confirmed: false,
            reason: R::ParticipantRequestedEnd,
            ..
        }
    )));
    assert_eq!(status_after(&events), Some(S::Completed));
}

/// A sentence that asks for the end is recorded as the participant's end request with the
/// message, and questioning stops; a sentence that only mentions wrapping up does not.
#[tokio::test]
async fn a_sentence_asking_for_the_end_is_recorded_as_an_end_request() {
    let mut given = consented();
    given.extend(step(2, ask("o1"), None));
    let events = when(
        given.clone(),
        message(7, "Sorry, can we wrap up now please?"),
    )
    .await
    .unwrap();
    assert!(
        types(&events).contains(&"session.end_requested"),
        "{:?}",
        types(&events)
    );
    let events = when(given.clone(), message(7, "I wrap up leftovers in foil"))
        .await
        .unwrap();
    assert!(!types(&events).contains(&"session.end_requested"));

    given.push(message(7, "Sorry, can we wrap up now please?"));
    given.push(claim(3));
    let events = when(given, decide(3, ask("o2"), None)).await.unwrap();
    assert_eq!(decision(&events).0, A::SummarizeAndConfirm);
}
