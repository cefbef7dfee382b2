//! Bounded loopback load generator for the HTTP service.
//!
//! What is measured: an in-process `neardup_server::serve` on 127.0.0.1
//! with a fjall store and `--fsync always` (every acknowledged upsert is
//! fsynced; concurrent ones share fsyncs), driven by N keep-alive HTTP/1.1
//! clients. Phase 1: single upserts (`PUT`) of ~2 KB synthetic documents (a
//! tenant with default calculator parameters at threshold 0.8) for D seconds
//! → upserts/s, p50/p99 and fsyncs. Phase 2: batched upserts (`POST
//! .../items`, `NEARDUP_BENCH_BATCH` items each) → documents/s. Phase 3:
//! `POST /decide` on fresh documents → p50/p99. Fixed seed; request bodies
//! are made before each phase, so the clients spend their time on HTTP.
//!
//! Run: `cargo bench -p neardup-server --bench serve_load`
//! (`NEARDUP_BENCH_CLIENTS=8 NEARDUP_BENCH_SECS=20 NEARDUP_BENCH_BATCH=256`;
//! each phase ≤ 60 s; `NEARDUP_BENCH_PHASES=batch` runs only the phases
//! named, of `upsert,batch,decide`).

mod common;

use std::sync::Arc;

/// The allocator the `neardup` binary ships with: this bench serves in
/// process, so it must pick it too to measure what runs.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use common::{pct, phase, Conn, Kind, ADMIN};
use neardup_index::{Engine, EngineOptions, FsyncPolicy, StoreKind};

fn main() {
    let clients: usize = std::env::var("NEARDUP_BENCH_CLIENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let secs: u64 = std::env::var("NEARDUP_BENCH_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(20).clamp(1, 60);
    let batch: usize =
        std::env::var("NEARDUP_BENCH_BATCH").ok().and_then(|v| v.parse().ok()).unwrap_or(256).clamp(1, 10_000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let opts = EngineOptions { fsync: FsyncPolicy::Always, store: StoreKind::Fjall, ..EngineOptions::default() };
        let engine = Arc::new(Engine::open(dir.path(), opts).unwrap());
        let engine_ref = Arc::clone(&engine);
        let addr = common::serve(engine, None).await;
        let mut c = Conn::connect(&addr).await;
        let body = r#"{"tenant_id":"bench","config":{"threshold":0.8}}"#;
        assert_eq!(c.request("POST", "/v1/tenants", ADMIN, body).await, 201);
        // A key with ingest and query scopes, read from a one-shot connection.
        // A key with ingest and query scopes.
        let (status, text) =
            common::once(&addr, "POST", "/v1/tenants/bench/keys", ADMIN, r#"{"scopes":["ingest","query"]}"#).await;
        assert_eq!(status, 201, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let key = v["api_key"].as_str().unwrap().to_string();
        println!("clients {clients}, {secs} s per phase, fsync always, fjall store, ~2 KB docs");
        let phases = std::env::var("NEARDUP_BENCH_PHASES").unwrap_or_else(|_| "upsert,batch,decide".into());
        let run = |p: &str| phases.split(',').any(|q| q.trim() == p);
        let fsyncs = engine_ref.log_fsyncs();
        if run("upsert") {
            let mut p = phase(std::slice::from_ref(&addr), &["bench"], &key, clients, secs, Kind::Upsert).await;
            println!(
                "upsert: {} in {:.1} s = {:.0}/s; latency p50 {:.2} ms p99 {:.2} ms; {} fsyncs",
                p.n(),
                p.secs,
                p.rate(1),
                pct(&mut p.lat, 0.5),
                pct(&mut p.lat, 0.99),
                engine_ref.log_fsyncs() - fsyncs
            );
        }
        let fsyncs = engine_ref.log_fsyncs();
        if run("batch") {
            let mut p = phase(std::slice::from_ref(&addr), &["bench"], &key, clients, secs, Kind::Batch(batch)).await;
            println!(
                "batch of {batch}: {} batches in {:.1} s = {:.0} docs/s; latency p50 {:.2} ms p99 {:.2} ms; {} fsyncs",
                p.n(),
                p.secs,
                p.rate(batch),
                pct(&mut p.lat, 0.5),
                pct(&mut p.lat, 0.99),
                engine_ref.log_fsyncs() - fsyncs
            );
        }
        if run("decide") {
            let mut p = phase(std::slice::from_ref(&addr), &["bench"], &key, clients, secs, Kind::Decide).await;
            println!(
                "decide: {} in {:.1} s = {:.0}/s; latency p50 {:.2} ms p99 {:.2} ms (index of the items above)",
                p.n(),
                p.secs,
                p.rate(1),
                pct(&mut p.lat, 0.5),
                pct(&mut p.lat, 0.99)
            );
        }
        println!("items: {}", engine_ref.stats("bench").unwrap().live_items);
    });
}
