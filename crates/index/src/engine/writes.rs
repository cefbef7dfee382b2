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
        let lsn = match self.append(id, 0, &mut cmd)? {
            super::log::Appended::Logged(lsn) => lsn,
            // The applier creates it (unless another node's creation came first).
            super::log::Appended::Proposed { lsn, .. } => return Ok(((), lsn)),
        };
        tenant.applied_lsn = lsn;
        tenant.events.created_at(lsn);
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
        let (out, _) = in_groups(items.len(), |pending| {
            let written = self.replicated(&tenant, || {
                let mut t = t.write().map_err(|_| poisoned())?;
                combiner.refresh(&t);
                let g = self.upsert_group(&mut t, items, pre, pending, max_entry, true)?;
                let lsn = g.lsn;
                Ok((g, lsn))
            });
            written.map(|(g, _)| g)
        });
        Ok(out)
    }

    /// Single node: plans, logs and applies `items` under the tenant's
    /// write lock, in groups of items that do not bear on each other
    /// ([`Engine::upsert_group`], as cluster mode does): one log record and
    /// one store write a group instead of one an item, each item still
    /// decided exactly as it would be alone after the ones before it.
    /// Returns each item's answer and the log position to make durable
    /// before any of them is given (see [`in_groups`]).
    pub(super) fn upsert_all_locked(
        &self,
        t: &mut Tenant,
        items: &[Item],
        pre: &[Option<Prepared>],
    ) -> (Vec<Result<UpsertOutcome>>, u64) {
        in_groups(items.len(), |pending| self.upsert_group(t, items, pre, pending, LOCAL_GROUP_BYTES, false))
    }

    /// Plans a group of the `pending` items (indices into `items`, in
    /// order; at least the first is answered) whose writes do not bear on
    /// each other's decisions (see [`Engine::upsert_batch`]) and logs those
    /// writes as one entry (replicated in cluster mode). A group is either
    /// the first pending item alone when it writes nothing (an answer or an
    /// error), or writes that share no id, idempotency key, band key or
    /// content hash, fit the budgets together, and replace no earlier
    /// version except as the group's last write.
    ///
    /// With `leave_out` (cluster mode, where each group costs a round trip
    /// to the log's quorum), a write that bears on the group — or on a
    /// write left out before it — is left out for a later group, and the
    /// items after it are still looked at: an item that shares nothing
    /// with the writes left out cannot be decided differently for being
    /// written before them, nor can they for it (their band keys, content
    /// hashes, ids and keys are apart, and the budgets hold for all of
    /// them counted whole), so every item is still decided exactly as it
    /// would be alone after the ones before it, while near copies in a
    /// stream of writes no longer cut it into an entry each. Never left
    /// out: an item with an idempotency key (the keys are remembered, and
    /// forgotten, in order), one whose id is live (a replacement takes the
    /// old version out of the index, which a later item planned before it
    /// could still find), or more than [`MAX_LEFT_OUT`] items. Left
    /// out, an item takes its slot in the index after writes that came
    /// after it, which only a later query's tie at the candidate cap can
    /// tell (ties go to the lower slot). Anything else — an item that
    /// writes nothing, one whose band keys are not known before planning,
    /// a budget or the entry's size — ends the group. On a single node
    /// (without `leave_out`) a group is a run of consecutive items, and the
    /// log holds the writes in their order.
    ///
    /// Returns the group's answers (each with its item's index), the
    /// pending items left, in order, and the log position to wait for (the
    /// entry's, or what an answer without a write reports).
    fn upsert_group(
        &self,
        t: &mut Tenant,
        items: &[Item],
        pre: &[Option<Prepared>],
        pending: &[usize],
        max_entry: usize,
        leave_out: bool,
    ) -> Result<Group> {
        // Never left out: an item with an idempotency key (keys are
        // remembered, and forgotten, in order), or one whose id is live (it
        // may replace a version in the index, which a later item planned
        // first could still find).
        let may_leave_out = |item: &Item, live: bool, deferred: &Vec<usize>| {
            leave_out && !live && item.idempotency_key.is_none() && deferred.len() < MAX_LEFT_OUT
        };
        let limits = t.config.limits.clone();
        let mut answers: Vec<(usize, Result<UpsertOutcome>)> = Vec::new();
        // (index in `answers`, the write, the item for the shadow index)
        type Write = (usize, BatchedUpsert, Option<(String, String)>);
        let mut writes: Vec<Write> = Vec::new();
        // What the group's writes touch, and what the writes left out do.
        let (mut group, mut left) = (Touched::default(), Touched::default());
        let mut deferred: Vec<usize> = Vec::new();
        let (mut added_items, mut added_bytes, mut entry_bytes, mut depends_on) = (0u64, 0u64, 256usize, 0u64);
        let mut stop = pending.len();
        for (at, &i) in pending.iter().enumerate() {
            let (item, pre) = (&items[i], &pre[i]);
            let grouped = !writes.is_empty();
            // Its band keys and content hash, when the prefingerprint is current.
            let known =
                pre.as_ref().filter(|p| p.version == t.version).map(|p| (&p.fp.band_keys, &p.fp.content_hash.0));
            if grouped {
                let keys = group.keys.len() + left.keys.len() + usize::from(item.idempotency_key.is_some());
                let over_budget = item.idempotency_key.is_some()
                    && t.idempotency_keys() + keys > limits.max_idempotency_keys as usize
                    || t.live_items + added_items + 1 > limits.max_items
                    || t.live_bytes + added_bytes + item.content.len() as u64 > limits.max_bytes;
                if over_budget {
                    stop = at;
                    break;
                }
                let bears = group.names(item) || left.names(item);
                match known {
                    Some((bands, hash)) if bears || group.meets(bands, hash) || left.meets(bands, hash) => {
                        if !may_leave_out(item, t.slot_of(&item.item_id).is_some(), &deferred) {
                            stop = at;
                            break;
                        }
                        left.add(item, bands, hash);
                        deferred.push(i);
                        added_items += 1;
                        added_bytes += item.content.len() as u64;
                        continue;
                    }
                    None if bears => {
                        stop = at;
                        break;
                    }
                    _ => {}
                }
            }
            // An item that writes nothing — an answer or an error — was
            // judged against the state before the group's writes (its
            // decision, a budget): it is planned again after them, and
            // stands alone as a group when it comes first, so a group the
            // log refuses always begins with a write.
            let (command, outcome, shadow, band_keys) = match t.plan_upsert(&*self.store, item.clone(), pre.clone()) {
                Err(_) | Ok(Plan::Answer { .. }) if grouped => {
                    stop = at;
                    break;
                }
                Err(e) => {
                    answers.push((i, Err(e)));
                    stop = at + 1;
                    break;
                }
                Ok(Plan::Answer { outcome, depends_on: d }) => {
                    depends_on = d;
                    answers.push((i, Ok(outcome)));
                    stop = at + 1;
                    break;
                }
                Ok(Plan::Write { command, outcome, shadow, band_keys }) => (command, outcome, shadow, band_keys),
            };
            let Command::Upsert { record, idem, .. } = command else {
                return Err(Error::state("an upsert was planned as another command"));
            };
            let hash = record.content_hash;
            let upsert = BatchedUpsert { record, idem };
            // The entry holds the record's note beside it (see `crate::event`).
            let size = postcard::experimental::serialized_size(&(&upsert, &upsert.record.note))
                .map_err(|e| Error::state(format!("sizing an upsert: {e}")))?;
            if grouped && (group.meets(&band_keys, &hash) || left.meets(&band_keys, &hash)) {
                if !may_leave_out(item, t.slot_of(&item.item_id).is_some(), &deferred) {
                    stop = at;
                    break;
                }
                // Found by planning (the prefingerprint was stale): left out.
                left.add(item, &band_keys, &hash);
                deferred.push(i);
                added_items += 1;
                added_bytes += item.content.len() as u64;
                continue;
            }
            // Counted whole, as if every write were new: near a budget the
            // group ends early rather than let a later write pass a limit
            // the earlier ones reach. A replacement takes its old version
            // out of the index, which a write left out before it may
            // share band keys with: it waits for them.
            let bytes = upsert.record.content_bytes;
            let replaced = outcome.status == UpsertStatus::Replaced;
            if grouped
                && (replaced && !deferred.is_empty()
                    || t.live_items + added_items + 1 > limits.max_items
                    || t.live_bytes + added_bytes + bytes > limits.max_bytes
                    || entry_bytes + size > max_entry)
            {
                stop = at;
                break;
            }
            group.add(item, &band_keys, &hash);
            added_items += 1;
            added_bytes += bytes;
            entry_bytes += size;
            // A replacement takes the old version's band keys and content
            // hash out of the index when applied; items planned before that
            // could still find it. It ends the group.
            answers.push((i, Ok(outcome)));
            writes.push((answers.len() - 1, upsert, shadow));
            if replaced {
                stop = at + 1;
                break;
            }
        }
        deferred.extend_from_slice(&pending[stop..]);
        let rest = deferred;
        if writes.is_empty() {
            return Ok(Group { answers, rest, lsn: depends_on });
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
            if let Ok(o) = &mut answers[at].1 {
                o.lsn = lsn;
            }
            if let (Some(s), Some((item_id, content))) = (t.shadow.as_mut(), shadow) {
                s.insert(&item_id, &content)?;
            }
        }
        Ok(Group { answers, rest, lsn: lsn.max(depends_on) })
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

/// Most writes one group leaves out for later ones before it ends: each
/// is looked at again by the next group.
const MAX_LEFT_OUT: usize = 64;

/// What one group wrote, and what it left.
struct Group {
    /// Each answered item's index and answer.
    answers: Vec<(usize, Result<UpsertOutcome>)>,
    /// The pending items not answered, in order.
    rest: Vec<usize>,
    /// The log position to wait for.
    lsn: u64,
}

/// What a set of writes touches: all that one write's decision reads of
/// the others (band keys and content hashes: all the index reads for a
/// query) or shares with them (ids, idempotency keys).
#[derive(Default)]
struct Touched {
    ids: std::collections::HashSet<String>,
    keys: std::collections::HashSet<String>,
    bands: std::collections::HashSet<u64>,
    hashes: std::collections::HashSet<[u8; 16]>,
}

impl Touched {
    fn add(&mut self, item: &Item, band_keys: &[u64], hash: &[u8; 16]) {
        self.ids.insert(item.item_id.clone());
        if let Some(k) = &item.idempotency_key {
            self.keys.insert(k.clone());
        }
        self.bands.extend(band_keys);
        self.hashes.insert(*hash);
    }

    /// Shares the item's id or idempotency key.
    fn names(&self, item: &Item) -> bool {
        self.ids.contains(&item.item_id) || item.idempotency_key.as_ref().is_some_and(|k| self.keys.contains(k))
    }

    /// Could find, or be found by, a write with `band_keys` and content `hash`.
    fn meets(&self, band_keys: &[u64], hash: &[u8; 16]) -> bool {
        band_keys.iter().any(|k| self.bands.contains(k)) || self.hashes.contains(hash)
    }
}

/// Answers `n` items a group at a time, single node or cluster:
/// `group(pending)` writes a group of the pending items (indices, in
/// order) and returns its answers (at least the first pending item's),
/// the items still pending, and the log position to wait for. When a
/// group's write fails (the log refused or lost it: on a single node it
/// then refuses every write; in cluster mode it did not answer in time,
/// and the next group would wait as long), every pending item is answered
/// with the error, at once. Returns every answer and the highest position.
fn in_groups(n: usize, mut group: impl FnMut(&[usize]) -> Result<Group>) -> (Vec<Result<UpsertOutcome>>, u64) {
    let mut out: Vec<Option<Result<UpsertOutcome>>> = (0..n).map(|_| None).collect();
    let mut pending: Vec<usize> = (0..n).collect();
    let mut last = 0;
    while let Some(&first) = pending.first() {
        match group(&pending) {
            Ok(g) if g.answers.iter().any(|(i, _)| *i == first) => {
                last = last.max(g.lsn);
                for (i, r) in g.answers {
                    out[i] = Some(r);
                }
                pending = g.rest;
            }
            Ok(_) => {
                out[first] = Some(Err(Error::state("a group of writes left its first item unanswered")));
                pending.remove(0);
            }
            Err(e) => {
                for i in pending.drain(..) {
                    out[i] = Some(Err(e.clone()));
                }
            }
        }
    }
    let out = out.into_iter().map(|r| r.unwrap_or_else(|| Err(Error::state("a write was left unanswered")))).collect();
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
