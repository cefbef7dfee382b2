//! Reviewer feedback: labels as immutable events.
//!
//! A label records what a person concluded about a pair, with who, why, and
//! under which policy and fingerprint version the pair was shown to them. It
//! is evidence for evaluation (`neardup eval` can read the events as a
//! labelled set), never an instruction: nothing here changes a threshold.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// What the reviewer concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// The same item.
    Duplicate,
    /// Near duplicates.
    NearDuplicate,
    /// Acceptably different.
    Distinct,
}

/// A label as a reviewer submits it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewLabel {
    /// One item of the pair.
    pub left: String,
    /// The other.
    pub right: String,
    /// The conclusion.
    pub label: Label,
    /// Who (an authenticated principal, recorded verbatim).
    pub actor: String,
    /// Why, in the reviewer's words.
    pub rationale: String,
}

/// A stored, immutable label event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelEvent {
    /// Position in the tenant's label history (0-based).
    pub seq: u64,
    /// Log sequence number of the command that recorded it.
    pub lsn: u64,
    /// One item of the pair.
    pub left: String,
    /// The other.
    pub right: String,
    /// The conclusion.
    pub label: Label,
    /// Who.
    pub actor: String,
    /// Why.
    pub rationale: String,
    /// Policy id in force when recorded.
    pub policy_id: String,
    /// Policy version in force when recorded.
    pub policy_version: u32,
    /// The tenant's fingerprint version (normalizer, shingles, signature, LSH).
    pub source_version: String,
    /// Wall-clock time of acceptance, ms since the Unix epoch (recorded in
    /// the log, so replay reproduces it).
    pub recorded_at_ms: u64,
}

impl NewLabel {
    pub(crate) fn check(&self) -> Result<()> {
        crate::tenant_config::check_item_id(&self.left)?;
        crate::tenant_config::check_item_id(&self.right)?;
        if self.actor.trim().is_empty() || self.actor.len() > 256 {
            return Err(Error::input("actor", "must be 1..=256 bytes"));
        }
        if self.rationale.len() > 4096 {
            return Err(Error::input("rationale", "must be at most 4096 bytes"));
        }
        Ok(())
    }
}
