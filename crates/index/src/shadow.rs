//! The shadow index: the tenant's items indexed under new parameters, in
//! memory, answering every query alongside the live index so the two can be
//! compared before the new parameters are promoted.
//!
//! The shadow is derived state and is not logged: it is lost on restart and
//! rebuilt on request. Promotion is a logged rebuild of the live index under
//! the shadow's configuration; rollback is a logged rebuild under the
//! previous one.

use std::collections::{BTreeMap, HashMap};

use neardup_core::lsh::QueryLimits;
use neardup_core::{Fingerprint, Fingerprinter, LshIndex, Params, Policy};
use serde::{Deserialize, Serialize};

use crate::decision::{decide, Decision, DecisionState, Evidence, MatchVerdict};
use crate::error::{Error, ErrorKind, Result};
use crate::item::ItemRecord;
use crate::tenant::{score_features, sort_best_first};
use crate::tenant_config::TenantConfig;

/// Disagreement between the live and the shadow index, as figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShadowReport {
    /// The shadow's fingerprint version.
    pub shadow_version: String,
    /// The live index's fingerprint version.
    pub live_version: String,
    /// Items in the shadow.
    pub items: u64,
    /// Queries answered by both.
    pub queries: u64,
    /// Queries whose decision state differed.
    pub decision_disagreements: u64,
    /// Queries whose set of matches (verified at or above the similar
    /// threshold) differed.
    pub match_set_disagreements: u64,
    /// Matches only the live index found.
    pub live_only_matches: u64,
    /// Matches only the shadow found.
    pub shadow_only_matches: u64,
    /// Counts per `live_state->shadow_state` transition where they differ.
    pub transitions: BTreeMap<String, u64>,
}

impl ShadowReport {
    /// Fraction of queries whose decision differed (0 when none were asked).
    pub fn decision_disagreement_rate(&self) -> f64 {
        if self.queries == 0 {
            0.0
        } else {
            self.decision_disagreements as f64 / self.queries as f64
        }
    }
}

#[derive(Debug)]
struct Entry {
    item_id: String,
    hash: [u8; 16],
    features: Vec<u64>,
    band_keys: Vec<u64>,
}

/// A tenant's index under candidate parameters.
#[derive(Debug)]
pub(crate) struct Shadow {
    pub config: TenantConfig,
    params: Params,
    policy: Policy,
    fingerprinter: Fingerprinter,
    lsh: LshIndex,
    entries: Vec<Option<Entry>>,
    ids: HashMap<String, u32>,
    by_hash: HashMap<[u8; 16], Vec<u32>>,
    version: String,
    items: u64,
    pub report: std::sync::Mutex<ShadowReport>,
}

impl Shadow {
    /// Builds the shadow from live `records` (in write order).
    pub(crate) fn build(
        config: TenantConfig,
        live: &TenantConfig,
        live_version: &str,
        records: Vec<ItemRecord>,
    ) -> Result<Shadow> {
        let (params, policy) = config.resolve()?;
        let fingerprinter = Fingerprinter::new(params.clone())?;
        let same = live.same_features(&config);
        let mut s = Shadow {
            version: params.fingerprint_version(),
            items: 0,
            report: std::sync::Mutex::new(ShadowReport {
                shadow_version: params.fingerprint_version(),
                live_version: live_version.to_string(),
                ..ShadowReport::default()
            }),
            lsh: LshIndex::new(params.lsh(), params.config().seed),
            config,
            params,
            policy,
            fingerprinter,
            entries: Vec::new(),
            ids: HashMap::new(),
            by_hash: HashMap::new(),
        };
        for r in records.into_iter().filter(ItemRecord::is_live) {
            let fp = if same {
                let c = s.params.config();
                let hasher = neardup_core::minhash::MinHasher::new(c.signature, c.num_perm as usize, c.seed)?;
                let signature = hasher.signature(&r.features);
                let band_keys = s.lsh.band_keys(&signature)?;
                Fingerprint {
                    content_hash: neardup_core::ContentHash(r.content_hash),
                    tokens: r.tokens,
                    features: r.features,
                    band_keys: if signature.is_empty() { Vec::new() } else { band_keys },
                    signature,
                    degraded: None,
                }
            } else {
                let content = r.content.as_deref().ok_or_else(|| {
                    Error::new(ErrorKind::RebuildNeedsContent {
                        reason: format!("item {:?} has no stored content", r.item_id),
                    })
                })?;
                s.fingerprinter.fingerprint(content)
            };
            s.insert_fp(&r.item_id, fp)?;
        }
        Ok(s)
    }

    fn insert_fp(&mut self, item_id: &str, fp: Fingerprint) -> Result<()> {
        self.remove(item_id)?;
        let slot = u32::try_from(self.entries.len()).map_err(|_| Error::state("shadow slot space exhausted"))?;
        if !fp.band_keys.is_empty() {
            self.lsh.insert(slot, &fp.band_keys)?;
        }
        self.by_hash.entry(fp.content_hash.0).or_default().push(slot);
        self.ids.insert(item_id.to_string(), slot);
        self.entries.push(Some(Entry {
            item_id: item_id.to_string(),
            hash: fp.content_hash.0,
            features: fp.features,
            band_keys: fp.band_keys,
        }));
        self.items += 1;
        Ok(())
    }

    /// Indexes new content for `item_id` (replacing any previous version).
    pub(crate) fn insert(&mut self, item_id: &str, content: &str) -> Result<()> {
        let fp = self.fingerprinter.fingerprint(content);
        self.insert_fp(item_id, fp)
    }

    /// Removes `item_id`.
    pub(crate) fn remove(&mut self, item_id: &str) -> Result<()> {
        let Some(slot) = self.ids.remove(item_id) else {
            return Ok(());
        };
        if let Some(e) = self.entries.get_mut(slot as usize).and_then(Option::take) {
            if !e.band_keys.is_empty() {
                self.lsh.remove(slot, &e.band_keys)?;
            }
            if let Some(v) = self.by_hash.get_mut(&e.hash) {
                v.retain(|&s| s != slot);
            }
            self.items = self.items.saturating_sub(1);
        }
        Ok(())
    }

    /// The shadow's decision for `content`, excluding `exclude` (the item itself).
    pub(crate) fn evaluate(&self, content: &str, exclude: Option<&str>) -> Result<Decision> {
        let fp = self.fingerprinter.clone().fingerprint(content);
        let exclude = exclude.and_then(|id| self.ids.get(id).copied());
        let c = self.params.config();
        let limits =
            QueryLimits { max_candidates: c.max_candidates as usize, max_bucket_read: c.max_bucket_read as usize };
        let lsh = if fp.band_keys.is_empty() {
            neardup_core::Candidates::default()
        } else {
            self.lsh.query(&fp.band_keys, exclude, limits)?
        };
        let mut ids = lsh.ids.clone();
        if let Some(same) = self.by_hash.get(&fp.content_hash.0) {
            for &s in same.iter().filter(|&&s| Some(s) != exclude).take(limits.max_candidates) {
                if !ids.iter().any(|&(id, _)| id == s) {
                    ids.push((s, 0));
                }
            }
        }
        let mut scored: Vec<_> = ids
            .iter()
            .filter_map(|&(slot, bands)| {
                let e = self.entries.get(slot as usize)?.as_ref()?;
                Some(score_features(
                    &self.policy,
                    &fp.features,
                    fp.content_hash.0,
                    &e.features,
                    e.hash,
                    &e.item_id,
                    bands,
                ))
            })
            .collect();
        sort_best_first(&mut scored);
        Ok(decide(
            &self.policy,
            scored,
            Evidence {
                candidates_seen: lsh.distinct as u64,
                over_cap: lsh.over_cap,
                hot_buckets: lsh.hot_buckets,
                degraded_shingles: fp.degraded.map(|d| match d {
                    neardup_core::Degraded::TooManyShingles { count, max } => (count, max),
                }),
                method_version: self.version.clone(),
            },
        ))
    }

    /// Records how the two answers to one query differ.
    pub(crate) fn observe(&self, live: &Decision, shadow: &Decision) {
        let matches = |d: &Decision| -> Vec<String> {
            let mut v: Vec<String> = d
                .candidates
                .iter()
                .filter(|c| c.verdict != MatchVerdict::Different)
                .map(|c| c.item_id.clone())
                .collect();
            v.sort();
            v
        };
        let (l, s) = (matches(live), matches(shadow));
        let Ok(mut r) = self.report.lock() else {
            return;
        };
        r.queries += 1;
        if live.state != shadow.state {
            r.decision_disagreements += 1;
            let key = format!("{}->{}", live.state.as_str(), shadow.state.as_str());
            *r.transitions.entry(key).or_default() += 1;
        }
        if l != s {
            r.match_set_disagreements += 1;
            r.live_only_matches += l.iter().filter(|x| s.binary_search(x).is_err()).count() as u64;
            r.shadow_only_matches += s.iter().filter(|x| l.binary_search(x).is_err()).count() as u64;
        }
    }
}

impl Shadow {
    /// The current figures.
    pub(crate) fn report(&self) -> ShadowReport {
        let mut r = self.report.lock().map(|r| r.clone()).unwrap_or_default();
        r.items = self.items;
        r
    }
}

/// Whether a decision state would be destructive under the live policy; used
/// in docs and tests to weigh disagreements.
pub fn is_destructive(state: DecisionState) -> bool {
    matches!(state, DecisionState::Duplicate | DecisionState::NearDuplicate)
}
