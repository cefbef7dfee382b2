//! What a reviewer and the dashboards read: the review queue, a pair side
//! by side with what it shares, an item's neighbourhood, and the current
//! policy judged against reviewers' labels. Read-only, like `queries.rs`.

use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::ops::ControlFlow;

use serde::Serialize;

use super::{poisoned, Engine, Query};
use crate::decision::{DecisionState, MatchVerdict, Verification};
use crate::error::Result;
use crate::feedback::{Label, LabelEvent};
use crate::item::{ItemInfo, ItemRecord};

/// A page of the review queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewQueue {
    /// Flagged live items, newest write first.
    pub items: Vec<QueuedItem>,
    /// Records read to build the page (the whole tenant: see
    /// [`Engine::review_queue`]).
    pub scanned: u64,
    /// Flagged items in the tenant in the asked states, this page included.
    pub total: u64,
}

/// One item of the review queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueuedItem {
    /// The item as stored.
    pub item: ItemInfo,
    /// The log position of the write that stored this version: the queue's
    /// order and its page cursor.
    pub lsn: u64,
    /// Label events naming this item, on either side.
    pub labels: u32,
}

/// One side of a [`Comparison`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// The item.
    pub item: ItemInfo,
    /// Its stored content cut into runs, each marked when it is covered by
    /// a shingle the other side shares; `None` when the tenant does not
    /// store content.
    pub segments: Option<Vec<TextRun>>,
}

/// A run of an item's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TextRun {
    /// The text.
    pub text: String,
    /// Part of a shingle the other item shares.
    pub shared: bool,
}

/// Two items side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Exact score and verdict under the tenant's policy.
    pub verification: Verification,
    /// The left item.
    pub left: Side,
    /// The right item.
    pub right: Side,
    /// Label events naming either item (this pair or another), oldest first.
    pub labels: Vec<LabelEvent>,
}

/// An item's neighbourhood: the items reachable from it through verified
/// pairs at or above the similar threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Neighbourhood {
    /// The item asked about.
    pub item_id: String,
    /// Members other than the item, nearest (fewest hops, then best score) first.
    pub members: Vec<Member>,
    /// Every verified pair found among the members, each once.
    pub edges: Vec<Edge>,
    /// The walk stopped at the member limit: the cluster may be larger.
    pub truncated: bool,
}

/// A member of a [`Neighbourhood`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Member {
    /// The item.
    pub item_id: String,
    /// Pairs between it and the item asked about (1: a direct neighbour).
    pub hops: u32,
    /// Its best verified score to a member one hop closer.
    pub score: f64,
}

/// A verified pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edge {
    /// One item.
    pub left: String,
    /// The other.
    pub right: String,
    /// Exact score.
    pub score: f64,
}

/// The current policy judged against reviewers' labels.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelEvaluation {
    /// Distinct labelled pairs.
    pub pairs: u64,
    /// Pairs whose labels disagree (one says distinct, another a duplicate
    /// kind): left out of precision and recall, so a flood of
    /// contradictory labels cannot move them.
    pub disputed: u64,
    /// Pairs whose items are gone (tombstoned): left out too.
    pub missing: u64,
    /// Pairs not verified because more than [`MAX_EVALUATED_PAIRS`] are
    /// labelled (the most recently labelled ones are evaluated).
    pub not_evaluated: u64,
    /// Labelled duplicates (or near duplicates) the policy also flags.
    pub true_positives: u64,
    /// Labelled distinct pairs the policy flags.
    pub false_positives: u64,
    /// Labelled duplicates the policy does not flag.
    pub false_negatives: u64,
    /// Labelled distinct pairs the policy does not flag.
    pub true_negatives: u64,
    /// TP / (TP + FP), with its 95 % Wilson interval; `None` without a flagged pair.
    pub precision: Option<Estimate>,
    /// TP / (TP + FN), with its 95 % Wilson interval; `None` without a labelled duplicate.
    pub recall: Option<Estimate>,
}

/// A proportion and its 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The point estimate.
    pub value: f64,
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

impl Estimate {
    fn of(successes: u64, total: u64) -> Option<Estimate> {
        (total > 0).then(|| {
            let (low, high) = neardup_core::wilson_interval(successes, total);
            Estimate { value: successes as f64 / total as f64, low, high }
        })
    }
}

/// Most members [`Engine::neighbourhood`] returns.
pub const MAX_NEIGHBOURHOOD: usize = 500;

/// A labelled pair's labels: seen positive, seen negative, the position of
/// its last label.
type PairLabels = (bool, bool, usize);

/// Most labelled pairs [`Engine::label_evaluation`] verifies (each is an
/// exact verification reading two records): the most recently labelled.
pub const MAX_EVALUATED_PAIRS: usize = 10_000;

impl Engine {
    /// Live items whose decision when written is one of `states`, newest
    /// write first (then by item id), those after the cursor `before` —
    /// the last item of the previous page, `(log position, item id)`: one
    /// position can hold many items (a cluster's batch entry) — at most
    /// `limit`. Reads every record of the tenant from a
    /// frozen view of the store, holding no lock and at most `limit`
    /// entries: about a second per million items, so it is a page of a
    /// console, not a hot path.
    pub fn review_queue(
        &self,
        tenant: &str,
        states: &[DecisionState],
        before: Option<(u64, &str)>,
        limit: usize,
    ) -> Result<ReviewQueue> {
        use std::cmp::Reverse;
        let (view, labels, mut fingerprinter) = {
            let t = self.tenant(tenant)?;
            let t = t.read().map_err(|_| poisoned())?;
            (self.store.view(&t.name)?, t.labels.clone(), t.fingerprinter())
        };
        let mut scanned = 0u64;
        let mut total = 0u64;
        // Queue order: newest write first, then item id. `key` grows
        // towards the front; a page keeps the `limit` largest keys below
        // the cursor (a min-heap), with their records (features derived
        // again, where the store left them out, only for those returned).
        let key = |lsn: u64, id: &str| (lsn, Reverse(id.to_string()));
        let cursor = before.map(|(lsn, id)| key(lsn, id));
        let mut heap: BinaryHeap<Reverse<(u64, Reverse<String>)>> = BinaryHeap::new();
        let mut kept: BTreeMap<String, ItemRecord> = BTreeMap::new();
        view.scan(&mut |r| {
            scanned += 1;
            if !r.is_live() || !states.contains(&r.decision) {
                return Ok(ControlFlow::Continue(()));
            }
            total += 1;
            let k = key(r.lsn, &r.item_id);
            if cursor.as_ref().is_some_and(|c| &k >= c) || limit == 0 {
                return Ok(ControlFlow::Continue(()));
            }
            if heap.len() == limit {
                match heap.peek() {
                    Some(Reverse(smallest)) if *smallest < k => {
                        if let Some(Reverse((_, Reverse(id)))) = heap.pop() {
                            kept.remove(&id);
                        }
                    }
                    _ => return Ok(ControlFlow::Continue(())),
                }
            }
            heap.push(Reverse(k));
            kept.insert(r.item_id.clone(), r);
            Ok(ControlFlow::Continue(()))
        })?;
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for l in &labels {
            *counts.entry(&l.left).or_default() += 1;
            if l.right != l.left {
                *counts.entry(&l.right).or_default() += 1;
            }
        }
        let lsns: BTreeMap<String, u64> = heap.into_iter().map(|Reverse((lsn, Reverse(id)))| (id, lsn)).collect();
        let mut items = Vec::with_capacity(kept.len());
        for mut r in kept.into_values() {
            r.derive_features(&mut fingerprinter)?;
            items.push(QueuedItem {
                lsn: lsns.get(&r.item_id).copied().unwrap_or(0),
                labels: counts.get(r.item_id.as_str()).copied().unwrap_or(0),
                item: ItemInfo::from(&r),
            });
        }
        items.sort_by(|a, b| b.lsn.cmp(&a.lsn).then_with(|| a.item.item_id.cmp(&b.item.item_id)));
        Ok(ReviewQueue { items, scanned, total })
    }

    /// Two live items side by side: the exact verification under the
    /// tenant's policy, each text cut into runs marked where a shingle is
    /// shared ([`neardup_core::shared_segments`]), and the labels naming either item.
    pub fn compare(&self, tenant: &str, left: &str, right: &str) -> Result<Comparison> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        // One read of each record, under one lock: the verification and
        // the highlighted texts describe the same state.
        let (l, r) = (self.live_record(&t, left)?, self.live_record(&t, right)?);
        let verification = super::queries::verification(&t.policy, &l, &r);
        let config = t.params.config();
        let side = |me: &ItemRecord, other: &ItemRecord| Side {
            item: ItemInfo::from(me),
            segments: me.content.as_ref().map(|text| {
                neardup_core::shared_segments(text, config, &other.features)
                    .into_iter()
                    .map(|s| TextRun { text: text[s.start..s.end].to_string(), shared: s.shared })
                    .collect()
            }),
        };
        let names = |e: &LabelEvent, id: &str| e.left == id || e.right == id;
        let labels = t.labels.iter().filter(|e| names(e, left) || names(e, right)).cloned().collect();
        Ok(Comparison { left: side(&l, &r), right: side(&r, &l), verification, labels })
    }

    /// The items reachable from `item_id` through verified pairs scoring at
    /// least the policy's similar threshold: a breadth-first walk of
    /// candidate queries, at most `max_members` members (and
    /// [`MAX_NEIGHBOURHOOD`]).
    pub fn neighbourhood(&self, tenant: &str, item_id: &str, max_members: usize) -> Result<Neighbourhood> {
        let max = max_members.min(MAX_NEIGHBOURHOOD);
        let similar = self.tenant_config(tenant)?.policy.threshold_similar;
        let mut seen: BTreeMap<String, (u32, f64)> = BTreeMap::new();
        seen.insert(item_id.to_string(), (0, 1.0));
        let mut edges: BTreeMap<(String, String), f64> = BTreeMap::new();
        let mut queue: VecDeque<(String, u32)> = VecDeque::from([(item_id.to_string(), 0)]);
        let mut truncated = false;
        while let Some((id, hops)) = queue.pop_front() {
            let d = match self.query_with(tenant, Query::Item(&id), None, false) {
                Ok(d) => d,
                // Tombstoned since it was found: not a member any more.
                Err(e) if e.code() == "item_not_found" && id != item_id => continue,
                Err(e) => return Err(e),
            };
            for c in d.candidates.iter().filter(|c| c.score >= similar && c.verdict != MatchVerdict::Different) {
                let key =
                    if id < c.item_id { (id.clone(), c.item_id.clone()) } else { (c.item_id.clone(), id.clone()) };
                edges.insert(key, c.score);
                if let Some(m) = seen.get_mut(&c.item_id) {
                    // Its best score to a member one hop closer.
                    if m.0 == hops + 1 && c.score > m.1 {
                        m.1 = c.score;
                    }
                    continue;
                }
                if seen.len() > max {
                    truncated = true;
                    continue;
                }
                seen.insert(c.item_id.clone(), (hops + 1, c.score));
                queue.push_back((c.item_id.clone(), hops + 1));
            }
        }
        let mut members: Vec<Member> = seen
            .into_iter()
            .filter(|(id, _)| id != item_id)
            .map(|(item_id, (hops, score))| Member { item_id, hops, score })
            .collect();
        members.sort_by(|a, b| a.hops.cmp(&b.hops).then(b.score.total_cmp(&a.score)).then(a.item_id.cmp(&b.item_id)));
        let names: BTreeSet<&str> = members.iter().map(|m| m.item_id.as_str()).chain([item_id]).collect();
        let edges = edges
            .into_iter()
            .filter(|((l, r), _)| names.contains(l.as_str()) && names.contains(r.as_str()))
            .map(|((left, right), score)| Edge { left, right, score })
            .collect();
        Ok(Neighbourhood { item_id: item_id.to_string(), members, edges, truncated })
    }

    /// The tenant's current policy against its reviewers' labels: each
    /// labelled pair is verified now and counted as flagged when its verdict
    /// is identical or similar; a pair labelled `duplicate` or
    /// `near_duplicate` is a positive. Pairs with contradictory labels are
    /// counted as disputed and left out, as are pairs with an item gone.
    /// At most [`MAX_EVALUATED_PAIRS`] pairs are verified, the most
    /// recently labelled; the rest are counted as `not_evaluated`.
    pub fn label_evaluation(&self, tenant: &str) -> Result<LabelEvaluation> {
        let labels = self.labels(tenant)?;
        // Per unordered pair: (seen positive, seen negative, last label's position).
        let mut pairs: BTreeMap<(String, String), PairLabels> = BTreeMap::new();
        for (seq, l) in labels.iter().enumerate() {
            let key =
                if l.left <= l.right { (l.left.clone(), l.right.clone()) } else { (l.right.clone(), l.left.clone()) };
            let e = pairs.entry(key).or_default();
            match l.label {
                Label::Duplicate | Label::NearDuplicate => e.0 = true,
                Label::Distinct => e.1 = true,
            }
            e.2 = seq;
        }
        let total = pairs.len();
        let mut pairs: Vec<((String, String), PairLabels)> = pairs.into_iter().collect();
        if total > MAX_EVALUATED_PAIRS {
            pairs.sort_by_key(|p| std::cmp::Reverse(p.1 .2));
            pairs.truncate(MAX_EVALUATED_PAIRS);
        }
        let mut ev = LabelEvaluation {
            pairs: total as u64,
            disputed: 0,
            missing: 0,
            not_evaluated: (total - pairs.len()) as u64,
            true_positives: 0,
            false_positives: 0,
            false_negatives: 0,
            true_negatives: 0,
            precision: None,
            recall: None,
        };
        for ((l, r), (pos, neg, _)) in &pairs {
            if *pos && *neg {
                ev.disputed += 1;
                continue;
            }
            let flagged = match self.verify(tenant, l, r, None) {
                Ok(v) => v.verdict != MatchVerdict::Different,
                Err(e) if e.code() == "item_not_found" => {
                    ev.missing += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            match (pos, flagged) {
                (true, true) => ev.true_positives += 1,
                (true, false) => ev.false_negatives += 1,
                (false, true) => ev.false_positives += 1,
                (false, false) => ev.true_negatives += 1,
            }
        }
        ev.precision = Estimate::of(ev.true_positives, ev.true_positives + ev.false_positives);
        ev.recall = Estimate::of(ev.true_positives, ev.true_positives + ev.false_negatives);
        Ok(ev)
    }
}
