//! The dashboards' figures for one tenant, in one answer: what the review
//! console plots, from the same sources as `/metrics` and the engine.

use axum::extract::State;
use axum::Json;

use crate::auth::{Principal, Scope};
use crate::error::{ApiResult, StdErrors};
use crate::extract::P;
use crate::state::AppState;
use crate::wire::{DashboardView, HistogramView, IngestMinute, LabelEvaluationView, SCurveView, ShadowView, StatsView};

/// Upper bounds of the bucket-size histogram's bins: `2^(i+1) − 1`.
fn bucket_bounds(n: usize) -> Vec<f64> {
    (0..n).map(|i| ((1u64 << (i + 1).min(63)) - 1) as f64).collect()
}

/// A tenant's dashboards: decision counts, candidates per query, bucket
/// sizes, verification scores, latencies, ingest per minute, tombstone
/// latency, snapshot age, replication lag, the S-curve of its banding, the
/// current policy's labelled precision and recall (95 % Wilson intervals,
/// contradictory labels set aside), and the shadow index's disagreement
/// during a migration. Counts and histograms are this process's since it
/// started; item and bucket figures are the tenant's now.
#[utoipa::path(get, path = "/v1/tenants/{tenant}/dashboard", tag = "review",
    params(("tenant" = String, Path, description = "Tenant id")),
    responses((status = 200, body = DashboardView), StdErrors), security(("bearer" = [])))]
pub(crate) async fn dashboard(
    State(s): State<AppState>,
    p: Principal,
    P(tenant): P<String>,
) -> ApiResult<Json<DashboardView>> {
    s.enter(&p, &tenant, Scope::Query, 0)?;
    let t = tenant.clone();
    let (stats, sizes, config, labelled, shadow) = s
        .run(&tenant, move |e| {
            let stats = e.stats(&t)?;
            let shadow = if stats.shadow { e.shadow_report(&t).ok() } else { None };
            Ok((stats, e.bucket_sizes(&t)?, e.tenant_config(&t)?, e.label_evaluation(&t)?, shadow))
        })
        .await?;
    let f = s.metrics.figures(&tenant);
    let params = config.index.resolve().map_err(|e| crate::error::ApiError::internal(e.to_string()))?;
    let replication_lag_commands = s.cluster().and_then(|c| c.local(&tenant)).map(|n| n.lag());
    Ok(Json(DashboardView {
        tenant,
        stats: StatsView::from(&stats),
        decisions: f.decisions,
        candidates_per_query: HistogramView::from(&f.candidates_per_query),
        verification_score: HistogramView::from(&f.verification_score),
        ingest_seconds: HistogramView::from(&f.ingest_seconds),
        query_seconds: HistogramView::from(&f.query_seconds),
        tombstone_seconds: HistogramView::from(&f.tombstone_seconds),
        bucket_sizes: HistogramView {
            bounds: bucket_bounds(sizes.len()),
            count: sizes.iter().sum(),
            counts: sizes,
            overflow: 0,
            sum: 0.0,
        },
        cap_rejections: f.cap_rejections,
        budget_rejections: f.budget_rejections,
        rate_limited: f.rate_limited,
        ingest_per_minute: f
            .ingest_minutes
            .iter()
            .map(|&(minute, items)| IngestMinute { minute_ms: minute * 60_000, items })
            .collect(),
        snapshot_age_seconds: f.snapshot_age_seconds,
        replication_lag_commands,
        labelled: LabelEvaluationView::from(&labelled),
        s_curve: SCurveView::new(&params, config.policy.threshold_similar),
        shadow: shadow.as_ref().map(ShadowView::from),
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn bucket_bounds_are_powers_of_two_minus_one() {
        assert_eq!(super::bucket_bounds(4), [1.0, 3.0, 7.0, 15.0]);
        assert_eq!(super::bucket_bounds(40).last().copied(), Some(((1u64 << 40) - 1) as f64));
    }
}
