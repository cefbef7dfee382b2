//! Decisions: verified candidates, the policy that judged them, the state
//! they lead to and a readable explanation.
//!
//! "No candidate" is never proof of uniqueness: the state for it is
//! [`DecisionState::Distinct`] and its explanation says that only the
//! retrieved candidates were checked. A partial candidate set (over the cap,
//! or a hot bucket read partially) without a verified duplicate is
//! [`DecisionState::Review`]; an item that could only be matched by exact
//! hash (over the shingle cap) and had no exact match is
//! [`DecisionState::Quarantined`].

use neardup_core::{CandidateSet, Fingerprint, Policy, Verdict};
use serde::{Deserialize, Serialize};

/// The state a decision leaves an item in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionState {
    /// No retrieved candidate reached the similar threshold. Not a proof of
    /// uniqueness: candidates are probabilistic.
    Distinct,
    /// A verified candidate reached the identical threshold (or has equal content).
    Duplicate,
    /// A verified candidate reached the similar threshold.
    NearDuplicate,
    /// The candidate set was partial (cap or hot bucket) and nothing verified
    /// as a duplicate: a person or a later pass must look.
    Review,
    /// The item could be matched by exact hash only (over the shingle cap)
    /// and had no exact match: held back from destructive action.
    Quarantined,
}

impl DecisionState {
    /// `distinct`, `duplicate`, `near_duplicate`, `review` or `quarantined`.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionState::Distinct => "distinct",
            DecisionState::Duplicate => "duplicate",
            DecisionState::NearDuplicate => "near_duplicate",
            DecisionState::Review => "review",
            DecisionState::Quarantined => "quarantined",
        }
    }
}

/// A policy verdict for one verified pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchVerdict {
    /// At or above the identical threshold.
    Identical,
    /// At or above the similar threshold.
    Similar,
    /// Below it.
    Different,
}

impl From<Verdict> for MatchVerdict {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Identical => MatchVerdict::Identical,
            Verdict::Similar => MatchVerdict::Similar,
            Verdict::Different => MatchVerdict::Different,
        }
    }
}

/// A candidate after exact verification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredCandidate {
    /// The candidate's item id.
    pub item_id: String,
    /// Exact Jaccard on canonical features (1 for equal content hashes).
    pub score: f64,
    /// The policy's verdict.
    pub verdict: MatchVerdict,
    /// Equal content hashes.
    pub same_content: bool,
    /// LSH bands shared with the query (0: found by exact hash only).
    pub bands_shared: u16,
}

impl ScoredCandidate {
    /// Scores a candidate by the one exact rule ([`neardup_core::verify_pair`])
    /// and judges it by `policy`.
    pub(crate) fn verify(
        policy: &Policy,
        features: &[u64],
        hash: &neardup_core::ContentHash,
        other: &[u64],
        other_hash: &neardup_core::ContentHash,
        item_id: &str,
        bands: u16,
    ) -> ScoredCandidate {
        let s = neardup_core::verify_pair(features, hash, other, other_hash, 0.0)
            .unwrap_or(neardup_core::PairScore { score: 0.0, same_content: false });
        ScoredCandidate {
            item_id: item_id.to_string(),
            score: s.score,
            verdict: MatchVerdict::from(policy.classify(s.score, s.same_content)),
            same_content: s.same_content,
            bands_shared: bands,
        }
    }

    /// A candidate known to hold the same content (equal content hashes)
    /// without its features: exact-hash-only mode.
    pub(crate) fn same_content(policy: &Policy, item_id: &str, bands: u16) -> ScoredCandidate {
        ScoredCandidate {
            item_id: item_id.to_string(),
            score: 1.0,
            verdict: MatchVerdict::from(policy.classify(1.0, true)),
            same_content: true,
            bands_shared: bands,
        }
    }
}

/// Sorts verified candidates best first: score, then item id.
pub(crate) fn sort_best_first(v: &mut [ScoredCandidate]) {
    v.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.item_id.cmp(&b.item_id)));
}

/// The policy a decision was made under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyRef {
    /// Policy id.
    pub id: String,
    /// Policy version.
    pub version: u32,
    /// Identical threshold.
    pub threshold_identical: f64,
    /// Similar threshold.
    pub threshold_similar: f64,
}

impl From<&Policy> for PolicyRef {
    fn from(p: &Policy) -> Self {
        PolicyRef {
            id: p.id.clone(),
            version: p.version,
            threshold_identical: p.threshold_identical,
            threshold_similar: p.threshold_similar,
        }
    }
}

/// The full answer for one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The resulting state.
    pub state: DecisionState,
    /// How candidates were found and scored.
    pub method: String,
    /// The tenant's fingerprint version (normalizer, shingles, hashes,
    /// signature, LSH layout): candidates are only comparable within it.
    pub method_version: String,
    /// The policy.
    pub policy: PolicyRef,
    /// Verified candidates, best first (score, then item id).
    pub candidates: Vec<ScoredCandidate>,
    /// Distinct candidates seen before the cap.
    pub candidates_seen: u64,
    /// True when the candidate set was capped.
    pub over_cap: bool,
    /// Buckets read partially because they were over `max_bucket_read`.
    pub hot_buckets: u32,
    /// Set when the item was matched by exact hash only.
    pub degraded: Option<String>,
    /// One or two sentences a person can read.
    pub explanation: String,
}

impl Decision {
    /// The best verified candidate, if any.
    pub fn closest(&self) -> Option<&ScoredCandidate> {
        self.candidates.first()
    }
}

/// What `upsert` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpsertStatus {
    /// A new item id.
    Inserted,
    /// A new epoch replaced the previous version.
    Replaced,
    /// The same content at the same epoch was already stored: nothing written.
    Unchanged,
    /// The idempotency key was seen before: the first answer, nothing written.
    Replayed,
}

/// The answer to an upsert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpsertOutcome {
    /// The item id.
    pub item_id: String,
    /// Its epoch after the command.
    pub epoch: u64,
    /// Log sequence number of the command (0 when nothing was written).
    pub lsn: u64,
    /// What happened.
    pub status: UpsertStatus,
    /// The decision for the content.
    pub decision: Decision,
}

/// The answer to `verify(left, right, policy)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// Left item id.
    pub left: String,
    /// Right item id.
    pub right: String,
    /// Exact Jaccard (1 for equal content hashes).
    pub score: f64,
    /// Equal content hashes.
    pub same_content: bool,
    /// The policy's verdict.
    pub verdict: MatchVerdict,
    /// The policy.
    pub policy: PolicyRef,
    /// Readable reason.
    pub explanation: String,
}

/// Inputs to [`decide`] besides the verified candidates.
pub(crate) struct Evidence {
    pub candidates_seen: u64,
    pub over_cap: bool,
    /// A near duplicate may be missing: a hot bucket read partially, or a
    /// cap that cut candidates estimated close to the threshold.
    pub partial: bool,
    pub hot_buckets: u32,
    pub degraded_shingles: Option<(u64, u64)>,
    /// Candidates whose features could not be read from the store.
    pub unverified: Option<Unverified>,
    pub method_version: String,
}

/// Candidates a query could not verify because the feature store failed
/// to read them; only their in-memory content hashes were compared.
pub(crate) struct Unverified {
    pub count: u32,
    /// The first read error.
    pub cause: String,
}

impl Evidence {
    /// What a candidate query for `fp` found, under `method_version`.
    pub(crate) fn of(set: &CandidateSet, fp: &Fingerprint, method_version: &str) -> Evidence {
        Evidence {
            candidates_seen: set.distinct as u64,
            over_cap: set.over_cap,
            partial: set.is_partial(),
            hot_buckets: set.hot_buckets,
            degraded_shingles: fp.degraded.map(|d| match d {
                neardup_core::Degraded::TooManyShingles { count, max } => (count, max),
            }),
            unverified: None,
            method_version: method_version.to_string(),
        }
    }
}

/// Method name for the normal path (MinHash or SimHash bands) and the
/// degraded one.
pub(crate) const METHOD_LSH: &str = "minhash-lsh+exact-jaccard";
pub(crate) const METHOD_SIMHASH: &str = "simhash-hamming+exact-jaccard";
pub(crate) const METHOD_EXACT: &str = "exact-hash-only";

/// Turns verified candidates into a decision. `candidates` must be sorted best first.
pub(crate) fn decide(policy: &Policy, candidates: Vec<ScoredCandidate>, ev: Evidence) -> Decision {
    let best = candidates.first();
    let best_verdict = best.map(|c| c.verdict).unwrap_or(MatchVerdict::Different);
    let partial = ev.partial;
    let pv = format!("policy {}@v{}", policy.id, policy.version);
    // The fingerprint version names the signature scheme (`…/simhash-v1x64/…`).
    let banded = if ev.method_version.contains("/simhash-") { METHOD_SIMHASH } else { METHOD_LSH };
    let method = if ev.degraded_shingles.is_some() || ev.unverified.is_some() { METHOD_EXACT } else { banded };
    let (state, explanation) = match (best_verdict, best) {
        (MatchVerdict::Identical, Some(c)) => (
            DecisionState::Duplicate,
            format!(
                "duplicate of {:?}: {} score {:.4} >= identical threshold {:.2} ({pv})",
                c.item_id,
                if c.same_content { "same content hash," } else { "exact Jaccard" },
                c.score,
                policy.threshold_identical
            ),
        ),
        (MatchVerdict::Similar, Some(c)) if !partial => (
            DecisionState::NearDuplicate,
            format!(
                "near duplicate of {:?}: exact Jaccard {:.4} >= similar threshold {:.2} ({pv})",
                c.item_id, c.score, policy.threshold_similar
            ),
        ),
        _ if partial => (
            DecisionState::Review,
            format!(
                "review: the candidate set was partial ({} candidates seen, cap {}, {} hot \
                 buckets read partially), so a better match may exist; best verified {} ({pv})",
                ev.candidates_seen,
                if ev.over_cap { "exceeded" } else { "not exceeded" },
                ev.hot_buckets,
                best.map(|c| format!("{:?} at {:.4}", c.item_id, c.score)).unwrap_or_else(|| "none".into())
            ),
        ),
        _ if ev.degraded_shingles.is_some() => {
            let (count, max) = ev.degraded_shingles.unwrap_or_default();
            (
                DecisionState::Quarantined,
                format!(
                    "quarantined: {count} shingles exceed the cap of {max}, so only exact \
                     content hashes were compared and none matched; near duplicates cannot \
                     be ruled out ({pv})"
                ),
            )
        }
        _ if ev.unverified.is_some() => {
            let count = ev.unverified.as_ref().map_or(0, |u| u.count);
            (
                DecisionState::Review,
                format!(
                    "review: the feature store could not be read, so {count} of {} candidates \
                     were compared by exact content hash only and none matched; a near \
                     duplicate may exist ({pv})",
                    ev.candidates_seen
                ),
            )
        }
        (_, Some(c)) => (
            DecisionState::Distinct,
            format!(
                "distinct among {} verified candidates: closest {:?} at exact Jaccard {:.4} < \
                 similar threshold {:.2}; {}items never retrieved as candidates were not \
                 compared ({pv})",
                candidates.len(),
                c.item_id,
                c.score,
                policy.threshold_similar,
                if ev.over_cap {
                    "the cap cut only candidates whose estimated similarity was far below the threshold; "
                } else {
                    ""
                }
            ),
        ),
        (_, None) => (
            DecisionState::Distinct,
            format!(
                "distinct: no candidate was retrieved for verification; this is the LSH \
                 candidate contract, not a proof that no similar item exists ({pv})"
            ),
        ),
    };
    Decision {
        state,
        method: method.to_string(),
        method_version: ev.method_version,
        policy: PolicyRef::from(policy),
        candidates,
        candidates_seen: ev.candidates_seen,
        over_cap: ev.over_cap,
        hot_buckets: ev.hot_buckets,
        degraded: match (ev.degraded_shingles, &ev.unverified) {
            (Some((c, m)), _) => Some(format!("{c} shingles over the cap of {m}: exact hash only")),
            (None, Some(u)) => Some(format!(
                "feature store unreadable ({}): exact hash only, {} candidates not verified",
                u.cause, u.count
            )),
            (None, None) => None,
        },
        explanation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev() -> Evidence {
        Evidence {
            candidates_seen: 0,
            over_cap: false,
            partial: false,
            hot_buckets: 0,
            degraded_shingles: None,
            unverified: None,
            method_version: "v".into(),
        }
    }

    fn cand(score: f64, verdict: MatchVerdict) -> ScoredCandidate {
        ScoredCandidate { item_id: "a".into(), score, verdict, same_content: false, bands_shared: 1 }
    }

    #[test]
    fn no_candidate_is_not_called_unique() {
        let p = Policy::new("p", 1, 1.0, 0.75).unwrap();
        let d = decide(&p, vec![], ev());
        assert_eq!(d.state, DecisionState::Distinct);
        assert!(d.explanation.contains("not a proof"), "{}", d.explanation);
        assert!(!d.explanation.contains("unique"));
    }

    #[test]
    fn over_cap_is_review_never_distinct() {
        let p = Policy::new("p", 1, 1.0, 0.75).unwrap();
        let e = Evidence { over_cap: true, partial: true, candidates_seen: 500, ..ev() };
        let d = decide(&p, vec![cand(0.8, MatchVerdict::Similar)], e);
        assert_eq!(d.state, DecisionState::Review);
        let e = Evidence { over_cap: true, partial: true, ..ev() };
        assert_eq!(decide(&p, vec![], e).state, DecisionState::Review);
        // A cap that cut only candidates estimated far below the threshold
        // leaves the answer complete.
        let e = Evidence { over_cap: true, partial: false, ..ev() };
        assert_eq!(decide(&p, vec![], e).state, DecisionState::Distinct);
        // A verified duplicate stands even when the set was partial.
        let e = Evidence { over_cap: true, partial: true, ..ev() };
        let d = decide(&p, vec![cand(1.0, MatchVerdict::Identical)], e);
        assert_eq!(d.state, DecisionState::Duplicate);
    }

    #[test]
    fn degraded_without_match_is_quarantined() {
        let p = Policy::new("p", 1, 1.0, 0.75).unwrap();
        let e = Evidence { degraded_shingles: Some((20_000, 10_000)), ..ev() };
        let d = decide(&p, vec![], e);
        assert_eq!(d.state, DecisionState::Quarantined);
        assert_eq!(d.method, METHOD_EXACT);
    }

    #[test]
    fn unreadable_features_are_review_unless_the_content_matches() {
        let p = Policy::new("p", 1, 1.0, 0.75).unwrap();
        let u = || Some(Unverified { count: 3, cause: "disk gone".into() });
        let d = decide(&p, vec![], Evidence { unverified: u(), candidates_seen: 3, ..ev() });
        assert_eq!(d.state, DecisionState::Review);
        assert_eq!(d.method, METHOD_EXACT);
        assert!(d.degraded.as_deref().unwrap_or("").contains("disk gone"), "{:?}", d.degraded);
        let copy = ScoredCandidate::same_content(&p, "a", 4);
        let d = decide(&p, vec![copy], Evidence { unverified: u(), ..ev() });
        assert_eq!(d.state, DecisionState::Duplicate);
        assert!(d.degraded.is_some());
    }
}

/// What an upsert's plan decided, logged with its record for the event
/// feed (see [`crate::event`]): the rest of the decision is the record's
/// `decision` state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ItemNote {
    /// Inserted or replaced (nothing else is logged).
    pub status: UpsertStatus,
    /// The best verified candidate, if any.
    pub closest: Option<Closest>,
    /// The policy's id and version.
    pub policy_id: String,
    pub policy_version: u32,
    /// The tenant's fingerprint version.
    pub method_version: String,
}

/// The best verified candidate of a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Closest {
    pub item_id: String,
    /// Exact Jaccard (1 for equal content hashes).
    pub score: f64,
    pub verdict: MatchVerdict,
    pub same_content: bool,
}

impl ItemNote {
    /// The note of a planned write.
    pub(crate) fn of(outcome: &UpsertOutcome) -> ItemNote {
        let d = &outcome.decision;
        ItemNote {
            status: outcome.status,
            closest: d.closest().map(|c| Closest {
                item_id: c.item_id.clone(),
                score: c.score,
                verdict: c.verdict,
                same_content: c.same_content,
            }),
            policy_id: d.policy.id.clone(),
            policy_version: d.policy.version,
            method_version: d.method_version.clone(),
        }
    }
}
