//! Erasure: the record that a participant's data is gone (`docs/privacy.md`). The rewriting of
//! the stored events is the store's (`codec::erased`); the rules are here.

use super::*;
use crate::erasure::Erasure;

impl Session {
    /// Records an erasure: only on an ended session (a withdrawal ends a running one first),
    /// once, and only when it covers every event so far — the caller erased the events it read,
    /// and one committed since would be left readable.
    pub(super) async fn record_erasure(
        &mut self,
        sink: &EventSink<Self>,
        erasure: Erasure,
        head_hash: &str,
        at: DateTime<Utc>,
    ) -> Result<(), SessionError> {
        if self.session_id.is_none() {
            return Err(SessionError::NotCreated);
        }
        if !self.status.is_terminal() {
            return Err(SessionError::InvalidState {
                status: self.status,
            });
        }
        if erasure.erased_events != self.events || head_hash != self.head_hash() {
            return Err(SessionError::ErasureOutdated);
        }
        crate::erasure::check_reason(erasure.reason.as_deref())?;
        self.emit(sink, EventBody::ParticipantDataErased(erasure), at)
            .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{at, create, history, message, when};
    use crate::commands::SessionCommand as C;
    use crate::erasure::{ErasedBy, Erasure};
    use crate::error::SessionError;
    use crate::events::{ConcludeReason, EventBody};

    fn erase(events: u64, head_hash: &str) -> C {
        C::RecordErasure {
            erasure: Erasure {
                by: ErasedBy::Participant,
                reason: None,
                erased_events: events,
                erased_form_sha256: "00".repeat(32),
                content_verified: true,
            },
            head_hash: head_hash.into(),
            at: at(),
        }
    }

    fn ended() -> Vec<C> {
        vec![
            create(),
            C::Abandon {
                reason: ConcludeReason::Withdrawn,
                at: at(),
            },
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
    async fn a_running_session_is_not_erased_before_it_ends() {
        let given = vec![create(), C::Start { at: at() }];
        let events = history(given.clone()).await;
        let head = events.last().unwrap().hash.clone();
        let refused = when(given, erase(events.len() as u64, &head)).await;
        assert!(matches!(refused, Err(SessionError::InvalidState { .. })));
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
        let final_extraction = C::StartFinalExtraction {
            extraction_id: uuid::Uuid::nil(),
            at: at(),
        };
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
        if let C::RecordErasure { erasure, .. } = &mut command {
            erasure.reason = Some("x".repeat(501));
        }
        assert!(matches!(
            when(ended(), command).await,
            Err(SessionError::InvalidValue { .. })
        ));
    }

    #[tokio::test]
    async fn a_withdrawal_abandons_a_running_session() {
        let given = vec![create(), C::Start { at: at() }];
        let events = when(
            given,
            C::Abandon {
                reason: ConcludeReason::Withdrawn,
                at: at(),
            },
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
}
