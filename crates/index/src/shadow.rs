//! The shadow index: the tenant's items indexed under new parameters, in
//! memory, answering every query alongside the live index so the two can be
//! compared before the new parameters are promoted.
//!
//! The shadow is derived state and is not logged: it is lost on restart and
//! rebuilt on request. Promotion is a logged rebuild of the live index under
//! the shadow's configuration; rollback is a logged rebuild under the
//! previous one.

use std::collections::{BTreeMap, HashMap};

use neardup_core::{Fingerprint, Fingerprinter, MemoryIndex, Policy};
use serde::{Deserialize, Serialize};

use crate::decision::{decide, sort_best_first, Decision, DecisionState, Evidence, MatchVerdict, ScoredCandidate};
use crate::error::{Error, ErrorKind, Result};
use crate::item::ItemRecord;
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

/// A tenant's index under candidate parameters: the core's
/// [`MemoryIndex`] (the same candidate index as the live tenant's, with
/// features in memory) and the item ids of its slots.
#[derive(Debug)]
pub(crate) struct Shadow {
    pub config: TenantConfig,
    policy: Policy,
    fingerprinter: Fingerprinter,
    index: MemoryIndex,
    /// Item id of each slot of `index` (`None` once removed).
    slots: Vec<Option<String>>,
    ids: HashMap<String, u32>,
    version: String,
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
            report: std::sync::Mutex::new(ShadowReport {
                shadow_version: params.fingerprint_version(),
                live_version: live_version.to_string(),
                ..ShadowReport::default()
            }),
            index: MemoryIndex::new(params),
            config,
            policy,
            fingerprinter,
            slots: Vec::new(),
            ids: HashMap::new(),
        };
        for r in records.into_iter().filter(ItemRecord::is_live) {
            let fp = if same {
                s.fingerprinter.rebuild(r.stored_fingerprint(false))?
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
        self.remove(item_id);
        let slot = self.index.insert(fp)?;
        debug_assert_eq!(slot as usize, self.slots.len());
        self.ids.insert(item_id.to_string(), slot);
        self.slots.push(Some(item_id.to_string()));
        Ok(())
    }

    /// Indexes new content for `item_id` (replacing any previous version).
    pub(crate) fn insert(&mut self, item_id: &str, content: &str) -> Result<()> {
        let fp = self.fingerprinter.fingerprint(content);
        self.insert_fp(item_id, fp)
    }

    /// Removes `item_id`.
    pub(crate) fn remove(&mut self, item_id: &str) {
        if let Some(slot) = self.ids.remove(item_id) {
            self.index.remove(slot);
            self.slots[slot as usize] = None;
        }
    }

    /// The shadow's decision for `content`, excluding `exclude` (the item itself).
    pub(crate) fn evaluate(&self, content: &str, exclude: Option<&str>) -> Result<Decision> {
        let fp = self.fingerprinter.clone().fingerprint(content);
        let exclude = exclude.and_then(|id| self.ids.get(id).copied());
        let set = self.index.candidates(&fp, exclude)?;
        let mut scored: Vec<ScoredCandidate> = self
            .index
            .verify(&fp, &set.ids, 0.0)
            .into_iter()
            .filter_map(|m| {
                Some(ScoredCandidate {
                    item_id: self.slots.get(m.id as usize)?.clone()?,
                    score: m.score,
                    verdict: MatchVerdict::from(self.policy.classify(m.score, m.same_content)),
                    same_content: m.same_content,
                    bands_shared: m.bands,
                })
            })
            .collect();
        sort_best_first(&mut scored);
        Ok(decide(&self.policy, scored, Evidence::of(&set, &fp, &self.version)))
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
        r.items = self.index.len() as u64;
        r
    }
}

/// Whether a decision state would be destructive under the live policy; used
/// in docs and tests to weigh disagreements.
pub fn is_destructive(state: DecisionState) -> bool {
    matches!(state, DecisionState::Duplicate | DecisionState::NearDuplicate)
}
