//! Exact verification on canonical feature sets (sorted, de-duplicated u64).
//!
//! These are the authoritative scores: every destructive outcome (skip,
//! merge, drop) follows one of them, never a signature estimate.
//! [`verify_pair`] is the one rule every face of neardup scores a candidate
//! with (batch dedup, the scan, the service and its shadow index).

use crate::hash::ContentHash;

/// The exact score of one pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairScore {
    /// Exact Jaccard of the canonical feature sets; 1 for equal content.
    pub score: f64,
    /// The content hashes are equal.
    pub same_content: bool,
}

/// Scores a pair by the one rule, returning it when the score is at least
/// `threshold` (pass 0 for every score):
///
/// - equal content hashes score 1 (identical normalized text);
/// - otherwise an empty feature set (empty text, or an item over the
///   shingle cap, matched by content hash only) scores 0 against anything,
///   another empty set included;
/// - otherwise the exact Jaccard, with [`jaccard_at_least`]'s early exits.
pub fn verify_pair(
    a: &[u64],
    a_hash: &ContentHash,
    b: &[u64],
    b_hash: &ContentHash,
    threshold: f64,
) -> Option<PairScore> {
    if let Some(answer) = verify_pair_by_sizes(a.len(), a_hash, b.len(), b_hash, threshold) {
        return answer;
    }
    jaccard_at_least(a, b, threshold).map(|score| PairScore { score, same_content: false })
}

/// What [`verify_pair`] answers from the content hashes and the feature
/// sets' sizes alone: `Some(answer)` when they settle the pair (equal
/// content, an empty side, sizes too far apart for `threshold`: J ≤
/// min/max), `None` when the features must be compared. A store that
/// reads features from disk asks this first.
pub fn verify_pair_by_sizes(
    a_len: usize,
    a_hash: &ContentHash,
    b_len: usize,
    b_hash: &ContentHash,
    threshold: f64,
) -> Option<Option<PairScore>> {
    if a_hash == b_hash {
        return Some(Some(PairScore { score: 1.0, same_content: true }));
    }
    if a_len == 0 || b_len == 0 {
        return Some((0.0 >= threshold).then_some(PairScore { score: 0.0, same_content: false }));
    }
    if sizes_rule_out(a_len, b_len, threshold) {
        return Some(None);
    }
    None
}

/// J ≤ min/max: sets of these sizes cannot reach `threshold`.
fn sizes_rule_out(a_len: usize, b_len: usize, threshold: f64) -> bool {
    (a_len.min(b_len) as f64) < threshold * a_len.max(b_len) as f64 - 1e-9
}

/// True when `features` is strictly increasing: a valid canonical feature set.
/// Loaded state is checked with this before use.
pub fn is_canonical(features: &[u64]) -> bool {
    features.windows(2).all(|w| w[0] < w[1])
}

/// |a ∩ b| of two canonical sets: a linear merge, or galloping search when
/// one side is much smaller.
pub fn intersection_size(a: &[u64], b: &[u64]) -> usize {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if small.is_empty() {
        return 0;
    }
    if large.len() / small.len() >= 32 {
        let mut count = 0;
        let mut rest = large;
        for x in small {
            match rest.binary_search(x) {
                Ok(i) => {
                    count += 1;
                    rest = &rest[i + 1..];
                }
                Err(i) => rest = &rest[i..],
            }
        }
        return count;
    }
    count_common(a, b, 0).unwrap_or_default()
}

/// |a ∩ b| of two canonical sets by a linear merge, or `None` once the
/// elements left cannot lift the count to `need` (checked every few dozen
/// steps: cheap, and it exits early on hopeless pairs; `need` 0 never
/// exits). Merges four elements of each side at a time with AVX2 where the
/// CPU has it (chosen at run time), one at a time otherwise.
fn count_common(a: &[u64], b: &[u64], need: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, the only feature the function enables.
            return unsafe { count_common_avx2(a, b, need) };
        }
    }
    count_common_scalar(a, b, (0, 0, 0), need)
}

/// [`count_common`] one element at a time, from positions `i`, `j` with
/// `count` common elements already found before them.
fn count_common_scalar(
    a: &[u64],
    b: &[u64],
    (mut i, mut j, mut count): (usize, usize, usize),
    need: usize,
) -> Option<usize> {
    while i < a.len() && j < b.len() {
        if (i + j) % 64 == 0 && count + (a.len() - i).min(b.len() - j) < need {
            return None;
        }
        let (x, y) = (a[i], b[j]);
        count += usize::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    Some(count)
}

/// [`count_common`] by blocks of four: each block of `a` is compared with
/// the current block of `b` under its four lane permutations that pair
/// every lane with every other (identity, swapped pairs, swapped halves,
/// both), and the block with the smaller last element moves on (both when
/// equal). Elements are unique within a set, so a lane of `a` matches at
/// most one of `b`: the matched lanes count the block pair's common
/// elements, and every pair of blocks whose ranges overlap meets once.
/// What is left when either side has fewer than four is merged one by one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn count_common_avx2(a: &[u64], b: &[u64], need: usize) -> Option<usize> {
    use std::arch::x86_64::*;
    let (mut i, mut j, mut count) = (0usize, 0usize, 0usize);
    let mut step = 0u32;
    while i + 4 <= a.len() && j + 4 <= b.len() {
        if step.is_multiple_of(16) && count + (a.len() - i).min(b.len() - j) < need {
            return None;
        }
        step += 1;
        // SAFETY: `i + 4 <= a.len()` and `j + 4 <= b.len()`: both loads and
        // the two reads of the blocks' last elements are in bounds.
        let (va, vb, a_last, b_last) = unsafe {
            (
                _mm256_loadu_si256(a.as_ptr().add(i).cast()),
                _mm256_loadu_si256(b.as_ptr().add(j).cast()),
                *a.get_unchecked(i + 3),
                *b.get_unchecked(j + 3),
            )
        };
        let pairs = _mm256_shuffle_epi32::<0b01_00_11_10>(vb);
        let halves = _mm256_permute4x64_epi64::<0b01_00_11_10>(vb);
        let both = _mm256_shuffle_epi32::<0b01_00_11_10>(halves);
        let hit = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi64(va, vb), _mm256_cmpeq_epi64(va, pairs)),
            _mm256_or_si256(_mm256_cmpeq_epi64(va, halves), _mm256_cmpeq_epi64(va, both)),
        );
        count += _mm256_movemask_pd(_mm256_castsi256_pd(hit)).count_ones() as usize;
        i += 4 * usize::from(a_last <= b_last);
        j += 4 * usize::from(b_last <= a_last);
    }
    count_common_scalar(a, b, (i, j, count), need)
}

/// Exact Jaccard similarity |a ∩ b| / |a ∪ b|; two empty sets score 1.
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = intersection_size(a, b);
    inter as f64 / (a.len() + b.len() - inter) as f64
}

/// Exact Jaccard if it is at least `threshold`, else `None`. Skips the merge
/// when the sizes alone rule the pair out (J ≤ min/max), and abandons it as
/// soon as the elements left cannot lift the overlap to what `threshold`
/// needs (J ≥ t ⇔ |a ∩ b| ≥ t·(|a| + |b|) / (1 + t)). The returned score is
/// always the full exact value.
pub fn jaccard_at_least(a: &[u64], b: &[u64], threshold: f64) -> Option<f64> {
    let (lo, hi) = (a.len().min(b.len()), a.len().max(b.len()));
    if hi == 0 {
        return (1.0 >= threshold).then_some(1.0);
    }
    if sizes_rule_out(lo, hi, threshold) {
        return None;
    }
    if hi / lo.max(1) >= 32 {
        let j = jaccard(a, b);
        return (j >= threshold).then_some(j);
    }
    let need = (threshold * (a.len() + b.len()) as f64 / (1.0 + threshold) - 1e-9).ceil().max(0.0) as usize;
    let count = count_common(a, b, need)?;
    let score = count as f64 / (a.len() + b.len() - count) as f64;
    (score >= threshold).then_some(score)
}

/// Containment |a ∩ b| / |a|: how much of `a` appears in `b`.
pub fn containment(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() {
        return 1.0;
    }
    intersection_size(a, b) as f64 / a.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_example_scores() {
        // {red fox, fox runs, runs very, very fast} vs the same plus {fast today}.
        assert_eq!(jaccard(&[1, 2, 3, 4], &[1, 2, 3, 4, 5]), 0.8);
        assert_eq!(jaccard(&[1, 2, 3, 4], &[1, 2, 3, 9, 10]), 3.0 / 6.0);
        assert_eq!(jaccard(&[], &[]), 1.0);
        assert_eq!(jaccard(&[1], &[]), 0.0);
    }

    #[test]
    fn block_merge_counts_as_the_one_by_one_merge() {
        let mut x = 11u64;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        for case in 0..400 {
            let (n, m) = ((next() % 90) as usize, (next() % 90) as usize);
            // Sets over a small range share many elements; a wide one few.
            let range = [40, 200, 1 << 30][case % 3];
            let mut set = |len: usize| {
                let mut v: Vec<u64> = (0..len).map(|_| next() % range).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let (a, b) = (set(n), set(m));
            let want = a.iter().filter(|x| b.binary_search(x).is_ok()).count();
            assert_eq!(count_common(&a, &b, 0), Some(want), "{a:?} {b:?}");
            assert_eq!(count_common_scalar(&a, &b, (0, 0, 0), 0), Some(want));
            for need in [want, want + 1, want + 20] {
                let got = count_common(&a, &b, need);
                // Never a wrong count; `None` only when `need` is out of reach.
                assert!(got == Some(want) || (got.is_none() && need > want), "{got:?} need {need} want {want}");
            }
        }
    }

    #[test]
    fn galloping_equals_merge() {
        let large: Vec<u64> = (0..10_000).map(|i| i * 3).collect();
        let small = vec![0, 3, 4, 9_000, 29_997, 40_000];
        assert_eq!(intersection_size(&small, &large), 4);
        assert_eq!(intersection_size(&large, &small), 4);
    }

    #[test]
    fn length_filter_never_rejects_a_passing_pair() {
        assert_eq!(jaccard_at_least(&[1, 2, 3, 4], &[1, 2, 3, 4, 5], 0.8), Some(0.8));
        assert_eq!(jaccard_at_least(&[1], &[1, 2, 3, 4, 5], 0.8), None);
    }

    #[test]
    fn early_exit_agrees_with_the_full_merge() {
        let a: Vec<u64> = (0..1000).collect();
        for shift in [0u64, 10, 100, 150, 200, 500, 999] {
            let b: Vec<u64> = (shift..shift + 1000).collect();
            for t in [0.0, 0.5, 0.7, 0.8, 0.9, 1.0] {
                let full = jaccard(&a, &b);
                assert_eq!(jaccard_at_least(&a, &b, t), (full >= t).then_some(full), "shift {shift} t {t}");
            }
        }
        assert_eq!(jaccard_at_least(&[], &[], 0.9), Some(1.0));
    }

    #[test]
    fn one_rule_for_equal_content_and_empty_sets() {
        let (x, y) = (ContentHash([1; 16]), ContentHash([2; 16]));
        let same = verify_pair(&[1, 2], &x, &[3], &x, 0.9).unwrap();
        assert_eq!((same.score, same.same_content), (1.0, true));
        // Two empty sets with different content are not duplicates.
        assert_eq!(verify_pair(&[], &x, &[], &y, 0.5), None);
        assert_eq!(verify_pair(&[], &x, &[], &y, 0.0).unwrap().score, 0.0);
        assert_eq!(verify_pair(&[1, 2], &x, &[], &y, 0.0).unwrap().score, 0.0);
        let s = verify_pair(&[1, 2, 3, 4], &x, &[1, 2, 3, 4, 5], &y, 0.8).unwrap();
        assert_eq!((s.score, s.same_content), (0.8, false));
        assert_eq!(verify_pair(&[1, 2, 3, 4], &x, &[1, 2, 3, 4, 5], &y, 0.81), None);
    }

    #[test]
    fn canonical_check() {
        assert!(is_canonical(&[1, 2, 5]));
        assert!(!is_canonical(&[1, 1]));
        assert!(!is_canonical(&[2, 1]));
    }
}
