//! Cluster throughput against one node, in one run (issues 12 and 41):
//! acknowledged writes/s of ~2 KB documents into one tenant through a
//! single node (`neardup serve`'s embedded log, `--fsync always`) and
//! through 1 and 3 service nodes on loopback over a three-server NATS
//! JetStream cluster (R = 3, file storage), with the lag of the slowest
//! replica.
//!
//! Each set-up gets the same load, one phase of D s after another, each
//! into a fresh tenant: single upserts (`PUT`) from P keep-alive
//! connections, then batches (`POST .../items`, B items each) from C
//! clients. Three nodes run the phases twice: every client through one
//! node, and clients spread over the nodes. During each cluster phase the
//! largest lag of any node (stream position minus its applied position)
//! is sampled every 50 ms; after it, the time until every node applied
//! the stream's end. An acknowledged write is, on one node, one its log
//! fsynced; in the cluster, one the stream's quorum stored and the
//! answering node applied.
//!
//! Run: `cargo bench -p neardup-server --bench cluster_load`
//! (`NEARDUP_BENCH_PUT_CLIENTS=64 NEARDUP_BENCH_CLIENTS=8
//! NEARDUP_BENCH_SECS=15 NEARDUP_BENCH_BATCH=64 NEARDUP_BENCH_NODES=1,3`;
//! needs `nats-server` on PATH).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{pct, phase, Conn, Kind, ADMIN};
use neardup_cluster::testkit::NatsCluster;
use neardup_cluster::{Cluster, ClusterOptions, Node};
use neardup_index::{EngineOptions, FsyncPolicy, StoreKind};

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

/// The load of one set-up: its phases, each into a fresh tenant created
/// (and applied by every node) before the clock starts.
struct Load {
    put_clients: usize,
    clients: usize,
    secs: u64,
    batch: usize,
}

async fn create_tenant(addr: &str, tenant: &str, nodes: &[Arc<Cluster>]) {
    let mut c = Conn::connect(addr).await;
    let body = format!(r#"{{"tenant_id":"{tenant}","config":{{"threshold":0.8}}}}"#);
    assert_eq!(c.request("POST", "/v1/tenants", ADMIN, &body).await, 201);
    let Some(first) = nodes.first() else { return };
    let lsn = only(first).engine.tenant_lsn(tenant).unwrap();
    for n in nodes {
        let (e, t) = (Arc::clone(&only(n).engine), tenant.to_string());
        tokio::task::spawn_blocking(move || e.wait_applied(&t, lsn, Duration::from_secs(30))).await.unwrap().unwrap();
    }
}

/// Runs the load's phases against `addrs` (the nodes clients use), and
/// prints a line a phase, labelled `setup`.
async fn phases(setup: &str, addrs: &[String], nodes: &[Arc<Cluster>], load: &Load, round: &mut usize) {
    let kinds = [
        (format!("single PUTs, {} connections", load.put_clients), Kind::Upsert, 1, load.put_clients),
        (
            format!("batches of {}, {} clients", load.batch, load.clients),
            Kind::Batch(load.batch),
            load.batch,
            load.clients,
        ),
    ];
    for (name, kind, per, clients) in kinds {
        *round += 1;
        let tenant = format!("p{round}");
        create_tenant(&addrs[0], &tenant, nodes).await;
        let (stop, max_lag) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let sampler = sample_lag(nodes.to_vec(), Arc::clone(&stop), Arc::clone(&max_lag));
        let mut p = phase(addrs, &[tenant.as_str()], ADMIN, clients, load.secs, kind).await;
        stop.store(true, Ordering::Relaxed);
        sampler.await.unwrap();
        let settle = catch_up(nodes).await;
        let lag = match nodes.is_empty() {
            true => String::new(),
            false => format!(
                "; slowest replica lag max {} commands, caught up {settle:.2} s after the phase",
                max_lag.load(Ordering::Relaxed)
            ),
        };
        println!(
            "{setup}: {name}, one tenant: {:.0} docs/s acknowledged; latency p50 {:.2} ms p99 {:.2} ms{lag}",
            p.rate(per),
            pct(&mut p.lat, 0.5),
            pct(&mut p.lat, 0.99),
        );
    }
}

/// One node, no cluster: the embedded log, fsynced before each answer.
async fn single(load: &Load) {
    let dir = tempfile::tempdir().unwrap();
    let opts = EngineOptions { fsync: FsyncPolicy::Always, store: StoreKind::Fjall, ..EngineOptions::default() };
    let engine = Arc::new(neardup_index::Engine::open(dir.path(), opts).unwrap());
    let addr = common::serve(engine, None).await;
    phases("one node (embedded log, fsync always)", &[addr], &[], load, &mut 0).await;
}

/// `count` nodes over a fresh NATS cluster; with `home`, home redirects
/// on (writes go to each tenant's home node; the clients follow the 307
/// and keep that node).
async fn cluster(count: usize, load: &Load, home: bool) {
    let nats = NatsCluster::start(3).expect("nats-server on PATH");
    let dirs: Vec<tempfile::TempDir> = (0..count).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = Vec::new();
    let mut addrs = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let mut c = ClusterOptions::new(&nats.urls(), &format!("n{i}")).unwrap();
        c.snapshot_interval = None;
        c.home_redirects = home;
        // The port is known before the node starts: it advertises it.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        c.advertise(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let opts = EngineOptions { fsync: FsyncPolicy::Os, store: StoreKind::Fjall, ..EngineOptions::default() };
        let node = Arc::new(Cluster::start(dir.path(), opts, c).await.unwrap());
        addrs.push(common::serve_on(listener, Arc::clone(&only(&node).engine), Some(Arc::clone(&node))).await);
        nodes.push(node);
    }
    if home {
        // Every node sees every other's entry before the clock starts.
        while nodes.iter().any(|n| n.registry.serving(n.partition_of("t")).len() < count) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut round = 0;
    if count > 1 && !home {
        let setup = format!("{count} nodes, every client through node 0");
        phases(&setup, &addrs[..1], &nodes, load, &mut round).await;
    }
    let setup = format!(
        "{count} node{}, clients spread over them{}",
        if count > 1 { "s" } else { "" },
        if home { ", writes redirected to the tenant's home" } else { "" }
    );
    phases(&setup, &addrs, &nodes, load, &mut round).await;
    let items: Vec<u64> = nodes
        .iter()
        .map(|n| only(n).engine.tenants().unwrap().iter().map(|t| only(n).engine.stats(t).unwrap().live_items).sum())
        .collect();
    println!("{count} node(s): items per replica {items:?}");
}

fn main() {
    let load = Load {
        put_clients: env::<usize>("NEARDUP_BENCH_PUT_CLIENTS", 64).clamp(1, 1024),
        clients: env::<usize>("NEARDUP_BENCH_CLIENTS", 8).clamp(1, 1024),
        secs: env::<u64>("NEARDUP_BENCH_SECS", 15).clamp(1, 60),
        batch: env::<usize>("NEARDUP_BENCH_BATCH", 64).clamp(1, 1000),
    };
    let counts: Vec<usize> = env("NEARDUP_BENCH_NODES", "1,3".to_string())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .filter(|&c| (1..=5).contains(&c))
        .collect();
    println!(
        "{} s per phase, ~2 KB docs; cluster: NATS R=3 file storage, fjall store; one node: fjall store",
        load.secs
    );
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(single(&load));
    rt.shutdown_timeout(Duration::from_secs(5));
    for count in counts {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(cluster(count, &load, false));
        rt.shutdown_timeout(Duration::from_secs(5));
        if count > 1 {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
            rt.block_on(cluster(count, &load, true));
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}
