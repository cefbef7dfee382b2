//! The event feed: a tenant's events in log order as NDJSON, long-polled,
//! and the JSON Schema of its lines (see `neardup_index`'s `event` module
//! for what an event is and how far back the feed reaches).

use std::time::Duration;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::{Principal, Scope};
use crate::error::{ApiError, ApiResult, StdErrors};
use crate::extract::{P, Q};
use crate::state::AppState;

/// The JSON Schema of every event line, version 1 (frozen examples beside
/// it in `schemas/events/v1/examples/`).
pub const EVENTS_SCHEMA_V1: &str = include_str!("../../../../schemas/events/v1/events.json");

/// Events a page holds by default, and at most.
const DEFAULT_LIMIT: u32 = 500;
const MAX_LIMIT: u32 = 1000;
/// The longest `wait`, in seconds (and always under the request timeout).
pub const MAX_WAIT_SECS: u32 = 25;
/// How often a waiting read looks again.
const POLL: Duration = Duration::from_millis(20);

/// Where the page starts, how many events, how long to wait for one.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventParams {
    /// Events after this log position: the `lsn` of the last event
    /// processed (default 0, the oldest the feed holds).
    #[param(minimum = 0)]
    after: Option<u64>,
    /// Within the entry at `after` (a batch's entry holds several events,
    /// `i` of `n`): the events after its event `after_i`. Leave out once
    /// the entry's last event (`i` = `n` − 1) was processed.
    #[param(minimum = 0, maximum = 1000000)]
    after_i: Option<u32>,
    /// Seconds to hold the request while there is no event after `after`
    /// yet (long-poll; default 0, at most 25).
    #[param(minimum = 0, maximum = 25)]
    wait: Option<u32>,
    /// Most events in the page (default 500, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// The tenant's events after a log position, oldest first, one JSON object
/// a line (`application/x-ndjson`; schema at `/v1/schemas/events.json`):
/// items inserted or replaced with their decision, tombstones, labels,
/// rebuilds and rollbacks. Every node of a cluster serves the same events
/// at the same positions. An empty page after `wait` seconds means nothing
/// new; `410 events_trimmed` means the feed no longer holds the events
/// after `after` (the `Neardup-Oldest-After` header says where it resumes).
#[utoipa::path(get, path = "/v1/tenants/{tenant}/events", tag = "query",
    params(("tenant" = String, Path, description = "Tenant id"), EventParams),
    responses(
        (status = 200, description = "Events, one JSON object a line", content_type = "application/x-ndjson",
            body = String),
        (status = 410, description = "The feed no longer holds the events after `after`; resume after the \
            position in the Neardup-Oldest-After header", body = crate::error::ErrorBody,
            headers(("Neardup-Oldest-After" = u64, description = "The oldest position the feed resumes after"))),
        StdErrors),
    security(("bearer" = [])))]
pub(crate) async fn events(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    Q(params): Q<EventParams>,
) -> ApiResult<Response> {
    s.enter(&p, &tenant, Scope::Query, 0)?;
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid_request(format!("limit must be in 1..={MAX_LIMIT}")));
    }
    // A wait must end before the request's timeout does.
    let max_wait = (s.config.request_timeout.as_secs().saturating_sub(1) as u32).min(MAX_WAIT_SECS);
    let wait = params.wait.unwrap_or(0);
    if wait > max_wait {
        return Err(ApiError::invalid_request(format!("wait must be in 0..={max_wait} seconds")));
    }
    let (after, after_i) = (params.after.unwrap_or(0), params.after_i.map(|i| i as usize));
    let engine = s.engine_for(&tenant)?;
    // A single node has applied every position it ever answered: one past
    // its log's end was never an event's.
    engine.has_applied(&tenant, after).map_err(|_| {
        ApiError::invalid_request(format!(
            "after {after} is past the end of this node's log (at {})",
            engine.applied_position()
        ))
    })?;
    let read = || {
        let t = tenant.clone();
        s.run(&tenant, move |e| e.events(&t, after, after_i, limit as usize))
    };
    let mut page = read().await?;
    if page.lines.is_empty() && wait > 0 {
        let _waiting = s.waiters.admit(&tenant)?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(u64::from(wait));
        while page.lines.is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
            page = read().await?;
        }
    }
    let mut body = String::with_capacity(page.lines.iter().map(|l| l.len() + 1).sum());
    for line in &page.lines {
        body.push_str(line);
        body.push('\n');
    }
    let mut resp = body.into_response();
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    Ok(resp)
}

/// The JSON Schema (draft 2020-12) of the event feed's lines, version 1:
/// one definition per event type under `$defs`.
#[utoipa::path(get, path = "/v1/schemas/events.json", tag = "query",
    responses((status = 200, description = "JSON Schema of the event feed's lines", body = Object)))]
pub(crate) async fn schema() -> Response {
    let mut resp = EVENTS_SCHEMA_V1.into_response();
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}
