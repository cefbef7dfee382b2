//! Text → [`Fingerprint`]: normalize, shingle, exact hash, MinHash, band keys.
//!
//! A [`Fingerprinter`] is built once from validated [`Params`] and reused; it
//! keeps scratch buffers so that fingerprinting a stream of texts allocates
//! only the outputs. It is cheap to clone (one per thread).

use crate::config::Params;
use crate::error::{ErrorKind, Result};
use crate::hash::{content_hash, ContentHash};
use crate::lsh::band_keys_into;
use crate::minhash::MinHasher;
use crate::shingle::features_into;

/// Why an item carries no features (and is matched by exact hash only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Degraded {
    /// More shingles than `max_shingles`.
    TooManyShingles {
        /// Shingles the text would produce.
        count: u64,
        /// The limit.
        max: u64,
    },
}

/// Everything the pipeline derives from one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Fingerprint {
    /// BLAKE3-128 of the normalized text.
    pub content_hash: ContentHash,
    /// Tokens in the normalized text.
    pub tokens: u32,
    /// Canonical feature set (sorted, unique shingle hashes). Empty when
    /// the text is empty or the item is degraded.
    pub features: Vec<u64>,
    /// MinHash signature (empty when `features` is).
    pub signature: Vec<u32>,
    /// LSH band keys (empty when `signature` is).
    pub band_keys: Vec<u64>,
    /// Set when the item could not be fingerprinted in full.
    pub degraded: Option<Degraded>,
}

/// Builds fingerprints under one set of parameters.
#[derive(Debug, Clone)]
pub struct Fingerprinter {
    params: Params,
    hasher: MinHasher,
    normalized: String,
}

impl Fingerprinter {
    /// A fingerprinter for `params`.
    pub fn new(params: Params) -> Result<Fingerprinter> {
        let c = params.config();
        let hasher = MinHasher::new(c.signature, c.num_perm as usize, c.seed)?;
        Ok(Fingerprinter { params, hasher, normalized: String::new() })
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Fingerprints `text`. Never fails on input: an over-limit text comes
    /// back degraded (exact hash only), with the reason.
    pub fn fingerprint(&mut self, text: &str) -> Fingerprint {
        let c = self.params.config();
        c.normalizer.normalize_into(text, &mut self.normalized);
        let normalized = &self.normalized;
        let tokens = if normalized.is_empty() {
            0
        } else {
            (memchr::memchr_iter(b' ', normalized.as_bytes()).count() + 1).min(u32::MAX as usize) as u32
        };
        let content_hash = content_hash(normalized.as_bytes());
        let mut features = Vec::new();
        let mut degraded = None;
        if let Err(e) = features_into(
            normalized,
            c.shingle_kind,
            c.shingle_width as usize,
            c.seed,
            c.max_shingles as usize,
            &mut features,
        ) {
            match e.kind() {
                ErrorKind::LimitExceeded { max, actual, .. } => {
                    degraded = Some(Degraded::TooManyShingles { count: *actual, max: *max });
                    features = Vec::new();
                }
                _ => unreachable!("features_into only fails on its limit"),
            }
        }
        let signature = self.hasher.signature(&features);
        let mut band_keys = Vec::new();
        band_keys_into(self.params.lsh(), c.seed, &signature, &mut band_keys)
            .expect("Params guarantees bands x rows <= num_perm");
        Fingerprint { content_hash, tokens, features, signature, band_keys, degraded }
    }
}
