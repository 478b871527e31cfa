//! `replay verify --access-log` against the access log the real server wrote, on both stores:
//! the chain holds as written, and an edited or a deleted row breaks it.

use interview_test_kit::app::{json_of, TestApp, RESEARCHER_TOKEN};
use interview_test_kit::both_stores;
use interview_test_kit::replay;
use interview_test_kit::Store;
use serde_json::json;

/// A server whose access log holds a few researchers' requests: a researcher added, their
/// reads, a refusal.
async fn logged(store: Store) -> TestApp {
    let app = TestApp::spawn(store).await;
    let studies = json_of(app.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await;
    let study = studies["studies"][0]["study_id"]
        .as_str()
        .unwrap()
        .to_string();
    let added = app
        .post(
            "/api/researchers",
            Some(RESEARCHER_TOKEN),
            &json!({"name": "Vera", "roles": [{"study_id": study, "role": "viewer"}]}),
        )
        .await;
    let token = json_of(added).await["token"].as_str().unwrap().to_string();
    for path in [
        format!("/api/studies/{study}"),
        format!("/api/studies/{study}/sessions"),
        format!("/api/studies/{study}/results"),
    ] {
        app.get(&path, Some(&token)).await;
    }
    app
}

async fn the_access_log_verifies_as_written(store: Store) {
    let app = logged(store).await;
    let (code, out, err) = replay!(&app.database_url(), &["verify", "--access-log"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("OK        access log: 5 row(s), head "),
        "{out}"
    );
}

async fn an_edited_row_breaks_the_chain(store: Store) {
    let app = logged(store).await;
    // The refusal (403) made to look like a read.
    app.exec_both("UPDATE access_log SET status = 200 WHERE status = 403")
        .await;
    let (code, out, _) = replay!(&app.database_url(), &["verify", "--access-log"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAILED    access log at row 5: its fields do not give its hash"),
        "{out}"
    );
}

async fn a_deleted_row_breaks_the_chain(store: Store) {
    let app = logged(store).await;
    app.exec_both("DELETE FROM access_log WHERE seq = 3").await;
    let (code, out, _) = replay!(&app.database_url(), &["verify", "--access-log"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAILED    access log at row 4: rows 3 to 3 are missing"),
        "{out}"
    );
}

both_stores!(
    the_access_log_verifies_as_written,
    an_edited_row_breaks_the_chain,
    a_deleted_row_breaks_the_chain,
);
