//! Accuracy accounting against the oracle: recall and precision, overall, by
//! cohort (bins of exact Jaccard), by density (how many near duplicates the
//! later item of a pair has), and of the greedy keep/drop decisions.

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

/// Pair recall among pairs whose later item has a given number of earlier
/// partners (oracle pairs at or above the threshold).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DensityRecall {
    /// Fewest earlier partners of the later item (inclusive).
    pub min_partners: usize,
    /// Most (inclusive; `usize::MAX` for no bound).
    pub max_partners: usize,
    /// Oracle pairs in the cohort.
    pub truth: usize,
    /// Of those, found.
    pub found: usize,
    /// `found / truth` (1.0 when the cohort is empty).
    pub recall: f64,
}

/// Recall of `found` against oracle pairs at or above `threshold`, by the
/// later item's count of earlier partners, in cohorts cut at `cuts` (e.g.
/// `[10, 100]` gives ≤ 10, 11–100, > 100). A query can only be capped where
/// that count exceeds the candidate cap, so this shows whether misses sit in
/// dense neighbourhoods.
pub fn recall_by_density(
    truth: &[ScoredPair],
    found: &HashSet<(u32, u32)>,
    threshold: f64,
    cuts: &[usize],
) -> Vec<DensityRecall> {
    let mut partners: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for p in truth.iter().filter(|p| p.2 >= threshold) {
        *partners.entry(p.1).or_default() += 1;
    }
    let mut bounds: Vec<(usize, usize)> = Vec::new();
    let mut lo = 1;
    for &c in cuts {
        bounds.push((lo, c));
        lo = c + 1;
    }
    bounds.push((lo, usize::MAX));
    bounds
        .into_iter()
        .map(|(min, max)| {
            let cohort: Vec<&ScoredPair> =
                truth.iter().filter(|p| p.2 >= threshold && (min..=max).contains(&partners[&p.1])).collect();
            let hit = cohort.iter().filter(|p| found.contains(&(p.0, p.1))).count();
            DensityRecall {
                min_partners: min,
                max_partners: max,
                truth: cohort.len(),
                found: hit,
                recall: if cohort.is_empty() { 1.0 } else { hit as f64 / cohort.len() as f64 },
            }
        })
        .collect()
}

/// The greedy rule applied to oracle pairs: item `j` (in input order) is
/// dropped exactly when some earlier item that was kept has `J >= threshold`
/// with it. Returns `dropped[i]` for `n` items.
pub fn greedy_drops(n: usize, truth: &[ScoredPair], threshold: f64) -> Vec<bool> {
    let mut earlier: Vec<Vec<u32>> = vec![Vec::new(); n];
    for p in truth.iter().filter(|p| p.2 >= threshold) {
        earlier[p.1 as usize].push(p.0);
    }
    let mut dropped = vec![false; n];
    for j in 0..n {
        dropped[j] = earlier[j].iter().any(|&i| !dropped[i as usize]);
    }
    dropped
}

/// Keep/drop decisions against the greedy rule over the oracle.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DecisionAccuracy {
    /// Items the rule drops.
    pub truth: usize,
    /// Items the fast path dropped.
    pub dropped: usize,
    /// Dropped by both.
    pub agreed: usize,
    /// `agreed / truth`: of the items that should go, how many went.
    pub recall: f64,
    /// `agreed / dropped`: of the items that went, how many should have.
    pub precision: f64,
}

/// Compares the fast path's drops with [`greedy_drops`] over the oracle.
pub fn decision_accuracy(oracle: &[bool], dropped: &[bool]) -> DecisionAccuracy {
    let truth = oracle.iter().filter(|&&d| d).count();
    let ours = dropped.iter().filter(|&&d| d).count();
    let agreed = oracle.iter().zip(dropped).filter(|(a, b)| **a && **b).count();
    DecisionAccuracy {
        truth,
        dropped: ours,
        agreed,
        recall: if truth == 0 { 1.0 } else { agreed as f64 / truth as f64 },
        precision: if ours == 0 { 1.0 } else { agreed as f64 / ours as f64 },
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

/// The 95 % Wilson score interval of `successes` out of `total`: unlike
/// the normal approximation it stays inside [0, 1] and is honest for small
/// counts (3 of 3 is not "100 % ± 0"). `(0, 1)` when `total` is 0.
pub fn wilson_interval(successes: u64, total: u64) -> (f64, f64) {
    if total == 0 {
        return (0.0, 1.0);
    }
    const Z: f64 = 1.959_963_984_540_054;
    let n = total as f64;
    let p = successes.min(total) as f64 / n;
    let z2 = Z * Z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals() {
        assert_eq!(wilson_interval(0, 0), (0.0, 1.0));
        // Published values (Wilson 1927; e.g. Newcombe 1998, table I): 81 of 263.
        let (lo, hi) = wilson_interval(81, 263);
        assert!((lo - 0.2553).abs() < 5e-4 && (hi - 0.3662).abs() < 5e-4, "{lo} {hi}");
        let (lo, hi) = wilson_interval(3, 3);
        assert!(hi == 1.0 && (lo - 0.4385).abs() < 5e-4, "{lo}");
        let (lo, hi) = wilson_interval(0, 10);
        assert!(lo == 0.0 && (hi - 0.2775).abs() < 5e-4, "{hi}");
    }

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

    #[test]
    fn density_cohorts_and_greedy_decisions() {
        // Item 3 has three earlier partners, item 1 one, item 4 one.
        let truth = vec![(0, 1, 0.9), (0, 3, 0.9), (1, 3, 0.95), (2, 3, 0.85), (2, 4, 0.7)];
        let found: HashSet<(u32, u32)> = [(0, 1), (0, 3), (2, 3)].into_iter().collect();
        let d = recall_by_density(&truth, &found, 0.8, &[1, 2]);
        let got: Vec<_> = d.iter().map(|c| (c.min_partners, c.truth, c.found)).collect();
        assert_eq!(got, [(1, 1, 1), (2, 0, 0), (3, 3, 2)]);
        assert_eq!(d[2].max_partners, usize::MAX);
        // 0 kept; 1 dropped (0 kept); 2 kept; 3 dropped; 4 kept (0.7 < 0.8).
        let oracle = greedy_drops(5, &truth, 0.8);
        assert_eq!(oracle, [false, true, false, true, false]);
        // Items whose only earlier partner was dropped are kept.
        assert_eq!(greedy_drops(3, &[(0, 1, 0.9), (1, 2, 0.9)], 0.8), [false, true, false]);
        let acc = decision_accuracy(&oracle, &[false, true, false, false, true]);
        assert_eq!((acc.truth, acc.dropped, acc.agreed), (2, 2, 1));
        assert_eq!((acc.recall, acc.precision), (0.5, 0.5));
    }
}
