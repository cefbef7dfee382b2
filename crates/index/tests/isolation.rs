//! Property: over mixed random operations on two tenants with identical
//! parameters and overlapping content, no answer for one tenant ever names
//! an item of the other, and every candidate is live in its own tenant.

use std::collections::BTreeMap;

use neardup_core::Config;
use neardup_index::{Engine, EngineOptions, FsyncPolicy, Item, Query, TenantConfig};
use proptest::prelude::*;

const WORDS: [&str; 8] = ["red", "fox", "runs", "very", "fast", "today", "blue", "cat"];

#[derive(Debug, Clone)]
enum Op {
    Upsert { tenant: usize, id: u8, words: Vec<usize> },
    Tombstone { tenant: usize, id: u8 },
    Decide { tenant: usize, words: Vec<usize> },
    Candidates { tenant: usize, id: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    let words = proptest::collection::vec(0..WORDS.len(), 1..7);
    prop_oneof![
        4 => (0..2usize, 0..12u8, words.clone()).prop_map(|(tenant, id, words)| Op::Upsert { tenant, id, words }),
        1 => (0..2usize, 0..12u8).prop_map(|(tenant, id)| Op::Tombstone { tenant, id }),
        2 => (0..2usize, words).prop_map(|(tenant, words)| Op::Decide { tenant, words }),
        1 => (0..2usize, 0..12u8).prop_map(|(tenant, id)| Op::Candidates { tenant, id }),
    ]
}

fn text(words: &[usize]) -> String {
    words.iter().map(|&w| WORDS[w]).collect::<Vec<_>>().join(" ")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn no_cross_tenant_candidates(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(dir.path(), EngineOptions { fsync: FsyncPolicy::Os, ..EngineOptions::default() }).unwrap();
        let names = ["ta", "tb"];
        for n in names {
            e.create_tenant(n, TenantConfig::new(Config::seed_example())).unwrap();
        }
        // Model: live ids per tenant, with their epochs.
        let mut live: [BTreeMap<String, u64>; 2] = Default::default();
        let mut epochs: [BTreeMap<String, u64>; 2] = Default::default();
        for op in ops {
            let (t, decision) = match op {
                Op::Upsert { tenant, id, words } => {
                    let item_id = format!("{}-{id}", names[tenant]);
                    let epoch = epochs[tenant].get(&item_id).copied().unwrap_or(0) + 1;
                    let mut item = Item::text(item_id.clone(), text(&words));
                    item.epoch = Some(epoch);
                    let o = e.upsert(names[tenant], item).unwrap();
                    epochs[tenant].insert(item_id.clone(), o.epoch);
                    live[tenant].insert(item_id, o.epoch);
                    (tenant, o.decision)
                }
                Op::Tombstone { tenant, id } => {
                    let item_id = format!("{}-{id}", names[tenant]);
                    match live[tenant].remove(&item_id) {
                        Some(ep) => { e.tombstone(names[tenant], &item_id, ep).unwrap(); }
                        None => prop_assert!(e.tombstone(names[tenant], &item_id, 9).is_err()),
                    }
                    continue;
                }
                Op::Decide { tenant, words } => (tenant, e.decide(names[tenant], &text(&words)).unwrap()),
                Op::Candidates { tenant, id } => {
                    let item_id = format!("{}-{id}", names[tenant]);
                    match e.candidates(names[tenant], Query::Item(&item_id), 100) {
                        Ok(d) => (tenant, d),
                        Err(err) => { prop_assert_eq!(err.code(), "item_not_found"); continue; }
                    }
                }
            };
            for c in &decision.candidates {
                prop_assert!(c.item_id.starts_with(names[t]), "{} leaked into {}", c.item_id, names[t]);
                prop_assert!(live[t].contains_key(&c.item_id), "{} is not live", c.item_id);
            }
        }
        for (i, n) in names.iter().enumerate() {
            let mut got = e.live_ids(n).unwrap();
            got.sort();
            prop_assert_eq!(got, live[i].keys().cloned().collect::<Vec<_>>());
        }
    }
}
