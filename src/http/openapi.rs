//! The OpenAPI document, generated from the handlers' annotations and served at
//! `/api/openapi.json`.

use actix_web::{web, HttpResponse};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The document's frame: its title, tags and security scheme. The paths are collected from the
/// routes as they are registered (`routes::configure`, through `utoipa-actix-web`), so each
/// route's method and path are written once, in its actix-web attribute.
#[derive(OpenApi)]
#[openapi(
    info(title = "Interview Runtime API", description = "Event-sourced AI interview runtime"),
    modifiers(&BearerAuth),
    tags(
        (name = "participant", description = "Public link, messages, interactions"),
        (name = "studies", description = "Researcher study management"),
        (name = "research", description = "Researcher read APIs and exports"),
        (name = "researchers", description = "Researchers, their tokens and roles (admins)"),
        (name = "webhooks", description = "A study's signed webhooks and their deliveries (owners)"),
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

/// `GET /api/openapi.json`: the document, as the routes were registered.
pub fn serve(document: utoipa::openapi::OpenApi) -> actix_web::Resource {
    web::resource("/api/openapi.json").route(web::get().to(move || {
        let document = document.clone();
        async move { HttpResponse::Ok().json(document) }
    }))
}
