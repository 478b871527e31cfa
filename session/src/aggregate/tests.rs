//! One given/when/then test per rule of the Session aggregate.

use crate::commands as cmd;
use chrono::{DateTime, TimeZone, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::test::TestFramework;
use cqrs_es::Aggregate;
use serde_json::json;
use uuid::Uuid;

use super::Session;
use crate::chain::verify_chain;
use crate::commands::SessionCommand as C;
use crate::error::SessionError;
use crate::events::{ConcludeReason, EventBody, SessionEvent, SessionStatus as S, SubmitStatus};
use crate::hash::GENESIS_HASH;
use crate::interaction::{InteractionKind, InteractionSpec, InteractionToolCall};
use crate::study::{PinnedStudy, StudyDefinition};

type Framework = TestFramework<Session>;

pub(super) fn at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 9, 0, 0).unwrap()
}

pub(crate) fn study() -> PinnedStudy {
    let d: StudyDefinition = serde_json::from_value(json!({
        "title": "Coffee habits",
        "consent": {"text": "We keep your answers.", "version": "1"},
        "objectives": [
            {"id": "o1", "title": "Habits", "priority": "must", "opening_question": "How do you make coffee?",
             "max_probe_count": 1,
             "interaction": {"type": "likert", "prompt": "How much do you like it?", "scale": 5}},
            {"id": "o2", "title": "Brands", "priority": "should", "opening_question": "Which brand?"}
        ],
        "output_schema": {"fields": [
            {"id": "f1", "type": "string", "objective_id": "o1", "required": true},
            {"id": "f2", "type": "string", "objective_id": "o2"}
        ]},
        "limits": {"max_turn_count": 4, "max_duration_minutes": 30}
    }))
    .unwrap();
    d.versioned_documents().pin("study-1", "coffee")
}

pub(super) fn create() -> C {
    C::Create(cmd::Create {
        session_id: Uuid::nil(),
        study: Box::new(study()),
        participant_ref: Some("p-7".into()),
        participant_token_sha256: "ab".repeat(32),
        preview: false,
        chain_secret: Some("5ec2e7".repeat(8)),
        at: at(),
    })
}

pub(super) fn message(turn: u128, content: &str) -> C {
    C::PostMessage(cmd::PostMessage {
        turn_id: Uuid::from_u128(turn),
        client_message_id: None,
        content: content.into(),
        at: at(),
    })
}

pub(super) fn likert(id: &str) -> C {
    let spec = InteractionSpec {
        prompt: "How satisfied are you?".into(),
        research_intent: "satisfaction".into(),
        kind: InteractionKind::Likert {
            scale: 5,
            labels: vec![],
        },
    };
    C::RenderInteraction(cmd::RenderInteraction {
        interaction: Box::new(InteractionToolCall::new(
            id.into(),
            format!("tc-{id}"),
            Some("o1".into()),
            &spec,
        )),
        at: at(),
    })
}

fn consent(id: &str) -> C {
    let spec = InteractionSpec {
        prompt: "Do you agree?".into(),
        research_intent: "consent".into(),
        kind: InteractionKind::Consent {
            consent_text: "We keep your answers.".into(),
            consent_version: "1".into(),
        },
    };
    C::RenderInteraction(cmd::RenderInteraction {
        interaction: Box::new(InteractionToolCall::new(
            id.into(),
            format!("tc-{id}"),
            None,
            &spec,
        )),
        at: at(),
    })
}

pub(super) fn submit(id: &str, value: serde_json::Value) -> C {
    C::SubmitInteraction(cmd::SubmitInteraction {
        interaction_id: id.into(),
        turn_id: Uuid::from_u128(900),
        status: SubmitStatus::Submitted,
        value: Some(value),
        client_context: None,
        at: at(),
    })
}

pub(super) fn agent_says(message: u128, await_reply: bool) -> Vec<C> {
    let message_id = Uuid::from_u128(message);
    vec![
        C::StartAgentMessage(cmd::StartAgentMessage {
            message_id,
            run_id: Uuid::from_u128(message + 1),
            process_id: None,
            takes_over: None,
            at: at(),
        }),
        C::CompleteAgentMessage(cmd::CompleteAgentMessage {
            message_id,
            content: "Tell me more.".into(),
            await_reply,
            at: at(),
        }),
    ]
}

pub(super) fn complete() -> C {
    C::Complete(cmd::Complete {
        summary: "You drink coffee daily.".into(),
        summary_confirmed: true,
        reason: ConcludeReason::AllMustObjectivesCovered,
        at: at(),
    })
}

fn abandon() -> C {
    C::Abandon(cmd::Abandon {
        reason: ConcludeReason::Timeout,
        at: at(),
    })
}

/// Runs commands against a fresh aggregate and returns the events they wrote.
pub(super) async fn history(commands: Vec<C>) -> Vec<SessionEvent> {
    let mut session = Session::default();
    let mut events = Vec::new();
    for command in commands {
        let sink = EventSink::default();
        session
            .handle(command, &(), &sink)
            .await
            .expect("history command accepted");
        events.extend(sink.collect().await);
    }
    events
}

pub(super) async fn when(given: Vec<C>, command: C) -> Result<Vec<SessionEvent>, SessionError> {
    Framework::with(())
        .given(history(given).await)
        .when_async(command)
        .await
        .inspect_result()
}

fn types(events: &[SessionEvent]) -> Vec<&'static str> {
    events.iter().map(|e| e.body.event_type()).collect()
}

fn status_changes(events: &[SessionEvent]) -> Vec<(S, S)> {
    events
        .iter()
        .filter_map(|e| match e.body {
            EventBody::StatusChanged { from, to } => Some((from, to)),
            _ => None,
        })
        .collect()
}

async fn expect_error(given: Vec<C>, command: C, expected: SessionError) {
    Framework::with(())
        .given(history(given).await)
        .when_async(command)
        .await
        .then_expect_error(expected);
}

#[tokio::test]
async fn creating_a_session_pins_the_whole_study() {
    let events = when(vec![], create()).await.unwrap();
    assert_eq!(types(&events), ["session.created"]);
    match &events[0].body {
        EventBody::SessionCreated {
            study: pinned,
            participant_ref,
            ..
        } => {
            assert_eq!(**pinned, study());
            assert_eq!(participant_ref.as_deref(), Some("p-7"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(events[0].prev_hash, GENESIS_HASH);
    assert_eq!(events[0].at, at());
}

#[tokio::test]
async fn event_time_is_kept_to_the_microsecond_and_never_runs_backwards() {
    // A command stamped with nanoseconds: the event keeps whole microseconds (what the stores
    // keep), so stored rows and rows rebuilt from the log agree.
    let mut create = create();
    if let C::Create(cmd::Create { at: t, .. }) = &mut create {
        *t = at() + chrono::Duration::nanoseconds(1_234_567);
    }
    let events = when(vec![], create.clone()).await.unwrap();
    assert_eq!(events[0].at, at() + chrono::Duration::microseconds(1_234));
    // A command decided on an earlier clock reading than the last event is stamped with the
    // last event's time.
    let late = C::Abandon(cmd::Abandon {
        reason: ConcludeReason::Timeout,
        at: at() - chrono::Duration::seconds(5),
    });
    let events = when(vec![create], late).await.unwrap();
    assert!(events.len() >= 2);
    let kept = at() + chrono::Duration::microseconds(1_234);
    assert!(events.iter().all(|e| e.at == kept), "{events:?}");
}

#[tokio::test]
async fn a_session_is_created_once() {
    expect_error(vec![create()], create(), SessionError::AlreadyCreated).await;
}

#[tokio::test]
async fn commands_on_a_session_that_does_not_exist_are_refused() {
    for command in [
        message(1, "hi"),
        C::Start(cmd::Start { at: at() }),
        abandon(),
        complete(),
    ] {
        expect_error(vec![], command, SessionError::NotCreated).await;
    }
}

#[tokio::test]
async fn starting_moves_created_to_active() {
    let events = when(vec![create()], C::Start(cmd::Start { at: at() }))
        .await
        .unwrap();
    assert_eq!(status_changes(&events), [(S::Created, S::Active)]);
}

#[tokio::test]
async fn a_session_starts_only_once() {
    expect_error(
        vec![create(), C::Start(cmd::Start { at: at() })],
        C::Start(cmd::Start { at: at() }),
        SessionError::InvalidState { status: S::Active },
    )
    .await;
}

#[tokio::test]
async fn a_message_is_refused_unless_the_session_waits_for_the_participant() {
    // Before the interviewer started, and while it holds the turn.
    let claimed = {
        let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
        given.push(agent_says(10, true).remove(0));
        given
    };
    for (given, status) in [
        (vec![create()], S::Created),
        (vec![create(), C::Start(cmd::Start { at: at() })], S::Active),
        (claimed, S::Active),
    ] {
        expect_error(
            given,
            message(1, "hello"),
            SessionError::InvalidState { status },
        )
        .await;
    }
}

#[tokio::test]
async fn a_message_while_waiting_for_the_participant_returns_to_active() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    given.extend(agent_says(10, true));
    let events = when(given, message(1, "daily")).await.unwrap();
    assert_eq!(status_changes(&events), [(S::WaitingForUser, S::Active)]);
}

#[tokio::test]
async fn a_retried_message_writes_nothing() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    given.extend(agent_says(10, true));
    given.push(message(1, "hello"));
    let events = when(given, message(1, "hello")).await.unwrap();
    assert!(events.is_empty());
}

#[tokio::test]
async fn a_message_id_reused_with_other_text_is_refused() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    given.extend(agent_says(10, true));
    given.push(C::PostMessage(cmd::PostMessage {
        turn_id: Uuid::from_u128(1),
        client_message_id: Some("k".into()),
        content: "A".into(),
        at: at(),
    }));
    let other = C::PostMessage(cmd::PostMessage {
        turn_id: Uuid::from_u128(1),
        client_message_id: Some("k".into()),
        content: "B".into(),
        at: at(),
    });
    expect_error(
        given,
        other,
        SessionError::IdempotencyKeyReused {
            client_message_id: Some("k".into()),
        },
    )
    .await;
}

#[tokio::test]
async fn an_empty_message_is_refused() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    given.extend(agent_says(10, true));
    expect_error(
        given,
        message(1, "  "),
        SessionError::InvalidValue {
            field: "content".into(),
            message: "the message is empty".into(),
        },
    )
    .await;
}

#[tokio::test]
async fn a_message_while_an_interaction_is_pending_is_refused() {
    expect_error(
        vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")],
        message(1, "hello"),
        SessionError::InteractionPending {
            interaction_id: "i1".into(),
        },
    )
    .await;
}

#[tokio::test]
async fn a_completed_utterance_that_awaits_a_reply_waits_for_the_participant() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    let mut says = agent_says(10, true);
    given.push(says.remove(0));
    let events = when(given, says.remove(0)).await.unwrap();
    assert_eq!(
        types(&events),
        ["agent.message.completed", "session.status_changed"]
    );
    assert_eq!(status_changes(&events), [(S::Active, S::WaitingForUser)]);
}

#[tokio::test]
async fn only_one_utterance_can_be_claimed_at_a_time() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    given.push(agent_says(10, true).remove(0));
    let second = agent_says(20, true).remove(0);
    expect_error(
        given,
        second,
        SessionError::InvalidState { status: S::Active },
    )
    .await;
}

#[tokio::test]
async fn rendering_an_interaction_waits_for_its_answer() {
    let events = when(
        vec![create(), C::Start(cmd::Start { at: at() })],
        likert("i1"),
    )
    .await
    .unwrap();
    assert_eq!(
        types(&events),
        [
            "tool.call.created",
            "interaction.rendered",
            "session.status_changed"
        ]
    );
    assert_eq!(status_changes(&events), [(S::Active, S::WaitingForTool)]);
}

#[tokio::test]
async fn at_most_one_interaction_is_pending() {
    expect_error(
        vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")],
        likert("i2"),
        SessionError::InteractionPending {
            interaction_id: "i1".into(),
        },
    )
    .await;
}

#[tokio::test]
async fn submitting_the_pending_interaction_returns_to_active() {
    let events = when(
        vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")],
        submit("i1", json!(4)),
    )
    .await
    .unwrap();
    assert_eq!(
        types(&events),
        [
            "interaction.submitted",
            "tool.call.completed",
            "session.status_changed"
        ]
    );
    assert_eq!(status_changes(&events), [(S::WaitingForTool, S::Active)]);
}

#[tokio::test]
async fn a_submitted_interaction_counts_as_a_turn_but_consent_does_not() {
    let mut session = Session::default();
    for e in history(vec![
        create(),
        C::Start(cmd::Start { at: at() }),
        consent("c1"),
        submit("c1", json!({"accepted": true})),
        likert("i1"),
        submit("i1", json!(2)),
    ])
    .await
    {
        session.apply(e);
    }
    assert_eq!(session.turn_count(), 1);
}

#[tokio::test]
async fn a_skipped_interaction_is_recorded_as_skipped() {
    let skip = C::SubmitInteraction(cmd::SubmitInteraction {
        interaction_id: "i1".into(),
        turn_id: Uuid::from_u128(5),
        status: SubmitStatus::Skipped,
        value: None,
        client_context: Some(json!({"device": "phone"})),
        at: at(),
    });
    let events = when(
        vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")],
        skip,
    )
    .await
    .unwrap();
    assert!(matches!(
        events[0].body,
        EventBody::InteractionSubmitted {
            status: SubmitStatus::Skipped,
            value: None,
            ..
        }
    ));
}

#[tokio::test]
async fn a_value_outside_the_value_schema_is_refused() {
    expect_error(
        vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")],
        submit("i1", json!(9)),
        SessionError::InvalidValue {
            field: "value".into(),
            message: "expected a whole number from 1 to 5".into(),
        },
    )
    .await;
}

#[tokio::test]
async fn a_client_context_over_2_kb_is_refused() {
    let with_context = |bytes: usize| {
        let mut command = submit("i1", json!(4));
        if let C::SubmitInteraction(cmd::SubmitInteraction { client_context, .. }) = &mut command {
            // `{"x":"…"}`: eight bytes around the text.
            *client_context = Some(json!({ "x": "a".repeat(bytes - 8) }));
        }
        command
    };
    let given = vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")];
    assert!(when(given.clone(), with_context(2048)).await.is_ok());
    assert!(matches!(
        when(given, with_context(2049)).await,
        Err(SessionError::InvalidValue { field, .. }) if field == "client_context"
    ));
}

#[tokio::test]
async fn submitting_an_unknown_interaction_is_refused() {
    expect_error(
        vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")],
        submit("nope", json!(3)),
        SessionError::InteractionNotFound {
            interaction_id: "nope".into(),
        },
    )
    .await;
}

#[tokio::test]
async fn an_interaction_is_answered_once() {
    expect_error(
        vec![
            create(),
            C::Start(cmd::Start { at: at() }),
            likert("i1"),
            submit("i1", json!(3)),
        ],
        submit("i1", json!(3)),
        SessionError::InteractionAlreadyAnswered {
            interaction_id: "i1".into(),
        },
    )
    .await;
}

#[tokio::test]
async fn completing_ends_the_session() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    given.extend(agent_says(10, true));
    let events = when(given, complete()).await.unwrap();
    assert_eq!(
        types(&events),
        ["session.completed", "session.status_changed"]
    );
    assert_eq!(status_changes(&events), [(S::WaitingForUser, S::Completed)]);
}

#[tokio::test]
async fn a_session_that_never_started_cannot_complete() {
    expect_error(
        vec![create()],
        complete(),
        SessionError::InvalidState { status: S::Created },
    )
    .await;
}

#[tokio::test]
async fn any_open_session_can_be_abandoned() {
    let mut waiting_for_user = vec![create(), C::Start(cmd::Start { at: at() })];
    waiting_for_user.extend(agent_says(10, true));
    let cases = vec![
        (vec![create()], S::Created),
        (vec![create(), C::Start(cmd::Start { at: at() })], S::Active),
        (waiting_for_user, S::WaitingForUser),
        (
            vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")],
            S::WaitingForTool,
        ),
    ];
    for (given, from) in cases {
        let events = when(given, abandon()).await.unwrap();
        assert_eq!(
            types(&events),
            ["session.abandoned", "session.status_changed"]
        );
        assert_eq!(status_changes(&events), [(from, S::Abandoned)]);
    }
}

#[tokio::test]
async fn ended_sessions_refuse_every_participant_and_interviewer_command() {
    let ended = [
        (
            vec![
                create(),
                C::Start(cmd::Start { at: at() }),
                likert("i1"),
                complete(),
            ],
            S::Completed,
        ),
        (
            vec![
                create(),
                C::Start(cmd::Start { at: at() }),
                likert("i1"),
                abandon(),
            ],
            S::Abandoned,
        ),
    ];
    for (given, status) in ended {
        let commands = vec![
            message(77, "anyone there?"),
            C::Start(cmd::Start { at: at() }),
            submit("i1", json!(3)),
            likert("i2"),
            agent_says(30, true).remove(0),
            complete(),
            abandon(),
        ];
        for command in commands {
            expect_error(given.clone(), command, SessionError::Terminal { status }).await;
        }
    }
}

#[tokio::test]
async fn every_event_is_chained_to_the_one_before() {
    let mut commands = vec![create(), C::Start(cmd::Start { at: at() })];
    commands.extend(agent_says(10, true));
    commands.extend([
        message(1, "every morning"),
        likert("i1"),
        submit("i1", json!(5)),
        complete(),
    ]);
    let events = history(commands).await;
    let stored: Vec<_> = events.iter().map(crate::codec::encode).collect();
    let head = verify_chain(stored.iter().enumerate().map(|(i, e)| {
        (
            i + 1,
            e.event_type,
            e.event_version,
            &e.payload,
            Some(&e.hash[..]),
        )
    }))
    .expect("an unbroken chain");
    assert_eq!(head, events.last().unwrap().hash);
    for pair in events.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash);
    }
    let mut replayed = Session::default();
    for e in events.iter().cloned() {
        replayed.apply(e);
    }
    assert_eq!(replayed.head_hash(), head);
}

#[tokio::test]
async fn a_stored_stream_is_rechecked_against_the_rules() {
    let mut commands = vec![
        create(),
        C::Start(cmd::Start { at: at() }),
        likert("i1"),
        submit("i1", json!(2)),
    ];
    commands.extend(agent_says(10, true));
    commands.push(complete());
    let events = history(commands).await;
    assert_eq!(super::check_stream(&events), Vec::<String>::new());

    // Two pending interactions and an event after the end are both reported.
    let mut broken = history(vec![
        create(),
        C::Start(cmd::Start { at: at() }),
        likert("i1"),
    ])
    .await;
    broken.push(broken[3].clone());
    let ended = history(vec![create(), abandon()]).await;
    let mut after_end = ended.clone();
    after_end.push(broken[1].clone());
    assert_eq!(
        super::check_stream(&broken).len(),
        1,
        "{:?}",
        super::check_stream(&broken)
    );
    assert_eq!(super::check_stream(&after_end).len(), 1);
}

#[tokio::test]
async fn an_open_session_can_complete_from_every_interview_status() {
    let mut waiting_for_user = vec![create(), C::Start(cmd::Start { at: at() })];
    waiting_for_user.extend(agent_says(10, true));
    let cases = vec![
        (vec![create(), C::Start(cmd::Start { at: at() })], S::Active),
        (waiting_for_user, S::WaitingForUser),
        (
            vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")],
            S::WaitingForTool,
        ),
    ];
    for (given, from) in cases {
        let events = when(given, complete()).await.unwrap();
        assert_eq!(status_changes(&events), [(from, S::Completed)]);
    }
}

#[tokio::test]
async fn an_utterance_completes_only_under_its_own_claim() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    given.push(agent_says(10, true).remove(0));
    let other = agent_says(20, true).remove(1);
    expect_error(
        given,
        other,
        SessionError::InvalidState { status: S::Active },
    )
    .await;
    let unclaimed = agent_says(30, true).remove(1);
    expect_error(
        vec![create(), C::Start(cmd::Start { at: at() })],
        unclaimed,
        SessionError::InvalidState { status: S::Active },
    )
    .await;
}

#[tokio::test]
async fn an_utterance_that_expects_no_reply_keeps_the_session_active() {
    let mut given = vec![create(), C::Start(cmd::Start { at: at() })];
    let mut says = agent_says(10, false);
    given.push(says.remove(0));
    let events = when(given, says.remove(0)).await.unwrap();
    assert_eq!(types(&events), ["agent.message.completed"]);
}

#[tokio::test]
async fn interactions_render_only_while_the_interviewer_holds_the_turn() {
    expect_error(
        vec![create()],
        likert("i1"),
        SessionError::InvalidState { status: S::Created },
    )
    .await;
    let mut waiting = vec![create(), C::Start(cmd::Start { at: at() })];
    waiting.extend(agent_says(10, true));
    expect_error(
        waiting,
        likert("i1"),
        SessionError::InvalidState {
            status: S::WaitingForUser,
        },
    )
    .await;
}

#[tokio::test]
async fn an_answered_interaction_is_never_rendered_again() {
    expect_error(
        vec![
            create(),
            C::Start(cmd::Start { at: at() }),
            likert("i1"),
            submit("i1", json!(1)),
        ],
        likert("i1"),
        SessionError::InteractionAlreadyAnswered {
            interaction_id: "i1".into(),
        },
    )
    .await;
}

#[tokio::test]
async fn a_submitted_answer_needs_a_value() {
    let no_value = C::SubmitInteraction(cmd::SubmitInteraction {
        interaction_id: "i1".into(),
        turn_id: Uuid::from_u128(5),
        status: SubmitStatus::Submitted,
        value: None,
        client_context: None,
        at: at(),
    });
    expect_error(
        vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")],
        no_value,
        SessionError::InvalidValue {
            field: "value".into(),
            message: "an answer is needed (or skip the question)".into(),
        },
    )
    .await;
}
