//! What an upsert becomes: the tenant's rules on item ids, epochs,
//! idempotency keys and budgets, applied to its current state. The engine
//! only locks, logs and applies the plan.

use neardup_core::Fingerprint;

use crate::command::{Command, IdemEntry};
use crate::decision::{UpsertOutcome, UpsertStatus};
use crate::error::{Error, ErrorKind, Result};
use crate::item::{FeaturesAt, Item, ItemRecord, PackedContent};
use crate::store::Store;
use crate::tenant_config::check_item_id;

use super::Tenant;

/// The outcome of planning an upsert. Made and consumed once per upsert, so
/// the size of its variants does not matter.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Plan {
    /// The answer, with nothing to write (a replayed idempotency key, or
    /// the same content at the same epoch). It speaks of the record written
    /// at `depends_on`, which must be durable before the answer is given.
    Answer {
        /// The answer.
        outcome: UpsertOutcome,
        /// The LSN of the write the answer reports.
        depends_on: u64,
    },
    /// Log and apply `command`, then answer `outcome` with the command's LSN.
    Write {
        /// The command to log.
        command: Command,
        /// The answer, its `lsn` still 0.
        outcome: UpsertOutcome,
        /// The item as sent, for the shadow index (set only when one is active).
        shadow: Option<(String, String)>,
        /// The item's LSH band keys (a cluster batch groups only writes
        /// that share none).
        band_keys: Vec<u64>,
    },
}

/// What fingerprinting an upsert's content needs, copied from the tenant
/// under its lock and used outside it, so concurrent writers fingerprint
/// in parallel — with each other, and with a round of writes holding the
/// lock. A copy made before a change of parameters fingerprints under the
/// old version, which the plan notices (it compares versions) and makes
/// again under the lock: a stale copy costs time, never a wrong answer.
#[derive(Debug, Clone)]
pub(crate) struct Prefingerprinter {
    version: String,
    fingerprinter: neardup_core::Fingerprinter,
    max_item_bytes: u64,
    retain_content: bool,
    /// Packs retained content (off: the store will compress it itself).
    pack: bool,
}

/// An upsert's content made ready outside the tenant's lock: its
/// fingerprint, under the fingerprint version named, and the content
/// compressed for the store when the tenant keeps it.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub(crate) version: String,
    pub(crate) fp: Fingerprint,
    pub(crate) packed: PackedContent,
}

impl Prefingerprinter {
    /// `item`'s content made ready: its fingerprint, tagged with the
    /// fingerprint version it was made under, and (when the tenant keeps
    /// content) the content compressed; `None` for content over the size
    /// limit (the plan refuses it).
    pub(crate) fn prepare(&self, item: &Item) -> Option<Prepared> {
        self.fits(item).then(|| self.prepared(item, self.fingerprinter.clone().fingerprint(&item.content)))
    }

    /// [`Prefingerprinter::prepare`] of each item, in order: one
    /// fingerprinter for them all, and the content hashes of several
    /// computed side by side ([`neardup_core::Fingerprinter::fingerprint_many`]).
    pub(crate) fn prepare_many(&self, items: &[Item]) -> Vec<Option<Prepared>> {
        let mut fingerprints = Vec::with_capacity(items.len());
        self.fingerprinter
            .clone()
            .fingerprint_many(items.iter().filter(|i| self.fits(i)).map(|i| i.content.as_str()), &mut fingerprints);
        let mut fingerprints = fingerprints.into_iter();
        items
            .iter()
            .map(|item| {
                self.fits(item)
                    .then(|| self.prepared(item, fingerprints.next().expect("a fingerprint per item that fits")))
            })
            .collect()
    }

    /// Whether `item`'s content is within the size limit.
    fn fits(&self, item: &Item) -> bool {
        item.content.len() as u64 <= self.max_item_bytes
    }

    /// `item` made ready with its fingerprint.
    fn prepared(&self, item: &Item, fp: Fingerprint) -> Prepared {
        Prepared {
            version: self.version.clone(),
            fp,
            packed: match self.retain_content && self.pack {
                true => PackedContent::of(&item.content),
                false => PackedContent::default(),
            },
        }
    }

    /// Made under `t`'s present parameters, limit and content rule.
    pub(crate) fn is_current(&self, t: &Tenant) -> bool {
        self.version == t.version
            && self.max_item_bytes == t.config.limits.max_item_bytes
            && self.retain_content == t.config.retain_content
    }
}

impl Tenant {
    /// What fingerprinting an upsert's content needs, to be used outside
    /// the tenant's lock (see [`Prefingerprinter`]); `pack`: compress
    /// retained content for the store too (off where the store will not
    /// take it as it comes: cluster mode).
    pub(crate) fn prefingerprinter(&self, pack: bool) -> Prefingerprinter {
        Prefingerprinter {
            version: self.version.clone(),
            fingerprinter: self.fingerprinter(),
            max_item_bytes: self.config.limits.max_item_bytes,
            retain_content: self.config.retain_content,
            pack,
        }
    }

    /// Checks `item` against the tenant's limits and state and decides
    /// what to do with it. Reads the store; changes nothing but counters.
    ///
    /// Re-upserting an item id: the same content at the same (or no) epoch
    /// is `Unchanged`; different content needs an epoch above the current
    /// one (`item_exists` without an epoch, `stale_epoch` with a lower one),
    /// and then replaces the item. After a tombstone at epoch `e`, the id
    /// comes back only with an epoch above `e`.
    pub(crate) fn plan_upsert(&self, store: &dyn Store, item: Item, pre: Option<Prepared>) -> Result<Plan> {
        check_item_id(&item.item_id)?;
        item.check_media_type()?;
        if let Some(e) = item.epoch {
            crate::tenant_config::check_epoch(e)?;
        }
        let limits = &self.config.limits;
        let len = item.content.len() as u64;
        if len > limits.max_item_bytes {
            return Err(Error::new(ErrorKind::TooLarge {
                limit: "max_item_bytes",
                max: limits.max_item_bytes,
                actual: len,
            }));
        }
        if let Some(v) = &item.normalization_version {
            let want = self.params.config().normalizer.version();
            if v != want {
                return Err(Error::input(
                    "normalization_version",
                    format!("{v:?} does not match the tenant's {want:?}"),
                ));
            }
        }
        // The request's digest matters only to an idempotency key: it is a
        // hash of the whole text, so it is not taken for writes without one.
        let digest = item.idempotency_key.as_ref().map(|_| item.request_digest());
        if let (Some(key), Some(digest)) = (&item.idempotency_key, digest) {
            if key.is_empty() || key.len() > 256 {
                return Err(Error::input("idempotency_key", "must be 1..=256 bytes"));
            }
            if let Some(e) = self.idempotent(key) {
                if e.digest != digest {
                    return Err(Error::new(ErrorKind::IdempotencyConflict { key: key.clone() }));
                }
                let mut o = e.outcome.clone();
                o.status = UpsertStatus::Replayed;
                let depends_on = o.lsn;
                return Ok(Plan::Answer { outcome: o, depends_on });
            }
        }
        // A rebuild between fingerprinting and planning changes the version.
        let (fp, packed) = match pre {
            Some(p) if p.version == self.version => (p.fp, p.packed),
            // The packed content does not depend on the parameters.
            Some(p) => (self.fingerprint(&item.content), p.packed),
            None => (self.fingerprint(&item.content), PackedContent::default()),
        };
        let existing = match self.slot_of(&item.item_id) {
            Some(slot) => Some((slot, store.get(&self.name, &item.item_id)?)),
            None => None,
        };
        let (epoch, status, exclude, old_bytes) = match existing {
            Some((slot, Some(old))) => {
                let same =
                    Some(old.content_hash) == self.content_hash_of_slot(slot) && old.content_hash == fp.content_hash.0;
                match item.epoch {
                    None | Some(_) if same && item.epoch.is_none_or(|e| e == old.epoch) => {
                        let decision = self.evaluate(store, &fp, Some(slot))?;
                        let outcome = UpsertOutcome {
                            item_id: item.item_id,
                            epoch: old.epoch,
                            lsn: 0,
                            status: UpsertStatus::Unchanged,
                            decision,
                        };
                        return Ok(Plan::Answer { outcome, depends_on: old.lsn });
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
                let floor = self.tombstones.get(&item.item_id).copied();
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
        if status == UpsertStatus::Inserted && self.live_items + 1 > limits.max_items {
            return Err(Error::new(ErrorKind::BudgetExceeded {
                limit: "max_items",
                max: limits.max_items,
                actual: self.live_items + 1,
            }));
        }
        let bytes_after = self.live_bytes - old_bytes.min(self.live_bytes) + len;
        if bytes_after > limits.max_bytes {
            return Err(Error::new(ErrorKind::BudgetExceeded {
                limit: "max_bytes",
                max: limits.max_bytes,
                actual: bytes_after,
            }));
        }
        let decision = self.evaluate(store, &fp, exclude)?;
        if let Some(shadow) = &self.shadow {
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
            degraded_shingles: fp.degraded_shingles(),
            features: fp.features,
            signature: fp.signature,
            media_type: item.media_type.clone(),
            source_time: item.source_time,
            content_bytes: len,
            content: self.config.retain_content.then(|| item.content.clone()),
            tombstone: None,
            decision: outcome.decision.state,
            features_at: FeaturesAt::Here,
            packed: if self.config.retain_content { packed } else { PackedContent::default() },
            note: Some(Box::new(crate::decision::ItemNote::of(&outcome))),
        };
        let idem = (item.idempotency_key.clone()).zip(digest).map(|(key, digest)| IdemEntry {
            key,
            digest,
            outcome: outcome.clone(),
        });
        let command = Command::Upsert { tenant: self.name.clone(), record: Box::new(record), idem: idem.map(Box::new) };
        let shadow = self.shadow.is_some().then_some((item.item_id, item.content));
        Ok(Plan::Write { command, outcome, shadow, band_keys: fp.band_keys })
    }
}
