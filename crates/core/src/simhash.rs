//! SimHash: 64-bit fingerprints of weighted feature bags, compared by Hamming
//! distance (Charikar 2002), with an exact index for distance ≤ k ≤ 3.
//!
//! Version `simhash64-v1`: each feature `f` with weight `w` adds `+w` to bit
//! `i`'s counter when bit `i` of `fmix64(f ^ seed)` is set and `-w` otherwise;
//! the fingerprint has bit `i` set where the counter is positive.
//!
//! [`SimHashIndex`] splits fingerprints into `k + 1` blocks: by pigeonhole, two
//! fingerprints within distance `k` agree exactly on at least one block, so
//! looking up each block finds every such pair (the permuted-table scheme of
//! Manku, Jain and Das Sarma, WWW 2007, in its simplest exact form). An index
//! holds only SimHash fingerprints; it is never mixed with MinHash.

use std::collections::HashMap;

use crate::error::{Error, Result};
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

/// Cosine-like similarity implied by a Hamming distance: `1 - d/64`.
pub fn similarity(a: u64, b: u64) -> f64 {
    1.0 - f64::from(hamming(a, b)) / 64.0
}

/// Exact index of SimHash fingerprints for Hamming distance ≤ `max_distance` (≤ 3).
#[derive(Debug, Clone)]
pub struct SimHashIndex {
    max_distance: u32,
    blocks: Vec<(u32, u32)>, // (shift, width)
    tables: Vec<HashMap<u64, Vec<u32>>>,
    fingerprints: HashMap<u32, u64>,
}

impl SimHashIndex {
    /// An empty index answering distance ≤ `max_distance`, which must be 0..=3.
    pub fn new(max_distance: u32) -> Result<SimHashIndex> {
        if max_distance > 3 {
            return Err(Error::config("max_distance", format!("must be 0..=3, got {max_distance}")));
        }
        let n = max_distance + 1;
        let base = 64 / n;
        let mut blocks = Vec::new();
        let mut shift = 0;
        for i in 0..n {
            let width = if i == n - 1 { 64 - shift } else { base };
            blocks.push((shift, width));
            shift += width;
        }
        let tables = (0..n).map(|_| HashMap::new()).collect();
        Ok(SimHashIndex { max_distance, blocks, tables, fingerprints: HashMap::new() })
    }

    fn block(&self, fp: u64, i: usize) -> u64 {
        let (shift, width) = self.blocks[i];
        if width == 64 {
            fp
        } else {
            (fp >> shift) & ((1u64 << width) - 1)
        }
    }

    /// Number of fingerprints held.
    pub fn len(&self) -> usize {
        self.fingerprints.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.fingerprints.is_empty()
    }

    /// Adds (or replaces) `id`.
    pub fn insert(&mut self, id: u32, fp: u64) {
        self.remove(id);
        for i in 0..self.blocks.len() {
            let key = self.block(fp, i);
            self.tables[i].entry(key).or_default().push(id);
        }
        self.fingerprints.insert(id, fp);
    }

    /// Removes `id`; false when absent.
    pub fn remove(&mut self, id: u32) -> bool {
        let Some(fp) = self.fingerprints.remove(&id) else {
            return false;
        };
        for i in 0..self.blocks.len() {
            let key = self.block(fp, i);
            if let Some(list) = self.tables[i].get_mut(&key) {
                list.retain(|&x| x != id);
                if list.is_empty() {
                    self.tables[i].remove(&key);
                }
            }
        }
        true
    }

    /// Every id within `max_distance` of `fp`, as (id, distance), nearest first.
    pub fn query(&self, fp: u64) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for i in 0..self.blocks.len() {
            if let Some(list) = self.tables[i].get(&self.block(fp, i)) {
                for &id in list {
                    let d = hamming(fp, self.fingerprints[&id]);
                    if d <= self.max_distance {
                        out.push((id, d));
                    }
                }
            }
        }
        out.sort_unstable_by_key(|&(id, d)| (d, id));
        out.dedup();
        out
    }
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

    #[test]
    fn index_finds_everything_within_k_and_nothing_beyond() {
        let mut idx = SimHashIndex::new(3).unwrap();
        let base = 0xDEAD_BEEF_0123_4567u64;
        let flips = [0u64, 1, 1 << 20 | 1 << 40, 1 | 1 << 17 | 1 << 63, 0b1111];
        for (i, f) in flips.iter().enumerate() {
            idx.insert(i as u32, base ^ f);
        }
        let got: Vec<u32> = idx.query(base).iter().map(|x| x.0).collect();
        assert_eq!(got, vec![0, 1, 2, 3]);
        assert!(idx.remove(1));
        assert_eq!(idx.query(base).len(), 3);
        assert!(SimHashIndex::new(4).is_err());
    }
}
