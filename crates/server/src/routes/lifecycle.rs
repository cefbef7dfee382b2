//! Index lifecycle: snapshot, restore, rebuild, shadow, rollback, compaction.

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::Response;
use axum::Json;

use crate::auth::{Principal, Scope};
use crate::error::{ApiError, ApiResult, StdErrors};
use crate::extract::{ApiJson, OctetStream, P};
use crate::observe::note_error;
use crate::state::AppState;
use crate::wire::{Done, ReconfigureRequest, RestoreResponse, ShadowView};

/// The tenant's snapshot (versioned, checksummed; encrypted when the
/// service has a snapshot key), streamed as it is written: the first bytes
/// leave at once and memory stays bounded whatever the tenant's size. A
/// failure part-way cuts the connection; the body is then incomplete and
/// fails to restore.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/snapshot", tag = "lifecycle",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>), StdErrors),
    security(("bearer" = [])))]
pub(crate) async fn snapshot(State(s): State<AppState>, p: Principal, P(tenant): P<String>) -> ApiResult<Response> {
    s.enter(&p, &tenant, Scope::Admin, 0)?;
    let t = tenant.clone();
    // Unknown tenants get their 404 before the stream starts.
    s.run(&tenant, move |e| e.tenant_config(&t)).await?;
    let (mut out, body) = crate::stream::response_body();
    let (state, t, actor) = (s.clone(), tenant.clone(), p.actor().to_string());
    s.spawn_engine(&tenant, move |e| {
        match e.snapshot_to(&t, &mut out).and_then(|h| {
            std::io::Write::flush(&mut out).map_err(neardup_index::Error::from)?;
            Ok(h)
        }) {
            Ok(h) => state.journal.audit(
                &t,
                actor,
                "snapshot_download",
                format!("{} items at lsn {}", h.items, h.covered_lsn),
            ),
            Err(err) => {
                tracing::warn!(tenant = %t, error = %err, "snapshot download failed part-way");
                out.fail(&err);
            }
        }
    })?;
    Response::builder()
        .header(CONTENT_TYPE, "application/octet-stream")
        .body(body)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Replaces the tenant's state with a snapshot of any size, streamed to
/// disk and checked completely before anything changes. The caller's scope
/// and the tenant are checked before a byte of the body is read.
#[utoipa::path(put, path = "/v1/tenants/{tenant}/snapshot", tag = "lifecycle",
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = RestoreResponse), StdErrors), security(("bearer" = [])))]
pub(crate) async fn restore(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    OctetStream(body, declared): OctetStream,
) -> ApiResult<Json<RestoreResponse>> {
    s.enter(&p, &tenant, Scope::Admin, declared.unwrap_or(0) as usize)?;
    let mut input = crate::stream::request_reader(body, |_| {});
    let t = tenant.clone();
    let h =
        s.run(&tenant, move |e| e.restore_from(&t, &mut input)).await.inspect_err(|e| note_error(&s, &tenant, e))?;
    s.metrics.snapshot_written(&tenant, std::time::SystemTime::now());
    s.journal.audit(&tenant, p.actor(), "restore", format!("{} items at lsn {}", h.items, h.covered_lsn));
    Ok(Json(RestoreResponse {
        tenant_id: tenant,
        items: h.items,
        format_version: neardup_index::SNAPSHOT_VERSION,
        fingerprint_version: h.fingerprint_version,
        covered_lsn: h.covered_lsn,
    }))
}

/// Rebuilds every signature and posting under changed parameters (features
/// too, from retained content); the previous configuration is kept for rollback.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/rebuild", tag = "lifecycle", request_body = ReconfigureRequest,
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = Done), StdErrors), security(("bearer" = [])))]
pub(crate) async fn rebuild(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    ApiJson(req, len): ApiJson<ReconfigureRequest>,
) -> ApiResult<Json<Done>> {
    s.enter(&p, &tenant, Scope::Admin, len)?;
    let t = tenant.clone();
    let base = s.run(&tenant, move |e| e.tenant_config(&t)).await?;
    let config = req.config.apply(base)?;
    let t = tenant.clone();
    s.run(&tenant, move |e| e.rebuild(&t, config)).await?;
    s.journal.audit(&tenant, p.actor(), "rebuild", format!("{:?}", req.config));
    Ok(Json(Done { tenant_id: tenant, done: "rebuild".into() }))
}

/// Starts a shadow index under changed parameters; it answers alongside the
/// live one and counts disagreements until promoted or dropped.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/shadow", tag = "lifecycle", request_body = ReconfigureRequest,
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = ShadowView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn shadow_start(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    ApiJson(req, len): ApiJson<ReconfigureRequest>,
) -> ApiResult<Json<ShadowView>> {
    s.enter(&p, &tenant, Scope::Admin, len)?;
    let t = tenant.clone();
    let base = s.run(&tenant, move |e| e.tenant_config(&t)).await?;
    let config = req.config.apply(base)?;
    let t = tenant.clone();
    let r = s.run(&tenant, move |e| e.start_shadow(&t, config)).await?;
    s.journal.audit(&tenant, p.actor(), "shadow_start", r.shadow_version.clone());
    Ok(Json(ShadowView::from(&r)))
}

/// The shadow's disagreement figures so far.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/shadow", tag = "lifecycle",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = ShadowView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn shadow_report(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
) -> ApiResult<Json<ShadowView>> {
    s.enter(&p, &tenant, Scope::Admin, 0)?;
    let t = tenant.clone();
    let r = s.run(&tenant, move |e| e.shadow_report(&t)).await?;
    Ok(Json(ShadowView::from(&r)))
}

async fn simple(
    s: AppState,
    p: Principal,
    tenant: String,
    action: &'static str,
    f: fn(&neardup_index::Engine, &str) -> neardup_index::Result<String>,
) -> ApiResult<Json<Done>> {
    s.enter(&p, &tenant, Scope::Admin, 0)?;
    let t = tenant.clone();
    let detail = s.run(&tenant, move |e| f(e, &t)).await?;
    s.journal.audit(&tenant, p.actor(), action, detail);
    Ok(Json(Done { tenant_id: tenant, done: action.into() }))
}

/// Makes the shadow's configuration live (a logged rebuild).
#[utoipa::path(post, path = "/v1/tenants/{tenant}/shadow/promote", tag = "lifecycle",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = Done), StdErrors), security(("bearer" = [])))]
pub(crate) async fn shadow_promote(s: State<AppState>, p: Principal, P(t): P<String>) -> ApiResult<Json<Done>> {
    simple(s.0, p, t, "shadow_promote", |e, t| e.promote_shadow(t).map(|()| String::new())).await
}

/// Discards the shadow index.
#[utoipa::path(delete, path = "/v1/tenants/{tenant}/shadow", tag = "lifecycle",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = Done), StdErrors), security(("bearer" = [])))]
pub(crate) async fn shadow_drop(s: State<AppState>, p: Principal, P(t): P<String>) -> ApiResult<Json<Done>> {
    simple(s.0, p, t, "shadow_drop", |e, t| e.drop_shadow(t).map(|()| String::new())).await
}

/// Returns to the configuration before the last rebuild or promotion.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/rollback", tag = "lifecycle",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = Done), StdErrors), security(("bearer" = [])))]
pub(crate) async fn rollback(s: State<AppState>, p: Principal, P(t): P<String>) -> ApiResult<Json<Done>> {
    simple(s.0, p, t, "rollback", |e, t| e.rollback(t).map(|()| String::new())).await
}

/// Drops tombstoned records and checkpoints, so tombstoned data leaves the
/// log and old snapshots too.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/compact", tag = "lifecycle",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = Done), StdErrors), security(("bearer" = [])))]
pub(crate) async fn compact(s: State<AppState>, p: Principal, P(t): P<String>) -> ApiResult<Json<Done>> {
    simple(s.0, p, t, "compact", |e, t| e.compact(t).map(|n| format!("{n} records dropped"))).await
}
