//! Differential test: one seeded sequence of 700 operations over real text
//! (`tests/fixtures/differential/ops.json`, made by
//! `scripts/fixtures/differential.py`) through the engine, against the answers
//! recorded before the candidate index was rewritten
//! (`engine-expected.json`). Upserts, replacements with epochs, idempotency
//! replays and conflicts, tombstones, decisions, item queries, exact
//! verification, checkpoints, compaction, rebuilds, shadow indexes with
//! promotion and rollback, and restarts, on a tenant with small caps so that
//! capped queries and hot buckets are common.
//!
//! Every answer must be identical, field for field, with both stores.
//! `NEARDUP_RECORD_DIFFERENTIAL=1` rewrites the expected answers: do that
//! only for a deliberate change of behaviour, and say why in the commit.

use std::path::{Path, PathBuf};

use neardup_core::{Config, Normalizer, SignatureScheme};
use neardup_index::{
    Engine, EngineOptions, FsyncPolicy, Item, PolicyConfig, Query, StoreKind, TenantConfig, TenantLimits,
};
use serde_json::{json, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/differential")
}

fn config(layout: &str) -> TenantConfig {
    let mut index = Config {
        normalizer: Normalizer::Unicode,
        shingle_width: 3,
        num_perm: 64,
        bands: Some(16),
        rows: Some(4),
        threshold: 0.6,
        max_shingles: 180,
        max_candidates: 3,
        max_bucket_read: 3,
        // The fixtures were recorded with classic MinHash.
        signature: SignatureScheme::MinHash,
        ..Config::default()
    };
    match layout {
        "default" => {}
        "wide" => (index.bands, index.rows) = (Some(8), Some(8)),
        "bigrams" => index.shingle_width = 2,
        other => panic!("unknown layout {other}"),
    }
    TenantConfig {
        index,
        policy: PolicyConfig { id: "diff".into(), version: 1, threshold_identical: 0.95, threshold_similar: 0.6 },
        limits: TenantLimits { max_items: 200, max_idempotency_keys: 8, ..TenantLimits::default() },
        retain_content: true,
    }
}

fn item(v: &Value) -> Item {
    let mut it = Item::text(v["item_id"].as_str().unwrap(), v["content"].as_str().unwrap());
    it.epoch = v.get("epoch").and_then(Value::as_u64);
    it.idempotency_key = v.get("idempotency_key").and_then(Value::as_str).map(str::to_string);
    it
}

fn answer<T: serde::Serialize>(r: neardup_index::Result<T>) -> Value {
    match r {
        Ok(v) => serde_json::to_value(v).unwrap(),
        Err(e) => json!({ "error": e.code() }),
    }
}

fn open(dir: &Path, store: StoreKind) -> Engine {
    Engine::open(dir, EngineOptions { fsync: FsyncPolicy::Os, store, ..EngineOptions::default() }).unwrap()
}

/// Runs every operation and returns one answer per operation.
fn run(ops: &[Value], store: StoreKind) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let mut e = open(dir.path(), store);
    e.create_tenant("t", config("default")).unwrap();
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let a = match op["op"].as_str().unwrap() {
            "upsert" => answer(e.upsert("t", item(&op["item"]))),
            "upsert_batch" => {
                let items = op["items"].as_array().unwrap().iter().map(item).collect();
                match e.upsert_batch("t", items) {
                    Ok(rs) => Value::Array(rs.into_iter().map(answer).collect()),
                    Err(err) => json!({ "error": err.code() }),
                }
            }
            "tombstone" => answer(e.tombstone("t", op["item_id"].as_str().unwrap(), op["epoch"].as_u64().unwrap())),
            "decide" => answer(e.decide("t", op["content"].as_str().unwrap())),
            "candidates_item" => answer(e.candidates(
                "t",
                Query::Item(op["item_id"].as_str().unwrap()),
                op["limit"].as_u64().unwrap() as usize,
            )),
            "verify" => answer(e.verify("t", op["left"].as_str().unwrap(), op["right"].as_str().unwrap(), None)),
            "reopen" => {
                drop(e);
                e = open(dir.path(), store);
                let r = e.recovery_report();
                json!({ "snapshots": r.snapshots_loaded.len(), "rejected": r.snapshots_rejected.len() })
            }
            "checkpoint" => answer(e.checkpoint().map(|r| r.snapshots.len())),
            "compact" => answer(e.compact("t")),
            "rebuild" => answer(e.rebuild("t", config(op["layout"].as_str().unwrap()))),
            "start_shadow" => answer(e.start_shadow("t", config(op["layout"].as_str().unwrap()))),
            "promote_shadow" => answer(e.promote_shadow("t")),
            "rollback" => answer(e.rollback("t")),
            "shadow_report" => answer(e.shadow_report("t")),
            "stats" => {
                let mut s = answer(e.stats("t"));
                // An estimate of memory, not behaviour: allowed to change.
                s.as_object_mut().unwrap().remove("resident_bytes_estimate");
                s["live_ids"] = answer(e.live_ids("t"));
                s
            }
            other => panic!("unknown op {other}"),
        };
        out.push(a);
    }
    out
}

#[test]
fn engine_answers_equal_the_recorded_ones() {
    let ops: Value = serde_json::from_str(&std::fs::read_to_string(fixtures().join("ops.json")).unwrap()).unwrap();
    let ops = ops["ops"].as_array().unwrap();
    let path = fixtures().join("engine-expected.json");
    // Through text and back, so both sides parse floats the same way.
    let reparse = |v: Vec<Value>| -> Vec<Value> { serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap() };
    let got = reparse(run(ops, StoreKind::Memory));
    if std::env::var_os("NEARDUP_RECORD_DIFFERENTIAL").is_some() {
        std::fs::write(&path, serde_json::to_string(&got).unwrap() + "\n").unwrap();
    }
    let want: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(want.len(), ops.len());
    for store in [StoreKind::Memory, StoreKind::Fjall] {
        let got = if store == StoreKind::Memory { got.clone() } else { reparse(run(ops, store)) };
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{store:?}: operation {i} {}", ops[i]);
        }
    }
    // The sequence exercises what it is meant to: caps, hot buckets, every
    // decision state, errors and replays.
    let text = serde_json::to_string(&want).unwrap();
    for needle in [
        "\"over_cap\":true",
        "\"hot_buckets\":1",
        "\"near_duplicate\"",
        "\"duplicate\"",
        "\"review\"",
        "\"quarantined\"",
        "\"distinct\"",
        "\"replayed\"",
        "\"replaced\"",
        "\"unchanged\"",
        "stale_epoch",
        "idempotency_conflict",
        "budget_exceeded",
        "item_exists",
    ] {
        assert!(text.contains(needle), "the recorded answers never show {needle}");
    }
}

/// Every upsert of the sequence (replacements, stale epochs, idempotency
/// replays and conflicts, budgets, near copies of earlier items), sent in
/// batches of 64 — written in groups, each group's items planned against
/// the state before it — answers as the same upserts sent one by one. Log
/// positions differ (a group shares one) and are left out.
#[test]
fn upserts_in_large_batches_answer_as_one_by_one() {
    fn strip_lsn(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("lsn");
                m.values_mut().for_each(strip_lsn);
            }
            Value::Array(a) => a.iter_mut().for_each(strip_lsn),
            _ => {}
        }
    }
    let ops: Value = serde_json::from_str(&std::fs::read_to_string(fixtures().join("ops.json")).unwrap()).unwrap();
    let items: Vec<Item> = ops["ops"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|op| match op["op"].as_str().unwrap() {
            "upsert" => vec![item(&op["item"])],
            "upsert_batch" => op["items"].as_array().unwrap().iter().map(item).collect(),
            _ => vec![],
        })
        .collect();
    assert!(items.len() > 400);
    // Each distinct text again under a new id: longer groups (nothing is
    // replaced), with the sequence's near copies in them.
    let mut seen = std::collections::HashSet::new();
    let fresh: Vec<Item> = (items.iter().filter(|it| seen.insert(it.content.clone())).enumerate())
        .map(|(i, it)| Item::text(format!("fresh-{i:04}"), &it.content))
        .collect();
    let items: Vec<Item> = items.iter().cloned().chain(fresh).collect();
    for store in [StoreKind::Memory, StoreKind::Fjall] {
        // One by one, in batches, or in batches through a replicated log
        // (cluster mode: groups leave out the writes that bear on them).
        let answers = |batched: bool, replicated: bool| -> Vec<Value> {
            let dir = tempfile::tempdir().unwrap();
            let e = match replicated {
                false => std::sync::Arc::new(open(dir.path(), store)),
                true => replica(dir.path(), store),
            };
            let mut c = config("default");
            c.limits.max_items = 800;
            e.create_tenant("t", c).unwrap();
            let mut out: Vec<Value> = if batched {
                items.chunks(64).flat_map(|b| e.upsert_batch("t", b.to_vec()).unwrap()).map(answer).collect()
            } else {
                items.iter().map(|i| answer(e.upsert("t", i.clone()))).collect()
            };
            out.iter_mut().for_each(strip_lsn);
            out
        };
        let alone = answers(false, false);
        let matched = alone.iter().filter(|a| a["decision"]["candidates"].as_array().is_some_and(|c| !c.is_empty()));
        assert!(matched.count() > 20, "the sequence has near copies");
        assert!(alone.iter().any(|a| a["error"].is_string()), "and refusals");
        for replicated in [false, true] {
            for (i, (b, a)) in answers(true, replicated).iter().zip(&alone).enumerate() {
                assert_eq!(b, a, "{store:?}, replicated {replicated}: upsert {i} ({})", items[i].item_id);
            }
        }
    }
}

/// A replica engine over a log kept in this process: each proposal is
/// numbered in arrival order and applied by a thread of its own, as the
/// cluster's applier does (the thread lives as long as the process).
fn replica(dir: &Path, store: StoreKind) -> std::sync::Arc<Engine> {
    use std::sync::{mpsc, Arc, Mutex};
    type Entry = (u64, String, Vec<u8>);
    struct Log(Mutex<(u64, mpsc::Sender<Entry>)>);
    impl neardup_index::Proposer for Log {
        fn propose(&self, tenant: &str, _after: u64, payload: &[u8]) -> neardup_index::Result<u64> {
            let mut g = self.0.lock().unwrap();
            g.0 += 1;
            let seq = g.0;
            g.1.send((seq, tenant.to_string(), payload.to_vec())).unwrap();
            Ok(seq)
        }
    }
    let (tx, rx) = mpsc::channel::<Entry>();
    let opts = EngineOptions { store, ..EngineOptions::default() };
    let e = Arc::new(Engine::open_replica(dir, opts, Arc::new(Log(Mutex::new((0, tx))))).unwrap());
    let applier = Arc::downgrade(&e);
    std::thread::spawn(move || {
        for (seq, tenant, payload) in rx {
            let Some(e) = applier.upgrade() else { return };
            e.apply_replicated(seq, &tenant, &payload).unwrap();
        }
    });
    e
}
