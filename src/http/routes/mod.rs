//! HTTP routes. Each handler authenticates, parses, runs one command or query, and answers with
//! the HTTP contract (README, "API at a glance"); errors go through [`crate::http::error::ApiError`].

pub mod agui;
pub mod erasure;
pub mod health;
pub mod join;
pub mod metrics;
pub mod page;
pub mod research;
pub mod researchers;
pub mod sessions;
pub mod stream;
pub mod studies;
pub mod turns;
pub mod webhooks;

use utoipa_actix_web::service_config::ServiceConfig;

/// Every route, each registered once: actix-web serves it and the OpenAPI document lists it.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(health::healthz)
        .service(health::readyz)
        .service(studies::create)
        .service(studies::list)
        .service(studies::get)
        .service(studies::overview)
        .service(studies::replace)
        .service(studies::publish)
        .service(studies::pause)
        .service(studies::resume)
        .service(studies::rotate_link_secret)
        .service(studies::remove_link_secret)
        .service(join::create)
        .service(sessions::get)
        .service(turns::post_message)
        .service(turns::submit_interaction)
        .service(turns::end)
        .service(erasure::withdraw)
        .service(erasure::erase_session)
        .service(erasure::erase_participant)
        .service(erasure::purge_log)
        .service(stream::stream)
        .service(agui::run)
        .service(page::study_page)
        .service(page::session_page)
        .service(page::asset)
        .service(page::favicon)
        .service(metrics::scrape)
        .service(research::study_sessions)
        .service(research::results_csv)
        .service(research::results_jsonl)
        .service(research::results)
        .service(research::transcript)
        .service(research::session_state)
        .service(research::decisions)
        .service(research::tool_calls)
        .service(research::interaction_events)
        .service(research::events)
        .service(researchers::add)
        .service(researchers::list)
        .service(researchers::revoke)
        .service(researchers::token)
        .service(researchers::roles)
        .service(researchers::grant)
        .service(researchers::ungrant)
        .service(researchers::study_access_log)
        .service(researchers::whole_access_log)
        .service(webhooks::create)
        .service(webhooks::list)
        .service(webhooks::get)
        .service(webhooks::remove)
        .service(webhooks::redeliver)
        .service(webhooks::deliveries);
}

/// Unknown routes answer a JSON 404 like every other error.
pub async fn not_found() -> Result<actix_web::HttpResponse, crate::http::error::ApiError> {
    Err(crate::http::error::ApiError::not_found(
        "route_not_found",
        "there is nothing at this address",
    ))
}
