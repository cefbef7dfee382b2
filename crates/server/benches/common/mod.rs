//! What the service load benchmarks share: documents, a keep-alive
//! HTTP/1.1 client, request bodies and a timed phase of clients.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use neardup_index::Engine;
use neardup_server::{AppState, GatewayConfig, KeyStore, QuotaConfig};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const ADMIN: &str = "bench-operator-token-0123";

/// Serves `engine` (and `cluster`'s node, in cluster mode) on a free
/// loopback port with the operator token [`ADMIN`] and quotas out of the
/// way; returns the address.
pub async fn serve(engine: Arc<Engine>, cluster: Option<Arc<neardup_cluster::Cluster>>) -> String {
    serve_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(), engine, cluster).await
}

/// [`serve`] on a listener already bound.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    engine: Arc<Engine>,
    cluster: Option<Arc<neardup_cluster::Cluster>>,
) -> String {
    let keys = KeyStore::open(None, Some(ADMIN)).unwrap();
    let quotas = QuotaConfig { requests_per_sec: 1e9, request_burst: 1e9, bytes_per_sec: 1e12, byte_burst: 1e12 };
    let config = GatewayConfig { quotas, ..GatewayConfig::default() };
    let state = match cluster {
        Some(c) => AppState::clustered(c, keys, config),
        None => AppState::new(engine, keys, config),
    };
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(neardup_server::serve(listener, state, std::future::pending()));
    addr
}

pub fn doc(seed: u64, i: u64) -> String {
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
        // `write!` into the buffer: a `format!` a word made generating a
        // phase's bodies take longer than the phase.
        let _ = write!(out, "w{w} ");
        n += 1;
    }
    out
}

pub struct Conn {
    pub s: TcpStream,
    pub buf: Vec<u8>,
    /// The `Location` of the last answer, if it had one.
    pub location: Option<String>,
}

impl Conn {
    pub async fn connect(addr: &str) -> Conn {
        Conn { s: TcpStream::connect(addr).await.unwrap(), buf: Vec::new(), location: None }
    }

    pub async fn request(&mut self, method: &str, path: &str, token: &str, body: &str) -> u16 {
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
                self.location = head.lines().find_map(|l| l.strip_prefix("location:")).map(|v| v.trim().to_string());
                while self.buf.len() < end + 4 + len {
                    self.fill().await;
                }
                self.buf.drain(..end + 4 + len);
                return status;
            }
            self.fill().await;
        }
    }

    /// One request whose status must be a success; its latency (ms) is
    /// pushed onto `lat`. A `307` to another node (a cluster's home
    /// redirect) is followed, and that node kept for the next requests,
    /// as a client that remembers where a tenant's writes go.
    pub async fn timed(&mut self, method: &str, path: &str, token: &str, body: &str, lat: &mut Vec<f64>) {
        let t = Instant::now();
        let mut status = self.request(method, path, token, body).await;
        if status == 307 {
            let to = self.location.clone().expect("a 307 with a Location");
            let host = to.strip_prefix("http://").and_then(|r| r.split('/').next()).expect("an http:// Location");
            *self = Conn::connect(host).await;
            status = self.request(method, path, token, body).await;
        }
        assert!(status < 300, "{method} {path}: status {status}");
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }

    async fn fill(&mut self) {
        let mut tmp = [0u8; 16384];
        let n = self.s.read(&mut tmp).await.unwrap();
        assert!(n > 0, "server closed the connection");
        self.buf.extend_from_slice(&tmp[..n]);
    }
}

/// One request on a fresh connection, the whole response read; returns
/// (status, body).
pub async fn once(addr: &str, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

/// The latencies of client tasks, all of them.
pub async fn joined(tasks: Vec<tokio::task::JoinHandle<Vec<f64>>>) -> Vec<f64> {
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

pub fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 - 1.0) * p) as usize).copied().unwrap_or(0.0)
}

/// What a phase sends: single upserts, batches, or decisions.
#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    Upsert,
    Batch(usize),
    Decide,
}

/// Request bodies for one client, made before the clock starts.
pub fn bodies(tenant: &str, kind: Kind, c: usize, count: usize) -> Vec<(String, String)> {
    (0..count as u64)
        .map(|i| {
            let n = (c as u64) << 32 | i;
            match kind {
                Kind::Upsert => (
                    format!("/v1/tenants/{tenant}/items/c{c}-{i}"),
                    serde_json::json!({"content": doc(7, n)}).to_string(),
                ),
                Kind::Batch(b) => {
                    let items: Vec<_> = (0..b as u64)
                        .map(|k| {
                            let m = n * b as u64 + k;
                            serde_json::json!({"item_id": format!("b{c}-{i}-{k}"), "content": doc(11, m)})
                        })
                        .collect();
                    (format!("/v1/tenants/{tenant}/items"), serde_json::json!({ "items": items }).to_string())
                }
                Kind::Decide => (
                    format!("/v1/tenants/{tenant}/decide"),
                    serde_json::json!({"content": doc(7, n ^ 0xdead)}).to_string(),
                ),
            }
        })
        .collect()
}

/// What one load phase did: the latency (ms) of each request answered,
/// and the seconds from the start until the last client stopped.
pub struct Phase {
    pub lat: Vec<f64>,
    pub secs: f64,
}

impl Phase {
    /// Requests answered.
    pub fn n(&self) -> usize {
        self.lat.len()
    }

    /// Requests (times `per`, the documents in each) a second, over the
    /// time the clients ran: a client that used up its prepared requests
    /// stops early, and the rate is still true.
    pub fn rate(&self, per: usize) -> f64 {
        (self.n() * per) as f64 / self.secs.max(1e-9)
    }
}

/// `clients` keep-alive clients send `kind` requests for `secs` seconds,
/// client `c` to `addrs[c % addrs.len()]` and tenant `tenants[c %
/// tenants.len()]`. Upserts and batches are of fresh ids only: a client
/// that used up its prepared bodies stops (and says so), so nothing is
/// counted twice.
pub async fn phase(addrs: &[String], tenants: &[&str], key: &str, clients: usize, secs: u64, kind: Kind) -> Phase {
    // Enough bodies for well over the fastest rate seen here (20,480 docs/s
    // of batches was once a ceiling of this bench, not of the server).
    let per_client = match kind {
        Kind::Batch(b) => (40_000 * secs as usize / clients).div_ceil(b).max(2),
        _ => (40_000 * secs as usize / clients).clamp(16, 50_000),
    };
    let prepared: Vec<Vec<(String, String)>> =
        (0..clients).map(|c| bodies(tenants[c % tenants.len()], kind, c, per_client)).collect();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for (c, mine) in prepared.into_iter().enumerate() {
        let (addr, key) = (addrs[c % addrs.len()].clone(), key.to_string());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(&addr).await;
            let mut lat = Vec::new();
            let mut i = 0usize;
            while Instant::now() < deadline {
                if i == mine.len() && kind != Kind::Decide {
                    eprintln!("client {c} used up its {} prepared requests before the deadline", mine.len());
                    break;
                }
                let (path, body) = &mine[i % mine.len()];
                let method = if kind == Kind::Upsert { "PUT" } else { "POST" };
                conn.timed(method, path, &key, body, &mut lat).await;
                i += 1;
            }
            lat
        }));
    }
    let lat = joined(tasks).await;
    Phase { lat, secs: start.elapsed().as_secs_f64() }
}
