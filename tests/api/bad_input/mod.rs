//! Table-driven bad input, in named groups: each case asserts the status, the error code, and
//! that nothing was written (no event, no study). The groups share one fixture — sessions in
//! every state a case needs — and one runner ([`Fixture::refuse_all`]).

mod hostile;
mod participant;
mod studies;

use interview_session::commands as cmd;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::paths;
use crate::helpers::{assert_error, json_of, study_definition, Store, TestApp, RESEARCHER_TOKEN};

use hostile::hostile_cases;
use participant::{caller_cases, ended_session_cases, message_cases};
use studies::{join_cases, study_cases};

/// Which token a case sends.
#[derive(Clone, Copy, Debug)]
enum Token {
    Anonymous,
    Garbage,
    Researcher,
    Own,
    OtherSession,
    Ended,
}

/// Where a case puts its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Carrier {
    Header,
    Query,
    Cookie,
}

struct Case {
    name: &'static str,
    method: Method,
    path: String,
    token: Token,
    body: Option<String>,
    status: StatusCode,
    code: &'static str,
    field: Option<&'static str>,
    /// `None` sends no Content-Type at all.
    content_type: Option<&'static str>,
    carrier: Carrier,
}

fn case(
    name: &'static str,
    method: Method,
    path: String,
    token: Token,
    body: Option<String>,
    status: StatusCode,
    code: &'static str,
) -> Case {
    Case {
        name,
        method,
        path,
        token,
        body,
        status,
        code,
        field: None,
        content_type: Some("application/json"),
        carrier: Carrier::Header,
    }
}

fn with_field(mut c: Case, field: &'static str) -> Case {
    c.field = Some(field);
    c
}

fn with_content_type(mut c: Case, content_type: Option<&'static str>) -> Case {
    c.content_type = content_type;
    c
}

fn token_in(mut c: Case, carrier: Carrier) -> Case {
    c.carrier = carrier;
    c
}

fn definition_with(mutate: impl FnOnce(&mut Value)) -> String {
    let mut d = study_definition();
    mutate(&mut d);
    d.to_string()
}

/// What the cases run against: a published study with a session waiting for its participant,
/// another session, an ended one, a paused study and a draft that names a slug but was never
/// published. The interviewer has settled every session, so nothing else writes while the cases
/// run.
struct Fixture {
    app: TestApp,
    slug: String,
    session: String,
    own: String,
    other: String,
    ended: String,
    ended_token: String,
    paused_slug: String,
    draft_id: String,
}

impl Fixture {
    async fn new(store: Store) -> Self {
        let app = TestApp::spawn(store).await;
        let (_, slug, _) = app.publish_study(&study_definition()).await;
        // Sessions the interviewer has settled, so nothing else writes while the cases run.
        let (session, own) = app.interviewing(&slug).await;
        let (other_session, other) = app.create_session(&slug).await;
        app.run(&other_session).await;
        let (ended, ended_token) = app.create_session(&slug).await;
        app.run(&ended).await;
        app.execute(
            &ended,
            interview_session::SessionCommand::Abandon(cmd::Abandon {
                reason: interview_session::ConcludeReason::Timeout,
                at: chrono::Utc::now(),
            }),
        )
        .await;
        // A paused study and a draft that names a slug but was never published.
        let (paused_id, paused_slug, _) = app
            .publish_study(
                &definition_with(|d| d["title"] = json!("Paused"))
                    .parse()
                    .unwrap(),
            )
            .await;
        app.post(
            &format!("/api/studies/{paused_id}/pause"),
            Some(RESEARCHER_TOKEN),
            &json!({}),
        )
        .await;
        let draft = app
            .post(
                "/api/studies",
                Some(RESEARCHER_TOKEN),
                &definition_with(|d| d["public_slug"] = json!("never-published"))
                    .parse()
                    .unwrap(),
            )
            .await;
        assert_eq!(draft.status(), StatusCode::CREATED);
        let study_id = json_of(draft).await["study_id"]
            .as_str()
            .unwrap()
            .to_string();
        Fixture {
            app,
            slug,
            session,
            own,
            other,
            ended,
            ended_token,
            paused_slug,
            draft_id: study_id,
        }
    }

    /// Sends every case: each is refused as it says, and writes nothing.
    // Long by design: the one runner every case table goes through, per case in order: pick the
    // token, put it in a header, query or cookie, send the request, then check the status, code,
    // message and field, and that no event or study was written; then the session is checked
    // unchanged.
    async fn refuse_all(&self, cases: Vec<Case>) {
        let Fixture {
            app,
            own,
            other,
            ended_token,
            session,
            ..
        } = self;
        for c in cases {
            let token = match c.token {
                Token::Anonymous => None,
                Token::Garbage => Some("pt_00000000000000000000000000000000_ffff".to_string()),
                Token::Researcher => Some(RESEARCHER_TOKEN.to_string()),
                Token::Own => Some(own.clone()),
                Token::OtherSession => Some(other.clone()),
                Token::Ended => Some(ended_token.clone()),
            };
            let events = app.total_events().await;
            let studies = app.total_studies().await;
            let mut path = c.path.clone();
            if let (Carrier::Query, Some(t)) = (c.carrier, &token) {
                path.push_str(if path.contains('?') {
                    "&token="
                } else {
                    "?token="
                });
                path.push_str(t);
            }
            let mut req = app.client.request(c.method.clone(), app.url(&path));
            if let Some(content_type) = c.content_type {
                req = req.header("content-type", content_type);
            }
            match (c.carrier, &token) {
                (Carrier::Header, Some(t)) => req = req.bearer_auth(t),
                (Carrier::Cookie, Some(t)) => {
                    req = req.header("cookie", format!("participant_token={t}"))
                }
                _ => {}
            }
            if let Some(b) = c.body.clone() {
                req = req.body(b);
            }
            let res = req.send().await.expect("request sent");
            let status = res.status();
            let body: Value = res
                .json()
                .await
                .unwrap_or_else(|e| panic!("{}: body is not JSON: {e}", c.name));
            assert_eq!(status, c.status, "{}: {body}", c.name);
            assert_eq!(body["error"]["code"], c.code, "{}: {body}", c.name);
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "{}: {body}",
                c.name
            );
            if let Some(field) = c.field {
                if !field.is_empty() {
                    assert_eq!(
                        body["error"]["details"]["field"], field,
                        "{}: {body}",
                        c.name
                    );
                } else {
                    assert!(
                        body["error"]["details"].get("field").is_some(),
                        "{}: {body}",
                        c.name
                    );
                }
            }
            assert_eq!(
                app.total_events().await,
                events,
                "{}: an event was written",
                c.name
            );
            assert_eq!(
                app.total_studies().await,
                studies,
                "{}: a study was written",
                c.name
            );
        }
        // Nothing changed the sessions either.
        let read = json_of(app.get(&paths::session(session), Some(own.as_str())).await).await;
        assert_eq!(read["turn_count"], 0);
        assert_eq!(read["status"], "waiting_for_user");
    }
}

async fn a_bad_message_is_refused_and_writes_nothing(store: Store) {
    let fx = Fixture::new(store).await;
    fx.refuse_all(message_cases(&fx)).await;
}

async fn a_caller_without_the_right_token_is_refused(store: Store) {
    let fx = Fixture::new(store).await;
    fx.refuse_all(caller_cases(&fx)).await;
}

async fn a_command_on_an_ended_session_or_an_unknown_widget_is_refused(store: Store) {
    let fx = Fixture::new(store).await;
    fx.refuse_all(ended_session_cases(&fx)).await;
}

async fn a_bad_join_is_refused(store: Store) {
    let fx = Fixture::new(store).await;
    fx.refuse_all(join_cases(&fx)).await;
}

async fn a_bad_study_or_route_is_refused(store: Store) {
    let fx = Fixture::new(store).await;
    fx.refuse_all(study_cases(&fx)).await;
}

async fn hostile_input_is_refused(store: Store) {
    let fx = Fixture::new(store).await;
    fx.refuse_all(hostile_cases(&fx.session, &fx.slug, &fx.draft_id))
        .await;
}

async fn a_larger_message_limit_is_configurable(store: Store) {
    let app = TestApp::spawn_with(store, |s| s.max_message_bytes = 16).await;
    let (session, token) = app.interviewing("demo").await;
    assert_eq!(
        app.post_message(&session, &token, "sixteen chars ok")
            .await
            .status(),
        StatusCode::ACCEPTED
    );
    assert_error(
        app.post_message(&session, &token, "seventeen chars!!")
            .await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    )
    .await;
}

both_stores!(
    a_bad_message_is_refused_and_writes_nothing,
    a_caller_without_the_right_token_is_refused,
    a_command_on_an_ended_session_or_an_unknown_widget_is_refused,
    a_bad_join_is_refused,
    a_bad_study_or_route_is_refused,
    hostile_input_is_refused,
    a_larger_message_limit_is_configurable
);
