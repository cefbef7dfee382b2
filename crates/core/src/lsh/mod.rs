//! Locality-sensitive hashing over MinHash signatures: banding, query limits
//! and the posting tables under [`crate::CandidateIndex`].
//!
//! A signature of `bands × rows` values is cut into `bands` slices of `rows`
//! values; each slice becomes a band key `xxh3_64(le_bytes(slice), seed + band)`.
//! Two items are candidates when they share a key in at least one band, which
//! happens with probability `1 - (1 - s^rows)^bands` at Jaccard `s`
//! ([`params::candidate_probability`]).
//!
//! Band keys are seeded, platform-independent u64 values and may be stored.

pub mod params;
pub(crate) mod postings;
pub(crate) mod screen;

use crate::error::{Error, Result};
use crate::hash::hash_u32s;

pub use params::LshParams;

/// Computes the band keys of `signature` into `keys` (cleared first).
pub fn band_keys_into(params: LshParams, seed: u64, signature: &[u32], keys: &mut Vec<u64>) -> Result<()> {
    keys.clear();
    if signature.is_empty() {
        return Ok(());
    }
    let (b, r) = (params.bands as usize, params.rows as usize);
    if signature.len() < b * r {
        return Err(Error::incompatible(format!(
            "signature of {} values cannot fill {b} bands x {r} rows",
            signature.len()
        )));
    }
    keys.extend((0..b).map(|band| hash_u32s(&signature[band * r..(band + 1) * r], seed.wrapping_add(band as u64))));
    Ok(())
}

/// Limits on one candidate query, checked while reading, so a hot bucket or a
/// flood of candidates cannot grow memory or latency without bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryLimits {
    /// Most candidates returned; more are reported through [`crate::CandidateSet::over_cap`].
    pub max_candidates: usize,
    /// Most entries read from one bucket; larger buckets are counted as hot.
    pub max_bucket_read: usize,
    /// The lowest exact score the caller acts on. A cap that cuts only
    /// candidates estimated far below it (see
    /// [`crate::CandidateSet::cut_close`]) does not make the answer partial.
    pub threshold: f64,
}

impl QueryLimits {
    /// Limits with no cap and no partial bucket reads (for tests and
    /// small exhaustive queries).
    pub fn unbounded(threshold: f64) -> QueryLimits {
        QueryLimits { max_candidates: usize::MAX, max_bucket_read: usize::MAX, threshold }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_platform_independent() {
        let mut keys = Vec::new();
        band_keys_into(LshParams::new(2, 2).unwrap(), 17, &[1, 2, 3, 4], &mut keys).unwrap();
        assert_eq!(keys[0], hash_u32s(&[1, 2], 17));
        assert_eq!(keys[1], hash_u32s(&[3, 4], 18));
    }

    #[test]
    fn a_short_signature_is_an_error() {
        let mut keys = Vec::new();
        assert!(band_keys_into(LshParams::new(2, 2).unwrap(), 1, &[1, 2, 3], &mut keys).is_err());
        band_keys_into(LshParams::new(2, 2).unwrap(), 1, &[], &mut keys).unwrap();
        assert!(keys.is_empty());
    }
}
