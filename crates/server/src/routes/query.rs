//! Read-only questions: candidates, decide, verify.

use std::time::Instant;

use axum::extract::State;
use axum::Json;
use neardup_index::{PolicyConfig, Query};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::{Principal, Scope};
use crate::error::{ApiError, ApiResult, StdErrors};
use crate::extract::{ApiJson, P, Q};
use crate::observe::{note_error, record_decision};
use crate::state::AppState;
use crate::wire::{ContentQuery, DecisionView, NeighbourhoodView, VerifyRequest, VerifyResponse};

const DEFAULT_LIMIT: u32 = 10;

fn check_limit(limit: Option<u32>) -> ApiResult<usize> {
    let l = limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=10_000).contains(&l) {
        return Err(ApiError::invalid_request("limit must be in 1..=10000"));
    }
    Ok(l as usize)
}

/// How many candidates.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LimitParams {
    /// Most candidates returned (default 10).
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<u32>,
    /// Answer for the state at or after this log position (see `MinLsn`).
    min_lsn: Option<u64>,
}

/// Verified candidates of a stored item, best first (the item itself excluded).
#[utoipa::path(get, path = "/v1/tenants/{tenant}/items/{item_id}/candidates", tag = "query",
    params(("tenant" = String, Path, description = "Tenant id"), ("item_id" = String, Path, description = "Item id"),
        LimitParams),
    responses((status = 200, body = DecisionView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn item_candidates(
    State(s): State<AppState>,
    p: Principal,
    P((tenant, item_id)): P<(String, String)>,
    Q(params): Q<LimitParams>,
) -> ApiResult<Json<DecisionView>> {
    s.enter(&p, &tenant, Scope::Query, 0)?;
    let limit = check_limit(params.limit)?;
    super::MinLsn { min_lsn: params.min_lsn }.wait(&s, &tenant).await?;
    let started = Instant::now();
    let (t, id) = (tenant.clone(), item_id.clone());
    let d = s.run(&tenant, move |e| e.candidates(&t, Query::Item(&id), limit)).await?;
    record_decision(&s, &tenant, "candidates", Some(&item_id), &d, started.elapsed().as_secs_f64(), None);
    Ok(Json(DecisionView::from(&d)))
}

/// Verified candidates for content that is not stored.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/candidates", tag = "query", request_body = ContentQuery,
    params(("tenant" = String, Path, description = "Tenant id"), super::MinLsn),
    responses((status = 200, body = DecisionView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn content_candidates(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    Q(min): Q<super::MinLsn>,
    ApiJson(req, len): ApiJson<ContentQuery>,
) -> ApiResult<Json<DecisionView>> {
    s.enter(&p, &tenant, Scope::Query, len)?;
    let limit = check_limit(req.limit)?;
    min.wait(&s, &tenant).await?;
    let started = Instant::now();
    let t = tenant.clone();
    let d = s
        .run(&tenant, move |e| e.candidates(&t, Query::Content(&req.content), limit))
        .await
        .inspect_err(|e| note_error(&s, &tenant, e))?;
    record_decision(&s, &tenant, "candidates", None, &d, started.elapsed().as_secs_f64(), None);
    Ok(Json(DecisionView::from(&d)))
}

/// The decision content would get, without writing anything.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/decide", tag = "query", request_body = ContentQuery,
    params(("tenant" = String, Path, description = "Tenant id"), super::MinLsn),
    responses((status = 200, body = DecisionView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn decide(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    Q(min): Q<super::MinLsn>,
    ApiJson(req, len): ApiJson<ContentQuery>,
) -> ApiResult<Json<DecisionView>> {
    s.enter(&p, &tenant, Scope::Query, len)?;
    min.wait(&s, &tenant).await?;
    let started = Instant::now();
    let t = tenant.clone();
    let d = s.run(&tenant, move |e| e.decide(&t, &req.content)).await.inspect_err(|e| note_error(&s, &tenant, e))?;
    record_decision(&s, &tenant, "decide", None, &d, started.elapsed().as_secs_f64(), None);
    Ok(Json(DecisionView::from(&d)))
}

/// Exact score of two stored items under the tenant's policy or a given one.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/verify", tag = "query", request_body = VerifyRequest,
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = VerifyResponse), StdErrors), security(("bearer" = [])))]
pub(crate) async fn verify(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    ApiJson(req, len): ApiJson<VerifyRequest>,
) -> ApiResult<Json<VerifyResponse>> {
    s.enter(&p, &tenant, Scope::Query, len)?;
    let policy = req.policy.map(|p| PolicyConfig {
        id: p.id,
        version: p.version,
        threshold_identical: p.threshold_identical,
        threshold_similar: p.threshold_similar,
    });
    let t = tenant.clone();
    let v = s.run(&tenant, move |e| e.verify(&t, &req.left, &req.right, policy)).await?;
    s.metrics.verification(&tenant, v.score);
    Ok(Json(VerifyResponse::from(&v)))
}

/// How large a neighbourhood.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct NeighbourhoodParams {
    /// Most members (default 50, at most 500).
    #[param(minimum = 1, maximum = 500)]
    max: Option<usize>,
}

/// An item's neighbourhood: the items reachable from it through verified
/// pairs at or above the policy's similar threshold (its cluster), found
/// by a breadth-first walk of candidate queries.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/items/{item_id}/neighbourhood", tag = "query",
    params(("tenant" = String, Path, description = "Tenant id"), ("item_id" = String, Path, description = "Item id"),
        NeighbourhoodParams),
    responses((status = 200, body = NeighbourhoodView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn neighbourhood(
    State(s): State<AppState>,
    p: Principal,
    P((tenant, item_id)): P<(String, String)>,
    Q(params): Q<NeighbourhoodParams>,
) -> ApiResult<Json<NeighbourhoodView>> {
    // Review scope: one request runs up to `max` + 1 candidate queries.
    s.enter(&p, &tenant, Scope::Review, 0)?;
    let max = params.max.unwrap_or(50);
    if !(1..=neardup_index::MAX_NEIGHBOURHOOD).contains(&max) {
        return Err(ApiError::invalid_request("max must be in 1..=500"));
    }
    let t = tenant.clone();
    let n = s.run(&tenant, move |e| e.neighbourhood(&t, &item_id, max)).await?;
    Ok(Json(NeighbourhoodView::from(&n)))
}
