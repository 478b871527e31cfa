//! The participant web page: `/interview/{public_slug}` starts (or, in the same browser,
//! resumes) an interview; `/interview/s/{session_id}` reopens one. Plain HTML, CSS and JS
//! compiled into the binary; the page talks to the same REST routes and event stream as any
//! other client.

use actix_web::{get, web, HttpResponse};
use interview_projections::read;
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;
use crate::studies;

const PAGE: &str = include_str!("../../web/index.html");
const SCRIPT: &str = include_str!("../../web/app.js");
const STYLE: &str = include_str!("../../web/app.css");

/// Changes whenever the assets do, so browsers never mix an old script with a new page.
fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        interview_session::hash::sha256_hex(format!("{SCRIPT}{STYLE}").as_bytes())[..12].to_string()
    })
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn page(boot: serde_json::Value) -> HttpResponse {
    let title = boot["title"].as_str().unwrap_or("Interview");
    let locale = boot["locale"].as_str().unwrap_or("en");
    // Inside <script>, "</" would end the element: JSON allows escaping the slash.
    let boot_json = boot.to_string().replace("</", "<\\/");
    let html = PAGE
        .replace("{{lang}}", &escape_html(locale))
        .replace("{{title}}", &escape_html(title))
        .replace("{{version}}", version())
        .replace("{{boot}}", &boot_json);
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("x-content-type-options", "nosniff"))
        .insert_header(("referrer-policy", "no-referrer"))
        .body(html)
}

/// The study as the page shows it, or the page with a friendly "not found".
async fn study_boot(state: &AppState, slug: &str) -> Result<serde_json::Value, ApiError> {
    let published = studies::by_slug(&state.db, slug)
        .await?
        .and_then(|s| s.published);
    Ok(match published {
        Some(p) => json!({
            "slug": slug,
            "title": p.study_config.title,
            "description": p.study_config.description,
            "locale": p.study_config.locale,
        }),
        None => json!({ "slug": slug, "error": "study_not_found" }),
    })
}

/// The participant page for a study's public link.
#[utoipa::path(get, path = "/interview/{public_slug}", tag = "page",
    params(("public_slug" = String, Path)),
    responses((status = 200, description = "the interview page", content_type = "text/html")))]
#[get("/interview/{public_slug}")]
pub async fn study_page(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(page(study_boot(&state, &path).await?))
}

/// The participant page reopening a session (its token is in the browser that started it).
#[utoipa::path(get, path = "/interview/s/{session_id}", tag = "page",
    params(("session_id" = String, Path)),
    responses((status = 200, description = "the interview page", content_type = "text/html")))]
#[get("/interview/s/{session_id}")]
pub async fn session_page(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let slug = match uuid::Uuid::try_parse(&id) {
        Ok(_) => read::session_state(&state.db, &id)
            .await?
            .map(|v| v.public_slug),
        Err(_) => None,
    };
    let mut boot = match slug {
        Some(slug) => study_boot(&state, &slug).await?,
        None => json!({ "error": "session_not_found" }),
    };
    boot["session_id"] = json!(id);
    Ok(page(boot))
}

/// The page's script and style.
#[utoipa::path(get, path = "/interview/assets/{file}", tag = "page",
    params(("file" = String, Path, description = "app.js or app.css")),
    responses((status = 200, description = "a static asset"), (status = 404)))]
#[get("/interview/assets/{file}")]
pub async fn asset(path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (body, kind) = match path.as_str() {
        "app.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "app.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return Err(ApiError::not_found("not_found", "no such file")),
    };
    Ok(HttpResponse::Ok()
        .content_type(kind)
        .insert_header(("cache-control", "public, max-age=86400, immutable"))
        .insert_header(("x-content-type-options", "nosniff"))
        .body(body))
}
