//! Cluster mode: the engine as one replica of a command log kept elsewhere
//! (a NATS JetStream stream, in `neardup-cluster`).
//!
//! The commands are the single-node log's commands and they are applied by
//! the same `Tenant::apply`; only where the log lives changes. A write is
//! planned against the tenant's state as of the tenant's last log entry
//! (`Tenant::applied_lsn`), then *proposed* carrying that position
//! (`after`). Every replica applies an entry only if `after` is still the
//! tenant's last entry when it arrives, and refuses it otherwise — the same
//! verdict everywhere, since all read one log in one order. So a command is
//! applied exactly to the state it was planned against, and replicas reach
//! the same state at the same position. The log is also asked to refuse a
//! stale proposal up front (JetStream's expected last subject sequence),
//! which saves a round trip, but correctness does not rest on it: under
//! concurrent proposals a clustered JetStream 2.9 stream can accept two
//! with the same expected sequence (we saw it in the race test).
//!
//! Only the applier applies ([`Engine::apply_replicated`], every entry in
//! log order). The leader of a tenant's queue of writes (`combine.rs`)
//! proposes a group of them under the tenant's lock, releases it, waits
//! until the applier reached its entry, and plans the group again if its
//! entry was refused ([`ErrorKind::LogConflict`]); writes that arrive
//! meanwhile queue for its next round. Tenants are independent.
//!
//! There is no local command log in this mode: the replicated log is the
//! durable truth, and a node's data directory holds checkpoints (and the
//! fjall store) plus `replica.json`, the log position every checkpoint
//! covers, from which a restarted node resumes reading.

use super::lock::TenantLock;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{poisoned, Engine};
use crate::command::Command;
use crate::error::{Error, ErrorKind, Result};
use crate::tenant::{ApplyMode, Tenant};
use crate::tenant_config::TenantConfig;

/// How long a write waits for this node to apply a competing command
/// before it gives up with `log_conflict`.
const CONFLICT_WAIT: Duration = Duration::from_secs(10);

/// The replicated log, as the engine sees it.
pub trait Proposer: Send + Sync {
    /// Appends `payload` as the next command of `tenant` if the tenant's
    /// last command in the log is at `after` (0: the tenant has none), and
    /// returns its position once a quorum stored it. Errors:
    /// [`ErrorKind::LogConflict`] when another command of the tenant is
    /// there already (nothing was appended); [`ErrorKind::Unavailable`]
    /// when the log did not answer (the command may or may not be there).
    fn propose(&self, tenant: &str, after: u64, payload: &[u8]) -> Result<u64>;

    /// The largest entry the log takes, in bytes (NATS: the server's
    /// `max_payload`); batches are cut to fit. `None`: 1 MiB.
    fn max_entry_bytes(&self) -> Option<usize> {
        None
    }
}

/// The replica side of an engine: the proposer and the log position applied.
pub(crate) struct Replica {
    proposer: Arc<dyn Proposer>,
    /// Every command of the log up to here has been applied.
    position: Mutex<u64>,
    advanced: Condvar,
    /// The log's last position when the node started: ready once applied.
    target: std::sync::atomic::AtomicU64,
}

impl Replica {
    pub(crate) fn new(proposer: Arc<dyn Proposer>, position: u64) -> Replica {
        Replica { proposer, position: Mutex::new(position), advanced: Condvar::new(), target: Default::default() }
    }

    /// Proposes `entry` (see [`entry`]) as the tenant's entry after `after`.
    pub(crate) fn propose(&self, tenant: &str, after: u64, entry: &[u8]) -> Result<u64> {
        self.proposer.propose(tenant, after, entry)
    }

    /// The largest command an entry may carry (the log's limit less the
    /// entry header and room for framing).
    pub(crate) fn max_entry_bytes(&self) -> usize {
        self.proposer.max_entry_bytes().unwrap_or(1 << 20).saturating_sub(1024).max(1024)
    }

    fn position(&self) -> u64 {
        self.position.lock().map(|p| *p).unwrap_or(0)
    }

    fn advance(&self, to: u64) {
        if let Ok(mut p) = self.position.lock() {
            *p = (*p).max(to);
        }
        self.advanced.notify_all();
    }

    /// Waits up to `timeout` for a wake-up.
    fn wait(&self, timeout: Duration) {
        if let Ok(g) = self.position.lock() {
            let _ = self.advanced.wait_timeout(g, timeout);
        }
    }
}

/// What became of an entry of the replicated log on this node.
#[derive(Debug)]
pub enum ReplicatedEntry {
    /// Applied, refused as planned against a stale state, or applied
    /// before: the node follows the log.
    Applied,
    /// Not a command of its tenant (the error says why): skipped alike on
    /// every node, to be counted and logged by the caller.
    Skipped(Error),
}

/// Log entries this many back are remembered as refused per tenant.
const REFUSED_KEPT: usize = 4096;

/// An entry of the replicated log: the tenant's previous entry the command
/// was planned after (8 bytes, little-endian), then the command.
pub(super) fn entry(after: u64, command: &[u8]) -> Vec<u8> {
    let mut entry = Vec::with_capacity(8 + command.len());
    entry.extend_from_slice(&after.to_le_bytes());
    entry.extend_from_slice(command);
    entry
}

/// The parts of an [`entry`].
fn split_entry(entry: &[u8]) -> Result<(u64, &[u8])> {
    match entry.split_first_chunk::<8>() {
        Some((after, command)) => Ok((u64::from_le_bytes(*after), command)),
        None => Err(Error::corrupt("replicated log entry", "shorter than its 8-byte header")),
    }
}

/// `DIR/replica.json`: the log position the node's checkpoints cover.
#[derive(serde::Serialize, serde::Deserialize)]
struct ReplicaFile {
    format: u32,
    position: u64,
}

fn replica_file(dir: &Path) -> std::path::PathBuf {
    dir.join("replica.json")
}

/// The position recorded by the last checkpoint (0 when none).
pub(super) fn read_position(dir: &Path) -> Result<u64> {
    let path = replica_file(dir);
    match std::fs::read(&path) {
        Ok(b) => {
            let f: ReplicaFile =
                serde_json::from_slice(&b).map_err(|e| Error::corrupt("replica.json", e.to_string()))?;
            if f.format != 1 {
                return Err(Error::new(ErrorKind::UnsupportedFormat { what: "replica.json", version: f.format }));
            }
            Ok(f.position)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
    }
}

pub(super) fn write_position(dir: &Path, position: u64) -> Result<()> {
    let bytes = serde_json::to_vec(&ReplicaFile { format: 1, position })
        .map_err(|e| Error::state(format!("encoding replica.json: {e}")))?;
    neardup_fs::write_atomic(&replica_file(dir), &bytes).map_err(|e| Error::io("writing replica.json", e))
}

/// Seeds an empty cluster node's data directory from a snapshot set: each
/// `(tenant, file)` is a full snapshot (records included) of the tenant as
/// of some log position at or after `position`, and `position` the log
/// position every one of them covers. The files are checked (header,
/// tenant) and moved into place as the tenants' newest snapshots, then
/// `replica.json` records `position`: [`Engine::open_replica`] then loads
/// them, and the node applies the log from `position + 1` — entries a
/// tenant's snapshot covers already are skipped, as after any restart.
/// Refused when `dir` holds a node's state already.
pub fn seed_replica(dir: &Path, position: u64, snapshots: Vec<(String, std::path::PathBuf)>) -> Result<()> {
    let snap_root = dir.join("snapshots");
    let occupied = replica_file(dir).exists()
        || std::fs::read_dir(&snap_root).is_ok_and(|mut d| d.next().is_some())
        || dir.join("wal").exists();
    if occupied {
        return Err(Error::state(format!("{} holds a node's state already; seed only an empty one", dir.display())));
    }
    let mut placed = Vec::new();
    for (tenant, file) in snapshots {
        crate::tenant_config::check_tenant_id(&tenant)?;
        let mut head = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(
                std::fs::File::open(&file).map_err(|e| Error::io(format!("reading {}", file.display()), e))?,
                1 << 20,
            ),
            &mut head,
        )
        .map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
        let header = crate::snapshot::read_header(&head)?;
        if header.tenant != tenant {
            return Err(Error::new(ErrorKind::TenantMismatch { expected: tenant, found: header.tenant }));
        }
        let dest_dir = snap_root.join(&tenant);
        std::fs::create_dir_all(&dest_dir).map_err(|e| Error::io("creating snapshot directory", e))?;
        let dest = dest_dir.join(format!("{:020}.snap", header.covered_lsn));
        std::fs::rename(&file, &dest).map_err(|e| Error::io(format!("placing {}", dest.display()), e))?;
        placed.push(dest_dir);
    }
    for d in placed {
        neardup_fs::sync_dir(&d).map_err(|e| Error::io("syncing a snapshot directory", e))?;
    }
    write_position(dir, position)
}

impl Engine {
    /// Cluster mode: the node counts as caught up (ready) once it has
    /// applied the log up to `position` (the log's end when it started).
    pub fn set_catch_up_target(&self, position: u64) {
        if let Some(r) = &self.replica {
            r.target.store(position, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Whether the node has caught up with the log as it was at start
    /// (always true on a single node).
    pub fn caught_up(&self) -> bool {
        match &self.replica {
            Some(r) => r.position() >= r.target.load(std::sync::atomic::Ordering::Relaxed),
            None => true,
        }
    }

    /// The log position applied: every command up to it is applied (single
    /// node: the last command logged).
    pub fn applied_position(&self) -> u64 {
        match &self.replica {
            Some(r) => r.position(),
            None => self.wal.next_lsn().map_or(0, |n| n.saturating_sub(1)),
        }
    }

    /// The log position of `tenant`'s last command applied here (a read
    /// with `min_lsn` at or below it sees that command).
    pub fn tenant_lsn(&self, tenant: &str) -> Result<u64> {
        Ok(self.tenant(tenant)?.read().map_err(|_| poisoned())?.applied_lsn)
    }

    /// Applies the entry at log position `seq` of the replicated log, which
    /// the log filed under `tenant` (its subject): creates its tenant,
    /// applies its command to its tenant, or refuses it when it was planned
    /// after an entry that is no longer the tenant's last. Call with every
    /// entry of the log, in order (entries already applied, before a
    /// reconnect, are skipped).
    ///
    /// An entry that is not a command of `tenant` (it does not decode, is
    /// sealed with another key, names another tenant, or carries a
    /// configuration that does not parse) is the entry's fault, the same on
    /// every node: it is skipped ([`ReplicatedEntry::Skipped`]), and
    /// `tenant`, if it exists, moves past it unchanged, as past a refused
    /// entry, so its next write plans after it. A command that cannot be
    /// applied (the store failed) stops the node's writes, as in
    /// single-node mode, and is returned as an error: the node's state no
    /// longer follows the log.
    pub fn apply_replicated(&self, seq: u64, tenant: &str, payload: &[u8]) -> Result<ReplicatedEntry> {
        let Some(r) = &self.replica else {
            return Err(Error::state("apply_replicated on a single-node engine"));
        };
        if seq <= r.position() {
            return Ok(ReplicatedEntry::Applied);
        }
        let outcome = match self.decode_entry(tenant, payload) {
            Ok((after, cmd, created)) => {
                self.stop_unless_applied(seq, self.apply_replicated_inner(seq, after, cmd, created))?;
                ReplicatedEntry::Applied
            }
            Err(reason) => return self.skip_replicated(seq, tenant, reason),
        };
        r.advance(seq);
        Ok(outcome)
    }

    /// Skips the entry at log position `seq`, filed under `tenant`, that is
    /// not a command (see [`Engine::apply_replicated`]; the cluster calls
    /// this for an entry whose tag does not verify): `tenant`, if it
    /// exists, moves past it unchanged, as past a refused entry.
    pub fn skip_replicated(&self, seq: u64, tenant: &str, reason: Error) -> Result<ReplicatedEntry> {
        let Some(r) = &self.replica else {
            return Err(Error::state("skip_replicated on a single-node engine"));
        };
        if seq <= r.position() {
            return Ok(ReplicatedEntry::Applied);
        }
        if let Ok(t) = self.tenant(tenant) {
            let mut t = t.write().map_err(|_| poisoned())?;
            if seq > t.applied_lsn {
                refuse(&mut t, seq);
            }
        }
        r.advance(seq);
        Ok(ReplicatedEntry::Skipped(reason))
    }

    /// The entry's header and command, checked against the tenant the log
    /// filed it under (a creation: with its tenant built from its
    /// configuration); an error says why the entry is not a command.
    fn decode_entry(&self, tenant: &str, payload: &[u8]) -> Result<(u64, Command, Option<Tenant>)> {
        let (after, command) = split_entry(payload)?;
        let cmd = Command::decode_from_log(command, self.opts.snapshot_key.as_ref())?;
        if cmd.tenant() != tenant {
            return Err(Error::corrupt(
                "replicated log entry",
                format!("a command of tenant {:?} filed under tenant {tenant:?}", cmd.tenant()),
            ));
        }
        let created = match &cmd {
            Command::CreateTenant { config_json, .. } => {
                Some(Tenant::new(tenant, TenantConfig::from_json(config_json)?)?)
            }
            _ => None,
        };
        Ok((after, cmd, created))
    }

    fn apply_replicated_inner(&self, seq: u64, after: u64, cmd: Command, created: Option<Tenant>) -> Result<()> {
        let name = cmd.tenant().to_string();
        if let Some(mut new) = created {
            let mut map = self.tenants.write().map_err(|_| poisoned())?;
            if let Some(t) = map.get(&name) {
                // Another creation came first: this one is refused.
                let mut t = t.write().map_err(|_| poisoned())?;
                if seq > t.applied_lsn {
                    refuse(&mut t, seq);
                }
                return Ok(());
            }
            new.applied_lsn = seq;
            new.events.created_at(seq);
            match self.store.applied_lsn(&name)? {
                // The store kept this tenant's later commands (applied before
                // a restart that no checkpoint covered): read its index from
                // the store and replay only the small state up to there.
                Some(s) if s >= seq => {
                    new.store_ahead = s;
                    new.load_index(&*self.store)?;
                }
                Some(_) => self.store.clear_tenant(&name)?,
                None => {}
            }
            map.insert(name, Arc::new(TenantLock::new(new)));
            return Ok(());
        }
        let Ok(t) = self.tenant(&name) else {
            // A command of a tenant this node never saw created: its creation
            // is before the checkpoint that dropped it, so it is not ours.
            return Ok(());
        };
        let mut t = t.write().map_err(|_| poisoned())?;
        self.apply_to(&mut t, seq, after, cmd)
    }

    /// Applies the command at `seq`, planned after the tenant's entry
    /// `after`, to its tenant `t` — or refuses it, when `after` is no
    /// longer the tenant's last entry; nothing when it is applied already.
    fn apply_to(&self, t: &mut Tenant, seq: u64, after: u64, cmd: Command) -> Result<()> {
        if seq <= t.applied_lsn {
            return Ok(());
        }
        if after != t.applied_lsn {
            // Planned against a state another entry has changed since.
            refuse(t, seq);
            return Ok(());
        }
        let full = seq > t.store_ahead;
        t.apply(&*self.store, cmd, seq, ApplyMode { store: full, index: full })
    }

    /// Applies this node's own command at log position `seq` (`entry`, as
    /// proposed) to its tenant `t`, whose write lock the caller has held
    /// since it planned the command — at once, when every entry before it
    /// is applied here already. That is the applier's own step, taken
    /// early: every entry of `t` before `seq` needed the lock to be applied
    /// or refused, so the verdict is the one the applier would reach, and
    /// the applier, when the entry reaches it, passes over it (applied
    /// before). Otherwise (entries before it are still on their way here)
    /// the applier applies it in its turn. Saves the writer the wait for
    /// the stream to deliver its own entry back.
    pub(super) fn apply_own(&self, t: &mut Tenant, seq: u64, entry: &[u8]) -> Result<()> {
        let Some(r) = &self.replica else { return Ok(()) };
        if r.position() + 1 != seq {
            return Ok(());
        }
        // Not decodable here: the applier skips it, alike on every node.
        let Ok((after, cmd, None)) = self.decode_entry(&t.name, entry) else { return Ok(()) };
        self.stop_unless_applied(seq, self.apply_to(t, seq, after, cmd))?;
        r.advance(seq);
        Ok(())
    }

    /// Passes on what applying the command at `seq` came to; when it
    /// failed (the store did), this node refuses writes until a restart:
    /// its state no longer follows the log.
    fn stop_unless_applied(&self, seq: u64, applied: Result<()>) -> Result<()> {
        if let Err(e) = &applied {
            self.wal.refuse_writes(format!("command {seq} of the replicated log could not be applied ({e})"));
        }
        applied
    }

    /// Waits until this node has applied log position `lsn` for `tenant`
    /// (the tenant's own commands up to it, or the whole log up to it), up
    /// to `timeout`; `unavailable` if it has not by then.
    pub fn wait_applied(&self, tenant: &str, lsn: u64, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.has_applied(tenant, lsn)? {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(self.not_applied_yet(lsn));
            }
            let step = (deadline - now).min(Duration::from_millis(50));
            match &self.replica {
                Some(r) => r.wait(step),
                None => std::thread::sleep(step),
            }
        }
    }

    /// The answer to a read that waited for position `lsn` in vain.
    pub fn not_applied_yet(&self, lsn: u64) -> Error {
        Error::unavailable(format!(
            "this node has applied the log up to {} and not yet {lsn}; retry, or ask another node",
            self.applied_position()
        ))
    }

    /// Whether this node has applied log position `lsn` for `tenant` (the
    /// tenant's own commands up to it, or the whole log up to it), without
    /// waiting. A single node applies every write before answering it, so
    /// there a position past its log's end is an error: it was never any
    /// write's answer.
    pub fn has_applied(&self, tenant: &str, lsn: u64) -> Result<bool> {
        let applied = self.applied_position();
        if applied >= lsn {
            return Ok(true);
        }
        if self.replica.is_none() {
            return Err(Error::input("min_lsn", format!("position {lsn} is past this node's log (at {applied})")));
        }
        match self.tenant(tenant) {
            Ok(t) => Ok(t.read().map_err(|_| poisoned())?.applied_lsn >= lsn),
            Err(_) => Ok(false),
        }
    }

    /// Runs a write, planning it again after a lost race with another node
    /// (cluster mode: waits until the applier reached the write's entry and
    /// plans again if it was refused); single-node writes never conflict.
    /// `write` returns its value and the log position it depends on.
    pub(super) fn replicated<T>(&self, tenant: &str, mut write: impl FnMut() -> Result<(T, u64)>) -> Result<(T, u64)> {
        let deadline = Instant::now() + CONFLICT_WAIT;
        loop {
            let result = write().and_then(|(v, lsn)| {
                if self.replica.is_some() {
                    self.await_entry(tenant, lsn, deadline)?;
                }
                Ok((v, lsn))
            });
            match result {
                Err(e) => self.wait_out_conflict(tenant, e, deadline)?,
                ok => return ok,
            }
        }
    }

    /// Waits until the applier reached `lsn` for `tenant`; `LogConflict`
    /// if the entry there was refused.
    fn await_entry(&self, tenant: &str, lsn: u64, deadline: Instant) -> Result<()> {
        let wait = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
        self.wait_applied(tenant, lsn, wait)?;
        let t = self.tenant(tenant)?;
        if t.read().map_err(|_| poisoned())?.refused.contains(&lsn) {
            return Err(Error::log_conflict(tenant, lsn));
        }
        Ok(())
    }

    /// After a failed write: `Ok` once this node has applied the command
    /// that won a race (plan again), `Err` with the error otherwise.
    pub(super) fn wait_out_conflict(&self, tenant: &str, e: Error, deadline: Instant) -> Result<()> {
        match e.kind() {
            ErrorKind::LogConflict { last, .. } if Instant::now() < deadline => {
                let wait = deadline.saturating_duration_since(Instant::now());
                self.wait_applied(tenant, *last, wait).map_err(|_| e)
            }
            _ => Err(e),
        }
    }
}

/// Marks the entry at `seq` refused: the tenant moves past it unchanged.
fn refuse(t: &mut Tenant, seq: u64) {
    t.applied_lsn = seq;
    if t.refused.len() == REFUSED_KEPT {
        t.refused.pop_front();
    }
    t.refused.push_back(seq);
}
