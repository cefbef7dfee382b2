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
    let applying = s.cluster().is_none_or(|c| c.nodes().iter().all(|n| n.failure().is_none()));
    let engines_ok = s.engines().iter().all(|e| e.write_refusal().is_none() && e.caught_up());
    if s.is_ready() && engines_ok && applying {
        Ok(Json(Health { status: "ok".into() }))
    } else {
        Err(ApiError::gateway(GatewayKind::Unavailable))
    }
}

/// Prometheus text exposition (per-tenant labels).
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, content_type = "text/plain", body = String), StdErrors))]
pub(crate) async fn metrics(State(s): State<AppState>) -> ApiResult<impl IntoResponse> {
    let per_engine = s
        .run_each(|e| {
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
                        screen: (st.screen_bits > 0)
                            .then_some((st.counters.screened_out, st.counters.screen_false_positives)),
                    },
                );
            }
            Ok((
                out,
                DiskGauges {
                    log_bytes: e.log_bytes(),
                    log_fsyncs: e.log_fsyncs(),
                    data_dir_bytes: e.disk_bytes(),
                    store_resident_bytes: e.store_resident_bytes(),
                },
            ))
        })
        .await?;
    // Every engine's tenants; disk figures summed (each engine has its own
    // folder and store).
    let mut tenants = BTreeMap::new();
    let mut disk = DiskGauges::default();
    for (t, d) in per_engine {
        tenants.extend(t);
        disk.log_bytes += d.log_bytes;
        disk.log_fsyncs += d.log_fsyncs;
        disk.data_dir_bytes += d.data_dir_bytes;
        disk.store_resident_bytes += d.store_resident_bytes;
    }
    let nodes = s.cluster().map_or(&[][..], |c| c.nodes());
    let cluster: Vec<ClusterGauges> = nodes
        .iter()
        .map(|n| ClusterGauges {
            node: n.node_id().to_string(),
            partition: n.partition.to_string(),
            applied_position: n.engine.applied_position(),
            stream_last: n.state.stream_last.load(std::sync::atomic::Ordering::Relaxed),
            lag: n.lag(),
            applied_total: n.state.applied_total.load(std::sync::atomic::Ordering::Relaxed),
            skipped_total: n.state.skipped_total.load(std::sync::atomic::Ordering::Relaxed),
            gap_positions_total: n.state.gap_positions_total.load(std::sync::atomic::Ordering::Relaxed),
            applying: n.failure().is_none(),
            snapshot_age_seconds: n.snapshots.age_seconds(),
            snapshot_position: n.snapshots.newest_position.load(std::sync::atomic::Ordering::Relaxed),
            snapshot_sets_written: n.snapshots.written.load(std::sync::atomic::Ordering::Relaxed),
        })
        .collect();
    let mut text = s.metrics.render(&tenants, disk, &cluster);
    s.content.render_metrics(&mut text);
    if let Some(c) = s.cluster() {
        let count = c.layout().count;
        let counts: Vec<(String, u64)> = (0..count)
            .map(|index| {
                let p = neardup_cluster::partition::Partition { index, count };
                (p.to_string(), c.registry.serving(p).len() as u64)
            })
            .collect();
        crate::metrics::render_partition_nodes(&mut text, &counts);
        crate::metrics::render_refused_records(&mut text, c.node_id(), c.refused_records());
    }
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text))
}
