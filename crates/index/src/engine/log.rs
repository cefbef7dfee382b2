//! The command log behind the engine's writes, one seam for both modes:
//! this node's own log ([`crate::wal::Wal`]), or in cluster mode the
//! replicated one ([`super::replica`]). Planning, grouping, applying and
//! answering are written once (`writes.rs`, `combine.rs`) and run in both
//! modes; what appending means, and when a write is durable, is said here.

use super::Engine;
use crate::command::Command;
use crate::error::{Error, Result};
use crate::tenant::Tenant;

/// What appending a command did.
pub(super) enum Appended {
    /// This node's log holds it at the position: the caller applies it
    /// now, and it is durable once the log's fsync covers the position.
    Logged(u64),
    /// The replicated log's quorum stored `entry` at `lsn` (durable): it
    /// is applied (or refused, had another entry of the tenant come first)
    /// in log order, by [`Engine::apply_own`] at once when it can, else by
    /// this node's applier, and the caller waits for that
    /// ([`Engine::replicated`]).
    Proposed { lsn: u64, entry: Vec<u8> },
}

impl Engine {
    /// Appends `cmd` of tenant `name`, planned against the tenant's state
    /// as of its log entry `after` (0: the tenant has none).
    pub(super) fn append(&self, name: &str, after: u64, cmd: &mut Command) -> Result<Appended> {
        let payload = self.log_payload(cmd)?;
        match &self.replica {
            None => Ok(Appended::Logged(self.wal.append(&[payload])?[0])),
            Some(r) => {
                if let Some(why) = self.write_refusal() {
                    return Err(Error::state(format!("this node refuses writes until a restart: {why}")));
                }
                let entry = super::replica::entry(after, &payload);
                Ok(Appended::Proposed { lsn: r.propose(name, after, &entry)?, entry })
            }
        }
    }

    /// Appends `cmd`, planned against `t`, and applies it: at once on a
    /// single node; in cluster mode at once when every entry before it is
    /// applied here already, else by the applier. Not yet durable on a
    /// single node: the caller releases its locks and calls
    /// [`Engine::make_durable`] before acknowledging (group commit).
    pub(super) fn log_and_apply(&self, t: &mut Tenant, mut cmd: Command) -> Result<u64> {
        match self.append(&t.name, t.applied_lsn, &mut cmd)? {
            Appended::Logged(lsn) => self.apply_logged(t, cmd, lsn),
            Appended::Proposed { lsn, entry } => self.apply_own(t, lsn, &entry).map(|()| lsn),
        }
    }

    /// The bytes the log holds for `cmd` (see [`Command::encode_for_log`]):
    /// sealed under the engine's key, in the lean forms (records without
    /// the features their content makes: a ~2 KB text's record is ~2.7 KB
    /// instead of ~5.9 KB, which every server of a cluster's log stores
    /// and sends), noted on this node's own log, and on a cluster's
    /// replicated log only when [`crate::EngineOptions::replicated_notes`].
    pub(super) fn log_payload(&self, cmd: &mut Command) -> Result<Vec<u8>> {
        let own = self.replica.is_none();
        cmd.encode_for_log(self.opts.snapshot_key.as_ref(), true, own || self.opts.replicated_notes)
    }

    /// Returns once `lsn` is as durable as the policy promises. In cluster
    /// mode a command is durable once proposed (a quorum stored it).
    pub(super) fn make_durable(&self, lsn: u64) -> Result<()> {
        match self.replica {
            Some(_) => Ok(()),
            None => self.wal.make_durable(lsn),
        }
    }

    /// Calls `then` once every command up to `lsn` is durable, without
    /// waiting for it here: on a single node from the log's syncer thread
    /// once an fsync covers it; in cluster mode at once.
    pub(super) fn when_durable(&self, lsn: u64, then: Box<dyn FnOnce(Result<()>) + Send>) {
        match self.replica {
            Some(_) => then(Ok(())),
            None => self.wal.on_durable(lsn, then),
        }
    }
}
