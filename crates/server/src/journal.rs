//! Per-tenant in-memory rings of recent decisions and audit events.
//!
//! The durable record of every write is the engine's command log; these
//! rings are the operator's quick view ("what did the service decide in the
//! last minutes, who restored a snapshot"). They are bounded and are lost on
//! restart; every entry is also written to the structured log.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde::Serialize;
use utoipa::ToSchema;

/// One decision the service made (upsert or decide).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DecisionEntry {
    /// Sequence number within the tenant since start.
    pub seq: u64,
    /// Unix ms.
    pub at_ms: u64,
    /// `upsert`, `decide` or `candidates`.
    pub operation: String,
    /// The item, for upserts and item queries.
    pub item_id: Option<String>,
    /// Decision state.
    pub decision: String,
    /// Closest verified candidate.
    pub best_candidate: Option<String>,
    /// Its exact score.
    pub best_score: Option<f64>,
    /// Candidates retrieved.
    pub candidates_seen: u64,
    /// Policy id@version.
    pub policy: String,
    /// Candidate method and version.
    pub method_version: String,
    /// Why.
    pub explanation: String,
}

/// One administrative or review action.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuditEntry {
    /// Sequence number within the tenant since start.
    pub seq: u64,
    /// Unix ms.
    pub at_ms: u64,
    /// `operator` or `key:<id>`.
    pub actor: String,
    /// What was done.
    pub action: String,
    /// Details.
    pub detail: String,
    /// Content reads: the item whose content was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    /// Content reads: the object read (`s3://BUCKET/KEY`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// Content reads: `ingest` or `review`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
}

/// A read of raw content, for [`Journal::content_access`].
#[derive(Debug, Clone)]
pub struct ContentAccess<'a> {
    /// The item.
    pub item_id: &'a str,
    /// The object.
    pub object: &'a str,
    /// Why it was read.
    pub purpose: &'a str,
    /// `ok, N bytes, store S, etag E` or the error code.
    pub outcome: String,
}

#[derive(Debug, Default)]
struct Rings {
    decisions: VecDeque<DecisionEntry>,
    audit: VecDeque<AuditEntry>,
    next_decision: u64,
    next_audit: u64,
}

/// The rings of every tenant.
#[derive(Debug)]
pub struct Journal {
    capacity: usize,
    tenants: Mutex<HashMap<String, Rings>>,
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Journal {
    /// Rings of `capacity` entries each.
    pub fn new(capacity: usize) -> Journal {
        Journal { capacity: capacity.max(1), tenants: Mutex::new(HashMap::new()) }
    }

    /// Appends a decision (its `seq` and `at_ms` are filled in).
    pub fn decision(&self, tenant: &str, mut e: DecisionEntry) {
        let Ok(mut map) = self.tenants.lock() else { return };
        let r = map.entry(tenant.to_string()).or_default();
        e.seq = r.next_decision;
        e.at_ms = now_ms();
        r.next_decision += 1;
        if r.decisions.len() == self.capacity {
            r.decisions.pop_front();
        }
        r.decisions.push_back(e);
    }

    /// Appends an audit event.
    pub fn audit(&self, tenant: &str, actor: String, action: &str, detail: String) {
        tracing::info!(tenant, %actor, action, %detail, "audit");
        self.push(tenant, actor, action, detail, None);
    }

    /// Appends a `content_read` audit event: who read which item's raw
    /// content, from which object, for what purpose, and how it went.
    pub fn content_access(&self, tenant: &str, actor: String, a: ContentAccess<'_>) {
        tracing::info!(tenant, %actor, action = "content_read", item_id = a.item_id, object = a.object,
            purpose = a.purpose, outcome = %a.outcome, "audit");
        let detail = format!("item {:?} from {} for {}: {}", a.item_id, a.object, a.purpose, a.outcome);
        self.push(tenant, actor, "content_read", detail, Some(&a));
    }

    fn push(&self, tenant: &str, actor: String, action: &str, detail: String, content: Option<&ContentAccess<'_>>) {
        let Ok(mut map) = self.tenants.lock() else { return };
        let r = map.entry(tenant.to_string()).or_default();
        let e = AuditEntry {
            seq: r.next_audit,
            at_ms: now_ms(),
            actor,
            action: action.to_string(),
            detail,
            item_id: content.map(|c| c.item_id.to_string()),
            object: content.map(|c| c.object.to_string()),
            purpose: content.map(|c| c.purpose.to_string()),
        };
        r.next_audit += 1;
        if r.audit.len() == self.capacity {
            r.audit.pop_front();
        }
        r.audit.push_back(e);
    }

    /// The newest `limit` decisions, newest first.
    pub fn decisions(&self, tenant: &str, limit: usize) -> Vec<DecisionEntry> {
        let Ok(map) = self.tenants.lock() else { return Vec::new() };
        map.get(tenant).map(|r| r.decisions.iter().rev().take(limit).cloned().collect()).unwrap_or_default()
    }

    /// The newest `limit` audit events, newest first.
    pub fn audit_log(&self, tenant: &str, limit: usize) -> Vec<AuditEntry> {
        let Ok(map) = self.tenants.lock() else { return Vec::new() };
        map.get(tenant).map(|r| r.audit.iter().rev().take(limit).cloned().collect()).unwrap_or_default()
    }
}
