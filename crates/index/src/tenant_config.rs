//! Per-tenant configuration: index parameters, policy and limits, validated
//! once, before anything is allocated for the tenant.

use neardup_core::{Config, Params, Policy};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest tenant id, in bytes.
pub const MAX_TENANT_ID: usize = 64;
/// Largest item id, in bytes.
pub const MAX_ITEM_ID: usize = 256;
/// Largest epoch: 2^53 − 1, the largest integer every JSON parser holds
/// exactly (JavaScript's `Number.MAX_SAFE_INTEGER`). A larger one would
/// reach a JavaScript client as another number, and 2^64 − 1 left an id
/// no write could ever follow.
pub const MAX_EPOCH: u64 = (1 << 53) - 1;

/// Refuses an epoch above [`MAX_EPOCH`].
pub(crate) fn check_epoch(epoch: u64) -> crate::Result<()> {
    if epoch > MAX_EPOCH {
        return Err(crate::Error::input("epoch", format!("{epoch} is over the largest epoch, {MAX_EPOCH} (2^53 - 1)")));
    }
    Ok(())
}

/// Thresholds of the tenant's decision policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Stable policy id, recorded with every decision.
    pub id: String,
    /// Bumped whenever thresholds change.
    pub version: u32,
    /// Exact score at or above which an item is a duplicate.
    pub threshold_identical: f64,
    /// Exact score at or above which an item is a near duplicate.
    pub threshold_similar: f64,
}

/// Per-tenant resource budgets, checked before allocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TenantLimits {
    /// Most live items.
    pub max_items: u64,
    /// Most bytes of live content (sum of content lengths).
    pub max_bytes: u64,
    /// Largest single item's content, in bytes.
    pub max_item_bytes: u64,
    /// Idempotency keys remembered; the oldest is forgotten beyond this.
    pub max_idempotency_keys: u64,
}

impl Default for TenantLimits {
    fn default() -> Self {
        TenantLimits {
            max_items: 10_000_000,
            max_bytes: 64 << 30,
            max_item_bytes: 4 << 20,
            max_idempotency_keys: 100_000,
        }
    }
}

/// Everything a tenant is configured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Pipeline parameters (normalizer, shingles, signature, LSH, guards).
    pub index: Config,
    /// Decision thresholds.
    pub policy: PolicyConfig,
    /// Budgets.
    #[serde(default)]
    pub limits: TenantLimits,
    /// Keep each item's original content with its record. Needed to rebuild
    /// under a different normalizer, shingling, seed or shingle cap (features
    /// cannot be recomputed from features); without it such rebuilds are
    /// refused with `rebuild_needs_content`.
    #[serde(default = "yes")]
    pub retain_content: bool,
}

fn yes() -> bool {
    true
}

impl TenantConfig {
    /// A configuration with `index` and the default policy: near duplicate at
    /// the index threshold, duplicate at score 1 (or equal content hashes).
    pub fn new(index: Config) -> TenantConfig {
        let similar = index.threshold;
        TenantConfig {
            index,
            policy: PolicyConfig {
                id: "default".into(),
                version: 1,
                threshold_identical: 1.0,
                threshold_similar: similar,
            },
            limits: TenantLimits::default(),
            retain_content: true,
        }
    }

    /// Validates everything and returns the resolved parts.
    pub(crate) fn resolve(&self) -> Result<(Params, Policy)> {
        let params = self.index.resolve()?;
        let p = &self.policy;
        let policy = Policy::new(p.id.clone(), p.version, p.threshold_identical, p.threshold_similar)?;
        let l = &self.limits;
        for (key, v) in [
            ("limits.max_items", l.max_items),
            ("limits.max_bytes", l.max_bytes),
            ("limits.max_item_bytes", l.max_item_bytes),
            ("limits.max_idempotency_keys", l.max_idempotency_keys),
        ] {
            if v == 0 {
                return Err(Error::config(key, "must be at least 1"));
            }
        }
        if l.max_items > u64::from(neardup_core::MAX_ITEM_ID) {
            return Err(Error::config("limits.max_items", format!("must be at most {}", neardup_core::MAX_ITEM_ID)));
        }
        if l.max_item_bytes > 1 << 30 {
            return Err(Error::config("limits.max_item_bytes", "must be at most 1 GiB"));
        }
        Ok((params, policy))
    }

    /// Stable JSON form (field names, not enum positions, reach the disk).
    pub(crate) fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::state(format!("encoding a tenant configuration: {e}")))
    }

    pub(crate) fn from_json(s: &str) -> Result<TenantConfig> {
        serde_json::from_str(s).map_err(|e| Error::corrupt("tenant config", e.to_string()))
    }

    /// True when `other` computes the same canonical features for the same
    /// content (so a rebuild can reuse stored features).
    pub(crate) fn same_features(&self, other: &TenantConfig) -> bool {
        let (a, b) = (&self.index, &other.index);
        a.normalizer == b.normalizer
            && a.shingle_kind == b.shingle_kind
            && a.shingle_width == b.shingle_width
            && a.seed == b.seed
            && a.max_shingles == b.max_shingles
    }
}

/// Checks a tenant id: 1..=64 bytes of `[A-Za-z0-9_.-]`.
pub(crate) fn check_tenant_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_TENANT_ID {
        return Err(Error::input("tenant_id", format!("must be 1..={MAX_TENANT_ID} bytes")));
    }
    // The id names a snapshot directory: it must not be `.` or `..`.
    if !id.as_bytes()[0].is_ascii_alphanumeric()
        || !id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(Error::input("tenant_id", "must start with [A-Za-z0-9] and use only [A-Za-z0-9_.-]"));
    }
    Ok(())
}

/// Checks an item id: 1..=256 bytes, no control characters, and none of
/// the invisible characters that make two different ids look the same or
/// reorder how an id is shown (bidirectional overrides and isolates,
/// zero-width spaces and joiners, the byte-order mark, the soft hyphen).
pub(crate) fn check_item_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_ITEM_ID {
        return Err(Error::input("item_id", format!("must be 1..={MAX_ITEM_ID} bytes")));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::input("item_id", "control characters are not allowed"));
    }
    let invisible = |c: char| {
        matches!(c, '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}')
            || matches!(c, '\u{2066}'..='\u{2069}' | '\u{FEFF}')
    };
    if let Some(c) = id.chars().find(|&c| invisible(c)) {
        return Err(Error::input(
            "item_id",
            format!("invisible formatting character U+{:04X} (bidi control or zero-width) is not allowed", c as u32),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_unknown_fields_rejected() {
        let c = TenantConfig::new(Config::seed_example());
        let back = TenantConfig::from_json(&c.to_json().unwrap()).unwrap();
        assert_eq!(back, c);
        let mut v: serde_json::Value = serde_json::from_str(&c.to_json().unwrap()).unwrap();
        v["surprise"] = serde_json::json!(1);
        assert!(TenantConfig::from_json(&v.to_string()).is_err());
    }

    #[test]
    fn limits_validated() {
        let mut c = TenantConfig::new(Config::seed_example());
        c.limits.max_items = 0;
        assert_eq!(c.resolve().unwrap_err().code(), "invalid_config");
        let mut c = TenantConfig::new(Config::seed_example());
        c.policy.threshold_similar = 1.5;
        assert!(c.resolve().is_err());
    }

    #[test]
    fn ids_checked() {
        assert!(check_tenant_id("acme-1.prod_x").is_ok());
        assert!(check_tenant_id("").is_err());
        assert!(check_tenant_id("a/b").is_err());
        assert!(check_tenant_id("..").is_err());
        assert!(check_item_id("x").is_ok());
        assert!(check_item_id("a\nb").is_err());
        // Issue 15: ids that look alike or display reordered.
        for id in ["a\u{202E}gpj.exe", "a\u{200B}b", "\u{FEFF}a", "a\u{2066}b"] {
            let e = check_item_id(id).unwrap_err().to_string();
            assert!(e.contains("invisible"), "{e}");
        }
        assert!(check_item_id("café-ü-日本").is_ok());
        assert!(check_item_id(&"x".repeat(257)).is_err());
    }
}
