//! The router: every route, the middleware around them, and the OpenAPI
//! document generated from the handlers' annotations.

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tracing::Instrument;

use crate::error::{ApiError, GatewayKind};
use crate::state::AppState;

/// Read your writes: answer for the state at or after a log position.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct MinLsn {
    /// Wait (up to the request timeout) until this node has applied this
    /// log position — the `lsn` a write answered — then answer. On a single
    /// node every acknowledged write is applied already.
    pub min_lsn: Option<u64>,
}

impl MinLsn {
    /// Waits for `min_lsn` on `tenant`, if one was given, up to the request
    /// timeout. The wait holds no thread: it is a timer between checks that
    /// take two short locks. A position past the log's end is refused at
    /// once (`invalid_input`: it was never any write's answer), and at most
    /// [`crate::waiters::PER_TENANT`] reads of a tenant and
    /// [`crate::waiters::PER_NODE`] of the node wait at a time (more:
    /// `503 unavailable`, retry).
    pub(crate) async fn wait(&self, s: &AppState, tenant: &str) -> crate::error::ApiResult<()> {
        let Some(lsn) = self.min_lsn else { return Ok(()) };
        let engine = s.engine_for(tenant)?;
        if engine.has_applied(tenant, lsn)? {
            return Ok(());
        }
        if let Some(node) = s.cluster().and_then(|c| c.local(tenant)) {
            let end = node
                .stream_end()
                .await
                .map_err(|e| ApiError::from(neardup_index::Error::unavailable(e.to_string())))?;
            if lsn > end {
                return Err(neardup_index::Error::input(
                    "min_lsn",
                    format!("position {lsn} is past the end of the stream (at {end})"),
                )
                .into());
            }
        }
        let _waiting = s.waiters.admit(tenant)?;
        let deadline = tokio::time::Instant::now() + s.config.request_timeout;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            if engine.has_applied(tenant, lsn)? {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(engine.not_applied_yet(lsn).into());
            }
        }
    }
}

pub(crate) mod dashboard;
pub(crate) mod events;
pub(crate) mod items;
pub(crate) mod lifecycle;
pub(crate) mod ops;
pub(crate) mod query;
pub(crate) mod review;
pub(crate) mod tenants;

/// The whole service as an axum `Router` (no socket: tests call
/// `app(state).oneshot(request)`).
pub fn app(state: AppState) -> Router {
    let cfg = state.config.clone();
    let json_api = Router::new()
        .route("/v1/tenants", post(tenants::create).get(tenants::list))
        .route("/v1/tenants/{tenant}", get(tenants::detail))
        .route("/v1/tenants/{tenant}/keys", post(tenants::create_key).get(tenants::list_keys))
        .route("/v1/tenants/{tenant}/keys/{key_id}", axum::routing::delete(tenants::revoke_key))
        .route("/v1/tenants/{tenant}/items", post(items::batch).get(items::list))
        .route("/v1/tenants/{tenant}/items/{item_id}", put(items::upsert).get(items::get).delete(items::tombstone))
        .route("/v1/tenants/{tenant}/items/{item_id}/candidates", get(query::item_candidates))
        .route("/v1/tenants/{tenant}/items/{item_id}/neighbourhood", get(query::neighbourhood))
        .route("/v1/tenants/{tenant}/items/{item_id}/unfence", post(items::unfence))
        .route("/v1/tenants/{tenant}/candidates", post(query::content_candidates))
        .route("/v1/tenants/{tenant}/decide", post(query::decide))
        .route("/v1/tenants/{tenant}/verify", post(query::verify))
        .route("/v1/tenants/{tenant}/rebuild", post(lifecycle::rebuild))
        .route("/v1/tenants/{tenant}/compact", post(lifecycle::compact))
        .route("/v1/tenants/{tenant}/rollback", post(lifecycle::rollback))
        .route(
            "/v1/tenants/{tenant}/shadow",
            post(lifecycle::shadow_start).get(lifecycle::shadow_report).delete(lifecycle::shadow_drop),
        )
        .route("/v1/tenants/{tenant}/shadow/promote", post(lifecycle::shadow_promote))
        .route("/v1/tenants/{tenant}/labels", post(review::add_label).get(review::labels))
        .route("/v1/tenants/{tenant}/decisions", get(review::decisions))
        .route("/v1/tenants/{tenant}/queue", get(review::queue))
        .route("/v1/tenants/{tenant}/compare", post(review::compare))
        .route("/v1/tenants/{tenant}/dashboard", get(dashboard::dashboard))
        .route("/v1/tenants/{tenant}/audit", get(review::audit))
        .route("/v1/tenants/{tenant}/events", get(events::events))
        .layer(RequestBodyLimitLayer::new(cfg.max_body_bytes))
        // The configured limit above is the only one: axum's own 2 MB default
        // for body extractors would otherwise cut requests well below it.
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(cfg.max_body_bytes, drain_oversized));
    let snapshots = Router::new()
        .route("/v1/tenants/{tenant}/snapshot", get(lifecycle::snapshot).put(lifecycle::restore))
        .layer(RequestBodyLimitLayer::new(cfg.max_snapshot_bytes))
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(cfg.max_snapshot_bytes, drain_oversized));
    let open = Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(crate::openapi::openapi_json))
        .route("/v1/schemas/events.json", get(events::schema))
        .route("/console", get(crate::console::redirect))
        .route("/console/", get(crate::console::index))
        .route("/console/{file}", get(crate::console::asset));
    Router::new()
        .merge(json_api)
        .merge(snapshots)
        .merge(open)
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, cfg.request_timeout))
        .layer(middleware::from_fn_with_state(state.clone(), finish))
        .with_state(state)
}

/// The tenant of a `/v1/tenants/{tenant}/…` path.
fn tenant_in_path(path: &str) -> Option<&str> {
    path.strip_prefix("/v1/tenants/")?.split('/').next().filter(|t| !t.is_empty())
}

/// Whether a request writes items of its tenant: `PUT` or `DELETE`
/// `/v1/tenants/{t}/items/{id}`, or `POST /v1/tenants/{t}/items` (a batch).
fn writes_items(method: &Method, path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/v1/tenants/") else { return false };
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [_, "items"] => *method == Method::POST,
        [_, "items", id] => !id.is_empty() && (*method == Method::PUT || *method == Method::DELETE),
        _ => false,
    }
}

/// Completes a redirect to another node ([`crate::error::RedirectBase`])
/// with the request's own path and query.
fn with_location(mut resp: Response, uri: &axum::http::Uri) -> Response {
    if let Some(crate::error::RedirectBase(base)) = resp.extensions_mut().remove::<crate::error::RedirectBase>() {
        let target = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
        match axum::http::HeaderValue::from_str(&format!("{base}{target}")) {
            Ok(v) => {
                resp.headers_mut().insert(axum::http::header::LOCATION, v);
            }
            Err(_) => {
                return ApiError::internal(format!("redirect target {base}{target} is not a header value"))
                    .into_response()
            }
        }
    }
    resp
}

/// The most of an oversized body read (and dropped) before its 413.
pub const DRAIN_MAX: u64 = 64 << 20;

/// A body declared over `max` gets its 413 without being processed; but a
/// client that sends the whole body before reading the answer (Python's
/// urllib, many others) sees only a reset connection if the server closes
/// with the body unread. So up to [`DRAIN_MAX`] of it is read and dropped
/// first (bounded by the request timeout), and the connection closed.
async fn drain_oversized(State(max): State<usize>, req: Request, next: Next) -> Response {
    let declared =
        req.headers().get(axum::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let Some(declared) = declared.filter(|&n| n > max as u64) else { return next.run(req).await };
    if declared <= DRAIN_MAX {
        use futures_util::StreamExt;
        let mut body = req.into_body().into_data_stream();
        let mut read = 0u64;
        while read < declared {
            match body.next().await {
                Some(Ok(chunk)) => read += chunk.len() as u64,
                _ => break,
            }
        }
    }
    let mut resp = ApiError::gateway(GatewayKind::PayloadTooLarge { max: max as u64 }).into_response();
    resp.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    resp
}

async fn route_not_found() -> ApiError {
    ApiError::gateway(GatewayKind::RouteNotFound)
}

async fn method_not_allowed() -> ApiError {
    ApiError::gateway(GatewayKind::MethodNotAllowed)
}

/// Outermost: a span per request, HTTP metrics, and the rewrite of the few
/// bodiless errors produced by tower layers (413 from the body limit, 408
/// from the timeout) into the service's JSON error body.
async fn finish(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let is_snapshot = route.ends_with("/snapshot");
    let span = tracing::info_span!("request", %method, route = %route);
    // For a redirect's Location (a cheap, shared copy).
    let uri = req.uri().clone();
    // Cluster mode: a tenant of a partition served elsewhere, or a write
    // of a tenant whose home is another node (with home redirects on), is
    // redirected before anything is read or charged.
    let early = tenant_in_path(req.uri().path()).and_then(|t| {
        state.redirect_for(t).or_else(|| writes_items(&method, req.uri().path()).then(|| state.home_for(t)).flatten())
    });
    let resp = match early {
        Some(e) => e.into_response(),
        None => next.run(req).instrument(span.clone()).await,
    };
    let resp = with_location(resp, &uri);
    let status = resp.status();
    let is_json = resp.headers().get(CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let resp = if (status.is_client_error() || status.is_server_error()) && !is_json {
        let kind = match status {
            StatusCode::PAYLOAD_TOO_LARGE => GatewayKind::PayloadTooLarge {
                max: if is_snapshot { state.config.max_snapshot_bytes } else { state.config.max_body_bytes } as u64,
            },
            StatusCode::REQUEST_TIMEOUT => GatewayKind::Timeout,
            StatusCode::NOT_FOUND => GatewayKind::RouteNotFound,
            StatusCode::METHOD_NOT_ALLOWED => GatewayKind::MethodNotAllowed,
            other => GatewayKind::Internal { detail: format!("bodiless {other} from a layer") },
        };
        ApiError::gateway(kind).into_response()
    } else {
        resp
    };
    let elapsed = started.elapsed();
    state.metrics.http(&route, resp.status().as_u16());
    if method != Method::GET || !matches!(route.as_str(), "/healthz" | "/readyz" | "/metrics") {
        tracing::info!(
            parent: &span,
            status = resp.status().as_u16(),
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "response"
        );
    }
    resp
}
