//! The OpenAPI document, generated from the handlers' annotations and served at
//! `/api/openapi.json`.

use actix_web::{get, HttpResponse};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::http::routes::{erasure, health, join, research, sessions, stream, studies};

#[derive(OpenApi)]
#[openapi(
    info(title = "Interview Runtime API", description = "Event-sourced AI interview runtime"),
    paths(
        health::healthz, health::readyz,
        studies::create, studies::list, studies::get, studies::overview, studies::replace, studies::publish, studies::pause, studies::resume, studies::rotate_link_secret, studies::remove_link_secret,
        join::create, sessions::get, sessions::post_message, sessions::submit_interaction, sessions::end, crate::http::routes::agui::run,
        crate::http::routes::page::study_page, crate::http::routes::page::session_page, crate::http::routes::page::asset, crate::http::routes::page::favicon, crate::http::routes::metrics::scrape,
        stream::stream,
        research::study_sessions, research::transcript, research::session_state, research::decisions,
        research::tool_calls, research::interaction_events, research::events,
        research::results, research::results_csv, research::results_jsonl,
        erasure::withdraw, erasure::erase_session, erasure::erase_participant, erasure::purge_log,
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "participant", description = "Public link, messages, interactions"),
        (name = "studies", description = "Researcher study management"),
        (name = "research", description = "Researcher read APIs and exports"),
        (name = "operations", description = "Health and readiness"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[get("/api/openapi.json")]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().json(ApiDoc::openapi())
}
