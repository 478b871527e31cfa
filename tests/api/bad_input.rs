//! Table-driven bad input: each case asserts the status, the error code, and that nothing was
//! written (no event, no study).

use interview_session::commands as cmd;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{assert_error, json_of, study_definition, Store, TestApp, RESEARCHER_TOKEN};

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

async fn bad_input_is_refused_with_a_clear_error_and_writes_nothing(store: Store) {
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

    let msg = format!("/api/sessions/{session}/messages");
    let big = json!({ "content": "x".repeat(8 * 1024 + 1) }).to_string();
    let ok_msg = Some(json!({"content": "hi"}).to_string());
    let submit = format!("/api/sessions/{session}/interactions/nope/submit");
    use StatusCode as S;
    use Token::*;
    let cases = vec![
        case(
            "malformed JSON",
            Method::POST,
            msg.clone(),
            Own,
            Some("{\"content\": ".into()),
            S::BAD_REQUEST,
            "invalid_json",
        ),
        case(
            "missing content",
            Method::POST,
            msg.clone(),
            Own,
            Some("{}".into()),
            S::BAD_REQUEST,
            "invalid_body",
        ),
        case(
            "content of the wrong type",
            Method::POST,
            msg.clone(),
            Own,
            Some(r#"{"content": 5}"#.into()),
            S::BAD_REQUEST,
            "invalid_body",
        ),
        case(
            "empty content",
            Method::POST,
            msg.clone(),
            Own,
            Some(r#"{"content": "   "}"#.into()),
            S::BAD_REQUEST,
            "empty_content",
        ),
        case(
            "content over the limit",
            Method::POST,
            msg.clone(),
            Own,
            Some(big),
            S::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
        case(
            "unknown field",
            Method::POST,
            msg.clone(),
            Own,
            Some(r#"{"content": "a", "role": "assistant"}"#.into()),
            S::BAD_REQUEST,
            "invalid_body",
        ),
        case(
            "no token",
            Method::POST,
            msg.clone(),
            Anonymous,
            ok_msg.clone(),
            S::UNAUTHORIZED,
            "unauthorized",
        ),
        case(
            "garbage token",
            Method::POST,
            msg.clone(),
            Garbage,
            ok_msg.clone(),
            S::UNAUTHORIZED,
            "unauthorized",
        ),
        case(
            "another session's token",
            Method::POST,
            msg.clone(),
            OtherSession,
            ok_msg.clone(),
            S::FORBIDDEN,
            "forbidden",
        ),
        case(
            "another session's token reading",
            Method::GET,
            format!("/api/sessions/{session}"),
            OtherSession,
            None,
            S::FORBIDDEN,
            "forbidden",
        ),
        case(
            "researcher speaking as participant",
            Method::POST,
            msg.clone(),
            Researcher,
            ok_msg.clone(),
            S::FORBIDDEN,
            "forbidden",
        ),
        case(
            "unknown session",
            Method::POST,
            format!("/api/sessions/{}/messages", uuid::Uuid::new_v4()),
            Researcher,
            ok_msg.clone(),
            S::NOT_FOUND,
            "session_not_found",
        ),
        case(
            "malformed session id",
            Method::GET,
            "/api/sessions/not-a-uuid".into(),
            Researcher,
            None,
            S::NOT_FOUND,
            "session_not_found",
        ),
        case(
            "message on an ended session",
            Method::POST,
            format!("/api/sessions/{ended}/messages"),
            Ended,
            ok_msg.clone(),
            S::GONE,
            "session_terminal",
        ),
        case(
            "submit on an ended session",
            Method::POST,
            format!("/api/sessions/{ended}/interactions/x/submit"),
            Ended,
            Some(r#"{"status": "skipped"}"#.into()),
            S::GONE,
            "session_terminal",
        ),
        case(
            "submit with an unknown status",
            Method::POST,
            submit.clone(),
            Own,
            Some(r#"{"status": "maybe"}"#.into()),
            S::BAD_REQUEST,
            "invalid_body",
        ),
        case(
            "submit of an unknown interaction",
            Method::POST,
            submit.clone(),
            Own,
            Some(r#"{"status": "skipped"}"#.into()),
            S::NOT_FOUND,
            "interaction_not_found",
        ),
        case(
            "unknown slug",
            Method::POST,
            "/api/public/studies/no-such-study/sessions".into(),
            Anonymous,
            Some("{}".into()),
            S::NOT_FOUND,
            "study_not_found",
        ),
        case(
            "unpublished study",
            Method::POST,
            "/api/public/studies/never-published/sessions".into(),
            Anonymous,
            Some("{}".into()),
            S::NOT_FOUND,
            "study_not_found",
        ),
        case(
            "paused study",
            Method::POST,
            format!("/api/public/studies/{paused_slug}/sessions"),
            Anonymous,
            Some("{}".into()),
            S::CONFLICT,
            "study_paused",
        ),
        case(
            "malformed create body",
            Method::POST,
            format!("/api/public/studies/{slug}/sessions"),
            Anonymous,
            Some("[".into()),
            S::BAD_REQUEST,
            "invalid_json",
        ),
        with_field(
            case(
                "participant_ref too long",
                Method::POST,
                format!("/api/public/studies/{slug}/sessions"),
                Anonymous,
                Some(json!({"participant_ref": "r".repeat(201)}).to_string()),
                S::UNPROCESSABLE_ENTITY,
                "invalid_participant_ref",
            ),
            "participant_ref",
        ),
        case(
            "preview without a researcher token",
            Method::POST,
            format!("/api/public/studies/{slug}/sessions"),
            Own,
            Some(r#"{"preview": true}"#.into()),
            S::FORBIDDEN,
            "forbidden",
        ),
        case(
            "studies without a token",
            Method::GET,
            "/api/studies".into(),
            Anonymous,
            None,
            S::UNAUTHORIZED,
            "unauthorized",
        ),
        case(
            "studies with a participant token",
            Method::GET,
            "/api/studies".into(),
            Own,
            None,
            S::FORBIDDEN,
            "forbidden",
        ),
        case(
            "create study with a participant token",
            Method::POST,
            "/api/studies".into(),
            Own,
            Some(study_definition().to_string()),
            S::FORBIDDEN,
            "forbidden",
        ),
        case(
            "unknown study",
            Method::GET,
            "/api/studies/nope".into(),
            Researcher,
            None,
            S::NOT_FOUND,
            "study_not_found",
        ),
        case(
            "publish unknown study",
            Method::POST,
            "/api/studies/nope/publish".into(),
            Researcher,
            None,
            S::NOT_FOUND,
            "study_not_found",
        ),
        case(
            "malformed study JSON",
            Method::POST,
            "/api/studies".into(),
            Researcher,
            Some("{".into()),
            S::BAD_REQUEST,
            "invalid_json",
        ),
        with_field(
            case(
                "duplicate objective ids",
                Method::POST,
                "/api/studies".into(),
                Researcher,
                Some(definition_with(|d| {
                    d["objectives"][1]["id"] = json!("habits")
                })),
                S::UNPROCESSABLE_ENTITY,
                "invalid_definition",
            ),
            "objectives[1].id",
        ),
        with_field(
            case(
                "field naming an unknown objective",
                Method::POST,
                "/api/studies".into(),
                Researcher,
                Some(definition_with(|d| {
                    d["output_schema"]["fields"][0]["objective_id"] = json!("ghost")
                })),
                S::UNPROCESSABLE_ENTITY,
                "invalid_definition",
            ),
            "output_schema.fields[0].objective_id",
        ),
        with_field(
            case(
                "max_probe_count out of range",
                Method::POST,
                "/api/studies".into(),
                Researcher,
                Some(definition_with(|d| {
                    d["objectives"][0]["max_probe_count"] = json!(99)
                })),
                S::UNPROCESSABLE_ENTITY,
                "invalid_definition",
            ),
            "objectives[0].max_probe_count",
        ),
        with_field(
            case(
                "unknown priority",
                Method::POST,
                "/api/studies".into(),
                Researcher,
                Some(definition_with(|d| {
                    d["objectives"][0]["priority"] = json!("urgent")
                })),
                S::UNPROCESSABLE_ENTITY,
                "invalid_definition",
            ),
            "objectives[0].priority",
        ),
        with_field(
            case(
                "missing consent",
                Method::POST,
                "/api/studies".into(),
                Researcher,
                Some(definition_with(|d| {
                    d.as_object_mut().unwrap().remove("consent");
                })),
                S::UNPROCESSABLE_ENTITY,
                "invalid_definition",
            ),
            "",
        ),
        with_field(
            case(
                "unknown definition key",
                Method::POST,
                "/api/studies".into(),
                Researcher,
                Some(definition_with(|d| d["colour"] = json!("blue"))),
                S::UNPROCESSABLE_ENTITY,
                "invalid_definition",
            ),
            "",
        ),
        with_field(
            case(
                "bad interaction",
                Method::POST,
                "/api/studies".into(),
                Researcher,
                Some(definition_with(|d| {
                    d["objectives"][1]["interaction"]["options"] =
                        json!([{"id": "a", "label": "A"}])
                })),
                S::UNPROCESSABLE_ENTITY,
                "invalid_definition",
            ),
            "objectives[1].interaction.options",
        ),
        with_field(
            case(
                "confidence threshold above 1",
                Method::PUT,
                format!("/api/studies/{study_id}"),
                Researcher,
                Some(definition_with(|d| {
                    d["limits"] = json!({"confidence_threshold": 1.5})
                })),
                S::UNPROCESSABLE_ENTITY,
                "invalid_definition",
            ),
            "limits.confidence_threshold",
        ),
        case(
            "unknown route",
            Method::GET,
            "/api/nothing-here".into(),
            Anonymous,
            None,
            S::NOT_FOUND,
            "route_not_found",
        ),
    ];
    let mut cases = cases;
    cases.extend(hostile_cases(&session, &slug, &study_id));

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
    let read = json_of(
        app.get(&format!("/api/sessions/{session}"), Some(&own))
            .await,
    )
    .await;
    assert_eq!(read["turn_count"], 0);
    assert_eq!(read["status"], "waiting_for_user");
}

/// What a hostile participant, a careless study author or a stranger sends: U+0000 in every
/// kind of text (PostgreSQL cannot store it), bodies that are not JSON, tokens where they do not
/// belong, query values that do not parse, a study too large to pin in every session.
fn hostile_cases(session: &str, slug: &str, study_id: &str) -> Vec<Case> {
    use StatusCode as S;
    use Token::*;
    let msg = format!("/api/sessions/{session}/messages");
    let nul = |name, method, path: String, token, body: Value, field| {
        with_field(
            case(
                name,
                method,
                path,
                token,
                Some(body.to_string()),
                S::UNPROCESSABLE_ENTITY,
                "invalid_text",
            ),
            field,
        )
    };
    let agui = json!({
        "threadId": session, "runId": "r1", "state": {}, "tools": [], "context": [],
        "forwardedProps": {},
        "messages": [{"id": "m1", "role": "user", "content": "hi\u{0}"}],
    });
    let huge_study = definition_with(|d| d["description"] = json!("x".repeat(300 * 1024)));
    let sessions_of = format!("/api/studies/{study_id}/sessions");
    let results_of = format!("/api/studies/{study_id}/results");
    let query = |name, path: String, field| {
        with_field(
            case(
                name,
                Method::GET,
                path,
                Researcher,
                None,
                S::BAD_REQUEST,
                "invalid_query",
            ),
            field,
        )
    };
    vec![
        nul(
            "NUL in a message",
            Method::POST,
            msg.clone(),
            Own,
            json!({"content": "a\u{0}b"}),
            "content",
        ),
        nul(
            "NUL in a client_message_id",
            Method::POST,
            msg.clone(),
            Own,
            json!({"content": "hi", "client_message_id": "k\u{0}"}),
            "client_message_id",
        ),
        nul(
            "NUL in a participant_ref",
            Method::POST,
            format!("/api/public/studies/{slug}/sessions"),
            Anonymous,
            json!({"participant_ref": "p\u{0}"}),
            "participant_ref",
        ),
        nul(
            "NUL in a client_context",
            Method::POST,
            format!("/api/sessions/{session}/interactions/nope/submit"),
            Own,
            json!({"status": "skipped", "client_context": {"ua": ["x", "\u{0}"]}}),
            "client_context.ua[1]",
        ),
        nul(
            "NUL in study text",
            Method::POST,
            "/api/studies".into(),
            Researcher,
            serde_json::from_str(&definition_with(|d| d["title"] = json!("T\u{0}"))).unwrap(),
            "title",
        ),
        nul(
            "NUL in an AG-UI message",
            Method::POST,
            format!("/api/sessions/{session}/agui"),
            Own,
            agui,
            "messages[0].content",
        ),
        with_content_type(
            case(
                "a message sent as text/plain",
                Method::POST,
                msg.clone(),
                Own,
                Some(json!({"content": "hi"}).to_string()),
                S::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
            ),
            Some("text/plain"),
        ),
        with_content_type(
            case(
                "a message with no content type",
                Method::POST,
                msg.clone(),
                Own,
                Some(json!({"content": "hi"}).to_string()),
                S::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
            ),
            None,
        ),
        token_in(
            with_content_type(
                case(
                    "ending by cookie alone, without a JSON content type",
                    Method::POST,
                    format!("/api/sessions/{session}/end"),
                    Own,
                    None,
                    S::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                ),
                None,
            ),
            Carrier::Cookie,
        ),
        token_in(
            case(
                "a researcher token as ?token=",
                Method::GET,
                sessions_of.clone(),
                Researcher,
                None,
                S::UNAUTHORIZED,
                "unauthorized",
            ),
            Carrier::Query,
        ),
        token_in(
            case(
                "a researcher token as the participant cookie",
                Method::GET,
                format!("/api/sessions/{session}"),
                Researcher,
                None,
                S::UNAUTHORIZED,
                "unauthorized",
            ),
            Carrier::Cookie,
        ),
        query(
            "a limit that is not a number",
            format!("{sessions_of}?limit=abc"),
            "limit",
        ),
        query(
            "a limit beyond any integer",
            format!("{results_of}?limit=99999999999999999999"),
            "limit",
        ),
        query(
            "a flag that is not a boolean",
            format!("{sessions_of}?include_preview=maybe"),
            "include_preview",
        ),
        case(
            "a study definition over the size cap",
            Method::POST,
            "/api/studies".into(),
            Researcher,
            Some(huge_study),
            S::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
    ]
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
    bad_input_is_refused_with_a_clear_error_and_writes_nothing,
    a_larger_message_limit_is_configurable
);
