//! Request and response bodies of the HTTP API (with their OpenAPI schemas).
//!
//! Engine types are converted here rather than exposed directly, so the wire
//! format is one reviewed place and the engine can change its internals.

use neardup_index::{Decision, ItemInfo, LabelEvent, ScoredCandidate, ShadowReport, UpsertOutcome, Verification};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Scope;
use crate::tenant_spec::TenantSpec;

mod review;
pub use review::*;

/// `POST /v1/tenants`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenantRequest {
    /// `[A-Za-z0-9][A-Za-z0-9_.-]{0,63}`.
    pub tenant_id: String,
    /// Index parameters, policy and limits; calculator defaults when absent.
    #[serde(default)]
    pub config: Option<TenantSpec>,
}

/// The tenant and its first key (all scopes). The key is shown only here.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CreateTenantResponse {
    /// Tenant id.
    pub tenant_id: String,
    /// Bearer token for the tenant; store it now.
    pub api_key: String,
    /// The key's id.
    pub key_id: String,
    /// The key's scopes.
    pub scopes: Vec<Scope>,
}

/// Tenant ids visible to the caller.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TenantList {
    /// Ids, sorted.
    pub tenants: Vec<String>,
}

/// `POST /v1/tenants/{tenant}/keys`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyRequest {
    /// Scopes of the new key (at least one).
    pub scopes: Vec<Scope>,
}

/// A tenant's keys (ids and scopes only).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KeyList {
    /// The keys.
    pub keys: Vec<KeyInfo>,
}

/// A key's id and scopes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KeyInfo {
    /// Id.
    pub key_id: String,
    /// Scopes.
    pub scopes: Vec<Scope>,
}

/// `PUT /v1/tenants/{tenant}/items/{item_id}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpsertRequest {
    /// The text (exactly one of `content` and `content_uri`).
    #[serde(default)]
    pub content: Option<String>,
    /// `s3://BUCKET/KEY` in one of the tenant's content stores: the service
    /// reads the object (HEAD first, then the body under the same limits
    /// as inline content) and records its ETag, version and digest with
    /// the item.
    #[serde(default)]
    pub content_uri: Option<String>,
    /// Replays with the same key return the first answer and change nothing.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// `text/plain` when absent; only `text/*` is indexed.
    #[serde(default)]
    pub media_type: Option<String>,
    /// Producer's time, Unix ms.
    #[serde(default)]
    pub source_time: Option<i64>,
    /// If set, must equal the tenant's normalizer version (e.g. `seed-v1`).
    #[serde(default)]
    pub normalization_version: Option<String>,
    /// A new version of the item: must be above the current (or tombstone)
    /// epoch, and at most 2^53 − 1.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 9007199254740991_u64)]
    pub epoch: Option<u64>,
}

/// One item of a batch upsert.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchItem {
    /// Item id.
    pub item_id: String,
    /// The text (exactly one of `content` and `content_uri`).
    #[serde(default)]
    pub content: Option<String>,
    /// `s3://BUCKET/KEY` in one of the tenant's content stores.
    #[serde(default)]
    pub content_uri: Option<String>,
    /// Idempotency key.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Media type.
    #[serde(default)]
    pub media_type: Option<String>,
    /// Producer's time.
    #[serde(default)]
    pub source_time: Option<i64>,
    /// Normalization version.
    #[serde(default)]
    pub normalization_version: Option<String>,
    /// Epoch (at most 2^53 − 1).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 9007199254740991_u64)]
    pub epoch: Option<u64>,
}

/// `POST /v1/tenants/{tenant}/items`: many items, one fsync.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// The items, applied in order.
    pub items: Vec<BatchItem>,
}

/// Per-item results of a batch, in request order.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchResponse {
    /// One result per item: an upsert response or an error.
    pub results: Vec<BatchResult>,
}

/// One batch result.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum BatchResult {
    /// Applied.
    Ok(Box<UpsertResponse>),
    /// Refused.
    Err(crate::error::ErrorBody),
}

/// A verified candidate.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CandidateView {
    /// The candidate item.
    pub item_id: String,
    /// Exact Jaccard similarity of the canonical features.
    pub score: f64,
    /// `identical`, `similar` or `different` under the policy.
    pub verdict: String,
    /// Same content hash.
    pub same_content: bool,
    /// LSH bands shared.
    pub bands_shared: u16,
}

/// The policy that judged.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyRefView {
    /// Id.
    pub id: String,
    /// Version.
    pub version: u32,
    /// Duplicate threshold.
    pub threshold_identical: f64,
    /// Near-duplicate threshold.
    pub threshold_similar: f64,
}

/// A decision with its evidence.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DecisionView {
    /// `distinct`, `duplicate`, `near_duplicate`, `review` or `quarantined`.
    pub decision: String,
    /// Verified candidates, best first.
    pub candidates: Vec<CandidateView>,
    /// Candidates retrieved before verification.
    pub candidates_seen: u64,
    /// Retrieval hit the candidate cap.
    pub over_cap: bool,
    /// Hot buckets read partially.
    pub hot_buckets: u32,
    /// Candidate method.
    pub method: String,
    /// Fingerprint/method version.
    pub method_version: String,
    /// The policy.
    pub policy: PolicyRefView,
    /// Set when the item was only matched by exact hash.
    pub degraded: Option<String>,
    /// Why, in words.
    pub explanation: String,
}

/// The answer to an upsert: what was stored and the decision.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UpsertResponse {
    /// Tenant.
    pub tenant_id: String,
    /// Item.
    pub item_id: String,
    /// The item's epoch now.
    pub epoch: u64,
    /// Command log sequence number (0 when nothing was written).
    pub lsn: u64,
    /// `inserted`, `replaced`, `unchanged` or `replayed`.
    pub status: String,
    /// The decision.
    #[serde(flatten)]
    pub decision: DecisionView,
}

/// `POST /v1/tenants/{tenant}/candidates` and `/decide`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContentQuery {
    /// The text to compare.
    pub content: String,
    /// Most candidates returned (candidates only; default 10).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10000)]
    pub limit: Option<u32>,
}

/// `POST /v1/tenants/{tenant}/verify`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    /// Left item.
    pub left: String,
    /// Right item.
    pub right: String,
    /// A policy to judge with instead of the tenant's.
    #[serde(default)]
    pub policy: Option<VerifyPolicy>,
}

/// A policy for one verification.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyPolicy {
    /// Id.
    pub id: String,
    /// Version.
    pub version: u32,
    /// Duplicate threshold.
    pub threshold_identical: f64,
    /// Near-duplicate threshold.
    pub threshold_similar: f64,
}

/// The exact comparison of two items.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VerifyResponse {
    /// Left item.
    pub left: String,
    /// Right item.
    pub right: String,
    /// Exact Jaccard.
    pub score: f64,
    /// Same content hash.
    pub same_content: bool,
    /// Verdict.
    pub verdict: String,
    /// Policy.
    pub policy: PolicyRefView,
    /// Why.
    pub explanation: String,
}

/// A stored item (never its content).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ItemView {
    /// Item.
    pub item_id: String,
    /// Epoch.
    pub epoch: u64,
    /// Content hash, hex.
    pub content_hash: String,
    /// Canonical features.
    pub features: u64,
    /// Tokens.
    pub tokens: u32,
    /// Content bytes.
    pub content_bytes: u64,
    /// Media type.
    pub media_type: String,
    /// The object the content was read from, for items sent by
    /// `content_uri`.
    pub content_source: Option<crate::content::ContentSource>,
    /// Producer's time.
    pub source_time: Option<i64>,
    /// Exact-hash only.
    pub degraded: bool,
    /// The decision made when it was stored.
    pub decision: String,
}

/// A page of items.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ItemPage {
    /// Items in id order.
    pub items: Vec<ItemView>,
    /// Pass as `after` for the next page; absent on the last.
    pub next_after: Option<String>,
}

/// A tombstone.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TombstoneResponse {
    /// Item.
    pub item_id: String,
    /// Epoch of the tombstone.
    pub epoch: u64,
    /// Command log sequence number.
    pub lsn: u64,
}

/// What a restore loaded.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RestoreResponse {
    /// Tenant.
    pub tenant_id: String,
    /// Items in the snapshot.
    pub items: u64,
    /// Snapshot format version.
    pub format_version: u32,
    /// Fingerprint version of the restored index.
    pub fingerprint_version: String,
    /// The LSN the restore was logged at.
    pub covered_lsn: u64,
}

/// `POST /v1/tenants/{tenant}/rebuild` and `/shadow`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReconfigureRequest {
    /// Keys to change; the rest keep the tenant's current values.
    #[serde(default)]
    pub config: TenantSpec,
}

/// An operation that returns nothing more than "done".
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Done {
    /// Tenant.
    pub tenant_id: String,
    /// What was done.
    pub done: String,
}

/// Shadow index disagreement so far.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ShadowView {
    /// Shadow fingerprint version.
    pub shadow_version: String,
    /// Live fingerprint version.
    pub live_version: String,
    /// Items in the shadow.
    pub items: u64,
    /// Queries answered by both.
    pub queries: u64,
    /// Queries whose decision state differed.
    pub decision_disagreements: u64,
    /// Rate of those.
    pub decision_disagreement_rate: f64,
    /// Queries whose set of matches differed.
    pub match_set_disagreements: u64,
    /// Matches only the live index found.
    pub live_only_matches: u64,
    /// Matches only the shadow found.
    pub shadow_only_matches: u64,
    /// `live->shadow` state transitions and their counts.
    pub transitions: std::collections::BTreeMap<String, u64>,
}

/// `POST /v1/tenants/{tenant}/labels`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelRequest {
    /// Left item.
    pub left: String,
    /// Right item.
    pub right: String,
    /// The reviewer's conclusion.
    pub label: LabelKind,
    /// Rationale, for the audit trail.
    pub rationale: String,
    /// Reviewer name; defaults to the credential's actor.
    #[serde(default)]
    pub actor: Option<String>,
}

/// A reviewer's conclusion about a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LabelKind {
    /// Same item.
    Duplicate,
    /// Near duplicate.
    NearDuplicate,
    /// Acceptably different.
    Distinct,
}

impl From<LabelKind> for neardup_index::Label {
    fn from(k: LabelKind) -> Self {
        match k {
            LabelKind::Duplicate => neardup_index::Label::Duplicate,
            LabelKind::NearDuplicate => neardup_index::Label::NearDuplicate,
            LabelKind::Distinct => neardup_index::Label::Distinct,
        }
    }
}

/// A recorded label event (immutable).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelView {
    /// Sequence within the tenant.
    pub seq: u64,
    /// Command log sequence number.
    pub lsn: u64,
    /// Left item.
    pub left: String,
    /// Right item.
    pub right: String,
    /// Label.
    pub label: String,
    /// Who.
    pub actor: String,
    /// Why.
    pub rationale: String,
    /// Policy id in force.
    pub policy_id: String,
    /// Its version.
    pub policy_version: u32,
    /// Fingerprint version in force.
    pub source_version: String,
    /// Unix ms.
    pub recorded_at_ms: u64,
}

/// Label events, oldest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelList {
    /// Events.
    pub labels: Vec<LabelView>,
}

/// Recent decisions, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DecisionLog {
    /// Entries.
    pub decisions: Vec<crate::journal::DecisionEntry>,
}

/// Recent audit events, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuditLog {
    /// Entries.
    pub events: Vec<crate::journal::AuditEntry>,
}

/// A tenant's configuration and figures.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TenantDetail {
    /// Effective configuration.
    pub config: crate::tenant_spec::TenantView,
    /// Figures.
    pub stats: StatsView,
    /// The operator's content stores this tenant's items may be read from
    /// by `content_uri` (names; see `--content-stores`).
    pub content_stores: Vec<String>,
}

/// A tenant's figures.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StatsView {
    /// Live items.
    pub live_items: u64,
    /// Live bytes.
    pub live_bytes: u64,
    /// Records stored (tombstoned included until compaction).
    pub stored_records: u64,
    /// Tombstone markers.
    pub tombstones: u64,
    /// Label events.
    pub labels: u64,
    /// Largest LSH bucket.
    pub largest_bucket: u64,
    /// Estimated resident index bytes.
    pub resident_bytes_estimate: u64,
    /// Upserts since start.
    pub upserts: u64,
    /// Queries since start.
    pub queries: u64,
    /// Capped queries since start.
    pub cap_hits: u64,
    /// A shadow index is active.
    pub shadow: bool,
}

/// `GET /healthz` and `/readyz`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `starting` / `stopping`.
    pub status: String,
}

fn verdict_name(v: neardup_index::MatchVerdict) -> &'static str {
    match v {
        neardup_index::MatchVerdict::Identical => "identical",
        neardup_index::MatchVerdict::Similar => "similar",
        neardup_index::MatchVerdict::Different => "different",
    }
}

impl From<&ScoredCandidate> for CandidateView {
    fn from(c: &ScoredCandidate) -> Self {
        CandidateView {
            item_id: c.item_id.clone(),
            score: c.score,
            verdict: verdict_name(c.verdict).into(),
            same_content: c.same_content,
            bands_shared: c.bands_shared,
        }
    }
}

impl From<&neardup_index::PolicyRef> for PolicyRefView {
    fn from(p: &neardup_index::PolicyRef) -> Self {
        PolicyRefView {
            id: p.id.clone(),
            version: p.version,
            threshold_identical: p.threshold_identical,
            threshold_similar: p.threshold_similar,
        }
    }
}

impl From<&Decision> for DecisionView {
    fn from(d: &Decision) -> Self {
        DecisionView {
            decision: d.state.as_str().into(),
            candidates: d.candidates.iter().map(CandidateView::from).collect(),
            candidates_seen: d.candidates_seen,
            over_cap: d.over_cap,
            hot_buckets: d.hot_buckets,
            method: d.method.clone(),
            method_version: d.method_version.clone(),
            policy: PolicyRefView::from(&d.policy),
            degraded: d.degraded.clone(),
            explanation: d.explanation.clone(),
        }
    }
}

impl UpsertResponse {
    /// From the engine's outcome.
    pub fn new(tenant: &str, o: &UpsertOutcome) -> UpsertResponse {
        UpsertResponse {
            tenant_id: tenant.to_string(),
            item_id: o.item_id.clone(),
            epoch: o.epoch,
            lsn: o.lsn,
            status: match o.status {
                neardup_index::UpsertStatus::Inserted => "inserted",
                neardup_index::UpsertStatus::Replaced => "replaced",
                neardup_index::UpsertStatus::Unchanged => "unchanged",
                neardup_index::UpsertStatus::Replayed => "replayed",
            }
            .into(),
            decision: DecisionView::from(&o.decision),
        }
    }
}

impl From<&Verification> for VerifyResponse {
    fn from(v: &Verification) -> Self {
        VerifyResponse {
            left: v.left.clone(),
            right: v.right.clone(),
            score: v.score,
            same_content: v.same_content,
            verdict: verdict_name(v.verdict).into(),
            policy: PolicyRefView::from(&v.policy),
            explanation: v.explanation.clone(),
        }
    }
}

impl From<&ItemInfo> for ItemView {
    fn from(i: &ItemInfo) -> Self {
        let (media_type, content_source) = crate::content::ContentSource::split(&i.media_type);
        ItemView {
            item_id: i.item_id.clone(),
            epoch: i.epoch,
            content_hash: i.content_hash.clone(),
            features: i.features as u64,
            tokens: i.tokens,
            content_bytes: i.content_bytes,
            media_type,
            content_source,
            source_time: i.source_time,
            degraded: i.degraded,
            decision: i.decision.as_str().into(),
        }
    }
}

impl From<&ShadowReport> for ShadowView {
    fn from(r: &ShadowReport) -> Self {
        ShadowView {
            shadow_version: r.shadow_version.clone(),
            live_version: r.live_version.clone(),
            items: r.items,
            queries: r.queries,
            decision_disagreements: r.decision_disagreements,
            decision_disagreement_rate: r.decision_disagreement_rate(),
            match_set_disagreements: r.match_set_disagreements,
            live_only_matches: r.live_only_matches,
            shadow_only_matches: r.shadow_only_matches,
            transitions: r.transitions.clone(),
        }
    }
}

impl From<&LabelEvent> for LabelView {
    fn from(e: &LabelEvent) -> Self {
        LabelView {
            seq: e.seq,
            lsn: e.lsn,
            left: e.left.clone(),
            right: e.right.clone(),
            label: match e.label {
                neardup_index::Label::Duplicate => "duplicate",
                neardup_index::Label::NearDuplicate => "near_duplicate",
                neardup_index::Label::Distinct => "distinct",
            }
            .into(),
            actor: e.actor.clone(),
            rationale: e.rationale.clone(),
            policy_id: e.policy_id.clone(),
            policy_version: e.policy_version,
            source_version: e.source_version.clone(),
            recorded_at_ms: e.recorded_at_ms,
        }
    }
}

impl From<&neardup_index::TenantStats> for StatsView {
    fn from(stats: &neardup_index::TenantStats) -> Self {
        StatsView {
            live_items: stats.live_items,
            live_bytes: stats.live_bytes,
            stored_records: stats.stored_records,
            tombstones: stats.tombstones,
            labels: stats.labels,
            largest_bucket: stats.largest_bucket as u64,
            resident_bytes_estimate: stats.resident_bytes_estimate,
            upserts: stats.counters.upserts,
            queries: stats.counters.queries,
            cap_hits: stats.counters.cap_hits,
            shadow: stats.shadow,
        }
    }
}
