//! Items: upsert one, batch upsert, read, list, tombstone.

use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use futures_util::StreamExt;
use neardup_index::{Item, UpsertOutcome, UpsertStatus};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::{Principal, Scope};
use crate::content::{ContentSource, Purpose, ReadRequest};
use crate::error::{ApiError, ApiResult, ErrorBody, ErrorDetail, GatewayKind, StdErrors};
use crate::extract::{ApiJson, P, Q};
use crate::observe::{note_error, record_decision};
use crate::state::AppState;
use crate::wire::{
    BatchRequest, BatchResponse, BatchResult, ItemPage, ItemView, TombstoneResponse, UpsertRequest, UpsertResponse,
};

fn wrote(o: &UpsertOutcome) -> bool {
    matches!(o.status, UpsertStatus::Inserted | UpsertStatus::Replaced)
}

/// Content reads of one batch at a time.
const CONCURRENT_READS: usize = 8;

/// The most bytes `tenant` takes in one item (its `max_item_bytes`).
async fn item_cap(s: &AppState, tenant: &str) -> ApiResult<u64> {
    let t = tenant.to_string();
    Ok(s.run(tenant, move |e| e.tenant_config(&t)).await?.limits.max_item_bytes)
}

/// An upsert's text and media type: inline `content`, or the object at
/// `content_uri` in one of the tenant's stores, read under `cap` (HEAD
/// first) and audited; its media type then carries the object's source.
/// Nothing is written when this fails.
async fn content_of(
    s: &AppState,
    p: &Principal,
    tenant: &str,
    item_id: &str,
    (content, uri, media_type): (Option<String>, Option<String>, Option<String>),
    cap: u64,
) -> ApiResult<(String, String)> {
    if media_type.as_deref().is_some_and(ContentSource::claims) {
        return Err(ApiError::invalid_request(
            "media_type parameters named content-* are the service's record of a content_uri; send none",
        ));
    }
    match (content, uri) {
        (Some(text), None) => Ok((text, media_type.unwrap_or_else(|| "text/plain".into()))),
        (None, Some(uri)) => {
            let req = ReadRequest { item_id, uri: &uri, purpose: Purpose::Ingest, cap, expect: None };
            let f = s.read_content(p, tenant, req).await?;
            let essence = media_type.unwrap_or(f.media_type);
            Ok((f.text, f.source.media_type(&essence)))
        }
        (Some(_), Some(_)) | (None, None) => {
            Err(ApiError::invalid_request("send exactly one of content and content_uri"))
        }
    }
}

/// Upserts one item and returns its decision: `201` when inserted, `200`
/// when replaced, unchanged or replayed (same idempotency key: the first
/// answer, nothing written).
#[utoipa::path(put, path = "/v1/tenants/{tenant}/items/{item_id}", tag = "items", request_body = UpsertRequest,
    params(("tenant" = String, Path, description = "Tenant id"), ("item_id" = String, Path, description = "Item id")),
    responses((status = 201, body = UpsertResponse, description = "Inserted"),
        (status = 200, body = UpsertResponse, description = "Replaced, unchanged or replayed"), StdErrors),
    security(("bearer" = [])))]
pub(crate) async fn upsert(
    State(s): State<AppState>,
    p: Principal,
    P((tenant, item_id)): P<(String, String)>,
    ApiJson(req, len): ApiJson<UpsertRequest>,
) -> ApiResult<(StatusCode, Json<UpsertResponse>)> {
    s.enter(&p, &tenant, Scope::Ingest, len)?;
    let started = Instant::now();
    let cap = if req.content_uri.is_some() { item_cap(&s, &tenant).await? } else { 0 };
    let (content, media_type) =
        content_of(&s, &p, &tenant, &item_id, (req.content, req.content_uri, req.media_type), cap).await?;
    let item = Item {
        item_id: item_id.clone(),
        content,
        media_type,
        source_time: req.source_time,
        normalization_version: req.normalization_version,
        idempotency_key: req.idempotency_key,
        epoch: req.epoch,
    };
    let o = s.upsert(&tenant, item).await.inspect_err(|e| note_error(&s, &tenant, e))?;
    record_decision(
        &s,
        &tenant,
        "upsert",
        Some(&item_id),
        &o.decision,
        started.elapsed().as_secs_f64(),
        Some(wrote(&o)),
    );
    let status = if o.status == UpsertStatus::Inserted { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(UpsertResponse::new(&tenant, &o))))
}

/// Upserts many items under one fsync (group commit); a result per item.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/items", tag = "items", request_body = BatchRequest,
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = BatchResponse), StdErrors), security(("bearer" = [])))]
pub(crate) async fn batch(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    ApiJson(req, len): ApiJson<BatchRequest>,
) -> ApiResult<Json<BatchResponse>> {
    s.enter(&p, &tenant, Scope::Ingest, len)?;
    if req.items.len() > 10_000 {
        return Err(ApiError::invalid_request("a batch holds at most 10000 items"));
    }
    let started = Instant::now();
    let n = req.items.len();
    let cap = if req.items.iter().any(|b| b.content_uri.is_some()) { item_cap(&s, &tenant).await? } else { 0 };
    // Items by content_uri are read first, a few at a time; one whose read
    // fails gets its error here and is not written, the others go on.
    let resolved: Vec<ApiResult<Item>> = futures_util::stream::iter(req.items)
        .map(|b| {
            let (s, p, tenant) = (&s, &p, &tenant);
            async move {
                let (content, media_type) =
                    content_of(s, p, tenant, &b.item_id, (b.content, b.content_uri, b.media_type), cap).await?;
                Ok(Item {
                    item_id: b.item_id,
                    content,
                    media_type,
                    source_time: b.source_time,
                    normalization_version: b.normalization_version,
                    idempotency_key: b.idempotency_key,
                    epoch: b.epoch,
                })
            }
        })
        .buffered(CONCURRENT_READS)
        .collect()
        .await;
    let mut results: Vec<Option<ApiResult<UpsertOutcome>>> = Vec::with_capacity(n);
    let mut items = Vec::with_capacity(n);
    for r in resolved {
        match r {
            Ok(item) => {
                items.push(item);
                results.push(None);
            }
            Err(e) => results.push(Some(Err(e))),
        }
    }
    let t = tenant.clone();
    let written =
        if items.is_empty() { Vec::new() } else { s.run(&tenant, move |e| e.upsert_batch(&t, items)).await? };
    let mut written = written.into_iter();
    let per_item = started.elapsed().as_secs_f64() / n.max(1) as f64;
    let results = results
        .into_iter()
        .map(|r| match r.or_else(|| written.next().map(|w| w.map_err(ApiError::from))) {
            Some(Ok(o)) => {
                record_decision(&s, &tenant, "upsert", Some(&o.item_id), &o.decision, per_item, Some(wrote(&o)));
                BatchResult::Ok(Box::new(UpsertResponse::new(&tenant, &o)))
            }
            Some(Err(e)) => {
                note_error(&s, &tenant, &e);
                let (_, code, message) = e.parts();
                BatchResult::Err(ErrorBody { error: ErrorDetail { code: code.into(), message } })
            }
            None => {
                let e = ApiError::internal("the batch answered fewer results than items");
                let (_, code, message) = e.parts();
                BatchResult::Err(ErrorBody { error: ErrorDetail { code: code.into(), message } })
            }
        })
        .collect();
    Ok(Json(BatchResponse { results }))
}

/// A live item's metadata (never its content); `404` once tombstoned.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/items/{item_id}", tag = "items",
    params(("tenant" = String, Path, description = "Tenant id"), ("item_id" = String, Path, description = "Item id"),
        super::MinLsn),
    responses((status = 200, body = ItemView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn get(
    State(s): State<AppState>,
    p: Principal,
    P((tenant, item_id)): P<(String, String)>,
    Q(min): Q<super::MinLsn>,
) -> ApiResult<Json<ItemView>> {
    s.enter(&p, &tenant, Scope::Query, 0)?;
    min.wait(&s, &tenant).await?;
    let (t, id) = (tenant.clone(), item_id.clone());
    match s.run(&tenant, move |e| e.get(&t, &id)).await? {
        Some(info) if info.tombstone.is_none() => Ok(Json(ItemView::from(&info))),
        Some(_) | None => Err(ApiError::gateway(GatewayKind::ItemNotFound { item_id })),
    }
}

/// Paging through live items.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// Items with ids after this one.
    after: Option<String>,
    /// Page size (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

/// Live items in id order.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/items", tag = "items",
    params(("tenant" = String, Path, description = "Tenant id"), ListParams),
    responses((status = 200, body = ItemPage), StdErrors), security(("bearer" = [])))]
pub(crate) async fn list(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    Q(params): Q<ListParams>,
) -> ApiResult<Json<ItemPage>> {
    s.enter(&p, &tenant, Scope::Query, 0)?;
    let limit = params.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid_request("limit must be in 1..=1000"));
    }
    let t = tenant.clone();
    let items = s.run(&tenant, move |e| e.list(&t, params.after.as_deref(), limit)).await?;
    let next_after = (items.len() == limit).then(|| items.last().map(|i| i.item_id.clone())).flatten();
    Ok(Json(ItemPage { items: items.iter().map(ItemView::from).collect(), next_after }))
}

/// The tombstone's epoch.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct TombstoneParams {
    /// At least the item's current epoch, at most 2^53 − 1; the item's
    /// epoch when absent.
    #[param(minimum = 0, maximum = 9007199254740991_u64)]
    epoch: Option<u64>,
}

/// Tombstones an item: it stops being a candidate at once and `GET` answers
/// `404`; the id can come back only with a higher epoch.
#[utoipa::path(delete, path = "/v1/tenants/{tenant}/items/{item_id}", tag = "items",
    params(("tenant" = String, Path, description = "Tenant id"), ("item_id" = String, Path, description = "Item id"),
        TombstoneParams),
    responses((status = 200, body = TombstoneResponse), StdErrors), security(("bearer" = [])))]
pub(crate) async fn tombstone(
    State(s): State<AppState>,
    p: Principal,
    P((tenant, item_id)): P<(String, String)>,
    Q(params): Q<TombstoneParams>,
) -> ApiResult<Json<TombstoneResponse>> {
    s.enter(&p, &tenant, Scope::Ingest, 0)?;
    let started = Instant::now();
    let (t, id) = (tenant.clone(), item_id.clone());
    let (epoch, lsn) = s
        .run(&tenant, move |e| {
            let epoch = match params.epoch {
                Some(ep) => ep,
                None => match e.get(&t, &id)? {
                    Some(i) if i.tombstone.is_none() => i.epoch,
                    // Let the engine produce its own not-found error.
                    Some(_) | None => 0,
                },
            };
            Ok((epoch, e.tombstone(&t, &id, epoch)?))
        })
        .await?;
    s.metrics.tombstone(&tenant, started.elapsed().as_secs_f64());
    Ok(Json(TombstoneResponse { item_id, epoch, lsn }))
}

/// Lifts an id's tombstone fence (tenant `admin` scope): the id, which must
/// not be live, can then be written again from any epoch. Without it, a
/// tombstone at the highest epoch fences an id for good. Answers the epoch
/// the fence stood at.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/items/{item_id}/unfence", tag = "items",
    params(("tenant" = String, Path, description = "Tenant id"), ("item_id" = String, Path, description = "Item id")),
    responses((status = 200, body = TombstoneResponse), StdErrors), security(("bearer" = [])))]
pub(crate) async fn unfence(
    State(s): State<AppState>,
    p: Principal,
    P((tenant, item_id)): P<(String, String)>,
) -> ApiResult<Json<TombstoneResponse>> {
    s.enter(&p, &tenant, Scope::Admin, 0)?;
    let (t, id) = (tenant.clone(), item_id.clone());
    let (epoch, lsn) = s.run(&tenant, move |e| e.unfence(&t, &id)).await?;
    s.journal.audit(&tenant, p.actor(), "unfence", format!("{item_id:?} (fenced at epoch {epoch}) lsn {lsn}"));
    Ok(Json(TombstoneResponse { item_id, epoch, lsn }))
}
