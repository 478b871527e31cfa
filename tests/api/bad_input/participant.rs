//! Bad input on a participant's routes: message bodies, callers without the right token, and
//! commands a session in its state cannot take.

use crate::helpers::paths;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::{case, Case, Fixture, Token};

/// Message bodies that are not a message.
// Long by design: a table of message bodies that are not a message, one row per case with its
// status and code: malformed JSON, no content, content of the wrong type, empty content, content
// over the limit, an unknown field.
pub(super) fn message_cases(fx: &Fixture) -> Vec<Case> {
    let msg = format!("/api/sessions/{}/messages", fx.session);
    let big = json!({ "content": "x".repeat(8 * 1024 + 1) }).to_string();
    use StatusCode as S;
    use Token::*;
    vec![
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
    ]
}

/// Callers without the right token, and sessions that are not there.
// Long by design: a table of callers, one row per case with its status and code: no token, a
// garbage token, another session's token writing and reading, a researcher speaking as the
// participant, an unknown session, a malformed session id.
pub(super) fn caller_cases(fx: &Fixture) -> Vec<Case> {
    let session = &fx.session;
    let msg = paths::messages(session);
    let ok_msg = Some(json!({"content": "hi"}).to_string());
    use StatusCode as S;
    use Token::*;
    vec![
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
            paths::session(session),
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
    ]
}

/// Commands an ended session, or a session without that widget, cannot take.
// Long by design: a table of cases, one per refusal.
pub(super) fn ended_session_cases(fx: &Fixture) -> Vec<Case> {
    let ended = &fx.ended;
    let ok_msg = Some(json!({"content": "hi"}).to_string());
    let submit = format!("/api/sessions/{}/interactions/nope/submit", fx.session);
    use StatusCode as S;
    use Token::*;
    vec![
        case(
            "message on an ended session",
            Method::POST,
            paths::messages(ended),
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
            "submit with an empty message in own words",
            Method::POST,
            submit.clone(),
            Own,
            Some(r#"{"status": "skipped", "message": {"content": "  "}}"#.into()),
            S::BAD_REQUEST,
            "empty_content",
        ),
        case(
            "submit with a message whose client id is too long",
            Method::POST,
            submit.clone(),
            Own,
            Some(json!({"status": "skipped", "message": {"content": "mine", "client_message_id": "x".repeat(201)}}).to_string()),
            S::UNPROCESSABLE_ENTITY,
            "invalid_client_message_id",
        ),
        case(
            "submit with an unknown key in its message",
            Method::POST,
            submit.clone(),
            Own,
            Some(r#"{"status": "skipped", "message": {"content": "mine", "role": "user"}}"#.into()),
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
    ]
}
