//! Cluster mode against a real three-server NATS JetStream cluster on
//! loopback: replication, read-your-writes, lost races, restarts, and a
//! NATS server killed mid-ingest. Every test counts acknowledged writes and
//! finds each of them on every replica, and compares replicas' snapshots
//! byte for byte at the same position.

use std::sync::Arc;
use std::time::Duration;

use neardup_cluster::partition::Partition;
use neardup_cluster::testkit::NatsCluster;
use neardup_cluster::{snapshots, ClusterOptions, Node};
use neardup_core::Config;
use neardup_index::{Engine, EngineOptions, FsyncPolicy, Item, StoreKind, TenantConfig, UpsertOutcome};

const WAIT: Duration = Duration::from_secs(20);

/// One NATS cluster at a time: three of them at once (nine servers and
/// their nodes) on CI's two cores made forming one take longer than a
/// node waits for its stream.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_cluster() -> std::sync::MutexGuard<'static, ()> {
    ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn opts(store: StoreKind) -> EngineOptions {
    EngineOptions { fsync: FsyncPolicy::Os, store, ..EngineOptions::default() }
}

fn node(rt: &tokio::runtime::Runtime, nats: &NatsCluster, id: &str, dir: &std::path::Path, store: StoreKind) -> Node {
    node_with(rt, nats, id, dir, opts(store))
}

fn node_with(
    rt: &tokio::runtime::Runtime,
    nats: &NatsCluster,
    id: &str,
    dir: &std::path::Path,
    o: EngineOptions,
) -> Node {
    let mut c = ClusterOptions::new(&nats.urls(), id).unwrap();
    // Sets are written when a test asks.
    c.snapshot_interval = None;
    rt.block_on(Node::start(dir, o, c)).unwrap()
}

fn text(i: u64) -> String {
    format!("family {} of the red fox that runs {} times very fast over item {i}", i % 11, i % 3)
}

/// Waits until every node applied `lsn` and checks they agree: the same
/// snapshot bytes for `tenant` and the same decisions for a few probes.
fn assert_same(nodes: &[&Engine], tenant: &str, lsn: u64) {
    for e in nodes {
        e.wait_applied(tenant, lsn, WAIT).unwrap();
    }
    let first = nodes[0].snapshot(tenant).unwrap();
    for e in &nodes[1..] {
        let other = e.snapshot(tenant).unwrap();
        let at = first.iter().zip(&other).position(|(a, b)| a != b);
        assert!(
            other == first,
            "replicas' snapshots differ: {} vs {} bytes, first difference at {at:?}",
            first.len(),
            other.len()
        );
    }
    for q in [1u64, 5, 17] {
        let d = nodes[0].decide(tenant, &text(q)).unwrap();
        for e in &nodes[1..] {
            assert_eq!(e.decide(tenant, &text(q)).unwrap(), d);
        }
    }
    // The event feed: the same lines at the same positions on every node,
    // from where all of them hold it (a restarted node starts at its
    // checkpoint).
    let oldest = |e: &Engine| match e.events(tenant, 0, None, 1) {
        Ok(_) => 0,
        Err(err) => match err.kind() {
            neardup_index::ErrorKind::EventsTrimmed { oldest_after, .. } => *oldest_after,
            _ => panic!("{err}"),
        },
    };
    let from = nodes.iter().map(|e| oldest(e)).max().unwrap_or(0);
    let first = feed(nodes[0], tenant, from);
    for e in &nodes[1..] {
        assert!(feed(e, tenant, from) == first, "replicas' event feeds differ after position {from}");
    }
}

/// Every event of `tenant` after position `from`, page by page.
fn feed(e: &Engine, tenant: &str, from: u64) -> Vec<std::sync::Arc<str>> {
    let (mut out, mut next) = (Vec::new(), (from, None));
    loop {
        let page = e.events(tenant, next.0, next.1, 1000).unwrap();
        if page.lines.is_empty() {
            return out;
        }
        next = page.next_after;
        out.extend(page.lines);
    }
}

fn last_lsn(outcomes: &[UpsertOutcome]) -> u64 {
    outcomes.iter().map(|o| o.lsn).max().unwrap_or(0)
}

#[test]
fn replicas_agree_and_races_have_one_winner() {
    let _one = one_cluster();
    let rt = runtime();
    let nats = NatsCluster::start(3).unwrap();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Node a proposes upserts with their decisions' notes
    // (`--cluster-event-decisions`), node b without: each reads the other's.
    let a = node_with(&rt, &nats, "a", da.path(), EngineOptions { replicated_notes: true, ..opts(StoreKind::Fjall) });
    let b = node(&rt, &nats, "b", db.path(), StoreKind::Memory);
    let (ea, eb) = (Arc::clone(&a.engine), Arc::clone(&b.engine));

    ea.create_tenant("t.one", TenantConfig::new(Config::seed_example())).unwrap();
    // A tenant created on one node works on the other once it has caught up.
    eb.wait_applied("t.one", ea.tenant_lsn("t.one").unwrap(), WAIT).unwrap();
    assert_eq!(eb.tenants().unwrap(), ["t.one"]);
    assert_eq!(
        eb.create_tenant("t.one", TenantConfig::new(Config::seed_example())).unwrap_err().code(),
        "tenant_exists"
    );

    // Writes alternate between the nodes without waiting: each node's
    // proposal races the other's, and the loser plans again.
    let mut acked = Vec::new();
    std::thread::scope(|s| {
        let ha = s.spawn(|| {
            (0..60).map(|i| ea.upsert("t.one", Item::text(format!("a{i}"), text(i))).unwrap()).collect::<Vec<_>>()
        });
        let hb = s.spawn(|| {
            (0..60).map(|i| eb.upsert("t.one", Item::text(format!("b{i}"), text(i + 100))).unwrap()).collect::<Vec<_>>()
        });
        acked.extend(ha.join().unwrap());
        acked.extend(hb.join().unwrap());
    });
    assert_eq!(acked.len(), 120);
    let lsn = last_lsn(&acked);
    assert_same(&[&ea, &eb], "t.one", lsn);
    // Every acknowledged write is an event of the feed, where it was
    // acknowledged: with its decision when node a proposed it.
    let events = feed(&eb, "t.one", 0);
    assert_eq!(events.len(), 120);
    for o in &acked {
        let ev = events
            .iter()
            .find(|l| l.contains(&format!("\"lsn\":{},", o.lsn)))
            .expect("an event at the write's position");
        let noted = ev.contains("\"type\":\"item_inserted\"");
        assert_eq!(noted, o.item_id.starts_with('a'), "{ev}");
        assert!(noted || ev.contains("\"type\":\"item_upserted\""), "{ev}");
    }
    for e in [&ea, &eb] {
        let live = e.live_ids("t.one").unwrap();
        assert_eq!(live.len(), 120, "every acknowledged write is on every replica");
    }

    // Two nodes racing on one new item id with different content and no
    // epoch: exactly one is inserted, the other gets item_exists.
    for round in 0..5 {
        let id = format!("race{round}");
        let (ra, rb) = std::thread::scope(|s| {
            let ha = s.spawn(|| ea.upsert("t.one", Item::text(id.clone(), text(1000 + round))));
            let hb = s.spawn(|| eb.upsert("t.one", Item::text(id.clone(), text(2000 + round))));
            (ha.join().unwrap(), hb.join().unwrap())
        });
        let wins = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "round {round}: {ra:?} / {rb:?}");
        let loser = match (ra, rb) {
            (Err(e), _) | (_, Err(e)) => e,
            _ => unreachable!("one of them failed"),
        };
        assert_eq!(loser.code(), "item_exists", "{loser}");
    }
    let lsn = ea.applied_position().max(eb.applied_position());
    assert_same(&[&ea, &eb], "t.one", lsn);
}

#[test]
fn restarted_nodes_catch_up_and_a_killed_nats_server_loses_nothing() {
    let _one = one_cluster();
    let rt = runtime();
    let mut nats = NatsCluster::start(3).unwrap();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(&rt, &nats, "a", da.path(), StoreKind::Fjall);
    let ea = Arc::clone(&a.engine);
    ea.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
    let mut acked: Vec<String> = Vec::new();
    for i in 0..50 {
        ea.upsert("t", Item::text(format!("i{i}"), text(i))).unwrap();
        acked.push(format!("i{i}"));
    }
    ea.tombstone("t", "i3", 1).unwrap();
    acked.retain(|id| id != "i3");

    // Node b starts later, with an empty directory: it replays the stream.
    let b = node(&rt, &nats, "b", db.path(), StoreKind::Fjall);
    let eb = Arc::clone(&b.engine);
    assert_same(&[&ea, &eb], "t", ea.applied_position());
    eb.checkpoint().unwrap();

    // One NATS server of three is killed mid-ingest: writes go on (the
    // stream keeps its quorum), and it rejoins when restarted.
    let mut failed = 0;
    for i in 50..150 {
        if i == 80 {
            nats.kill(1);
        }
        if i == 120 {
            nats.restart(1).unwrap();
        }
        match ea.upsert("t", Item::text(format!("i{i}"), text(i))) {
            Ok(_) => acked.push(format!("i{i}")),
            // A write in flight when the server died may not be
            // acknowledged (the client reconnects); it is then not counted.
            Err(e) => {
                assert!(["unavailable", "log_conflict"].contains(&e.code()), "{e}");
                if failed < 3 {
                    eprintln!("write {i} failed: {e}");
                }
                failed += 1;
            }
        }
    }
    assert!(failed <= 5, "{failed} writes failed while one server of three was down");

    // Node b restarts from its checkpoint and the stream tail.
    drop(b);
    drop(eb);
    let b = node(&rt, &nats, "b", db.path(), StoreKind::Fjall);
    let eb = Arc::clone(&b.engine);
    assert_same(&[&ea, &eb], "t", ea.applied_position());
    let live = eb.live_ids("t").unwrap();
    for id in &acked {
        assert!(live.contains(id), "acknowledged {id} missing on the restarted replica");
    }
    assert!(!live.contains(&"i3".to_string()));
    assert!(b.is_ready(), "not ready: {:?}, lag {}", b.failure(), b.lag());
}

/// Publishes `payload` straight to the stream under `subject`, as any
/// process that reaches NATS can; returns its position.
fn publish_raw(
    rt: &tokio::runtime::Runtime,
    js: &async_nats::jetstream::Context,
    subject: &str,
    payload: &[u8],
) -> u64 {
    rt.block_on(async { js.publish(subject.to_string(), payload.to_vec().into()).await.unwrap().await.unwrap() })
        .sequence
}

fn counted(n: &Node) -> (u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    (n.state.skipped_total.load(Relaxed), n.state.gap_positions_total.load(Relaxed))
}

/// What stopped every node before: an entry that is not a command, an
/// entry deleted from the stream, and a trim that removed every entry of
/// an idle tenant. Each is read past alike on every node (counted), every
/// tenant stays writable, also after restarts, and the replicas agree.
#[test]
fn bad_entries_deleted_entries_and_trims_stop_no_node() {
    let _one = one_cluster();
    let rt = runtime();
    let nats = NatsCluster::start(3).unwrap();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(&rt, &nats, "a", da.path(), StoreKind::Fjall);
    let b = node(&rt, &nats, "b", db.path(), StoreKind::Memory);
    let (ea, eb) = (Arc::clone(&a.engine), Arc::clone(&b.engine));
    for t in ["t", "idle.one"] {
        ea.create_tenant(t, TenantConfig::new(Config::seed_example())).unwrap();
    }
    ea.upsert("idle.one", Item::text("only", text(7))).unwrap();
    for i in 0..5 {
        ea.upsert("t", Item::text(format!("i{i}"), text(i))).unwrap();
    }
    let client = rt.block_on(async_nats::connect(nats.urls().split(',').next().unwrap().to_string())).unwrap();
    let js = async_nats::jetstream::new(client);

    // A 17-byte entry under t's subject, one under a tenant nobody created.
    let t_subject = neardup_cluster::tenant_subject(Partition::ONLY, "t");
    publish_raw(&rt, &js, &t_subject, b"seventeen bytes!!");
    let ghost = publish_raw(&rt, &js, &neardup_cluster::tenant_subject(Partition::ONLY, "ghost"), b"\x01\x02");
    let lsn = eb.upsert("t", Item::text("after-garbage", text(40))).unwrap().lsn;
    assert!(lsn > ghost);
    assert_same(&[&ea, &eb], "t", lsn);
    for n in [&a, &b] {
        assert_eq!(counted(n), (2, 0), "{}", n.node_id());
        assert!(n.is_ready(), "{}: {:?}", n.node_id(), n.failure());
    }

    // Two snapshot sets trim the stream past idle.one's only entries.
    let idle_lsn = ea.tenant_lsn("idle.one").unwrap();
    rt.block_on(a.publish_snapshot()).unwrap();
    ea.upsert("t", Item::text("between-sets", text(41))).unwrap();
    rt.block_on(a.publish_snapshot()).unwrap();
    let mut stream = rt.block_on(js.get_stream(neardup_cluster::STREAM)).unwrap();
    let first = rt.block_on(stream.info()).unwrap().state.first_sequence;
    assert!(first > idle_lsn, "the stream starts at {first}, after idle.one's last entry {idle_lsn}");
    // Writable from either node (it answered log_conflict for ever).
    let l1 = ea.upsert("idle.one", Item::text("again-a", text(8))).unwrap().lsn;
    let l2 = eb.upsert("idle.one", Item::text("again-b", text(9))).unwrap().lsn;
    assert_same(&[&ea, &eb], "idle.one", l1.max(l2));

    // An entry deleted from the stream while node b was down: b, restarted
    // with an empty directory (from the newest set), reads past the gap.
    drop((b, eb));
    let doomed = publish_raw(&rt, &js, &neardup_cluster::tenant_subject(Partition::ONLY, "ghost"), b"doomed");
    rt.block_on(stream.delete_message(doomed)).unwrap();
    let lsn = ea.upsert("t", Item::text("after-gap", text(42))).unwrap().lsn;
    let db = tempfile::tempdir().unwrap();
    let b = node(&rt, &nats, "b", db.path(), StoreKind::Memory);
    let eb = Arc::clone(&b.engine);
    assert_same(&[&ea, &eb], "t", lsn);
    assert_eq!(counted(&b).1, 1, "the deleted position is counted");
    assert!(b.is_ready(), "{:?}", b.failure());

    // Node a restarts on its own directory (from its checkpoint, which the
    // trimmed stream still follows); the idle tenant stays writable.
    ea.checkpoint().unwrap();
    drop((a, ea));
    let a = node(&rt, &nats, "a", da.path(), StoreKind::Fjall);
    let ea = Arc::clone(&a.engine);
    ea.wait_applied("t", lsn, WAIT).unwrap();
    let l = ea.upsert("idle.one", Item::text("after-restart", text(10))).unwrap().lsn;
    assert_same(&[&ea, &eb], "idle.one", l);
    assert_same(&[&ea, &eb], "t", l);
    for e in [&ea, &eb] {
        assert_eq!(e.live_ids("idle.one").unwrap().len(), 4);
    }
    assert!(a.is_ready() && b.is_ready());
}

/// Snapshot sets in the object store: a node with an empty data directory
/// starts from the newest set and the stream tail; the stream is trimmed
/// behind the oldest set kept; a node whose checkpoints fall behind the
/// trimmed stream is refused with what to do; a set whose writer died
/// before its manifest is ignored.
#[test]
fn new_nodes_start_from_snapshot_sets_and_the_stream_is_trimmed() {
    let _one = one_cluster();
    let rt = runtime();
    let nats = NatsCluster::start(3).unwrap();
    let (da, db, dc) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(&rt, &nats, "a", da.path(), StoreKind::Fjall);
    let ea = Arc::clone(&a.engine);
    ea.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
    ea.create_tenant("u.two", TenantConfig::new(Config::seed_example())).unwrap();
    let mut acked: Vec<String> = Vec::new();
    let write = |from: u64, to: u64, acked: &mut Vec<String>| {
        for i in from..to {
            let tenant = if i % 3 == 0 { "u.two" } else { "t" };
            ea.upsert(tenant, Item::text(format!("i{i}"), text(i))).unwrap();
            acked.push(format!("{tenant}/i{i}"));
        }
    };
    write(0, 120, &mut acked);
    // Node b checkpoints early, then stops: the stream will be trimmed past it.
    {
        let b = node(&rt, &nats, "b", db.path(), StoreKind::Fjall);
        b.engine.wait_applied("t", ea.applied_position(), WAIT).unwrap();
        b.engine.checkpoint().unwrap();
    }
    write(120, 200, &mut acked);
    let first = rt.block_on(a.publish_snapshot()).unwrap();
    assert_eq!(first.tenants.len(), 2);
    write(200, 260, &mut acked);
    let second = rt.block_on(a.publish_snapshot()).unwrap();
    assert!(second.position > first.position);
    // A set whose writer died before its manifest: newer, but ignored.
    let js = rt.block_on(async_nats::connect(nats.urls().split(',').next().unwrap().to_string())).unwrap();
    let js = async_nats::jetstream::new(js);
    let bucket = rt.block_on(snapshots::bucket(&js, 1, Partition::ONLY, Default::default())).unwrap();
    let garbage = format!("sets/{:020}-z/t", second.position + 1000);
    rt.block_on(bucket.objects().put(garbage.as_str(), &mut &b"not a snapshot"[..])).unwrap();
    write(260, 300, &mut acked);

    // The stream now starts after the first set's position.
    let mut stream = rt.block_on(js.get_stream(neardup_cluster::STREAM)).unwrap();
    let info = rt.block_on(stream.info()).unwrap();
    assert_eq!(info.state.first_sequence, first.position + 1, "{:?}", info.state);

    // A new node starts from the newest complete set and the stream tail.
    let c = node(&rt, &nats, "c", dc.path(), StoreKind::Fjall);
    assert_eq!(c.seeded_from, Some(second.position));
    let ec = Arc::clone(&c.engine);
    for tenant in ["t", "u.two"] {
        assert_same(&[&ea, &ec], tenant, ea.tenant_lsn(tenant).unwrap());
    }
    for key in &acked {
        let (tenant, id) = key.split_once('/').unwrap();
        assert!(ec.get(tenant, id).unwrap().is_some(), "acknowledged {key} missing on the seeded node");
    }
    assert!(c.is_ready(), "{:?}", c.failure());
    // It keeps following the stream.
    ea.upsert("t", Item::text("after", text(999))).unwrap();
    assert_same(&[&ea, &ec], "t", ea.tenant_lsn("t").unwrap());

    // Node b's checkpoint is behind the trimmed stream: refused, with what to do.
    let mut cb = ClusterOptions::new(&nats.urls(), "b").unwrap();
    cb.snapshot_interval = None;
    let e = rt.block_on(Node::start(db.path(), opts(StoreKind::Fjall), cb)).unwrap_err();
    assert!(matches!(e.kind(), neardup_cluster::ErrorKind::Trimmed { .. }), "{e}");
    assert!(e.to_string().contains("empty data directory"), "{e}");

    // The next set removes the unfinished one, which is older than it.
    let third = rt.block_on(c.publish_snapshot()).unwrap();
    assert!(third.position < second.position + 1000);
    // Listed as the nodes list it (the object store's own listing was
    // seen, once, never to end); the time limit stays, so a listing that
    // does not end fails the test with a message instead of hanging it.
    let names: Vec<String> = rt.block_on(async {
        tokio::time::timeout(WAIT, snapshots::names(&bucket))
            .await
            .expect("listing the set bucket ends within WAIT")
            .unwrap()
    });
    assert!(names.contains(&garbage), "a newer unfinished set is left to its writer: {names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with(&format!("sets/{:020}-a/", first.position))),
        "the oldest set is dropped beyond the two kept: {names:?}"
    );
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

/// A batch is one log entry where its items do not bear on each other,
/// and is decided exactly as on a single node: every answer equals a
/// single-node engine's for the same batches (near copies inside a batch,
/// copies of earlier batches, replaced ids, repeated idempotency keys,
/// refused items), the replicas end byte-identical, and the log holds far
/// fewer entries than writes.
#[test]
fn batches_are_one_entry_and_decided_as_on_one_node() {
    let _one = one_cluster();
    let rt = runtime();
    let nats = NatsCluster::start(1).unwrap();
    let (da, db, ds) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(&rt, &nats, "a", da.path(), StoreKind::Fjall);
    let b = node(&rt, &nats, "b", db.path(), StoreKind::Memory);
    let solo = Engine::open(ds.path(), opts(StoreKind::Memory)).unwrap();
    let config = TenantConfig::new(Config::default());
    a.engine.create_tenant("t", config.clone()).unwrap();
    solo.create_tenant("t", config).unwrap();
    b.engine.wait_applied("t", a.engine.tenant_lsn("t").unwrap(), WAIT).unwrap();
    let (mut writes, mut grouped_items) = (0u64, 0u64);
    for batch in 0..8u64 {
        let mut items = Vec::new();
        for i in 0..60u64 {
            let n = batch * 1000 + i;
            let mut item = match i % 10 {
                // A near copy of an earlier item of this batch.
                3 | 7 => Item::text(format!("i{n}"), format!("{} x{i}", sentence(batch * 1000 + i - 2))),
                // An exact copy of an item of the previous batch.
                5 if batch > 0 => Item::text(format!("i{n}"), sentence((batch - 1) * 1000 + i)),
                // An id of this batch again, replaced at a higher epoch.
                9 => {
                    let mut it = Item::text(format!("i{}", n - 1), sentence(n + 7));
                    it.epoch = Some(2);
                    it
                }
                _ => Item::text(format!("i{n}"), sentence(n)),
            };
            if i % 20 == 1 {
                // The same key twice in a batch: the second is a replay or a
                // conflict, as on one node.
                item.idempotency_key = Some(format!("k{batch}-{}", i % 40));
            }
            if i == 11 {
                item.idempotency_key = Some(format!("k{batch}-1"));
            }
            if i == 13 {
                item.item_id = "bad id\n".into();
            }
            items.push(item);
        }
        let on = if batch % 2 == 0 { &a.engine } else { &b.engine };
        let want = solo.upsert_batch("t", items.clone()).unwrap();
        let got = on.upsert_batch("t", items).unwrap();
        assert_eq!(got.len(), want.len());
        let before = writes;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            match (g, w) {
                (Ok(g), Ok(w)) => {
                    assert_eq!(
                        (&g.item_id, g.epoch, g.status, &g.decision),
                        (&w.item_id, w.epoch, w.status, &w.decision),
                        "batch {batch} item {i}"
                    );
                    if g.lsn > 0
                        && matches!(
                            g.status,
                            neardup_index::UpsertStatus::Inserted | neardup_index::UpsertStatus::Replaced
                        )
                    {
                        writes += 1;
                    }
                }
                (Err(g), Err(w)) => assert_eq!(g.code(), w.code(), "batch {batch} item {i}"),
                _ => panic!("batch {batch} item {i}: {g:?} vs {w:?}"),
            }
        }
        let lsns: std::collections::BTreeSet<u64> = got.iter().flatten().filter(|o| o.lsn > 0).map(|o| o.lsn).collect();
        grouped_items += (writes - before).saturating_sub(lsns.len() as u64);
    }
    let last = a.engine.applied_position().max(b.engine.applied_position());
    assert_same(&[&a.engine, &b.engine], "t", last);
    // Far fewer log entries than writes: items went together.
    assert!(last < writes / 2, "{last} log entries for {writes} writes");
    assert!(grouped_items > writes / 2, "{grouped_items} of {writes} writes shared an entry");
    // And a restart of a replica replays the entries to the same state.
    drop(b);
    let b = node(&rt, &nats, "b", db.path(), StoreKind::Memory);
    assert_same(&[&a.engine, &b.engine], "t", last);
}

/// Three nodes started at the same instant against a NATS cluster that has
/// just come up, as an orchestrator starts a set: every node starts and
/// becomes ready, whichever creates the shared stream and buckets. (One
/// of three exited at once with `no stream found` before.)
#[test]
fn nodes_started_together_all_become_ready() {
    let _one = one_cluster();
    let rt = runtime();
    for round in 0..2 {
        let nats = NatsCluster::start_unsettled(3).unwrap();
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let started = rt.block_on(async {
            let starts = dirs.iter().enumerate().map(|(i, d)| {
                let mut c = ClusterOptions::new(&nats.urls(), &format!("n{i}")).unwrap();
                c.snapshot_interval = None;
                c.advertise_url = Some(format!("http://127.0.0.1:{}", 9000 + i));
                neardup_cluster::Cluster::start(d.path(), opts(StoreKind::Memory), c)
            });
            futures_util::future::join_all(starts).await
        });
        let nodes: Vec<_> = started
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.unwrap_or_else(|e| panic!("round {round}: node n{i} did not start: {e}")))
            .collect();
        let deadline = std::time::Instant::now() + WAIT;
        while !nodes.iter().all(|n| n.is_ready()) {
            assert!(std::time::Instant::now() < deadline, "round {round}: not every node became ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        // And they form one cluster: a tenant made on one is on the others.
        let e0 = &nodes[0].nodes()[0].engine;
        e0.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
        let lsn = e0.tenant_lsn("t").unwrap();
        for n in &nodes[1..] {
            n.nodes()[0].engine.wait_applied("t", lsn, WAIT).unwrap();
        }
    }
}

/// A CA and a server certificate for 127.0.0.1, as PEM files in `dir`:
/// (CA, server certificate, server key).
fn test_tls(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let paths = (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key"));
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, server.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// NATS requiring a user, a password and TLS, and nodes holding the
/// cluster secret: a node without the credentials or the CA is refused
/// by NATS at once; entries, key records and registry entries written by
/// one that got past NATS but lacks the secret change nothing on any node,
/// and are counted.
#[test]
fn a_secured_cluster_refuses_strangers_and_state_without_the_secret() {
    let _one = one_cluster();
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = test_tls(dir.path());
    let password = dir.path().join("nats.password");
    std::fs::write(&password, "correct horse battery staple\n").unwrap();
    let extra: Vec<String> = ["--user", "neardup", "--pass", "correct horse battery staple", "--tls", "--tlscert"]
        .iter()
        .map(|s| s.to_string())
        .chain([cert.display().to_string(), "--tlskey".into(), key.display().to_string()])
        .collect();
    let nats = NatsCluster::start_with(3, &extra).unwrap();
    let urls = nats.urls();
    let options = |id: &str, user: bool, tls: bool, secret: Option<&[u8]>| {
        let mut c = ClusterOptions::new(&urls, id).unwrap();
        c.snapshot_interval = None;
        c.advertise_url = Some(format!("http://{id}.invalid:1"));
        let user = user.then(|| "neardup".to_string());
        let pw = user.is_some().then_some(password.as_path());
        c.nats = neardup_cluster::NatsAuth::new(None, None, user, pw, tls.then(|| ca.clone()), None, None).unwrap();
        if let Some(s) = secret {
            c.seal = neardup_cluster::secret::Seal::with_secret(s).unwrap();
        }
        c
    };
    let start = |c: ClusterOptions, d: &std::path::Path| {
        rt.block_on(async {
            tokio::time::timeout(WAIT, neardup_cluster::Cluster::start(d, opts(StoreKind::Memory), c))
                .await
                .expect("a node's start ends within WAIT")
        })
    };
    let secret = [42u8; 48];
    let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
    // Without the CA (the servers' certificate does not verify), or
    // without the user: refused by NATS, at once.
    let e = start(options("x1", true, false, Some(&secret)), dirs[0].path()).unwrap_err();
    assert!(e.to_string().to_lowercase().contains("tls") || e.to_string().contains("certificate"), "{e}");
    let e = start(options("x2", false, true, Some(&secret)), dirs[1].path()).unwrap_err();
    assert!(e.to_string().contains("authorization"), "{e}");

    let a = start(options("a", true, true, Some(&secret)), dirs[2].path()).unwrap();
    let b = start(options("b", true, true, Some(&secret)), dirs[3].path()).unwrap();
    let (ea, eb) = (Arc::clone(&a.nodes()[0].engine), Arc::clone(&b.nodes()[0].engine));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let _watch = {
        let seen = Arc::clone(&seen);
        b.keys.watch(move |(id, record)| seen.lock().unwrap().push((id, record)))
    };
    ea.create_tenant("t", TenantConfig::new(Config::seed_example())).unwrap();
    ea.upsert("t", Item::text("real", text(1))).unwrap();
    a.keys.put("k-real", b"a real record").unwrap();

    // A node with the NATS credentials but another secret: its commands,
    // key records and registry entry are refused by a and b.
    let rogue = start(options("rogue", true, true, Some(&[7u8; 48])), dirs[4].path()).unwrap();
    let er = Arc::clone(&rogue.nodes()[0].engine);
    er.wait_applied("t", ea.tenant_lsn("t").unwrap(), WAIT).ok();
    er.create_tenant("evil", TenantConfig::new(Config::seed_example())).unwrap();
    let _ = er.upsert("t", Item::text("forged", text(2)));
    rogue.keys.put("k-forged", b"a forged record").unwrap();
    // Real writes after them: both nodes apply them and agree.
    let lsn = eb.upsert("t", Item::text("real-2", text(3))).unwrap().lsn;
    assert_same(&[&ea, &eb], "t", lsn);
    for (n, e) in [(&a, &ea), (&b, &eb)] {
        assert_eq!(e.tenants().unwrap(), ["t"], "the rogue's tenant is nowhere");
        assert!(e.get("t", "forged").unwrap().is_none());
        let skipped = n.nodes()[0].state.skipped_total.load(std::sync::atomic::Ordering::Relaxed);
        assert!(skipped >= 1, "{} skipped {skipped}", n.node_id());
        assert!(n.refused_records() >= 2, "{} refused {}", n.node_id(), n.refused_records());
        assert!(n.is_ready());
    }
    let deadline = std::time::Instant::now() + WAIT;
    while !seen.lock().unwrap().iter().any(|(id, _)| id == "k-real") {
        assert!(std::time::Instant::now() < deadline, "the real key record reaches b");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!seen.lock().unwrap().iter().any(|(id, _)| id == "k-forged"), "{:?}", seen.lock().unwrap());
    // The rogue's registry entry is not among the nodes b redirects to.
    assert!(b.registry.serving(Partition::ONLY).iter().all(|n| n.node != "rogue"));
}

/// What a proposal's second try rests on (`proposer.rs`): on a clustered
/// stream, a publish that repeats a stored one's message id — with the
/// same expected last subject sequence, now stale — is answered as a
/// duplicate with the first one's position, not refused; a new message id
/// with the stale expectation is refused.
#[test]
fn a_repeated_proposal_is_answered_with_the_first_ones_position() {
    use async_nats::jetstream::{self, context::Publish, stream};
    let _one = one_cluster();
    let rt = runtime();
    let nats = NatsCluster::start(3).unwrap();
    rt.block_on(async {
        let client = async_nats::connect(nats.urls().split(',').next().unwrap()).await.unwrap();
        let js = jetstream::new(client);
        let config = stream::Config {
            name: "DEDUP".into(),
            subjects: vec!["dedup.>".into()],
            num_replicas: 3,
            ..Default::default()
        };
        // The stream's leader may take a moment to be elected.
        let deadline = std::time::Instant::now() + WAIT;
        while js.get_or_create_stream(config.clone()).await.is_err() {
            assert!(std::time::Instant::now() < deadline, "no stream");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let publish = |id: &str, expected: u64| {
            Publish::build().payload("entry".into()).expected_last_subject_sequence(expected).message_id(id)
        };
        let send = |p: Publish| {
            let js = js.clone();
            async move { js.send_publish("dedup.t", p).await.unwrap().await }
        };
        let mut first = send(publish("n1-0", 0)).await;
        while first.is_err() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            first = send(publish("n1-0", 0)).await;
        }
        let first = first.unwrap();
        assert!(!first.duplicate);
        let again = send(publish("n1-0", 0)).await.unwrap();
        assert!(again.duplicate, "{again:?}");
        assert_eq!(again.sequence, first.sequence);
        let other = send(publish("n1-1", 0)).await.unwrap_err();
        assert_eq!(other.kind(), jetstream::context::PublishErrorKind::WrongLastSequence, "{other}");
    });
}
