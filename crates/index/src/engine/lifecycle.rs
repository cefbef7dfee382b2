//! Lifecycle: compaction, rebuild under new parameters, the shadow index
//! (start, report, promote, drop) and rollback.

use std::ops::ControlFlow;

use super::{poisoned, Engine};
use crate::command::Command;
use crate::error::{Error, Result};
use crate::shadow::{Shadow, ShadowReport};
use crate::tenant::{check_rebuild, Tenant};
use crate::tenant_config::TenantConfig;

impl Engine {
    /// Drops tombstoned records from the store, then checkpoints keeping one
    /// snapshot per tenant, so tombstoned data leaves the log and old
    /// snapshots too. Returns the records dropped.
    pub fn compact(&self, tenant: &str) -> Result<u64> {
        let dropped = {
            let t = self.tenant(tenant)?;
            let (before, _) = self.replicated(tenant, || {
                let mut t = t.write().map_err(|_| poisoned())?;
                let before = t.stored_records;
                let cmd = Command::Compact { tenant: t.name.clone() };
                Ok((before, self.log_apply_durable(&mut t, cmd)?))
            })?;
            // Read after the command applied (in cluster mode, by the applier).
            let after = t.read().map_err(|_| poisoned())?.stored_records;
            before.saturating_sub(after)
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
        self.replicated(tenant, || self.rebuild_locked(&mut *t.write().map_err(|_| poisoned())?, config.clone(), true))
            .map(|_| ())
    }

    fn rebuild_locked(&self, t: &mut Tenant, config: TenantConfig, keep_previous: bool) -> Result<((), u64)> {
        config.resolve()?;
        check_rebuild(&*self.store, &t.name, &t.config, &config)?;
        let cmd = Command::Rebuild {
            tenant: t.name.clone(),
            config_json: config.to_json()?,
            previous_json: if keep_previous { Some(t.config.to_json()?) } else { None },
        };
        let lsn = self.log_apply_durable(t, cmd)?;
        t.shadow = None;
        Ok(((), lsn))
    }

    /// Builds a shadow index under `config` that answers alongside the live
    /// one from now on; returns its (empty) report.
    pub fn start_shadow(&self, tenant: &str, config: TenantConfig) -> Result<ShadowReport> {
        let t = self.tenant(tenant)?;
        let mut t = t.write().map_err(|_| poisoned())?;
        let mut records = Vec::new();
        self.store.scan(&t.name, None, &mut |mut r| {
            t.complete(&mut r)?;
            records.push(r);
            Ok(ControlFlow::Continue(()))
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
        self.replicated(tenant, || {
            let mut t = t.write().map_err(|_| poisoned())?;
            let config = t
                .shadow
                .as_ref()
                .map(|s| s.config.clone())
                .ok_or_else(|| Error::state("no shadow index to promote"))?;
            self.rebuild_locked(&mut t, config, true)
        })
        .map(|_| ())
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
        self.replicated(tenant, || {
            let mut t = t.write().map_err(|_| poisoned())?;
            let prev = t.previous.clone().ok_or_else(|| Error::state("nothing to roll back to"))?;
            self.rebuild_locked(&mut t, prev, false)
        })
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Engine, EngineOptions, FsyncPolicy, Item, TenantConfig};

    /// Issue 15: a rebuild whose fsync failed answered an error but had
    /// changed the configuration in memory. Now an administrative command
    /// is applied only once durable: the error leaves the running state as
    /// it was, and the log refuses writes until a restart.
    #[test]
    fn a_rebuild_whose_fsync_fails_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let opts = EngineOptions { fsync: FsyncPolicy::Always, ..EngineOptions::default() };
        let e = Engine::open(dir.path(), opts).unwrap();
        let before = TenantConfig::new(neardup_core::Config::seed_example());
        e.create_tenant("t", before.clone()).unwrap();
        e.upsert("t", Item::text("A", "red fox runs very fast")).unwrap();
        let mut after = before.clone();
        after.policy.version += 1;
        after.policy.threshold_similar = 0.9;
        e.wal.fail_next_fsync();
        assert!(e.rebuild("t", after).is_err());
        assert_eq!(e.tenant_config("t").unwrap(), before);
        assert!(e.write_refusal().is_some());
        assert!(e.upsert("t", Item::text("B", "a quite different text")).is_err());
    }

    /// Issue 15: a tenant creation whose fsync failed answered an error but
    /// the tenant stayed (until a restart dropped it). Now it is gone with
    /// the error.
    #[test]
    fn a_creation_whose_fsync_fails_leaves_no_tenant() {
        let dir = tempfile::tempdir().unwrap();
        let opts = EngineOptions { fsync: FsyncPolicy::Always, ..EngineOptions::default() };
        let e = Engine::open(dir.path(), opts).unwrap();
        let config = TenantConfig::new(neardup_core::Config::seed_example());
        e.create_tenant("kept", config.clone()).unwrap();
        e.wal.fail_next_fsync();
        assert!(e.create_tenant("t", config).is_err());
        assert_eq!(e.tenant_config("t").unwrap_err().code(), "tenant_not_found");
        assert_eq!(e.tenants().unwrap(), ["kept"]);
    }
}
