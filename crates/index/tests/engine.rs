//! Engine behaviour through the public API, against both stores.

use neardup_core::Config;
use neardup_index::{
    DecisionState, Engine, EngineOptions, FsyncPolicy, Item, Label, NewLabel, Query, StoreKind, TenantConfig,
    UpsertStatus,
};

fn opts(store: StoreKind) -> EngineOptions {
    EngineOptions { fsync: FsyncPolicy::Os, store, ..EngineOptions::default() }
}

fn seed_tenant() -> TenantConfig {
    TenantConfig::new(Config::seed_example())
}

/// A memory-store engine in `dir` with tenant `t` (the seed's
/// configuration) holding `items` (id, text), upserted in order.
fn seeded(dir: &std::path::Path, items: &[(&str, &str)]) -> Engine {
    let e = Engine::open(dir, opts(StoreKind::Memory)).unwrap();
    e.create_tenant("t", seed_tenant()).unwrap();
    for (id, text) in items {
        e.upsert("t", Item::text(*id, *text)).unwrap();
    }
    e
}

/// A label on `left`/`right` by `actor`, with `rationale`.
fn new_label(left: &str, right: &str, label: Label, actor: &str, rationale: &str) -> NewLabel {
    NewLabel { left: left.into(), right: right.into(), label, actor: actor.into(), rationale: rationale.into() }
}

/// An engine on `kind` in a fresh directory, with tenant `t` (the seed's
/// configuration).
fn with_tenant(kind: StoreKind) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(kind)).unwrap();
    e.create_tenant("t", seed_tenant()).unwrap();
    (dir, e)
}

/// Runs `f` once per store kind.
fn each_store(f: impl Fn(StoreKind)) {
    for kind in [StoreKind::Memory, StoreKind::Fjall] {
        f(kind);
    }
}

#[test]
fn seed_demonstration() {
    each_store(|kind| {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(dir.path(), opts(kind)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        let a = e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
        assert_eq!(a.decision.state, DecisionState::Distinct);
        assert!(a.decision.explanation.contains("not a proof"));
        let b = e.upsert("t", Item::text("B", "red fox runs very fast today")).unwrap();
        let best = b.decision.closest().unwrap();
        assert_eq!(best.item_id, "A");
        assert_eq!(best.score, 0.8);
        assert_eq!(b.decision.state, DecisionState::NearDuplicate);
        assert_eq!(b.decision.policy.threshold_similar, 0.75);
        assert!(b.decision.method_version.contains("seed-v1"));
        let c = e.upsert("t", Item::text("C", "database backup completed nightly")).unwrap();
        assert_eq!(c.decision.state, DecisionState::Distinct);
        assert!(c.decision.candidates.iter().all(|x| x.score < 0.75));
        // Incompatible layout: 8 bands of 31 rows need 248 values, not 32.
        let mut bad = Config::seed_example();
        bad.rows = Some(31);
        let err = e.create_tenant("bad", TenantConfig::new(bad)).unwrap_err();
        assert_eq!(err.code(), "invalid_config");
        // Non-idempotent overwrite rejected.
        let err = e.upsert("t", Item::text("A", "replacement")).unwrap_err();
        assert_eq!(err.code(), "item_exists");
        // Tombstone A, rebuild: A is no longer a candidate.
        e.tombstone("t", "A", 1).unwrap();
        e.rebuild("t", seed_tenant()).unwrap();
        let d = e.candidates("t", Query::Content("red fox runs very fast today"), 10).unwrap();
        assert!(d.candidates.iter().all(|c| c.item_id != "A"), "{d:?}");
        let d = e.candidates("t", Query::Item("B"), 10).unwrap();
        assert!(d.candidates.iter().all(|c| c.item_id != "A"));
        assert_eq!(e.stats("t").unwrap().live_items, 2);
    });
}

#[test]
fn idempotency_and_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    e.create_tenant("t", seed_tenant()).unwrap();
    let mut item = Item::text("A", "red fox runs very fast");
    item.idempotency_key = Some("k1".into());
    let first = e.upsert("t", item.clone()).unwrap();
    let again = e.upsert("t", item.clone()).unwrap();
    assert_eq!(again.status, UpsertStatus::Replayed);
    assert_eq!(again.lsn, first.lsn);
    assert_eq!(again.decision, first.decision);
    let mut other = item.clone();
    other.content = "something else".into();
    assert_eq!(e.upsert("t", other).unwrap_err().code(), "idempotency_conflict");
    // Same content, no key: unchanged, nothing written.
    let same = e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
    assert_eq!(same.status, UpsertStatus::Unchanged);
    // A new version needs a higher epoch.
    let mut v2 = Item::text("A", "a different text entirely");
    v2.epoch = Some(1);
    assert_eq!(e.upsert("t", v2.clone()).unwrap_err().code(), "stale_epoch");
    v2.epoch = Some(2);
    assert_eq!(e.upsert("t", v2).unwrap().status, UpsertStatus::Replaced);
    // Epochs stop at 2^53 - 1 (issue 15: a tombstone at 2^64 - 1 left an id
    // nothing could follow, and larger epochs reach JavaScript clients as
    // other numbers).
    let mut huge = Item::text("A", "a third text");
    huge.epoch = Some(neardup_index::MAX_EPOCH + 1);
    assert_eq!(e.upsert("t", huge).unwrap_err().code(), "invalid_input");
    assert_eq!(e.tombstone("t", "A", u64::MAX).unwrap_err().code(), "invalid_input");
    // Tombstones refuse stale epochs, and the id only returns above them.
    assert_eq!(e.tombstone("t", "A", 1).unwrap_err().code(), "stale_epoch");
    e.tombstone("t", "A", 3).unwrap();
    let mut back = Item::text("A", "red fox");
    back.epoch = Some(3);
    assert_eq!(e.upsert("t", back.clone()).unwrap_err().code(), "stale_epoch");
    back.epoch = Some(4);
    assert_eq!(e.upsert("t", back).unwrap().status, UpsertStatus::Inserted);
    // Normalization version must match.
    let mut nv = Item::text("N", "x");
    nv.normalization_version = Some("unicode-v1".into());
    assert_eq!(e.upsert("t", nv).unwrap_err().code(), "invalid_input");
}

#[test]
fn guards_and_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    let mut c = seed_tenant();
    c.limits.max_items = 2;
    c.limits.max_item_bytes = 64;
    c.index.max_shingles = 5;
    c.index.max_candidates = 1;
    e.create_tenant("t", c).unwrap();
    let big = "x ".repeat(100);
    assert_eq!(e.upsert("t", Item::text("big", big)).unwrap_err().code(), "too_large");
    // Over the shingle cap: exact hash only, quarantined when nothing matches.
    let long = "a b c d e f g h i j";
    let q = e.upsert("t", Item::text("q", long)).unwrap();
    assert_eq!(q.decision.state, DecisionState::Quarantined);
    let dup = e.decide("t", long).unwrap();
    assert_eq!(dup.state, DecisionState::Duplicate);
    e.upsert("t", Item::text("r", "red fox runs")).unwrap();
    assert_eq!(e.upsert("t", Item::text("s", "red fox runs far")).unwrap_err().code(), "budget_exceeded");
    let mut media = Item::text("m", "x");
    media.media_type = "image/png".into();
    assert_eq!(e.upsert("t", media).unwrap_err().code(), "invalid_input");
}

/// Changed with ranking before the cap (issue 9): a capped answer is
/// partial, and goes to review, only when the cap cut candidates estimated
/// close to the threshold; a cut far below it is reported but distinct.
#[test]
fn over_cap_goes_to_review_when_the_cut_was_close() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    let mut c = seed_tenant();
    c.index.max_candidates = 2;
    e.create_tenant("t", c).unwrap();
    // Each shares 8 of its 10 bigrams with the query: J = 8/12 = 0.67 < 0.75.
    let stem = "one two three four five six seven eight nine";
    for i in 0..6 {
        e.upsert("t", Item::text(format!("c{i}"), format!("{stem} x{i} y{i}"))).unwrap();
    }
    let d = e.decide("t", &format!("{stem} ten eleven")).unwrap();
    assert!(d.over_cap);
    assert_eq!(d.state, DecisionState::Review, "{}", d.explanation);

    let e2dir = tempfile::tempdir().unwrap();
    let e = Engine::open(e2dir.path(), opts(StoreKind::Memory)).unwrap();
    let mut c = seed_tenant();
    c.index.max_candidates = 2;
    // One row per band: even far look-alikes become candidates.
    (c.index.bands, c.index.rows) = (Some(32), Some(1));
    e.create_tenant("t", c).unwrap();
    // Each shares 1 of 3 bigrams with a 5-bigram query: J = 1/7, far below.
    for i in 0..6 {
        e.upsert("t", Item::text(format!("f{i}"), format!("alpha beta w{i} v{i}"))).unwrap();
    }
    let d = e.decide("t", "alpha beta gamma delta epsilon zeta").unwrap();
    assert!(d.over_cap, "{d:?}");
    assert_eq!(d.state, DecisionState::Distinct, "{}", d.explanation);
    assert!(d.explanation.contains("far below"), "{}", d.explanation);
}

/// Issue 39 item 1: an upsert's candidates stay within `max_candidates`
/// when the tenant holds many exact copies: once their buckets are read
/// partially, the earliest copies used to come on top of the band
/// candidates (200 under a cap of 100). The copy is still a duplicate, and
/// the cut is reported.
#[test]
fn exact_copies_count_against_the_candidate_cap() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    let mut c = seed_tenant();
    // Buckets past 12 entries are read partially, from a rotated window.
    (c.index.max_candidates, c.index.max_bucket_read) = (10, 12);
    e.create_tenant("t", c).unwrap();
    let copy = "the quarterly report is due at the end of the month for every team";
    let mut last = None;
    for i in 0..25 {
        last = Some(e.upsert("t", Item::text(format!("c{i}"), copy)).unwrap());
    }
    let d = last.unwrap().decision;
    assert_eq!(d.candidates.len(), 10, "{d:?}");
    assert!(d.over_cap, "{d:?}");
    assert_eq!(d.state, DecisionState::Duplicate, "{}", d.explanation);
    let d = e.decide("t", copy).unwrap();
    assert_eq!(d.candidates.len(), 10, "{d:?}");
    assert_eq!(d.state, DecisionState::Duplicate, "{}", d.explanation);
}

#[test]
fn restart_recovers_everything() {
    each_store(|kind| {
        let dir = tempfile::tempdir().unwrap();
        let before;
        {
            let e = Engine::open(dir.path(), opts(kind)).unwrap();
            e.create_tenant("t", seed_tenant()).unwrap();
            e.create_tenant("u", seed_tenant()).unwrap();
            e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
            e.checkpoint().unwrap();
            e.upsert("t", Item::text("B", "red fox runs very fast today")).unwrap();
            e.upsert("u", Item::text("X", "red fox runs very fast")).unwrap();
            e.tombstone("t", "A", 1).unwrap();
            e.label(
                "t",
                NewLabel {
                    left: "A".into(),
                    right: "B".into(),
                    label: Label::NearDuplicate,
                    actor: "rev@x".into(),
                    rationale: "one word added".into(),
                },
            )
            .unwrap();
            before = (e.snapshot("t").unwrap(), e.snapshot("u").unwrap());
        }
        let e = Engine::open(dir.path(), opts(kind)).unwrap();
        assert!(e.recovery_report().log.cuts.is_empty());
        assert_eq!((e.snapshot("t").unwrap(), e.snapshot("u").unwrap()), before);
        assert_eq!(e.live_ids("t").unwrap(), ["B"]);
        assert_eq!(e.labels("t").unwrap().len(), 1);
        assert_eq!(e.labels("t").unwrap()[0].policy_id, "default");
        let d = e.decide("t", "red fox runs very fast").unwrap();
        assert_eq!(d.closest().unwrap().item_id, "B");
        // The next write continues after every recovered LSN.
        let o = e.upsert("t", Item::text("C", "database backup")).unwrap();
        assert!(o.lsn > 0);
    });
}

#[test]
fn snapshot_restore_and_encryption() {
    let key = [7u8; 32];
    let d1 = tempfile::tempdir().unwrap();
    let enc = EngineOptions { snapshot_key: Some(key), ..opts(StoreKind::Memory) };
    let e = Engine::open(d1.path(), enc.clone()).unwrap();
    e.create_tenant("t", seed_tenant()).unwrap();
    e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
    let snap = e.snapshot("t").unwrap();
    let h = Engine::snapshot_header(&snap).unwrap();
    assert_eq!((h.tenant.as_str(), h.items), ("t", 1));
    assert_eq!(h.normalization_version, "seed-v1");
    // Into another engine with the same key.
    let d2 = tempfile::tempdir().unwrap();
    let e2 = Engine::open(d2.path(), enc.clone()).unwrap();
    e2.restore("t", &snap).unwrap();
    let b = e2.upsert("t", Item::text("B", "red fox runs very fast today")).unwrap();
    assert_eq!(b.decision.closest().unwrap().item_id, "A");
    drop(e2);
    let e2 = Engine::open(d2.path(), enc).unwrap();
    assert_eq!(e2.live_ids("t").unwrap(), ["A", "B"]);
    assert_eq!(e2.restore("u", &snap).unwrap_err().code(), "tenant_mismatch");
    // Tampered: refused, state unchanged.
    let mut bad = snap.clone();
    let n = bad.len();
    bad[n / 2] ^= 1;
    assert!(e2.restore("t", &bad).is_err());
    assert_eq!(e2.restore("t", &snap[..n - 3]).unwrap_err().code(), "corrupt");
    assert_eq!(e2.live_ids("t").unwrap(), ["A", "B"]);
    // Without the key the snapshot cannot be read.
    let d3 = tempfile::tempdir().unwrap();
    let e3 = Engine::open(d3.path(), opts(StoreKind::Memory)).unwrap();
    assert_eq!(e3.restore("t", &snap).unwrap_err().code(), "snapshot_auth");
}

#[test]
fn verify_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    e.create_tenant("t", seed_tenant()).unwrap();
    e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
    e.upsert("t", Item::text("B", "red fox runs very fast today")).unwrap();
    let v = e.verify("t", "A", "B", None).unwrap();
    assert_eq!(v.score, 0.8);
    let strict = neardup_index::PolicyConfig {
        id: "strict".into(),
        version: 2,
        threshold_identical: 1.0,
        threshold_similar: 0.9,
    };
    let v = e.verify("t", "A", "B", Some(strict)).unwrap();
    assert_eq!(v.verdict, neardup_index::MatchVerdict::Different);
    assert!(v.explanation.contains("strict@v2"));
    assert_eq!(e.verify("t", "A", "Z", None).unwrap_err().code(), "item_not_found");
    let before = e.tenant_config("t").unwrap();
    e.label(
        "t",
        NewLabel {
            left: "A".into(),
            right: "B".into(),
            label: Label::Distinct,
            actor: "r".into(),
            rationale: "different day".into(),
        },
    )
    .unwrap();
    // Feedback never moves a threshold.
    assert_eq!(e.tenant_config("t").unwrap(), before);
    let page = e.list("t", None, 1).unwrap();
    assert_eq!(page.len(), 1);
    let rest = e.list("t", Some(&page[0].item_id), 10).unwrap();
    assert_eq!(rest.len(), 1);
}

#[test]
fn shadow_promote_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Fjall)).unwrap();
    e.create_tenant("t", seed_tenant()).unwrap();
    e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
    // Shadow with unigram shingles: different features, from retained content.
    let mut c = Config::seed_example();
    c.shingle_width = 1;
    let mut shadow = seed_tenant();
    shadow.index = c;
    e.start_shadow("t", shadow.clone()).unwrap();
    e.upsert("t", Item::text("B", "red fox runs fast")).unwrap();
    e.decide("t", "red fox runs very fast").unwrap();
    let r = e.shadow_report("t").unwrap();
    assert_eq!(r.queries, 2);
    assert!(r.decision_disagreements >= 1, "{r:?}");
    assert_eq!(r.items, 2);
    e.promote_shadow("t").unwrap();
    assert_eq!(e.tenant_config("t").unwrap(), shadow);
    // Same unigram set as B: a duplicate only under the promoted parameters.
    assert_eq!(e.decide("t", "fox runs fast red").unwrap().state, DecisionState::Duplicate);
    e.rollback("t").unwrap();
    assert_eq!(e.tenant_config("t").unwrap(), seed_tenant());
    assert_ne!(e.decide("t", "fox runs fast red").unwrap().state, DecisionState::Duplicate);
    assert_eq!(e.rollback("t").unwrap_err().code(), "invalid_state");
    // A tenant that keeps no content cannot change its features.
    let mut lean = seed_tenant();
    lean.retain_content = false;
    e.create_tenant("lean", lean).unwrap();
    e.upsert("lean", Item::text("A", "red fox")).unwrap();
    let mut w1 = seed_tenant();
    w1.index.shingle_width = 1;
    assert_eq!(e.rebuild("lean", w1).unwrap_err().code(), "rebuild_needs_content");
    // Signature-only changes work from canonical features.
    let mut sig = seed_tenant();
    sig.retain_content = false;
    sig.index.num_perm = 64;
    sig.index.bands = Some(16);
    e.rebuild("lean", sig).unwrap();
    assert_eq!(e.decide("lean", "red fox").unwrap().state, DecisionState::Duplicate);
}

#[test]
fn compaction_drops_tombstoned_records() {
    each_store(|kind| {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(dir.path(), opts(kind)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
        e.upsert("t", Item::text("B", "database backup")).unwrap();
        e.tombstone("t", "A", 1).unwrap();
        assert!(e.get("t", "A").unwrap().unwrap().tombstone.is_some());
        assert_eq!(e.compact("t").unwrap(), 1);
        assert_eq!(e.get("t", "A").unwrap(), None);
        drop(e);
        let e = Engine::open(dir.path(), opts(kind)).unwrap();
        assert_eq!(e.get("t", "A").unwrap(), None);
        assert_eq!(e.live_ids("t").unwrap(), ["B"]);
        let err = e.upsert("t", Item::text("A", "again")).unwrap_err();
        assert_eq!(err.code(), "stale_epoch", "tombstone marker survives compaction");
    });
}

#[test]
fn flipped_byte_in_log_tail_is_cut_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        for i in 0..5 {
            e.upsert("t", Item::text(format!("i{i}"), format!("text number {i}"))).unwrap();
        }
    }
    let wal = dir.path().join("wal");
    let mut segs: Vec<_> = std::fs::read_dir(&wal).unwrap().flatten().map(|e| e.path()).collect();
    segs.sort();
    let last = segs.iter().rev().find(|p| std::fs::metadata(p).unwrap().len() > 24).unwrap();
    let mut b = std::fs::read(last).unwrap();
    let n = b.len();
    b[n - 3] ^= 0xff;
    std::fs::write(last, b).unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    assert_eq!(e.recovery_report().log.cuts.len(), 1, "{:?}", e.recovery_report());
    assert_eq!(e.live_ids("t").unwrap(), ["i0", "i1", "i2", "i3"]);
}

#[test]
fn deterministic_replay_gives_identical_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let snap = {
        let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        for i in 0..50 {
            let mut it = Item::text(format!("i{i}"), format!("red fox {} runs {}", i % 7, i % 3));
            it.idempotency_key = Some(format!("k{i}"));
            e.upsert("t", it).unwrap();
        }
        e.tombstone("t", "i3", 1).unwrap();
        e.snapshot("t").unwrap()
    };
    // Two copies of the log, replayed by two fresh engines (one on fjall).
    for kind in [StoreKind::Memory, StoreKind::Fjall] {
        let copy = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(copy.path().join("wal")).unwrap();
        for f in std::fs::read_dir(dir.path().join("wal")).unwrap().flatten() {
            std::fs::copy(f.path(), copy.path().join("wal").join(f.file_name())).unwrap();
        }
        let e = Engine::open(copy.path(), opts(kind)).unwrap();
        assert_eq!(e.snapshot("t").unwrap(), snap);
    }
}

/// Issue 15 item 3: a restart with another snapshot key (or none) after a
/// checkpoint used to drop the tenant and report ready; it must refuse to
/// open, and open as before with the right key.
#[test]
fn wrong_or_missing_snapshot_key_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let with = |k: Option<[u8; 32]>| EngineOptions { snapshot_key: k, ..opts(StoreKind::Fjall) };
    {
        let e = Engine::open(dir.path(), with(Some([7; 32]))).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        e.upsert("t", Item::text("A", "red fox")).unwrap();
        e.checkpoint().unwrap();
        e.upsert("t", Item::text("B", "blue fox")).unwrap();
    }
    for wrong in [Some([8; 32]), None] {
        let Err(err) = Engine::open(dir.path(), with(wrong)) else { panic!("must not open without the tenant") };
        let msg = err.to_string();
        assert!(msg.contains("tenant \"t\"") && msg.contains("snapshot key"), "{msg}");
    }
    let e = Engine::open(dir.path(), with(Some([7; 32]))).unwrap();
    assert_eq!(e.live_ids("t").unwrap(), ["A", "B"]);
}

#[test]
fn truncated_snapshot_falls_back_to_older_one() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        e.upsert("t", Item::text("A", "red fox")).unwrap();
        e.checkpoint().unwrap();
        e.upsert("t", Item::text("B", "blue fox")).unwrap();
        e.checkpoint().unwrap();
    }
    let sdir = dir.path().join("snapshots").join("t");
    let mut snaps: Vec<_> = std::fs::read_dir(&sdir).unwrap().flatten().map(|e| e.path()).collect();
    snaps.sort();
    assert_eq!(snaps.len(), 2);
    let b = std::fs::read(&snaps[1]).unwrap();
    std::fs::write(&snaps[1], &b[..b.len() / 2]).unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    assert_eq!(e.recovery_report().snapshots_rejected.len(), 1);
    // The older snapshot plus the log still holds everything acknowledged.
    assert_eq!(e.live_ids("t").unwrap(), ["A", "B"]);
}

/// A snapshot written by format version 1, committed; it must keep loading.
/// Snapshots written by every format version (1: one payload; 2: frames,
/// records with their features; 3: compressed frames, features left out
/// of records that keep their text), committed; each must keep restoring,
/// into either store, to a tenant that answers the same.
/// `NEARDUP_WRITE_FIXTURES=1` writes the current version's file.
#[test]
fn frozen_snapshot_fixtures_load() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    if std::env::var_os("NEARDUP_WRITE_FIXTURES").is_some() {
        let tmp = tempfile::tempdir().unwrap();
        let e = Engine::open(tmp.path(), opts(StoreKind::Memory)).unwrap();
        e.create_tenant("seed", seed_tenant()).unwrap();
        e.upsert("seed", Item::text("A", "red fox runs very fast")).unwrap();
        e.upsert("seed", Item::text("C", "database backup completed nightly")).unwrap();
        let path = format!("{dir}/seed-v{}.snap", neardup_index::SNAPSHOT_VERSION);
        std::fs::write(path, e.snapshot("seed").unwrap()).unwrap();
    }
    for version in 1..=neardup_index::SNAPSHOT_VERSION {
        let bytes = std::fs::read(format!("{dir}/seed-v{version}.snap")).expect("fixture present");
        assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), version);
        each_store(|kind| {
            let tmp = tempfile::tempdir().unwrap();
            let e = Engine::open(tmp.path(), opts(kind)).unwrap();
            let h = e.restore("seed", &bytes).unwrap();
            assert_eq!(h.items, 2);
            assert_eq!(h.lsh_version, "8x4");
            assert!(e.get("seed", "A").unwrap().unwrap().features > 0, "v{version}");
            let b = e.upsert("seed", Item::text("B", "red fox runs very fast today")).unwrap();
            let best = b.decision.closest().unwrap();
            assert_eq!((best.item_id.as_str(), best.score), ("A", 0.8), "v{version} {kind:?}");
        });
    }
}

/// A command log written by format version 1 (every kind of command the
/// log holds), committed; it must keep replaying to the same state. The
/// payload encoding itself is pinned by a unit test in `command.rs` that
/// reads the same segment.
#[test]
fn frozen_log_fixture_replays() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/seed-v1-log");
    if std::env::var_os("NEARDUP_WRITE_FIXTURES").is_some() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
            e.create_tenant("seed", seed_tenant()).unwrap();
            e.upsert("seed", Item::text("A", "red fox runs very fast")).unwrap();
            let mut b = Item::text("B", "red fox runs very fast today");
            b.idempotency_key = Some("k-b".into());
            b.source_time = Some(1_700_000_000_000);
            e.upsert("seed", b).unwrap();
            e.upsert("seed", Item::text("C", "database backup completed nightly")).unwrap();
            let mut c2 = Item::text("C", "database backup completed every night");
            c2.epoch = Some(2);
            e.upsert("seed", c2).unwrap();
            e.tombstone("seed", "A", 1).unwrap();
            e.label(
                "seed",
                NewLabel {
                    left: "B".into(),
                    right: "C".into(),
                    label: Label::Distinct,
                    actor: "reviewer".into(),
                    rationale: "different topics".into(),
                },
            )
            .unwrap();
            e.rebuild("seed", seed_tenant()).unwrap();
            e.sync().unwrap();
        }
        let _ = std::fs::remove_dir_all(fixture);
        std::fs::create_dir_all(fixture).unwrap();
        for f in std::fs::read_dir(dir.path().join("wal")).unwrap().flatten() {
            std::fs::copy(f.path(), std::path::Path::new(fixture).join(f.file_name())).unwrap();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("wal")).unwrap();
    let mut segments = 0;
    for f in std::fs::read_dir(fixture).expect("fixture present").flatten() {
        std::fs::copy(f.path(), dir.path().join("wal").join(f.file_name())).unwrap();
        segments += 1;
    }
    assert!(segments >= 1);
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    let r = e.recovery_report();
    assert!(r.log.cuts.is_empty(), "{:?}", r.log);
    assert_eq!(r.records_replayed, 8);
    assert_eq!(e.live_ids("seed").unwrap(), ["B", "C"]);
    let c = e.get("seed", "C").unwrap().unwrap();
    assert_eq!(c.epoch, 2);
    let labels = e.labels("seed").unwrap();
    assert_eq!(labels.len(), 1);
    assert_eq!(labels[0].rationale, "different topics");
    // A's tombstone holds: the id comes back only with a higher epoch.
    assert_eq!(e.upsert("seed", Item::text("A", "red fox runs very fast")).unwrap_err().code(), "stale_epoch");
    let d = e.decide("seed", "red fox runs very fast today").unwrap();
    assert_eq!(d.state, DecisionState::Duplicate);
    assert_eq!(d.closest().unwrap().item_id, "B");
    // Its event feed: a log from before the feed records upserts without
    // their decision's note, so they are `item_upserted`, with their state.
    let page = e.events("seed", 0, None, 100).unwrap();
    let types: Vec<String> = page
        .lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].as_str().unwrap().to_string())
        .collect();
    let want = ["item_upserted", "item_upserted", "item_upserted", "item_upserted"];
    assert_eq!(types, [&want[..], &["item_tombstoned", "label_added", "rebuilt"]].concat());
    assert!(page.lines[1].contains("\"item_id\":\"B\",\"epoch\":1,\"state\":\"near_duplicate\""), "{}", page.lines[1]);
}

/// Group commit: under `--fsync always`, concurrent writers share fsyncs,
/// and none is acknowledged before an fsync covered its record. The check
/// runs at the moment each call returns: an implementation that answered
/// before its fsync would be caught with a log position above the durable one.
#[test]
fn group_commit_acknowledges_only_durable_writes() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), EngineOptions { fsync: FsyncPolicy::Always, ..opts(StoreKind::Memory) }).unwrap();
    e.create_tenant("a", seed_tenant()).unwrap();
    e.create_tenant("b", seed_tenant()).unwrap();
    let fsyncs_before = e.log_fsyncs();
    let writes = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..16 {
            let (e, writes) = (&e, &writes);
            s.spawn(move || {
                let tenant = if w % 2 == 0 { "a" } else { "b" };
                for i in 0..40 {
                    let item = Item::text(format!("w{w}-{i}"), format!("writer {w} item {i} text body words"));
                    let o = e.upsert(tenant, item).unwrap();
                    assert!(e.durable_lsn() >= o.lsn, "acknowledged LSN {} above durable {}", o.lsn, e.durable_lsn());
                    writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                let t = e.tombstone(tenant, &format!("w{w}-0"), 1).unwrap();
                assert!(e.durable_lsn() >= t);
            });
        }
    });
    let writes = writes.into_inner();
    let fsyncs = e.log_fsyncs() - fsyncs_before;
    assert_eq!(writes, 640);
    assert!(fsyncs < writes, "{fsyncs} fsyncs for {writes} writes: nothing was grouped");
    // Every acknowledged write survives a restart.
    drop(e);
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    assert_eq!(e.stats("a").unwrap().live_items + e.stats("b").unwrap().live_items, 640 - 16);
}

/// Queued upserts (`upsert_queued`, as the service's async handlers use):
/// writers that must not block queue an item with a callback, and the one
/// that finds no leader gets the lead to run on a thread of its own. Mixed
/// with parked writers (`upsert`) on the same tenant, every callback is
/// called exactly once, and only once an fsync covers its write — checked
/// inside the callback, at the moment of the answer, with fsyncs slowed so
/// an early answer could not hide — and a restart keeps every answered write.
#[test]
fn queued_upserts_answer_once_and_only_when_durable() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{mpsc, Arc};
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(
        Engine::open(dir.path(), EngineOptions { fsync: FsyncPolicy::Always, ..opts(StoreKind::Memory) }).unwrap(),
    );
    e.create_tenant("t", seed_tenant()).unwrap();
    e.delay_log_fsyncs(std::time::Duration::from_millis(3));
    let (tx, rx) = mpsc::channel::<(String, neardup_index::Result<neardup_index::UpsertOutcome>)>();
    let early = Arc::new(AtomicU64::new(0));
    // Leads run on threads of their own, joined before the engine closes.
    let leaders = Arc::new(std::sync::Mutex::new(Vec::new()));
    let spawn: neardup_index::Spawn = {
        let (e, leaders) = (Arc::clone(&e), Arc::clone(&leaders));
        Arc::new(move |lead| {
            let e = Arc::clone(&e);
            leaders.lock().unwrap().push(std::thread::spawn(move || e.lead(lead)));
        })
    };
    std::thread::scope(|s| {
        for w in 0..6 {
            let (e, tx, early, spawn) = (Arc::clone(&e), tx.clone(), Arc::clone(&early), Arc::clone(&spawn));
            s.spawn(move || {
                for i in 0..40 {
                    let id = format!("w{w}-{i}");
                    let text = format!("writer {w} item {i} says something of its own here");
                    if w % 3 == 2 {
                        // A parked writer on the same queue.
                        let o = e.upsert("t", Item::text(&id, text)).unwrap();
                        assert!(e.durable_lsn() >= o.lsn, "a parked writer answered before its fsync");
                        tx.send((id, Ok(o))).unwrap();
                        continue;
                    }
                    let (tx, check, early) = (tx.clone(), Arc::clone(&e), Arc::clone(&early));
                    let answer = Box::new(move |r: neardup_index::Result<neardup_index::UpsertOutcome>| {
                        if let Ok(o) = &r {
                            if check.durable_lsn() < o.lsn {
                                early.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        tx.send((id, r)).unwrap();
                    });
                    e.upsert_queued("t", Item::text(format!("w{w}-{i}"), text), answer, Arc::clone(&spawn)).unwrap();
                }
            });
        }
    });
    drop(tx);
    let answers: Vec<_> = rx.iter().take(240).collect();
    assert_eq!(answers.len(), 240, "every write answered exactly once");
    let ids: std::collections::HashSet<_> = answers.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids.len(), 240);
    for (id, r) in &answers {
        assert!(r.is_ok(), "{id}: {r:?}");
    }
    assert_eq!(early.load(Ordering::Relaxed), 0, "callbacks answered before their fsync");
    e.delay_log_fsyncs(std::time::Duration::ZERO);
    let live = e.stats("t").unwrap().live_items;
    assert_eq!(live, 240);
    drop(spawn);
    let leaders = std::mem::take(&mut *leaders.lock().unwrap());
    assert!(!leaders.is_empty(), "no queued write ever led");
    for h in leaders {
        h.join().unwrap();
    }
    let e = Arc::into_inner(e).expect("no lead outlives the writes");
    drop(e);
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    assert_eq!(e.stats("t").unwrap().live_items, 240, "an answered write was lost");
}

/// A lead dropped unused, or passed to another engine, never leaves a
/// queue stuck: the writes queued behind it are answered with an error, and
/// the next write leads.
#[test]
fn an_unused_lead_answers_its_queue_and_frees_it() {
    use std::sync::{mpsc, Arc, Mutex};
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Arc::new(Engine::open(d1.path(), opts(StoreKind::Memory)).unwrap());
    let b = Engine::open(d2.path(), opts(StoreKind::Memory)).unwrap();
    a.create_tenant("t", seed_tenant()).unwrap();
    let (tx, rx) = mpsc::channel();
    let answer = |tx: &mpsc::Sender<_>| {
        let tx = tx.clone();
        Box::new(move |r: neardup_index::Result<neardup_index::UpsertOutcome>| tx.send(r.map(|o| o.item_id)).unwrap())
    };
    // Leads are kept here, to be run (or not) by the test.
    let kept: Arc<Mutex<Vec<neardup_index::Lead>>> = Arc::default();
    let keep: neardup_index::Spawn = {
        let kept = Arc::clone(&kept);
        Arc::new(move |lead| kept.lock().unwrap().push(lead))
    };
    let take = || kept.lock().unwrap().pop().expect("a lead was handed over");
    a.upsert_queued("t", Item::text("x", "a first text of some words"), answer(&tx), keep.clone()).unwrap();
    let lead = take();
    a.upsert_queued("t", Item::text("y", "a second text of other words"), answer(&tx), keep.clone()).unwrap();
    assert!(kept.lock().unwrap().is_empty(), "a queue with a leader hands out no second lead");
    b.lead(lead); // not b's: refused, and the queue is answered
    for _ in 0..2 {
        let e = rx.recv().unwrap().unwrap_err().to_string();
        assert!(e.contains("lead of its queue was dropped"), "{e}");
    }
    a.upsert_queued("t", Item::text("z", "a third text"), answer(&tx), keep.clone()).unwrap();
    drop(take());
    assert!(rx.recv().unwrap().is_err());
    // The queue leads again as usual, and nothing was written meanwhile.
    a.upsert_queued("t", Item::text("x", "a first text of some words"), answer(&tx), keep.clone()).unwrap();
    a.lead(take());
    assert_eq!(rx.recv().unwrap().unwrap(), "x");
    assert_eq!(a.stats("t").unwrap().live_items, 1);
}

/// A parked writer that comes to lead does not go on leading for the
/// callbacks queued behind it: after its round it hands the lead to the
/// next callback's spawner and returns with its own answer.
#[test]
fn a_parked_leader_hands_callbacks_their_own_lead() {
    use std::sync::{mpsc, Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap());
    e.create_tenant("t", seed_tenant()).unwrap();
    let kept: Arc<Mutex<Vec<neardup_index::Lead>>> = Arc::default();
    let keep: neardup_index::Spawn = {
        let kept = Arc::clone(&kept);
        Arc::new(move |lead| kept.lock().unwrap().push(lead))
    };
    let (tx, rx) = mpsc::channel();
    let queue = |from: usize, to: usize| {
        for i in from..to {
            let tx = tx.clone();
            let answer = Box::new(move |r: neardup_index::Result<neardup_index::UpsertOutcome>| {
                tx.send(r.unwrap().item_id).unwrap()
            });
            let text = format!("callback number {i} writes a text all of its own");
            e.upsert_queued("t", Item::text(format!("c{i}"), text), answer, keep.clone()).unwrap();
        }
    };
    // A full round of callbacks, whose lead is kept (nobody writes yet) ...
    queue(0, 64);
    let first = kept.lock().unwrap().pop().expect("the first write gets the lead");
    // ... then a parked writer, then more callbacks than its round takes.
    let parked = {
        let e = Arc::clone(&e);
        std::thread::spawn(move || e.upsert("t", Item::text("p", "the parked writer's own text")).unwrap())
    };
    // Time for it to queue (it cannot lead: the kept lead is the queue's).
    std::thread::sleep(std::time::Duration::from_millis(200));
    queue(64, 134);
    // Round 1 (64 callbacks) on this thread; the lead then wakes the parked
    // writer, whose round is itself and 63 callbacks.
    e.lead(first);
    assert_eq!(parked.join().unwrap().item_id, "p");
    let next = kept.lock().unwrap().pop().expect("the parked writer handed the rest their own lead");
    assert_eq!(rx.try_iter().count(), 127, "two rounds answered");
    e.lead(next);
    assert_eq!(rx.try_iter().count(), 7);
    assert_eq!(e.stats("t").unwrap().live_items, 135);
}

/// Queries whose answers a restart must keep: decisions, candidates of
/// stored items, live ids and bytes.
type ImageAnswers = (Vec<neardup_index::Decision>, Vec<String>, u64);

fn image_answers(e: &Engine) -> ImageAnswers {
    let queries = ["family 3 shared words of a page number 4 and more 7", "family 11 shared words", "nothing alike"];
    let mut v: Vec<_> = queries.iter().map(|q| e.decide("t", q).unwrap()).collect();
    v.extend((0..5).map(|i| e.candidates("t", Query::Item(&format!("i{}", i * 31 + 1)), 100).unwrap()));
    (v, e.live_ids("t").unwrap(), e.stats("t").unwrap().live_bytes)
}

/// A fjall engine in `dir` with 300 items (some tombstoned), checkpointed
/// with an index image; its answers.
fn checkpointed_with_image(dir: &std::path::Path) -> ImageAnswers {
    let e = Engine::open(dir, opts(StoreKind::Fjall)).unwrap();
    let mut c = seed_tenant();
    c.index.max_candidates = 5;
    e.create_tenant("t", c).unwrap();
    for i in 0..300 {
        let text = format!("family {} shared words of a page number {} and more {}", i % 17, i % 9, i);
        e.upsert("t", Item::text(format!("i{i}"), text)).unwrap();
    }
    for i in (0..300).step_by(13) {
        e.tombstone("t", &format!("i{i}"), 1).unwrap();
    }
    e.checkpoint().unwrap();
    image_answers(&e)
}

/// A restart after a checkpoint of a fjall engine loads each tenant's
/// candidate index from the checkpoint's image, not from the store, and
/// answers exactly as before; a write after the checkpoint makes it read
/// the store instead, with the same answers.
#[test]
fn restart_from_an_index_image_answers_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let before = checkpointed_with_image(dir.path());
    let e = Engine::open(dir.path(), opts(StoreKind::Fjall)).unwrap();
    assert_eq!(e.recovery_report().index_images, ["t"]);
    assert_eq!(image_answers(&e), before);
    e.upsert("t", Item::text("late", "a late item after the checkpoint")).unwrap();
    let after = image_answers(&e);
    drop(e);
    let e = Engine::open(dir.path(), opts(StoreKind::Fjall)).unwrap();
    assert!(e.recovery_report().index_images.is_empty());
    assert_eq!(image_answers(&e), after);
}

/// The seed's fault list: corrupt postings. A byte flipped inside a
/// checkpoint's index image is detected (the frame's checksum), reported,
/// and the tenant's index rebuilt from the store's records — the same
/// answers as before, nothing refused or lost.
#[test]
fn corrupt_postings_are_rebuilt_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let before = checkpointed_with_image(dir.path());
    // The newest checkpoint of t: flip a byte three quarters in, among the
    // image's posting rows (the meta frame comes first and is small).
    let snaps = dir.path().join("snapshots").join("t");
    let newest = std::fs::read_dir(&snaps).unwrap().flatten().map(|f| f.path()).max().unwrap();
    let mut bytes = std::fs::read(&newest).unwrap();
    let at = bytes.len() * 3 / 4;
    bytes[at] ^= 0x40;
    std::fs::write(&newest, &bytes).unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Fjall)).unwrap();
    let r = e.recovery_report();
    assert_eq!(r.index_images_rebuilt.len(), 1, "{r:?}");
    assert!(r.index_images.is_empty(), "{r:?}");
    assert!(r.snapshots_rejected.is_empty(), "{r:?}");
    assert_eq!(image_answers(&e), before);
}

/// The seed's fault list: a reviewer flooding contradictory labels. Labels
/// are immutable events kept for evaluation; they never move a threshold
/// or a decision, however many and however contradictory — and the
/// labelled evaluation sets a contradicted pair aside as disputed, so the
/// flood does not move precision or recall either.
#[test]
fn poisoned_labels_move_no_decision() {
    let dir = tempfile::tempdir().unwrap();
    let e = seeded(
        dir.path(),
        &[
            ("A", "red fox runs very fast"),
            ("B", "red fox runs very fast today"),
            ("C", "database backup completed nightly"),
            ("D", "Red fox runs very fast!"),
        ],
    );
    e.label("t", new_label("A", "D", Label::Duplicate, "careful", "checked")).unwrap();
    e.label("t", new_label("A", "C", Label::Distinct, "careful", "checked")).unwrap();
    let evaluated = e.label_evaluation("t").unwrap();
    let probes = ["red fox runs very fast today", "red fox runs", "database backup completed nightly"];
    let before: Vec<_> = probes.iter().map(|p| e.decide("t", p).unwrap()).collect();
    let config = e.tenant_config("t").unwrap();
    let labels = [Label::Duplicate, Label::Distinct, Label::NearDuplicate];
    for i in 0..2_000usize {
        e.label("t", new_label("A", "B", labels[i % 3], "flooder", &format!("flip {i}"))).unwrap();
    }
    assert_eq!(e.labels("t").unwrap().len(), 2_002);
    assert_eq!(e.tenant_config("t").unwrap(), config);
    let after: Vec<_> = probes.iter().map(|p| e.decide("t", p).unwrap()).collect();
    assert_eq!(after, before);
    // The figure: precision and recall as before the flood, one pair disputed.
    let flooded = e.label_evaluation("t").unwrap();
    assert_eq!((flooded.precision, flooded.recall), (evaluated.precision, evaluated.recall));
    assert_eq!((flooded.pairs, flooded.disputed), (3, 1));
    assert_eq!(flooded.precision.map(|p| p.value), Some(1.0));
    assert_eq!(flooded.not_evaluated, 0);
}

/// The seed's fault list: one hot bucket. Three thousand items that share
/// every band: a query reads at most `max_bucket_read` entries a band,
/// says it read hot buckets partially, and — its candidate set being
/// partial — answers `review` with the verified near duplicates it found
/// rather than claim a complete answer.
#[test]
fn one_hot_bucket_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), opts(StoreKind::Memory)).unwrap();
    let mut c = Config { max_bucket_read: 64, ..Config::default() };
    c.threshold = 0.8;
    e.create_tenant("t", TenantConfig::new(c)).unwrap();
    let base = "the quarterly report of the northern harbour authority lists every vessel that entered the port \
                with its tonnage its cargo its flag and the berth it used during the period under review";
    let items: Vec<Item> = (0..3_000).map(|i| Item::text(format!("i{i}"), format!("{base} entry {i}"))).collect();
    for chunk in items.chunks(500) {
        for r in e.upsert_batch("t", chunk.to_vec()).unwrap() {
            r.unwrap();
        }
    }
    let d = e.decide("t", &format!("{base} entry 99999")).unwrap();
    let bands = 18u64;
    assert!(d.candidates_seen <= bands * 64 + 1, "{} candidates read", d.candidates_seen);
    assert!(d.hot_buckets >= 1, "{d:?}");
    assert_eq!(d.state, DecisionState::Review, "{d:?}");
    assert!(d.candidates.first().is_some_and(|c| c.score >= 0.8), "{d:?}");
    assert!(d.explanation.contains("hot buckets"), "{}", d.explanation);
}

/// The seed's fault list: the feature store removed. Queries keep
/// answering in exact-hash-only mode — a copy is still a duplicate (the
/// index keeps content hashes in memory), anything else is `review`, and
/// every decision says it was degraded and why — instead of failing; when
/// the store is back, answers are what they were.
#[test]
fn without_the_feature_store_queries_fall_back_to_exact_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, faults) = neardup_index::FaultyStore::new();
    let gone = |on: bool| {
        faults.fail_reads(on);
        faults.fail_writes(on);
    };
    let e = Engine::open_on_store(dir.path(), opts(StoreKind::Memory), Box::new(store)).unwrap();
    e.create_tenant("t", seed_tenant()).unwrap();
    e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
    e.upsert("t", Item::text("C", "database backup completed nightly")).unwrap();
    let probes = ["red fox runs very fast", "red fox runs very fast today", "an unrelated sentence about tea"];
    let before: Vec<_> = probes.iter().map(|p| e.decide("t", p).unwrap()).collect();
    assert_eq!(before[0].state, DecisionState::Duplicate);
    assert_eq!(before[1].state, DecisionState::NearDuplicate);
    assert!(before.iter().all(|d| d.degraded.is_none()));

    gone(true);
    let copy = e.decide("t", probes[0]).unwrap();
    assert_eq!(copy.state, DecisionState::Duplicate, "{copy:?}");
    assert_eq!(copy.closest().unwrap().item_id, "A");
    assert!(copy.closest().unwrap().same_content);
    assert_eq!(copy.method, "exact-hash-only");
    let near = e.decide("t", probes[1]).unwrap();
    assert_eq!(near.state, DecisionState::Review, "{near:?}");
    assert_eq!(near.method, "exact-hash-only");
    assert!(near.explanation.contains("feature store could not be read"), "{}", near.explanation);
    for d in [&copy, &near] {
        let why = d.degraded.as_deref().unwrap_or_default();
        assert!(why.contains("feature store unreadable") && why.contains("files are gone"), "{why}");
    }
    // No candidate, nothing to read: the answer needs no store.
    let none = e.decide("t", probes[2]).unwrap();
    assert_eq!(none.state, DecisionState::Distinct);
    assert!(none.degraded.is_none());
    // A write cannot be kept without the store: an error, not a decision.
    assert_eq!(e.upsert("t", Item::text("D", "a new item while the store is gone")).unwrap_err().code(), "store");

    gone(false);
    let after: Vec<_> = probes.iter().map(|p| e.decide("t", p).unwrap()).collect();
    assert_eq!(after, before);
}

/// The reviewer's reads: the queue (flagged items, newest first, paged by
/// log position), a pair side by side with its shared passage marked, an
/// item's neighbourhood, and the policy judged against labels — with
/// contradictory labels set aside as disputed.
#[test]
fn review_reads() {
    let dir = tempfile::tempdir().unwrap();
    let e = seeded(
        dir.path(),
        &[
            ("A", "red fox runs very fast"),
            ("B", "red fox runs very fast today"),
            ("C", "database backup completed nightly"),
            ("D", "Red fox runs very fast!"),
            ("E", "red fox runs very fast today again"),
        ],
    );
    let flagged = [DecisionState::NearDuplicate, DecisionState::Duplicate];
    let q = e.review_queue("t", &flagged, None, 10).unwrap();
    let ids: Vec<_> = q.items.iter().map(|i| i.item.item_id.as_str()).collect();
    assert_eq!(ids, ["E", "D", "B"]);
    assert_eq!((q.scanned, q.total), (5, 3));
    let first = &q.items[0];
    let page2 = e.review_queue("t", &flagged, Some((first.lsn, &first.item.item_id)), 1).unwrap();
    assert_eq!(page2.items.iter().map(|i| i.item.item_id.as_str()).collect::<Vec<_>>(), ["D"]);
    // Paging one at a time visits every flagged item once, in order.
    let mut seen = Vec::new();
    let mut cursor: Option<(u64, String)> = None;
    loop {
        let page = e.review_queue("t", &flagged, cursor.as_ref().map(|(l, i)| (*l, i.as_str())), 1).unwrap();
        let Some(item) = page.items.first() else { break };
        seen.push(item.item.item_id.clone());
        cursor = Some((item.lsn, item.item.item_id.clone()));
    }
    assert_eq!(seen, ["E", "D", "B"]);
    let near = e.review_queue("t", &[DecisionState::NearDuplicate], None, 10).unwrap();
    assert!(near.items.iter().all(|i| i.item.decision == DecisionState::NearDuplicate));

    let c = e.compare("t", "B", "A").unwrap();
    assert_eq!(c.verification.score, 0.8);
    let shared = |s: &neardup_index::Side| -> Vec<String> {
        s.segments.as_ref().unwrap().iter().filter(|r| r.shared).map(|r| r.text.clone()).collect()
    };
    assert_eq!(shared(&c.left), ["red fox runs very fast"]);
    assert_eq!(shared(&c.right), ["red fox runs very fast"]);
    let whole: String = c.left.segments.as_ref().unwrap().iter().map(|r| r.text.as_str()).collect();
    assert_eq!(whole, "red fox runs very fast today");

    let n = e.neighbourhood("t", "A", 50).unwrap();
    let members: Vec<_> = n.members.iter().map(|m| (m.item_id.as_str(), m.hops)).collect();
    // E is 0.67 from A, 0.83 from B: two hops.
    assert_eq!(members, [("D", 1), ("B", 1), ("E", 2)]);
    assert!(n.edges.iter().any(|x| x.left == "B" && x.right == "E"));
    assert!(!n.truncated);
    let small = e.neighbourhood("t", "A", 1).unwrap();
    assert!(small.truncated && small.members.len() <= 2, "{small:?}");

    let label = |l: &str, r: &str, label: Label| {
        e.label("t", new_label(l, r, label, "rev", "")).unwrap();
    };
    label("A", "B", Label::NearDuplicate); // flagged: TP
    label("A", "C", Label::Distinct); // not flagged: TN
    label("B", "C", Label::Duplicate); // not flagged: FN
    label("D", "A", Label::Duplicate); // TP
    label("A", "D", Label::Distinct); // the same pair, contradicted: disputed
                                      // Every label naming A or D: A–B, A–C, D–A, A–D (not B–C).
    assert_eq!(e.compare("t", "A", "D").unwrap().labels.len(), 4);
    let ev = e.label_evaluation("t").unwrap();
    assert_eq!((ev.pairs, ev.disputed, ev.true_positives, ev.false_negatives, ev.true_negatives), (4, 1, 1, 1, 1));
    assert_eq!(ev.precision.unwrap().value, 1.0);
    let recall = ev.recall.unwrap();
    assert_eq!(recall.value, 0.5);
    assert!(recall.low < 0.5 && recall.high > 0.5);
    assert_eq!(q.items.iter().find(|i| i.item.item_id == "B").map(|i| i.labels), Some(0));
    let q = e.review_queue("t", &flagged, None, 10).unwrap();
    assert_eq!(q.items.iter().find(|i| i.item.item_id == "B").map(|i| i.labels), Some(2));
}

/// Every file under `dir` (recursively) that holds `needle`.
fn files_holding(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p).unwrap().windows(needle.len()).any(|w| w == needle) {
                out.push(p);
            }
        }
    }
    out
}

/// Issue 15: with a snapshot key, item text was clear text in the command
/// log and the store. Now log records and store values are sealed with the
/// key: the text is in no file, the engine reopens with the key and
/// answers as before, and refuses to start without it or with another.
#[test]
fn with_a_key_item_text_is_sealed_at_rest() {
    const SECRET: &str = "tangerine launch code nine four";
    each_store(|kind| {
        for key in [None, Some([5u8; 32])] {
            let dir = tempfile::tempdir().unwrap();
            let o = EngineOptions { snapshot_key: key, ..opts(kind) };
            {
                let e = Engine::open(dir.path(), o.clone()).unwrap();
                e.create_tenant("t", seed_tenant()).unwrap();
                e.upsert("t", Item::text("A", format!("before the checkpoint {SECRET}"))).unwrap();
                e.checkpoint().unwrap();
                e.upsert("t", Item::text("B", format!("after the checkpoint {SECRET}"))).unwrap();
                e.upsert("t", Item::text("C", "red fox runs very fast")).unwrap();
            }
            let found = files_holding(dir.path(), SECRET.as_bytes());
            match key {
                // The check can fail: without a key the text is on disk.
                None => assert!(!found.is_empty(), "{kind:?}: the text was expected in the clear without a key"),
                Some(_) => assert!(found.is_empty(), "{kind:?}: clear text in {found:?}"),
            }
            let e = Engine::open(dir.path(), o.clone()).unwrap();
            let c = e.compare("t", "A", "B").unwrap();
            let text: String = c.left.segments.unwrap().iter().map(|r| r.text.as_str()).collect();
            assert_eq!(text, format!("before the checkpoint {SECRET}"));
            assert_eq!(e.decide("t", "red fox runs very fast").unwrap().state, DecisionState::Duplicate);
            drop(e);
            if key.is_some() {
                for other in [None, Some([6u8; 32])] {
                    let err = Engine::open(dir.path(), EngineOptions { snapshot_key: other, ..o.clone() }).err();
                    let msg = err.map(|e| e.to_string()).unwrap_or_default();
                    assert!(msg.contains("key"), "{kind:?} {other:?}: {msg}");
                }
            }
        }
    });
}

/// Issue 15: an ingest key could fence an id for good (a tombstone at the
/// highest epoch). An operator lifts the fence; it survives a restart, and
/// a live id is refused (tombstone it first).
#[test]
fn an_operator_lifts_a_tombstone_fence() {
    each_store(|kind| {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = Engine::open(dir.path(), opts(kind)).unwrap();
            e.create_tenant("t", seed_tenant()).unwrap();
            e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
            assert_eq!(e.unfence("t", "A").unwrap_err().code(), "invalid_state", "a live id");
            e.tombstone("t", "A", neardup_index::MAX_EPOCH).unwrap();
            let back = Item { epoch: Some(neardup_index::MAX_EPOCH), ..Item::text("A", "back again") };
            assert_eq!(e.upsert("t", back).unwrap_err().code(), "stale_epoch", "fenced for good");
            assert_eq!(e.unfence("t", "A").unwrap().0, neardup_index::MAX_EPOCH);
            assert_eq!(e.unfence("t", "A").unwrap_err().code(), "invalid_state", "nothing left to lift");
            assert_eq!(e.unfence("t", "never-written").unwrap_err().code(), "invalid_state");
        }
        let e = Engine::open(dir.path(), opts(kind)).unwrap();
        let out = e.upsert("t", Item::text("A", "back again")).unwrap();
        assert_eq!((out.status, out.epoch), (UpsertStatus::Inserted, 1), "{kind:?}");
        assert_eq!(e.stats("t").unwrap().live_items, 1);
    });
}

/// The labelled evaluation verifies at most MAX_EVALUATED_PAIRS pairs (each
/// reads two records), the most recently labelled; the rest are counted.
#[test]
fn label_evaluation_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let e = seeded(dir.path(), &[("A", "red fox runs very fast"), ("B", "red fox runs very fast today")]);
    let n = neardup_index::MAX_EVALUATED_PAIRS;
    for i in 0..n {
        e.label("t", new_label(&format!("gone-{i}"), "A", Label::Distinct, "r", "")).unwrap();
    }
    // Labelled last: evaluated although 10,000 other pairs came first.
    e.label("t", new_label("A", "B", Label::Duplicate, "r", "")).unwrap();
    let ev = e.label_evaluation("t").unwrap();
    assert_eq!((ev.pairs, ev.not_evaluated), (n as u64 + 1, 1));
    assert_eq!(ev.true_positives, 1);
    assert_eq!(ev.missing, n as u64 - 1);
}

/// A retained text's features are left out of the fjall store and derived
/// again from the text when read. Every read that compares, counts or
/// exports features answers as the memory store (which keeps them) does:
/// decisions, candidates by item, verification, item info, the review
/// queue, snapshots; across a restart, a restore, and a rebuild that stops
/// retaining content (the features are derived before the text goes).
#[test]
fn features_left_out_of_the_store_answer_as_kept_ones() {
    let base = [
        "the committee met on tuesday to review the budget for the coming year and agreed to defer the vote",
        "rain is expected across the northern valleys tonight with snow above two thousand metres by morning",
        "to install the package run the installer then restart the service and check the log for errors",
    ];
    let mut items: Vec<(String, String)> = Vec::new();
    for (i, b) in base.iter().enumerate() {
        items.push((format!("a{i}"), b.to_string()));
        items.push((format!("b{i}"), format!("{b} again")));
        items.push((format!("c{i}"), b.replacen("the ", "", 1)));
    }
    let mem_dir = tempfile::tempdir().unwrap();
    let fj_dir = tempfile::tempdir().unwrap();
    let m = Engine::open(mem_dir.path(), opts(StoreKind::Memory)).unwrap();
    let mut f = Engine::open(fj_dir.path(), opts(StoreKind::Fjall)).unwrap();
    for e in [&m, &f] {
        e.create_tenant("t", seed_tenant()).unwrap();
    }
    for (id, text) in &items {
        let (a, b) = (m.upsert("t", Item::text(id, text)).unwrap(), f.upsert("t", Item::text(id, text)).unwrap());
        assert_eq!(a.decision, b.decision, "{id}");
    }
    let same = |m: &Engine, f: &Engine, at: &str| {
        for (id, text) in &items {
            let (a, b) = (m.get("t", id).unwrap().unwrap(), f.get("t", id).unwrap().unwrap());
            assert!(b.features > 0, "{at}: {id} counts no features");
            assert_eq!(a, b, "{at}: {id}");
            assert_eq!(m.decide("t", text).unwrap(), f.decide("t", text).unwrap(), "{at}: {id}");
            let by_item = |e: &Engine| e.candidates("t", Query::Item(id), 10).unwrap();
            assert_eq!(by_item(m), by_item(f), "{at}: {id}");
        }
        for (l, r) in [("a0", "b0"), ("a1", "c1"), ("a2", "b0")] {
            assert_eq!(m.verify("t", l, r, None).unwrap(), f.verify("t", l, r, None).unwrap(), "{at}");
        }
        assert_eq!(m.list("t", None, 100).unwrap(), f.list("t", None, 100).unwrap(), "{at}");
        let states = [DecisionState::Distinct, DecisionState::NearDuplicate, DecisionState::Duplicate];
        let queue = |e: &Engine| e.review_queue("t", &states, None, 5).unwrap().items;
        assert_eq!(queue(m), queue(f), "{at}");
        assert_eq!(m.snapshot("t").unwrap(), f.snapshot("t").unwrap(), "{at}: snapshots");
    };
    same(&m, &f, "written");
    f.checkpoint().unwrap();
    drop(f);
    f = Engine::open(fj_dir.path(), opts(StoreKind::Fjall)).unwrap();
    same(&m, &f, "reopened");
    // A restore stores the snapshot's records as a write does.
    let restored_dir = tempfile::tempdir().unwrap();
    let r = Engine::open(restored_dir.path(), opts(StoreKind::Fjall)).unwrap();
    r.restore("t", &m.snapshot("t").unwrap()).unwrap();
    for (id, text) in &items {
        assert_eq!(m.decide("t", text).unwrap(), r.decide("t", text).unwrap(), "restored: {id}");
        assert_eq!(m.get("t", id).unwrap(), r.get("t", id).unwrap(), "restored: {id}");
    }
    // Dropping the text keeps the features it gave.
    let mut lean = seed_tenant();
    lean.retain_content = false;
    for e in [&m, &f] {
        e.rebuild("t", lean.clone()).unwrap();
    }
    same(&m, &f, "without content");
    drop(f);
    f = Engine::open(fj_dir.path(), opts(StoreKind::Fjall)).unwrap();
    same(&m, &f, "without content, reopened");
}

/// Concurrent single upserts of one tenant are written in rounds under one
/// lock (flat combining); each is still decided as if alone after every
/// write before it in the log, and acknowledged only once durable. Of the
/// copies of one text written at once by many threads, the first in log
/// order is distinct and every later one is a duplicate of a copy written
/// before it; a restart replays to the same state.
#[test]
fn concurrent_upserts_are_decided_in_log_order() {
    let text = |i: u64| {
        let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..14)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("w{}", x % 5_000)
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    each_store(|kind| {
        let dir = tempfile::tempdir().unwrap();
        let o = EngineOptions { fsync: FsyncPolicy::Always, ..opts(kind) };
        let e = Engine::open(dir.path(), o.clone()).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        let answers = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for w in 0..8u64 {
                let (e, answers) = (&e, &answers);
                s.spawn(move || {
                    for i in 0..25u64 {
                        let id = format!("w{w}-{i}");
                        let a = e.upsert("t", Item::text(&id, text(i))).unwrap();
                        assert!(e.durable_lsn() >= a.lsn, "acknowledged before durable");
                        answers.lock().unwrap().push((i, a));
                    }
                });
            }
        });
        let answers = answers.into_inner().unwrap();
        let lsn_of: std::collections::HashMap<String, u64> =
            answers.iter().map(|(_, a)| (a.item_id.clone(), a.lsn)).collect();
        assert_eq!(lsn_of.len(), 200);
        for i in 0..25u64 {
            let mut copies: Vec<_> = answers.iter().filter(|(t, _)| *t == i).map(|(_, a)| a).collect();
            copies.sort_by_key(|a| a.lsn);
            assert_eq!(copies[0].decision.state, DecisionState::Distinct, "text {i}: the first copy");
            for a in &copies[1..] {
                assert_eq!(a.decision.state, DecisionState::Duplicate, "text {i}: {}", a.item_id);
                let closest = a.decision.closest().unwrap();
                assert!(lsn_of[&closest.item_id] < a.lsn, "text {i}: {} matched a later write", a.item_id);
            }
        }
        let before = e.snapshot("t").unwrap();
        drop(e);
        let e = Engine::open(dir.path(), o).unwrap();
        assert_eq!(e.snapshot("t").unwrap(), before);
    });
}

/// Writers fingerprint outside the tenant's lock with a copy of its
/// parameters; after a change of parameters the next write decides under
/// the new ones, single or batched (a stale copy is noticed and made again).
#[test]
fn writes_after_a_rebuild_fingerprint_under_the_new_parameters() {
    each_store(|kind| {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(dir.path(), opts(kind)).unwrap();
        e.create_tenant("t", seed_tenant()).unwrap();
        e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
        let reordered = "fast very runs fox red";
        assert_eq!(e.decide("t", reordered).unwrap().state, DecisionState::Distinct);
        let mut words = seed_tenant();
        words.index.shingle_width = 1;
        e.rebuild("t", words).unwrap();
        let b = e.upsert("t", Item::text("B", reordered)).unwrap();
        assert_eq!(b.decision.state, DecisionState::Duplicate, "single");
        let c = e.upsert_batch("t", vec![Item::text("C", "runs very fast red fox")]).unwrap();
        assert_eq!(c[0].as_ref().unwrap().decision.state, DecisionState::Duplicate, "batched");
    });
}

/// A batch (written in groups, one log entry a group) decides each item
/// exactly as upserting the items one by one does, where one item bears on
/// another: a replacement whose old content a later item matches, an
/// unchanged re-upsert after a new copy of its content, and a budget that
/// a replacement frees for the next item.
#[test]
fn a_batch_decides_as_items_one_by_one() {
    let base = [("x", "red fox runs very fast over the hill"), ("z", "database backup completed nightly")];
    let batch = vec![
        // x's old text leaves the index: y, its copy, must not match it.
        Item { epoch: Some(2), ..Item::text("x", "completely different words about the sea") },
        Item::text("y", "red fox runs very fast over the hill"),
        // a new copy of z's text, then z unchanged: z's decision sees it.
        Item::text("a", "database backup completed nightly"),
        Item::text("z", "database backup completed nightly"),
        // a is replaced by a short text, which frees room under max_bytes for c.
        Item { epoch: Some(2), ..Item::text("a", "tiny") },
        Item::text("c", "a new item that fits once a is short"),
    ];
    let summary = |o: &neardup_index::UpsertOutcome| {
        let ids: Vec<_> = o.decision.candidates.iter().map(|c| c.item_id.clone()).collect();
        format!("{} {:?} {:?} {ids:?}", o.item_id, o.status, o.decision.state)
    };
    each_store(|kind| {
        let run = |batched: bool| -> Vec<String> {
            let dir = tempfile::tempdir().unwrap();
            let e = Engine::open(dir.path(), opts(kind)).unwrap();
            let mut c = seed_tenant();
            // Live bytes reach 142 before a shrinks (33 → 4 bytes); c (36)
            // fits only after: 149 <= 160 < 178.
            c.limits.max_bytes = 160;
            e.create_tenant("t", c).unwrap();
            for (id, text) in base {
                e.upsert("t", Item::text(id, text)).unwrap();
            }
            let answers: Vec<_> = if batched {
                e.upsert_batch("t", batch.clone()).unwrap()
            } else {
                batch.iter().map(|i| e.upsert("t", i.clone())).collect()
            };
            answers.iter().map(|a| a.as_ref().map_or_else(|e| e.code().to_string(), summary)).collect()
        };
        let alone = run(false);
        assert!(alone[1].contains("Inserted Distinct"), "{alone:?}");
        assert!(alone[3].contains("Unchanged") && alone[3].contains("\"a\""), "{alone:?}");
        assert!(alone[5].contains("Inserted"), "{alone:?}");
        assert_eq!(run(true), alone, "{kind:?}");
    });
}

/// A checkpoint is a consistent cut while writes continue: with writers
/// (single upserts, batches, tombstones) and a checkpoint loop running at
/// once, every acknowledged write is there exactly once afterwards, and a
/// restart — from the last checkpoint plus the log after its cut — comes
/// back to the same state: the same live ids, snapshot and decisions.
#[test]
fn checkpoints_under_concurrent_writes_lose_and_duplicate_nothing() {
    let text = |w: u64, i: u64| {
        // Families of near copies across writers, so candidates are read.
        let mut x = (i % 40).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let words: Vec<String> = (0..30)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("w{}", x % 3_000)
            })
            .collect();
        format!("{} writer {w} item {i}", words.join(" "))
    };
    each_store(|kind| {
        let (dir, e) = with_tenant(kind);
        let done = std::sync::atomic::AtomicBool::new(false);
        let (live, checkpoints) = std::thread::scope(|s| {
            let writers: Vec<_> = (0..4u64)
                .map(|w| {
                    let e = &e;
                    s.spawn(move || {
                        let mut live = Vec::new();
                        for i in 0..120u64 {
                            let id = format!("w{w}-{i}");
                            if i % 3 == 0 {
                                let batch =
                                    (0..5).map(|k| Item::text(format!("{id}-{k}"), text(w, i * 5 + k))).collect();
                                for a in e.upsert_batch("t", batch).unwrap() {
                                    live.push(a.unwrap().item_id);
                                }
                            } else {
                                live.push(e.upsert("t", Item::text(&id, text(w, i))).unwrap().item_id);
                            }
                            if i % 10 == 9 {
                                let gone = live.swap_remove(live.len() / 2);
                                e.tombstone("t", &gone, 1).unwrap();
                            }
                        }
                        live
                    })
                })
                .collect();
            let checkpointer = s.spawn(|| {
                let mut n = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    e.checkpoint().unwrap();
                    n += 1;
                }
                n
            });
            let live: Vec<String> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            (live, checkpointer.join().unwrap())
        });
        assert!(checkpoints >= 3, "{kind:?}: only {checkpoints} checkpoints ran during the writes");
        let mut want = live.clone();
        want.sort();
        want.dedup();
        assert_eq!(want.len(), live.len(), "an id acknowledged twice");
        // Lost and extra ids, not two lists of ~1,000.
        let check_ids = |e: &Engine, when: &str| {
            let mut got = e.live_ids("t").unwrap();
            got.sort();
            let lost: Vec<_> = want.iter().filter(|id| got.binary_search(id).is_err()).collect();
            let extra: Vec<_> = got.iter().filter(|id| want.binary_search(id).is_err()).collect();
            assert!(lost.is_empty() && extra.is_empty(), "{kind:?} {when}: lost {lost:?}, extra {extra:?}");
            assert_eq!(got.len(), want.len(), "{kind:?} {when}: an id listed twice");
        };
        check_ids(&e, "after the writes");
        assert_eq!(e.stats("t").unwrap().live_items, want.len() as u64);
        let probes: Vec<String> = (0..20).map(|i| text(9, i)).collect();
        let decisions = |e: &Engine| -> Vec<String> {
            probes.iter().map(|p| serde_json::to_string(&e.decide("t", p).unwrap()).unwrap()).collect()
        };
        let (snapshot, before) = (e.snapshot("t").unwrap(), decisions(&e));
        drop(e);
        let e = Engine::open(dir.path(), opts(kind)).unwrap();
        assert!(
            !e.recovery_report().snapshots_loaded.is_empty(),
            "{kind:?}: the restart did not start from a checkpoint"
        );
        check_ids(&e, "after the restart");
        assert_eq!(e.stats("t").unwrap().live_items, want.len() as u64);
        assert_eq!(decisions(&e), before, "{kind:?}: decisions after the restart");
        assert_eq!(e.snapshot("t").unwrap(), snapshot, "{kind:?}: snapshot after the restart");
    });
}

/// A batch plans each item once: an item whose band keys or content hash
/// meet the group being formed ends that group before it is planned (it
/// used to be planned there for nothing, then again in the next group,
/// and counted twice in `queries`).
#[test]
fn a_batch_plans_each_item_once() {
    each_store(|kind| {
        let (_dir, e) = with_tenant(kind);
        // Each text followed by its near copy: every copy ends a group.
        let batch: Vec<Item> = (0..20)
            .flat_map(|i| {
                let text = format!("report {i} on the river basin survey with figures and maps for year {}", 2000 + i);
                [Item::text(format!("a{i}"), text.clone()), Item::text(format!("b{i}"), format!("{text} revised"))]
            })
            .collect();
        let answers = e.upsert_batch("t", batch).unwrap();
        let copies = answers.iter().filter(|a| a.as_ref().unwrap().decision.closest().is_some()).count();
        assert!(copies >= 15, "{kind:?}: the near copies found their originals ({copies} of 20)");
        assert_eq!(e.stats("t").unwrap().counters.queries, 40, "{kind:?}");
    });
}
