//! Erasure: the record that a participant's data is gone (`docs/privacy.md`). The rewriting of
//! the stored events is the store's (`codec::erased`); the rules are here.

use super::*;
use crate::commands as cmd;

impl Session {
    /// Records an erasure of every event so far — the caller erased the events it read, and one
    /// committed since would be left readable — once. A session still running is withdrawn in
    /// the same commit (`session.abandoned`, reason `withdrawn`, before the record), so a
    /// withdrawal is never left half done.
    pub(super) async fn record_erasure(
        &mut self,
        sink: &EventSink<Self>,
        c: cmd::RecordErasure,
    ) -> Result<(), SessionError> {
        let cmd::RecordErasure {
            erasure,
            head_hash,
            at,
        } = c;
        if self.session_id.is_none() {
            return Err(SessionError::NotCreated);
        }
        if erasure.erased_events != self.events || head_hash != self.head_hash() {
            return Err(SessionError::ErasureOutdated);
        }
        crate::erasure::check_reason(erasure.reason.as_deref())?;
        if !self.status.is_terminal() {
            self.emit(
                sink,
                EventBody::SessionAbandoned {
                    reason: ConcludeReason::Withdrawn,
                },
                at,
            )
            .await;
            self.change_status(sink, SessionStatus::Abandoned, at).await;
        }
        self.emit(sink, EventBody::ParticipantDataErased(erasure), at)
            .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{
        agent_says, at, complete, create, history, likert, message, submit, when,
    };

    /// An event that holds personal data carries a salt under its hash, derived from the
    /// session's secret: the hash an erased event keeps does not confirm a guess of what it
    /// held, because the salt and the secret are erased with it.
    #[tokio::test]
    async fn events_with_personal_data_are_salted_and_their_erased_form_keeps_no_salt() {
        use crate::codec;
        let events = when(vec![], create()).await.unwrap();
        let created = &events[0];
        let salt = created.salt.as_deref().expect("salted");
        assert_eq!(salt.len(), 32);
        let guess = codec::hash(
            &created.prev_hash,
            created.body.event_type(),
            &codec::payload(&created.body, created.at),
        );
        assert_ne!(
            guess, created.hash,
            "the content alone does not give the hash"
        );
        let stored = codec::encode(created);
        assert_eq!(stored.payload["salt"], salt);
        assert_eq!(
            codec::hash(
                &created.prev_hash,
                created.body.event_type(),
                &stored.payload
            ),
            created.hash
        );
        let erased = codec::erased::encode(created);
        assert!(erased.payload.get("salt").is_none(), "{}", erased.payload);
        assert!(
            erased.payload.get("chain_secret").is_none(),
            "{}",
            erased.payload
        );

        // An event with nothing personal in it is not salted.
        let started = when(vec![create()], C::Start(cmd::Start { at: at() }))
            .await
            .unwrap();
        assert!(started.iter().all(|e| e.salt.is_none()), "{started:?}");
        // The same commands give the same events: the aggregate draws nothing itself.
        assert_eq!(when(vec![], create()).await.unwrap(), events);
    }
    use crate::commands as cmd;
    use crate::commands::SessionCommand as C;
    use crate::erasure::{ErasedBy, Erasure};
    use crate::error::SessionError;
    use crate::events::{ConcludeReason, EventBody};

    fn erase(events: u64, head_hash: &str) -> C {
        C::RecordErasure(cmd::RecordErasure {
            erasure: Erasure {
                by: ErasedBy::Participant,
                reason: None,
                erased_events: events,
                erased_form_sha256: "00".repeat(32),
                content_verified: true,
            },
            head_hash: head_hash.into(),
            at: at(),
        })
    }

    fn ended() -> Vec<C> {
        vec![
            create(),
            C::Abandon(cmd::Abandon {
                reason: ConcludeReason::Withdrawn,
                at: at(),
            }),
        ]
    }

    #[tokio::test]
    async fn an_erasure_covering_every_event_of_an_ended_session_is_recorded() {
        let given = history(ended()).await;
        let head = given.last().unwrap().hash.clone();
        let events = when(ended(), erase(given.len() as u64, &head))
            .await
            .unwrap();
        assert!(matches!(
            &events[..],
            [e] if matches!(&e.body, EventBody::ParticipantDataErased(x) if x.by == ErasedBy::Participant)
        ));
        assert_eq!(events[0].prev_hash, head);
    }

    #[tokio::test]
    async fn a_running_session_is_withdrawn_and_erased_in_one_commit() {
        let given = vec![create(), C::Start(cmd::Start { at: at() })];
        let events = history(given.clone()).await;
        let head = events.last().unwrap().hash.clone();
        let written = when(given, erase(events.len() as u64, &head))
            .await
            .unwrap();
        let types: Vec<_> = written.iter().map(|e| e.body.event_type()).collect();
        assert_eq!(
            types,
            [
                "session.abandoned",
                "session.status_changed",
                "participant.data.erased"
            ]
        );
        assert!(matches!(
            written[0].body,
            EventBody::SessionAbandoned {
                reason: ConcludeReason::Withdrawn
            }
        ));
    }

    #[tokio::test]
    async fn an_erasure_that_misses_an_event_is_refused() {
        let given = history(ended()).await;
        let head = given.last().unwrap().hash.clone();
        let stale_count = when(ended(), erase(given.len() as u64 - 1, &head)).await;
        assert_eq!(stale_count, Err(SessionError::ErasureOutdated));
        let stale_head = when(ended(), erase(given.len() as u64, &given[0].hash)).await;
        assert_eq!(stale_head, Err(SessionError::ErasureOutdated));
    }

    #[tokio::test]
    async fn an_erased_session_takes_no_command_not_even_a_second_erasure() {
        let given = history(ended()).await;
        let head = given.last().unwrap().hash.clone();
        let mut erased = ended();
        erased.push(erase(given.len() as u64, &head));
        let all = history(erased.clone()).await;
        let again = erase(all.len() as u64, &all.last().unwrap().hash);
        assert_eq!(when(erased.clone(), again).await, Err(SessionError::Erased));
        let final_extraction = C::StartFinalExtraction(cmd::StartFinalExtraction {
            extraction_id: uuid::Uuid::nil(),
            at: at(),
        });
        assert_eq!(
            when(erased.clone(), final_extraction).await,
            Err(SessionError::Erased)
        );
        assert_eq!(
            when(erased, message(1, "hello")).await,
            Err(SessionError::Erased)
        );
    }

    #[tokio::test]
    async fn a_reason_is_bounded() {
        let given = history(ended()).await;
        let head = given.last().unwrap().hash.clone();
        let mut command = erase(given.len() as u64, &head);
        if let C::RecordErasure(cmd::RecordErasure { erasure, .. }) = &mut command {
            erasure.reason = Some("x".repeat(501));
        }
        assert!(matches!(
            when(ended(), command).await,
            Err(SessionError::InvalidValue { .. })
        ));
    }

    #[tokio::test]
    async fn a_withdrawal_abandons_a_running_session() {
        let given = vec![create(), C::Start(cmd::Start { at: at() })];
        let events = when(
            given,
            C::Abandon(cmd::Abandon {
                reason: ConcludeReason::Withdrawn,
                at: at(),
            }),
        )
        .await
        .unwrap();
        assert!(events.iter().any(|e| matches!(
            e.body,
            EventBody::SessionAbandoned {
                reason: ConcludeReason::Withdrawn
            }
        )));
    }

    #[tokio::test]
    async fn the_erased_form_of_every_event_holds_nothing_personal_and_erases_to_itself() {
        let mut commands = vec![create(), C::Start(cmd::Start { at: at() }), likert("i1")];
        let mut answer = submit("i1", serde_json::json!(4));
        if let C::SubmitInteraction(cmd::SubmitInteraction { client_context, .. }) = &mut answer {
            *client_context = Some(serde_json::json!({"note": "zebra context"}));
        }
        commands.push(answer);
        commands.extend(agent_says(50, true));
        commands.push(message(1, "zebra notebook words"));
        commands.extend(agent_says(60, true));
        commands.push(message(2, "more zebra words"));
        commands.push(complete());
        let events = history(commands).await;
        assert!(serde_json::to_string(&events).unwrap().contains("zebra"));
        for event in &events {
            let erased = event.body.without_personal_data();
            assert_eq!(erased.without_personal_data(), erased, "{erased:?}");
            let text = serde_json::to_string(&erased).unwrap();
            assert!(!text.contains("zebra") && !text.contains("p-7"), "{text}");
            assert!(
                !text.contains("You drink coffee") && !text.contains("Tell me more"),
                "{text}"
            );
        }
    }
}
