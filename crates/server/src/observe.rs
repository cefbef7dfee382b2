//! What routes record about their outcomes: metrics for decisions and for
//! the errors that metrics track, and the decision ring.

use neardup_index::ErrorKind;

use crate::error::{ApiError, ApiErrorKind};
use crate::journal::DecisionEntry;
use crate::metrics::DecisionSample;
use crate::state::AppState;

/// Counts the errors that the metrics track (budgets, cross-version).
pub(crate) fn note_error(s: &AppState, tenant: &str, e: &ApiError) {
    if let ApiErrorKind::Engine(e) = e.kind() {
        match e.kind() {
            ErrorKind::TooLarge { .. } | ErrorKind::BudgetExceeded { .. } => s.metrics.budget_rejection(tenant),
            ErrorKind::InvalidInput { field: "normalization_version", .. } | ErrorKind::UnsupportedFormat { .. } => {
                s.metrics.cross_version(tenant)
            }
            _ => {}
        }
    }
}

/// Metrics and the decision ring for one decision.
pub(crate) fn record_decision(
    s: &AppState,
    tenant: &str,
    operation: &str,
    item_id: Option<&str>,
    d: &neardup_index::Decision,
    seconds: f64,
    wrote: Option<bool>,
) {
    let scores: Vec<f64> = d.candidates.iter().map(|c| c.score).collect();
    let sample = DecisionSample {
        state: d.state.as_str(),
        candidates_seen: d.candidates_seen,
        over_cap: d.over_cap,
        scores: &scores,
    };
    match wrote {
        Some(w) => s.metrics.ingest(tenant, seconds, w, sample),
        None => s.metrics.query(tenant, seconds, sample),
    }
    let best = d.closest();
    s.journal.decision(
        tenant,
        DecisionEntry {
            seq: 0,
            at_ms: 0,
            operation: operation.to_string(),
            item_id: item_id.map(str::to_string),
            decision: d.state.as_str().to_string(),
            best_candidate: best.map(|c| c.item_id.clone()),
            best_score: best.map(|c| c.score),
            candidates_seen: d.candidates_seen,
            policy: format!("{}@v{}", d.policy.id, d.policy.version),
            method_version: d.method_version.clone(),
            explanation: d.explanation.clone(),
        },
    );
}
