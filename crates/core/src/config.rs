//! User-facing configuration and the validated [`Params`] it resolves to.
//!
//! [`Config`] is plain data (serde, CLI flags, TOML). [`Config::resolve`]
//! checks every value once, before anything is allocated, and returns
//! [`Params`], which can only exist in a valid state and is what every
//! algorithm takes.

use crate::error::{Error, Result};
use crate::lsh::{params::choose, LshParams};
use crate::minhash::{SignatureScheme, MAX_NUM_PERM};
use crate::normalize::Normalizer;
use crate::shingle::ShingleKind;

/// The only version of the [`Config`] on-disk/wire format this build reads
/// and writes.
pub const CONFIG_FORMAT_VERSION: u32 = 1;

/// Default candidate probability at the threshold: with candidates ranked
/// by estimated similarity before the cap, the extra candidates of a
/// stricter target cost little (measured in bench/results/accuracy.md).
pub const DEFAULT_RECALL_TARGET: f64 = 0.999;

/// Default seed: the bytes of "neardup1".
pub const DEFAULT_SEED: u64 = 0x6e65_6172_6475_7031;

/// Pipeline configuration as a user writes it. `None` means "choose for me".
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Normalization version.
    pub normalizer: Normalizer,
    /// Word or character shingles.
    pub shingle_kind: ShingleKind,
    /// Tokens (word) or characters (char) per shingle.
    pub shingle_width: u32,
    /// MinHash algorithm.
    pub signature: SignatureScheme,
    /// Signature length.
    pub num_perm: u32,
    /// LSH bands; with `rows`, from the calculator when unset.
    pub bands: Option<u32>,
    /// Signature values per band.
    pub rows: Option<u32>,
    /// Seed of every hash (features, signatures, band keys).
    pub seed: u64,
    /// Jaccard threshold at and above which a pair is a near duplicate.
    pub threshold: f64,
    /// Candidate probability the calculator must reach at `threshold`.
    pub recall_target: f64,
    /// Most shingles per item; above it the item is exact-hash only.
    pub max_shingles: u32,
    /// Most candidates verified per item; more is reported as over cap.
    pub max_candidates: u32,
    /// Most entries read from one LSH bucket per query.
    pub max_bucket_read: u32,
    /// Bits of each signature value kept in memory to rank candidates
    /// before the cap (8, 16 or 32): `num_perm · rank_bits / 8` bytes per item.
    pub rank_bits: u32,
    /// Bits per key of the compact membership screen in front of each
    /// posting table (0: none, the default; else 4..=32). It answers
    /// "definitely no bucket" without reading the table and never changes a
    /// candidate, so it is not part of the fingerprint version
    /// (`crate::lsh::screen`). Left out of the serialized form when 0, so
    /// a configuration without a screen reads as before in older builds.
    #[serde(skip_serializing_if = "is_zero")]
    pub screen_bits: u32,
    /// Format version; only [`CONFIG_FORMAT_VERSION`] is accepted.
    pub format_version: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Default for Config {
    fn default() -> Self {
        Config {
            normalizer: Normalizer::Unicode,
            shingle_kind: ShingleKind::Word,
            shingle_width: 5,
            signature: SignatureScheme::OnePermutation,
            num_perm: 128,
            bands: None,
            rows: None,
            seed: DEFAULT_SEED,
            threshold: 0.8,
            recall_target: DEFAULT_RECALL_TARGET,
            max_shingles: 1_000_000,
            max_candidates: 100,
            max_bucket_read: 1_000,
            rank_bits: 8,
            screen_bits: 0,
            format_version: CONFIG_FORMAT_VERSION,
        }
    }
}

impl Config {
    /// The seed document's service example: seed normalizer, word bigrams,
    /// classic MinHash of 32 values in 8 bands, threshold 0.75, seed 19.
    pub fn seed_example() -> Config {
        Config {
            normalizer: Normalizer::Seed,
            signature: SignatureScheme::MinHash,
            shingle_width: 2,
            num_perm: 32,
            bands: Some(8),
            rows: Some(4),
            seed: 19,
            threshold: 0.75,
            max_shingles: 10_000,
            ..Config::default()
        }
    }

    /// Validates every value and resolves LSH parameters.
    pub fn resolve(&self) -> Result<Params> {
        let max_width = match self.shingle_kind {
            ShingleKind::Word => 16,
            ShingleKind::Char => 64,
        };
        if !(1..=max_width).contains(&self.shingle_width) {
            return Err(Error::config(
                "shingle_width",
                format!(
                    "{} shingles must be 1..={max_width} wide, got {}",
                    self.shingle_kind.name(),
                    self.shingle_width
                ),
            ));
        }
        if self.num_perm == 0 || self.num_perm as usize > MAX_NUM_PERM {
            return Err(Error::config("num_perm", format!("must be in 1..={MAX_NUM_PERM}, got {}", self.num_perm)));
        }
        if !(0.0..=1.0).contains(&self.threshold) {
            return Err(Error::config("threshold", format!("must be in [0, 1], got {}", self.threshold)));
        }
        if !(0.0..1.0).contains(&self.recall_target) || self.recall_target <= 0.0 {
            return Err(Error::config("recall_target", format!("must be in (0, 1), got {}", self.recall_target)));
        }
        if !(1..=10_000).contains(&self.max_candidates) {
            return Err(Error::config("max_candidates", format!("must be in 1..=10000, got {}", self.max_candidates)));
        }
        if !(1..=10_000_000).contains(&self.max_shingles) {
            return Err(Error::config("max_shingles", format!("must be in 1..=10000000, got {}", self.max_shingles)));
        }
        if !(1..=10_000_000).contains(&self.max_bucket_read) {
            return Err(Error::config(
                "max_bucket_read",
                format!("must be in 1..=10000000, got {}", self.max_bucket_read),
            ));
        }
        if self.screen_bits != 0 && !(4..=32).contains(&self.screen_bits) {
            return Err(Error::config(
                "screen_bits",
                format!("must be 0 (no membership screen) or 4..=32, got {}", self.screen_bits),
            ));
        }
        if !matches!(self.rank_bits, 8 | 16 | 32) {
            return Err(Error::config("rank_bits", format!("must be 8, 16 or 32, got {}", self.rank_bits)));
        }
        if self.format_version != CONFIG_FORMAT_VERSION {
            return Err(Error::config(
                "format_version",
                format!(
                    "unsupported format version {} (this build reads {CONFIG_FORMAT_VERSION})",
                    self.format_version
                ),
            ));
        }
        let n = self.num_perm;
        if self.signature.is_simhash() && !n.is_multiple_of(64) {
            return Err(Error::config(
                "num_perm",
                format!("simhash signs in blocks of 64 bits: num_perm must be a multiple of 64, got {n}"),
            ));
        }
        let lsh = match (self.bands, self.rows) {
            (Some(b), Some(r)) => {
                let params = LshParams::new(b, r)?;
                if u64::from(b) * u64::from(r) > u64::from(n) {
                    return Err(Error::config(
                        "bands/rows",
                        format!("bands x rows = {b} x {r} = {} exceeds num_perm = {n}", u64::from(b) * u64::from(r)),
                    ));
                }
                params
            }
            // SimHash: any band count; the bands take ⌊n / b⌋ bits each
            // (the pigeonhole holds over the bits they use).
            (Some(b), None) if self.signature.is_simhash() => {
                if b == 0 || b > n {
                    return Err(Error::config("bands", format!("simhash needs 1..={n} bands, got {b}")));
                }
                LshParams::new(b, n / b)?
            }
            (Some(b), None) => {
                if b == 0 || !n.is_multiple_of(b) {
                    return Err(Error::config("bands", format!("num_perm {n} must divide evenly into {b} bands")));
                }
                LshParams::new(b, n / b)?
            }
            (None, Some(r)) => {
                if r == 0 || !n.is_multiple_of(r) {
                    return Err(Error::config(
                        "rows",
                        format!("num_perm {n} must divide evenly into bands of {r} rows"),
                    ));
                }
                LshParams::new(n / r, r)?
            }
            // SimHash: k + 1 disjoint bands find every item within Hamming
            // distance k; k = 3 by default (Manku et al.).
            (None, None) if self.signature.is_simhash() => LshParams::new(4, n / 4)?,
            (None, None) => {
                if self.threshold <= 0.0 {
                    return Err(Error::config(
                        "threshold",
                        "must be above 0 to choose LSH parameters; set --bands/--rows",
                    ));
                }
                choose(self.threshold, self.recall_target, n)?.params
            }
        };
        Ok(Params { config: self.clone(), lsh })
    }
}

/// A validated configuration with resolved LSH parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    config: Config,
    lsh: LshParams,
}

impl Params {
    /// The configuration these parameters came from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Resolved banding.
    pub fn lsh(&self) -> LshParams {
        self.lsh
    }

    /// The limits every candidate query under these parameters runs with.
    pub fn query_limits(&self) -> crate::lsh::QueryLimits {
        crate::lsh::QueryLimits {
            max_candidates: self.config.max_candidates as usize,
            max_bucket_read: self.config.max_bucket_read as usize,
            threshold: self.config.threshold,
        }
    }

    /// The threshold.
    pub fn threshold(&self) -> f64 {
        self.config.threshold
    }

    /// For a SimHash signature, the largest Hamming distance (over the
    /// whole signature) at which two items are candidates: one less than
    /// the bands, since `k + 1` disjoint bands hold every pair within `k`.
    /// `None` for MinHash.
    pub fn max_hamming(&self) -> Option<u32> {
        self.config.signature.is_simhash().then(|| self.lsh.bands - 1)
    }

    /// The probability that two items of Jaccard similarity `j` become
    /// candidates: the S-curve `1 − (1 − j^r)^b` for MinHash; for SimHash the
    /// probability that at most [`Params::max_hamming`] of the signature's
    /// bits differ, each with probability `1 − agreement(j)`
    /// ([`crate::SignatureScheme::agreement`]).
    pub fn candidate_probability(&self, j: f64) -> f64 {
        let scheme = self.config.signature;
        match self.max_hamming() {
            None => self.lsh.probability(j),
            Some(k) => {
                let n = self.config.num_perm;
                // At most 1/2: SimHash bits agree at least by chance.
                let q = 1.0 - scheme.agreement(j);
                // Σ_{d ≤ k} C(n, d) q^d (1 − q)^(n − d), term by term.
                let mut term = (1.0 - q).powi(n as i32);
                let mut sum = term;
                for d in 1..=k.min(n) {
                    term *= f64::from(n - d + 1) / f64::from(d) * q / (1.0 - q);
                    sum += term;
                }
                sum.clamp(0.0, 1.0)
            }
        }
    }

    /// A stable string naming everything that changes fingerprints or
    /// candidates; two indexes are compatible exactly when it is equal.
    pub fn fingerprint_version(&self) -> String {
        let c = &self.config;
        format!(
            "f{}/{}/{}{}/{}/{}x{}/seed{:x}/lsh{}x{}",
            c.format_version,
            c.normalizer.version(),
            c.shingle_kind.name(),
            c.shingle_width,
            crate::hash::FEATURE_HASH_VERSION,
            c.signature.version(),
            c.num_perm,
            c.seed,
            self.lsh.bands,
            self.lsh.rows
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_resolve() {
        let p = Config::default().resolve().unwrap();
        assert!(p.lsh().width() <= 128);
        assert!(p.lsh().probability(0.8) >= DEFAULT_RECALL_TARGET);
    }

    #[test]
    fn simhash_resolves_to_disjoint_bands_of_bits() {
        let c = Config { signature: SignatureScheme::SimHash, num_perm: 64, ..Config::default() };
        let p = c.resolve().unwrap();
        assert_eq!((p.lsh().bands, p.lsh().rows, p.max_hamming()), (4, 16, Some(3)));
        assert!(p.fingerprint_version().contains("simhash-v1x64"), "{}", p.fingerprint_version());
        // Identical sets are always candidates; the curve falls with J.
        assert!((p.candidate_probability(1.0) - 1.0).abs() < 1e-12);
        let (hi, lo) = (p.candidate_probability(0.97), p.candidate_probability(0.8));
        assert!(hi > 0.5 && lo < 0.05 && lo > 0.0, "{hi} {lo}");
        // Two bands: within one bit; six take ten bits each.
        let p = Config { bands: Some(2), ..c.clone() }.resolve().unwrap();
        assert_eq!((p.lsh().rows, p.max_hamming()), (32, Some(1)));
        let p = Config { bands: Some(6), ..c.clone() }.resolve().unwrap();
        assert_eq!((p.lsh().rows, p.max_hamming()), (10, Some(5)));
        assert!(Config { bands: Some(65), ..c.clone() }.resolve().is_err());
        let e = Config { num_perm: 100, ..c }.resolve().unwrap_err().to_string();
        assert!(e.contains("multiple of 64"), "{e}");
        let m = Config::default().resolve().unwrap();
        assert_eq!(m.max_hamming(), None);
        assert_eq!(m.candidate_probability(0.8), m.lsh().probability(0.8));
    }

    #[test]
    fn seed_layout_rules() {
        // The seed's `rows=31, bands=8`: 31 values cannot be split into 8 bands.
        let c = Config { num_perm: 31, bands: Some(8), rows: None, ..Config::default() };
        let e = c.resolve().unwrap_err().to_string();
        assert!(e.contains("divide evenly"), "{e}");
        // Our own flags: 8 bands of 31 rows need 248 values.
        let c = Config { bands: Some(8), rows: Some(31), ..Config::default() };
        let e = c.resolve().unwrap_err().to_string();
        assert!(e.contains("exceeds num_perm"), "{e}");
    }

    #[test]
    fn every_limit_checked() {
        let bad = [
            Config { shingle_width: 0, ..Config::default() },
            Config { shingle_width: 17, ..Config::default() },
            Config { threshold: 1.5, ..Config::default() },
            Config { threshold: f64::NAN, ..Config::default() },
            Config { max_candidates: 0, ..Config::default() },
            Config { max_candidates: 10_001, ..Config::default() },
            Config { max_shingles: 0, ..Config::default() },
            Config { num_perm: 0, ..Config::default() },
            Config { num_perm: 4096, ..Config::default() },
            Config { format_version: 2, ..Config::default() },
            Config { recall_target: 1.0, ..Config::default() },
            Config { rank_bits: 12, ..Config::default() },
        ];
        for c in bad {
            assert!(c.resolve().is_err(), "{c:?}");
        }
    }

    #[test]
    fn seed_example_resolves() {
        let p = Config::seed_example().resolve().unwrap();
        assert_eq!(p.lsh(), LshParams { bands: 8, rows: 4 });
    }
}
