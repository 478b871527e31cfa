//! A running server on a fresh database of either store, for the `replay` tests that audit what
//! it wrote (included by the test binaries that drive a server: `#[path] mod fixture`).
#![allow(dead_code)] // not every test binary uses every helper

use std::path::PathBuf;

use interview_runtime::settings::Secret;
use interview_runtime::{Application, Settings};
use serde_json::{json, Value};

pub use interview_test_kit::Store;

/// A running server on a fresh database of either store.
pub struct Fixture {
    pub store: Store,
    pub url: String,
    pub dir: PathBuf,
    pub base: String,
    pub interviewer: std::sync::Arc<interview_runtime::interviewer::Interviewer>,
    pub http: reqwest::Client,
}

impl Fixture {
    pub async fn start(store: Store) -> Self {
        Self::start_with(store, |_| {}).await
    }

    /// [`Fixture::start`] with its settings changed first.
    pub async fn start_with(store: Store, customize: impl FnOnce(&mut Settings)) -> Self {
        let dir =
            std::env::temp_dir().join(format!("replay-test-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = match store {
            Store::Sqlite => format!("sqlite://{}", dir.join("interview.db").display()),
            Store::Postgres => crate::common::fresh_postgres_database().await,
        };
        let settings = Settings {
            bind: "127.0.0.1:0".into(),
            database_url: Some(url.clone()),
            data_dir: dir.clone(),
            researcher_tokens: vec![Secret("r".into())],
            // The post-session extraction runs within a second, so sessions settle quickly.
            sweep_interval_secs: 1,
            ..Settings::default()
        };
        let mut settings = settings;
        customize(&mut settings);
        let app = Application::build(settings).await.unwrap();
        let base = format!("http://127.0.0.1:{}", app.port());
        let interviewer = app.state().interviewer.clone();
        tokio::spawn(app.run_until_stopped());
        Self {
            store,
            url,
            dir,
            base,
            interviewer,
            http: reqwest::Client::new(),
        }
    }

    /// A demo session past consent with one answered question; returns its id.
    pub async fn interviewed_session(&self) -> String {
        self.interviewed_session_with_token().await.0
    }

    /// A demo session ended by the participant (completed with its summary unconfirmed), once
    /// nothing more is written to it (the post-session extraction included); returns its id.
    pub async fn completed_session(&self) -> String {
        let (session, token) = self.interviewed_session_with_token().await;
        for _ in 0..2 {
            self.http
                .post(format!("{}/api/sessions/{session}/end", self.base))
                .bearer_auth(&token)
                .header("content-type", "application/json")
                .send()
                .await
                .unwrap();
            assert!(self
                .interviewer
                .wait_until_idle(&session, std::time::Duration::from_secs(20))
                .await
                .unwrap());
        }
        let mut last = (String::new(), 0);
        for _ in 0..200 {
            let events = self
                .http
                .get(format!("{}/api/sessions/{session}/events", self.base))
                .bearer_auth("r")
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            // The post-session extraction's completion comes after the session's.
            let done = events.find("session.completed").is_some_and(|end| {
                events
                    .rfind("extraction.completed")
                    .is_some_and(|x| x > end)
            });
            if done && events == last.0 {
                last.1 += 1;
                if last.1 >= 5 {
                    return session;
                }
            } else {
                last = (events, 0);
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("the session never settled");
    }

    /// The same, with its participant token.
    pub async fn interviewed_session_with_token(&self) -> (String, String) {
        let (base, http) = (&self.base, &self.http);
        let created: Value = http
            .post(format!("{base}/api/public/studies/demo/sessions"))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = created["session_id"].as_str().unwrap().to_string();
        let token = created["participant_token"].as_str().unwrap().to_string();
        assert!(self
            .interviewer
            .wait_until_idle(&session, std::time::Duration::from_secs(20))
            .await
            .unwrap());
        let s: Value = http
            .get(format!("{base}/api/sessions/{session}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = s["pending_interaction"]["interaction_id"]
            .as_str()
            .unwrap()
            .to_string();
        http.post(format!(
            "{base}/api/sessions/{session}/interactions/{id}/submit"
        ))
        .bearer_auth(&token)
        .json(&json!({"status": "submitted", "value": {"accepted": true}}))
        .send()
        .await
        .unwrap();
        assert!(self
            .interviewer
            .wait_until_idle(&session, std::time::Duration::from_secs(20))
            .await
            .unwrap());
        http.post(format!("{base}/api/sessions/{session}/messages"))
            .bearer_auth(&token)
            .json(
                &json!({"content": "We plan on Sunday evenings with a shared list on our phones."}),
            )
            .send()
            .await
            .unwrap();
        assert!(self
            .interviewer
            .wait_until_idle(&session, std::time::Duration::from_secs(20))
            .await
            .unwrap());
        (session, token)
    }
}

impl Fixture {
    /// Runs SQL against the fixture's database: `sqlite` on SQLite, `postgres` on PostgreSQL.
    pub async fn exec(&self, sqlite: &str, postgres: &str) {
        use sqlx::Connection;
        match self.store {
            Store::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query(sqlite).execute(&mut conn).await.unwrap();
            }
            Store::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query(postgres).execute(&mut conn).await.unwrap();
            }
        }
    }

    /// The same SQL on both stores.
    pub async fn exec_both(&self, sql: &str) {
        self.exec(sql, sql).await;
    }

    /// The demo study's overview, as a researcher reads it.
    pub async fn overview(&self) -> serde_json::Value {
        let get = |path: String| {
            let request = self
                .http
                .get(format!("{}{path}", self.base))
                .bearer_auth("r");
            async move {
                request
                    .send()
                    .await
                    .unwrap()
                    .json::<serde_json::Value>()
                    .await
                    .unwrap()
            }
        };
        let studies = get("/api/studies".into()).await;
        let id = studies["studies"][0]["study_id"]
            .as_str()
            .unwrap()
            .to_string();
        get(format!("/api/studies/{id}/overview")).await
    }
}
