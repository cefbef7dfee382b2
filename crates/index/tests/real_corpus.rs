//! Recall and cost through the engine on real documents (bench/corpus/real.py:
//! Debian's licences, copyright files, docs and man pages), against the exact
//! all-pairs oracle, with the default tenant configuration.

use std::collections::HashMap;
use std::process::Command;

use neardup_core::{Config, Fingerprinter};
use neardup_index::{Engine, EngineOptions, FsyncPolicy, Item, TenantConfig, TenantLimits};

#[test]
fn engine_recall_and_candidate_cost_on_real_documents() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("real.jsonl");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/corpus/real.py");
    assert!(Command::new("python3").arg(script).arg(&corpus).status().unwrap().success());
    let docs: Vec<(String, String)> = std::fs::read_to_string(&corpus)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["id"].as_str().unwrap().to_owned(), v["text"].as_str().unwrap().to_owned())
        })
        .collect();
    assert!(docs.len() >= 3000, "corpus too small: {}", docs.len());

    let config = Config::default();
    let engine =
        Engine::open(dir.path().join("data"), EngineOptions { fsync: FsyncPolicy::Os, ..EngineOptions::default() })
            .unwrap();
    let limits = TenantLimits { max_item_bytes: 64 << 20, ..TenantLimits::default() };
    engine.create_tenant("real", TenantConfig { limits: limits.clone(), ..TenantConfig::new(config.clone()) }).unwrap();

    let mut found: HashMap<(usize, usize), f64> = HashMap::new();
    let (mut seen, mut verified, mut alone) = (Vec::new(), Vec::new(), Vec::new());
    let index_of: HashMap<&str, usize> = docs.iter().enumerate().map(|(i, d)| (d.0.as_str(), i)).collect();
    for (i, (id, text)) in docs.iter().enumerate() {
        let out = engine.upsert("real", Item::text(id.clone(), text.clone())).unwrap();
        alone.push(without_lsn(&out));
        seen.push(out.decision.candidates_seen as usize);
        verified.push(out.decision.candidates.len());
        for c in &out.decision.candidates {
            found.insert((index_of[c.item_id.as_str()], i), c.score);
        }
    }

    let mut fpr = Fingerprinter::new(config.resolve().unwrap()).unwrap();
    let sets: Vec<Vec<u64>> = docs.iter().map(|d| fpr.fingerprint(&d.1).features).collect();
    let truth = neardup_core::all_pairs(&sets, 0.85);
    assert!(truth.len() >= 100, "expected real near-duplicates, oracle found {}", truth.len());
    let hits = truth.iter().filter(|p| found.contains_key(&(p.0 as usize, p.1 as usize))).count();
    let recall = hits as f64 / truth.len() as f64;
    eprintln!(
        "engine: {} docs, oracle pairs at J >= 0.85: {}, found {hits} (recall {recall:.4})",
        docs.len(),
        truth.len()
    );
    assert!(recall >= 0.995, "recall {recall}");
    // Every reported score is the exact one.
    for p in &truth {
        if let Some(s) = found.get(&(p.0 as usize, p.1 as usize)) {
            assert_eq!(*s, p.2);
        }
    }
    let pct = |v: &mut Vec<usize>, q: usize| {
        v.sort_unstable();
        v[(v.len() - 1) * q / 100]
    };
    let (seen_p99, verified_p99) = (pct(&mut seen, 99), pct(&mut verified, 99));
    eprintln!(
        "candidates per query: distinct seen p99 {seen_p99}, verified p50 {} p99 {verified_p99}",
        pct(&mut verified, 50)
    );
    assert!(verified_p99 <= 100, "verified candidates per query p99 {verified_p99}");

    // The same documents in batches of 256, written in groups of documents
    // that do not bear on each other: every answer is the one given to the
    // document sent alone (log positions aside).
    engine.create_tenant("batched", TenantConfig { limits, ..TenantConfig::new(config.clone()) }).unwrap();
    let items: Vec<Item> = docs.iter().map(|(id, text)| Item::text(id.clone(), text.clone())).collect();
    let batched: Vec<serde_json::Value> = items
        .chunks(256)
        .flat_map(|b| engine.upsert_batch("batched", b.to_vec()).unwrap())
        .map(|r| without_lsn(&r.unwrap()))
        .collect();
    assert_eq!(batched.len(), alone.len());
    for (i, (b, a)) in batched.iter().zip(&alone).enumerate() {
        assert_eq!(b, a, "document {i} ({})", docs[i].0);
    }
}

/// An upsert's answer as JSON, without its log position.
fn without_lsn(o: &neardup_index::UpsertOutcome) -> serde_json::Value {
    let mut v = serde_json::to_value(o).unwrap();
    v.as_object_mut().unwrap().remove("lsn");
    v
}
