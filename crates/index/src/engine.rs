//! [`Engine`]: tenants, the command log, the store and snapshots, and the
//! stable operations on top of them.
//!
//! Directory layout:
//!
//! ```text
//! DIR/wal/{first_lsn:020}.log               command log segments (see `wal`)
//! DIR/snapshots/{tenant}/{lsn:020}.snap     tenant snapshots (see `snapshot`)
//! DIR/store/                                fjall item store (StoreKind::Fjall)
//! ```
//!
//! Write path: validate → fingerprint → decide (read-only) → append the
//! command to the log (fsync per policy) → apply to the store and the
//! in-memory postings → acknowledge. Restart: newest valid snapshot per
//! tenant (or the store, when it is at least as new) + the log tail.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::command::{Command, IdemEntry};
use crate::decision::{Decision, MatchVerdict, PolicyRef, UpsertOutcome, UpsertStatus, Verification};
use crate::error::{Error, ErrorKind, Result};
use crate::feedback::{LabelEvent, NewLabel};
use crate::item::{Item, ItemInfo, ItemRecord};
use crate::shadow::{Shadow, ShadowReport};
use crate::snapshot::{self, SnapshotHeader};
use crate::store::{FjallStore, MemStore, Store, StoreBatch};
use crate::tenant::{check_rebuild, score, ApplyMode, Tenant, TenantCounters};
use crate::tenant_config::{check_item_id, check_tenant_id, PolicyConfig, TenantConfig};
use crate::wal::{self, FsyncPolicy, LogRepair, Wal};

/// Which item store backs the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// RAM; rebuilt from snapshots and the log on open.
    Memory,
    /// fjall in `DIR/store`.
    Fjall,
}

/// How an engine is opened.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Command log fsync policy.
    pub fsync: FsyncPolicy,
    /// Item store.
    pub store: StoreKind,
    /// ChaCha20-Poly1305 key for snapshots at rest and from `snapshot()`.
    /// With a key, unencrypted snapshots are refused.
    pub snapshot_key: Option<[u8; 32]>,
    /// Snapshots kept per tenant (at least 1).
    pub keep_snapshots: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            fsync: FsyncPolicy::EveryMs(1000),
            store: StoreKind::Memory,
            snapshot_key: None,
            keep_snapshots: 2,
        }
    }
}

/// What `open` found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecoveryReport {
    /// Torn or corrupt log tails cut.
    pub log: LogRepair,
    /// `(tenant, covered LSN)` of each snapshot loaded.
    pub snapshots_loaded: Vec<(String, u64)>,
    /// Snapshots that failed to load, with the reason (an older one was used).
    pub snapshots_rejected: Vec<String>,
    /// Log records applied.
    pub records_replayed: u64,
    /// Log records for tenants that no longer exist.
    pub records_orphaned: u64,
}

/// A candidate query: new content, or an item already stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query<'a> {
    /// Content not (necessarily) stored.
    Content(&'a str),
    /// A stored item, compared with everything else.
    Item(&'a str),
}

/// Figures for one tenant.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TenantStats {
    /// Tenant id.
    pub tenant: String,
    /// Fingerprint version.
    pub version: String,
    /// Live items.
    pub live_items: u64,
    /// Live content bytes.
    pub live_bytes: u64,
    /// Records in the store, tombstoned ones included until compaction.
    pub stored_records: u64,
    /// Tombstone markers.
    pub tombstones: u64,
    /// Label events.
    pub labels: u64,
    /// Largest LSH bucket.
    pub largest_bucket: usize,
    /// Estimated resident bytes of the in-memory index.
    pub resident_bytes_estimate: u64,
    /// Query counters since open.
    pub counters: TenantCounters,
    /// A shadow index is active.
    pub shadow: bool,
}

/// What a checkpoint did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Snapshots written, `(tenant, covered LSN)`.
    pub snapshots: Vec<(String, u64)>,
    /// Log segments removed.
    pub segments_removed: usize,
}

/// The durable multi-tenant index.
pub struct Engine {
    dir: PathBuf,
    opts: EngineOptions,
    store: Box<dyn Store>,
    wal: Wal,
    tenants: RwLock<BTreeMap<String, Arc<RwLock<Tenant>>>>,
    recovery: RecoveryReport,
    admin: Mutex<()>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("dir", &self.dir).field("opts", &self.opts.fsync).finish_non_exhaustive()
    }
}

fn poisoned() -> Error {
    Error::state("engine lock poisoned by a panic")
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let ctx = |what: &str| format!("{what} {}", path.display());
    {
        let mut f = fs::File::create(&tmp).map_err(|e| Error::io(ctx("creating"), e))?;
        std::io::Write::write_all(&mut f, bytes).map_err(|e| Error::io(ctx("writing"), e))?;
        f.sync_all().map_err(|e| Error::io(ctx("fsyncing"), e))?;
    }
    fs::rename(&tmp, path).map_err(|e| Error::io(ctx("renaming"), e))?;
    if let Some(parent) = path.parent() {
        wal::sync_dir(parent)?;
    }
    Ok(())
}

/// Snapshot files of one tenant directory, newest first.
fn snapshot_files(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut out: Vec<(u64, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let lsn = name.strip_suffix(".snap")?.parse().ok()?;
            Some((lsn, e.path()))
        })
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.0));
    out
}

impl Engine {
    /// Opens (or creates) an engine in `dir`: loads the newest valid
    /// snapshot of each tenant, repairs and replays the log tail, and
    /// rebuilds the in-memory postings.
    pub fn open(dir: impl AsRef<Path>, opts: EngineOptions) -> Result<Engine> {
        let dir = dir.as_ref().to_path_buf();
        if opts.keep_snapshots == 0 {
            return Err(Error::config("keep_snapshots", "must be at least 1"));
        }
        fs::create_dir_all(dir.join("snapshots")).map_err(|e| Error::io("creating engine directory", e))?;
        let store: Box<dyn Store> = match opts.store {
            StoreKind::Memory => Box::new(MemStore::new()),
            StoreKind::Fjall => Box::new(FjallStore::open(&dir.join("store"))?),
        };
        let key = opts.snapshot_key;
        let mut report = RecoveryReport::default();
        let mut tenants: BTreeMap<String, Tenant> = BTreeMap::new();
        // (covered LSN, store applied LSN) per tenant.
        let mut bases: BTreeMap<String, (u64, Option<u64>)> = BTreeMap::new();
        let mut max_lsn = 0u64;

        let snap_root = dir.join("snapshots");
        for entry in fs::read_dir(&snap_root).map_err(|e| Error::io("reading snapshots", e))?.flatten() {
            let Ok(name) = entry.file_name().into_string() else { continue };
            if check_tenant_id(&name).is_err() {
                continue;
            }
            for (lsn, path) in snapshot_files(&entry.path()) {
                let loaded = fs::read(&path)
                    .map_err(|e| Error::io(format!("reading {}", path.display()), e))
                    .and_then(|b| snapshot::decode(&b, key.as_ref()))
                    .and_then(|(h, s)| {
                        if h.tenant != name || h.covered_lsn != lsn {
                            return Err(Error::corrupt("snapshot", "tenant or LSN does not match its file name"));
                        }
                        Ok((h, s))
                    });
                match loaded {
                    Ok((h, state)) => {
                        let tenant = Tenant::from_state(&name, &state)?;
                        let mut store_lsn = store.applied_lsn(&name)?;
                        if store_lsn.is_none_or(|s| s < h.covered_lsn) {
                            store.clear_tenant(&name)?;
                            store.apply(&name, StoreBatch { puts: state.items, deletes: vec![] }, h.covered_lsn)?;
                            store_lsn = Some(h.covered_lsn);
                        }
                        max_lsn = max_lsn.max(h.covered_lsn);
                        report.snapshots_loaded.push((name.clone(), h.covered_lsn));
                        bases.insert(name.clone(), (h.covered_lsn, store_lsn));
                        tenants.insert(name.clone(), tenant);
                        break;
                    }
                    Err(e) => report.snapshots_rejected.push(format!("{}: {e}", path.display())),
                }
            }
        }

        let wal_dir = dir.join("wal");
        let store_ref: &dyn Store = &*store;
        let (last, repair) = wal::replay(&wal_dir, |lsn, payload| {
            let cmd = Command::decode(payload)?;
            let name = cmd.tenant().to_string();
            if let Command::CreateTenant { config_json, .. } = &cmd {
                if !tenants.contains_key(&name) {
                    let t = Tenant::new(&name, TenantConfig::from_json(config_json)?)?;
                    let mut store_lsn = store_ref.applied_lsn(&name)?;
                    if store_lsn.is_some_and(|s| s < lsn) {
                        // Left over from an earlier life of the id: not ours.
                        store_ref.clear_tenant(&name)?;
                        store_lsn = None;
                    }
                    tenants.insert(name.clone(), t);
                    bases.insert(name, (lsn, store_lsn));
                    report.records_replayed += 1;
                }
                return Ok(());
            }
            let (Some(t), Some(&(base, store_lsn))) = (tenants.get_mut(&name), bases.get(&name)) else {
                report.records_orphaned += 1;
                return Ok(());
            };
            if lsn <= base {
                return Ok(());
            }
            let mode = ApplyMode { store: store_lsn.is_none_or(|s| lsn > s), index: false };
            t.apply(store_ref, cmd, lsn, mode)?;
            report.records_replayed += 1;
            Ok(())
        })?;
        report.log = repair;
        max_lsn = max_lsn.max(last);
        for (name, t) in tenants.iter_mut() {
            if let Some(s) = store.applied_lsn(name)? {
                max_lsn = max_lsn.max(s);
            }
            t.load_index(&*store)?;
        }
        let wal = Wal::open(&wal_dir, max_lsn + 1, opts.fsync)?;
        Ok(Engine {
            dir,
            opts,
            store,
            wal,
            tenants: RwLock::new(tenants.into_iter().map(|(k, t)| (k, Arc::new(RwLock::new(t)))).collect()),
            recovery: report,
            admin: Mutex::new(()),
        })
    }

    /// What `open` found and repaired.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    fn tenant(&self, id: &str) -> Result<Arc<RwLock<Tenant>>> {
        self.tenants.read().map_err(|_| poisoned())?.get(id).cloned().ok_or_else(|| Error::tenant_not_found(id))
    }

    /// Creates a tenant with its own parameters, policy, limits and postings.
    pub fn create_tenant(&self, id: &str, config: TenantConfig) -> Result<()> {
        check_tenant_id(id)?;
        let tenant = Tenant::new(id, config.clone())?;
        let mut map = self.tenants.write().map_err(|_| poisoned())?;
        if map.contains_key(id) {
            return Err(Error::new(ErrorKind::TenantExists { tenant: id.into() }));
        }
        let cmd = Command::CreateTenant { tenant: id.into(), config_json: config.to_json() };
        self.wal.append(&[cmd.encode()])?;
        map.insert(id.to_string(), Arc::new(RwLock::new(tenant)));
        Ok(())
    }

    /// Tenant ids, sorted.
    pub fn tenants(&self) -> Result<Vec<String>> {
        Ok(self.tenants.read().map_err(|_| poisoned())?.keys().cloned().collect())
    }

    /// A tenant's configuration.
    pub fn tenant_config(&self, tenant: &str) -> Result<TenantConfig> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        Ok(t.config.clone())
    }

    fn log_and_apply(&self, t: &mut Tenant, cmd: Command, defer: bool) -> Result<u64> {
        let payload = cmd.encode();
        let lsns = if defer { self.wal.append_deferred(&[payload])? } else { self.wal.append(&[payload])? };
        let lsn = lsns[0];
        t.apply(&*self.store, cmd, lsn, ApplyMode { store: true, index: true })?;
        Ok(lsn)
    }

    /// Inserts or replaces an item and returns the decision for it.
    ///
    /// Re-upserting an item id: the same content at the same (or no) epoch
    /// is `Unchanged` and writes nothing; different content needs an epoch
    /// above the current one (`item_exists` without an epoch, `stale_epoch`
    /// with a lower one), and then replaces the item (`Replaced`). After a
    /// tombstone at epoch `e`, the id can only come back with an epoch above `e`.
    pub fn upsert(&self, tenant: &str, item: Item) -> Result<UpsertOutcome> {
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        self.upsert_locked(&mut t, item, false)
    }

    /// Upserts many items under one tenant lock and one fsync (group commit).
    /// Items see earlier items of the same batch. Each gets its own result;
    /// the outer error means the batch could not be made durable and none of
    /// it is acknowledged.
    pub fn upsert_batch(&self, tenant: &str, items: Vec<Item>) -> Result<Vec<Result<UpsertOutcome>>> {
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        let out: Vec<_> = items.into_iter().map(|i| self.upsert_locked(&mut t, i, true)).collect();
        self.wal.commit()?;
        Ok(out)
    }

    fn upsert_locked(&self, t: &mut Tenant, item: Item, defer: bool) -> Result<UpsertOutcome> {
        check_item_id(&item.item_id)?;
        item.check_media_type()?;
        let limits = t.config.limits.clone();
        let len = item.content.len() as u64;
        if len > limits.max_item_bytes {
            return Err(Error::new(ErrorKind::TooLarge {
                limit: "max_item_bytes",
                max: limits.max_item_bytes,
                actual: len,
            }));
        }
        if let Some(v) = &item.normalization_version {
            let want = t.params.config().normalizer.version();
            if v != want {
                return Err(Error::input(
                    "normalization_version",
                    format!("{v:?} does not match the tenant's {want:?}"),
                ));
            }
        }
        let digest = item.request_digest();
        if let Some(key) = &item.idempotency_key {
            if key.is_empty() || key.len() > 256 {
                return Err(Error::input("idempotency_key", "must be 1..=256 bytes"));
            }
            if let Some(e) = t.idempotent(key) {
                if e.digest != digest {
                    return Err(Error::new(ErrorKind::IdempotencyConflict { key: key.clone() }));
                }
                let mut o = e.outcome.clone();
                o.status = UpsertStatus::Replayed;
                return Ok(o);
            }
        }
        let fp = t.fingerprint(&item.content);
        let existing = match t.slot_of(&item.item_id) {
            Some(slot) => Some((slot, self.store.get(&t.name, &item.item_id)?)),
            None => None,
        };
        let (epoch, status, exclude, old_bytes) = match existing {
            Some((slot, Some(old))) => {
                let same =
                    Some(old.content_hash) == t.content_hash_of_slot(slot) && old.content_hash == fp.content_hash.0;
                match item.epoch {
                    None | Some(_) if same && item.epoch.is_none_or(|e| e == old.epoch) => {
                        let decision = t.evaluate(&*self.store, &fp, Some(slot))?;
                        return Ok(UpsertOutcome {
                            item_id: item.item_id,
                            epoch: old.epoch,
                            lsn: 0,
                            status: UpsertStatus::Unchanged,
                            decision,
                        });
                    }
                    None => return Err(Error::new(ErrorKind::ItemExists { item_id: item.item_id, epoch: old.epoch })),
                    Some(e) if e <= old.epoch => {
                        return Err(Error::new(ErrorKind::StaleEpoch {
                            item_id: item.item_id,
                            current: old.epoch,
                            given: e,
                        }))
                    }
                    Some(e) => (e, UpsertStatus::Replaced, Some(slot), old.content_bytes),
                }
            }
            _ => {
                let floor = t.tombstones.get(&item.item_id).copied();
                match (floor, item.epoch) {
                    (Some(te), e) if e.unwrap_or(1) <= te => {
                        return Err(Error::new(ErrorKind::StaleEpoch {
                            item_id: item.item_id,
                            current: te,
                            given: e.unwrap_or(1),
                        }))
                    }
                    (_, e) => (e.unwrap_or(1), UpsertStatus::Inserted, None, 0),
                }
            }
        };
        if status == UpsertStatus::Inserted && t.live_items + 1 > limits.max_items {
            return Err(Error::new(ErrorKind::BudgetExceeded {
                limit: "max_items",
                max: limits.max_items,
                actual: t.live_items + 1,
            }));
        }
        let bytes_after = t.live_bytes - old_bytes.min(t.live_bytes) + len;
        if bytes_after > limits.max_bytes {
            return Err(Error::new(ErrorKind::BudgetExceeded {
                limit: "max_bytes",
                max: limits.max_bytes,
                actual: bytes_after,
            }));
        }
        let decision = t.evaluate(&*self.store, &fp, exclude)?;
        if let Some(shadow) = &t.shadow {
            let sd = shadow.evaluate(&item.content, Some(&item.item_id))?;
            shadow.observe(&decision, &sd);
        }
        let outcome = UpsertOutcome { item_id: item.item_id.clone(), epoch, lsn: 0, status, decision };
        let record = ItemRecord {
            item_id: item.item_id.clone(),
            epoch,
            lsn: 0,
            content_hash: fp.content_hash.0,
            tokens: fp.tokens,
            degraded_shingles: fp.degraded.map(|d| match d {
                neardup_core::Degraded::TooManyShingles { count, .. } => count,
            }),
            features: fp.features,
            signature: fp.signature,
            media_type: item.media_type.clone(),
            source_time: item.source_time,
            content_bytes: len,
            content: t.config.retain_content.then(|| item.content.clone()),
            tombstone: None,
            decision: outcome.decision.state,
        };
        let idem = item.idempotency_key.clone().map(|key| IdemEntry { key, digest, outcome: outcome.clone() });
        let cmd = Command::Upsert { tenant: t.name.clone(), record: Box::new(record), idem: idem.map(Box::new) };
        let lsn = self.log_and_apply(t, cmd, defer)?;
        if let Some(shadow) = t.shadow.as_mut() {
            shadow.insert(&item.item_id, &item.content)?;
        }
        Ok(UpsertOutcome { lsn, ..outcome })
    }

    /// The decision `content` would get, without writing anything.
    pub fn decide(&self, tenant: &str, content: &str) -> Result<Decision> {
        self.query(tenant, Query::Content(content), None)
    }

    /// Verified candidates for new content or a stored item, best first,
    /// at most `limit` of them (the decision is made on all of them first;
    /// `over_cap` says whether retrieval itself was capped).
    pub fn candidates(&self, tenant: &str, query: Query<'_>, limit: usize) -> Result<Decision> {
        self.query(tenant, query, Some(limit))
    }

    fn query(&self, tenant: &str, query: Query<'_>, limit: Option<usize>) -> Result<Decision> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        let (fp, exclude, content) = match query {
            Query::Content(c) => {
                let len = c.len() as u64;
                if len > t.config.limits.max_item_bytes {
                    return Err(Error::new(ErrorKind::TooLarge {
                        limit: "max_item_bytes",
                        max: t.config.limits.max_item_bytes,
                        actual: len,
                    }));
                }
                (t.fingerprint(c), None, Some(c.to_string()))
            }
            Query::Item(id) => {
                let slot = t.slot_of(id).ok_or_else(|| Error::item_not_found(id))?;
                let r = self.store.get(&t.name, id)?.ok_or_else(|| Error::item_not_found(id))?;
                let fp = neardup_core::Fingerprint {
                    content_hash: neardup_core::ContentHash(r.content_hash),
                    tokens: r.tokens,
                    band_keys: if r.signature.is_empty() {
                        Vec::new()
                    } else {
                        neardup_core::LshIndex::new(t.params.lsh(), t.params.config().seed).band_keys(&r.signature)?
                    },
                    features: r.features,
                    signature: r.signature,
                    degraded: r.degraded_shingles.map(|count| neardup_core::Degraded::TooManyShingles {
                        count,
                        max: u64::from(t.params.config().max_shingles),
                    }),
                };
                (fp, Some(slot), r.content)
            }
        };
        let mut d = t.evaluate(&*self.store, &fp, exclude)?;
        if let (Some(shadow), Some(c)) = (&t.shadow, content) {
            let exclude_id = match query {
                Query::Item(id) => Some(id),
                Query::Content(_) => None,
            };
            let sd = shadow.evaluate(&c, exclude_id)?;
            shadow.observe(&d, &sd);
        }
        if let Some(limit) = limit {
            d.candidates.truncate(limit);
        }
        Ok(d)
    }

    /// Exact score of two stored items under the tenant's policy or `policy`.
    pub fn verify(&self, tenant: &str, left: &str, right: &str, policy: Option<PolicyConfig>) -> Result<Verification> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        let p = match policy {
            Some(p) => neardup_core::Policy::new(p.id, p.version, p.threshold_identical, p.threshold_similar)?,
            None => t.policy.clone(),
        };
        let get = |id: &str| -> Result<ItemRecord> {
            self.store.get(&t.name, id)?.filter(ItemRecord::is_live).ok_or_else(|| Error::item_not_found(id))
        };
        let (l, r) = (get(left)?, get(right)?);
        let fp = neardup_core::Fingerprint {
            content_hash: neardup_core::ContentHash(l.content_hash),
            tokens: l.tokens,
            features: l.features,
            signature: Vec::new(),
            band_keys: Vec::new(),
            degraded: None,
        };
        let s = score(&p, &fp, &r, 0);
        let verdict = s.verdict;
        let explanation = format!(
            "{}: exact Jaccard {:.4}{} against identical {:.2} / similar {:.2} (policy {}@v{})",
            match verdict {
                MatchVerdict::Identical => "identical",
                MatchVerdict::Similar => "similar",
                MatchVerdict::Different => "different",
            },
            s.score,
            if s.same_content { " (same content hash)" } else { "" },
            p.threshold_identical,
            p.threshold_similar,
            p.id,
            p.version
        );
        Ok(Verification {
            left: left.into(),
            right: right.into(),
            score: s.score,
            same_content: s.same_content,
            verdict,
            policy: PolicyRef::from(&p),
            explanation,
        })
    }

    /// Tombstones `item_id` at `epoch`, which must be at least the item's
    /// epoch (`stale_epoch` otherwise). The record stays (reversible) until
    /// compaction; the item stops being a candidate at once. Returns the LSN.
    pub fn tombstone(&self, tenant: &str, item_id: &str, epoch: u64) -> Result<u64> {
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        t.slot_of(item_id).ok_or_else(|| Error::item_not_found(item_id))?;
        let rec = self.store.get(&t.name, item_id)?.ok_or_else(|| Error::item_not_found(item_id))?;
        if epoch < rec.epoch {
            return Err(Error::new(ErrorKind::StaleEpoch {
                item_id: item_id.into(),
                current: rec.epoch,
                given: epoch,
            }));
        }
        let cmd = Command::Tombstone { tenant: t.name.clone(), item_id: item_id.into(), epoch };
        let lsn = self.log_and_apply(&mut t, cmd, false)?;
        if let Some(shadow) = t.shadow.as_mut() {
            shadow.remove(item_id)?;
        }
        Ok(lsn)
    }

    /// A stored item (tombstoned ones too, until compaction).
    pub fn get(&self, tenant: &str, item_id: &str) -> Result<Option<ItemInfo>> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        Ok(self.store.get(&t.name, item_id)?.as_ref().map(ItemInfo::from))
    }

    /// Live items in item id order, after `after`, at most `limit`.
    pub fn list(&self, tenant: &str, after: Option<&str>, limit: usize) -> Result<Vec<ItemInfo>> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        let mut out = Vec::new();
        // The store scans in id order; stop early by failing the callback.
        let _ = self.store.scan(&t.name, &mut |r| {
            if out.len() >= limit {
                return Err(Error::state("page full"));
            }
            if r.is_live() && after.is_none_or(|a| r.item_id.as_str() > a) {
                out.push(ItemInfo::from(&r));
            }
            Ok(())
        });
        Ok(out)
    }

    /// Live item ids in write order (cheap: from memory).
    pub fn live_ids(&self, tenant: &str) -> Result<Vec<String>> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        Ok(t.live_ids().map(str::to_string).collect())
    }

    /// Figures for a tenant.
    pub fn stats(&self, tenant: &str) -> Result<TenantStats> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        Ok(TenantStats {
            tenant: t.name.clone(),
            version: t.version.clone(),
            live_items: t.live_items,
            live_bytes: t.live_bytes,
            stored_records: t.stored_records,
            tombstones: t.tombstones.len() as u64,
            labels: t.labels.len() as u64,
            largest_bucket: t.largest_bucket(),
            resident_bytes_estimate: t.resident_estimate(),
            counters: t.counters.lock().map(|c| c.clone()).unwrap_or_default(),
            shadow: t.shadow.is_some(),
        })
    }

    /// Records a reviewer label (immutable; never applied to thresholds).
    pub fn label(&self, tenant: &str, label: NewLabel) -> Result<LabelEvent> {
        label.check()?;
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        let event = LabelEvent {
            seq: t.labels.len() as u64,
            lsn: 0,
            left: label.left,
            right: label.right,
            label: label.label,
            actor: label.actor,
            rationale: label.rationale,
            policy_id: t.policy.id.clone(),
            policy_version: t.policy.version,
            source_version: t.version.clone(),
            recorded_at_ms: now_ms(),
        };
        let cmd = Command::Label { tenant: t.name.clone(), event: event.clone() };
        let lsn = self.log_and_apply(&mut t, cmd, false)?;
        Ok(LabelEvent { lsn, ..event })
    }

    /// Every label event of a tenant, oldest first.
    pub fn labels(&self, tenant: &str) -> Result<Vec<LabelEvent>> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        Ok(t.labels.clone())
    }

    /// A snapshot of one tenant (encrypted when the engine has a key). It is
    /// consistent: taken under the tenant's read lock, so it holds every
    /// command of the tenant up to its LSN and none after; other tenants'
    /// writes continue meanwhile.
    pub fn snapshot(&self, tenant: &str) -> Result<Vec<u8>> {
        let (header, state) = {
            let t = self.tenant(tenant)?;
            let t = t.read().map_err(|_| poisoned())?;
            let covered = self.wal.next_lsn()?.saturating_sub(1);
            let state = t.state(&*self.store)?;
            (t.header(covered, state.items.len() as u64), state)
        };
        snapshot::encode(&header, &state, self.opts.snapshot_key.as_ref())
    }

    /// Reads a snapshot's clear-text header (tenant, epoch, versions).
    pub fn snapshot_header(bytes: &[u8]) -> Result<SnapshotHeader> {
        snapshot::read_header(bytes)
    }

    fn snapshot_dir(&self, tenant: &str) -> PathBuf {
        self.dir.join("snapshots").join(tenant)
    }

    fn write_snapshot_file(&self, tenant: &str, lsn: u64, bytes: &[u8], keep: usize) -> Result<()> {
        let dir = self.snapshot_dir(tenant);
        fs::create_dir_all(&dir).map_err(|e| Error::io("creating snapshot directory", e))?;
        write_atomic(&dir.join(format!("{lsn:020}.snap")), bytes)?;
        for (_, old) in snapshot_files(&dir).into_iter().skip(keep) {
            fs::remove_file(&old).map_err(|e| Error::io("removing old snapshot", e))?;
        }
        Ok(())
    }

    /// Replaces (or creates) `tenant` with the state in `bytes`. The bytes
    /// are checked (checksum, authentication, tenant, every record) before
    /// anything changes, then written as the tenant's newest snapshot.
    pub fn restore(&self, tenant: &str, bytes: &[u8]) -> Result<SnapshotHeader> {
        check_tenant_id(tenant)?;
        let (header, state) = snapshot::decode(bytes, self.opts.snapshot_key.as_ref())?;
        if header.tenant != tenant {
            return Err(Error::new(ErrorKind::TenantMismatch { expected: tenant.into(), found: header.tenant }));
        }
        let mut fresh = Tenant::from_state(tenant, &state)?;
        let placeholder = Tenant::from_state(tenant, &state)?;
        let slot = {
            let mut map = self.tenants.write().map_err(|_| poisoned())?;
            Arc::clone(map.entry(tenant.to_string()).or_insert_with(|| Arc::new(RwLock::new(placeholder))))
        };
        let mut t = slot.write().map_err(|_| poisoned())?;
        let lsn = self.wal.reserve_lsn()?;
        let header = SnapshotHeader { covered_lsn: lsn, ..header };
        let file = snapshot::encode(&header, &state, self.opts.snapshot_key.as_ref())?;
        self.write_snapshot_file(tenant, lsn, &file, self.opts.keep_snapshots)?;
        self.store.clear_tenant(tenant)?;
        self.store.apply(tenant, StoreBatch { puts: state.items, deletes: vec![] }, lsn)?;
        fresh.load_index(&*self.store)?;
        *t = fresh;
        Ok(header)
    }

    /// Snapshots every tenant, then removes log segments all snapshots cover.
    pub fn checkpoint(&self) -> Result<CheckpointReport> {
        self.checkpoint_keeping(self.opts.keep_snapshots)
    }

    fn checkpoint_keeping(&self, keep: usize) -> Result<CheckpointReport> {
        let _g = self.admin.lock().map_err(|_| poisoned())?;
        let first = self.wal.rotate()?;
        let mut report = CheckpointReport::default();
        for name in self.tenants()? {
            let bytes = self.snapshot(&name)?;
            let lsn = snapshot::read_header(&bytes)?.covered_lsn;
            self.write_snapshot_file(&name, lsn, &bytes, keep)?;
            report.snapshots.push((name, lsn));
        }
        self.store.persist()?;
        // Keep the log back to the oldest snapshot kept, so a damaged newest
        // snapshot can fall back to an older one plus the log.
        let mut covered = first.saturating_sub(1);
        for name in self.tenants()? {
            if let Some((oldest, _)) = snapshot_files(&self.snapshot_dir(&name)).last() {
                covered = covered.min(*oldest);
            }
        }
        report.segments_removed = self.wal.remove_covered(covered)?;
        Ok(report)
    }

    /// Drops tombstoned records from the store, then checkpoints keeping one
    /// snapshot per tenant, so tombstoned data leaves the log and old
    /// snapshots too. Returns the records dropped.
    pub fn compact(&self, tenant: &str) -> Result<u64> {
        let dropped = {
            let t = self.tenant(tenant)?;
            let mut t = t.write().map_err(|_| poisoned())?;
            let before = t.stored_records;
            let cmd = Command::Compact { tenant: t.name.clone() };
            self.log_and_apply(&mut t, cmd, false)?;
            before - t.stored_records
        };
        self.checkpoint_keeping(1)?;
        Ok(dropped)
    }

    /// Recomputes every signature and posting under `config` (features too,
    /// from retained content, when normalization or shingling changes).
    /// Tombstoned records are dropped. The previous configuration is kept
    /// for [`Engine::rollback`].
    pub fn rebuild(&self, tenant: &str, config: TenantConfig) -> Result<()> {
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        self.rebuild_locked(&mut t, config, true)
    }

    fn rebuild_locked(&self, t: &mut Tenant, config: TenantConfig, keep_previous: bool) -> Result<()> {
        config.resolve()?;
        check_rebuild(&*self.store, &t.name, &t.config, &config)?;
        let cmd = Command::Rebuild {
            tenant: t.name.clone(),
            config_json: config.to_json(),
            previous_json: keep_previous.then(|| t.config.to_json()),
        };
        self.log_and_apply(t, cmd, false)?;
        t.shadow = None;
        Ok(())
    }

    /// Builds a shadow index under `config` that answers alongside the live
    /// one from now on; returns its (empty) report.
    pub fn start_shadow(&self, tenant: &str, config: TenantConfig) -> Result<ShadowReport> {
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        let mut records = Vec::new();
        self.store.scan(&t.name, &mut |r| {
            records.push(r);
            Ok(())
        })?;
        records.sort_by_key(|r| r.lsn);
        let shadow = Shadow::build(config, &t.config, &t.version, records)?;
        let report = shadow.report();
        t.shadow = Some(shadow);
        Ok(report)
    }

    /// The shadow's disagreement figures so far.
    pub fn shadow_report(&self, tenant: &str) -> Result<ShadowReport> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        t.shadow.as_ref().map(Shadow::report).ok_or_else(|| Error::state("no shadow index"))
    }

    /// Makes the shadow's configuration live (a logged rebuild); the old one
    /// is kept for rollback.
    pub fn promote_shadow(&self, tenant: &str) -> Result<()> {
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        let config =
            t.shadow.as_ref().map(|s| s.config.clone()).ok_or_else(|| Error::state("no shadow index to promote"))?;
        self.rebuild_locked(&mut t, config, true)
    }

    /// Discards the shadow index.
    pub fn drop_shadow(&self, tenant: &str) -> Result<()> {
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        t.shadow = None;
        Ok(())
    }

    /// Returns to the configuration before the last rebuild or promotion.
    pub fn rollback(&self, tenant: &str) -> Result<()> {
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        let prev = t.previous.clone().ok_or_else(|| Error::state("nothing to roll back to"))?;
        self.rebuild_locked(&mut t, prev, false)
    }

    /// Fsyncs the command log now, whatever the policy.
    pub fn sync(&self) -> Result<()> {
        self.wal.sync()
    }

    /// Bytes in the command log.
    pub fn log_bytes(&self) -> u64 {
        self.wal.disk_bytes()
    }
}
