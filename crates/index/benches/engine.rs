//! Engine benchmark (plain binary, no harness).
//!
//! What's measured, with fixed seeds and synthetic text (word soup from a
//! 5,000-word vocabulary, 60 words per item, 1 in 10 items a near copy of
//! an earlier one), default `Config` (unicode-v1, word 5-shingles, 128-value
//! MinHash, calculator-chosen bands) on the memory store unless noted:
//!
//! 1. upserts/s for each fsync policy (Always, EveryMs(1000), Os), single
//!    upserts and 256-item batches (group commit);
//! 2. candidate (`decide`) latency p50/p99 at N items;
//! 3. resident bytes per item: the engine's estimate of the in-memory index
//!    (postings + directory; records live in the store);
//! 4. restart time from snapshot + log at N items.
//!
//! Run: `cargo bench -p neardup-index --bench engine` (N = 100,000), or
//! `NEARDUP_BENCH_ITEMS=1000000 cargo bench -p neardup-index --bench engine`.

use std::time::Instant;

use neardup_core::Config;
use neardup_index::{Engine, EngineOptions, FsyncPolicy, Item, Query, StoreKind, TenantConfig};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn corpus(n: usize, seed: u64) -> Vec<String> {
    let mut r = Rng(seed);
    let mut out: Vec<String> = Vec::with_capacity(n);
    for i in 0..n {
        if i > 10 && r.next().is_multiple_of(10) {
            let base = out[(r.next() % i as u64) as usize].clone();
            out.push(format!("{base} w{}", r.next() % 5000));
        } else {
            let words: Vec<String> = (0..60).map(|_| format!("w{}", r.next() % 5000)).collect();
            out.push(words.join(" "));
        }
    }
    out
}

fn opts(fsync: FsyncPolicy, store: StoreKind) -> EngineOptions {
    EngineOptions { fsync, store, ..EngineOptions::default() }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// The process's resident set size from /proc (0 where unavailable).
fn rss_bytes() -> u64 {
    neardup_fs::usage::process_resident_bytes().unwrap_or(0)
}

fn main() {
    let n: usize = std::env::var("NEARDUP_BENCH_ITEMS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let texts = corpus(n, 42);
    println!("# neardup-index engine bench, {n} items");

    for (name, policy, count) in [
        ("always", FsyncPolicy::Always, 2_000usize),
        ("every_1000ms", FsyncPolicy::EveryMs(1000), 20_000),
        ("os", FsyncPolicy::Os, 20_000),
    ] {
        for store in [StoreKind::Memory, StoreKind::Fjall] {
            let dir = tempfile::tempdir().unwrap();
            let e = Engine::open(dir.path(), opts(policy, store)).unwrap();
            e.create_tenant("t", TenantConfig::new(Config::default())).unwrap();
            let t0 = Instant::now();
            for (i, text) in texts.iter().take(count).enumerate() {
                e.upsert("t", Item::text(format!("i{i}"), text.clone())).unwrap();
            }
            let single = count as f64 / t0.elapsed().as_secs_f64();
            let t0 = Instant::now();
            let mut done = 0;
            for chunk in texts[count..2 * count.min(n / 2)].chunks(256) {
                let items =
                    chunk.iter().enumerate().map(|(j, t)| Item::text(format!("b{done}-{j}"), t.clone())).collect();
                for r in e.upsert_batch("t", items).unwrap() {
                    r.unwrap();
                }
                done += chunk.len();
            }
            let batched = done as f64 / t0.elapsed().as_secs_f64();
            println!("upserts/s fsync={name:<13} store={store:?}: single {single:>9.0}  batch256 {batched:>9.0}");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(FsyncPolicy::Os, StoreKind::Memory)).unwrap();
    e.create_tenant("t", TenantConfig::new(Config::default())).unwrap();
    let rss_before = rss_bytes();
    let t0 = Instant::now();
    for chunk in texts.chunks(1024).enumerate() {
        let items =
            chunk.1.iter().enumerate().map(|(j, t)| Item::text(format!("i{}-{j}", chunk.0), t.clone())).collect();
        e.upsert_batch("t", items).unwrap();
    }
    println!("load {n} items (os, memory, batch 1024): {:.1} s", t0.elapsed().as_secs_f64());
    let rss_after = rss_bytes();
    println!(
        "measured resident growth per item (VmRSS, memory store, content retained): {:.0} bytes",
        rss_after.saturating_sub(rss_before) as f64 / n as f64
    );
    let mut lat = Vec::new();
    for i in 0..2_000 {
        let t = Instant::now();
        e.candidates("t", Query::Content(&texts[(i * 7919) % n]), 100).unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("candidates latency at {n}: p50 {:.3} ms  p99 {:.3} ms", pct(&mut lat, 0.5), pct(&mut lat, 0.99));
    let queries = corpus(2_000, 7);
    let mut lat = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let q = if i % 2 == 0 { &texts[(i * 37) % n] } else { q };
        let t = Instant::now();
        e.decide("t", q).unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("decide latency at {n}: p50 {:.3} ms  p99 {:.3} ms", pct(&mut lat, 0.5), pct(&mut lat, 0.99));
    let s = e.stats("t").unwrap();
    println!(
        "resident index bytes/item (estimate): {:.0}; largest bucket {}",
        s.resident_bytes_estimate as f64 / s.live_items as f64,
        s.largest_bucket
    );
    let t0 = Instant::now();
    e.checkpoint().unwrap();
    println!("checkpoint: {:.2} s", t0.elapsed().as_secs_f64());
    for (i, t) in texts.iter().take(n / 10).enumerate() {
        e.upsert("t", Item::text(format!("tail{i}"), t.clone())).unwrap();
    }
    drop(e);
    let t0 = Instant::now();
    let e = Engine::open(dir.path(), opts(FsyncPolicy::Os, StoreKind::Memory)).unwrap();
    println!(
        "restart (snapshot of {n} + log tail of {}): {:.2} s, {} records replayed",
        n / 10,
        t0.elapsed().as_secs_f64(),
        e.recovery_report().records_replayed
    );
}
