//! What a session announces to its study's webhooks (`crate::notice`): given a history, when a
//! command commits, then the notices its events carry.

use uuid::Uuid;

use super::tests::{at, complete, create, history};
use crate::commands as cmd;
use crate::commands::SessionCommand as C;
use crate::events::{ConcludeReason, SessionEvent};
use crate::notice::{NoticeKind, SessionNotice};
use crate::Session;

/// The notices `command` announces after `given`, with the sequences its events get.
async fn announced(given: Vec<C>, command: C) -> Vec<SessionNotice> {
    let before = history(given.clone()).await;
    let mut all = given;
    all.push(command);
    let after = history(all).await;
    let session = Session::from_events(after.iter().cloned());
    let new: Vec<(u64, &SessionEvent)> = after
        .iter()
        .enumerate()
        .skip(before.len())
        .map(|(i, e)| (i as u64 + 1, e))
        .collect();
    session.notices(new)
}

fn start() -> C {
    C::Start(cmd::Start { at: at() })
}

fn final_extraction() -> Vec<C> {
    let extraction_id = Uuid::from_u128(77);
    vec![
        C::StartFinalExtraction(cmd::StartFinalExtraction {
            extraction_id,
            at: at(),
        }),
        C::CompleteFinalExtraction(cmd::CompleteFinalExtraction {
            extraction_id,
            fields: vec![],
            decided_by: None,
            at: at(),
        }),
    ]
}

#[tokio::test]
async fn a_completed_session_is_announced_once_its_final_extraction_is_in() {
    let given = vec![create(), start()];
    assert_eq!(announced(given.clone(), complete()).await, vec![]);
    let mut done = given;
    done.push(complete());
    let [claim, finish] = <[C; 2]>::try_from(final_extraction()).unwrap();
    assert_eq!(announced(done.clone(), claim.clone()).await, vec![]);
    done.push(claim);
    let notices = announced(done.clone(), finish).await;
    let sequence = history(done).await.len() as u64 + 1;
    assert_eq!(
        notices,
        vec![SessionNotice {
            kind: NoticeKind::SessionCompleted,
            sequence,
            at: at(),
        }]
    );
}

#[tokio::test]
async fn an_abandoned_session_is_announced_with_the_event_that_ends_it() {
    let abandon = C::Abandon(cmd::Abandon {
        reason: ConcludeReason::Timeout,
        at: at(),
    });
    let notices = announced(vec![create(), start()], abandon).await;
    assert_eq!(
        notices.iter().map(|n| n.kind).collect::<Vec<_>>(),
        [NoticeKind::SessionAbandoned]
    );
}

#[tokio::test]
async fn a_preview_announces_nothing() {
    let C::Create(mut preview) = create() else {
        unreachable!()
    };
    preview.preview = true;
    let mut given = vec![C::Create(preview), start(), complete()];
    given.extend(final_extraction());
    let last = given.pop().unwrap();
    assert_eq!(announced(given, last).await, vec![]);
}

#[test]
fn kinds_are_named_as_receivers_see_them() {
    let names: Vec<&str> = NoticeKind::all().map(NoticeKind::as_str).collect();
    assert_eq!(
        names,
        [
            "session.completed",
            "session.abandoned",
            "participant.data.erased",
            "study.paused",
            "study.resumed"
        ]
    );
    for kind in NoticeKind::all() {
        assert_eq!(kind.as_str().parse::<NoticeKind>().unwrap(), kind);
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
    }
}
