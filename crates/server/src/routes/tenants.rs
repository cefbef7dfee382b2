//! Tenants and their keys.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;

use crate::auth::{MintedKey, Principal, Scope};
use crate::error::{ApiError, ApiResult, StdErrors};
use crate::extract::{ApiJson, P};
use crate::state::AppState;
use crate::tenant_spec;
use crate::wire::{
    CreateKeyRequest, CreateTenantRequest, CreateTenantResponse, KeyInfo, KeyList, StatsView, TenantDetail, TenantList,
};

/// Creates a tenant and its first key (all tenant scopes). Operator only.
#[utoipa::path(post, path = "/v1/tenants", tag = "tenants", request_body = CreateTenantRequest,
    responses((status = 201, body = CreateTenantResponse), StdErrors), security(("bearer" = [])))]
pub(crate) async fn create(
    State(s): State<AppState>,
    p: Principal,
    ApiJson(req, _): ApiJson<CreateTenantRequest>,
) -> ApiResult<(StatusCode, Json<CreateTenantResponse>)> {
    p.require_admin()?;
    let config = req.config.unwrap_or_default().for_new_tenant()?;
    let id = req.tenant_id.clone();
    s.run(&req.tenant_id, move |e| e.create_tenant(&id, config)).await?;
    let tenant_id = req.tenant_id.clone();
    let key = s.keys_call(move |k| k.mint(&tenant_id, &Scope::ALL)).await?;
    s.metrics.snapshot_written(&req.tenant_id, std::time::SystemTime::now());
    s.journal.audit(&req.tenant_id, p.actor(), "create_tenant", format!("key {}", key.key_id));
    Ok((
        StatusCode::CREATED,
        Json(CreateTenantResponse {
            tenant_id: req.tenant_id,
            api_key: key.api_key,
            key_id: key.key_id,
            scopes: key.scopes,
        }),
    ))
}

/// Tenants the caller can see: all for the operator, its own for a key.
#[utoipa::path(get, path = "/v1/tenants", tag = "tenants",
    responses((status = 200, body = TenantList), StdErrors), security(("bearer" = [])))]
pub(crate) async fn list(State(s): State<AppState>, p: Principal) -> ApiResult<Json<TenantList>> {
    let tenants = match &p {
        // Every partition this node serves (in a partitioned cluster, the
        // tenants of the others are listed by the nodes serving them).
        Principal::Admin => {
            let mut all: Vec<String> = s.run_each(|e| e.tenants()).await?.into_iter().flatten().collect();
            all.sort_unstable();
            all
        }
        Principal::Tenant { tenant, .. } => vec![tenant.clone()],
    };
    Ok(Json(TenantList { tenants }))
}

/// A tenant's effective configuration and figures.
#[utoipa::path(get, path = "/v1/tenants/{tenant}", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = TenantDetail), StdErrors), security(("bearer" = [])))]
pub(crate) async fn detail(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
) -> ApiResult<Json<TenantDetail>> {
    s.enter(&p, &tenant, Scope::Query, 0)?;
    let t = tenant.clone();
    let (config, stats) = s.run(&tenant, move |e| Ok((e.tenant_config(&t)?, e.stats(&t)?))).await?;
    Ok(Json(TenantDetail {
        config: tenant_spec::view(&tenant, &config)?,
        stats: StatsView::from(&stats),
        content_stores: s.content.names_for(&tenant),
    }))
}

/// Mints another key for the tenant (tenant `admin` scope).
#[utoipa::path(post, path = "/v1/tenants/{tenant}/keys", tag = "tenants", request_body = CreateKeyRequest,
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 201, body = MintedKey), StdErrors), security(("bearer" = [])))]
pub(crate) async fn create_key(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    ApiJson(req, len): ApiJson<CreateKeyRequest>,
) -> ApiResult<(StatusCode, Json<MintedKey>)> {
    s.enter(&p, &tenant, Scope::Admin, len)?;
    if req.scopes.is_empty() {
        return Err(ApiError::invalid_request("a key needs at least one scope"));
    }
    // The tenant must exist (the operator may name any id).
    let t = tenant.clone();
    s.run(&tenant, move |e| e.tenant_config(&t)).await?;
    let (t, scopes) = (tenant.clone(), req.scopes.clone());
    let key = s.keys_call(move |k| k.mint(&t, &scopes)).await?;
    s.journal.audit(&tenant, p.actor(), "create_key", format!("key {} scopes {:?}", key.key_id, key.scopes));
    Ok((StatusCode::CREATED, Json(key)))
}

/// The tenant's key ids and scopes.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/keys", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = KeyList), StdErrors), security(("bearer" = [])))]
pub(crate) async fn list_keys(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
) -> ApiResult<Json<KeyList>> {
    s.enter(&p, &tenant, Scope::Admin, 0)?;
    let t = tenant.clone();
    s.run(&tenant, move |e| e.tenant_config(&t)).await?;
    let keys = s.keys.list(&tenant).into_iter().map(|(key_id, scopes)| KeyInfo { key_id, scopes }).collect();
    Ok(Json(KeyList { keys }))
}

/// Revokes a key of the tenant.
#[utoipa::path(delete, path = "/v1/tenants/{tenant}/keys/{key_id}", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id"), ("key_id" = String, Path, description = "Key id")),
    responses((status = 204, description = "Revoked"), StdErrors),
    security(("bearer" = [])))]
pub(crate) async fn revoke_key(
    State(s): State<AppState>,
    p: Principal,
    P((tenant, key_id)): P<(String, String)>,
) -> ApiResult<StatusCode> {
    s.enter(&p, &tenant, Scope::Admin, 0)?;
    let (t, id) = (tenant.clone(), key_id.clone());
    if !s.keys_call(move |k| k.revoke(&t, &id)).await? {
        return Err(ApiError::invalid_request(format!("no key {key_id:?} for this tenant")));
    }
    s.journal.audit(&tenant, p.actor(), "revoke_key", format!("key {key_id}"));
    Ok(StatusCode::NO_CONTENT)
}
