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
//! each phase ≤ 60 s).

use std::sync::Arc;
use std::time::{Duration, Instant};

use neardup_index::{Engine, EngineOptions, FsyncPolicy, StoreKind};
use neardup_server::{AppState, GatewayConfig, KeyStore, QuotaConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ADMIN: &str = "bench-operator-token-0123";

fn doc(seed: u64, i: u64) -> String {
    // ~2 KB of words from a 5k-word vocabulary; every 10th doc is a near copy.
    let mut x = seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let base = if i % 10 == 9 { i - 1 } else { i };
    let mut y = seed ^ base.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = String::with_capacity(2100);
    let mut n = 0;
    while out.len() < 2000 {
        y ^= y << 13;
        y ^= y >> 7;
        y ^= y << 17;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w = if base != i && n % 20 == 0 { x % 5000 } else { y % 5000 };
        out.push_str(&format!("w{w} "));
        n += 1;
    }
    out
}

struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn request(&mut self, method: &str, path: &str, token: &str, body: &str) -> u16 {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.s.write_all(req.as_bytes()).await.unwrap();
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
                let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map(|v| v.trim().parse().unwrap())
                    .unwrap_or(0);
                while self.buf.len() < end + 4 + len {
                    self.fill().await;
                }
                self.buf.drain(..end + 4 + len);
                return status;
            }
            self.fill().await;
        }
    }

    async fn fill(&mut self) {
        let mut tmp = [0u8; 16384];
        let n = self.s.read(&mut tmp).await.unwrap();
        assert!(n > 0, "server closed the connection");
        self.buf.extend_from_slice(&tmp[..n]);
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 - 1.0) * p) as usize).copied().unwrap_or(0.0)
}

/// What a phase sends: single upserts, batches, or decisions.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Upsert,
    Batch(usize),
    Decide,
}

/// Request bodies for one client, made before the clock starts.
fn bodies(kind: Kind, c: usize, count: usize) -> Vec<(String, String)> {
    (0..count as u64)
        .map(|i| {
            let n = (c as u64) << 32 | i;
            match kind {
                Kind::Upsert => {
                    (format!("/v1/tenants/bench/items/c{c}-{i}"), serde_json::json!({"content": doc(7, n)}).to_string())
                }
                Kind::Batch(b) => {
                    let items: Vec<_> = (0..b as u64)
                        .map(|k| {
                            let m = n * b as u64 + k;
                            serde_json::json!({"item_id": format!("b{c}-{i}-{k}"), "content": doc(11, m)})
                        })
                        .collect();
                    ("/v1/tenants/bench/items".to_string(), serde_json::json!({ "items": items }).to_string())
                }
                Kind::Decide => (
                    "/v1/tenants/bench/decide".to_string(),
                    serde_json::json!({"content": doc(7, n ^ 0xdead)}).to_string(),
                ),
            }
        })
        .collect()
}

async fn phase(addr: &str, key: &str, clients: usize, secs: u64, kind: Kind) -> (usize, Vec<f64>) {
    // Enough bodies for the fastest rate seen here, cycled if exhausted.
    let per_client = match kind {
        Kind::Batch(b) => (400 * secs as usize / clients).div_ceil(b).max(2),
        _ => (40_000 * secs as usize / clients).clamp(16, 20_000),
    };
    let prepared: Vec<Vec<(String, String)>> = (0..clients).map(|c| bodies(kind, c, per_client)).collect();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for mine in prepared {
        let (addr, key) = (addr.to_string(), key.to_string());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn { s: TcpStream::connect(&addr).await.unwrap(), buf: Vec::new() };
            let mut lat = Vec::new();
            let mut i = 0usize;
            while Instant::now() < deadline {
                let (path, body) = &mine[i % mine.len()];
                let method = if kind == Kind::Upsert && i < mine.len() { "PUT" } else { "POST" };
                let t = Instant::now();
                let status = if kind == Kind::Upsert && i >= mine.len() {
                    // Out of fresh ids: decide instead of re-putting (which would conflict).
                    conn.request("POST", "/v1/tenants/bench/decide", &key, body).await
                } else {
                    conn.request(method, path, &key, body).await
                };
                assert!(status < 300, "status {status}");
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                i += 1;
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    (all.len(), all)
}

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
        let keys = KeyStore::open(None, Some(ADMIN)).unwrap();
        let quotas = QuotaConfig { requests_per_sec: 1e9, request_burst: 1e9, bytes_per_sec: 1e12, byte_burst: 1e12 };
        let state = AppState::new(engine, keys, GatewayConfig { quotas, ..GatewayConfig::default() });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(neardup_server::serve(listener, state, std::future::pending()));
        let mut c = Conn { s: TcpStream::connect(&addr).await.unwrap(), buf: Vec::new() };
        let body = r#"{"tenant_id":"bench","config":{"threshold":0.8}}"#;
        assert_eq!(c.request("POST", "/v1/tenants", ADMIN, body).await, 201);
        // A key with ingest and query scopes, read from a one-shot connection.
        let key = {
            let mut s = TcpStream::connect(&addr).await.unwrap();
            let body = r#"{"scopes":["ingest","query"]}"#;
            let req = format!(
                "POST /v1/tenants/bench/keys HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(req.as_bytes()).await.unwrap();
            let mut raw = Vec::new();
            s.read_to_end(&mut raw).await.unwrap();
            let text = String::from_utf8_lossy(&raw);
            let json = &text[text.find("\r\n\r\n").unwrap() + 4..];
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            v["api_key"].as_str().unwrap().to_string()
        };
        println!("clients {clients}, {secs} s per phase, fsync always, fjall store, ~2 KB docs");
        let fsyncs = engine_ref.log_fsyncs();
        let (n, mut lat) = phase(&addr, &key, clients, secs, Kind::Upsert).await;
        println!(
            "upsert: {n} in {secs} s = {:.0}/s; latency p50 {:.2} ms p99 {:.2} ms; {} fsyncs",
            n as f64 / secs as f64,
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99),
            engine_ref.log_fsyncs() - fsyncs
        );
        let fsyncs = engine_ref.log_fsyncs();
        let (n, mut lat) = phase(&addr, &key, clients, secs, Kind::Batch(batch)).await;
        println!(
            "batch of {batch}: {n} batches in {secs} s = {:.0} docs/s; latency p50 {:.2} ms p99 {:.2} ms; {} fsyncs",
            (n * batch) as f64 / secs as f64,
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99),
            engine_ref.log_fsyncs() - fsyncs
        );
        let (n, mut lat) = phase(&addr, &key, clients, secs, Kind::Decide).await;
        println!(
            "decide: {n} in {secs} s = {:.0}/s; latency p50 {:.2} ms p99 {:.2} ms (index of the items above)",
            n as f64 / secs as f64,
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99)
        );
        println!("items: {}", engine_ref.stats("bench").unwrap().live_items);
    });
}
