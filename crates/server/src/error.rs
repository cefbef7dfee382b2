//! The gateway's one error type and the one place errors become HTTP.
//!
//! Every error body is `{"error": {"code": "...", "message": "..."}}`. The
//! code is stable (clients branch on it); the status comes from a single
//! exhaustive `match` over the engine's [`neardup_index::ErrorKind`] and the
//! gateway's own [`GatewayKind`] — no wildcard arm, so a new engine error
//! kind does not compile until someone decides its status. 5xx bodies say
//! only "internal error"; the detail goes to the log.

use std::collections::BTreeMap;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use neardup_index::ErrorKind as EngineKind;
use serde::Serialize;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::ToSchema;

/// An error answered to a client.
#[derive(Debug)]
pub struct ApiError {
    kind: ApiErrorKind,
}

/// Where the error came from.
#[derive(Debug)]
pub enum ApiErrorKind {
    /// From the index engine.
    Engine(neardup_index::Error),
    /// From the gateway itself.
    Gateway(GatewayKind),
}

/// The gateway's own error kinds.
#[derive(Debug)]
pub enum GatewayKind {
    /// No credential, or one that matches nothing.
    Unauthenticated,
    /// The credential is valid for this tenant but lacks a scope.
    Forbidden {
        /// The scope the operation needs.
        scope: &'static str,
    },
    /// The tenant does not exist *or* the credential is for another tenant:
    /// the two answers are byte-identical so a key cannot probe for tenants.
    NoSuchTenant {
        /// The tenant id from the path.
        tenant: String,
    },
    /// No live item of that id (tombstoned or never stored).
    ItemNotFound {
        /// The item id.
        item_id: String,
    },
    /// No route for the path.
    RouteNotFound,
    /// The route exists but not with this method.
    MethodNotAllowed,
    /// The body is not `application/json` (or `application/octet-stream`
    /// for snapshot uploads).
    UnsupportedMediaType {
        /// The media type the route wants.
        expected: &'static str,
    },
    /// The body is not valid JSON for the operation.
    InvalidJson {
        /// What the parser said.
        detail: String,
    },
    /// A configuration key the gateway maps itself is invalid.
    InvalidConfig {
        /// Which key.
        key: &'static str,
        /// Why.
        reason: String,
    },
    /// A path or query parameter is invalid.
    InvalidRequest {
        /// What is wrong.
        detail: String,
    },
    /// The body is over the configured limit.
    PayloadTooLarge {
        /// The limit in bytes.
        max: u64,
    },
    /// A per-tenant rate or byte quota is exhausted.
    RateLimited {
        /// `requests` or `bytes`.
        quota: &'static str,
        /// Seconds until the request would be admitted.
        retry_after_secs: u64,
    },
    /// The request took longer than the configured timeout. Any write it
    /// carried may still have been applied: retry with the same
    /// idempotency key.
    Timeout,
    /// The service is starting or shutting down.
    Unavailable,
    /// Cluster mode: the tenant's partition is not served by this node.
    /// With a node that serves it, a `307` to that node (same path and
    /// query; the `Location` is completed by the router, which knows the
    /// request); without one, a `503`.
    OtherPartition {
        /// The tenant asked for.
        tenant: String,
        /// Its partition, `index/count`.
        partition: String,
        /// A live node serving it, `http://host:port`.
        base_url: Option<String>,
    },
    /// Cluster mode with home redirects: a write of a tenant whose home is
    /// another node; a `307` there (same path and query).
    OtherHome {
        /// The tenant written.
        tenant: String,
        /// Its home node's id.
        node: String,
        /// Its home node, `http://host:port`.
        base_url: String,
    },
    /// Content by `content_uri` could not be read (see
    /// [`crate::ContentErrorKind`] for each status).
    Content(crate::content::ContentError),
    /// A bug or an environmental failure in the gateway (detail is logged).
    Internal {
        /// For the log only.
        detail: String,
    },
}

/// The JSON error body.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// Code and message of an error.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, snake_case; see `docs/service.md` for the list.
    pub code: String,
    /// Human-readable; not stable.
    pub message: String,
}

impl ApiError {
    /// A gateway error.
    pub fn gateway(kind: GatewayKind) -> ApiError {
        ApiError { kind: ApiErrorKind::Gateway(kind) }
    }

    /// The structured kind.
    pub fn kind(&self) -> &ApiErrorKind {
        &self.kind
    }

    /// The same answer for "no such tenant" and "not your tenant".
    pub fn no_such_tenant(tenant: &str) -> ApiError {
        ApiError::gateway(GatewayKind::NoSuchTenant { tenant: tenant.to_string() })
    }

    /// An internal failure; `detail` is logged, never sent.
    pub fn internal(detail: impl Into<String>) -> ApiError {
        ApiError::gateway(GatewayKind::Internal { detail: detail.into() })
    }

    /// A bad path or query parameter.
    pub fn invalid_request(detail: impl Into<String>) -> ApiError {
        ApiError::gateway(GatewayKind::InvalidRequest { detail: detail.into() })
    }

    /// Status, stable code and client-facing message: the one mapping.
    pub fn parts(&self) -> (StatusCode, &'static str, String) {
        use GatewayKind as G;
        let internal = "internal error".to_string();
        match &self.kind {
            ApiErrorKind::Engine(e) => {
                let (status, message) = match e.kind() {
                    EngineKind::InvalidConfig { .. } | EngineKind::InvalidInput { .. } => {
                        (StatusCode::BAD_REQUEST, e.to_string())
                    }
                    EngineKind::TenantNotFound { tenant } => (StatusCode::NOT_FOUND, tenant_not_found_message(tenant)),
                    EngineKind::ItemNotFound { .. } => (StatusCode::NOT_FOUND, e.to_string()),
                    EngineKind::TenantExists { .. }
                    | EngineKind::ItemExists { .. }
                    | EngineKind::StaleEpoch { .. }
                    | EngineKind::IdempotencyConflict { .. }
                    | EngineKind::InvalidState { .. } => (StatusCode::CONFLICT, e.to_string()),
                    EngineKind::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, e.to_string()),
                    EngineKind::BudgetExceeded { .. }
                    | EngineKind::RebuildNeedsContent { .. }
                    | EngineKind::Corrupt { .. }
                    | EngineKind::SnapshotAuth { .. }
                    | EngineKind::UnsupportedFormat { .. }
                    | EngineKind::TenantMismatch { .. } => (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
                    EngineKind::Io { .. } | EngineKind::Store { .. } => (StatusCode::INTERNAL_SERVER_ERROR, internal),
                    EngineKind::LogConflict { .. } | EngineKind::Unavailable { .. } => {
                        (StatusCode::SERVICE_UNAVAILABLE, e.to_string())
                    }
                    EngineKind::EventsTrimmed { .. } => (StatusCode::GONE, e.to_string()),
                };
                (status, e.code(), message)
            }
            ApiErrorKind::Gateway(g) => match g {
                G::Unauthenticated => (
                    StatusCode::UNAUTHORIZED,
                    "unauthenticated",
                    "missing or invalid credential; send Authorization: Bearer <token>".into(),
                ),
                G::Forbidden { scope } => {
                    (StatusCode::FORBIDDEN, "forbidden", format!("this key lacks the {scope:?} scope"))
                }
                G::NoSuchTenant { tenant } => {
                    (StatusCode::NOT_FOUND, "tenant_not_found", tenant_not_found_message(tenant))
                }
                G::ItemNotFound { item_id } => {
                    (StatusCode::NOT_FOUND, "item_not_found", format!("item {item_id:?} not found"))
                }
                G::RouteNotFound => (StatusCode::NOT_FOUND, "route_not_found", "no such route".into()),
                G::MethodNotAllowed => {
                    (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed on this route".into())
                }
                G::UnsupportedMediaType { expected } => (
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    format!("the body must be sent as Content-Type: {expected}"),
                ),
                G::InvalidJson { detail } => (StatusCode::BAD_REQUEST, "invalid_json", detail.clone()),
                G::InvalidConfig { key, reason } => {
                    (StatusCode::BAD_REQUEST, "invalid_config", format!("invalid {key}: {reason}"))
                }
                G::InvalidRequest { detail } => (StatusCode::BAD_REQUEST, "invalid_request", detail.clone()),
                G::PayloadTooLarge { max } => (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("the body is over the limit of {max} bytes"),
                ),
                G::RateLimited { quota, retry_after_secs } => (
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    format!("the tenant's {quota} quota is exhausted; retry after {retry_after_secs} s"),
                ),
                G::Timeout => (
                    StatusCode::REQUEST_TIMEOUT,
                    "timeout",
                    "the request timed out; a write may still have been applied, retry with the same \
                     idempotency key"
                        .into(),
                ),
                G::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the service is not ready".into()),
                G::OtherPartition { tenant, partition, base_url: Some(url) } => (
                    StatusCode::TEMPORARY_REDIRECT,
                    "other_partition",
                    format!("tenant {tenant:?} is in partition {partition}, served by {url}; follow Location"),
                ),
                G::OtherPartition { tenant, partition, base_url: None } => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "partition_unavailable",
                    format!("tenant {tenant:?} is in partition {partition}, which no live node serves now"),
                ),
                G::OtherHome { tenant, node, base_url } => (
                    StatusCode::TEMPORARY_REDIRECT,
                    "other_home",
                    format!(
                        "writes of tenant {tenant:?} are taken by its home node {node} at {base_url}; follow Location"
                    ),
                ),
                G::Content(c) => {
                    use crate::content::ContentErrorKind as C;
                    let (status, code) = match c.kind() {
                        C::InvalidUri { .. } => (StatusCode::BAD_REQUEST, "invalid_content_uri"),
                        C::NotAllowed { .. } => (StatusCode::FORBIDDEN, "content_uri_not_allowed"),
                        C::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "content_too_large"),
                        C::MediaType { .. } => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "content_type_not_allowed"),
                        C::NotFound { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "content_not_found"),
                        C::NotText => (StatusCode::UNPROCESSABLE_ENTITY, "content_not_text"),
                        C::Changed => (StatusCode::CONFLICT, "content_changed"),
                        C::Refused { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "content_store_refused"),
                        C::Unavailable { store, .. } => {
                            return (
                                StatusCode::SERVICE_UNAVAILABLE,
                                "content_store_unavailable",
                                format!("content store {store:?} is unavailable; nothing was written, retry"),
                            )
                        }
                    };
                    (status, code, c.to_string())
                }
                G::Internal { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "internal", internal),
            },
        }
    }
}

/// One message for both "no such tenant" and "not yours".
fn tenant_not_found_message(tenant: &str) -> String {
    format!("tenant {tenant:?} not found")
}

impl From<crate::content::ContentError> for ApiError {
    fn from(e: crate::content::ContentError) -> ApiError {
        ApiError::gateway(GatewayKind::Content(e))
    }
}

impl From<neardup_index::Error> for ApiError {
    fn from(e: neardup_index::Error) -> ApiError {
        ApiError { kind: ApiErrorKind::Engine(e) }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            ApiErrorKind::Engine(e) => write!(f, "{e}"),
            ApiErrorKind::Gateway(GatewayKind::Internal { detail }) => write!(f, "internal: {detail}"),
            ApiErrorKind::Gateway(GatewayKind::Content(c)) => write!(f, "{c}"),
            ApiErrorKind::Gateway(_) => f.write_str(&self.parts().2),
        }
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = self.parts();
        if status.is_server_error() {
            tracing::error!(code, error = %self, "request failed");
        } else {
            tracing::debug!(code, %message, "request rejected");
        }
        let body = ErrorBody { error: ErrorDetail { code: code.to_string(), message } };
        let mut resp = (status, axum::Json(body)).into_response();
        match &self.kind {
            ApiErrorKind::Gateway(GatewayKind::RateLimited { retry_after_secs, .. }) => {
                resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            ApiErrorKind::Gateway(GatewayKind::Unauthenticated) => {
                resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiErrorKind::Gateway(
                GatewayKind::OtherPartition { base_url: Some(url), .. } | GatewayKind::OtherHome { base_url: url, .. },
            ) => {
                resp.extensions_mut().insert(RedirectBase(url.clone()));
            }
            ApiErrorKind::Gateway(GatewayKind::Content(c))
                if matches!(c.kind(), crate::content::ContentErrorKind::Unavailable { .. }) =>
            {
                resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(1));
            }
            ApiErrorKind::Gateway(GatewayKind::OtherPartition { base_url: None, .. }) => {
                resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(1));
            }
            ApiErrorKind::Engine(e) => {
                if let EngineKind::EventsTrimmed { oldest_after, .. } = e.kind() {
                    resp.headers_mut().insert(OLDEST_AFTER, HeaderValue::from(*oldest_after));
                }
            }
            ApiErrorKind::Gateway(_) => {}
        }
        resp
    }
}

/// On a `410 events_trimmed`: the oldest position the event feed resumes
/// after (also in the message).
pub const OLDEST_AFTER: header::HeaderName = header::HeaderName::from_static("neardup-oldest-after");

/// On a `307` to another node: its base URL, to which the router appends
/// the request's path and query as `Location`.
#[derive(Debug, Clone)]
pub(crate) struct RedirectBase(pub String);

/// Shorthand for handlers.
pub type ApiResult<T> = std::result::Result<T, ApiError>;

/// The error statuses any route may answer, all with [`ErrorBody`].
pub(crate) struct StdErrors;

impl utoipa::IntoResponses for StdErrors {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::response::Response>> {
        [
            ("307", "Cluster mode: the tenant's partition is served by the node in Location"),
            ("400", "Invalid input, JSON or configuration"),
            ("401", "Missing or invalid credential"),
            ("403", "The key lacks a scope"),
            ("404", "No such tenant (or not yours), item or route"),
            ("405", "Method not allowed"),
            ("408", "Request timed out"),
            ("409", "Conflict: exists, stale epoch, idempotency key reuse, invalid state"),
            ("413", "Body or content over a limit"),
            ("415", "Wrong Content-Type, or a content object's type not allowed"),
            ("422", "Budget, snapshot or rebuild refused"),
            ("429", "Tenant quota exhausted (see Retry-After)"),
            ("500", "Internal error"),
            ("503", "Not ready, no live node serves the tenant's partition, or a content store is unavailable"),
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

/// Why the service could not start or stopped badly.
#[derive(Debug)]
pub enum ServeError {
    /// A configuration value is invalid (exit status 2).
    Config(String),
    /// The engine failed to open or flush.
    Engine(neardup_index::Error),
    /// Socket or runtime trouble.
    Io(String),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Config(m) => write!(f, "configuration: {m}"),
            ServeError::Engine(e) => write!(f, "engine: {e}"),
            ServeError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ServeError {}
