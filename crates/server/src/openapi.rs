//! The OpenAPI document, generated from the handlers' `#[utoipa::path]`
//! annotations and the wire types' `ToSchema` derives.

use std::collections::BTreeMap;

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
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
        items::upsert, items::batch, items::get, items::list, items::tombstone,
        query::item_candidates, query::content_candidates, query::decide, query::verify,
        lifecycle::snapshot, lifecycle::restore, lifecycle::rebuild, lifecycle::shadow_start,
        lifecycle::shadow_report, lifecycle::shadow_promote, lifecycle::shadow_drop, lifecycle::rollback,
        lifecycle::compact,
        review::add_label, review::labels, review::decisions, review::audit,
        ops::healthz, ops::readyz, ops::metrics, ops::openapi,
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

/// The error statuses any route may answer, all with [`ErrorBody`].
pub(crate) struct StdErrors;

impl utoipa::IntoResponses for StdErrors {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::response::Response>> {
        [
            ("400", "Invalid input, JSON or configuration"),
            ("401", "Missing or invalid credential"),
            ("403", "The key lacks a scope"),
            ("404", "No such tenant (or not yours), item or route"),
            ("405", "Method not allowed"),
            ("408", "Request timed out"),
            ("409", "Conflict: exists, stale epoch, idempotency key reuse, invalid state"),
            ("413", "Body or content over a limit"),
            ("415", "Wrong Content-Type"),
            ("422", "Budget, snapshot or rebuild refused"),
            ("429", "Tenant quota exhausted (see Retry-After)"),
            ("500", "Internal error"),
            ("503", "Not ready"),
        ]
        .into_iter()
        .map(|(code, desc)| {
            let resp = ResponseBuilder::new()
                .description(desc)
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build(),
                )
                .build();
            (code.to_string(), RefOr::T(resp))
        })
        .collect()
    }
}
