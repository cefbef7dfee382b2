//! Text → [`Fingerprint`]: normalize, shingle, exact hash, MinHash, band keys.
//!
//! A [`Fingerprinter`] is built once from validated [`Params`] and reused; it
//! keeps scratch buffers so that fingerprinting a stream of texts allocates
//! only the outputs. It is cheap to clone (one per thread).

use crate::config::Params;
use crate::error::{ErrorKind, Result};
use crate::hash::{content_hash, content_hashes, ContentHash};
use crate::lsh::band_keys_into;
use crate::minhash::MinHasher;
use crate::shingle::Shingler;

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

/// What a store keeps of a fingerprint: enough to rebuild the rest under
/// the same feature parameters (normalizer, shingling, seed).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredFingerprint {
    /// BLAKE3-128 of the normalized text.
    pub content_hash: ContentHash,
    /// Tokens in the normalized text.
    pub tokens: u32,
    /// Canonical feature set.
    pub features: Vec<u64>,
    /// The stored signature when it was made under the rebuilding
    /// parameters; `None` recomputes it from `features`.
    pub signature: Option<Vec<u32>>,
    /// Shingles counted when the item was degraded (over `max_shingles`).
    pub degraded_shingles: Option<u64>,
}

impl Fingerprint {
    /// Shingles counted when the item was degraded (over `max_shingles`).
    pub fn degraded_shingles(&self) -> Option<u64> {
        self.degraded.map(|d| match d {
            Degraded::TooManyShingles { count, .. } => count,
        })
    }
}

/// Builds fingerprints under one set of parameters.
#[derive(Debug, Clone)]
pub struct Fingerprinter {
    params: Params,
    hasher: MinHasher,
    normalized: String,
    shingler: Shingler,
    /// [`Fingerprinter::fingerprint_many`]'s normalized texts and their
    /// content hashes, kept between batches.
    batch: Vec<String>,
    hashes: Vec<ContentHash>,
}

/// Texts normalized and content-hashed together by
/// [`Fingerprinter::fingerprint_many`]: enough to fill the hash's lanes
/// with their chunks, few enough that each is still in cache when it is
/// shingled.
const BATCH: usize = 16;

impl Fingerprinter {
    /// A fingerprinter for `params`.
    pub fn new(params: Params) -> Result<Fingerprinter> {
        let c = params.config();
        let hasher = MinHasher::new(c.signature, c.num_perm as usize, c.seed)?;
        Ok(Fingerprinter {
            params,
            hasher,
            normalized: String::new(),
            shingler: Shingler::default(),
            batch: Vec::new(),
            hashes: Vec::new(),
        })
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The fingerprint of a stored item under these parameters: the
    /// signature is recomputed from the features unless it is given, and the
    /// band keys always come from the signature. The one way every face
    /// turns stored features back into a queryable fingerprint. Fails when
    /// a given signature does not have `num_perm` values.
    pub fn rebuild(&self, stored: StoredFingerprint) -> Result<Fingerprint> {
        let c = self.params.config();
        let signature = match stored.signature {
            Some(s) => s,
            None => self.hasher.signature(&stored.features),
        };
        let band_keys = self.band_keys(&signature)?;
        Ok(Fingerprint {
            content_hash: stored.content_hash,
            tokens: stored.tokens,
            features: stored.features,
            signature,
            band_keys,
            degraded: stored
                .degraded_shingles
                .map(|count| Degraded::TooManyShingles { count, max: u64::from(c.max_shingles) }),
        })
    }

    /// The band keys of a signature made under these parameters (none for
    /// an empty signature); fails unless it has `num_perm` values.
    pub fn band_keys(&self, signature: &[u32]) -> Result<Vec<u64>> {
        let num_perm = self.params.config().num_perm as usize;
        if !signature.is_empty() && signature.len() != num_perm {
            return Err(crate::error::Error::incompatible(format!(
                "a signature of {} values where the parameters make {num_perm}",
                signature.len()
            )));
        }
        let mut keys = Vec::new();
        band_keys_into(self.params.lsh(), self.params.config().seed, signature, &mut keys)?;
        Ok(keys)
    }

    /// Fingerprints `text`. Never fails on input: an over-limit text comes
    /// back degraded (exact hash only), with the reason.
    pub fn fingerprint(&mut self, text: &str) -> Fingerprint {
        let c = self.params.config();
        c.normalizer.normalize_into(text, &mut self.normalized);
        let normalized = std::mem::take(&mut self.normalized);
        let fingerprint = self.finish(&normalized, content_hash(normalized.as_bytes()));
        self.normalized = normalized;
        fingerprint
    }

    /// [`Fingerprinter::fingerprint`] of each text, in order, appended to
    /// `out`: the same fingerprints, faster on many short texts (their
    /// content hashes are computed side by side,
    /// [`crate::hash::content_hashes`]).
    pub fn fingerprint_many<'t>(&mut self, texts: impl IntoIterator<Item = &'t str>, out: &mut Vec<Fingerprint>) {
        let mut texts = texts.into_iter().peekable();
        let mut batch = std::mem::take(&mut self.batch);
        let mut hashes = std::mem::take(&mut self.hashes);
        batch.resize_with(BATCH, String::new);
        while texts.peek().is_some() {
            let mut n = 0;
            // The batch's slots first: `zip` takes no text it has no slot for.
            for (normalized, text) in batch.iter_mut().zip(texts.by_ref()) {
                self.params.config().normalizer.normalize_into(text, normalized);
                n += 1;
            }
            let refs: [&[u8]; BATCH] = std::array::from_fn(|i| batch[i].as_bytes());
            content_hashes(&refs[..n], &mut hashes);
            for (normalized, &hash) in batch.iter().zip(&hashes) {
                out.push(self.finish(normalized, hash));
            }
        }
        // Long texts are not kept for the next batch (at most 1 MiB in
        // all is).
        for normalized in &mut batch {
            if normalized.capacity() > 64 << 10 {
                *normalized = String::new();
            }
        }
        self.batch = batch;
        self.hashes = hashes;
    }

    /// The fingerprint of a normalized text with its content hash.
    fn finish(&mut self, normalized: &str, content_hash: ContentHash) -> Fingerprint {
        let c = self.params.config();
        let mut features = Vec::new();
        let mut degraded = None;
        if let Err(e) = self.shingler.features_into(
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
                _ => unreachable!("Shingler::features_into only fails on its limit"),
            }
        }
        let tokens = self.shingler.token_count().min(u32::MAX as usize) as u32;
        let signature = self.hasher.signature(&features);
        let mut band_keys = Vec::new();
        band_keys_into(self.params.lsh(), c.seed, &signature, &mut band_keys)
            .expect("Params guarantees bands x rows <= num_perm");
        Fingerprint { content_hash, tokens, features, signature, band_keys, degraded }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn fingerprints_of_a_batch_are_each_text_s() {
        // Across batch boundaries: short and long texts, an empty one, one
        // of 16 chunks or more (hashed alone), one over the shingle limit.
        let words = ["alpha", "beta", "Gamma", "délta", "epsilon", "zeta", "eta", "theta", "ιώτα", "kappa"];
        let mut x = 11u64;
        let mut texts: Vec<String> = (0..40)
            .map(|i| {
                let n = [0, 1, 3, 40, 200, 400, 900, 3000][i % 8];
                (0..n)
                    .map(|_| {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        words[(x >> 60) as usize % words.len()]
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        texts.insert(17, String::new());
        let config = Config { max_shingles: 2000, ..Config::default() };
        let mut one = Fingerprinter::new(config.clone().resolve().unwrap()).unwrap();
        let mut many = Fingerprinter::new(config.resolve().unwrap()).unwrap();
        let want: Vec<Fingerprint> = texts.iter().map(|t| one.fingerprint(t)).collect();
        assert!(want.iter().any(|f| f.degraded.is_some()), "one text is over the limit");
        for _ in 0..2 {
            let mut got = vec![want[0].clone()];
            many.fingerprint_many(texts.iter().map(String::as_str), &mut got);
            assert_eq!(got[1..], want[..], "appended in order, the same");
        }
        let mut got = Vec::new();
        many.fingerprint_many(texts[..5].iter().map(String::as_str), &mut got);
        assert_eq!(got, want[..5]);
    }

    #[test]
    fn rebuild_from_stored_parts_equals_the_original() {
        let params = Config::default().resolve().unwrap();
        let mut fp = Fingerprinter::new(params).unwrap();
        let text = "the quick brown fox jumps over the lazy dog and runs far away from home";
        let original = fp.fingerprint(text);
        let stored = |signature| StoredFingerprint {
            content_hash: original.content_hash,
            tokens: original.tokens,
            features: original.features.clone(),
            signature,
            degraded_shingles: None,
        };
        assert_eq!(fp.rebuild(stored(None)).unwrap(), original);
        assert_eq!(fp.rebuild(stored(Some(original.signature.clone()))).unwrap(), original);
        assert!(fp.rebuild(stored(Some(vec![1, 2, 3]))).is_err());
        let empty = fp.fingerprint("");
        let rebuilt = fp
            .rebuild(StoredFingerprint {
                content_hash: empty.content_hash,
                tokens: 0,
                features: Vec::new(),
                signature: None,
                degraded_shingles: Some(7),
            })
            .unwrap();
        assert!(rebuilt.band_keys.is_empty() && rebuilt.signature.is_empty());
        assert_eq!(rebuilt.degraded, Some(Degraded::TooManyShingles { count: 7, max: 1_000_000 }));
    }
}
