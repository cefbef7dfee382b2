//! The user-facing tenant configuration: a few friendly keys mapped onto
//! `neardup_core::Config`, the policy and the limits.
//!
//! Unset keys keep their base value: core's calculator defaults for a new
//! tenant (`Config::default()`: 128 MinHash values, bands and rows chosen so
//! that a pair at `threshold` is a candidate with probability ≥
//! `recall_target`), the tenant's current configuration for a rebuild or a
//! shadow. The engine validates the result (`Config::resolve`) before
//! anything is allocated.

use neardup_core::{Normalizer, ShingleKind, SignatureScheme};
use neardup_index::{PolicyConfig, TenantConfig, TenantLimits};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult, GatewayKind};

/// Tenant index parameters, policy and limits; every key optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// `seed` (the seed's `[a-z0-9]+` tokenizer) or `default` (Unicode).
    pub normalizer: Option<String>,
    /// `word` or `char` shingles.
    pub shingle_kind: Option<String>,
    /// Tokens or characters per shingle.
    #[schema(minimum = 1, maximum = 64)]
    pub shingle_width: Option<u32>,
    /// `oph` (the default), `minhash` or `simhash` (64 bits unless
    /// `num_perm` says otherwise; `bands` − 1 is the Hamming distance
    /// within which items are candidates, 3 by default). Never mixed: an
    /// index holds one scheme.
    pub signature: Option<String>,
    /// Signature length.
    #[schema(minimum = 1, maximum = 1024)]
    pub num_perm: Option<u32>,
    /// LSH bands (calculator when unset).
    pub bands: Option<u32>,
    /// Rows per band (calculator when unset).
    pub rows: Option<u32>,
    /// Hash seed.
    pub seed: Option<u64>,
    /// Jaccard at and above which a pair is a near duplicate.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub threshold: Option<f64>,
    /// Candidate probability the calculator must reach at `threshold`.
    pub recall_target: Option<f64>,
    /// Most shingles per item (above: exact hash only, quarantined).
    pub max_shingles: Option<u32>,
    /// Most candidates verified per item.
    pub max_candidates: Option<u32>,
    /// Most entries read from one bucket per query.
    pub max_bucket_read: Option<u32>,
    /// Bits of each signature value kept in memory to rank candidates
    /// before the cap (8, 16 or 32).
    pub rank_bits: Option<u32>,
    /// Bits per key of the compact membership screen in front of each
    /// posting table: 0 (none, the default) or 4..=32. It answers
    /// "definitely no bucket" without reading the table and changes no
    /// candidate.
    pub screen_bits: Option<u32>,
    /// Policy overrides.
    pub policy: Option<PolicySpec>,
    /// Tenant budgets.
    pub limits: Option<LimitsSpec>,
    /// Keep content (needed for rebuilds that change features).
    pub retain_content: Option<bool>,
}

/// Policy overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    /// Policy id.
    pub id: Option<String>,
    /// Policy version.
    pub version: Option<u32>,
    /// Score at and above which a pair is a duplicate.
    pub threshold_identical: Option<f64>,
    /// Score at and above which a pair is a near duplicate (defaults to `threshold`).
    pub threshold_similar: Option<f64>,
}

/// Budget overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsSpec {
    /// Live items.
    pub max_items: Option<u64>,
    /// Live content bytes.
    pub max_bytes: Option<u64>,
    /// Bytes per item.
    pub max_item_bytes: Option<u64>,
    /// Idempotency keys remembered.
    pub max_idempotency_keys: Option<u64>,
}

/// The effective configuration of a tenant, as the API reports it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TenantView {
    /// Tenant id.
    pub tenant_id: String,
    /// Normalizer version.
    pub normalizer: String,
    /// `word` or `char`.
    pub shingle_kind: String,
    /// Shingle width.
    pub shingle_width: u32,
    /// Signature scheme version.
    pub signature: String,
    /// Signature length.
    pub num_perm: u32,
    /// Resolved bands.
    pub bands: u32,
    /// Resolved rows.
    pub rows: u32,
    /// Seed.
    pub seed: u64,
    /// Threshold.
    pub threshold: f64,
    /// Recall target.
    pub recall_target: f64,
    /// Candidate probability at the threshold.
    pub candidate_probability_at_threshold: f64,
    /// SimHash: the largest Hamming distance (over the whole signature) at
    /// which items are candidates; bands − 1. Absent for MinHash.
    pub max_hamming: Option<u32>,
    /// Shingle cap.
    pub max_shingles: u32,
    /// Candidate cap.
    pub max_candidates: u32,
    /// Bucket read cap.
    pub max_bucket_read: u32,
    /// Bits per signature value in the ranking sketch.
    pub rank_bits: u32,
    /// Bits per key of the membership screen (0: none).
    pub screen_bits: u32,
    /// Fingerprint version (changes ⇔ index incompatible).
    pub fingerprint_version: String,
    /// Policy.
    pub policy: PolicyView,
    /// Budgets.
    pub limits: LimitsView,
    /// Content retained.
    pub retain_content: bool,
}

/// A policy.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyView {
    /// Id.
    pub id: String,
    /// Version.
    pub version: u32,
    /// Duplicate threshold.
    pub threshold_identical: f64,
    /// Near-duplicate threshold.
    pub threshold_similar: f64,
}

/// Budgets.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LimitsView {
    /// Live items.
    pub max_items: u64,
    /// Live bytes.
    pub max_bytes: u64,
    /// Bytes per item.
    pub max_item_bytes: u64,
    /// Idempotency keys remembered.
    pub max_idempotency_keys: u64,
}

fn bad(key: &'static str, e: impl std::fmt::Display) -> ApiError {
    ApiError::gateway(GatewayKind::InvalidConfig { key, reason: e.to_string() })
}

impl TenantSpec {
    /// The configuration for a new tenant.
    pub fn for_new_tenant(&self) -> ApiResult<TenantConfig> {
        self.apply(TenantConfig::new(neardup_core::Config::default()))
    }

    /// `base` with this spec's keys overridden.
    pub fn apply(&self, base: TenantConfig) -> ApiResult<TenantConfig> {
        let mut c = base;
        let idx = &mut c.index;
        if let Some(n) = &self.normalizer {
            idx.normalizer = Normalizer::from_name(n).map_err(|e| bad("normalizer", e))?;
        }
        if let Some(k) = &self.shingle_kind {
            idx.shingle_kind = match k.as_str() {
                "word" => ShingleKind::Word,
                "char" => ShingleKind::Char,
                other => return Err(bad("shingle_kind", format!("{other:?} is not word or char"))),
            };
        }
        let mut signature_changed = false;
        if let Some(s) = &self.signature {
            let scheme = SignatureScheme::from_name(s).map_err(|e| bad("signature", e))?;
            signature_changed = scheme != idx.signature;
            if signature_changed && self.num_perm.is_none() {
                // Each scheme's own default length.
                idx.num_perm = scheme.default_num_perm();
            }
            idx.signature = scheme;
        }
        // What the banding is chosen from: the calculator's inputs for
        // MinHash; for SimHash only the bit count (its bands are the
        // Hamming distance, which a threshold does not change).
        let calculator_input = self.threshold.is_some() || self.recall_target.is_some();
        let layout_changed =
            signature_changed || self.num_perm.is_some() || (calculator_input && !idx.signature.is_simhash());
        if layout_changed && self.bands.is_none() && self.rows.is_none() {
            if idx.signature.is_simhash() && !signature_changed {
                // More or fewer bits, the same distance: keep the bands.
                idx.rows = None;
            } else {
                // Let the calculator choose again for the new layout inputs.
                idx.bands = None;
                idx.rows = None;
            }
        }
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { idx.$f = v; } )* };
        }
        set!(
            shingle_width,
            num_perm,
            seed,
            threshold,
            recall_target,
            max_shingles,
            max_candidates,
            max_bucket_read,
            rank_bits,
            screen_bits
        );
        if self.bands.is_some() || self.rows.is_some() {
            idx.bands = self.bands;
            idx.rows = self.rows;
        }
        let threshold = idx.threshold;
        let p = self.policy.clone().unwrap_or_default();
        let explicit_similar = p.threshold_similar.is_some();
        c.policy = PolicyConfig {
            id: p.id.unwrap_or(c.policy.id),
            version: p.version.unwrap_or(c.policy.version),
            threshold_identical: p.threshold_identical.unwrap_or(c.policy.threshold_identical),
            threshold_similar: p.threshold_similar.unwrap_or(if self.threshold.is_some() && !explicit_similar {
                threshold
            } else {
                c.policy.threshold_similar
            }),
        };
        if let Some(l) = &self.limits {
            let d = c.limits.clone();
            c.limits = TenantLimits {
                max_items: l.max_items.unwrap_or(d.max_items),
                max_bytes: l.max_bytes.unwrap_or(d.max_bytes),
                max_item_bytes: l.max_item_bytes.unwrap_or(d.max_item_bytes),
                max_idempotency_keys: l.max_idempotency_keys.unwrap_or(d.max_idempotency_keys),
            };
        }
        if let Some(r) = self.retain_content {
            c.retain_content = r;
        }
        // Validate now so the caller gets one clear error before the engine allocates.
        c.index.resolve().map_err(neardup_index::Error::from)?;
        Ok(c)
    }
}

/// The view of a tenant's configuration.
pub fn view(tenant: &str, c: &TenantConfig) -> ApiResult<TenantView> {
    let params = c.index.resolve().map_err(neardup_index::Error::from)?;
    let i = &c.index;
    Ok(TenantView {
        tenant_id: tenant.to_string(),
        normalizer: i.normalizer.version().to_string(),
        shingle_kind: i.shingle_kind.name().to_string(),
        shingle_width: i.shingle_width,
        signature: i.signature.version().to_string(),
        num_perm: i.num_perm,
        bands: params.lsh().bands,
        rows: params.lsh().rows,
        seed: i.seed,
        threshold: i.threshold,
        recall_target: i.recall_target,
        candidate_probability_at_threshold: params.candidate_probability(i.threshold),
        max_hamming: params.max_hamming(),
        max_shingles: i.max_shingles,
        max_candidates: i.max_candidates,
        max_bucket_read: i.max_bucket_read,
        rank_bits: i.rank_bits,
        screen_bits: i.screen_bits,
        fingerprint_version: params.fingerprint_version(),
        policy: PolicyView {
            id: c.policy.id.clone(),
            version: c.policy.version,
            threshold_identical: c.policy.threshold_identical,
            threshold_similar: c.policy.threshold_similar,
        },
        limits: LimitsView {
            max_items: c.limits.max_items,
            max_bytes: c.limits.max_bytes,
            max_item_bytes: c.limits.max_item_bytes,
            max_idempotency_keys: c.limits.max_idempotency_keys,
        },
        retain_content: c.retain_content,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_example_keys_map_onto_calculator_defaults() {
        let spec: TenantSpec =
            serde_json::from_str(r#"{"normalizer":"seed","shingle_width":2,"threshold":0.75}"#).unwrap();
        let c = spec.for_new_tenant().unwrap();
        assert_eq!(c.index.normalizer, Normalizer::Seed);
        assert_eq!(c.index.shingle_width, 2);
        assert_eq!(c.policy.threshold_similar, 0.75);
        let p = c.index.resolve().unwrap();
        // A/B of the seed are at Jaccard 0.8; they must come out as candidates.
        assert!(p.lsh().probability(0.8) >= neardup_core::DEFAULT_RECALL_TARGET, "{:?}", p.lsh());
    }

    /// A SimHash tenant's bands are its Hamming distance: a new threshold
    /// keeps them, more bits keep them (with longer bands), another scheme
    /// lets the calculator choose.
    #[test]
    fn simhash_bands_survive_changes_that_do_not_name_them() {
        let spec = |json: &str| serde_json::from_str::<TenantSpec>(json).unwrap();
        let c = spec(r#"{"signature":"simhash","bands":8}"#).for_new_tenant().unwrap();
        let layout = |c: &TenantConfig| {
            let p = c.index.resolve().unwrap();
            (c.index.num_perm, p.lsh().bands, p.lsh().rows, p.max_hamming())
        };
        assert_eq!(layout(&c), (64, 8, 8, Some(7)));
        let c = spec(r#"{"threshold":0.9,"recall_target":0.99}"#).apply(c).unwrap();
        assert_eq!(layout(&c), (64, 8, 8, Some(7)));
        let c = spec(r#"{"num_perm":128}"#).apply(c).unwrap();
        assert_eq!(layout(&c), (128, 8, 16, Some(7)));
        let c = spec(r#"{"signature":"oph"}"#).apply(c).unwrap();
        let (n, _, _, k) = layout(&c);
        assert_eq!((n, k), (128, None));
        let c = spec(r#"{"signature":"simhash"}"#).apply(c).unwrap();
        assert_eq!(layout(&c), (64, 4, 16, Some(3)));
    }

    #[test]
    fn bad_keys_are_config_errors() {
        for body in [
            r#"{"normalizer":"klingon"}"#,
            r#"{"shingle_kind":"sentence"}"#,
            r#"{"shingle_width":0}"#,
            r#"{"threshold":1.5}"#,
            r#"{"num_perm":31,"bands":8}"#,
        ] {
            let spec: TenantSpec = serde_json::from_str(body).unwrap();
            let e = spec.for_new_tenant().unwrap_err();
            assert_eq!(e.parts().1, "invalid_config", "{body}");
        }
        assert!(serde_json::from_str::<TenantSpec>(r#"{"surprise":1}"#).is_err());
    }
}
