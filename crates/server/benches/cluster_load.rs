//! Cluster throughput (issue 12): acknowledged upserts/s of ~2 KB
//! documents through 1, 2 and 3 service nodes on loopback, over a
//! three-server NATS JetStream cluster (R = 3, file storage), and the lag of
//! the slowest replica.
//!
//! For each node count: a fresh NATS cluster (`nats-server` child
//! processes, `neardup_cluster::testkit`), that many in-process nodes (each
//! `neardup_cluster::Cluster` + `neardup_server::serve` on its own port, fjall
//! store), then N keep-alive HTTP/1.1 clients spread over the nodes.
//! Phases of D s each: single upserts (`PUT`) and batches (`POST
//! .../items`, B items each) into one tenant, then the same with each
//! client on its own tenant (tenants are independent: their commands are
//! planned and proposed in parallel). During each phase the largest lag of
//! any node (stream position minus its applied position) is sampled every
//! 50 ms; after it, the time until every node applied the stream's end.
//! An acknowledged write is one the stream's quorum stored and the
//! answering node applied.
//!
//! Run: `cargo bench -p neardup-server --bench cluster_load`
//! (`NEARDUP_BENCH_CLIENTS=8 NEARDUP_BENCH_SECS=15 NEARDUP_BENCH_BATCH=64
//! NEARDUP_BENCH_NODES=1,2,3`; needs `nats-server` on PATH).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{pct, phase, Conn, Kind, ADMIN};
use neardup_cluster::testkit::NatsCluster;
use neardup_cluster::{Cluster, ClusterOptions, Node};
use neardup_index::{EngineOptions, FsyncPolicy, StoreKind};
use tokio::net::TcpStream;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The one partition of an unpartitioned node.
fn only(c: &Cluster) -> &Node {
    &c.nodes()[0]
}

/// Samples the largest lag of any node every 50 ms until `stop`.
fn sample_lag(nodes: Vec<Arc<Cluster>>, stop: Arc<AtomicBool>, max: Arc<AtomicU64>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let last = nodes.iter().map(|n| only(n).state.stream_last.load(Ordering::Relaxed)).max().unwrap_or(0);
            let lag = nodes.iter().map(|n| last.saturating_sub(only(n).engine.applied_position())).max().unwrap_or(0);
            max.fetch_max(lag, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// Seconds until every node applied what any node has seen of the stream.
async fn catch_up(nodes: &[Arc<Cluster>]) -> f64 {
    let t = Instant::now();
    let last = nodes.iter().map(|n| only(n).state.stream_last.load(Ordering::Relaxed)).max().unwrap_or(0);
    while nodes.iter().any(|n| only(n).engine.applied_position() < last) && t.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t.elapsed().as_secs_f64()
}

async fn run(count: usize, clients: usize, secs: u64, batch: usize) {
    let nats = NatsCluster::start(3).expect("nats-server on PATH");
    let dirs: Vec<tempfile::TempDir> = (0..count).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = Vec::new();
    let mut addrs = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let mut c = ClusterOptions::new(&nats.urls(), &format!("n{i}")).unwrap();
        c.snapshot_interval = None;
        let opts = EngineOptions { fsync: FsyncPolicy::Os, store: StoreKind::Fjall, ..EngineOptions::default() };
        let node = Arc::new(Cluster::start(dir.path(), opts, c).await.unwrap());
        addrs.push(common::serve(Arc::clone(&only(&node).engine), Some(Arc::clone(&node))).await);
        nodes.push(node);
    }
    let mut c = Conn { s: TcpStream::connect(&addrs[0]).await.unwrap(), buf: Vec::new() };
    // One tenant, and one per client (tenants are independent subjects).
    let many: Vec<String> = (0..clients).map(|i| format!("t{i}")).collect();
    for tenant in std::iter::once("bench").chain(many.iter().map(String::as_str)) {
        let body = format!(r#"{{"tenant_id":"{tenant}","config":{{"threshold":0.8}}}}"#);
        assert_eq!(c.request("POST", "/v1/tenants", ADMIN, &body).await, 201);
        // Every node has the tenant before the clock starts.
        let lsn = only(&nodes[0]).engine.tenant_lsn(tenant).unwrap();
        for n in &nodes {
            let (e, t) = (Arc::clone(&only(n).engine), tenant.to_string());
            tokio::task::spawn_blocking(move || e.wait_applied(&t, lsn, Duration::from_secs(30)))
                .await
                .unwrap()
                .unwrap();
        }
    }
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let phases = [
        ("upsert, one tenant", Kind::Upsert, 1, vec!["bench"]),
        ("batch, one tenant", Kind::Batch(batch), batch, vec!["bench"]),
        ("upsert, a tenant per client", Kind::Upsert, 1, many.clone()),
        ("batch, a tenant per client", Kind::Batch(batch), batch, many.clone()),
    ];
    for (name, kind, per, tenants) in phases {
        let (stop, max_lag) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let sampler = sample_lag(nodes.clone(), Arc::clone(&stop), Arc::clone(&max_lag));
        let mut p = phase(&addrs, &tenants, ADMIN, clients, secs, kind).await;
        stop.store(true, Ordering::Relaxed);
        sampler.await.unwrap();
        let settle = catch_up(&nodes).await;
        println!(
            "nodes {count}: {name}{}: {:.0} docs/s acknowledged; latency p50 {:.2} ms p99 {:.2} ms; slowest replica \
             lag max {} commands, caught up {:.2} s after the phase",
            if per > 1 { format!(" ({per} per request)") } else { String::new() },
            p.rate(per),
            pct(&mut p.lat, 0.5),
            pct(&mut p.lat, 0.99),
            max_lag.load(Ordering::Relaxed),
            settle
        );
    }
    let items: Vec<u64> = nodes
        .iter()
        .map(|n| only(n).engine.tenants().unwrap().iter().map(|t| only(n).engine.stats(t).unwrap().live_items).sum())
        .collect();
    println!("nodes {count}: items per replica {items:?}");
}

fn main() {
    let clients: usize = env("NEARDUP_BENCH_CLIENTS", 8);
    let secs: u64 = env::<u64>("NEARDUP_BENCH_SECS", 15).clamp(1, 60);
    let batch: usize = env::<usize>("NEARDUP_BENCH_BATCH", 64).clamp(1, 1000);
    let counts: Vec<usize> = env("NEARDUP_BENCH_NODES", "1,2,3".to_string())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .filter(|&c| (1..=5).contains(&c))
        .collect();
    println!("clients {clients}, {secs} s per phase, batch {batch}, ~2 KB docs, NATS R=3 file storage, fjall store");
    for count in counts {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(run(count, clients, secs, batch));
        rt.shutdown_timeout(Duration::from_secs(5));
    }
}
