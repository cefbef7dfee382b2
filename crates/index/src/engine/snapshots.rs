//! Snapshots of one tenant (download, restore) and checkpoints of all.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::{poisoned, CheckpointReport, Engine};
use crate::error::{Error, ErrorKind, Result};
use crate::snapshot::{self, SnapshotHeader};
use crate::store::StoreBatch;
use crate::tenant::Tenant;
use crate::tenant_config::check_tenant_id;

/// Snapshot files of one tenant directory, newest first.
pub(super) fn snapshot_files(dir: &Path) -> Vec<(u64, PathBuf)> {
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
        neardup_fs::write_atomic(&dir.join(format!("{lsn:020}.snap")), bytes)
            .map_err(|e| Error::io("writing snapshot", e))?;
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

    pub(super) fn checkpoint_keeping(&self, keep: usize) -> Result<CheckpointReport> {
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
}
