//! Cluster mode's protocol without NATS: two replica engines share an
//! in-memory log that, like a JetStream 2.9 cluster under a race, takes
//! every proposal without checking its position. Entries planned against a
//! stale state must then be refused by every replica alike, so racing
//! writers still get one winner and the replicas stay byte-identical.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use neardup_core::Config;
use neardup_index::{Engine, EngineOptions, Item, Proposer, Result, TenantConfig};

/// A log that accepts everything, in arrival order: each entry with the
/// tenant it was proposed for (its subject). While `hold`, a proposal is
/// stored but not yet acknowledged (its quorum is slow).
#[derive(Default)]
struct SharedLog {
    entries: Mutex<Vec<(String, Vec<u8>)>>,
    hold: AtomicBool,
}

impl Proposer for SharedLog {
    fn propose(&self, tenant: &str, _after: u64, payload: &[u8]) -> Result<u64> {
        let at = {
            let mut e = self.entries.lock().unwrap();
            e.push((tenant.to_string(), payload.to_vec()));
            e.len() as u64
        };
        while self.hold.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(at)
    }
}

/// Feeds the log to `engine` in order until `stop`, while `open`.
fn applier(
    log: Arc<SharedLog>,
    engine: Arc<Engine>,
    open: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut next = 1u64;
        while !stop.load(Ordering::Relaxed) {
            let entry = match open.load(Ordering::Relaxed) {
                true => log.entries.lock().unwrap().get(next as usize - 1).cloned(),
                false => None,
            };
            match entry {
                Some((tenant, p)) => {
                    engine.apply_replicated(next, &tenant, &p).unwrap();
                    next += 1;
                }
                None => std::thread::sleep(Duration::from_micros(200)),
            }
        }
    })
}

/// An applier feeding an engine the whole log until stopped.
struct Feeding {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Feeding {
    fn start(log: &Arc<SharedLog>, engine: &Arc<Engine>) -> Feeding {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = applier(log.clone(), engine.clone(), Arc::new(AtomicBool::new(true)), stop.clone());
        Feeding { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

/// Feeds `engine` every entry of the log so far, in order, by hand.
fn apply_all(engine: &Engine, log: &SharedLog) {
    for (i, (tenant, e)) in log.entries.lock().unwrap().clone().iter().enumerate() {
        engine.apply_replicated(i as u64 + 1, tenant, e).unwrap();
    }
}

/// A shared log and two replica engines over it (with their folders).
fn two_replicas() -> (Arc<SharedLog>, Arc<Engine>, Arc<Engine>, [tempfile::TempDir; 2]) {
    let log = Arc::new(SharedLog::default());
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let open = |d: &tempfile::TempDir| {
        Arc::new(Engine::open_replica(d.path(), EngineOptions::default(), log.clone()).unwrap())
    };
    let (a, b) = (open(&dirs[0]), open(&dirs[1]));
    (log, a, b, dirs)
}

/// An applier for each replica, fed while `open`, until `stop`.
fn appliers(
    log: &Arc<SharedLog>,
    a: &Arc<Engine>,
    b: &Arc<Engine>,
) -> (Arc<AtomicBool>, Arc<AtomicBool>, [std::thread::JoinHandle<()>; 2]) {
    let (open, stop) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)));
    let each = |e: &Arc<Engine>| applier(log.clone(), e.clone(), open.clone(), stop.clone());
    let handles = [each(a), each(b)];
    (open, stop, handles)
}

/// Tenant "t" (default configuration) created on replica `a` and on a
/// single-node engine of its own, to answer as `a` must.
fn tenant_here_and_alone(a: &Engine) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let solo = Engine::open(dir.path(), EngineOptions::default()).unwrap();
    let config = TenantConfig::new(Config::default());
    a.create_tenant("t", config.clone()).unwrap();
    solo.create_tenant("t", config).unwrap();
    (dir, solo)
}

#[test]
fn stale_entries_are_refused_alike_on_every_replica() {
    let (log, a, b, _dirs) = two_replicas();
    let (open, stop, appliers) = appliers(&log, &a, &b);
    let len = || log.entries.lock().unwrap().len();

    a.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
    b.wait_applied("t", 1, Duration::from_secs(10)).unwrap();
    assert_eq!(b.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap_err().code(), "tenant_exists");

    let mut wins = 0;
    for round in 0..20 {
        let id = format!("race{round}");
        // Hold the appliers until both writers proposed against the same
        // state: the log takes both; the second must be refused.
        open.store(false, Ordering::Relaxed);
        let before = len();
        let (ra, rb) = std::thread::scope(|s| {
            let ha = s.spawn(|| a.upsert("t", Item::text(id.clone(), format!("red fox {round} runs fast"))));
            let hb = s.spawn(|| b.upsert("t", Item::text(id.clone(), format!("blue owl {round} sleeps late"))));
            while len() < before + 2 {
                std::thread::sleep(Duration::from_micros(200));
            }
            open.store(true, Ordering::Relaxed);
            (ha.join().unwrap(), hb.join().unwrap())
        });
        let ok = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "round {round}: {ra:?} / {rb:?}");
        for r in [ra, rb] {
            if let Err(e) = r {
                assert_eq!(e.code(), "item_exists", "{e}");
            }
        }
        wins += ok;
        // Both replicas at the log's end before the next round, so both
        // plan it against the same state (a replica one refused entry
        // behind proposes after an older position, and its entry, refused
        // in turn, makes the round three proposals).
        let end = len() as u64;
        for e in [&a, &b] {
            e.wait_applied("t", end, Duration::from_secs(10)).unwrap();
        }
    }
    assert_eq!(wins, 20);
    // Both replicas applied the same log: the same state, byte for byte.
    let end = log.entries.lock().unwrap().len() as u64;
    for e in [&a, &b] {
        e.wait_applied("t", end, Duration::from_secs(10)).unwrap();
    }
    assert_eq!(a.snapshot("t").unwrap(), b.snapshot("t").unwrap());
    assert_eq!(a.live_ids("t").unwrap().len(), 20);
    // One create and two proposals a round: every round's loser was refused.
    assert_eq!(end, 41, "{end} entries");
    stop.store(true, Ordering::Relaxed);
    for h in appliers {
        h.join().unwrap();
    }
}

#[test]
fn a_single_node_refuses_a_position_past_its_log_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
    e.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
    let lsn = e.upsert("t", Item::text("a", "red fox runs very fast")).unwrap().lsn;
    e.wait_applied("t", lsn, Duration::ZERO).unwrap();
    // Asked to wait up to ten minutes, it answers at once: the bound below
    // is a minute, thousands of times what the answer takes (microseconds),
    // so it cannot flake, and a wait for the position would break it.
    let started = std::time::Instant::now();
    let err = e.wait_applied("t", lsn + 1, Duration::from_secs(600)).unwrap_err();
    assert_eq!(err.code(), "invalid_input", "{err}");
    assert!(started.elapsed() < Duration::from_secs(60), "answered without waiting");
}

/// The seed's fault list: commands replayed. A log delivered again (a
/// consumer restarted behind its position, a duplicate delivery) changes
/// nothing: entries at or below the applied position are skipped, and a
/// replica fed the whole log twice has the same bytes as one fed it once.
#[test]
fn replayed_entries_change_nothing() {
    let (log, a, b, _dirs) = two_replicas();
    let feeding = Feeding::start(&log, &a);
    a.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
    for i in 0..30u64 {
        a.upsert("t", Item::text(format!("i{i}"), format!("red fox {} runs fast {i}", i % 4))).unwrap();
    }
    a.tombstone("t", "i3", 1).unwrap();
    let entries = log.entries.lock().unwrap().clone();
    feeding.stop();
    // b gets every entry twice over, then every entry again out of order.
    for round in 0..2 {
        for (i, (tenant, e)) in entries.iter().enumerate() {
            b.apply_replicated(i as u64 + 1, tenant, e).unwrap();
        }
        assert_eq!(b.snapshot("t").unwrap(), a.snapshot("t").unwrap(), "round {round}");
    }
    for (i, (tenant, e)) in entries.iter().enumerate().rev() {
        b.apply_replicated(i as u64 + 1, tenant, e).unwrap();
    }
    assert_eq!(b.snapshot("t").unwrap(), a.snapshot("t").unwrap());
    assert_eq!(b.live_ids("t").unwrap().len(), 29);
}

/// Entries that are not a command of their tenant — garbage, cut short, a
/// command filed under another tenant, a creation whose configuration does
/// not parse — are skipped alike on every replica: the replicas keep
/// applying, the tenant moves past them (its next write plans after them),
/// and both stay byte-identical. Today's nodes stopped at the first one.
#[test]
fn entries_that_are_not_commands_are_skipped_alike() {
    let (log, a, b, _dirs) = two_replicas();
    let feeding = Feeding::start(&log, &a);
    a.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
    a.create_tenant("u", TenantConfig::new(Config::seed_example())).unwrap();
    a.upsert("t", Item::text("i1", "red fox runs very fast over the hill")).unwrap();
    a.upsert("u", Item::text("j1", "blue owl sleeps late in the old barn")).unwrap();
    let (u_create, u_upsert) = {
        let entries = log.entries.lock().unwrap();
        (entries[1].1.clone(), entries[3].1.clone())
    };
    let garbage: Vec<(&str, Vec<u8>)> = vec![
        ("t", b"\x00garbage entry!!".to_vec()),
        ("t", b"abc".to_vec()),
        ("t", u_upsert.clone()),
        ("nobody", u_upsert),
        ("t", {
            // `u`'s creation cut short, filed under `t`.
            let mut e = u_create.clone();
            e.truncate(e.len() - 3);
            e
        }),
    ];
    let before = log.entries.lock().unwrap().len() as u64;
    for (tenant, e) in &garbage {
        log.entries.lock().unwrap().push((tenant.to_string(), e.clone()));
    }
    let end = before + garbage.len() as u64;
    a.wait_applied("t", end, Duration::from_secs(10)).unwrap();
    assert_eq!(a.tenant_lsn("t").unwrap(), end, "t moved past the entries filed under it");
    assert!(a.write_refusal().is_none(), "{:?}", a.write_refusal());
    // The next write plans after them and is applied.
    let lsn = a.upsert("t", Item::text("i2", "green frog jumps into the cold pond")).unwrap().lsn;
    assert!(lsn > end);
    a.wait_applied("t", lsn, Duration::from_secs(10)).unwrap();
    feeding.stop();
    // The other replica, fed the same log by hand, skips the same entries.
    let entries = log.entries.lock().unwrap().clone();
    let mut skipped = Vec::new();
    for (i, (tenant, e)) in entries.iter().enumerate() {
        if let neardup_index::ReplicatedEntry::Skipped(why) = b.apply_replicated(i as u64 + 1, tenant, e).unwrap() {
            skipped.push((i as u64 + 1, why.to_string()));
        }
    }
    let positions: Vec<u64> = skipped.iter().map(|s| s.0).collect();
    assert_eq!(positions, (before + 1..=end).collect::<Vec<_>>(), "{skipped:?}");
    assert!(skipped[2].1.contains("filed under tenant \"t\""), "{skipped:?}");
    for t in ["t", "u"] {
        assert_eq!(b.snapshot(t).unwrap(), a.snapshot(t).unwrap(), "tenant {t}");
    }
    assert_eq!(b.live_ids("t").unwrap().len(), 2);
}

/// A node applies its own entry as soon as the log's quorum stored it,
/// when every entry before it is applied there already — the applier's
/// step taken early, with the applier's verdict: no applier runs here, and
/// the writes still return. Entries of others in between make the write
/// wait for them (and, having bent its tenant, plan again), and a replica
/// fed the log by the applier's path ends byte-identical.
#[test]
fn own_entries_apply_at_once_when_nothing_comes_before_them() {
    let (log, a, b, _dirs) = two_replicas();
    let config = TenantConfig::new(Config::seed_example());
    // A creation waits for the applier: fed here by hand.
    std::thread::scope(|s| {
        let created = s.spawn(|| a.create_tenant("t", config.clone()));
        while log.entries.lock().unwrap().is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        }
        let (tenant, e) = log.entries.lock().unwrap()[0].clone();
        a.apply_replicated(1, &tenant, &e).unwrap();
        created.join().unwrap().unwrap();
    });
    // Nothing feeds `a` now: each write applies its own entry.
    let first = a.upsert("t", Item::text("i1", "red fox runs very fast over the hill")).unwrap();
    let copy = a.upsert("t", Item::text("i2", "red fox runs very fast over the hill")).unwrap();
    assert_eq!((first.lsn, copy.lsn), (2, 3));
    // Planned once the first was applied: it found it.
    assert_eq!(copy.decision.candidates.first().map(|c| c.item_id.as_str()), Some("i1"), "{copy:?}");
    assert_eq!((a.applied_position(), a.tenant_lsn("t").unwrap()), (3, 3));
    // Delivered later by the log, they are passed over.
    let snap = a.snapshot("t").unwrap();
    apply_all(&a, &log);
    assert_eq!(a.snapshot("t").unwrap(), snap);

    // An entry of `t` from elsewhere lands first (here one that is not a
    // command, which moves `t` past it): `a`'s next entry is not next to
    // its position, so `a` waits for the applier, which refuses the entry
    // planned before it; `a` plans again after it, and that entry is next.
    log.entries.lock().unwrap().push(("t".into(), b"\x00not a command".to_vec()));
    std::thread::scope(|s| {
        let wrote = s.spawn(|| a.upsert("t", Item::text("i3", "blue owl sleeps late in the old barn")));
        while log.entries.lock().unwrap().len() < 5 {
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!(a.applied_position(), 3, "entry 5 is not applied before entry 4");
        for at in [4usize, 5] {
            let (tenant, e) = log.entries.lock().unwrap()[at - 1].clone();
            a.apply_replicated(at as u64, &tenant, &e).unwrap();
        }
        assert_eq!(wrote.join().unwrap().unwrap().lsn, 6, "refused at 5, planned again");
    });
    assert_eq!(a.live_ids("t").unwrap().len(), 3);
    // The other replica, fed the whole log by hand, has the same bytes.
    apply_all(&b, &log);
    assert_eq!(b.snapshot("t").unwrap(), a.snapshot("t").unwrap());
}

/// The replicated log carries a record without the features its content
/// makes (the lean forms a node's own log holds): every server of a
/// cluster's log stores and sends each entry, and the features were most
/// of it. A replica fed the log derives them when it compares, and answers
/// as the node that planned the writes.
#[test]
fn replicated_entries_leave_out_the_features_their_content_makes() {
    let (log, a, b, _dirs) = two_replicas();
    let feeding = Feeding::start(&log, &a);
    a.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
    let text: String = (0..12).map(sentence).collect::<Vec<_>>().join(" ");
    assert!(text.len() > 1500, "{}", text.len());
    a.upsert("t", Item::text("i1", text.clone())).unwrap();
    // Its full form carries a varint per shingle besides the text: ~2.8× it.
    let entry = log.entries.lock().unwrap().last().unwrap().1.clone();
    assert!(entry.len() < text.len() + 512, "an entry of {} bytes for {} bytes of text", entry.len(), text.len());
    let near = a.upsert("t", Item::text("i2", format!("{text} and one more"))).unwrap();
    assert_eq!(near.decision.candidates.first().map(|c| c.item_id.as_str()), Some("i1"), "{near:?}");
    feeding.stop();
    apply_all(&b, &log);
    assert_eq!(b.snapshot("t").unwrap(), a.snapshot("t").unwrap());
    // The replica compares with the features it derived: the same answer.
    let query = b.decide("t", &format!("{text} and one more")).unwrap();
    assert_eq!(query.candidates.first().map(|c| c.item_id.as_str()), Some("i2"), "{query:?}");
}

/// Words for texts that share no shingle with each other unless made to.
fn sentence(seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..24)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("w{}", x % 50_000)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Concurrent single upserts of one tenant on one node in cluster mode go
/// to the log together: the writes queued while an entry is in flight are
/// the next round, proposed as one entry where they do not bear on each
/// other — and each is answered exactly as a single node answers the same
/// upserts one by one in queue order (near copies, ids written again, the
/// same content again, repeated idempotency keys, a bad id). Before, each
/// was an entry of its own, and concurrent writers were refused and
/// planned again one round trip each.
#[test]
fn queued_single_upserts_share_entries_and_answer_as_one_by_one() {
    use std::sync::mpsc;
    let (log, a, b, _dirs) = two_replicas();
    let (open, stop, appliers) = appliers(&log, &a, &b);
    let (_solo_dir, solo) = tenant_here_and_alone(&a);
    let len = || log.entries.lock().unwrap().len() as u64;
    let leaders = Arc::new(Mutex::new(Vec::new()));
    let spawn: neardup_index::Spawn = {
        let (a, leaders) = (a.clone(), leaders.clone());
        Arc::new(move |lead| {
            let a = a.clone();
            leaders.lock().unwrap().push(std::thread::spawn(move || a.lead(lead)));
        })
    };
    // Queues `items` behind a first write whose entry the held log keeps
    // in flight (stored, not yet acknowledged, not delivered), then lets
    // the log go on; each answer in order.
    let queued_behind_one = |items: Vec<Item>| {
        let (tx, rx) = mpsc::channel();
        open.store(false, Ordering::Relaxed);
        log.hold.store(true, Ordering::Relaxed);
        let (before, n) = (len(), items.len());
        for (i, item) in items.into_iter().enumerate() {
            let tx = tx.clone();
            a.upsert_queued("t", item, Box::new(move |r| tx.send((i, r)).unwrap()), spawn.clone()).unwrap();
            if i == 0 {
                // The first is proposed; its leader waits for the log.
                // (A bound against a hang only: it takes microseconds.)
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while len() == before {
                    assert!(std::time::Instant::now() < deadline, "the first write was never proposed");
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
        log.hold.store(false, Ordering::Relaxed);
        open.store(true, Ordering::Relaxed);
        drop(tx);
        // Each answer within a minute (a bound against a hang only).
        let mut answers: Vec<_> =
            (0..n).map(|_| rx.recv_timeout(Duration::from_secs(60)).expect("every queued write answered")).collect();
        answers.sort_by_key(|(i, _)| *i);
        (answers.into_iter().map(|(_, r)| r).collect::<Vec<_>>(), len() - before)
    };

    // Writes that share nothing: the 32 queued behind the first are one entry.
    let distinct: Vec<Item> = (0..33u64).map(|i| Item::text(format!("d{i}"), sentence(i))).collect();
    for it in &distinct {
        solo.upsert("t", it.clone()).unwrap();
    }
    let (answers, entries) = queued_behind_one(distinct);
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!(entries, 2, "the first write's entry, then one for the 32 queued behind it");

    // Writes that bear on each other: answered as one by one on one node.
    let mut mixed = Vec::new();
    for i in 0..64u64 {
        let n = 1000 + i;
        let mut item = match i % 8 {
            // A near copy of the item two before.
            3 => Item::text(format!("m{n}"), format!("{} x{i}", sentence(n - 2))),
            // The id before, other content, no epoch: item_exists.
            5 => Item::text(format!("m{}", n - 1), sentence(n + 500)),
            // The item two before again: unchanged.
            6 => Item::text(format!("m{}", n - 2), sentence(n - 2)),
            // The id before, replaced at a higher epoch.
            7 => {
                let mut it = Item::text(format!("m{}", n - 1), sentence(n + 900));
                it.epoch = Some(2);
                it
            }
            // An exact copy of a document of the first round.
            1 => Item::text(format!("m{n}"), sentence(i)),
            _ => Item::text(format!("m{n}"), sentence(n)),
        };
        if i % 16 == 2 {
            item.idempotency_key = Some(format!("k{}", i % 32));
        }
        if i == 20 {
            item.item_id = "bad id\n".into();
        }
        mixed.push(item);
    }
    let want: Vec<_> = mixed.iter().map(|it| solo.upsert("t", it.clone())).collect();
    let (got, entries) = queued_behind_one(mixed);
    let mut writes = 0;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        match (g, w) {
            (Ok(g), Ok(w)) => {
                assert_eq!(
                    (&g.item_id, g.epoch, g.status, &g.decision),
                    (&w.item_id, w.epoch, w.status, &w.decision),
                    "item {i}"
                );
                writes += u64::from(g.lsn > 0 && w.lsn > 0);
            }
            (Err(g), Err(w)) => assert_eq!(g.code(), w.code(), "item {i}"),
            _ => panic!("item {i}: {g:?} vs {w:?}"),
        }
    }
    assert_eq!(got.len(), 64);
    assert!(entries < writes / 2, "{entries} entries for {writes} writes");
    let end = len();
    for e in [&a, &b] {
        e.wait_applied("t", end, Duration::from_secs(10)).unwrap();
    }
    assert_eq!(a.snapshot("t").unwrap(), b.snapshot("t").unwrap());
    assert_eq!(a.live_ids("t").unwrap(), solo.live_ids("t").unwrap());
    stop.store(true, Ordering::Relaxed);
    for h in appliers {
        h.join().unwrap();
    }
    for h in std::mem::take(&mut *leaders.lock().unwrap()) {
        h.join().unwrap();
    }
}

/// A write left out of a group must not be one that replaces a live
/// version: the replacement takes the old version out of the index, and a
/// later write that shares band keys only with the old version would be
/// decided against it if planned first. The batch: a new item, then a
/// replacement of a live item by a near copy of the new one (left out:
/// it bears on the group), then a near copy of the live item's old text —
/// answered as on one node, where the old text is gone by then.
#[test]
fn a_replacement_is_never_left_out_of_a_group() {
    let (log, a, b, _dirs) = two_replicas();
    let (_open, stop, appliers) = appliers(&log, &a, &b);
    let (_solo_dir, solo) = tenant_here_and_alone(&a);
    let (old, new) = (sentence(2), sentence(1));
    for e in [&*a, &solo] {
        e.upsert("t", Item::text("x", old.clone())).unwrap();
    }
    let mut replacement = Item::text("x", format!("{new} x"));
    replacement.epoch = Some(2);
    let batch = vec![Item::text("g", new.clone()), replacement, Item::text("y", format!("{old} y"))];
    let want = solo.upsert_batch("t", batch.clone()).unwrap();
    let got = a.upsert_batch("t", batch).unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let (g, w) = (g.as_ref().unwrap(), w.as_ref().unwrap());
        assert_eq!((g.status, &g.decision), (w.status, &w.decision), "item {i}");
    }
    stop.store(true, Ordering::Relaxed);
    for h in appliers {
        h.join().unwrap();
    }
}
