//! Bad input on joining a study and on the researcher's study routes.

use reqwest::{Method, StatusCode};
use serde_json::json;

use super::{case, definition_with, with_field, Case, Fixture, Token};
use crate::helpers::paths;
use crate::helpers::study_definition;

/// Joins of a study that cannot be joined, or with a body that is not a join.
// Long by design: a table of joins that cannot be made, one row per case with its status and code:
// an unknown slug, an unpublished and a paused study, a malformed body, a participant_ref too long,
// a preview without a researcher token.
pub(super) fn join_cases(fx: &Fixture) -> Vec<Case> {
    let Fixture {
        slug, paused_slug, ..
    } = fx;
    use StatusCode as S;
    use Token::*;
    vec![
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
            paths::join(paused_slug),
            Anonymous,
            Some("{}".into()),
            S::CONFLICT,
            "study_paused",
        ),
        case(
            "malformed create body",
            Method::POST,
            paths::join(slug),
            Anonymous,
            Some("[".into()),
            S::BAD_REQUEST,
            "invalid_json",
        ),
        with_field(
            case(
                "participant_ref too long",
                Method::POST,
                paths::join(slug),
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
            paths::join(slug),
            Own,
            Some(r#"{"preview": true}"#.into()),
            S::FORBIDDEN,
            "forbidden",
        ),
    ]
}

/// Study routes without a researcher, studies that are not there, definitions that do not
/// hold, and a route that is not there.
// Long by design: a table of study requests, one row per case with its status and code: no token or
// a participant's, unknown studies, malformed JSON, eight definitions that break a rule (most with
// the field named), and an unknown route.
pub(super) fn study_cases(fx: &Fixture) -> Vec<Case> {
    let study_id = &fx.draft_id;
    use StatusCode as S;
    use Token::*;
    vec![
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
                paths::study(study_id),
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
    ]
}
