//! The audit of an erased session (`docs/privacy.md`, `docs/audit.md`), on both stores: `replay`
//! shows and exports nothing of what was erased, `verify` passes and says what it still proves
//! and what was erased, a rebuild from the erased log gives the stored views, and an edit of an
//! erased event is caught.

use interview_test_kit::app::{TestApp, RESEARCHER_TOKEN};
use interview_test_kit::both_stores;
use interview_test_kit::replay;
use interview_test_kit::Store;
use serde_json::Value;

const WORDS: &str = "Sunday evenings with a shared list";

// Long by design: one erasure audited step by step: bundles exported before it, the erasure, every
// replay view free of the erased words, verify naming the erasure and its head, a bundle exported
// and verified after, the old bundle linked (another session's not), a rebuild, then an edited
// erased event caught.
async fn an_erased_session_verifies_and_shows_nothing_erased(store: Store) {
    let f = TestApp::spawn_for_audit(store, |_| {}).await;
    let session = f.completed_session().await;
    let kept = f.completed_session().await;
    let url = &f.database_url();
    let (_, shown, _) = replay!(url, &["show", &session]);
    assert!(shown.contains(WORDS), "{shown}");
    // What an auditor exported before the erasure.
    let before = f.data_dir().join("before.jsonl");
    let other = f.data_dir().join("other.jsonl");
    for (id, path) in [(&session, &before), (&kept, &other)] {
        let (code, _, err) = replay!(url, &["export", id, "-o", path.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }

    let receipt: Value = f
        .send(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{session}/participant-data"),
            Some(RESEARCHER_TOKEN),
            Some(r#"{"reason": "ethics board request 17"}"#.into()),
        )
        .await
        .json()
        .await
        .unwrap();
    let head = receipt["head_hash"].as_str().unwrap();

    for args in [
        vec!["show", &session],
        vec!["show", &session, "--json"],
        vec!["at", &session, "--seq", "1000"],
        vec!["stream", &session],
    ] {
        let (code, out, err) = replay!(url, &args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(
            !out.contains(WORDS) && !out.contains("Sunday"),
            "{args:?}: {out}"
        );
    }
    let (code, out, _) = replay!(url, &["verify", &session]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("erased:") && out.contains("by the researcher"),
        "{out}"
    );
    assert!(
        out.contains("ethics board request 17") && out.contains("proven:"),
        "{out}"
    );
    assert!(out.contains(head), "{out}");
    let (code, out, _) = replay!(url, &["verify", &kept]);
    assert_eq!(code, 0);
    assert!(!out.contains("erased:"), "{out}");

    // An exported bundle holds nothing erased and verifies against the receipt's head.
    let bundle = f.data_dir().join("erased.jsonl");
    let (code, exported_head, _) =
        replay!(url, &["export", &session, "-o", bundle.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(exported_head.trim(), head);
    assert!(!std::fs::read_to_string(&bundle).unwrap().contains("Sunday"));
    let path = bundle.to_str().unwrap();
    let (code, out, _) = replay!(url, &["verify", "--bundle", path, "--expect-head", head]);
    assert_eq!(code, 0, "{out}");

    // The chain exported before links to the erased one; another session's does not.
    let (code, out, _) = replay!(
        url,
        &[
            "verify",
            &session,
            "--erased-from",
            before.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("linked:"), "{out}");
    let (code, out, _) = replay!(
        url,
        &["verify", &session, "--erased-from", other.to_str().unwrap()],
    );
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("is not the bundle's event"), "{out}");

    // The views rebuilt from the erased log are the stored ones.
    let (code, out, _) = replay!(url, &["rebuild", &session]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = replay!(url, &["verify", "--all"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 session(s) checked, 0 failed"), "{out}");

    // An erased event edited, or the erasure record's reason: caught, at that event.
    let message =
        format!("aggregate_id = '{session}' AND event_type = 'participant.message.created'");
    f.exec(
        &format!("UPDATE events SET payload = json_set(payload, '$.content', 'forged') WHERE {message}"),
        &format!("UPDATE events SET payload = jsonb_set(payload, '{{content}}', '\"forged\"') WHERE {message}"),
    )
    .await;
    let (code, out, _) = replay!(url, &["verify", &session]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("are not the ones erased"), "{out}");
}

/// A session's content is encrypted under its data key: `replay` opens it with the server's
/// key-encryption key, and without it shows nothing of the content and fails to verify, saying
/// why.
async fn replay_reads_content_only_with_the_data_key(store: Store) {
    const KEY: &str = "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";
    let f = TestApp::spawn_for_audit(store, |s| {
        s.data_key = Some(interview_runtime::settings::Secret(KEY.into()))
    })
    .await;
    let session = f.completed_session().await;
    let url = &f.database_url();
    assert!(
        !f.data_dir().join("data.key").exists(),
        "no key file when the key is given"
    );

    let (code, out, err) = replay!(url, &["verify", &session]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("encrypted and does not open here"), "{out}");
    let (_, shown, _) = replay!(url, &["show", &session]);
    assert!(!shown.contains(WORDS), "{shown}");

    let key = [("DATA_KEY", KEY)];
    let (code, out, err) = replay!(url, &["verify", &session], &key);
    assert_eq!(code, 0, "{out}{err}");
    let (code, shown, err) = replay!(url, &["show", &session], &key);
    assert_eq!(code, 0, "{err}");
    assert!(shown.contains(WORDS), "{shown}");
}

both_stores!(
    an_erased_session_verifies_and_shows_nothing_erased,
    replay_reads_content_only_with_the_data_key,
);
