//! The `replay` binary against a real log written by the real server, on both stores (the
//! PostgreSQL one on the cluster named by `TEST_DATABASE_URL`, as `scripts/test` starts it).

use interview_test_kit::app::TestApp;
use interview_test_kit::both_stores;
use interview_test_kit::replay;
use interview_test_kit::Store;

use std::process::Command;

use interview_projections::columns::Kind;
use serde_json::Value;

// Long by design: one audit on one log, in the order an auditor works: verify all, show (text and
// JSON), at, stream, export a bundle and verify it (right head, wrong head, tampered), drifted
// views reported and rebuilt, an edited, a reordered and a trimmed log caught, then each error's
// exit code; split, the server and its sessions would travel between helpers.
async fn the_auditor_can_show_verify_export_rebuild_and_replay_a_session(store: Store) {
    let f = TestApp::spawn_for_audit(store, |_| {}).await;
    f.interviewed_session().await;
    let session = f.interviewed_session().await;
    let url = &f.database_url();

    let (code, out, _) = replay!(url, &["verify", "--all"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 session(s) checked, 0 failed"), "{out}");

    let (code, out, _) = replay!(url, &["show", &session]);
    assert_eq!(code, 0);
    assert!(
        out.contains("session.created")
            && out.contains("agent.decision.recorded")
            && out.contains("Consent must be given"),
        "{out}"
    );
    let (_, json_out, _) = replay!(url, &["show", &session, "--json"]);
    let lines: Vec<Value> = json_out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    // Every line has the whole payload (a version 3 one with what it left out put back), its
    // stored version, and its command's metadata.
    assert!(
        lines.iter().any(|l| l["event_version"] == "3"),
        "{json_out}"
    );
    assert!(
        lines.iter().all(|l| l["payload"]["at"].is_string()
            && l["metadata"]["actor"].is_string()
            && l["metadata"]["request_id"].is_string()),
        "{json_out}"
    );
    assert!(lines
        .iter()
        .filter(|l| l["event_type"] == "interaction.rendered")
        .all(|l| l["payload"]["interaction"]["interaction_id"].is_string()));

    let (code, out, _) = replay!(url, &["at", &session, "--seq", "1"]);
    assert_eq!(code, 0);
    let at: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(at["session_state"]["status"], "created");
    // At its last event, the fields researchers read (a view of their own, not in the document).
    let last = lines.len().to_string();
    let (code, out, _) = replay!(url, &["at", &session, "--seq", &last]);
    assert_eq!(code, 0);
    let at: Value = serde_json::from_str(&out).unwrap();
    let read = f.researcher_view(&session).await;
    assert!(
        read["extracted_fields"]["planning_method"].is_object(),
        "{read}"
    );
    assert_eq!(
        at["session_state"]["extracted_fields"],
        read["extracted_fields"]
    );

    let (code, out, _) = replay!(url, &["stream", &session]);
    assert_eq!(code, 0);
    assert!(out.starts_with("event: session.status\nid: 1\n"), "{out}");
    assert!(out.contains("event: interaction.render") && out.contains("event: message.completed"));

    // A portable bundle verifies with no database, against its head.
    let bundle = f.data_dir().join("bundle.jsonl");
    let (code, head, _) = replay!(url, &["export", &session, "-o", bundle.to_str().unwrap()]);
    assert_eq!(code, 0);
    let head = head.trim().to_string();
    let nowhere = "postgres://127.0.0.1:1/none";
    let (code, out, _) = replay!(
        nowhere,
        &[
            "verify",
            "--bundle",
            bundle.to_str().unwrap(),
            "--expect-head",
            &head,
        ],
    );
    assert_eq!(code, 0, "{out}");
    let (code, _, _) = replay!(
        nowhere,
        &[
            "verify",
            "--bundle",
            bundle.to_str().unwrap(),
            "--expect-head",
            "0000",
        ],
    );
    assert_eq!(code, 1);
    let (code, out, _) = replay!(nowhere, &["show", "--bundle", bundle.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("session.created"));
    let tampered = std::fs::read_to_string(&bundle)
        .unwrap()
        .replace("shared list", "paper list");
    let tampered_path = f.data_dir().join("tampered.jsonl");
    std::fs::write(&tampered_path, tampered).unwrap();
    let (code, out, _) = replay!(
        nowhere,
        &["verify", "--bundle", tampered_path.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not match the payload"), "{out}");

    // Read models that drift from the log are reported, and rebuilt.
    f.exec(
        &format!("UPDATE session_state SET state = json_set(state, '$.turn_count', 99) WHERE session_id = '{session}'"),
        &format!("UPDATE session_state SET state = jsonb_set(state, '{{turn_count}}', '99') WHERE session_id = '{session}'"),
    )
    .await;
    let (code, out, _) = replay!(url, &["verify", &session]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("column state differs at .turn_count: stored 99"),
        "{out}"
    );
    // So is a study overview that drifted.
    let overview = f.overview().await;
    assert_eq!(overview["funnel"]["created"], 2, "{overview}");
    f.exec_both("UPDATE study_overview SET n = n + 5").await;
    assert_ne!(f.overview().await, overview);
    let (code, out, _) = replay!(url, &["verify", "--all"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAILED    study overviews")
            && out.contains("overview count created is 7, its sessions add up to 2"),
        "{out}"
    );
    let (code, out, _) = replay!(url, &["rebuild", "--all"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("events/s"), "{out}");
    assert_eq!(f.overview().await, overview, "the overview summed again");
    let (code, out, _) = replay!(url, &["verify", "--all"]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = replay!(url, &["verify", &session]);
    assert_eq!(code, 0, "{out}");

    // A tampered log is caught.
    f.exec(
        &format!("UPDATE events SET payload = json_set(payload, '$.content', 'We never plan.') WHERE aggregate_id = '{session}' AND event_type = 'participant.message.created'"),
        &format!("UPDATE events SET payload = jsonb_set(payload, '{{content}}', '\"We never plan.\"') WHERE aggregate_id = '{session}' AND event_type = 'participant.message.created'"),
    )
    .await;
    let (code, out, _) = replay!(url, &["verify", &session]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not match the payload"), "{out}");

    // So are a reordered log and a deleted event (in other sessions, each untouched before).
    let second = f.interviewed_session().await;
    let third = f.interviewed_session().await;
    for id in [&second, &third] {
        assert_eq!(replay!(url, &["verify", id]).0, 0);
    }
    for (from, to) in [(2, 1000), (3, 2), (1000, 3)] {
        f.exec_both(&format!(
            "UPDATE events SET sequence = {to} WHERE aggregate_id = '{second}' AND sequence = {from}"
        ))
        .await;
    }
    let (code, out, _) = replay!(url, &["verify", &second]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("the previous hash"),
        "a reordered log breaks the chain: {out}"
    );
    // Row 3 may hold several events (the run's first phase change and the events in clear
    // around its decision): all of them go, and the next row's first event follows the gap.
    let next_row: i64 = interview_projections::on_db!(read(f.db()), |pool| {
        sqlx::query_scalar(
            "SELECT MIN(sequence) FROM events WHERE aggregate_id = $1 AND sequence > 3",
        )
        .bind(&third)
        .fetch_one(pool)
        .await
        .unwrap()
    });
    f.exec_both(&format!(
        "DELETE FROM events WHERE aggregate_id = '{third}' AND sequence = 3"
    ))
    .await;
    let (code, out, _) = replay!(url, &["verify", &third]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("expected sequence 3, found {next_row}")),
        "a deleted row leaves a gap: {out}"
    );

    // Clear errors and distinct exit codes.
    let (code, _, err) = replay!(url, &["show", "no-such-session"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no session"));
    let (code, _, _) = replay!(nowhere, &["show", &session]);
    assert_eq!(code, 4);
    let (code, _, _) = replay!(url, &["verify", "--bundle", "/nonexistent/bundle.jsonl"]);
    assert_eq!(code, 5);
    let _ = std::fs::remove_dir_all(f.data_dir());
}

/// `replay show … | head`: a reader that closes the pipe early ends replay quietly, without a
/// panic message.
async fn a_closed_pipe_ends_replay_quietly(store: Store) {
    use std::io::Read;
    use std::process::Stdio;
    let f = TestApp::spawn_for_audit(store, |_| {}).await;
    let session = f.interviewed_session().await;
    for args in [
        vec!["show", session.as_str()],
        vec!["stream", session.as_str()],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_replay"))
            .args(&args)
            .env("DATABASE_URL", f.database_url())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Closed before replay writes a byte, so its first write finds no reader.
        drop(child.stdout.take());
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(status.code(), Some(0), "{args:?}: {stderr}");
    }
}

/// A value of another kind written into a column, as a tamperer would.
fn tamper_sql(store: Store, table: &str, column: &str, kind: Kind, session: &str) -> String {
    let set = match (kind, store) {
        // A CHECK constraint keeps roles to these two; swap them.
        (Kind::Text, _) if column == "role" => {
            "role = CASE WHEN role = 'user' THEN 'assistant' ELSE 'user' END".to_string()
        }
        (Kind::Text, _) => format!("{column} = COALESCE({column}, '') || 'x'"),
        (Kind::Int, _) if column == "seq" => format!("{column} = {column} + 100000"),
        (Kind::Int, _) => format!("{column} = {column} + 1"),
        (Kind::Bool, _) => format!("{column} = NOT COALESCE({column}, FALSE)"),
        (Kind::Json, Store::Sqlite) => format!("{column} = '{{\"tampered\":true}}'"),
        (Kind::Json, Store::Postgres) => format!("{column} = '{{\"tampered\":true}}'::jsonb"),
        (Kind::Time, _) => format!("{column} = '2001-02-03 04:05:06+00:00'"),
        // No view column holds bytes today; a future one is tampered with like the others.
        (Kind::Bytes, Store::Sqlite) => format!("{column} = X'00'"),
        (Kind::Bytes, Store::Postgres) => format!("{column} = '\\x00'::bytea"),
    };
    let row = if table == "transcript" {
        format!(" AND seq = (SELECT MIN(seq) FROM {table} WHERE session_id = '{session}')")
    } else if table == "session_fields" {
        format!(
            " AND field_id = (SELECT MIN(field_id) FROM {table} WHERE session_id = '{session}')"
        )
    } else {
        String::new()
    };
    format!("UPDATE {table} SET {set} WHERE session_id = '{session}'{row}")
}

/// Every column of every read model, a stored row deleted, an event's version: each tamper is
/// caught and named; a rebuild puts it right. Event metadata is said to be unaudited.
// Long by design: one completed session tampered with column by column across all five read models,
// each tamper caught, named and rebuilt; then a deleted results row, an event's version, forged
// metadata (passed, said to be unaudited), a deleted first event and a deleted log, each checked in
// turn.
async fn every_stored_column_and_field_is_audited(store: Store) {
    use interview_projections::columns::{
        FIELD_COLUMNS, FIELD_KINDS, OVERVIEW_COLUMNS, OVERVIEW_KINDS, RESULT_COLUMNS, RESULT_KINDS,
        STATE_COLUMNS, STATE_KINDS, TRANSCRIPT_COLUMNS, TRANSCRIPT_KINDS,
    };
    let f = TestApp::spawn_for_audit(store, |_| {}).await;
    let session = f.completed_session().await;
    let url = &f.database_url();
    let (code, out, _) = replay!(url, &["verify", &session]);
    assert_eq!(code, 0, "{out}");
    let tables: [(&str, &[&str], &[Kind]); 5] = [
        ("session_state", &STATE_COLUMNS, &STATE_KINDS),
        ("transcript", &TRANSCRIPT_COLUMNS, &TRANSCRIPT_KINDS),
        ("session_fields", &FIELD_COLUMNS, &FIELD_KINDS),
        ("results", &RESULT_COLUMNS, &RESULT_KINDS),
        ("session_overview", &OVERVIEW_COLUMNS, &OVERVIEW_KINDS),
    ];
    let restore = || async {
        for table in [
            "session_state",
            "transcript",
            "session_fields",
            "results",
            "session_overview",
        ] {
            f.exec_both(&format!(
                "DELETE FROM {table} WHERE session_id LIKE '{session}%'"
            ))
            .await;
        }
        let (code, out, _) = replay!(url, &["rebuild", &session]);
        assert_eq!(code, 0, "{out}");
        let (code, out, _) = replay!(url, &["verify", &session]);
        assert_eq!(code, 0, "a rebuild restores the views: {out}");
    };
    let mut caught = 0;
    for (table, columns, kinds) in tables {
        for (column, kind) in columns.iter().zip(kinds.iter()) {
            f.exec_both(&tamper_sql(store, table, column, *kind, &session))
                .await;
            let (code, out, _) = replay!(url, &["verify", &session]);
            assert_eq!(code, 1, "{table}.{column} tampered, yet: {out}");
            assert!(out.contains(table), "{table}.{column}: {out}");
            if !["session_id", "seq", "field_id"].contains(column) {
                assert!(
                    out.contains(&format!("column {column} ")),
                    "{table}.{column}: {out}"
                );
            }
            caught += 1;
            restore().await;
        }
    }
    assert_eq!(caught, 15 + 8 + 3 + 9 + 3);

    // A results row deleted (what researchers export) is missing.
    f.exec_both(&format!(
        "DELETE FROM results WHERE session_id = '{session}'"
    ))
    .await;
    let (code, out, _) = replay!(url, &["verify", &session]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("results: missing from the store"), "{out}");
    restore().await;

    // An event's stored version is under the hash.
    f.exec_both(&format!(
        "UPDATE events SET event_version = '3' WHERE aggregate_id = '{session}' AND sequence = 2"
    ))
    .await;
    let (code, out, _) = replay!(url, &["verify", &session]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("event 2:") && out.contains("does not match the payload"),
        "{out}"
    );
    f.exec_both(&format!(
        "UPDATE events SET event_version = '2' WHERE aggregate_id = '{session}' AND sequence = 2"
    ))
    .await;

    // Metadata is outside the hash: verify passes and says so.
    f.exec(
        &format!("UPDATE events SET metadata = '{{\"actor\":\"forged\"}}' WHERE aggregate_id = '{session}'"),
        &format!("UPDATE events SET metadata = '{{\"actor\":\"forged\"}}'::jsonb WHERE aggregate_id = '{session}'"),
    )
    .await;
    let (code, out, _) = replay!(url, &["verify", &session]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("not audited: event metadata"), "{out}");

    // A deleted first event, then a log deleted outright under its views: `--all` sees both.
    f.exec_both(&format!(
        "DELETE FROM events WHERE aggregate_id = '{session}' AND sequence = 1"
    ))
    .await;
    let (code, out, _) = replay!(url, &["verify", "--all"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("FAILED    {session}")), "{out}");
    f.exec_both(&format!(
        "DELETE FROM events WHERE aggregate_id = '{session}'"
    ))
    .await;
    let (code, out, _) = replay!(url, &["verify", "--all"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the log has no event of it"), "{out}");
    let _ = std::fs::remove_dir_all(f.data_dir());
}

both_stores!(
    the_auditor_can_show_verify_export_rebuild_and_replay_a_session,
    a_closed_pipe_ends_replay_quietly,
    every_stored_column_and_field_is_audited,
);
