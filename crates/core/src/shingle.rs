//! Shingling: normalized text → the canonical feature set.
//!
//! A word shingle of width k is k consecutive tokens; a character shingle of
//! width k is k consecutive characters of the normalized string (spaces
//! included, so word boundaries count). Because the normalized string
//! separates tokens by exactly one space, every shingle is a contiguous slice
//! of it and is hashed in place, without building a string.
//!
//! Each shingle becomes `xxh3_64(slice, seed)`. The sorted, de-duplicated list
//! of those hashes is the item's **canonical feature set**: exact Jaccard is a
//! merge of two such lists ([`crate::jaccard`]).
//!
//! A text with at least one token but fewer than k tokens (or characters)
//! yields one shingle, the whole text, so that short texts still have a
//! feature; the seed's reference returns no shingle there, which only matters
//! for texts shorter than the width. An empty text yields no feature.

use crate::error::{Error, Result};
use crate::hash::hash_bytes;

/// Word or character shingles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShingleKind {
    /// k consecutive tokens.
    Word,
    /// k consecutive characters of the normalized text.
    Char,
}

impl ShingleKind {
    /// `word` or `char`.
    pub fn name(self) -> &'static str {
        match self {
            ShingleKind::Word => "word",
            ShingleKind::Char => "char",
        }
    }
}

/// Number of shingles `normalized` will produce, computed without hashing or
/// allocating, so a limit can be checked first.
pub fn shingle_count(normalized: &str, kind: ShingleKind, width: usize) -> usize {
    if normalized.is_empty() {
        return 0;
    }
    let units = match kind {
        ShingleKind::Word => memchr::memchr_iter(b' ', normalized.as_bytes()).count() + 1,
        ShingleKind::Char => normalized.chars().count(),
    };
    units.saturating_sub(width) + 1
}

/// Hashes every shingle of `normalized` into `out` (cleared first), sorted and
/// de-duplicated. Fails, having allocated nothing, when the text has more than
/// `max_shingles` shingles.
pub fn features_into(
    normalized: &str,
    kind: ShingleKind,
    width: usize,
    seed: u64,
    max_shingles: usize,
    out: &mut Vec<u64>,
) -> Result<()> {
    out.clear();
    let count = shingle_count(normalized, kind, width);
    if count > max_shingles {
        return Err(Error::limit("max_shingles", max_shingles as u64, count as u64));
    }
    if count == 0 {
        return Ok(());
    }
    out.reserve(count);
    let bytes = normalized.as_bytes();
    match kind {
        ShingleKind::Word => {
            // Start offsets of the tokens in the current window, as a ring.
            let mut ring = [0usize; 64];
            debug_assert!(width <= ring.len());
            let mut seen = 0usize;
            let mut start = 0usize;
            for end in memchr::memchr_iter(b' ', bytes).chain(std::iter::once(bytes.len())) {
                ring[seen % width] = start;
                seen += 1;
                if seen >= width {
                    let first = ring[seen % width];
                    out.push(hash_bytes(&bytes[first..end], seed));
                }
                start = end + 1;
            }
            if seen < width {
                out.push(hash_bytes(bytes, seed));
            }
        }
        ShingleKind::Char => {
            let bounds: Vec<usize> =
                normalized.char_indices().map(|(i, _)| i).chain(std::iter::once(bytes.len())).collect();
            let chars = bounds.len() - 1;
            if chars < width {
                out.push(hash_bytes(bytes, seed));
            } else {
                for i in 0..=chars - width {
                    out.push(hash_bytes(&bytes[bounds[i]..bounds[i + width]], seed));
                }
            }
        }
    }
    sort_hashes(out);
    out.dedup();
    Ok(())
}

/// Sorts 64-bit hashes. Hashes are spread evenly, so a pass that files them
/// into about n / 4 buckets by their top bits leaves each bucket a handful
/// long; each bucket is then sorted on its own (with `sort_unstable`, so
/// crafted input that fills one bucket costs O(n log n), never worse).
fn sort_hashes(v: &mut Vec<u64>) {
    let n = v.len();
    if n < 512 {
        v.sort_unstable();
        return;
    }
    let bits = (usize::BITS - 1 - (n / 4).leading_zeros()).min(20);
    let shift = 64 - bits;
    let mut ends = vec![0u32; (1usize << bits) + 1];
    for &x in v.iter() {
        ends[(x >> shift) as usize + 1] += 1;
    }
    for b in 1..ends.len() {
        ends[b] += ends[b - 1];
    }
    let mut next = ends.clone();
    let mut sorted = vec![0u64; n];
    for &x in v.iter() {
        let b = (x >> shift) as usize;
        sorted[next[b] as usize] = x;
        next[b] += 1;
    }
    for w in ends.windows(2) {
        let bucket = &mut sorted[w[0] as usize..w[1] as usize];
        if bucket.len() > 1 {
            bucket.sort_unstable();
        }
    }
    *v = sorted;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(text: &str, kind: ShingleKind, width: usize) -> Vec<u64> {
        let mut out = Vec::new();
        features_into(text, kind, width, 7, 1_000_000, &mut out).unwrap();
        out
    }

    fn expected(parts: &[&str]) -> Vec<u64> {
        let mut v: Vec<u64> = parts.iter().map(|p| hash_bytes(p.as_bytes(), 7)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn hash_sort_sorts_spread_and_crafted_input() {
        let mut x = 7u64;
        let spread: Vec<u64> = (0..5000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                x
            })
            .collect();
        // All in one bucket, in falling order; and a mix with repeats.
        let crafted: Vec<u64> = (0..3000u64).rev().collect();
        let mixed: Vec<u64> = spread.iter().map(|v| (v % 700) << 54).collect();
        for input in [spread, crafted, mixed, vec![3, 1, 2]] {
            let mut want = input.clone();
            want.sort_unstable();
            let mut got = input;
            sort_hashes(&mut got);
            assert_eq!(got, want);
        }
    }

    #[test]
    fn word_bigrams() {
        assert_eq!(
            strings("red fox runs very fast", ShingleKind::Word, 2),
            expected(&["red fox", "fox runs", "runs very", "very fast"])
        );
    }

    #[test]
    fn word_short_text_is_one_shingle() {
        assert_eq!(strings("red fox", ShingleKind::Word, 5), expected(&["red fox"]));
        assert_eq!(strings("", ShingleKind::Word, 5), Vec::<u64>::new());
    }

    #[test]
    fn word_repeats_collapse() {
        assert_eq!(strings("a b a b a b", ShingleKind::Word, 2), expected(&["a b", "b a"]));
    }

    #[test]
    fn char_shingles_count_multibyte() {
        assert_eq!(strings("né é", ShingleKind::Char, 3), expected(&["né ", "é é"]));
        assert_eq!(strings("ab", ShingleKind::Char, 3), expected(&["ab"]));
    }

    #[test]
    fn limit_checked_before_hashing() {
        let mut out = Vec::new();
        let err = features_into("a b c d e f", ShingleKind::Word, 2, 0, 4, &mut out).unwrap_err();
        assert!(err.to_string().contains("max_shingles"), "{err}");
        assert!(out.is_empty());
        assert_eq!(shingle_count("a b c d e f", ShingleKind::Word, 2), 5);
        assert_eq!(shingle_count("abc", ShingleKind::Char, 5), 1);
    }
}
