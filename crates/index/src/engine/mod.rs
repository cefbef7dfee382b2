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
//! Write path: the tenant plans (validate → fingerprint → decide, read-only)
//! → the engine appends the command to the log (fsync per policy) → applies
//! it to the store and the candidate index → acknowledges. Restart: newest
//! valid snapshot per tenant (or the store, when it is at least as new) +
//! the log tail.
//!
//! The engine locks, logs and applies; what a command means for a tenant is
//! the tenant's (`crate::tenant`). By concern:
//!
//! - `recovery.rs`: open — snapshots, log replay, index rebuild;
//! - `log.rs`: the command log behind writes, this node's or replicated;
//! - `combine.rs`: a tenant's concurrent writes, written in rounds;
//! - `writes.rs`: tenants, upserts, tombstones, labels;
//! - `queries.rs`: decisions, candidates, verification, reads, stats;
//! - `snapshots.rs`: snapshots, restore, checkpoints;
//! - `events.rs`: the event feed's reads (see `crate::event`);
//! - `lifecycle.rs`: compaction, rebuild, shadow index, rollback.

mod combine;
pub use combine::{Answer, Lead, Spawn};
mod events;
mod lifecycle;
mod lock;
mod log;
mod queries;
mod recovery;
mod replica;
mod review;
mod snapshots;
mod writes;

use lock::TenantLock;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use crate::command::Command;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::tenant::{ApplyMode, Tenant, TenantCounters};
use crate::tenant_config::TenantConfig;
use crate::wal::{FsyncPolicy, LogRepair, Wal};
use replica::Replica;
pub use replica::{seed_replica, Proposer, ReplicatedEntry};
pub use review::{
    Comparison, Edge, Estimate, LabelEvaluation, Member, Neighbourhood, QueuedItem, ReviewQueue, Side, TextRun,
    MAX_EVALUATED_PAIRS, MAX_NEIGHBOURHOOD,
};

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
    /// Cluster mode: propose upserts in the noted log forms, so the event
    /// feed's upserts carry their decisions (closest match, versions,
    /// inserted or replaced) there too. Only once every node runs a build
    /// that reads them (this one or later): a node that cannot decode an
    /// entry skips it. A single node's own log always holds them.
    pub replicated_notes: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            fsync: FsyncPolicy::EveryMs(1000),
            store: StoreKind::Memory,
            snapshot_key: None,
            keep_snapshots: 2,
            replicated_notes: false,
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
    /// Tenants whose candidate index was loaded from a checkpoint's index
    /// image (the others were rebuilt by reading the store).
    pub index_images: Vec<String>,
    /// Index images found damaged (postings failing their checks), with
    /// the reason: the tenant's index was rebuilt from the store's records
    /// instead, and the checkpoint otherwise used.
    pub index_images_rebuilt: Vec<String>,
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
    /// Bits per key of the tenant's membership screen (0: none).
    pub screen_bits: u32,
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
    tenants: RwLock<BTreeMap<String, Arc<TenantLock<Tenant>>>>,
    recovery: RecoveryReport,
    admin: Mutex<()>,
    /// Each tenant's queue of writes (see `combine.rs`), with the
    /// tenant object it serves.
    combiners: Mutex<combine::Combiners>,
    /// This engine among the process's engines (a [`Lead`] names it).
    id: u64,
    /// Cluster mode: the replicated log this engine follows (the local
    /// command log then stays empty).
    replica: Option<Replica>,
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

impl Engine {
    /// What `open` found and repaired.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    fn tenant(&self, id: &str) -> Result<Arc<TenantLock<Tenant>>> {
        self.tenants.read().map_err(|_| poisoned())?.get(id).cloned().ok_or_else(|| Error::tenant_not_found(id))
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

    /// Applies a command the local log holds at `lsn`.
    fn apply_logged(&self, t: &mut Tenant, cmd: Command, lsn: u64) -> Result<u64> {
        if let Err(e) = t.apply(&*self.store, cmd, lsn, ApplyMode { store: true, index: true }) {
            // Logged but not applied: later writes would be planned against
            // a state the log does not describe. Refuse them until a restart
            // replays the log.
            self.wal.refuse_writes(format!("command {lsn} is logged but could not be applied ({e})"));
            return Err(e);
        }
        Ok(lsn)
    }

    /// [`Engine::log_and_apply`] made durable before returning, for rare
    /// administrative commands that may hold their lock through the fsync.
    /// On a single node the command is applied only once durable: when the
    /// fsync fails the answer is an error and this process's state is
    /// unchanged (the log then refuses writes until a restart, which replays
    /// whatever of it reached the disk).
    fn log_apply_durable(&self, t: &mut Tenant, mut cmd: Command) -> Result<u64> {
        match self.append(&t.name, t.applied_lsn, &mut cmd)? {
            log::Appended::Logged(lsn) => {
                self.wal.make_durable(lsn)?;
                self.apply_logged(t, cmd, lsn)
            }
            log::Appended::Proposed { lsn, entry } => self.apply_own(t, lsn, &entry).map(|()| lsn),
        }
    }

    /// The highest log position known to be on disk: every acknowledged
    /// write under `--fsync always` is at or below it.
    pub fn durable_lsn(&self) -> u64 {
        self.wal.durable_lsn()
    }

    /// Fsyncs of the command log since open (group commit shares them).
    pub fn log_fsyncs(&self) -> u64 {
        self.wal.fsyncs()
    }

    /// Fsyncs the command log now, whatever the policy.
    pub fn sync(&self) -> Result<()> {
        self.wal.sync()
    }

    /// Bytes the item store holds in memory now beyond the tenants' own
    /// estimates (fjall's block cache and memtables; 0 for the memory
    /// store, whose records are not counted).
    pub fn store_resident_bytes(&self) -> u64 {
        self.store.resident_bytes()
    }

    /// Why the engine refuses every write until the process restarts (a
    /// failed fsync, a torn append that could not be cut back, a logged
    /// command that could not be applied); `None` while writes are taken.
    pub fn write_refusal(&self) -> Option<String> {
        self.wal.refusal()
    }

    /// Fault injection (feature `fault-injection`, for tests): every later
    /// fsync of the command log first sleeps `delay`, as a slow disk would.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn delay_log_fsyncs(&self, delay: std::time::Duration) {
        self.wal.delay_fsyncs(delay);
    }

    /// Fault injection (feature `fault-injection`, for tests): the gate
    /// every later fsync of the command log first passes; close it to
    /// stall the log's fsyncs for as long as a test needs.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn log_fsync_gate(&self) -> crate::fault::Gate {
        self.wal.fsync_gate()
    }

    /// Bytes in the command log.
    pub fn log_bytes(&self) -> u64 {
        self.wal.disk_bytes()
    }

    /// Bytes of every file under the data directory (store, log,
    /// checkpoints), walked now; files that vanish meanwhile count 0.
    pub fn disk_bytes(&self) -> u64 {
        neardup_fs::usage::tree_bytes(&self.dir)
    }

    /// The data directory it was opened on.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}
