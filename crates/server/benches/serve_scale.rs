//! One tenant at scale through the HTTP service, as an operator runs it.
//!
//! Starts the real `neardup serve` binary (a child process: its memory is
//! the service's alone) with a fjall store, `--fsync always` and default
//! settings, creates one tenant, and streams N items of ~2 KB (every 10th a
//! near copy) through `POST .../items` in batches from C keep-alive
//! clients, the bodies made as they are sent (nothing is held: 10 M items
//! are 20 GB of text). While it runs, a sampler reads the server's resident
//! memory every 100 ms, so each automatic checkpoint's peak is known (the
//! server logs each checkpoint with its duration). After the load:
//! resident and disk bytes per item, the cost figures `/metrics` publishes,
//! candidate and decision latencies at that size, a snapshot streamed to
//! nowhere (first byte, duration, peak memory), and a restart (SIGTERM,
//! which checkpoints, then a fresh start until `/readyz`).
//!
//! Run (the bench drives a release binary; build it first):
//!
//! ```text
//! cargo build --release -p neardup
//! NEARDUP_BENCH_ITEMS=10000000 cargo bench -p neardup-server --bench serve_scale
//! ```
//!
//! `NEARDUP_BENCH_ITEMS` (1,000,000), `NEARDUP_BENCH_CLIENTS` (8),
//! `NEARDUP_BENCH_BATCH` (256), `NEARDUP_BENCH_CHECKPOINT_SECS` (the
//! service's 300), `NEARDUP_BENCH_QUERY_SECS` (20 a query kind),
//! `NEARDUP_BIN` (`target/release/neardup`), `NEARDUP_BENCH_DIR` (where the
//! data directory goes; a temporary one by default, removed at the end
//! unless `NEARDUP_BENCH_KEEP=1`).

mod common;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{doc, joined, pct, Conn, ADMIN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TENANT: &str = "scale";

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Resident set size of `pid` in bytes (Linux `/proc`).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// User + system CPU seconds of `pid` (`self` for this process).
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th fields of the line (11th and 12th after it).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(p) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// RSS samples of the server, every 100 ms, with the time they were taken.
#[derive(Default)]
struct Samples {
    at: Vec<(Instant, u64)>,
}

impl Samples {
    fn peak_between(&self, from: Instant, to: Instant) -> u64 {
        self.at.iter().filter(|(t, _)| *t >= from && *t <= to).map(|s| s.1).max().unwrap_or(0)
    }
    fn last_before(&self, t: Instant) -> u64 {
        self.at.iter().rev().find(|(s, _)| *s < t).map_or(0, |s| s.1)
    }
}

/// The server, its sampler and the checkpoints its log reports.
struct Server {
    child: Child,
    addr: String,
    samples: Arc<Mutex<Samples>>,
    /// (when the log line was read, duration) of each checkpoint.
    checkpoints: Arc<Mutex<Vec<(Instant, Duration)>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    fn start(bin: &Path, data: &Path, checkpoint_secs: u64, log: &Path) -> (Server, Duration) {
        let started = Instant::now();
        let mut child = Command::new(bin)
            .args(["serve", "--listen", "127.0.0.1:0", "--fsync", "always", "--store", "fjall"])
            .arg("--data-dir")
            .arg(data)
            .args(["--checkpoint-interval-secs", &checkpoint_secs.to_string()])
            // Quotas out of the way: the bench measures the engine, not the
            // per-tenant limiter; the request timeout stays the default.
            .args(["--rate-limit-rps", "1000000000", "--rate-limit-burst", "1000000000"])
            .args(["--byte-quota-per-sec", "1000000000000", "--byte-quota-burst", "1000000000000"])
            .env("NEARDUP_ADMIN_TOKEN", ADMIN)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e} (build it: cargo build --release -p neardup)", bin.display()));
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut addr = String::new();
        for line in stdout.lines() {
            let line = line.unwrap();
            if let Some(a) = line.strip_prefix("listening on ") {
                addr = a.trim().to_string();
                break;
            }
        }
        assert!(!addr.is_empty(), "the server exited before listening; see {}", log.display());
        let listening = started.elapsed();
        let checkpoints = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let (cps, log) = (Arc::clone(&checkpoints), log.to_path_buf());
        std::thread::spawn(move || {
            let mut out = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(out, "{line}");
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
                // `--log-format json` flattens an event's fields.
                if v["message"] == "checkpoint" {
                    let ms = v["elapsed_ms"].as_u64().unwrap_or(0);
                    cps.lock().unwrap().push((Instant::now(), Duration::from_millis(ms)));
                }
            }
        });
        let samples = Arc::new(Mutex::new(Samples::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, pid, halt) = (Arc::clone(&samples), child.id(), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                let r = rss(pid);
                s.lock().unwrap().at.push((Instant::now(), r));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        (Server { child, addr, samples, checkpoints, stop }, listening)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn peak(&self, from: Instant, to: Instant) -> u64 {
        self.samples.lock().unwrap().peak_between(from, to)
    }

    /// SIGTERM, then wait for the exit (the server checkpoints on its way
    /// out); returns how long that took.
    fn stop(mut self) -> Duration {
        let t = Instant::now();
        let ok = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status().unwrap().success();
        assert!(ok, "kill -TERM failed");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "server exited with {status}");
        self.stop.store(true, Ordering::Relaxed);
        t.elapsed()
    }
}

/// A batch body for items `first..first + n`: ids `i{m}`, content
/// `doc(11, m)` (words of `[w0-9 ]`, nothing to escape).
fn batch_body(first: u64, n: u64, out: &mut String) {
    out.clear();
    out.push_str(r#"{"items":["#);
    for m in first..first + n {
        if m > first {
            out.push(',');
        }
        let _ = write!(out, r#"{{"item_id":"i{m}","content":"{}"}}"#, doc(11, m));
    }
    out.push_str("]}");
}

fn main() {
    let items: u64 = env("NEARDUP_BENCH_ITEMS", 1_000_000);
    let clients: usize = env("NEARDUP_BENCH_CLIENTS", 8usize).clamp(1, 256);
    let batch: u64 = env("NEARDUP_BENCH_BATCH", 256u64).clamp(1, 10_000);
    let checkpoint_secs: u64 = env("NEARDUP_BENCH_CHECKPOINT_SECS", 300);
    let query_secs: u64 = env("NEARDUP_BENCH_QUERY_SECS", 20);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin: PathBuf =
        std::env::var_os("NEARDUP_BIN").map_or_else(|| root.join("target/release/neardup"), PathBuf::from);
    let parent = std::env::var_os("NEARDUP_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    std::fs::create_dir_all(&parent).unwrap();
    let work = tempfile::Builder::new().prefix("serve-scale-").tempdir_in(&parent).unwrap();
    let data = work.path().join("data");
    let log = work.path().join("server.log");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    println!(
        "# serve_scale: {items} items of ~2 KB through `neardup serve` (fjall, --fsync always), \
         {clients} clients, batches of {batch}, checkpoint every {checkpoint_secs} s"
    );
    let (server, _) = Server::start(&bin, &data, checkpoint_secs, &log);
    let addr = server.addr.clone();
    let base_rss = rss(server.pid());
    let base_cpu = cpu_secs(&server.pid().to_string());
    let self_cpu = cpu_secs("self");

    rt.block_on(async {
        let body =
            format!(r#"{{"tenant_id":"{TENANT}","config":{{"threshold":0.8,"limits":{{"max_items":{items}}}}}}}"#);
        let (status, text) = common::once(&addr, "POST", "/v1/tenants", ADMIN, &body).await;
        assert_eq!(status, 201, "creating the tenant: {text}");
    });

    // The load: batch b holds items b*batch.., handed out in order.
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let batches = items.div_ceil(batch);
    let load_start = Instant::now();
    let lat: Vec<f64> = rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (next, done, addr) = (Arc::clone(&next), Arc::clone(&done), addr.clone());
            tasks.push(tokio::spawn(async move {
                let mut conn = Conn::connect(&addr).await;
                let (mut body, mut lat) = (String::new(), Vec::new());
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    if b >= batches {
                        return lat;
                    }
                    let first = b * batch;
                    let n = batch.min(items - first);
                    batch_body(first, n, &mut body);
                    conn.timed("POST", &format!("/v1/tenants/{TENANT}/items"), ADMIN, &body, &mut lat).await;
                    done.fetch_add(n, Ordering::Relaxed);
                }
            }));
        }
        // One more client asks for decisions while the load runs (one
        // every 20 ms): what a reader waits behind the writers.
        let probe = {
            let (addr, next) = (addr.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                let mut conn = Conn::connect(&addr).await;
                let (mut lat, mut i) = (Vec::new(), 0u64);
                let path = format!("/v1/tenants/{TENANT}/decide");
                while next.load(Ordering::Relaxed) < batches {
                    let body = format!(r#"{{"content":"{}"}}"#, doc(17, i));
                    conn.timed("POST", &path, ADMIN, &body, &mut lat).await;
                    i += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                lat
            })
        };
        // Progress every million items (or tenth of the load, if smaller).
        let step = (items / 10).clamp(1, 1_000_000);
        let mut mark = step;
        let pid = server.pid().to_string();
        while !tasks.iter().all(|t| t.is_finished()) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let d = done.load(Ordering::Relaxed);
            if d >= mark {
                let secs = load_start.elapsed().as_secs_f64();
                println!(
                    "  {d} items, {secs:.0} s, {:.0} items/s so far; RSS {} MB; disk {} B/item; server CPU {:.0} s",
                    d as f64 / secs,
                    rss(server.pid()) >> 20,
                    dir_bytes(&data) / d.max(1),
                    cpu_secs(&pid) - base_cpu
                );
                while mark <= d {
                    mark += step;
                }
            }
        }
        let all = joined(tasks).await;
        let mut probe = probe.await.unwrap();
        let max = probe.iter().copied().fold(0.0, f64::max);
        println!(
            "decide during the load: {} asked; p50 {:.1} ms p99 {:.1} ms max {max:.1} ms",
            probe.len(),
            pct(&mut probe, 0.5),
            pct(&mut probe, 0.99)
        );
        all
    });
    let load_secs = load_start.elapsed().as_secs_f64();
    let load_end = Instant::now();
    let mut lat = lat;
    let server_cpu = cpu_secs(&server.pid().to_string()) - base_cpu;
    let client_cpu = cpu_secs("self") - self_cpu;
    println!(
        "load: {load_secs:.1} s, {:.0} items/s; batch latency p50 {:.1} ms p99 {:.1} ms; \
         server {server_cpu:.0} CPU s ({:.1} CPU s per million items), this client {client_cpu:.0} CPU s",
        items as f64 / load_secs,
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        server_cpu / (items as f64 / 1e6)
    );
    for (at, took) in server.checkpoints.lock().unwrap().iter() {
        let from = *at - *took - Duration::from_millis(100);
        let before = server.samples.lock().unwrap().last_before(from);
        println!(
            "  checkpoint at {:.0} s: {:.1} s, RSS before {} MB, peak {} MB",
            (*at - load_start).as_secs_f64(),
            took.as_secs_f64(),
            before >> 20,
            server.peak(from, *at) >> 20
        );
    }
    let after = rss(server.pid());
    println!(
        "resident after load: {} MB, growth {} B/item (started at {} MB)",
        after >> 20,
        after.saturating_sub(base_rss) / items.max(1),
        base_rss >> 20
    );
    let disk = |label: &str| {
        let total = dir_bytes(&data);
        let mut parts = String::new();
        let mut names: Vec<_> = std::fs::read_dir(&data).unwrap().flatten().collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let b = if e.path().is_dir() { dir_bytes(&e.path()) } else { e.metadata().map_or(0, |m| m.len()) };
            if b >= 1 << 20 {
                let _ = write!(parts, " {} {} B/item;", e.file_name().to_string_lossy(), b / items.max(1));
            }
        }
        println!("disk {label}: {} B/item ({} MB):{parts}", total / items.max(1), total >> 20);
    };
    disk("after load");

    rt.block_on(async {
        let (status, metrics) = common::once(&addr, "GET", "/metrics", ADMIN, "").await;
        assert_eq!(status, 200);
        for line in metrics.lines() {
            if line.starts_with("neardup_cost_")
                || line.starts_with("neardup_index_resident_bytes")
                || line.starts_with("neardup_store_resident_bytes")
            {
                println!("  /metrics {line}");
            }
        }
        // Latencies at this size: candidates of stored texts (each finds at
        // least itself), decisions on fresh texts.
        for (label, kind) in [("candidates", 0u8), ("decide", 1u8)] {
            let deadline = Instant::now() + Duration::from_secs(query_secs);
            let mut tasks = Vec::new();
            for c in 0..clients as u64 {
                let addr = addr.clone();
                tasks.push(tokio::spawn(async move {
                    let mut conn = Conn::connect(&addr).await;
                    let (mut lat, mut i) = (Vec::new(), 0u64);
                    let mut x = 0x2545_F491_4F6C_DD1D_u64 ^ c;
                    while Instant::now() < deadline {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let (path, body) = if kind == 0 {
                            let m = x % items;
                            (format!("/v1/tenants/{TENANT}/candidates"), format!(r#"{{"content":"{}"}}"#, doc(11, m)))
                        } else {
                            (format!("/v1/tenants/{TENANT}/decide"), format!(r#"{{"content":"{}"}}"#, doc(13, c << 32 | i)))
                        };
                        conn.timed("POST", &path, ADMIN, &body, &mut lat).await;
                        i += 1;
                    }
                    lat
                }));
            }
            let mut all = joined(tasks).await;
            println!(
                "{label}: {} in {query_secs} s ({} clients); p50 {:.2} ms p99 {:.2} ms",
                all.len(),
                clients,
                pct(&mut all, 0.5),
                pct(&mut all, 0.99)
            );
        }
        // A snapshot streamed to nowhere.
        let before = rss(server.pid());
        let t = Instant::now();
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let req = format!(
            "GET /v1/tenants/{TENANT}/snapshot HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {ADMIN}\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let (mut total, mut first, mut head) = (0u64, None, Vec::new());
        loop {
            let n = s.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            if head.len() < 12 {
                head.extend_from_slice(&buf[..n.min(12)]);
            }
            first.get_or_insert_with(|| t.elapsed());
            total += n as u64;
        }
        let took = t.elapsed();
        let head = String::from_utf8_lossy(&head).to_string();
        assert!(head.starts_with("HTTP/1.1 200"), "snapshot answered {head:?}");
        println!(
            "snapshot: {} MB ({} B/item, with chunk framing), {:.1} s, first byte after {:.3} s, peak RSS {} MB (before {} MB)",
            total >> 20,
            total / items.max(1),
            took.as_secs_f64(),
            first.unwrap_or_default().as_secs_f64(),
            server.peak(t, Instant::now()) >> 20,
            before >> 20
        );
    });
    let _ = load_end;

    // Restart: SIGTERM (the server drains and checkpoints), then a fresh
    // start until it answers ready with every item.
    let shutdown = server.stop();
    println!("shutdown (drain + checkpoint): {:.1} s", shutdown.as_secs_f64());
    disk("after shutdown");
    let t = Instant::now();
    let (server, listening) = Server::start(&bin, &data, checkpoint_secs, &log);
    let live = rt.block_on(async {
        loop {
            let (status, _) = common::once(&server.addr, "GET", "/readyz", ADMIN, "").await;
            if status == 200 {
                let (_, text) = common::once(&server.addr, "GET", &format!("/v1/tenants/{TENANT}"), ADMIN, "").await;
                let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                break v["stats"]["live_items"].as_u64().or(v["live_items"].as_u64()).unwrap_or(0);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let ready = t.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    println!(
        "restart: listening after {:.1} s, ready after {:.1} s; RSS {} MB, peak {} MB; {live} live items",
        listening.as_secs_f64(),
        ready.as_secs_f64(),
        rss(server.pid()) >> 20,
        server.peak(t, Instant::now()) >> 20
    );
    assert_eq!(live, items, "every item is back after the restart");
    server.stop();
    if std::env::var("NEARDUP_BENCH_KEEP").is_ok_and(|v| v == "1") {
        println!("kept: {}", work.keep().display());
    }
}
