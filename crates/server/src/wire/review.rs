//! The bodies of the review console's reads: the queue, a pair compared,
//! an item's neighbourhood, and the dashboards' figures.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CandidateView, ItemView, LabelView, ShadowView, StatsView, VerifyResponse};

/// `GET /v1/tenants/{tenant}/queue`: flagged items, newest write first,
/// each with its closest verified match.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReviewQueueView {
    /// Items, newest write first.
    pub items: Vec<QueuedItemView>,
    /// Flagged live items in the asked states, this page included.
    pub total: u64,
    /// Records read to build the page.
    pub scanned: u64,
    /// Pass as `before` for the next page (`LSN:ITEM_ID`); absent on the last.
    pub next_before: Option<String>,
}

/// An item of the review queue and what a reviewer triages it by.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QueuedItemView {
    /// The item (never its content).
    pub item: ItemView,
    /// Log position of the write that stored this version.
    pub lsn: u64,
    /// Label events naming the item.
    pub labels: u32,
    /// Its closest verified candidate now, with the exact score (the pair
    /// the console's compare view opens); null when it has none.
    pub closest: Option<CandidateView>,
}

/// `POST /v1/tenants/{tenant}/compare`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareRequest {
    /// Left item.
    pub left: String,
    /// Right item.
    pub right: String,
}

/// Two items side by side (review scope: this answer holds their content).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ComparisonView {
    /// Exact score and verdict under the tenant's policy.
    pub verification: VerifyResponse,
    /// Left item.
    pub left: SideView,
    /// Right item.
    pub right: SideView,
    /// Label events naming either item (this pair or another), oldest first.
    pub labels: Vec<LabelView>,
}

/// One side of a comparison.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SideView {
    /// The item.
    pub item: ItemView,
    /// The stored content as runs that concatenate to it, each marked when
    /// covered by a shingle the other side shares; absent when the tenant
    /// does not retain content (`retain_content: false`) and it was not
    /// read again.
    pub segments: Option<Vec<TextRunView>>,
    /// Where the text shown came from when the tenant does not retain it:
    /// read again from the item's object for this review (an audited
    /// read), or why it is not shown (the object is gone or has changed
    /// since it was ingested).
    pub content_note: Option<String>,
}

/// A run of text.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TextRunView {
    /// The text, verbatim.
    pub text: String,
    /// Covered by a shared shingle.
    pub shared: bool,
}

/// `GET /v1/tenants/{tenant}/items/{item_id}/neighbourhood`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NeighbourhoodView {
    /// The item asked about.
    pub item_id: String,
    /// Members reachable through verified pairs at or above the similar
    /// threshold, nearest first.
    pub members: Vec<MemberView>,
    /// Verified pairs among them, each once.
    pub edges: Vec<EdgeView>,
    /// The walk stopped at the member limit.
    pub truncated: bool,
}

/// A member of a neighbourhood.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MemberView {
    /// Item.
    pub item_id: String,
    /// Verified pairs between it and the item asked about (1: a direct neighbour).
    pub hops: u32,
    /// Its best score to a member one hop closer.
    pub score: f64,
}

/// A verified pair.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EdgeView {
    /// One item.
    pub left: String,
    /// The other.
    pub right: String,
    /// Exact score.
    pub score: f64,
}

/// `GET /v1/tenants/{tenant}/dashboard`: what the dashboards plot.
/// Histograms and counts are this process's since it started; item and
/// bucket figures are the tenant's now.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DashboardView {
    /// Tenant.
    pub tenant: String,
    /// The tenant's figures now.
    pub stats: StatsView,
    /// Decisions made, by state.
    pub decisions: std::collections::BTreeMap<String, u64>,
    /// Candidates retrieved per query.
    pub candidates_per_query: HistogramView,
    /// Exact scores of verified candidates.
    pub verification_score: HistogramView,
    /// Upsert latency, seconds.
    pub ingest_seconds: HistogramView,
    /// Query latency, seconds.
    pub query_seconds: HistogramView,
    /// Tombstone latency (request to applied), seconds.
    pub tombstone_seconds: HistogramView,
    /// Band buckets by size: bucket `i` holds buckets of `[2^i, 2^(i+1))` items.
    pub bucket_sizes: HistogramView,
    /// Queries whose candidate set was capped.
    pub cap_rejections: u64,
    /// Requests refused by a size or budget cap.
    pub budget_rejections: u64,
    /// Requests refused by the quota.
    pub rate_limited: u64,
    /// Items written per minute, oldest first (minutes with a write).
    pub ingest_per_minute: Vec<IngestMinute>,
    /// Seconds since the newest snapshot on disk; absent before the first.
    pub snapshot_age_seconds: Option<f64>,
    /// Cluster mode: commands of the tenant's partition not applied yet here.
    pub replication_lag_commands: Option<u64>,
    /// The current policy against reviewers' labels.
    pub labelled: LabelEvaluationView,
    /// The probability that a pair becomes a candidate, by its Jaccard.
    pub s_curve: SCurveView,
    /// The shadow index's disagreement, during a migration.
    pub shadow: Option<ShadowView>,
}

/// A fixed-bucket histogram.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HistogramView {
    /// Upper bound of each bucket (inclusive).
    pub bounds: Vec<f64>,
    /// Observations per bucket, not cumulative.
    pub counts: Vec<u64>,
    /// Observations above the last bound.
    pub overflow: u64,
    /// Sum of the observations.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

impl From<&crate::metrics::HistogramFigures> for HistogramView {
    fn from(h: &crate::metrics::HistogramFigures) -> Self {
        HistogramView {
            bounds: h.bounds.clone(),
            counts: h.counts.clone(),
            overflow: h.overflow,
            sum: h.sum,
            count: h.count,
        }
    }
}

/// Items written in one minute.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct IngestMinute {
    /// Start of the minute, ms since the Unix epoch.
    pub minute_ms: u64,
    /// Items written.
    pub items: u64,
}

/// The current policy against reviewers' labels.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelEvaluationView {
    /// Distinct labelled pairs.
    pub pairs: u64,
    /// Pairs with contradictory labels, left out.
    pub disputed: u64,
    /// Pairs with an item gone, left out.
    pub missing: u64,
    /// Pairs not verified: past the 10,000 most recently labelled.
    pub not_evaluated: u64,
    /// Labelled duplicates the policy flags.
    pub true_positives: u64,
    /// Labelled distinct pairs the policy flags.
    pub false_positives: u64,
    /// Labelled duplicates the policy does not flag.
    pub false_negatives: u64,
    /// Labelled distinct pairs the policy does not flag.
    pub true_negatives: u64,
    /// Precision with its 95 % Wilson interval; absent without a flagged pair.
    pub precision: Option<EstimateView>,
    /// Recall with its 95 % Wilson interval; absent without a labelled duplicate.
    pub recall: Option<EstimateView>,
}

/// A proportion with its 95 % confidence interval.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct EstimateView {
    /// Point estimate.
    pub value: f64,
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

impl From<&neardup_index::LabelEvaluation> for LabelEvaluationView {
    fn from(e: &neardup_index::LabelEvaluation) -> Self {
        let est =
            |x: Option<neardup_index::Estimate>| x.map(|x| EstimateView { value: x.value, low: x.low, high: x.high });
        LabelEvaluationView {
            pairs: e.pairs,
            disputed: e.disputed,
            missing: e.missing,
            not_evaluated: e.not_evaluated,
            true_positives: e.true_positives,
            false_positives: e.false_positives,
            false_negatives: e.false_negatives,
            true_negatives: e.true_negatives,
            precision: est(e.precision),
            recall: est(e.recall),
        }
    }
}

/// The LSH S-curve: `P(candidate) = 1 − (1 − s^rows)^bands` for a pair of
/// Jaccard `s`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SCurveView {
    /// Bands.
    pub bands: u32,
    /// Rows per band.
    pub rows: u32,
    /// The tenant's LSH threshold.
    pub threshold: f64,
    /// The policy's similar threshold.
    pub threshold_similar: f64,
    /// SimHash: the largest Hamming distance a candidate may have (absent
    /// for MinHash).
    pub max_hamming: Option<u32>,
    /// `[s, P(candidate)]` for s = 0, 0.01, …, 1.
    pub points: Vec<[f64; 2]>,
}

impl SCurveView {
    /// The candidate curve of `params` ([`neardup_core::Params::candidate_probability`]).
    pub fn new(params: &neardup_core::Params, threshold_similar: f64) -> SCurveView {
        let points = (0..=100)
            .map(|i| {
                let s = f64::from(i) / 100.0;
                [s, params.candidate_probability(s)]
            })
            .collect();
        let lsh = params.lsh();
        SCurveView {
            bands: lsh.bands,
            rows: lsh.rows,
            threshold: params.threshold(),
            threshold_similar,
            max_hamming: params.max_hamming(),
            points,
        }
    }
}

impl From<&neardup_index::ReviewQueue> for ReviewQueueView {
    fn from(q: &neardup_index::ReviewQueue) -> Self {
        ReviewQueueView {
            items: q
                .items
                .iter()
                .map(|i| QueuedItemView { item: ItemView::from(&i.item), lsn: i.lsn, labels: i.labels, closest: None })
                .collect(),
            total: q.total,
            scanned: q.scanned,
            next_before: None,
        }
    }
}

impl From<&neardup_index::Comparison> for ComparisonView {
    fn from(c: &neardup_index::Comparison) -> Self {
        let side = |s: &neardup_index::Side| SideView {
            item: ItemView::from(&s.item),
            segments: s
                .segments
                .as_ref()
                .map(|v| v.iter().map(|r| TextRunView { text: r.text.clone(), shared: r.shared }).collect()),
            content_note: None,
        };
        ComparisonView {
            verification: VerifyResponse::from(&c.verification),
            left: side(&c.left),
            right: side(&c.right),
            labels: c.labels.iter().map(LabelView::from).collect(),
        }
    }
}

impl From<&neardup_index::Neighbourhood> for NeighbourhoodView {
    fn from(n: &neardup_index::Neighbourhood) -> Self {
        NeighbourhoodView {
            item_id: n.item_id.clone(),
            members: n
                .members
                .iter()
                .map(|m| MemberView { item_id: m.item_id.clone(), hops: m.hops, score: m.score })
                .collect(),
            edges: n
                .edges
                .iter()
                .map(|e| EdgeView { left: e.left.clone(), right: e.right.clone(), score: e.score })
                .collect(),
            truncated: n.truncated,
        }
    }
}
