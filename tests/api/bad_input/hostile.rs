//! Hostile input on every route that takes text.

use crate::helpers::paths;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use super::{case, definition_with, token_in, with_content_type, with_field, Carrier, Case, Token};

/// What a hostile participant, a careless study author or a stranger sends: U+0000 in every
/// kind of text (PostgreSQL cannot store it), bodies that are not JSON, tokens where they do not
/// belong, query values that do not parse, a study too large to pin in every session.
// Long by design: a table of hostile requests, one row per case with its route, token, body, status
// and code: NUL in each kind of text, bodies sent without JSON, tokens carried where they do not
// belong, query values that do not parse, an oversized study.
pub(super) fn hostile_cases(session: &str, slug: &str, study_id: &str) -> Vec<Case> {
    use StatusCode as S;
    use Token::*;
    let msg = paths::messages(session);
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
    let results_of = paths::results(study_id);
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
            paths::join(slug),
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
            paths::agui(session),
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
                    paths::end(session),
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
                paths::session(session),
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
