//! Writes: tenants, upserts (planned by the tenant), tombstones, labels.

use std::sync::{Arc, RwLock};

use super::{now_ms, poisoned, Engine};
use crate::command::Command;
use crate::decision::UpsertOutcome;
use crate::error::{Error, ErrorKind, Result};
use crate::feedback::{LabelEvent, NewLabel};
use crate::item::Item;
use crate::tenant::{Plan, Tenant};
use crate::tenant_config::{check_tenant_id, TenantConfig};

impl Engine {
    /// Creates a tenant with its own parameters, policy, limits and postings.
    pub fn create_tenant(&self, id: &str, config: TenantConfig) -> Result<()> {
        check_tenant_id(id)?;
        let tenant = Tenant::new(id, config.clone())?;
        let mut map = self.tenants.write().map_err(|_| poisoned())?;
        if map.contains_key(id) {
            return Err(Error::new(ErrorKind::TenantExists { tenant: id.into() }));
        }
        let cmd = Command::CreateTenant { tenant: id.into(), config_json: config.to_json()? };
        self.wal.append(&[cmd.encode()?])?;
        map.insert(id.to_string(), Arc::new(RwLock::new(tenant)));
        Ok(())
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
        match t.plan_upsert(&*self.store, item)? {
            Plan::Answer(outcome) => Ok(outcome),
            Plan::Write { command, outcome, shadow } => {
                let lsn = self.log_and_apply(t, command, defer)?;
                if let (Some(s), Some((item_id, content))) = (t.shadow.as_mut(), shadow) {
                    s.insert(&item_id, &content)?;
                }
                Ok(UpsertOutcome { lsn, ..outcome })
            }
        }
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
            shadow.remove(item_id);
        }
        Ok(lsn)
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
}
