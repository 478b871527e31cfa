//! The real server on port 0 against a fresh database (a temp SQLite file, or a new PostgreSQL
//! database on the cluster named by `TEST_DATABASE_URL`) — zero-to-production's `TestApp` — with
//! typed helpers for the routes tests call most, and sessions in the states tests start from.

use std::path::PathBuf;

pub use crate::widget_values::typical_value;

use actix_web::web;
use interview_projections::Db;
use interview_runtime::settings::Secret;
use interview_runtime::state::AppState;
use interview_runtime::{Application, Settings};
use reqwest::{Response, StatusCode};
use serde_json::{json, Value};

pub use crate::{fresh_postgres_database, paths, Store};

pub const RESEARCHER_TOKEN: &str = "test-researcher-token";

pub struct TestApp {
    pub store: Store,
    pub address: String,
    pub client: reqwest::Client,
    pub state: web::Data<AppState>,
    pub guards: web::Data<interview_runtime::http::guards::Guards>,
    data_dir: PathBuf,
    /// Whether the kit made `data_dir` for this server alone (then it goes with the server; a
    /// directory a test named, or shares with another server, stays).
    owns_data_dir: bool,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if self.owns_data_dir {
            let _ = std::fs::remove_dir_all(&self.data_dir);
        }
    }
}

impl TestApp {
    pub async fn spawn(store: Store) -> Self {
        Self::spawn_with(store, |_| {}).await
    }

    pub async fn spawn_with(store: Store, customize: impl FnOnce(&mut Settings)) -> Self {
        if std::env::var_os("TEST_LOG").is_some() {
            interview_runtime::telemetry::init(Default::default());
        }
        let data_dir =
            std::env::temp_dir().join(format!("interview-test-{}", uuid::Uuid::new_v4().simple()));
        let database_url = match store {
            Store::Sqlite => None,
            Store::Postgres => Some(fresh_postgres_database().await),
        };
        let mut settings = Settings {
            bind: "127.0.0.1:0".into(),
            database_url,
            data_dir: data_dir.clone(),
            researcher_tokens: vec![Secret(RESEARCHER_TOKEN.into())],
            db_max_connections: 8,
            ..Settings::default()
        };
        customize(&mut settings);
        // Where the server keeps its files, as customised; there from the start on either store,
        // for files a test writes beside the server's (on SQLite the server makes it, private).
        let owns_data_dir = settings.data_dir == data_dir;
        let data_dir = settings.data_dir.clone();
        if store == Store::Postgres {
            std::fs::create_dir_all(&data_dir).expect("the data directory");
        }
        let app = Application::build(settings)
            .await
            .expect("the server starts");
        let address = format!("http://127.0.0.1:{}", app.port());
        let state = app.state();
        let guards = app.guards();
        tokio::spawn(app.run_until_stopped());
        Self {
            store,
            address,
            // Below the server's idle keep-alive, so a pooled connection is never reused just
            // as the server closes it.
            client: reqwest::Client::builder()
                .pool_idle_timeout(std::time::Duration::from_secs(30))
                .build()
                .expect("an HTTP client"),
            state,
            guards,
            data_dir,
            owns_data_dir,
        }
    }

    /// A server for the audit tests: [`TestApp::spawn_with`], its sweeper running every second
    /// so a completed session's post-session extraction is written soon.
    pub async fn spawn_for_audit(store: Store, customize: impl FnOnce(&mut Settings)) -> Self {
        Self::spawn_with(store, |s| {
            s.sweep_interval_secs = 1;
            customize(s);
        })
        .await
    }

    /// A second server on this one's database, on either store: another process beside it
    /// (scale-out on PostgreSQL), or a restart or upgrade seen from the database's side.
    pub async fn spawn_on_same_database(&self) -> TestApp {
        let store = self.store;
        let url = self.state.settings.database_url.clone();
        let dir = self.data_dir.clone();
        TestApp::spawn_with(store, move |s| match store {
            Store::Postgres => {
                s.database_url = url;
                s.demo_study = false;
            }
            Store::Sqlite => s.data_dir = dir,
        })
        .await
    }

    /// The URL of the server's database, for tools run beside it (`replay`).
    pub fn database_url(&self) -> String {
        self.state.settings.effective_database_url()
    }

    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    pub fn db(&self) -> &Db {
        &self.state.db
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Response {
        let mut req = self.client.get(self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.expect("request sent")
    }

    /// A session's raw event log as a researcher reads it (`GET …/events`).
    pub async fn event_log(&self, session: &str) -> String {
        self.get(&paths::events(session), Some(RESEARCHER_TOKEN))
            .await
            .text()
            .await
            .unwrap()
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> Response {
        self.send(reqwest::Method::POST, path, token, Some(body.to_string()))
            .await
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<String>,
    ) -> Response {
        let mut req = self
            .client
            .request(method, self.url(path))
            .header("content-type", "application/json");
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        req.send().await.expect("request sent")
    }

    /// Creates and publishes a study; returns (study_id, public_slug, the publish response).
    pub async fn publish_study(&self, definition: &Value) -> (String, String, Value) {
        let created = self
            .post("/api/studies", Some(RESEARCHER_TOKEN), definition)
            .await;
        assert_eq!(created.status(), StatusCode::CREATED);
        let id = json_of(created).await["study_id"]
            .as_str()
            .unwrap()
            .to_string();
        let published = self
            .post(&paths::publish(&id), Some(RESEARCHER_TOKEN), &json!({}))
            .await;
        assert_eq!(published.status(), StatusCode::OK);
        let body = json_of(published).await;
        (id, body["public_slug"].as_str().unwrap().to_string(), body)
    }

    /// The demo study's id (published at start-up under the slug `demo`).
    pub async fn demo_study_id(&self) -> String {
        let studies = json_of(self.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await;
        studies["studies"]
            .as_array()
            .expect("a list of studies")
            .iter()
            .find(|s| s["public_slug"] == "demo")
            .expect("the demo study")["study_id"]
            .as_str()
            .expect("an id")
            .to_string()
    }

    /// Starts a session on `slug`; returns (session_id, participant_token).
    pub async fn create_session(&self, slug: &str) -> (String, String) {
        let res = self.post(&paths::join(slug), None, &json!({})).await;
        assert_eq!(res.status(), StatusCode::CREATED);
        let body = json_of(res).await;
        (
            body["session_id"].as_str().unwrap().to_string(),
            body["participant_token"].as_str().unwrap().to_string(),
        )
    }

    /// Starts a session on `slug` and accepts its consent, so the interviewer has asked its
    /// first question; returns (session_id, participant_token).
    pub async fn interviewing(&self, slug: &str) -> (String, String) {
        let (session, token) = self.create_session(slug).await;
        let s = self.run(&session).await;
        assert_eq!(s["pending_interaction"]["type"], "consent", "{s}");
        self.answer(&session, &token, &s, json!({"accepted": true}))
            .await;
        let s = self.run(&session).await;
        assert_eq!(s["status"], "waiting_for_user", "{s}");
        (session, token)
    }

    /// Answers the interviewer (long, concrete answers; a typical value for each widget) until a
    /// widget of `kind` is pending; returns the session then, as a researcher reads it.
    pub async fn drive_to_widget(&self, session: &str, token: &str, kind: &str) -> Value {
        for _ in 0..30 {
            let s = self.run(session).await;
            let pending = &s["pending_interaction"];
            if pending["type"] == kind {
                return s;
            }
            assert!(
                ["waiting_for_user", "waiting_for_tool"].contains(&s["status"].as_str().unwrap()),
                "{s}"
            );
            if pending.is_null() {
                let res = self
                    .post_message(
                        session,
                        token,
                        "Last Sunday I sat down with my partner, checked the fridge and wrote a long list on my phone before driving to the market.",
                    )
                    .await;
                assert_eq!(res.status(), StatusCode::ACCEPTED, "{s}");
            } else {
                self.answer(session, token, &s, typical_value(pending))
                    .await;
            }
        }
        panic!("no {kind} widget was shown");
    }

    pub async fn post_message(&self, session: &str, token: &str, content: &str) -> Response {
        self.post(
            &paths::messages(session),
            Some(token),
            &json!({ "content": content }),
        )
        .await
    }

    /// Every row of the event log, across sessions (a row may hold events in clear
    /// beside its own event: compare counts before and after, not with a number of events).
    pub async fn total_events(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM events").await
    }

    /// The one number `sql` answers.
    async fn count(&self, sql: &str) -> i64 {
        interview_projections::on_db!(read(self.db()), |pool| {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(pool)
                .await
                .unwrap()
        })
    }

    /// The sequence numbers of a session's events that begin a commit (version 2 stores its
    /// command's request id on the first event only).
    pub async fn commit_heads(&self, session: &str) -> Vec<u64> {
        let sql = if self.db().is_postgres() {
            "SELECT sequence FROM events WHERE aggregate_id = $1 AND metadata ? 'request_id' ORDER BY sequence"
        } else {
            "SELECT sequence FROM events WHERE aggregate_id = $1 \
             AND json_extract(metadata, '$.request_id') IS NOT NULL ORDER BY sequence"
        };
        interview_projections::on_db!(read(self.db()), |pool| {
            sqlx::query_scalar::<_, i64>(sql)
                .bind(session)
                .fetch_all(pool)
                .await
                .unwrap()
        })
        .into_iter()
        .map(|s| s as u64)
        .collect()
    }

    /// Every study in the store.
    pub async fn total_studies(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM studies").await
    }

    /// The session as a researcher reads it.
    pub async fn researcher_view(&self, session: &str) -> Value {
        json_of(
            self.get(&paths::session(session), Some(RESEARCHER_TOKEN))
                .await,
        )
        .await
    }

    /// Waits until the interviewer (triggered by the server itself) has had its turn — no run
    /// going on and the session waiting for the participant or ended — then reads the session
    /// as a researcher.
    pub async fn run(&self, session: &str) -> Value {
        let idle = self
            .state
            .interviewer
            .wait_until_idle(session, std::time::Duration::from_secs(20))
            .await
            .unwrap();
        let view = self.researcher_view(session).await;
        assert!(idle, "the interviewer did not answer: {view}");
        view
    }

    /// Answers the pending widget of `state` with `value`.
    pub async fn answer(&self, session: &str, token: &str, state: &Value, value: Value) {
        let id = state["pending_interaction"]["interaction_id"]
            .as_str()
            .expect("a widget is pending");
        let res = self
            .post(
                &paths::submit(session, id),
                Some(token),
                &json!({"status": "submitted", "value": value}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::OK);
    }

    /// Asserts that the session's stored stream passes every rule the aggregate checks.
    pub async fn assert_stream_follows_the_rules(&self, session: &str) {
        let events: Vec<_> =
            interview_projections::read::decoded_events_after(self.db(), session, 0)
                .await
                .unwrap()
                .into_iter()
                .map(|(_, e)| e)
                .collect();
        assert_eq!(
            interview_session::aggregate::check_stream(&events),
            Vec::<String>::new()
        );
    }

    /// Runs a command the HTTP API does not expose yet (the harness will send these).
    pub async fn execute(&self, session: &str, command: interview_session::SessionCommand) {
        self.state
            .store
            .execute(
                session,
                command,
                interview_runtime::command::store::Actor::System,
                "test",
            )
            .await
            .expect("command accepted");
    }
}

/// The interviewer's last utterance in a session view.
pub fn last_assistant(state: &Value) -> String {
    state["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|t| t["role"] == "assistant")
        .and_then(|t| t["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

pub async fn json_of(res: Response) -> Value {
    res.json().await.expect("a JSON body")
}

/// Asserts status and `error.code`, and that the body has the error shape.
pub async fn assert_error(res: Response, status: StatusCode, code: &str) -> Value {
    let actual = res.status();
    let body: Value = res.json().await.expect("error bodies are JSON");
    assert_eq!(actual, status, "body: {body}");
    assert_eq!(body["error"]["code"], code, "body: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "body: {body}"
    );
    body
}

/// A small valid study definition.
pub fn study_definition() -> Value {
    json!({
        "title": "Coffee habits",
        "locale": "en",
        "consent": {"text": "We keep your answers for research.", "version": "1"},
        "objectives": [
            {"id": "habits", "title": "Habits", "priority": "must", "opening_question": "How do you make your coffee?"},
            {"id": "brand", "title": "Brand", "priority": "should", "opening_question": "Which brand do you buy?",
             "interaction": {"type": "single_choice", "prompt": "Pick one",
                             "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]}}
        ],
        "output_schema": {"fields": [
            {"id": "method", "type": "string", "objective_id": "habits", "required": true},
            {"id": "brand", "type": "string", "objective_id": "brand"}
        ]}
    })
}

/// Sessions in the states the audit tests start from, driven over HTTP as a participant would.
impl TestApp {
    /// A demo session past consent with one answered question; returns its id.
    pub async fn interviewed_session(&self) -> String {
        self.interviewed_session_with_token().await.0
    }

    /// The same, with its participant token.
    pub async fn interviewed_session_with_token(&self) -> (String, String) {
        let (session, token) = self.create_session("demo").await;
        self.run(&session).await;
        let s = json_of(self.get(&paths::session(&session), Some(&token)).await).await;
        self.answer(&session, &token, &s, json!({"accepted": true}))
            .await;
        self.run(&session).await;
        self.post_message(
            &session,
            &token,
            "We plan on Sunday evenings with a shared list on our phones.",
        )
        .await;
        self.run(&session).await;
        (session, token)
    }

    /// A demo session ended by the participant (completed with its summary unconfirmed), once
    /// nothing more is written to it (the post-session extraction included); returns its id.
    pub async fn completed_session(&self) -> String {
        let (session, token) = self.interviewed_session_with_token().await;
        for _ in 0..2 {
            self.post(&paths::end(&session), Some(&token), &json!({}))
                .await;
            self.run(&session).await;
        }
        let mut last = (String::new(), 0);
        for _ in 0..200 {
            let events = self.event_log(&session).await;
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

    /// Runs SQL against the server's database: `sqlite` on SQLite, `postgres` on PostgreSQL.
    pub async fn exec(&self, sqlite: &str, postgres: &str) {
        let sql = match self.store {
            Store::Sqlite => sqlite,
            Store::Postgres => postgres,
        };
        interview_projections::on_db!(write(self.db()), |pool| {
            sqlx::query(sql).execute(pool).await.unwrap();
        });
    }

    /// The same SQL on both stores.
    pub async fn exec_both(&self, sql: &str) {
        self.exec(sql, sql).await;
    }

    /// The first study's overview, as a researcher reads it (the demo study's, where it is the
    /// only one).
    pub async fn overview(&self) -> Value {
        let studies = json_of(self.get("/api/studies", Some(RESEARCHER_TOKEN)).await).await;
        let id = studies["studies"][0]["study_id"].as_str().unwrap();
        json_of(self.get(&paths::overview(id), Some(RESEARCHER_TOKEN)).await).await
    }
}
