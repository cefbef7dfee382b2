//! SimHash: 64-bit fingerprints of weighted feature bags, compared by Hamming
//! distance (Charikar 2002).
//!
//! Version `simhash64-v1`: each feature `f` with weight `w` adds `+w` to bit
//! `i`'s counter when bit `i` of `fmix64(f ^ seed)` is set and `-w` otherwise;
//! the fingerprint has bit `i` set where the counter is positive.
//!
//! The signature scheme `simhash-v1` ([`crate::SignatureScheme::SimHash`])
//! is built from these fingerprints and searched through the one candidate
//! index: `k + 1` bands of disjoint bits find every fingerprint within
//! Hamming distance `k` (pigeonhole), and the index drops those farther.

use crate::hash::fmix64;

/// Version tag of [`simhash`].
pub const SIMHASH_VERSION: &str = "simhash64-v1";

/// Fingerprint of weighted features. Weights ≤ 0 are ignored.
pub fn simhash(features: impl IntoIterator<Item = (u64, f64)>, seed: u64) -> u64 {
    let mut acc = [0f64; 64];
    for (f, w) in features {
        if w <= 0.0 || w.is_nan() {
            continue;
        }
        let h = fmix64(f ^ seed);
        for (bit, a) in acc.iter_mut().enumerate() {
            *a += if h >> bit & 1 == 1 { w } else { -w };
        }
    }
    acc.iter().enumerate().fold(0u64, |fp, (bit, &a)| if a > 0.0 { fp | 1 << bit } else { fp })
}

/// Fingerprint of a feature set, every feature weighted 1.
pub fn simhash_set(features: &[u64], seed: u64) -> u64 {
    simhash(features.iter().map(|&f| (f, 1.0)), seed)
}

/// Number of differing bits.
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_sets_identical_fingerprints() {
        assert_eq!(simhash_set(&[1, 2, 3], 5), simhash_set(&[3, 2, 1], 5));
        assert_eq!(simhash_set(&[], 5), 0);
    }

    #[test]
    fn similar_sets_are_close() {
        let a: Vec<u64> = (0..500).collect();
        let mut b = a.clone();
        b[0] = 10_000;
        let c: Vec<u64> = (1000..1500).collect();
        assert!(hamming(simhash_set(&a, 1), simhash_set(&b, 1)) < hamming(simhash_set(&a, 1), simhash_set(&c, 1)));
    }
}
