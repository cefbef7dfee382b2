//! Differential test of the in-memory candidate index: the texts of the
//! seeded operation sequence in `tests/fixtures/differential/ops.json` (made
//! by `scripts/fixtures/differential.py` from real licence text) inserted,
//! replaced, removed and queried, against the answers recorded before the
//! candidate index was rewritten (`core-expected.json`). Small caps make
//! capped queries and hot buckets common.
//!
//! `NEARDUP_RECORD_DIFFERENTIAL=1` rewrites the expected answers: do that
//! only for a deliberate change of behaviour, and say why in the commit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use neardup_core::{CandidateSet, Config, Fingerprinter, Match, MemoryIndex, Normalizer, SignatureScheme};
use serde_json::{json, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/differential")
}

fn config() -> Config {
    Config {
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
    }
}

fn matches(m: &[Match]) -> Value {
    Value::Array(m.iter().map(|m| json!([m.id, m.score, m.same_content])).collect())
}

fn sorted(c: &CandidateSet) -> Vec<u32> {
    let mut ids: Vec<u32> = c.ids.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    ids
}

fn run(ops: &[Value]) -> Vec<Value> {
    let params = config().resolve().unwrap();
    let mut fp = Fingerprinter::new(params.clone()).unwrap();
    let mut index = MemoryIndex::new(params);
    let mut now: HashMap<String, u32> = HashMap::new();
    let mut out = Vec::new();
    let insert = |index: &mut MemoryIndex, fp: &mut Fingerprinter, now: &mut HashMap<String, u32>, item: &Value| {
        let id = item["item_id"].as_str().unwrap().to_string();
        if let Some(old) = now.remove(&id) {
            assert!(index.remove(old));
        }
        let new = index.insert(fp.fingerprint(item["content"].as_str().unwrap())).unwrap();
        now.insert(id, new);
        json!(["insert", new, index.len()])
    };
    for op in ops {
        match op["op"].as_str().unwrap() {
            "upsert" => out.push(insert(&mut index, &mut fp, &mut now, &op["item"])),
            "upsert_batch" => {
                for item in op["items"].as_array().unwrap() {
                    out.push(insert(&mut index, &mut fp, &mut now, item));
                }
            }
            "tombstone" => {
                let id = op["item_id"].as_str().unwrap();
                let removed = match now.remove(id) {
                    Some(slot) => index.remove(slot),
                    None => false,
                };
                out.push(json!(["remove", removed, index.len()]));
            }
            "decide" => {
                let q = fp.fingerprint(op["content"].as_str().unwrap());
                let c = index.candidates(&q, None).unwrap();
                let m = index.verify(&q, &c.ids, 0.6);
                out.push(json!(["decide", sorted(&c), c.is_partial(), matches(&m)]));
            }
            "candidates_item" => {
                let Some(&slot) = now.get(op["item_id"].as_str().unwrap()) else { continue };
                let features = index.features(slot).unwrap().to_vec();
                let c = index.candidates_before(slot);
                let m = index.verify_item(slot, &c.ids, 0.6);
                out.push(json!(["before", slot, features.len(), sorted(&c), c.is_partial(), matches(&m)]));
            }
            _ => {}
        }
    }
    // Every item against the items inserted before it, as the batch tool asks.
    let inserted = out.iter().filter(|a| a[0] == "insert").count() as u32;
    for slot in 0..inserted {
        if index.features(slot).is_none() {
            continue;
        }
        let c = index.candidates_before(slot);
        let m = index.verify_item(slot, &c.ids, 0.6);
        out.push(json!(["batch", slot, sorted(&c), c.is_partial(), matches(&m)]));
    }
    out
}

#[test]
fn memory_index_answers_equal_the_recorded_ones() {
    let ops: Value = serde_json::from_str(&std::fs::read_to_string(fixtures().join("ops.json")).unwrap()).unwrap();
    let got = run(ops["ops"].as_array().unwrap());
    let got: Vec<Value> = serde_json::from_str(&serde_json::to_string(&got).unwrap()).unwrap();
    let path = fixtures().join("core-expected.json");
    if std::env::var_os("NEARDUP_RECORD_DIFFERENTIAL").is_some() {
        std::fs::write(&path, serde_json::to_string(&got).unwrap() + "\n").unwrap();
    }
    let want: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "answer {i}");
    }
    let partial = want
        .iter()
        .filter(|a| match a[0].as_str().unwrap() {
            "decide" => a[2] == true,
            "batch" => a[3] == true,
            "before" => a[4] == true,
            _ => false,
        })
        .count();
    assert!(partial >= 15, "only {partial} partial answers: the sequence no longer exercises the caps");
}
