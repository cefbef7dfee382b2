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

/// The store a child runs on, as its parent named it (`store_env`).
fn child_store() -> StoreKind {
    match std::env::var("NEARDUP_CRASH_STORE").as_deref() {
        Ok("fjall") => StoreKind::Fjall,
        _ => StoreKind::Memory,
    }
}

/// How a parent names `kind` to its child.
fn store_env(kind: StoreKind) -> &'static str {
    if kind == StoreKind::Fjall {
        "fjall"
    } else {
        "mem"
    }
}

/// The child: runs until killed.
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let kind = child_store();
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
        if i.is_multiple_of(25) {
            e.checkpoint().unwrap();
            println!("ACK checkpoint");
        }
        if i.is_multiple_of(40) {
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
        .env("NEARDUP_CRASH_STORE", store_env(kind))
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

const RESTORE_CHILD_ENV: &str = "NEARDUP_RESTORE_CHILD_DIR";

/// The child of the restore test: restores the snapshot file named by
/// `NEARDUP_RESTORE_SNAPSHOT` into tenant `t`, streaming it from disk, and
/// says when it starts and when the restore was answered; then waits to be
/// killed.
#[test]
fn restore_child() {
    let Some(dir) = std::env::var_os(RESTORE_CHILD_ENV) else {
        return;
    };
    let kind = child_store();
    let e = Engine::open(&dir, opts(kind)).unwrap();
    let mut snapshot = std::fs::File::open(std::env::var_os("NEARDUP_RESTORE_SNAPSHOT").unwrap()).unwrap();
    println!("RESTORING");
    e.restore_from("t", &mut snapshot).unwrap();
    println!("ACK restore");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// SIGKILL at points spread over a streaming restore (a snapshot of 15,000
/// items replacing a tenant of 40): a restart finds the tenant exactly as
/// it was before or exactly as the snapshot has it — never a mix, never
/// part of either — and the "after" state whenever the restore had been
/// answered.
fn restore_kills(kind: StoreKind) {
    let texts = |prefix: &str, n: u64, from: u64| -> Vec<(String, String)> {
        (0..n).map(|i| (format!("{prefix}{i}"), format!("{} and more words {}", text(from + i), text(i)))).collect()
    };
    let (before, after) = (texts("b", 40, 0), texts("a", 15_000, 100_000));
    let ids = |items: &[(String, String)]| -> std::collections::BTreeSet<String> {
        items.iter().map(|(id, _)| id.clone()).collect()
    };
    let (before_ids, after_ids) = (ids(&before), ids(&after));
    let work = tempfile::tempdir().unwrap();
    let (base, source, file) = (work.path().join("base"), work.path().join("source"), work.path().join("after.snap"));
    for (dir, items) in [(&base, &before), (&source, &after)] {
        let e = Engine::open(dir, opts(kind)).unwrap();
        e.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
        e.upsert_batch("t", items.iter().map(|(id, t)| Item::text(id, t)).collect()).unwrap();
        if dir == &source {
            e.snapshot_to("t", &mut std::fs::File::create(&file).unwrap()).unwrap();
        }
    }
    // How long a restore takes here, to spread the kills over it.
    let timing = work.path().join("timing");
    copy_dir(&base, &timing);
    let started = Instant::now();
    Engine::open(&timing, opts(kind)).unwrap().restore_from("t", &mut std::fs::File::open(&file).unwrap()).unwrap();
    let took = started.elapsed();
    let (mut befores, mut afters) = (0, 0);
    // Kills the child `wait` into its restore; true when it left the "after" state.
    let mut kill_at = |k: u32, wait: Duration| -> bool {
        let dir = work.path().join(format!("kill-{k}"));
        copy_dir(&base, &dir);
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "restore_child", "--nocapture", "--test-threads=1"])
            .env(RESTORE_CHILD_ENV, &dir)
            .env("NEARDUP_RESTORE_SNAPSHOT", &file)
            .env("NEARDUP_CRASH_STORE", store_env(kind))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
        // The harness starts the line ("test restore_child ... ") the child ends.
        assert!(lines.any(|l| l.ends_with("RESTORING")), "the child did not start its restore");
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for l in lines {
                let _ = tx.send(l);
            }
        });
        std::thread::sleep(wait);
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        let answered = rx.try_iter().any(|l| l.ends_with("ACK restore"));
        let e = Engine::open(&dir, opts(kind)).unwrap();
        let live: std::collections::BTreeSet<String> = e.live_ids("t").unwrap().into_iter().collect();
        let (state, items) = if live == after_ids {
            afters += 1;
            ("after", &after)
        } else {
            assert!(!answered, "{kind:?} kill {k}: the restore was answered, but the tenant is not the snapshot's");
            assert!(
                live == before_ids,
                "{kind:?} kill {k}: neither the state before nor the snapshot's: {} live, {} of the {} before, {} of \
                 the {} after",
                live.len(),
                live.intersection(&before_ids).count(),
                before_ids.len(),
                live.intersection(&after_ids).count(),
                after_ids.len()
            );
            befores += 1;
            ("before", &before)
        };
        for (id, t) in items.iter().step_by(97) {
            let got = e.get("t", id).unwrap().unwrap_or_else(|| panic!("{kind:?} kill {k} ({state}): {id} unreadable"));
            assert_eq!(got.content_bytes, t.len() as u64, "{kind:?} kill {k} ({state}): {id}");
        }
        let probe = &items[items.len() / 2];
        let d = e.decide("t", &probe.1).unwrap();
        assert_eq!(d.closest().map(|c| c.item_id.as_str()), Some(probe.0.as_str()), "{kind:?} kill {k} ({state})");
        eprintln!("{kind:?} kill {k} after {wait:?} of a {took:?} restore: {state}");
        state == "after"
    };
    // Eight kills spread over the whole restore, then eight between the
    // last that left "before" and the first that left "after": the moment
    // the restore commits, where a torn state would show.
    let coarse: Vec<Duration> = (0..8).map(|k| took * (2 * k + 1) / 16).collect();
    let outcomes: Vec<bool> = coarse.iter().enumerate().map(|(k, w)| kill_at(k as u32, *w)).collect();
    let last_before = outcomes.iter().rposition(|a| !a).map_or(Duration::ZERO, |k| coarse[k]);
    let first_after = outcomes.iter().position(|a| *a).map_or(took * 2, |k| coarse[k]);
    for k in 0..8u32 {
        kill_at(8 + k, last_before + (first_after.saturating_sub(last_before)) * (k + 1) / 9);
    }
    eprintln!("{kind:?}: {befores} before, {afters} after");
}

#[test]
fn sigkill_during_a_streaming_restore_leaves_before_or_after_memory_store() {
    if std::env::var_os(RESTORE_CHILD_ENV).is_some() || std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    restore_kills(StoreKind::Memory);
}

#[test]
fn sigkill_during_a_streaming_restore_leaves_before_or_after_fjall_store() {
    if std::env::var_os(RESTORE_CHILD_ENV).is_some() || std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    restore_kills(StoreKind::Fjall);
}
