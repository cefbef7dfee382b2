//! Queries: decisions, candidates and exact verification (read-only), and
//! reads of items, labels and figures.

use std::ops::ControlFlow;

use super::{poisoned, Engine, Query, TenantStats};
use crate::decision::{Decision, MatchVerdict, PolicyRef, ScoredCandidate, Verification};
use crate::error::{Error, ErrorKind, Result};
use crate::feedback::LabelEvent;
use crate::item::{ItemInfo, ItemRecord};
use crate::tenant_config::PolicyConfig;

impl Engine {
    /// The decision `content` would get, without writing anything.
    pub fn decide(&self, tenant: &str, content: &str) -> Result<Decision> {
        self.query(tenant, Query::Content(content), None)
    }

    /// Verified candidates for new content or a stored item, best first,
    /// at most `limit` of them (the decision is made on all of them first;
    /// `over_cap` says whether retrieval itself was capped).
    pub fn candidates(&self, tenant: &str, query: Query<'_>, limit: usize) -> Result<Decision> {
        self.query(tenant, query, Some(limit))
    }

    fn query(&self, tenant: &str, query: Query<'_>, limit: Option<usize>) -> Result<Decision> {
        self.query_with(tenant, query, limit, true)
    }

    /// A query; with `observe`, a shadow index answers it too and counts
    /// the disagreement (the engine's own walks, like a neighbourhood, pass
    /// `false`: they are not traffic the migration should be judged on).
    pub(crate) fn query_with(
        &self,
        tenant: &str,
        query: Query<'_>,
        limit: Option<usize>,
        observe: bool,
    ) -> Result<Decision> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        let (fp, exclude, content) = match query {
            Query::Content(c) => {
                let len = c.len() as u64;
                if len > t.config.limits.max_item_bytes {
                    return Err(Error::new(ErrorKind::TooLarge {
                        limit: "max_item_bytes",
                        max: t.config.limits.max_item_bytes,
                        actual: len,
                    }));
                }
                (t.fingerprint(c), None, Some(c.to_string()))
            }
            Query::Item(id) => {
                let slot = t.slot_of(id).ok_or_else(|| Error::item_not_found(id))?;
                let mut r = self.store.get(&t.name, id)?.ok_or_else(|| Error::item_not_found(id))?;
                let fp = t.stored_fingerprint(&mut r)?;
                (fp, Some(slot), r.content)
            }
        };
        let mut d = t.evaluate(&*self.store, &fp, exclude)?;
        if let (Some(shadow), Some(c), true) = (&t.shadow, content, observe) {
            let exclude_id = match query {
                Query::Item(id) => Some(id),
                Query::Content(_) => None,
            };
            let sd = shadow.evaluate(&c, exclude_id)?;
            shadow.observe(&d, &sd);
        }
        if let Some(limit) = limit {
            d.candidates.truncate(limit);
        }
        Ok(d)
    }

    /// Exact score of two stored items under the tenant's policy or `policy`.
    pub fn verify(&self, tenant: &str, left: &str, right: &str, policy: Option<PolicyConfig>) -> Result<Verification> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        let p = match policy {
            Some(p) => neardup_core::Policy::new(p.id, p.version, p.threshold_identical, p.threshold_similar)?,
            None => t.policy.clone(),
        };
        let (l, r) = (self.live_record(&t, left)?, self.live_record(&t, right)?);
        Ok(verification(&p, &l, &r))
    }

    /// `item_id`'s record in tenant `t`, if live, with its features.
    pub(crate) fn live_record(&self, t: &crate::tenant::Tenant, item_id: &str) -> Result<ItemRecord> {
        let mut r = self
            .store
            .get(&t.name, item_id)?
            .filter(ItemRecord::is_live)
            .ok_or_else(|| Error::item_not_found(item_id))?;
        t.complete(&mut r)?;
        Ok(r)
    }
}

/// The exact score of two records under `p`, with its explanation.
pub(crate) fn verification(p: &neardup_core::Policy, l: &ItemRecord, r: &ItemRecord) -> Verification {
    let (lh, rh) = (neardup_core::ContentHash(l.content_hash), neardup_core::ContentHash(r.content_hash));
    let s = ScoredCandidate::verify(p, &l.features, &lh, &r.features, &rh, &r.item_id, 0);
    let verdict = s.verdict;
    let explanation = format!(
        "{}: exact Jaccard {:.4}{} against identical {:.2} / similar {:.2} (policy {}@v{})",
        match verdict {
            MatchVerdict::Identical => "identical",
            MatchVerdict::Similar => "similar",
            MatchVerdict::Different => "different",
        },
        s.score,
        if s.same_content { " (same content hash)" } else { "" },
        p.threshold_identical,
        p.threshold_similar,
        p.id,
        p.version
    );
    Verification {
        left: l.item_id.clone(),
        right: r.item_id.clone(),
        score: s.score,
        same_content: s.same_content,
        verdict,
        policy: PolicyRef::from(p),
        explanation,
    }
}

impl Engine {
    /// A stored item (tombstoned ones too, until compaction).
    pub fn get(&self, tenant: &str, item_id: &str) -> Result<Option<ItemInfo>> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        match self.store.get(&t.name, item_id)? {
            Some(mut r) => {
                t.complete(&mut r)?;
                Ok(Some(ItemInfo::from(&r)))
            }
            None => Ok(None),
        }
    }

    /// Live items in item id order, after `after`, at most `limit`.
    pub fn list(&self, tenant: &str, after: Option<&str>, limit: usize) -> Result<Vec<ItemInfo>> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        // The store scans in id order from just after `after`; a real error
        // is returned, a full page just stops the scan.
        self.store.scan(&t.name, after, &mut |mut r| {
            if r.is_live() {
                t.complete(&mut r)?;
                out.push(ItemInfo::from(&r));
            }
            Ok(if out.len() >= limit { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
        })?;
        Ok(out)
    }

    /// Live item ids in write order (cheap: from memory).
    pub fn live_ids(&self, tenant: &str) -> Result<Vec<String>> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        Ok(t.live_ids().map(str::to_string).collect())
    }

    /// Figures for a tenant.
    pub fn stats(&self, tenant: &str) -> Result<TenantStats> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        Ok(TenantStats {
            tenant: t.name.clone(),
            version: t.version.clone(),
            live_items: t.live_items,
            live_bytes: t.live_bytes,
            stored_records: t.stored_records,
            tombstones: t.tombstones.len() as u64,
            labels: t.labels.len() as u64,
            largest_bucket: t.largest_bucket(),
            resident_bytes_estimate: t.resident_estimate(),
            counters: t.counters.lock().map(|c| c.clone()).unwrap_or_default(),
            screen_bits: t.params.config().screen_bits,
            shadow: t.shadow.is_some(),
        })
    }

    /// Band buckets by size: element `i` counts the buckets holding
    /// `[2^i, 2^(i+1))` items. Walks every bucket of every band (not part
    /// of [`Engine::stats`], which `/metrics` reads on every scrape).
    pub fn bucket_sizes(&self, tenant: &str) -> Result<Vec<u64>> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        Ok(t.bucket_sizes())
    }

    /// Every label event of a tenant, oldest first.
    pub fn labels(&self, tenant: &str) -> Result<Vec<LabelEvent>> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        Ok(t.labels.clone())
    }
}
