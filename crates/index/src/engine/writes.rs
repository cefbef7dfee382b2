//! Writes: tenants, upserts (planned by the tenant), tombstones, labels.

use super::lock::TenantLock;
use std::sync::Arc;

use super::combine::Combiner;
use super::{now_ms, poisoned, Engine};
use crate::command::{BatchedUpsert, Command};
use crate::decision::{UpsertOutcome, UpsertStatus};
use crate::error::{Error, ErrorKind, Result};
use crate::feedback::{LabelEvent, NewLabel};
use crate::item::Item;
use crate::tenant::{Plan, Prefingerprinter, Prepared, Tenant};
use crate::tenant_config::{check_tenant_id, TenantConfig};

impl Engine {
    /// Creates a tenant with its own parameters, policy, limits and postings.
    pub fn create_tenant(&self, id: &str, config: TenantConfig) -> Result<()> {
        check_tenant_id(id)?;
        let ((), lsn) = self.replicated(id, || self.create_tenant_once(id, config.clone()))?;
        if let Err(e) = self.make_durable(lsn) {
            // Not durable, so not created: the tenant leaves the running
            // state (the log now refuses every write, so nothing written to
            // it meanwhile was acknowledged either). Creating it only once
            // durable would hold the tenants map, and every tenant's
            // requests, through the fsync.
            if let Ok(mut map) = self.tenants.write() {
                // `try_read`: never wait on a tenant while holding the map.
                let ours = map.get(id).and_then(|t| t.try_read().ok().map(|t| t.applied_lsn <= lsn));
                if ours == Some(true) {
                    map.remove(id);
                }
            }
            return Err(e);
        }
        Ok(())
    }

    fn create_tenant_once(&self, id: &str, config: TenantConfig) -> Result<((), u64)> {
        let mut tenant = Tenant::new(id, config.clone())?;
        let mut map = self.tenants.write().map_err(|_| poisoned())?;
        if map.contains_key(id) {
            return Err(Error::new(ErrorKind::TenantExists { tenant: id.into() }));
        }
        let mut cmd = Command::CreateTenant { tenant: id.into(), config_json: config.to_json()? };
        let payload = self.log_payload(&mut cmd)?;
        let lsn = match &self.replica {
            None => self.wal.append(&[payload])?[0],
            // The applier creates it (unless another node's creation came first).
            Some(r) => return Ok(((), r.propose(id, 0, &payload)?)),
        };
        tenant.applied_lsn = lsn;
        map.insert(id.to_string(), Arc::new(TenantLock::new(tenant)));
        Ok(((), lsn))
    }

    /// Inserts or replaces an item and returns the decision for it.
    ///
    /// Re-upserting an item id: the same content at the same (or no) epoch
    /// is `Unchanged` and writes nothing; different content needs an epoch
    /// above the current one (`item_exists` without an epoch, `stale_epoch`
    /// with a lower one), and then replaces the item (`Replaced`). After a
    /// tombstone at epoch `e`, the id can only come back with an epoch above `e`.
    ///
    /// Concurrent writes of one tenant are written in rounds, a few log
    /// entries a round (see `combine.rs`); each is still decided as if
    /// alone after those before it.
    pub fn upsert(&self, tenant: &str, item: Item) -> Result<UpsertOutcome> {
        let t = self.tenant(tenant)?;
        let combiner = self.combiner(tenant, &t)?;
        let pre = combiner.prefingerprinter(&t)?.prepare(&item);
        super::combine::only_answer(self.write_combined(&combiner, &t, vec![item], vec![pre]))
    }

    /// Upserts many items, in order, in the tenant's next rounds (with
    /// other writes queued before and after them, see `combine.rs`). Items
    /// see earlier items of the same batch. Each gets its own result; the
    /// outer error means the batch could not be made durable and none of
    /// it is acknowledged.
    ///
    /// Consecutive items go to the log as one entry (`Command::Upserts`;
    /// the replicated log in cluster mode) as long as none of them bears on
    /// another's decision — distinct ids and idempotency keys, no shared
    /// band key or content hash, budgets that hold for all of them, the
    /// entry within the log's size limit — so each is decided exactly as
    /// it would be alone after the ones before it; the first item that
    /// would bear on the group starts the next entry, planned once the
    /// group is applied.
    pub fn upsert_batch(&self, tenant: &str, items: Vec<Item>) -> Result<Vec<Result<UpsertOutcome>>> {
        let t = self.tenant(tenant)?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let combiner = self.combiner(tenant, &t)?;
        let pre = prefingerprint_all(&*combiner.prefingerprinter(&t)?, &items);
        self.write_combined(&combiner, &t, items, pre)
    }

    /// Cluster mode: proposes `items` (fingerprinted as `pre`) to the
    /// replicated log a group at a time, each group planned under the
    /// tenant's lock once the one before it is applied here, and planned
    /// again when another node's entry came first. Returns each item's
    /// answer once its entry is applied here.
    pub(super) fn upsert_replicated(
        &self,
        t: &Arc<TenantLock<Tenant>>,
        combiner: &Combiner,
        items: &[Item],
        pre: &[Option<Prepared>],
        max_entry: usize,
    ) -> Result<Vec<Result<UpsertOutcome>>> {
        let tenant = t.read().map_err(|_| poisoned())?.name.clone();
        let (out, _) = in_groups(items.len(), |from| {
            self.replicated(&tenant, || {
                let mut t = t.write().map_err(|_| poisoned())?;
                combiner.refresh(&t);
                self.upsert_group(&mut t, &items[from..], &pre[from..], max_entry)
            })
        });
        Ok(out)
    }

    /// Single node: plans, logs and applies `items` in order under the
    /// tenant's write lock, in groups of items that do not bear on each
    /// other ([`Engine::upsert_group`], as cluster mode does): one log
    /// record and one store write a group instead of one an item, each item
    /// still decided exactly as it would be alone after the ones before it.
    /// Returns each item's answer and the log position to make durable
    /// before any of them is given (see [`in_groups`]).
    pub(super) fn upsert_all_locked(
        &self,
        t: &mut Tenant,
        items: &[Item],
        pre: &[Option<Prepared>],
    ) -> (Vec<Result<UpsertOutcome>>, u64) {
        in_groups(items.len(), |from| self.upsert_group(t, &items[from..], &pre[from..], LOCAL_GROUP_BYTES))
    }

    /// Plans the longest run of `items` (at least one) whose writes do not
    /// bear on each other's decisions (see [`Engine::upsert_batch`]) and
    /// logs those writes as one entry (replicated in cluster mode). A run
    /// is either one item that writes nothing (an answer or an error), or
    /// writes that share no id, idempotency key, band key or content hash,
    /// fit the budgets together, and replace no earlier version except as
    /// the run's last write. Returns each planned item's answer and the log
    /// position to wait for (the entry's, or what answers without a write
    /// report).
    fn upsert_group(
        &self,
        t: &mut Tenant,
        items: &[Item],
        pre: &[Option<Prepared>],
        max_entry: usize,
    ) -> Result<(Vec<Result<UpsertOutcome>>, u64)> {
        use std::collections::HashSet;
        let limits = t.config.limits.clone();
        let mut results: Vec<Result<UpsertOutcome>> = Vec::new();
        // (index in `results`, the write, the item for the shadow index)
        type Write = (usize, BatchedUpsert, Option<(String, String)>);
        let mut writes: Vec<Write> = Vec::new();
        let (mut ids, mut keys, mut bands, mut hashes) =
            (HashSet::new(), HashSet::new(), HashSet::new(), HashSet::new());
        let (mut added_items, mut added_bytes, mut entry_bytes, mut depends_on) = (0u64, 0u64, 256usize, 0u64);
        for (item, pre) in items.iter().zip(pre) {
            let grouped = !writes.is_empty();
            if grouped
                && (ids.contains(&item.item_id)
                    || item.idempotency_key.as_ref().is_some_and(|k| keys.contains(k))
                    || (item.idempotency_key.is_some()
                        && t.idempotency_keys() + keys.len() + 1 > limits.max_idempotency_keys as usize))
            {
                break;
            }
            // The same check as after planning, on the prefingerprint's band
            // keys and content hash when they are current: an item that
            // shares one with the group ends it unplanned, instead of being
            // planned here for nothing and again in the next group.
            if grouped
                && pre
                    .as_ref()
                    .filter(|p| p.version == t.version)
                    .is_some_and(|p| meets_group(&bands, &hashes, &p.fp.band_keys, &p.fp.content_hash.0))
            {
                break;
            }
            // An item that writes nothing — an answer or an error — was
            // judged against the state before the group's writes (its
            // decision, a budget): it is planned again after them, and
            // stands alone as a group when it comes first, so a group the
            // log refuses always begins with a write.
            let (command, outcome, shadow, band_keys) = match t.plan_upsert(&*self.store, item.clone(), pre.clone()) {
                Err(_) | Ok(Plan::Answer { .. }) if grouped => break,
                Err(e) => {
                    results.push(Err(e));
                    break;
                }
                Ok(Plan::Answer { outcome, depends_on: d }) => {
                    depends_on = d;
                    results.push(Ok(outcome));
                    break;
                }
                Ok(Plan::Write { command, outcome, shadow, band_keys }) => (command, outcome, shadow, band_keys),
            };
            let Command::Upsert { record, idem, .. } = command else {
                return Err(Error::state("an upsert was planned as another command"));
            };
            let hash = record.content_hash;
            let upsert = BatchedUpsert { record, idem };
            let size = postcard::experimental::serialized_size(&upsert)
                .map_err(|e| Error::state(format!("sizing an upsert: {e}")))?;
            // Counted whole, as if every write were new: near a budget the
            // group ends early rather than let a later write pass a limit
            // the earlier ones reach.
            let bytes = upsert.record.content_bytes;
            if grouped
                && (meets_group(&bands, &hashes, &band_keys, &hash)
                    || t.live_items + added_items + 1 > limits.max_items
                    || t.live_bytes + added_bytes + bytes > limits.max_bytes
                    || entry_bytes + size > max_entry)
            {
                break;
            }
            ids.insert(item.item_id.clone());
            if let Some(k) = &item.idempotency_key {
                keys.insert(k.clone());
            }
            bands.extend(band_keys);
            hashes.insert(hash);
            added_items += 1;
            added_bytes += bytes;
            entry_bytes += size;
            // A replacement takes the old version's band keys and content
            // hash out of the index when applied; items planned before that
            // could still find it. It ends the group.
            let replaced = outcome.status == UpsertStatus::Replaced;
            results.push(Ok(outcome));
            writes.push((results.len() - 1, upsert, shadow));
            if replaced {
                break;
            }
        }
        if writes.is_empty() {
            return Ok((results, depends_on));
        }
        let tenant = t.name.clone();
        let (placed, mut upserts): (Vec<_>, Vec<_>) = writes.into_iter().map(|(at, u, s)| ((at, s), u)).unzip();
        // One write stays an ordinary upsert entry.
        let command = if upserts.len() == 1 {
            let BatchedUpsert { record, idem } = upserts.remove(0);
            Command::Upsert { tenant, record, idem }
        } else {
            Command::Upserts { tenant, items: upserts }
        };
        let lsn = self.log_and_apply(t, command)?;
        for (at, shadow) in placed {
            if let Ok(o) = &mut results[at] {
                o.lsn = lsn;
            }
            if let (Some(s), Some((item_id, content))) = (t.shadow.as_mut(), shadow) {
                s.insert(&item_id, &content)?;
            }
        }
        Ok((results, lsn.max(depends_on)))
    }

    /// Tombstones `item_id` at `epoch`, which must be at least the item's
    /// epoch (`stale_epoch` otherwise). The record stays (reversible) until
    /// compaction; the item stops being a candidate at once. Returns the LSN.
    pub fn tombstone(&self, tenant: &str, item_id: &str, epoch: u64) -> Result<u64> {
        let t = self.tenant(tenant)?;
        let ((), lsn) = self.replicated(tenant, || {
            Ok(((), self.tombstone_locked(&mut *t.write().map_err(|_| poisoned())?, item_id, epoch)?))
        })?;
        self.make_durable(lsn)?;
        Ok(lsn)
    }

    fn tombstone_locked(&self, t: &mut Tenant, item_id: &str, epoch: u64) -> Result<u64> {
        crate::tenant_config::check_epoch(epoch)?;
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
        let lsn = self.log_and_apply(t, cmd)?;
        if let Some(shadow) = t.shadow.as_mut() {
            shadow.remove(item_id);
        }
        Ok(lsn)
    }

    /// Lifts the tombstone fence of `item_id` (an operator's action): an id
    /// tombstoned at epoch `e` can otherwise come back only above `e`, and
    /// epochs stop at [`crate::MAX_EPOCH`], so any key allowed to tombstone
    /// could fence an id for good. The id must not be live. Returns the
    /// epoch the fence stood at and the command's log position.
    pub fn unfence(&self, tenant: &str, item_id: &str) -> Result<(u64, u64)> {
        let t = self.tenant(tenant)?;
        let (epoch, lsn) = self.replicated(tenant, || {
            let mut t = t.write().map_err(|_| poisoned())?;
            if t.slot_of(item_id).is_some() {
                return Err(Error::state(format!(
                    "item {item_id:?} is live: tombstone it first (at its epoch or above), then unfence it"
                )));
            }
            let Some(&epoch) = t.tombstones.get(item_id) else {
                return Err(Error::state(format!("item {item_id:?} has no tombstone: there is nothing to unfence")));
            };
            let cmd = Command::Unfence { tenant: t.name.clone(), item_id: item_id.into() };
            Ok((epoch, self.log_and_apply(&mut t, cmd)?))
        })?;
        self.make_durable(lsn)?;
        Ok((epoch, lsn))
    }

    /// Records a reviewer label (immutable; never applied to thresholds).
    pub fn label(&self, tenant: &str, label: NewLabel) -> Result<LabelEvent> {
        label.check()?;
        let t = self.tenant(tenant)?;
        let (event, _) = self.replicated(tenant, || {
            let event = self.label_locked(&mut *t.write().map_err(|_| poisoned())?, label.clone())?;
            let lsn = event.lsn;
            Ok((event, lsn))
        })?;
        self.make_durable(event.lsn)?;
        Ok(event)
    }

    fn label_locked(&self, t: &mut Tenant, label: NewLabel) -> Result<LabelEvent> {
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
        let lsn = self.log_and_apply(t, cmd)?;
        Ok(LabelEvent { lsn, ..event })
    }
}

/// Whether a write with `band_keys` and content `hash` could find, or be
/// found by, the writes already in a group (their `bands` and `hashes`):
/// band keys and the content hash are all the index reads for a query, so
/// two writes sharing none cannot find each other.
fn meets_group(
    bands: &std::collections::HashSet<u64>,
    hashes: &std::collections::HashSet<[u8; 16]>,
    band_keys: &[u64],
    hash: &[u8; 16],
) -> bool {
    band_keys.iter().any(|k| bands.contains(k)) || hashes.contains(hash)
}

/// Answers `n` items a group at a time, single node or cluster:
/// `group(from)` writes the group that starts at item `from` and returns
/// its answers (at least one) and the log position to wait for. When a
/// group's write fails (the log refused or lost it: on a single node it
/// then refuses every write; in cluster mode it did not answer in time,
/// and the next group would wait as long), that item and every one after
/// it is answered with the error, at once. Returns every answer and the
/// highest position.
fn in_groups(
    n: usize,
    mut group: impl FnMut(usize) -> Result<(Vec<Result<UpsertOutcome>>, u64)>,
) -> (Vec<Result<UpsertOutcome>>, u64) {
    let mut out = Vec::with_capacity(n);
    let mut last = 0;
    while out.len() < n {
        match group(out.len()) {
            Ok((results, lsn)) => {
                last = last.max(lsn);
                out.extend(results);
            }
            Err(e) => out.resize_with(n, || Err(e.clone())),
        }
    }
    (out, last)
}

/// Most bytes one group of a single node's upserts puts in one log record
/// (a record is read whole at replay).
const LOCAL_GROUP_BYTES: usize = 8 << 20;

/// Fingerprints a batch's items on the available cores (at most 8 threads,
/// at least 32 items each), in item order, holding no lock.
fn prefingerprint_all(t: &Prefingerprinter, items: &[Item]) -> Vec<Option<Prepared>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    let per = items.len().div_ceil(threads).max(32);
    if items.len() <= per {
        return t.prepare_many(items);
    }
    std::thread::scope(|s| {
        let parts: Vec<_> =
            items.chunks(per).map(|chunk| (chunk.len(), s.spawn(move || t.prepare_many(chunk)))).collect();
        // A part that failed leaves its items to be fingerprinted by the plan.
        parts.into_iter().flat_map(|(n, h)| h.join().unwrap_or_else(|_| vec![None; n])).collect()
    })
}
