//! The OpenAPI document, generated from the handlers' `#[utoipa::path]`
//! annotations and the wire types' `ToSchema` derives.

use axum::response::IntoResponse;
use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::ErrorBody;
use crate::routes::{items, lifecycle, ops, query, review, tenants};

/// The service's OpenAPI document.
#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "neardup", description = "Multi-tenant near-duplicate detection service. Every error is \
        `{\"error\":{\"code\",\"message\"}}` with a stable code; see docs/service.md."),
    paths(
        tenants::create, tenants::list, tenants::detail, tenants::create_key, tenants::list_keys,
        tenants::revoke_key,
        items::upsert, items::batch, items::get, items::list, items::tombstone, items::unfence,
        query::item_candidates, query::content_candidates, query::decide, query::verify, query::neighbourhood,
        lifecycle::snapshot, lifecycle::restore, lifecycle::rebuild, lifecycle::shadow_start,
        lifecycle::shadow_report, lifecycle::shadow_promote, lifecycle::shadow_drop, lifecycle::rollback,
        lifecycle::compact,
        review::add_label, review::labels, review::decisions, review::audit, review::queue, review::compare,
        crate::routes::dashboard::dashboard,
        crate::routes::events::events, crate::routes::events::schema,
        ops::healthz, ops::readyz, ops::metrics, openapi_json,
    ),
    components(schemas(ErrorBody)),
    modifiers(&Bearer),
)]
pub struct ApiDoc;

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "ops", responses((status = 200, description = "OpenAPI 3.1 document")))]
pub(crate) async fn openapi_json() -> impl IntoResponse {
    Json(ApiDoc::openapi())
}
