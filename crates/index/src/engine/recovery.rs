//! Opening an engine: the newest valid snapshot of each tenant, the log
//! tail replayed through the same `apply` as live writes, then each
//! tenant's candidate index rebuilt from its store.

use super::lock::TenantLock;
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::BufReader;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use super::replica::Replica;
use super::snapshots::{snapshot_files, MAX_V1_SNAPSHOT};
use super::{Engine, EngineOptions, Proposer, RecoveryReport, StoreKind};
use crate::command::Command;
use crate::error::{Error, Result};
use crate::snapshot::{self, Part, SnapshotHeader, SnapshotReader};
use crate::store::{FjallStore, MemStore, Store, StoreBatch};
use crate::tenant::{ApplyMode, Tenant};
use crate::tenant_config::{check_tenant_id, TenantConfig};
use crate::wal::{self, Wal};

impl Engine {
    /// Opens (or creates) an engine in `dir`: loads the newest valid
    /// snapshot of each tenant, repairs and replays the log tail, and
    /// rebuilds the in-memory postings.
    pub fn open(dir: impl AsRef<Path>, opts: EngineOptions) -> Result<Engine> {
        Engine::open_with(dir.as_ref(), opts, None, None)
    }

    /// [`Engine::open`] over an item store of the caller's (`opts.store`
    /// is not used): another backend, or one that injects faults — a slow
    /// or failing disk — in tests.
    pub fn open_on_store(dir: impl AsRef<Path>, opts: EngineOptions, store: Box<dyn Store>) -> Result<Engine> {
        Engine::open_with(dir.as_ref(), opts, None, Some(store))
    }

    /// Opens (or creates) a cluster node's engine in `dir`: a replica of the
    /// replicated log behind `proposer` (see `replica.rs`). It loads the
    /// node's checkpoints; the caller then feeds it the log from
    /// [`Engine::applied_position`]` + 1` through
    /// [`Engine::apply_replicated`]. A directory holding a single-node
    /// command log is refused (its commands are not in the replicated log).
    pub fn open_replica(dir: impl AsRef<Path>, opts: EngineOptions, proposer: Arc<dyn Proposer>) -> Result<Engine> {
        Engine::open_with(dir.as_ref(), opts, Some(proposer), None)
    }

    fn open_with(
        dir: &Path,
        opts: EngineOptions,
        proposer: Option<Arc<dyn Proposer>>,
        store: Option<Box<dyn Store>>,
    ) -> Result<Engine> {
        let dir = dir.to_path_buf();
        if opts.keep_snapshots == 0 {
            return Err(Error::config("keep_snapshots", "must be at least 1"));
        }
        fs::create_dir_all(dir.join("snapshots")).map_err(|e| Error::io("creating engine directory", e))?;
        let store: Box<dyn Store> = match (store, opts.store) {
            (Some(s), _) => s,
            (None, StoreKind::Memory) => Box::new(MemStore::new()),
            (None, StoreKind::Fjall) => Box::new(FjallStore::open_sealed(&dir.join("store"), opts.snapshot_key)?),
        };
        let key = opts.snapshot_key;
        let mut report = RecoveryReport::default();
        let mut tenants: BTreeMap<String, Tenant> = BTreeMap::new();
        // (covered LSN, store applied LSN) per tenant.
        let mut bases: BTreeMap<String, (u64, Option<u64>)> = BTreeMap::new();
        let mut max_lsn = 0u64;
        // Tenants whose index came from an image, and those the log changed.
        let mut imaged: std::collections::BTreeSet<String> = Default::default();
        let mut changed: std::collections::BTreeSet<String> = Default::default();

        let snap_root = dir.join("snapshots");
        for entry in fs::read_dir(&snap_root).map_err(|e| Error::io("reading snapshots", e))?.flatten() {
            let Ok(name) = entry.file_name().into_string() else { continue };
            if check_tenant_id(&name).is_err() {
                continue;
            }
            let files = snapshot_files(&entry.path());
            let mut why = Vec::new();
            for (lsn, path) in &files {
                let (lsn, path) = (*lsn, path.clone());
                match load_snapshot(&*store, &name, lsn, &path, key.as_ref()) {
                    Ok((h, mut tenant, store_lsn, image)) => {
                        match image {
                            Ok(true) => {
                                imaged.insert(name.clone());
                            }
                            Ok(false) => {}
                            Err(why) => report.index_images_rebuilt.push(format!("{}: {why}", path.display())),
                        }
                        max_lsn = max_lsn.max(h.covered_lsn);
                        report.snapshots_loaded.push((name.clone(), h.covered_lsn));
                        bases.insert(name.clone(), (h.covered_lsn, store_lsn));
                        tenant.applied_lsn = h.covered_lsn;
                        // Where its feed starts (see `events.rs`): a mark
                        // for this snapshot, or the snapshot itself.
                        let mark = super::events::FeedMark::read(&super::events::mark_path(&dir, &name), h.covered_lsn);
                        tenant.events.created_at(mark.map_or(0, |m| m.from));
                        tenant.events.set_floor(mark.map_or(h.covered_lsn, |m| m.last_event));
                        tenants.insert(name.clone(), tenant);
                        break;
                    }
                    Err(e) => {
                        why.push(format!("{}: {e}", path.display()));
                        report.snapshots_rejected.push(format!("{}: {e}", path.display()));
                    }
                }
            }
            if !files.is_empty() && !tenants.contains_key(&name) {
                // Every snapshot of the tenant failed (a wrong or missing
                // snapshot key, corruption): the log behind them is trimmed,
                // so going on would drop the tenant while reporting ready.
                return Err(Error::state(format!(
                    "no snapshot of tenant {name:?} could be loaded, and the log may no longer hold what they cover; \
                     refusing to start without it (with a snapshot key: start with the key that wrote them). {}",
                    why.join("; ")
                )));
            }
        }

        let wal_dir = dir.join("wal");
        let store_ref: &dyn Store = &*store;
        let replica = proposer.is_some();
        // The first record the log still holds: a tenant loaded from a
        // snapshot has its events from there on (see `crate::event`).
        let mut first_seen = 0;
        let (last, repair) = wal::replay(&wal_dir, |lsn, payload| {
            if first_seen == 0 {
                first_seen = lsn;
            }
            if replica {
                return Err(Error::state(format!(
                    "{} holds a single-node command log (record {lsn}); a cluster node starts from an empty data \
                     directory or from its own checkpoints",
                    wal_dir.display()
                )));
            }
            let cmd = Command::decode_from_log(payload, key.as_ref())?;
            let name = cmd.tenant().to_string();
            if let Command::CreateTenant { config_json, .. } = &cmd {
                if !tenants.contains_key(&name) {
                    let mut t = Tenant::new(&name, TenantConfig::from_json(config_json)?)?;
                    t.applied_lsn = lsn;
                    t.events.created_at(lsn);
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
                // Applied already (the snapshot covers it), yet still the
                // tenant's event.
                t.events.push(lsn, crate::event::events_of(lsn, &cmd));
                return Ok(());
            }
            let mode = ApplyMode { store: store_lsn.is_none_or(|s| lsn > s), index: false };
            t.apply(store_ref, cmd, lsn, mode)?;
            changed.insert(name);
            report.records_replayed += 1;
            Ok(())
        })?;
        report.log = repair;
        max_lsn = max_lsn.max(last);
        for t in tenants.values_mut() {
            // A tenant loaded from a snapshot has its events from the log's
            // first record on (those its snapshot covers included), and
            // none between its mark and its snapshot.
            if let Some(first) = first_seen.checked_sub(1).filter(|_| t.events.born() < first_seen) {
                t.events.set_floor(t.events.floor().min(first));
            }
        }
        for (name, t) in tenants.iter_mut() {
            if let Some(s) = store.applied_lsn(name)? {
                max_lsn = max_lsn.max(s);
                // A replica's store may hold commands no checkpoint covers:
                // its index comes from the store, and the log replays only
                // the small state up to there.
                if replica && s > t.applied_lsn {
                    t.store_ahead = s;
                    changed.insert(name.clone());
                }
            }
            // An image is the index as of its checkpoint: good while the log
            // changed nothing of the tenant since; otherwise read the store.
            if !imaged.contains(name) || changed.contains(name) {
                t.load_index(&*store)?;
            } else {
                report.index_images.push(name.clone());
            }
        }
        let wal = Wal::open(&wal_dir, max_lsn + 1, opts.fsync)?;
        let replica = match proposer {
            Some(p) => Some(Replica::new(p, super::replica::read_position(&dir)?)),
            None => None,
        };
        Ok(Engine {
            dir,
            opts,
            store,
            wal,
            tenants: RwLock::new(tenants.into_iter().map(|(k, t)| (k, Arc::new(TenantLock::new(t)))).collect()),
            recovery: report,
            admin: Mutex::new(()),
            combiners: Mutex::default(),
            id: {
                static ENGINES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                ENGINES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
            replica,
        })
    }
}

/// What [`load_snapshot`] found: the header, the tenant, the store's
/// applied LSN, and whether the index came from an image (or why a damaged
/// one was set aside).
type LoadedSnapshot = (SnapshotHeader, Tenant, Option<u64>, std::result::Result<bool, String>);

/// Loads one snapshot file of `name`: checks it whole, streaming, and loads
/// its records into the store when the store is older than the snapshot.
/// A store checkpoint (no records) needs a store at least as new; when it
/// carries an index image, the tenant's candidate index is built from it.
/// Returns the header, the tenant, the store's applied LSN and whether the
/// index came from an image — or why a damaged image of a store
/// checkpoint was set aside: the store holds every record, so the caller
/// rebuilds the index from their features instead of refusing the
/// checkpoint.
fn load_snapshot(
    store: &dyn Store,
    name: &str,
    lsn: u64,
    path: &Path,
    key: Option<&[u8; 32]>,
) -> Result<LoadedSnapshot> {
    let open = || -> Result<SnapshotReader<BufReader<File>>> {
        let f = File::open(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        SnapshotReader::open(BufReader::with_capacity(1 << 20, f), key, MAX_V1_SNAPSHOT)
    };
    let mut r = open()?;
    let h = r.header().clone();
    if h.tenant != name || h.covered_lsn != lsn {
        return Err(Error::corrupt("snapshot", "tenant or LSN does not match its file name"));
    }
    let checkpoint = r.is_store_checkpoint();
    let mut tenant: Option<Tenant> = None;
    let mut meta = None;
    let mut imaged = Ok(false);
    while let Some(p) = r.next_part()? {
        match p {
            Part::Meta(m) => {
                tenant = Some(Tenant::from_meta(name, &m)?);
                meta = Some(m);
            }
            Part::Image(ih) => {
                let t = tenant.as_mut().ok_or_else(|| Error::corrupt("snapshot", "an image before the meta"))?;
                let mut scratch = Vec::new();
                let loaded = t.load_image(&ih, &mut |f| {
                    let mut rows = 0;
                    while let Some(p) = r.next_part()? {
                        match p {
                            Part::ImageRows(b) => rows += snapshot::decode_rows(&b, &ih, &mut scratch, f)?,
                            _ => return Err(Error::corrupt("snapshot", "a store checkpoint holds records")),
                        }
                    }
                    Ok(rows)
                });
                match loaded {
                    Ok(()) => imaged = Ok(true),
                    // Damaged postings in a store checkpoint: the meta
                    // frame before them passed its checks and the store
                    // holds the records, so the tenant is rebuilt from
                    // them (the caller reads the store) and the rest of
                    // this file — postings only — is not needed.
                    Err(e) if checkpoint && matches!(e.kind(), crate::error::ErrorKind::Corrupt { .. }) => {
                        let m = meta.as_ref().ok_or_else(|| Error::corrupt("snapshot", "an image before the meta"))?;
                        tenant = Some(Tenant::from_meta(name, m)?);
                        imaged = Err(e.to_string());
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            Part::Records(_) if checkpoint => {
                return Err(Error::corrupt("snapshot", "a store checkpoint holds records"));
            }
            Part::Records(_) | Part::ImageRows(_) => {}
        }
    }
    let tenant = tenant.ok_or_else(|| Error::corrupt("snapshot", "no meta frame"))?;
    let mut store_lsn = store.applied_lsn(name)?;
    if checkpoint {
        if store_lsn.is_none_or(|s| s < h.covered_lsn) {
            return Err(Error::corrupt(
                "snapshot",
                format!("a store checkpoint at {} over a store at {store_lsn:?}: the store is missing", h.covered_lsn),
            ));
        }
    } else if store_lsn.is_none_or(|s| s < h.covered_lsn) {
        // Checked whole above; now load its records a frame at a time.
        store.clear_tenant(name)?;
        let loaded = (|| {
            let mut r = open()?;
            while let Some(p) = r.next_part()? {
                if let Part::Records(rs) = p {
                    store.apply(
                        name,
                        StoreBatch { puts: super::snapshots::derivable(rs), deletes: vec![] },
                        h.covered_lsn,
                    )?;
                }
            }
            store.apply(name, StoreBatch::default(), h.covered_lsn)
        })();
        if let Err(e) = loaded {
            let _ = store.clear_tenant(name);
            return Err(e);
        }
        store_lsn = Some(h.covered_lsn);
    }
    Ok((h, tenant, store_lsn, imaged))
}
