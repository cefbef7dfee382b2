//! Accuracy accounting against the oracle: recall and precision, overall and
//! by cohort (bins of exact Jaccard).

use std::collections::HashSet;

use crate::oracle::ScoredPair;

/// Recall within one bin `[lo, hi)` of exact Jaccard (the last bin includes 1.0).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BinRecall {
    /// Lower edge (inclusive).
    pub lo: f64,
    /// Upper edge (exclusive, except 1.0).
    pub hi: f64,
    /// Oracle pairs in the bin.
    pub truth: usize,
    /// Of those, how many the fast path found.
    pub found: usize,
    /// `found / truth` (1.0 when the bin is empty).
    pub recall: f64,
}

/// Recall of `found` against `truth`, per bin given by sorted `edges`
/// (e.g. `[0.8, 0.85, 0.9, 0.95, 1.0]` gives four bins).
pub fn recall_by_bin(truth: &[ScoredPair], found: &HashSet<(u32, u32)>, edges: &[f64]) -> Vec<BinRecall> {
    edges
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let (lo, hi) = (w[0], w[1]);
            let last = i + 2 == edges.len();
            let in_bin: Vec<&ScoredPair> =
                truth.iter().filter(|p| p.2 >= lo && (p.2 < hi || (last && p.2 <= hi))).collect();
            let hit = in_bin.iter().filter(|p| found.contains(&(p.0, p.1))).count();
            BinRecall {
                lo,
                hi,
                truth: in_bin.len(),
                found: hit,
                recall: if in_bin.is_empty() { 1.0 } else { hit as f64 / in_bin.len() as f64 },
            }
        })
        .collect()
}

/// Overall recall and precision of `found` (pairs `(i, j)`, `i < j`) against
/// oracle pairs at or above `threshold`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Accuracy {
    /// Threshold the comparison is made at.
    pub threshold: f64,
    /// Oracle pairs at or above it.
    pub truth: usize,
    /// Pairs reported by the fast path at or above it.
    pub reported: usize,
    /// Reported pairs that the oracle also has.
    pub true_positives: usize,
    /// `true_positives / truth`.
    pub recall: f64,
    /// `true_positives / reported`.
    pub precision: f64,
}

/// Recall and precision at `threshold`.
pub fn accuracy(truth: &[ScoredPair], reported: &[ScoredPair], threshold: f64) -> Accuracy {
    let t: HashSet<(u32, u32)> = truth.iter().filter(|p| p.2 >= threshold).map(|p| (p.0, p.1)).collect();
    let r: HashSet<(u32, u32)> = reported.iter().filter(|p| p.2 >= threshold).map(|p| (p.0, p.1)).collect();
    let tp = r.intersection(&t).count();
    Accuracy {
        threshold,
        truth: t.len(),
        reported: r.len(),
        true_positives: tp,
        recall: if t.is_empty() { 1.0 } else { tp as f64 / t.len() as f64 },
        precision: if r.is_empty() { 1.0 } else { tp as f64 / r.len() as f64 },
    }
}

/// p50, p99 and max of a list of counts.
pub fn percentiles(values: &mut [usize]) -> (usize, usize, usize) {
    if values.is_empty() {
        return (0, 0, 0);
    }
    values.sort_unstable();
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), values[values.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_and_accuracy() {
        let truth = vec![(0, 1, 0.82), (0, 2, 0.9), (1, 2, 1.0)];
        let found: HashSet<(u32, u32)> = [(0, 1), (1, 2)].into_iter().collect();
        let bins = recall_by_bin(&truth, &found, &[0.8, 0.85, 0.95, 1.0]);
        assert_eq!(bins.iter().map(|b| (b.truth, b.found)).collect::<Vec<_>>(), vec![(1, 1), (1, 0), (1, 1)]);
        let acc = accuracy(&truth, &[(0, 1, 0.82), (1, 2, 1.0), (3, 4, 0.9)], 0.8);
        assert_eq!((acc.true_positives, acc.truth, acc.reported), (2, 3, 3));
        let mut v = vec![5, 1, 3, 2, 4];
        assert_eq!(percentiles(&mut v), (3, 5, 5));
    }
}
