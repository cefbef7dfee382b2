//! Unauthenticated operational routes: health, readiness, metrics, OpenAPI.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::Json;

use crate::error::{ApiError, ApiResult, GatewayKind, StdErrors};
use crate::metrics::{ClusterGauges, DiskGauges, TenantGauges};
use crate::state::AppState;
use crate::wire::Health;

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "ops", responses((status = 200, body = Health)))]
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok".into() })
}

/// Readiness: the engine is open and takes writes, and the service is not
/// shutting down. After a storage failure the command log refuses writes
/// until a restart, and readiness says so (503). A cluster node is ready
/// once it has applied the replicated log as it was when the node started.
#[utoipa::path(get, path = "/readyz", tag = "ops", responses((status = 200, body = Health), StdErrors))]
pub(crate) async fn readyz(State(s): State<AppState>) -> ApiResult<Json<Health>> {
    let applying = s.cluster().is_none_or(|n| n.failure().is_none());
    if s.is_ready() && s.engine.write_refusal().is_none() && s.engine.caught_up() && applying {
        Ok(Json(Health { status: "ok".into() }))
    } else {
        Err(ApiError::gateway(GatewayKind::Unavailable))
    }
}

/// Prometheus text exposition (per-tenant labels).
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, content_type = "text/plain", body = String), StdErrors))]
pub(crate) async fn metrics(State(s): State<AppState>) -> ApiResult<impl IntoResponse> {
    let gauges = s
        .run(|e| {
            let mut out = BTreeMap::new();
            for t in e.tenants()? {
                let st = e.stats(&t)?;
                let shadow = if st.shadow { e.shadow_report(&t).ok() } else { None };
                out.insert(
                    t,
                    TenantGauges {
                        live_items: st.live_items,
                        live_bytes: st.live_bytes,
                        tombstones: st.tombstones,
                        largest_bucket: st.largest_bucket as u64,
                        resident_bytes: st.resident_bytes_estimate,
                        shadow_disagreement: shadow.as_ref().map(|r| r.decision_disagreement_rate()),
                        shadow_queries: shadow.as_ref().map(|r| r.queries),
                    },
                );
            }
            Ok((
                out,
                DiskGauges {
                    log_bytes: e.log_bytes(),
                    data_dir_bytes: e.disk_bytes(),
                    store_resident_bytes: e.store_resident_bytes(),
                },
            ))
        })
        .await?;
    let cluster = s.cluster().map(|n| ClusterGauges {
        node: n.node_id().to_string(),
        applied_position: n.engine.applied_position(),
        stream_last: n.state.stream_last.load(std::sync::atomic::Ordering::Relaxed),
        lag: n.lag(),
        applied_total: n.state.applied_total.load(std::sync::atomic::Ordering::Relaxed),
        applying: n.failure().is_none(),
        snapshot_age_seconds: n.snapshots.age_seconds(),
        snapshot_position: n.snapshots.newest_position.load(std::sync::atomic::Ordering::Relaxed),
        snapshot_sets_written: n.snapshots.written.load(std::sync::atomic::Ordering::Relaxed),
    });
    let text = s.metrics.render(&gauges.0, gauges.1, cluster.as_ref());
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text))
}
