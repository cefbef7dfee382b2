//! Reviewer feedback and the decision and audit logs.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use neardup_index::{DecisionState, ErrorKind, NewLabel, Query, TenantConfig};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::{Principal, Scope};
use crate::content::{Purpose, ReadRequest};
use crate::error::{ApiError, ApiResult, StdErrors};
use crate::extract::{ApiJson, P, Q};
use crate::state::AppState;
use crate::wire::{
    AuditLog, CandidateView, CompareRequest, ComparisonView, DecisionLog, LabelList, LabelRequest, LabelView,
    ReviewQueueView, TextRunView,
};

/// Records a reviewer label: an immutable event with actor, rationale and
/// the policy and fingerprint versions in force. It never changes a threshold.
#[utoipa::path(post, path = "/v1/tenants/{tenant}/labels", tag = "review", request_body = LabelRequest,
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 201, body = LabelView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn add_label(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    ApiJson(req, len): ApiJson<LabelRequest>,
) -> ApiResult<(StatusCode, Json<LabelView>)> {
    s.enter(&p, &tenant, Scope::Review, len)?;
    // The credential is the accountable actor; a reviewer name is kept beside it.
    let actor = match req.actor {
        Some(name) => format!("{} ({})", name, p.actor()),
        None => p.actor(),
    };
    let label = NewLabel { left: req.left, right: req.right, label: req.label.into(), actor, rationale: req.rationale };
    let t = tenant.clone();
    let ev = s.run(&tenant, move |e| e.label(&t, label)).await?;
    s.journal.audit(&tenant, p.actor(), "label", format!("{} / {} seq {}", ev.left, ev.right, ev.seq));
    Ok((StatusCode::CREATED, Json(LabelView::from(&ev))))
}

/// Every label event of the tenant, oldest first.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/labels", tag = "review",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = LabelList), StdErrors), security(("bearer" = [])))]
pub(crate) async fn labels(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
) -> ApiResult<Json<LabelList>> {
    s.enter(&p, &tenant, Scope::Review, 0)?;
    let t = tenant.clone();
    let events = s.run(&tenant, move |e| e.labels(&t)).await?;
    Ok(Json(LabelList { labels: events.iter().map(LabelView::from).collect() }))
}

/// How many entries.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LogParams {
    /// Most entries returned, newest first (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

fn log_limit(l: Option<usize>) -> ApiResult<usize> {
    let l = l.unwrap_or(100);
    if !(1..=1000).contains(&l) {
        return Err(ApiError::invalid_request("limit must be in 1..=1000"));
    }
    Ok(l)
}

async fn tenant_exists(s: &AppState, tenant: &str) -> ApiResult<()> {
    let t = tenant.to_string();
    s.run(tenant, move |e| e.tenant_config(&t)).await.map(|_| ())
}

/// Recent decisions of this process (upserts, decides, candidate queries).
#[utoipa::path(get, path = "/v1/tenants/{tenant}/decisions", tag = "review",
    params(("tenant" = String, Path, description = "Tenant id"), LogParams),
    responses((status = 200, body = DecisionLog), StdErrors), security(("bearer" = [])))]
pub(crate) async fn decisions(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    Q(params): Q<LogParams>,
) -> ApiResult<Json<DecisionLog>> {
    s.enter(&p, &tenant, Scope::Query, 0)?;
    let limit = log_limit(params.limit)?;
    tenant_exists(&s, &tenant).await?;
    Ok(Json(DecisionLog { decisions: s.journal.decisions(&tenant, limit) }))
}

/// Recent administrative and review actions of this process.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/audit", tag = "review",
    params(("tenant" = String, Path, description = "Tenant id"), LogParams),
    responses((status = 200, body = AuditLog), StdErrors), security(("bearer" = [])))]
pub(crate) async fn audit(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    Q(params): Q<LogParams>,
) -> ApiResult<Json<AuditLog>> {
    s.enter(&p, &tenant, Scope::Admin, 0)?;
    let limit = log_limit(params.limit)?;
    tenant_exists(&s, &tenant).await?;
    Ok(Json(AuditLog { events: s.journal.audit_log(&tenant, limit) }))
}

/// Which flagged items.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct QueueParams {
    /// Decision states, comma-separated, from `review`, `near_duplicate`,
    /// `quarantined`, `duplicate`, `distinct` (default
    /// `review,near_duplicate,quarantined`).
    state: Option<String>,
    /// Only items after this cursor in queue order: the previous page's
    /// `next_before` (`LSN:ITEM_ID`, the last item shown).
    before: Option<String>,
    /// Most items (default 50, at most 500).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
}

fn parse_states(s: Option<&str>) -> ApiResult<Vec<DecisionState>> {
    let s = s.unwrap_or("review,near_duplicate,quarantined");
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let state = match name {
            "review" => DecisionState::Review,
            "near_duplicate" => DecisionState::NearDuplicate,
            "quarantined" => DecisionState::Quarantined,
            "duplicate" => DecisionState::Duplicate,
            "distinct" => DecisionState::Distinct,
            other => {
                return Err(ApiError::invalid_request(format!(
                    "unknown state {other:?}: use review, near_duplicate, quarantined, duplicate or distinct"
                )))
            }
        };
        if !out.contains(&state) {
            out.push(state);
        }
    }
    if out.is_empty() {
        return Err(ApiError::invalid_request("state names no decision state"));
    }
    Ok(out)
}

/// The review queue: live items whose decision when written is in `state`,
/// newest write first, each with its closest verified candidate now. Each
/// call reads every record of the tenant (about a second per million
/// items) and asks one candidate query per item returned (counted among
/// the tenant's queries, not in the decision log): a page for a person,
/// not a hot path.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/queue", tag = "review",
    params(("tenant" = String, Path, description = "Tenant id"), QueueParams),
    responses((status = 200, body = ReviewQueueView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn queue(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    Q(params): Q<QueueParams>,
) -> ApiResult<Json<ReviewQueueView>> {
    s.enter(&p, &tenant, Scope::Review, 0)?;
    let states = parse_states(params.state.as_deref())?;
    let limit = params.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid_request("limit must be in 1..=500"));
    }
    let before = match params.before.as_deref() {
        None => None,
        Some(c) => {
            let bad = || ApiError::invalid_request("before must be a next_before cursor: LSN:ITEM_ID");
            let (lsn, id) = c.split_once(':').ok_or_else(bad)?;
            Some((lsn.parse::<u64>().map_err(|_| bad())?, id.to_string()))
        }
    };
    let t = tenant.clone();
    let (q, closest) = s
        .run(&tenant, move |e| {
            let q = e.review_queue(&t, &states, before.as_ref().map(|(l, i)| (*l, i.as_str())), limit)?;
            let mut closest = Vec::with_capacity(q.items.len());
            for i in &q.items {
                closest.push(match e.candidates(&t, Query::Item(&i.item.item_id), 1) {
                    Ok(d) => d.candidates.first().map(CandidateView::from),
                    // Tombstoned since the scan: it leaves the queue on the next read.
                    Err(err) if matches!(err.kind(), ErrorKind::ItemNotFound { .. }) => None,
                    Err(err) => return Err(err),
                });
            }
            Ok((q, closest))
        })
        .await?;
    let mut view = ReviewQueueView::from(&q);
    for (entry, closest) in view.items.iter_mut().zip(closest) {
        entry.closest = closest;
    }
    if q.items.len() == limit {
        view.next_before = q.items.last().map(|i| format!("{}:{}", i.lsn, i.item.item_id));
    }
    Ok(Json(view))
}

/// Two live items side by side: the exact verification under the tenant's
/// policy, both texts as runs marked where a shingle is shared, and the
/// labels naming either item. The answer holds the items' content (review
/// scope).
#[utoipa::path(post, path = "/v1/tenants/{tenant}/compare", tag = "review", request_body = CompareRequest,
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = ComparisonView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn compare(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
    ApiJson(req, len): ApiJson<CompareRequest>,
) -> ApiResult<Json<ComparisonView>> {
    s.enter(&p, &tenant, Scope::Review, len)?;
    let t = tenant.clone();
    let (c, config) =
        s.run(&tenant, move |e| Ok((e.compare(&t, &req.left, &req.right)?, e.tenant_config(&t)?))).await?;
    let mut view = ComparisonView::from(&c);
    if view.left.segments.is_none() || view.right.segments.is_none() {
        reread(&s, &p, &tenant, &mut view, &config).await;
    }
    Ok(Json(view))
}

/// A tenant that keeps no text: each side read from by `content_uri` is
/// read again from its object (purpose `review`, audited) if the object
/// still has the digest it was ingested with, and marked where it shares
/// a shingle with the other side's text, when that is known too.
async fn reread(s: &AppState, p: &Principal, tenant: &str, view: &mut ComparisonView, config: &TenantConfig) {
    let mut texts: [Option<String>; 2] = [None, None];
    for (i, side) in [&mut view.left, &mut view.right].into_iter().enumerate() {
        if let Some(runs) = &side.segments {
            texts[i] = Some(runs.iter().map(|r| r.text.as_str()).collect());
            continue;
        }
        let Some(source) = &side.item.content_source else {
            side.content_note = Some("the tenant does not retain content, and the item was sent inline".into());
            continue;
        };
        let cap = config.limits.max_item_bytes;
        let req = ReadRequest {
            item_id: &side.item.item_id,
            uri: &source.uri,
            purpose: Purpose::Review,
            cap,
            expect: Some(source),
        };
        match s.read_content(p, tenant, req).await {
            Ok(f) => {
                side.content_note = Some(format!("read again from {} for this review", source.uri));
                texts[i] = Some(f.text);
            }
            Err(e) => side.content_note = Some(format!("not shown: {e}")),
        }
    }
    let features = |text: &Option<String>| {
        let text = text.as_ref()?;
        let params = config.index.resolve().ok()?;
        Some(neardup_core::Fingerprinter::new(params).ok()?.fingerprint(text).features)
    };
    let (left_features, right_features) = (features(&texts[0]), features(&texts[1]));
    for (side, text, other) in
        [(&mut view.left, &texts[0], &right_features), (&mut view.right, &texts[1], &left_features)]
    {
        if side.segments.is_some() {
            continue;
        }
        let Some(text) = text else { continue };
        side.segments = Some(
            neardup_core::segments_where(text, &config.index, |h| {
                other.as_ref().is_some_and(|o| o.binary_search(&h).is_ok())
            })
            .into_iter()
            .map(|seg| TextRunView { text: text[seg.start..seg.end].to_string(), shared: seg.shared })
            .collect(),
        );
    }
}
