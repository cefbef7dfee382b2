//! One tenant's live index: its parameters, policy, candidate index and
//! item directory; how each command changes them (`apply`), and which
//! command an upsert becomes (`plan`).
//!
//! Everything here is per tenant by construction: a [`Tenant`] owns its
//! [`CandidateIndex`] and slot numbers, and reads item records from the store
//! only under its own tenant id. There is no shared posting or id space, so
//! no code path can turn one tenant's item into another's candidate.

mod directory;
mod plan;
mod rebuild;

use std::collections::{BTreeMap, HashMap, VecDeque};

use neardup_core::{CandidateIndex, Fingerprint, Fingerprinter, ItemKeys, Params, Policy};

use self::directory::Directory;
use crate::command::{Command, IdemEntry};
use crate::decision::{decide, sort_best_first, Decision, Evidence, ScoredCandidate, Unverified};
use crate::error::{Error, Result};
use crate::event::EventRing;
use crate::feedback::LabelEvent;
use crate::item::{FeaturesAt, ItemRecord};
use crate::shadow::Shadow;
use crate::snapshot::{ImageHeader, ImageRowOwned, SnapshotHeader, TenantMeta};
use crate::store::{Store, StoreBatch};
use crate::tenant_config::TenantConfig;

pub(crate) use plan::{Plan, Prefingerprinter, Prepared};
pub(crate) use rebuild::check_rebuild;

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
    /// Bucket lookups the membership screen answered without reading a
    /// table (0 without a screen).
    #[serde(default)]
    pub screened_out: u64,
    /// Bucket lookups the screen let through that found no bucket (its
    /// false positives).
    #[serde(default)]
    pub screen_false_positives: u64,
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
    index: CandidateIndex,
    /// Item id of each slot of `index`; the live ids' slots.
    dir: Directory,
    pub live_items: u64,
    pub live_bytes: u64,
    pub stored_records: u64,
    pub tombstones: BTreeMap<String, u64>,
    idem: HashMap<String, IdemEntry>,
    idem_order: VecDeque<String>,
    pub labels: Vec<LabelEvent>,
    pub shadow: Option<Shadow>,
    pub counters: std::sync::Mutex<TenantCounters>,
    /// The log position of the last command of this tenant applied (its
    /// snapshot's position after a restart). In cluster mode, the position
    /// a proposal must follow for the tenant's state to be the one it was
    /// planned against.
    pub applied_lsn: u64,
    /// Cluster mode, after a restart: the store already holds this tenant's
    /// commands up to here (its index was read from the store), so
    /// replaying them from the stream updates only the small state.
    pub store_ahead: u64,
    /// Cluster mode: the most recent log positions of this tenant whose
    /// command was refused (it was planned against a state another
    /// command had already changed), so its proposer plans again.
    pub refused: VecDeque<u64>,
    /// The tenant's recent events, for the feed (see `crate::event`).
    pub events: EventRing,
}

/// Where an image's rows go, one call per row.
pub(crate) type RowSink<'a> = &'a mut dyn FnMut(ImageRowOwned<'_>) -> Result<()>;

/// A frozen copy of a tenant's candidate index and directory (see
/// [`Tenant::image`]).
pub(crate) struct TenantImage {
    index: neardup_core::IndexView,
    dir: directory::DirectoryView,
    pub header: ImageHeader,
}

impl TenantImage {
    /// Calls `f` with every live item's row, in slot order.
    pub(crate) fn rows(&self, f: &mut dyn FnMut(ImageRowOwned<'_>) -> Result<()>) -> Result<()> {
        for slot in 0..self.index.slots() {
            let Some(r) = self.index.row(slot) else { continue };
            let id = self.dir.id(slot).ok_or_else(|| Error::state("directory shorter than the index"))?;
            f(ImageRowOwned { item_id: id, content_hash: r.content_hash.0, folded: r.folded, sketch: r.sketch })?;
        }
        Ok(())
    }
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
        let index = CandidateIndex::for_params(&params);
        Ok(Tenant {
            name: name.to_string(),
            version: params.fingerprint_version(),
            config,
            previous: None,
            params,
            policy,
            fingerprinter,
            index,
            dir: Directory::new(),
            live_items: 0,
            live_bytes: 0,
            stored_records: 0,
            tombstones: BTreeMap::new(),
            idem: HashMap::new(),
            idem_order: VecDeque::new(),
            labels: Vec::new(),
            shadow: None,
            counters: std::sync::Mutex::new(TenantCounters::default()),
            applied_lsn: 0,
            store_ahead: 0,
            refused: VecDeque::new(),
            events: EventRing::default(),
        })
    }

    /// A tenant from a snapshot's state (items are loaded separately).
    pub(crate) fn from_meta(name: &str, state: &TenantMeta) -> Result<Tenant> {
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

    /// A stored item's fingerprint under this tenant's parameters, its
    /// features derived again first if the store left them out.
    pub(crate) fn stored_fingerprint(&self, r: &mut ItemRecord) -> Result<Fingerprint> {
        if r.features_at == FeaturesAt::Elided {
            if let Some(fp) = r.derive_features(&mut self.fingerprinter.clone())? {
                return Ok(fp);
            }
        }
        Ok(self.fingerprinter.rebuild(r.stored_fingerprint(true))?)
    }

    /// A copy of this tenant's fingerprinter, for work done outside its lock.
    pub(crate) fn fingerprinter(&self) -> Fingerprinter {
        self.fingerprinter.clone()
    }

    /// Gives a record read from the store its features again, if the
    /// store left them out (see [`FeaturesAt`]). Every read that compares,
    /// counts or exports features goes through here.
    /// The fingerprinter is copied only when there is something to derive:
    /// this runs for every verified candidate.
    pub(crate) fn complete(&self, r: &mut ItemRecord) -> Result<()> {
        if r.features_at == FeaturesAt::Elided {
            r.derive_features(&mut self.fingerprinter.clone())?;
        }
        Ok(())
    }

    /// The slot of a live item.
    pub(crate) fn slot_of(&self, item_id: &str) -> Option<u32> {
        self.dir.slot_of(item_id)
    }

    pub(crate) fn idempotent(&self, key: &str) -> Option<&IdemEntry> {
        self.idem.get(key)
    }

    /// Idempotency keys remembered now.
    pub(crate) fn idempotency_keys(&self) -> usize {
        self.idem.len()
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

    /// Rebuilds the candidate index and directory from the store: each
    /// live record's signature is recomputed from its features (stored
    /// records carry none), reduced to folded keys and a sketch, and the
    /// rows enter the index in write (LSN) order, so candidate tie-breaks by
    /// slot are the same after a restart as before it. Holds about 250 bytes
    /// a record while sorting; a checkpoint's index image avoids all of it.
    pub(crate) fn load_index(&mut self, store: &dyn Store) -> Result<()> {
        struct Row {
            lsn: u64,
            item_id: String,
            hash: [u8; 16],
            folded: Vec<u32>,
            sketch: Vec<u8>,
            bytes: u64,
        }
        let mut rows = Vec::new();
        let mut stored = 0u64;
        let fresh = CandidateIndex::for_params(&self.params);
        let mut fingerprinter = self.fingerprinter.clone();
        store.scan(&self.name, None, &mut |mut r| {
            stored += 1;
            if r.is_live() {
                let fp = match r.derive_features(&mut fingerprinter)? {
                    Some(fp) => fp,
                    None => fingerprinter
                        .rebuild(r.stored_fingerprint(true))
                        .map_err(|e| Error::corrupt("store record", format!("item {:?}: {e}", r.item_id)))?,
                };
                let (folded, sketch) = fresh.row_of(&fp.band_keys, &fp.signature);
                rows.push(Row {
                    lsn: r.lsn,
                    item_id: r.item_id,
                    hash: r.content_hash,
                    folded,
                    sketch,
                    bytes: r.content_bytes,
                });
            }
            Ok(std::ops::ControlFlow::Continue(()))
        })?;
        rows.sort_by_key(|r| r.lsn);
        self.index = fresh;
        self.dir = Directory::new();
        self.index.reserve(rows.len());
        self.dir.reserve(rows.len());
        self.live_items = 0;
        self.live_bytes = 0;
        self.stored_records = stored;
        let mut loader = self.index.loader();
        for r in rows {
            let slot = loader.insert_row(&r.folded, &r.sketch, neardup_core::ContentHash(r.hash))?;
            self.dir.insert(&r.item_id, slot);
            self.live_items += 1;
            self.live_bytes += r.bytes;
        }
        Ok(())
    }

    fn insert_slot(
        &mut self,
        item_id: &str,
        hash: [u8; 16],
        band_keys: &[u64],
        signature: &[u32],
        bytes: u64,
    ) -> Result<()> {
        let keys = ItemKeys { band_keys, content_hash: neardup_core::ContentHash(hash), signature };
        let slot = self.index.insert(keys).map_err(|e| match e.kind() {
            neardup_core::ErrorKind::LimitExceeded { .. } => {
                Error::state("slot space exhausted; run compaction to renumber")
            }
            _ => Error::from(e),
        })?;
        self.dir.insert(item_id, slot);
        self.live_items += 1;
        self.live_bytes += bytes;
        Ok(())
    }

    fn remove_slot(&mut self, old: &ItemRecord) {
        let Some(slot) = self.dir.remove(&old.item_id) else {
            return;
        };
        self.index.remove(slot);
        self.live_items = self.live_items.saturating_sub(1);
        self.live_bytes = self.live_bytes.saturating_sub(old.content_bytes);
    }

    /// The limits of a candidate query: the parameters', judged at the
    /// lowest score the policy acts on.
    fn query_limits(&self) -> neardup_core::QueryLimits {
        let limits = self.params.query_limits();
        neardup_core::QueryLimits { threshold: limits.threshold.min(self.policy.threshold_similar), ..limits }
    }

    /// Candidates for `fp`, verified exactly, turned into a decision.
    pub(crate) fn evaluate(&self, store: &dyn Store, fp: &Fingerprint, exclude: Option<u32>) -> Result<Decision> {
        let set = self.index.candidates(fp.into(), exclude, self.query_limits())?;
        let mut scored = Vec::with_capacity(set.ids.len());
        let mut unverified: Option<Unverified> = None;
        for c in &set.ids {
            let Some(item_id) = self.dir.id(c.id) else {
                continue;
            };
            let rec = match store.get(&self.name, item_id) {
                Ok(Some(rec)) => rec,
                Ok(None) => continue,
                // The feature store cannot be read: exact-hash-only mode.
                // The index keeps each live item's content hash in memory,
                // so a copy is still found; anything else stays unverified
                // and the decision says so. A record that reads but is
                // corrupt or fails its seal is an error, not an outage.
                Err(e)
                    if matches!(
                        e.kind(),
                        crate::error::ErrorKind::Store { .. } | crate::error::ErrorKind::Io { .. }
                    ) =>
                {
                    let u = unverified.get_or_insert_with(|| Unverified { count: 0, cause: e.to_string() });
                    u.count += 1;
                    if self.content_hash_of_slot(c.id) == Some(fp.content_hash.0) {
                        scored.push(ScoredCandidate::same_content(&self.policy, item_id, c.bands));
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            if !rec.is_live() {
                continue;
            }
            let mut rec = rec;
            self.complete(&mut rec)?;
            let hash = neardup_core::ContentHash(rec.content_hash);
            scored.push(ScoredCandidate::verify(
                &self.policy,
                &fp.features,
                &fp.content_hash,
                &rec.features,
                &hash,
                &rec.item_id,
                c.bands,
            ));
        }
        sort_best_first(&mut scored);
        if let Ok(mut c) = self.counters.lock() {
            c.queries += 1;
            c.candidates_verified += scored.len() as u64;
            c.cap_hits += u64::from(set.over_cap);
            c.hot_bucket_hits += u64::from(set.hot_buckets > 0);
            c.screened_out += u64::from(set.screened_out);
            c.screen_false_positives += u64::from(set.screen_false_positives);
        }
        Ok(decide(&self.policy, scored, Evidence { unverified, ..Evidence::of(&set, fp, &self.version) }))
    }

    /// Applies a logged command. `CreateTenant` is the engine's.
    /// Its events join the tenant's feed once it applied.
    pub(crate) fn apply(&mut self, store: &dyn Store, cmd: Command, lsn: u64, mode: ApplyMode) -> Result<()> {
        let events = crate::event::events_of(lsn, &cmd);
        self.apply_command(store, cmd, lsn, mode)?;
        self.applied_lsn = self.applied_lsn.max(lsn);
        self.events.push(lsn, events);
        Ok(())
    }

    /// Applies an upsert's record to the tenant (index, idempotency keys,
    /// tombstones) and returns it as the store keeps it, for the caller to
    /// write.
    fn apply_upsert(
        &mut self,
        store: &dyn Store,
        mut record: ItemRecord,
        idem: Option<Box<IdemEntry>>,
        lsn: u64,
        mode: ApplyMode,
    ) -> Result<ItemRecord> {
        record.lsn = lsn;
        record.note = None;
        if let Some(mut e) = idem {
            e.outcome.lsn = lsn;
            self.remember(*e);
        }
        self.tombstones.remove(&record.item_id);
        let old = if mode.store || mode.index { store.get(&self.name, &record.item_id)? } else { None };
        if mode.index {
            if let Some(old) = old.as_ref().filter(|o| o.is_live()) {
                self.remove_slot(old);
            }
            // The logged record carries its signature (stored ones do not),
            // and the index takes only band keys and the sketch from it: its
            // features are not copied.
            let mut stored = record.stored_fingerprint_without_features();
            if stored.signature.is_none() {
                stored.features = record.features.clone();
            }
            let fp = self.fingerprinter.rebuild(stored)?;
            let r = &record;
            self.insert_slot(&r.item_id, r.content_hash, &fp.band_keys, &fp.signature, r.content_bytes)?;
            if old.is_none() {
                self.stored_records += 1;
            }
            if let Ok(mut c) = self.counters.lock() {
                c.upserts += 1;
            }
        }
        // The signature is derived data: recomputed from the features when
        // needed, never stored (512 bytes an item). So are the features of
        // a retained text: made under these parameters from this content
        // (the plan fingerprinted it, or the log replays it under the
        // parameters it was made with), the store may leave them out.
        record.signature = Vec::new();
        if record.content.is_some() && record.features_at == FeaturesAt::Here {
            record.features_at = FeaturesAt::Derivable;
        }
        Ok(record)
    }

    fn apply_command(&mut self, store: &dyn Store, cmd: Command, lsn: u64, mode: ApplyMode) -> Result<()> {
        match cmd {
            Command::CreateTenant { .. } => Ok(()),
            Command::Upsert { record, idem, .. } => {
                let record = self.apply_upsert(store, *record, idem, lsn, mode)?;
                if mode.store {
                    store.apply(&self.name, StoreBatch { puts: vec![record], deletes: vec![] }, lsn)?;
                }
                Ok(())
            }
            Command::Upserts { items, .. } => {
                let mut puts = Vec::with_capacity(items.len());
                for u in items {
                    puts.push(self.apply_upsert(store, *u.record, u.idem, lsn, mode)?);
                }
                // One store write for the entry: a crash never leaves part
                // of it stored (the store's applied position would then
                // skip the rest at replay).
                if mode.store {
                    store.apply(&self.name, StoreBatch { puts, deletes: vec![] }, lsn)?;
                }
                Ok(())
            }
            Command::Tombstone { item_id, epoch, .. } => {
                self.tombstones.insert(item_id.clone(), epoch);
                if mode.store || mode.index {
                    if let Some(mut rec) = store.get(&self.name, &item_id)? {
                        if mode.index && rec.is_live() {
                            self.remove_slot(&rec);
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
            Command::Unfence { item_id, .. } => {
                self.tombstones.remove(&item_id);
                Ok(())
            }
            Command::UpsertLean { .. }
            | Command::UpsertsLean { .. }
            | Command::UpsertNoted { .. }
            | Command::UpsertsNoted { .. } => {
                Err(Error::state("a lean or noted log form reached the tenant undecoded"))
            }
            Command::Compact { .. } => {
                if mode.store {
                    let mut deletes = Vec::new();
                    store.scan(&self.name, None, &mut |r| {
                        if !r.is_live() {
                            deletes.push(r.item_id);
                        }
                        Ok(std::ops::ControlFlow::Continue(()))
                    })?;
                    self.stored_records = self.stored_records.saturating_sub(deletes.len() as u64);
                    store.apply(&self.name, StoreBatch { puts: vec![], deletes }, lsn)?;
                }
                Ok(())
            }
            Command::Rebuild { config_json, previous_json, .. } => {
                let new = TenantConfig::from_json(&config_json)?;
                let previous = match previous_json {
                    Some(j) => Some(TenantConfig::from_json(&j)?),
                    None => None,
                };
                // The store first: if recomputing or writing fails, the
                // tenant keeps its configuration (nothing half-changed).
                if mode.store {
                    let mut fingerprinter = Fingerprinter::new(new.resolve()?.0)?;
                    let batch = rebuild::recompute_all(store, &self.name, &self.config, &new, &mut fingerprinter)?;
                    store.apply(&self.name, batch, lsn)?;
                }
                self.set_config(new)?;
                self.previous = previous;
                if mode.index {
                    self.load_index(store)?;
                }
                Ok(())
            }
        }
    }

    /// The tenant's state besides its records, for a snapshot.
    pub(crate) fn meta(&self) -> Result<TenantMeta> {
        Ok(TenantMeta {
            config_json: self.config.to_json()?,
            previous_json: self.previous.as_ref().map(TenantConfig::to_json).transpose()?,
            tombstones: self.tombstones.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            idempotency: self.idem_order.iter().filter_map(|k| self.idem.get(k).cloned()).collect(),
            labels: self.labels.clone(),
        })
    }

    pub(crate) fn header(&self, covered_lsn: u64, items: u64) -> SnapshotHeader {
        let c = self.params.config();
        SnapshotHeader {
            tenant: self.name.clone(),
            covered_lsn,
            normalization_version: c.normalizer.version().into(),
            feature_hash_version: neardup_core::FEATURE_HASH_VERSION.into(),
            content_hash_version: neardup_core::CONTENT_HASH_VERSION.into(),
            signature_version: format!("{}x{}", c.signature.version(), c.num_perm),
            lsh_version: format!("{}x{}", self.params.lsh().bands, self.params.lsh().rows),
            policy_version: format!("{}@v{}", self.policy.id, self.policy.version),
            fingerprint_version: self.version.clone(),
            items,
        }
    }

    /// Live item ids in slot (write) order.
    pub(crate) fn live_ids(&self) -> impl Iterator<Item = &str> {
        (0..self.dir.slots()).filter(|&s| self.index.is_live(s)).filter_map(|s| self.dir.id(s))
    }

    /// Bucket statistics for `stats`.
    pub(crate) fn bucket_sizes(&self) -> Vec<u64> {
        self.index.bucket_size_histogram()
    }

    pub(crate) fn largest_bucket(&self) -> usize {
        self.index.largest_buckets(1).first().map(|b| b.2).unwrap_or(0)
    }

    /// Resident bytes of the in-memory index, counted from capacities: the
    /// candidate index (postings, keys, sketches, hashes, flags) and the
    /// item directory (id bytes, locations, the id → slot map).
    pub(crate) fn resident_estimate(&self) -> u64 {
        self.index.heap_bytes() + self.dir.heap_bytes()
    }

    /// A consistent copy of the candidate index and directory, for an index
    /// image (cheap: shared pages; taken under the tenant's lock).
    pub(crate) fn image(&self) -> TenantImage {
        TenantImage {
            index: self.index.view(),
            dir: self.dir.view(),
            header: ImageHeader {
                rows: self.index.len() as u64,
                bands: self.params.lsh().bands,
                sketch_len: self.index.sketch_len() as u32,
                live_bytes: self.live_bytes,
                stored_records: self.stored_records,
            },
        }
    }

    /// Replaces the candidate index and directory with an image's rows
    /// (the engine streams them in); checks the layout and the row count.
    pub(crate) fn load_image(
        &mut self,
        h: &ImageHeader,
        frames: &mut dyn FnMut(RowSink<'_>) -> Result<u64>,
    ) -> Result<()> {
        if h.bands != self.params.lsh().bands {
            return Err(Error::corrupt("index image", "made under another banding"));
        }
        self.index = CandidateIndex::for_params(&self.params);
        self.dir = Directory::new();
        self.live_items = 0;
        let (index, dir) = (&mut self.index, &mut self.dir);
        if h.sketch_len as usize != index.sketch_len() {
            return Err(Error::corrupt("index image", "made with another sketch width"));
        }
        // Sized once for the rows the header announces (no rehash on the
        // way), trusting a damaged header no further than the tenant's own
        // item limit.
        let expected = usize::try_from(h.rows.min(self.config.limits.max_items)).unwrap_or(0);
        index.reserve(expected);
        dir.reserve(expected);
        let mut loader = index.loader();
        let rows = frames(&mut |row| {
            let slot = loader.insert_row(row.folded, row.sketch, neardup_core::ContentHash(row.content_hash))?;
            if dir.slot_of(row.item_id).is_some() {
                return Err(Error::corrupt("index image", format!("item {:?} twice", row.item_id)));
            }
            dir.insert(row.item_id, slot);
            Ok(())
        })?;
        drop(loader);
        if rows != h.rows {
            return Err(Error::corrupt("index image", format!("{rows} rows, the header says {}", h.rows)));
        }
        self.live_items = rows;
        self.live_bytes = h.live_bytes;
        self.stored_records = h.stored_records;
        Ok(())
    }

    pub(crate) fn content_hash_of_slot(&self, slot: u32) -> Option<[u8; 16]> {
        self.index.content_hash(slot).map(|h| h.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::item::Item;

    /// A batch prepared together is each item prepared alone, in order,
    /// items over the size limit left out.
    #[test]
    fn a_batch_is_prepared_as_its_items_one_by_one() {
        let mut config = TenantConfig::new(neardup_core::Config::seed_example());
        config.limits.max_item_bytes = 1500;
        let t = Tenant::new("t", config).unwrap();
        let pre = t.prefingerprinter(true);
        let items: Vec<Item> = (0..40)
            .map(|i| {
                let words = [0, 1, 5, 60, 300, 700][i % 6];
                let content: Vec<String> = (0..words).map(|w| format!("w{}", (w * 7 + i) % 97)).collect();
                Item::text(format!("i{i}"), content.join(" "))
            })
            .collect();
        assert!(items.iter().any(|i| i.content.len() > 1500), "one item is over the limit");
        let many = pre.prepare_many(&items);
        assert_eq!(many.len(), items.len());
        for (item, got) in items.iter().zip(&many) {
            let want = pre.prepare(item);
            assert_eq!(got.is_some(), want.is_some(), "{}", item.item_id);
            if let (Some(got), Some(want)) = (got, want) {
                assert_eq!((&got.version, &got.fp), (&want.version, &want.fp), "{}", item.item_id);
                assert_eq!(got.packed.0, want.packed.0, "{}", item.item_id);
            }
        }
    }

    /// Issue 15 item 1: a rebuild whose store write failed used to leave
    /// the new configuration in memory; now the tenant keeps its old one.
    #[test]
    fn a_rebuild_that_fails_to_write_changes_nothing() {
        let (store, faults) = crate::store::FaultyStore::new();
        let old = TenantConfig::new(neardup_core::Config::seed_example());
        let mut t = Tenant::new("t", old.clone()).unwrap();
        let new = TenantConfig::new(neardup_core::Config { shingle_width: 3, ..neardup_core::Config::seed_example() });
        let cmd = Command::Rebuild {
            tenant: "t".into(),
            config_json: new.to_json().unwrap(),
            previous_json: Some(old.to_json().unwrap()),
        };
        faults.fail_writes(true);
        let mode = ApplyMode { store: true, index: true };
        assert_eq!(t.apply(&store, cmd.clone(), 5, mode).unwrap_err().code(), "io");
        assert_eq!(t.config, old);
        assert!(t.previous.is_none());
        faults.fail_writes(false);
        t.apply(&store, cmd, 5, mode).unwrap();
        assert_eq!(t.config, new);
        assert_eq!(t.previous, Some(old));
    }
}
