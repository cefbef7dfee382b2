//! One tenant's live index: its parameters, policy, band postings, exact-hash
//! table and item directory, and how each command changes them.
//!
//! Everything here is per tenant by construction: a [`Tenant`] owns its
//! [`LshIndex`] and slot numbers, and reads item records from the store only
//! under its own tenant id. There is no shared posting or id space, so no
//! code path can turn one tenant's item into another's candidate.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use neardup_core::lsh::QueryLimits;
use neardup_core::minhash::MinHasher;
use neardup_core::{Candidates, Fingerprint, Fingerprinter, LshIndex, Params, Policy};

use crate::command::{Command, IdemEntry};
use crate::decision::{decide, Decision, Evidence, MatchVerdict, ScoredCandidate};
use crate::error::{Error, ErrorKind, Result};
use crate::feedback::LabelEvent;
use crate::item::ItemRecord;
use crate::shadow::Shadow;
use crate::snapshot::{SnapshotHeader, TenantState};
use crate::store::{Store, StoreBatch};
use crate::tenant_config::TenantConfig;

#[derive(Debug)]
struct Slot {
    item_id: Arc<str>,
    content_hash: [u8; 16],
}

/// Counters reported by `stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TenantCounters {
    /// Upserts that wrote.
    pub upserts: u64,
    /// Queries (`decide`, `candidates`, and the decision inside each upsert).
    pub queries: u64,
    /// Queries whose candidate set was capped.
    pub cap_hits: u64,
    /// Queries that read a hot bucket partially.
    pub hot_bucket_hits: u64,
    /// Candidates verified exactly.
    pub candidates_verified: u64,
}

/// One tenant.
#[derive(Debug)]
pub(crate) struct Tenant {
    pub name: String,
    pub config: TenantConfig,
    pub previous: Option<TenantConfig>,
    pub params: Params,
    pub policy: Policy,
    fingerprinter: Fingerprinter,
    pub version: String,
    lsh: LshIndex,
    slots: Vec<Option<Slot>>,
    ids: HashMap<Arc<str>, u32>,
    by_hash: HashMap<[u8; 16], Vec<u32>>,
    pub live_items: u64,
    pub live_bytes: u64,
    pub stored_records: u64,
    pub tombstones: BTreeMap<String, u64>,
    idem: HashMap<String, IdemEntry>,
    idem_order: VecDeque<String>,
    pub labels: Vec<LabelEvent>,
    pub shadow: Option<Shadow>,
    pub counters: std::sync::Mutex<TenantCounters>,
}

/// Which parts of a command to apply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ApplyMode {
    /// Write the store (false when the store already holds this LSN).
    pub store: bool,
    /// Update the in-memory index (false during recovery; rebuilt after).
    pub index: bool,
}

impl Tenant {
    pub(crate) fn new(name: &str, config: TenantConfig) -> Result<Tenant> {
        let (params, policy) = config.resolve()?;
        let fingerprinter = Fingerprinter::new(params.clone())?;
        let lsh = LshIndex::new(params.lsh(), params.config().seed);
        Ok(Tenant {
            name: name.to_string(),
            version: params.fingerprint_version(),
            config,
            previous: None,
            params,
            policy,
            fingerprinter,
            lsh,
            slots: Vec::new(),
            ids: HashMap::new(),
            by_hash: HashMap::new(),
            live_items: 0,
            live_bytes: 0,
            stored_records: 0,
            tombstones: BTreeMap::new(),
            idem: HashMap::new(),
            idem_order: VecDeque::new(),
            labels: Vec::new(),
            shadow: None,
            counters: std::sync::Mutex::new(TenantCounters::default()),
        })
    }

    /// A tenant from a snapshot's state (items are loaded separately).
    pub(crate) fn from_state(name: &str, state: &TenantState) -> Result<Tenant> {
        let mut t = Tenant::new(name, TenantConfig::from_json(&state.config_json)?)?;
        t.previous = match &state.previous_json {
            Some(j) => Some(TenantConfig::from_json(j)?),
            None => None,
        };
        t.tombstones = state.tombstones.iter().cloned().collect();
        for e in &state.idempotency {
            t.remember(e.clone());
        }
        t.labels = state.labels.clone();
        Ok(t)
    }

    fn set_config(&mut self, config: TenantConfig) -> Result<()> {
        let (params, policy) = config.resolve()?;
        self.fingerprinter = Fingerprinter::new(params.clone())?;
        self.version = params.fingerprint_version();
        self.params = params;
        self.policy = policy;
        self.config = config;
        Ok(())
    }

    /// Fingerprints `content` under this tenant's parameters.
    pub(crate) fn fingerprint(&self, content: &str) -> Fingerprint {
        self.fingerprinter.clone().fingerprint(content)
    }

    /// The slot of a live item.
    pub(crate) fn slot_of(&self, item_id: &str) -> Option<u32> {
        self.ids.get(item_id).copied()
    }

    pub(crate) fn idempotent(&self, key: &str) -> Option<&IdemEntry> {
        self.idem.get(key)
    }

    fn remember(&mut self, e: IdemEntry) {
        let max = self.config.limits.max_idempotency_keys as usize;
        if self.idem.insert(e.key.clone(), e.clone()).is_none() {
            self.idem_order.push_back(e.key);
        }
        while self.idem_order.len() > max {
            if let Some(old) = self.idem_order.pop_front() {
                self.idem.remove(&old);
            }
        }
    }

    /// Rebuilds postings, hash table and directory from the store.
    pub(crate) fn load_index(&mut self, store: &dyn Store) -> Result<()> {
        let mut records = Vec::new();
        store.scan(&self.name, &mut |r| {
            records.push((r.lsn, r.item_id, r.content_hash, r.signature, r.content_bytes, r.tombstone));
            Ok(())
        })?;
        // Slots follow write order (LSN) so candidate tie-breaks by slot are
        // the same after a restart as before it.
        records.sort_by_key(|r| r.0);
        self.lsh = LshIndex::new(self.params.lsh(), self.params.config().seed);
        self.slots.clear();
        self.ids.clear();
        self.by_hash.clear();
        self.live_items = 0;
        self.live_bytes = 0;
        self.stored_records = records.len() as u64;
        let num_perm = self.params.config().num_perm as usize;
        for (_, item_id, hash, signature, bytes, tombstone) in records {
            if tombstone.is_some() {
                continue;
            }
            if !signature.is_empty() && signature.len() != num_perm {
                return Err(Error::corrupt(
                    "store record",
                    format!("signature of {item_id:?} has {} values, want {num_perm}", signature.len()),
                ));
            }
            self.insert_slot(item_id.into(), hash, &signature, bytes)?;
        }
        Ok(())
    }

    fn insert_slot(&mut self, item_id: Arc<str>, hash: [u8; 16], signature: &[u32], bytes: u64) -> Result<()> {
        let slot = u32::try_from(self.slots.len())
            .ok()
            .filter(|&s| s <= neardup_core::lsh::MAX_ITEM_ID)
            .ok_or_else(|| Error::state("slot space exhausted; run compaction to renumber"))?;
        if !signature.is_empty() {
            let keys = self.lsh.band_keys(signature)?;
            self.lsh.insert(slot, &keys)?;
        }
        self.by_hash.entry(hash).or_default().push(slot);
        self.ids.insert(Arc::clone(&item_id), slot);
        self.slots.push(Some(Slot { item_id, content_hash: hash }));
        self.live_items += 1;
        self.live_bytes += bytes;
        Ok(())
    }

    fn remove_slot(&mut self, old: &ItemRecord) -> Result<()> {
        let Some(slot) = self.ids.remove(old.item_id.as_str()) else {
            return Ok(());
        };
        if !old.signature.is_empty() {
            let keys = self.lsh.band_keys(&old.signature)?;
            self.lsh.remove(slot, &keys)?;
        }
        if let Some(v) = self.by_hash.get_mut(&old.content_hash) {
            v.retain(|&s| s != slot);
            if v.is_empty() {
                self.by_hash.remove(&old.content_hash);
            }
        }
        if let Some(s) = self.slots.get_mut(slot as usize) {
            *s = None;
        }
        self.live_items = self.live_items.saturating_sub(1);
        self.live_bytes = self.live_bytes.saturating_sub(old.content_bytes);
        Ok(())
    }

    fn limits(&self) -> QueryLimits {
        let c = self.params.config();
        QueryLimits { max_candidates: c.max_candidates as usize, max_bucket_read: c.max_bucket_read as usize }
    }

    /// Candidates for `fp`, verified exactly, turned into a decision.
    pub(crate) fn evaluate(&self, store: &dyn Store, fp: &Fingerprint, exclude: Option<u32>) -> Result<Decision> {
        let lsh = if fp.band_keys.is_empty() {
            Candidates::default()
        } else {
            self.lsh.query(&fp.band_keys, exclude, self.limits())?
        };
        let mut ids = lsh.ids.clone();
        let mut seen = lsh.distinct as u64;
        let cap = self.params.config().max_candidates as usize;
        if let Some(same) = self.by_hash.get(&fp.content_hash.0) {
            // Equal content is a duplicate whatever LSH found; a handful is
            // enough evidence, so a flood of copies cannot grow the work.
            for &s in same.iter().filter(|&&s| Some(s) != exclude).take(cap) {
                if !ids.iter().any(|&(id, _)| id == s) {
                    ids.push((s, 0));
                    seen += 1;
                }
            }
        }
        let mut scored = Vec::with_capacity(ids.len());
        for (slot, bands) in ids {
            let Some(Some(s)) = self.slots.get(slot as usize) else {
                continue;
            };
            let Some(rec) = store.get(&self.name, &s.item_id)? else {
                continue;
            };
            if !rec.is_live() {
                continue;
            }
            scored.push(score(&self.policy, fp, &rec, bands));
        }
        sort_best_first(&mut scored);
        if let Ok(mut c) = self.counters.lock() {
            c.queries += 1;
            c.candidates_verified += scored.len() as u64;
            c.cap_hits += u64::from(lsh.over_cap);
            c.hot_bucket_hits += u64::from(lsh.hot_buckets > 0);
        }
        Ok(decide(
            &self.policy,
            scored,
            Evidence {
                candidates_seen: seen,
                over_cap: lsh.over_cap,
                hot_buckets: lsh.hot_buckets,
                degraded_shingles: fp.degraded.map(|d| match d {
                    neardup_core::Degraded::TooManyShingles { count, max } => (count, max),
                }),
                method_version: self.version.clone(),
            },
        ))
    }

    /// Applies a logged command. `CreateTenant` is the engine's.
    pub(crate) fn apply(&mut self, store: &dyn Store, cmd: Command, lsn: u64, mode: ApplyMode) -> Result<()> {
        match cmd {
            Command::CreateTenant { .. } => Ok(()),
            Command::Upsert { mut record, idem, .. } => {
                record.lsn = lsn;
                if let Some(mut e) = idem {
                    e.outcome.lsn = lsn;
                    self.remember(*e);
                }
                self.tombstones.remove(&record.item_id);
                let old = if mode.store || mode.index { store.get(&self.name, &record.item_id)? } else { None };
                if mode.index {
                    if let Some(old) = old.as_ref().filter(|o| o.is_live()) {
                        self.remove_slot(old)?;
                    }
                    self.insert_slot(
                        record.item_id.as_str().into(),
                        record.content_hash,
                        &record.signature,
                        record.content_bytes,
                    )?;
                    if old.is_none() {
                        self.stored_records += 1;
                    }
                    if let Ok(mut c) = self.counters.lock() {
                        c.upserts += 1;
                    }
                }
                if mode.store {
                    store.apply(&self.name, StoreBatch { puts: vec![*record], deletes: vec![] }, lsn)?;
                }
                Ok(())
            }
            Command::Tombstone { item_id, epoch, .. } => {
                self.tombstones.insert(item_id.clone(), epoch);
                if mode.store || mode.index {
                    if let Some(mut rec) = store.get(&self.name, &item_id)? {
                        if mode.index && rec.is_live() {
                            self.remove_slot(&rec)?;
                        }
                        if mode.store {
                            rec.tombstone = Some(epoch);
                            store.apply(&self.name, StoreBatch { puts: vec![rec], deletes: vec![] }, lsn)?;
                        }
                    }
                }
                Ok(())
            }
            Command::Label { mut event, .. } => {
                event.lsn = lsn;
                self.labels.push(event);
                Ok(())
            }
            Command::Compact { .. } => {
                if mode.store {
                    let mut deletes = Vec::new();
                    store.scan(&self.name, &mut |r| {
                        if !r.is_live() {
                            deletes.push(r.item_id);
                        }
                        Ok(())
                    })?;
                    self.stored_records = self.stored_records.saturating_sub(deletes.len() as u64);
                    store.apply(&self.name, StoreBatch { puts: vec![], deletes }, lsn)?;
                }
                Ok(())
            }
            Command::Rebuild { config_json, previous_json, .. } => {
                let old = self.config.clone();
                let new = TenantConfig::from_json(&config_json)?;
                self.set_config(new.clone())?;
                self.previous = match previous_json {
                    Some(j) => Some(TenantConfig::from_json(&j)?),
                    None => None,
                };
                if mode.store {
                    let batch = recompute_all(store, &self.name, &old, &new, &mut self.fingerprinter)?;
                    store.apply(&self.name, batch, lsn)?;
                }
                if mode.index {
                    self.load_index(store)?;
                }
                Ok(())
            }
        }
    }

    /// The tenant's whole state, for a snapshot.
    pub(crate) fn state(&self, store: &dyn Store) -> Result<TenantState> {
        let mut items = Vec::new();
        store.scan(&self.name, &mut |r| {
            items.push(r);
            Ok(())
        })?;
        Ok(TenantState {
            config_json: self.config.to_json(),
            previous_json: self.previous.as_ref().map(TenantConfig::to_json),
            tombstones: self.tombstones.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            idempotency: self.idem_order.iter().filter_map(|k| self.idem.get(k).cloned()).collect(),
            labels: self.labels.clone(),
            items,
        })
    }

    pub(crate) fn header(&self, covered_lsn: u64, items: u64) -> SnapshotHeader {
        let c = self.params.config();
        SnapshotHeader {
            tenant: self.name.clone(),
            covered_lsn,
            normalization_version: c.normalizer.version().into(),
            feature_hash_version: neardup_core::hash::FEATURE_HASH_VERSION.into(),
            content_hash_version: neardup_core::hash::CONTENT_HASH_VERSION.into(),
            signature_version: format!("{}x{}", c.signature.version(), c.num_perm),
            lsh_version: format!("{}x{}", self.params.lsh().bands, self.params.lsh().rows),
            policy_version: format!("{}@v{}", self.policy.id, self.policy.version),
            fingerprint_version: self.version.clone(),
            items,
        }
    }

    /// Live item ids in slot (write) order.
    pub(crate) fn live_ids(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().flatten().map(|s| &*s.item_id)
    }

    /// Bucket statistics for `stats`.
    pub(crate) fn largest_bucket(&self) -> usize {
        self.lsh.largest_buckets(1).first().map(|b| b.2).unwrap_or(0)
    }

    /// Approximate resident bytes of the in-memory index (postings are
    /// estimated from the entry count; directory and hash table counted).
    pub(crate) fn resident_estimate(&self) -> u64 {
        let bands = u64::from(self.params.lsh().bands);
        let per_item = bands * 24 + 16 + 8 + 48 + 40;
        let ids: u64 = self.slots.iter().flatten().map(|s| s.item_id.len() as u64).sum();
        self.live_items * per_item + ids + self.slots.len() as u64 * 8
    }

    pub(crate) fn content_hash_of_slot(&self, slot: u32) -> Option<[u8; 16]> {
        self.slots.get(slot as usize)?.as_ref().map(|s| s.content_hash)
    }
}

/// Exact score of `fp` against a stored record.
pub(crate) fn score(policy: &Policy, fp: &Fingerprint, rec: &ItemRecord, bands: u16) -> ScoredCandidate {
    score_features(policy, &fp.features, fp.content_hash.0, &rec.features, rec.content_hash, &rec.item_id, bands)
}

pub(crate) fn score_features(
    policy: &Policy,
    features: &[u64],
    hash: [u8; 16],
    other: &[u64],
    other_hash: [u8; 16],
    item_id: &str,
    bands: u16,
) -> ScoredCandidate {
    let same = hash == other_hash;
    let score = if same {
        1.0
    } else if features.is_empty() || other.is_empty() {
        // An empty set (degraded or empty text) is only ever equal by hash.
        0.0
    } else {
        neardup_core::jaccard(features, other)
    };
    ScoredCandidate {
        item_id: item_id.to_string(),
        score,
        verdict: MatchVerdict::from(policy.classify(score, same)),
        same_content: same,
        bands_shared: bands,
    }
}

pub(crate) fn sort_best_first(v: &mut [ScoredCandidate]) {
    v.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.item_id.cmp(&b.item_id)));
}

/// Whether moving from `old` to `new` needs content, and if so whether every
/// live record has it. Checked before a rebuild is logged.
pub(crate) fn check_rebuild(store: &dyn Store, tenant: &str, old: &TenantConfig, new: &TenantConfig) -> Result<()> {
    if old.same_features(new) {
        return Ok(());
    }
    let mut missing = 0u64;
    store.scan(tenant, &mut |r| {
        if r.is_live() && r.content.is_none() {
            missing += 1;
        }
        Ok(())
    })?;
    if missing > 0 {
        return Err(Error::new(ErrorKind::RebuildNeedsContent {
            reason: format!(
                "the normalizer, shingling, seed or shingle cap changes, so features must be \
                 recomputed, and {missing} live items were stored without content"
            ),
        }));
    }
    Ok(())
}

/// Every live record recomputed under `new`; tombstoned records deleted.
fn recompute_all(
    store: &dyn Store,
    tenant: &str,
    old: &TenantConfig,
    new: &TenantConfig,
    fingerprinter: &mut Fingerprinter,
) -> Result<StoreBatch> {
    let same = old.same_features(new);
    let c = &new.index;
    let hasher = MinHasher::new(c.signature, c.num_perm as usize, c.seed)?;
    let mut batch = StoreBatch::default();
    let mut failure = None;
    store.scan(tenant, &mut |mut r| {
        if !r.is_live() {
            batch.deletes.push(r.item_id);
            return Ok(());
        }
        if same {
            r.signature = hasher.signature(&r.features);
        } else if let Some(content) = &r.content {
            let fp = fingerprinter.fingerprint(content);
            r.content_hash = fp.content_hash.0;
            r.tokens = fp.tokens;
            r.features = fp.features;
            r.signature = fp.signature;
            r.degraded_shingles = fp.degraded.map(|d| match d {
                neardup_core::Degraded::TooManyShingles { count, .. } => count,
            });
        } else if failure.is_none() {
            failure = Some(r.item_id.clone());
        }
        if !new.retain_content {
            r.content = None;
        }
        batch.puts.push(r);
        Ok(())
    })?;
    if let Some(id) = failure {
        return Err(Error::new(ErrorKind::RebuildNeedsContent {
            reason: format!("item {id:?} has no stored content"),
        }));
    }
    Ok(batch)
}
