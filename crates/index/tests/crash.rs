//! Subprocess crash test: the test binary re-runs itself as a child that
//! upserts, tombstones, snapshots and compacts in a loop, printing each
//! acknowledged command; the parent SIGKILLs it at a random moment (also
//! during checkpoints, which it takes every 25 upserts), reopens the
//! directory and checks that every acknowledged item is there, whole, and
//! that snapshots, candidates and decisions equal those of a fresh open.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use neardup_core::Config;
use neardup_index::{Engine, EngineOptions, FsyncPolicy, Item, StoreKind, TenantConfig};

const CHILD_ENV: &str = "NEARDUP_CRASH_CHILD_DIR";

fn text(i: u64) -> String {
    // Families of near duplicates so candidates are exercised.
    format!("family {} red fox runs {} very fast {}", i % 13, i % 5, i)
}

fn opts(kind: StoreKind) -> EngineOptions {
    EngineOptions { fsync: FsyncPolicy::Os, store: kind, ..EngineOptions::default() }
}

/// The child: runs until killed.
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let kind = match std::env::var("NEARDUP_CRASH_STORE").as_deref() {
        Ok("fjall") => StoreKind::Fjall,
        _ => StoreKind::Memory,
    };
    let start: u64 = std::env::var("NEARDUP_CRASH_START").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let e = Engine::open(&dir, opts(kind)).unwrap();
    if e.tenants().unwrap().is_empty() {
        e.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
        println!("ACK tenant");
    }
    let mut i = start;
    loop {
        let o = e.upsert("t", Item::text(format!("i{i}"), text(i))).unwrap();
        println!("ACK upsert i{i} {}", o.lsn);
        if i % 7 == 3 {
            // Announced first: if the kill lands between the log write and
            // the acknowledgement, the parent knows this id is in doubt.
            println!("TRY tombstone i{}", i - 1);
            e.tombstone("t", &format!("i{}", i - 1), 1).unwrap();
            println!("ACK tombstone i{}", i - 1);
        }
        if i % 25 == 0 {
            e.checkpoint().unwrap();
            println!("ACK checkpoint");
        }
        if i % 40 == 0 {
            e.compact("t").unwrap();
            println!("ACK compact");
        }
        i += 1;
    }
}

fn run_iteration(dir: &std::path::Path, kind: StoreKind, start: u64, kill_after: Duration) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env("NEARDUP_CRASH_START", start.to_string())
        .env("NEARDUP_CRASH_STORE", if kind == StoreKind::Fjall { "fjall" } else { "mem" })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if (line.starts_with("ACK ") || line.starts_with("TRY ")) && tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + kill_after;
    let mut acks = Vec::new();
    while Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(5)) {
            acks.push(l);
        }
    }
    // SIGKILL: no destructors, no flush.
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    acks.extend(rx.try_iter());
    acks
}

fn crash_loop(kind: StoreKind, iterations: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut acked_live: std::collections::BTreeSet<String> = Default::default();
    let mut tombstoned: std::collections::BTreeSet<String> = Default::default();
    // Ids whose tombstone was begun but not acknowledged when the child was
    // killed: it may or may not have landed, so neither state is required.
    let mut in_doubt: std::collections::BTreeSet<String> = Default::default();
    let mut next = 0u64;
    // A cheap deterministic "random" kill time per iteration.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for it in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let kill_ms = 150 + x % 500;
        let acks = run_iteration(dir.path(), kind, next, Duration::from_millis(kill_ms));
        let mut tried: Option<String> = None;
        for a in &acks {
            let parts: Vec<&str> = a.split(' ').collect();
            if parts[0] == "TRY" {
                tried = Some(parts[2].to_string());
                continue;
            }
            match parts.get(1).copied() {
                Some("upsert") => {
                    acked_live.insert(parts[2].to_string());
                    let n: u64 = parts[2][1..].parse().unwrap();
                    next = next.max(n + 1);
                }
                Some("tombstone") => {
                    acked_live.remove(parts[2]);
                    tombstoned.insert(parts[2].to_string());
                    tried = None;
                }
                _ => {}
            }
        }
        if let Some(id) = tried {
            acked_live.remove(&id);
            in_doubt.insert(id);
        }
        // An unacknowledged upsert may or may not have landed: skip its id.
        next += 1;
        let e = Engine::open(dir.path(), opts(kind)).unwrap();
        let live: std::collections::BTreeSet<String> = e.live_ids("t").unwrap_or_default().into_iter().collect();
        for id in &acked_live {
            assert!(live.contains(id), "iteration {it}: acknowledged {id} lost");
            let info = e.get("t", id).unwrap().unwrap();
            let n: u64 = id[1..].parse().unwrap();
            assert_eq!(info.content_bytes, text(n).len() as u64, "partial item {id}");
        }
        for id in in_doubt.iter().filter(|id| live.contains(*id)) {
            let n: u64 = id[1..].parse().unwrap();
            assert_eq!(e.get("t", id).unwrap().unwrap().content_bytes, text(n).len() as u64, "partial item {id}");
        }
        for id in &tombstoned {
            assert!(!live.contains(id), "iteration {it}: tombstoned {id} came back");
        }
        // Candidates and decisions equal a fresh open of a copy: for the
        // memory store, a replay of snapshots and log into an empty fjall
        // store; for fjall, whose checkpoints are the store itself (no
        // second copy of the records), the same store and log reopened.
        let copy = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), copy.path());
        let fresh = Engine::open(copy.path(), opts(StoreKind::Fjall)).unwrap();
        assert_eq!(fresh.snapshot("t").unwrap(), e.snapshot("t").unwrap(), "iteration {it}");
        for q in [3u64, 17, 42, 99] {
            let a = e.decide("t", &text(q)).unwrap();
            let b = fresh.decide("t", &text(q)).unwrap();
            assert_eq!(a, b, "iteration {it}");
        }
        eprintln!("iteration {it}: {} acks, {} live", acks.len(), live.len());
    }
    assert!(acked_live.len() > 20, "the child made progress");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn sigkill_memory_store() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    crash_loop(StoreKind::Memory, 6);
}

#[test]
fn sigkill_fjall_store() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    crash_loop(StoreKind::Fjall, 5);
}
