//! Scale benchmark of one tenant (plain binary, no harness): resident memory,
//! disk, checkpoint and restart at N items, on the fjall store (records on
//! disk), default tenant configuration, content retained.
//!
//! Items are ~1.9 KB of text (310 words from a 50,000-word vocabulary, one in
//! ten a near copy of an earlier item), made on the fly from a fixed seed
//! and loaded in batches of 1,024 with `--fsync os`. Reported: load rate;
//! resident set growth per item after the load against the engine's own
//! estimate; candidate and decide latency p50/p99; disk bytes per item
//! (store, log, snapshots), and beyond the text as zstd alone would keep it
//! (sampled); checkpoint duration and peak resident set during it; a
//! snapshot streamed to a byte counter (size, time, peak resident set);
//! restart duration and resident set after it.
//!
//! Run: `NEARDUP_BENCH_ITEMS=1000000 cargo bench -p neardup-index --bench scale`
//! (default 200,000; `NEARDUP_BENCH_DIR` puts the data on a chosen disk;
//! `NEARDUP_BENCH_CHECKPOINT_EVERY` items between checkpoints, 1,000,000;
//! `NEARDUP_BENCH_SNAPSHOT=0` skips the snapshot; `NEARDUP_BENCH_KEEP=1`
//! keeps the data directory and prints it). `NEARDUP_BENCH_REOPEN=DIR`
//! only times opening a kept directory (to compare builds on one state),
//! and with `NEARDUP_BENCH_SNAPSHOT=1` then streams a snapshot of it.

use std::path::Path;
use std::time::Instant;

use neardup_core::Config;
use neardup_index::{Engine, EngineOptions, FsyncPolicy, Item, Query, StoreKind, TenantConfig};

fn text(i: u64) -> String {
    let base = if i > 10 && i.is_multiple_of(10) { i / 3 } else { i };
    let mut x = base.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5eed;
    let mut out = String::with_capacity(2000);
    for w in 0..310u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let word = if base != i && w % 25 == 0 { (x ^ i) % 50_000 } else { x % 50_000 };
        out.push('w');
        out.push_str(&word.to_string());
        out.push(' ');
    }
    out
}

fn status(field: &str) -> u64 {
    neardup_fs::usage::process_status_bytes(field).unwrap_or(0)
}

/// CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    neardup_fs::usage::process_cpu_seconds().unwrap_or(0.0)
}

fn reset_peak() {
    // Linux resets VmHWM to the current RSS when 5 is written to clear_refs.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn du(dir: &Path) -> u64 {
    neardup_fs::usage::tree_bytes(dir)
}

/// A writer that counts bytes and notes when the first came.
#[derive(Default)]
struct Counter {
    bytes: u64,
    first: Option<Instant>,
}

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.first.get_or_insert_with(Instant::now);
        self.bytes += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// Opens `dir` and reports how long it took and the memory it holds,
/// under `label` (a restart, or a reopen of a kept directory alone).
fn open_timed(label: &str, dir: &Path, opts: EngineOptions) -> Engine {
    reset_peak();
    let rss0 = status("VmRSS:");
    let t0 = Instant::now();
    let e = Engine::open(dir, opts).unwrap();
    println!(
        "{label}: {:.1} s; RSS after {} MB (before {} MB), peak {} MB; {} live items",
        t0.elapsed().as_secs_f64(),
        status("VmRSS:") >> 20,
        rss0 >> 20,
        status("VmHWM:") >> 20,
        e.stats("t").unwrap().live_items
    );
    e
}

fn main() {
    let opts = EngineOptions { fsync: FsyncPolicy::Os, store: StoreKind::Fjall, ..EngineOptions::default() };
    if let Ok(dir) = std::env::var("NEARDUP_BENCH_REOPEN") {
        let e = open_timed("reopen", Path::new(&dir), opts);
        if std::env::var("NEARDUP_BENCH_SNAPSHOT").as_deref() == Ok("1") {
            snapshot(&e, e.stats("t").unwrap().live_items);
        }
        return;
    }
    let n: u64 = std::env::var("NEARDUP_BENCH_ITEMS").ok().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    // Checkpoints during the load trim the log, as the service's periodic ones do.
    let every: u64 =
        std::env::var("NEARDUP_BENCH_CHECKPOINT_EVERY").ok().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let root =
        std::env::var("NEARDUP_BENCH_DIR").map(std::path::PathBuf::from).unwrap_or_else(|_| std::env::temp_dir());
    let dir = tempfile::tempdir_in(root).unwrap();
    println!("# neardup-index scale bench: {n} items of ~1.9 KB, fjall store, content retained");
    let rss0 = status("VmRSS:");
    let e = Engine::open(dir.path(), opts.clone()).unwrap();
    e.create_tenant("t", TenantConfig::new(Config::default())).unwrap();
    let t0 = Instant::now();
    let cpu0 = cpu_seconds();
    let mut text_bytes = 0u64;
    // The text as the store's zstd (level 1) alone keeps it, one item in 16.
    let (mut sampled, mut sampled_z) = (0u64, 0u64);
    let mut next = 0u64;
    while next < n {
        let end = (next + 1024).min(n);
        let items: Vec<Item> = (next..end)
            .map(|i| {
                let t = text(i);
                text_bytes += t.len() as u64;
                if i % 16 == 0 {
                    sampled += t.len() as u64;
                    sampled_z += zstd::bulk::compress(t.as_bytes(), 1).unwrap().len() as u64;
                }
                Item::text(format!("item-{i}"), t)
            })
            .collect();
        for r in e.upsert_batch("t", items).unwrap() {
            r.unwrap();
        }
        let before = next;
        next = end;
        // A checkpoint each time the load crosses a multiple of `every`
        // (batches of 1,024 rarely land on one).
        if next / every > before / every && next < n {
            reset_peak();
            let c = Instant::now();
            e.checkpoint().unwrap();
            eprintln!(
                "  {next} items, {:.0} s, RSS {} MB; checkpoint {:.1} s, peak {} MB, disk {:.0} B/item",
                t0.elapsed().as_secs_f64(),
                status("VmRSS:") >> 20,
                c.elapsed().as_secs_f64(),
                status("VmHWM:") >> 20,
                du(dir.path()) as f64 / next as f64
            );
        }
    }
    let load_s = t0.elapsed().as_secs_f64();
    let rss = status("VmRSS:");
    let st = e.stats("t").unwrap();
    let load_cpu = cpu_seconds() - cpu0;
    println!(
        "load: {load_s:.1} s, {:.0} items/s, {:.1} MB of text; {load_cpu:.1} CPU s ({:.1} CPU s per million items)",
        n as f64 / load_s,
        text_bytes as f64 / 1e6,
        load_cpu / n as f64 * 1e6
    );
    let store_resident = e.store_resident_bytes();
    println!(
        "resident after load: {} MB, growth {:.0} B/item; engine estimate {:.0} B/item \
         (index {:.0} + store cache and memtables {:.0})",
        rss >> 20,
        rss.saturating_sub(rss0) as f64 / n as f64,
        (st.resident_bytes_estimate + store_resident) as f64 / n as f64,
        st.resident_bytes_estimate as f64 / n as f64,
        store_resident as f64 / n as f64
    );
    let mut lat = Vec::new();
    for i in 0..2_000u64 {
        let q = text((i * 7919) % n);
        let t = Instant::now();
        e.candidates("t", Query::Content(&q), 100).unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("candidates: p50 {:.3} ms p99 {:.3} ms", pct(&mut lat, 0.5), pct(&mut lat, 0.99));
    let mut lat = Vec::new();
    for i in 0..2_000u64 {
        let q = text(n + i);
        let t = Instant::now();
        e.decide("t", &q).unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("decide: p50 {:.3} ms p99 {:.3} ms", pct(&mut lat, 0.5), pct(&mut lat, 0.99));
    println!("disk before checkpoint: {:.0} B/item (store + log)", du(dir.path()) as f64 / n as f64);
    reset_peak();
    let rss_before = status("VmRSS:");
    let t0 = Instant::now();
    e.checkpoint().unwrap();
    println!(
        "checkpoint: {:.1} s, peak RSS {} MB (before {} MB)",
        t0.elapsed().as_secs_f64(),
        status("VmHWM:") >> 20,
        rss_before >> 20
    );
    println!("disk after checkpoint: {:.0} B/item", du(dir.path()) as f64 / n as f64);
    for sub in ["store", "wal", "snapshots"] {
        println!("  {sub}: {:.0} B/item", du(&dir.path().join(sub)) as f64 / n as f64);
    }
    let text_z = sampled_z as f64 / sampled as f64 * text_bytes as f64 / n as f64;
    println!(
        "  beyond the text: {:.0} B/item (text {:.0} B/item, {text_z:.0} B/item as zstd keeps it alone)",
        du(dir.path()) as f64 / n as f64 - text_z,
        text_bytes as f64 / n as f64
    );
    if std::env::var("NEARDUP_BENCH_SNAPSHOT").as_deref() != Ok("0") {
        snapshot(&e, n);
    }
    drop(e);
    let e = open_timed("restart", dir.path(), opts);
    if std::env::var("NEARDUP_BENCH_KEEP").as_deref() == Ok("1") {
        drop(e);
        println!("kept: {}", dir.keep().display());
    }
}

/// Streams a snapshot of tenant `t` to a byte counter.
fn snapshot(e: &Engine, n: u64) {
    reset_peak();
    let rss_before = status("VmRSS:");
    let t0 = Instant::now();
    let mut counter = Counter::default();
    e.snapshot_to("t", &mut counter).unwrap();
    println!(
        "snapshot: {:.0} B/item, {:.1} s, first byte after {:.3} s, peak RSS {} MB (before {} MB)",
        counter.bytes as f64 / n as f64,
        t0.elapsed().as_secs_f64(),
        counter.first.map_or(0.0, |f| f.duration_since(t0).as_secs_f64()),
        status("VmHWM:") >> 20,
        rss_before >> 20
    );
}
