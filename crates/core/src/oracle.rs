//! The exact all-pairs Jaccard oracle: every pair with `J ≥ t`, no sampling,
//! no signatures. It is the reference every fast path is tested against and
//! stays in the project for good.
//!
//! Algorithm: a prefix-filtering similarity join (AllPairs, Bayardo et al.
//! 2007). Features are re-ranked rarest first; a set `x` can only reach `t`
//! with a set `y` (|y| ≤ |x|) if they share a token in their first
//! `|x| − ⌈t·|x|⌉ + 1` ranked tokens, and only if `|y| ≥ ⌈t·|x|⌉`. Every
//! surviving candidate is verified with the exact merge, so the output is
//! exact; the filters only decide how much work that takes.

use std::collections::HashMap;

use crate::verify::intersection_size;

/// A pair `(i, j)` with `i < j` and its exact Jaccard score.
pub type ScoredPair = (u32, u32, f64);

fn min_overlap_len(t: f64, len: usize) -> usize {
    // ⌈t·len⌉ with a guard against 0.8*5 = 4.000000000000001.
    ((t * len as f64) - 1e-9).ceil().max(0.0) as usize
}

/// Every pair of `sets` (canonical feature sets) with exact Jaccard `>= threshold`,
/// sorted by `(i, j)`. Two empty sets score 1.
pub fn all_pairs(sets: &[Vec<u64>], threshold: f64) -> Vec<ScoredPair> {
    let threshold = threshold.clamp(0.0, 1.0);
    let n = sets.len();
    if threshold <= 0.0 {
        // Everything pairs with everything; no filter applies.
        let mut out = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                out.push((i as u32, j as u32, crate::verify::jaccard(&sets[i], &sets[j])));
            }
        }
        return out;
    }
    // Rank tokens rarest first.
    let mut freq: HashMap<u64, u32> = HashMap::new();
    for s in sets {
        for &f in s {
            *freq.entry(f).or_insert(0) += 1;
        }
    }
    let mut order: Vec<(u32, u64)> = freq.iter().map(|(&f, &c)| (c, f)).collect();
    order.sort_unstable();
    let rank: HashMap<u64, u32> = order.iter().enumerate().map(|(r, &(_, f))| (f, r as u32)).collect();
    drop(order);
    drop(freq);
    let ranked: Vec<Vec<u32>> = sets
        .iter()
        .map(|s| {
            let mut v: Vec<u32> = s.iter().map(|f| rank[f]).collect();
            v.sort_unstable();
            v
        })
        .collect();

    let mut by_size: Vec<u32> = (0..n as u32).collect();
    by_size.sort_unstable_by_key(|&i| (sets[i as usize].len(), i));

    let mut out = Vec::new();
    let mut postings: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut counts = vec![0u32; n];
    let mut touched: Vec<u32> = Vec::new();
    let mut empties: Vec<u32> = Vec::new();
    for &x in &by_size {
        let xs = &ranked[x as usize];
        if xs.is_empty() {
            for &e in &empties {
                out.push((e.min(x), e.max(x), 1.0));
            }
            empties.push(x);
            continue;
        }
        let min_len = min_overlap_len(threshold, xs.len());
        let prefix = xs.len() - min_len + 1;
        for tok in &xs[..prefix.min(xs.len())] {
            if let Some(list) = postings.get(tok) {
                for &y in list {
                    if ranked[y as usize].len() < min_len {
                        continue;
                    }
                    if counts[y as usize] == 0 {
                        touched.push(y);
                    }
                    counts[y as usize] += 1;
                }
            }
        }
        for &y in &touched {
            counts[y as usize] = 0;
            let (a, b) = (&sets[x as usize], &sets[y as usize]);
            let inter = intersection_size(a, b);
            let j = inter as f64 / (a.len() + b.len() - inter) as f64;
            if j >= threshold {
                out.push((x.min(y), x.max(y), j));
            }
        }
        touched.clear();
        for tok in &xs[..prefix.min(xs.len())] {
            postings.entry(*tok).or_default().push(x);
        }
    }
    out.sort_unstable_by_key(|p| (p.0, p.1));
    out
}

/// The same answer by brute force, O(n²): the oracle's own oracle, for tests.
pub fn all_pairs_brute_force(sets: &[Vec<u64>], threshold: f64) -> Vec<ScoredPair> {
    let mut out = Vec::new();
    for i in 0..sets.len() {
        for j in i + 1..sets.len() {
            let s = crate::verify::jaccard(&sets[i], &sets[j]);
            if s >= threshold {
                out.push((i as u32, j as u32, s));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_seed_pair() {
        let sets = vec![vec![1, 2, 3, 4], vec![1, 2, 3, 4, 5], vec![7, 8, 9]];
        assert_eq!(all_pairs(&sets, 0.75), vec![(0, 1, 0.8)]);
        assert_eq!(all_pairs(&sets, 0.81), vec![]);
    }

    #[test]
    fn empties_pair_with_each_other_only() {
        let sets = vec![vec![], vec![1], vec![]];
        assert_eq!(all_pairs(&sets, 0.5), vec![(0, 2, 1.0)]);
    }

    #[test]
    fn boundary_is_inclusive() {
        // J = 4/5 exactly at t = 0.8 must be found despite float rounding of t·|x|.
        let sets = vec![vec![10, 20, 30, 40, 50], vec![10, 20, 30, 40]];
        assert_eq!(all_pairs(&sets, 0.8), vec![(0, 1, 0.8)]);
    }
}
