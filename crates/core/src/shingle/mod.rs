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

mod tokens;

pub use tokens::Tokens;

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
/// allocating, so a limit can be checked first. `tokens` holds the text's
/// token starts ([`Tokens::find`]).
fn shingle_count(normalized: &str, tokens: &Tokens, kind: ShingleKind, width: usize) -> usize {
    if normalized.is_empty() {
        return 0;
    }
    let units = match kind {
        ShingleKind::Word => tokens.count(),
        ShingleKind::Char => normalized.chars().count(),
    };
    units.saturating_sub(width) + 1
}

/// Hashes every shingle of `normalized` into `out` (cleared first), sorted and
/// de-duplicated. Fails, having allocated nothing for the features, when the
/// text has more than `max_shingles` shingles (the token starts it finds
/// first are kept only for the tokens that many shingles span). A width of
/// 0 shingles as 1. A caller that fingerprints many texts keeps one [`Shingler`], whose
/// scratch then outlives each text.
pub fn features_into(
    normalized: &str,
    kind: ShingleKind,
    width: usize,
    seed: u64,
    max_shingles: usize,
    out: &mut Vec<u64>,
) -> Result<()> {
    Shingler::default().features_into(normalized, kind, width, seed, max_shingles, out)
}

/// Shingles texts one after another, keeping what each needs between them:
/// the token starts (`Tokens`), the unsorted hashes and the sort's bucket
/// counts. For word shingles of a text under 4 GiB, only the sorted feature
/// set is a new allocation per text (it is what the caller keeps); the
/// scratch stays in cache and in memory already faulted in. (Character
/// shingles also collect the text's character boundaries.) Scratch that a
/// long text grew past a bound is given back when that text is done, so an
/// idle `Shingler` holds a few MiB at most.
#[derive(Debug, Clone, Default)]
pub struct Shingler {
    tokens: Tokens,
    hashes: Vec<u64>,
    counts: Vec<u32>,
}

/// The most tokens whose starts [`Shingler::features_into`] needs under
/// `max_shingles` (`width` at least 1): for word shingles, the tokens of
/// `max_shingles` windows; character shingles need none (only the count).
fn max_tokens(kind: ShingleKind, width: usize, max_shingles: usize) -> usize {
    match kind {
        ShingleKind::Word => max_shingles.saturating_add(width - 1),
        ShingleKind::Char => 0,
    }
}

/// Hashes scratch of more than this many entries (1 MiB), and sort counts
/// of more than twice as many, are given back after their text, not kept
/// for the next.
const RETAINED: usize = 1 << 17;

impl Shingler {
    /// Tokens (space-separated) in the text last given to
    /// [`Shingler::features_into`], counted whether or not it failed its
    /// limit.
    pub fn token_count(&self) -> usize {
        self.tokens.count()
    }

    /// [`features_into`] with this `Shingler`'s scratch. The text's token
    /// starts are found first, and kept only for as many tokens as
    /// `max_shingles` shingles can span: past that they are counted, and
    /// the limit fails before anything in proportion to the text is
    /// allocated.
    pub fn features_into(
        &mut self,
        normalized: &str,
        kind: ShingleKind,
        width: usize,
        seed: u64,
        max_shingles: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        // A width of 0 (which configs refuse) hashes as 1.
        let width = width.max(1);
        out.clear();
        self.tokens.find(normalized, max_tokens(kind, width, max_shingles));
        let result = self.shingle(normalized, kind, width, seed, max_shingles, out);
        self.tokens.trim();
        if self.hashes.capacity() > RETAINED {
            self.hashes = Vec::new();
        }
        if self.counts.capacity() > 2 * RETAINED {
            self.counts = Vec::new();
        }
        result
    }

    /// [`Shingler::features_into`] once the token starts are found
    /// (`width` at least 1, `out` empty).
    fn shingle(
        &mut self,
        normalized: &str,
        kind: ShingleKind,
        width: usize,
        seed: u64,
        max_shingles: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        let tokens = &self.tokens;
        debug_assert!(tokens.describe(normalized), "tokens of another text");
        let count = shingle_count(normalized, tokens, kind, width);
        if count > max_shingles {
            return Err(Error::limit("max_shingles", max_shingles as u64, count as u64));
        }
        if count == 0 {
            return Ok(());
        }
        let hashes = &mut self.hashes;
        hashes.clear();
        hashes.reserve(count);
        let bytes = normalized.as_bytes();
        match kind {
            ShingleKind::Word => {
                if tokens.count() < width {
                    hashes.push(hash_bytes(bytes, seed));
                } else if tokens.kept() {
                    hashes.extend((0..count).map(|first| hash_bytes(&bytes[tokens.span(first, width)], seed)));
                } else {
                    // Starts not kept: a text of 4 GiB or more (offsets
                    // past u32). Their offsets as `usize`, bounded by the
                    // limit checked above.
                    let starts: Vec<usize> = std::iter::once(0)
                        .chain(memchr::memchr_iter(b' ', bytes).map(|at| at + 1))
                        .chain(std::iter::once(bytes.len() + 1))
                        .collect();
                    hashes.extend(starts.windows(width + 1).map(|w| hash_bytes(&bytes[w[0]..w[width] - 1], seed)));
                }
            }
            ShingleKind::Char => {
                let bounds: Vec<usize> =
                    normalized.char_indices().map(|(i, _)| i).chain(std::iter::once(bytes.len())).collect();
                let chars = bounds.len() - 1;
                if chars < width {
                    hashes.push(hash_bytes(bytes, seed));
                } else {
                    for i in 0..=chars - width {
                        hashes.push(hash_bytes(&bytes[bounds[i]..bounds[i + width]], seed));
                    }
                }
            }
        }
        sort_hashes(hashes, &mut self.counts, out);
        out.dedup();
        Ok(())
    }
}

/// Sorts 64-bit hashes from `src` into `out` (cleared first; past 64
/// hashes it grows to exactly `src.len()` if it must). Hashes are spread evenly, so one pass
/// that files them into about n buckets by their top bits leaves them
/// nearly sorted — out of order only within a bucket, about one element
/// long — and an insertion pass finishes the job with few, well-predicted
/// moves (a comparison sort mispredicts about half its branches on hashes:
/// this is about twice as fast on a document's few hundred features).
/// Crafted input that crowds one bucket is caught by a budget of moves and
/// finished by `sort_unstable`: O(n log n), never worse. `counts` is
/// scratch (its contents do not matter).
fn sort_hashes(src: &[u64], counts: &mut Vec<u32>, out: &mut Vec<u64>) {
    let n = src.len();
    out.clear();
    if !(64..u32::MAX as usize).contains(&n) {
        out.extend_from_slice(src);
        out.sort_unstable();
        return;
    }
    let bits = (usize::BITS - (n - 1).leading_zeros()).min(20);
    let shift = 64 - bits;
    // Counts of u32 (n is a shingle count, far below 2^32): half the
    // table, and it stays in the first-level cache longer.
    counts.clear();
    counts.resize((1usize << bits) + 1, 0);
    for &x in src {
        counts[(x >> shift) as usize + 1] += 1;
    }
    // The running sum is kept in a register: summed through memory
    // (`counts[b] += counts[b - 1]`), each step waited on the store of the
    // one before — ~16 % of `features_into`'s samples.
    let mut sum = 0u32;
    for c in counts.iter_mut() {
        sum += *c;
        *c = sum;
    }
    // Filed straight into `out`'s spare room: no zeroed copy first.
    out.reserve_exact(n);
    let room = &mut out.spare_capacity_mut()[..n];
    for &x in src {
        let slot = &mut counts[(x >> shift) as usize];
        room[*slot as usize].write(x);
        *slot += 1;
    }
    // SAFETY: the slots are the running sums of the bucket counts, so the
    // pass above wrote each of the first `n` entries exactly once.
    unsafe { out.set_len(n) };
    let sorted = &mut out[..];
    let mut budget = 4 * n;
    for i in 1..n {
        let x = sorted[i];
        let mut j = i;
        while j > 0 && sorted[j - 1] > x {
            sorted[j] = sorted[j - 1];
            j -= 1;
        }
        sorted[j] = x;
        budget = budget.saturating_sub(i - j);
        if budget == 0 {
            sorted.sort_unstable();
            break;
        }
    }
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
        // At and around the length where the bucket sort takes over, and
        // with every value repeated.
        let around: Vec<Vec<u64>> = [63, 64, 65, 100].iter().map(|&n| spread[..n].to_vec()).collect();
        let repeated: Vec<u64> = spread[..700].iter().chain(&spread[..700]).copied().collect();
        let mut counts = Vec::new();
        for input in [spread, crafted, mixed, vec![3, 1, 2], repeated].into_iter().chain(around) {
            let mut want = input.clone();
            want.sort_unstable();
            // Into a fresh vector, and into one that held a longer list.
            let mut got = Vec::new();
            sort_hashes(&input, &mut counts, &mut got);
            assert_eq!(got, want);
            let mut reused = vec![u64::MAX; input.len() + 9];
            sort_hashes(&input, &mut counts, &mut reused);
            assert_eq!(reused, want);
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
    fn long_texts_sort_as_the_comparison_sort() {
        // Word shingles at and past the size where the bucket sort takes
        // over from `sort_unstable`; a vocabulary of 50 words makes
        // repeated shingles.
        let mut x = 11u64;
        for words in [60, 63, 64, 65, 68, 200, 1000, 5000] {
            let text: Vec<String> = (0..words)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    format!("w{}", (x >> 33) % 50)
                })
                .collect();
            let text = text.join(" ");
            for width in [1, 3, 5] {
                let grams: Vec<String> =
                    text.split(' ').collect::<Vec<_>>().windows(width).map(|w| w.join(" ")).collect();
                let want = expected(&grams.iter().map(String::as_str).collect::<Vec<_>>());
                assert_eq!(strings(&text, ShingleKind::Word, width), want, "{words} words, width {width}");
            }
        }
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
    fn word_features_are_the_windows_of_split_on_any_text() {
        // Texts no normalizer wrote too (runs of spaces, leading and
        // trailing ones): every width, with the starts kept and with them
        // only counted (the path for texts past u32 offsets).
        let mut x = 3u64;
        let mut shingler = Shingler::default();
        for len in (0..200).step_by(7).chain([1000, 5000]) {
            let text: String = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ['a', 'b', ' ', 'é', 'z', ' '][(x >> 60) as usize % 6]
                })
                .collect();
            let words: Vec<&str> = if text.is_empty() { Vec::new() } else { text.split(' ').collect() };
            for width in 1..=6 {
                let grams: Vec<String> = if words.len() < width {
                    vec![text.clone()]
                } else {
                    words.windows(width).map(|w| w.join(" ")).collect()
                };
                let want = if text.is_empty() {
                    Vec::new()
                } else {
                    expected(&grams.iter().map(String::as_str).collect::<Vec<_>>())
                };
                let mut got = vec![1, 2, 3];
                shingler.features_into(&text, ShingleKind::Word, width, 7, 1_000_000, &mut got).unwrap();
                assert_eq!(got, want, "width {width}, {text:?}");
                assert_eq!(shingler.token_count(), words.len());
                // The starts only counted (the path of texts past u32
                // offsets), as a cap of 0 leaves them.
                shingler.tokens.find(&text, 0);
                assert!(text.is_empty() || !shingler.tokens.kept());
                let mut got = Vec::new();
                shingler.shingle(&text, ShingleKind::Word, width, 7, 1_000_000, &mut got).unwrap();
                assert_eq!(got, want, "width {width}, starts not kept, {text:?}");
                // At the limit: the features; one under it: an error
                // naming both, and nothing in `out`.
                let shingles = words.len().saturating_sub(width) + 1;
                if !text.is_empty() {
                    let mut got = vec![1];
                    shingler.features_into(&text, ShingleKind::Word, width, 7, shingles, &mut got).unwrap();
                    assert_eq!(got, want, "width {width}, at the limit, {text:?}");
                    let limit = shingles - 1;
                    let e = shingler.features_into(&text, ShingleKind::Word, width, 7, limit, &mut got).unwrap_err();
                    assert!(
                        matches!(e.kind(), crate::ErrorKind::LimitExceeded { limit: "max_shingles", max, actual }
                            if *max == limit as u64 && *actual == shingles as u64),
                        "{e}"
                    );
                    assert!(got.is_empty());
                    assert_eq!(shingler.token_count(), words.len());
                }
            }
        }
    }

    #[test]
    fn scratch_grown_by_a_long_text_is_given_back() {
        let long: String = (0..600_000).map(|i| format!("w{} ", i % 5000)).collect();
        let long = long.trim_end();
        let mut shingler = Shingler::default();
        let mut out = Vec::new();
        shingler.features_into(long, ShingleKind::Word, 5, 7, 1 << 20, &mut out).unwrap();
        assert_eq!(out, strings(long, ShingleKind::Word, 5));
        assert_eq!(shingler.token_count(), 600_000);
        assert_eq!(shingler.hashes.capacity(), 0);
        assert_eq!(shingler.counts.capacity(), 0);
        assert!(!shingler.tokens.kept(), "the starts array was given back");
        // A short text after it: scratch kept, features right.
        shingler.features_into("a b c d e f g", ShingleKind::Word, 5, 7, 1 << 20, &mut out).unwrap();
        assert_eq!(out, expected(&["a b c d e", "b c d e f", "c d e f g"]));
        assert!(shingler.hashes.capacity() > 0 && shingler.tokens.kept());
    }

    #[test]
    fn limit_checked_before_hashing() {
        let mut out = Vec::new();
        let err = features_into("a b c d e f", ShingleKind::Word, 2, 0, 4, &mut out).unwrap_err();
        assert!(err.to_string().contains("max_shingles"), "{err}");
        assert!(out.is_empty());
        let count = |text: &str, kind, width| {
            let mut tokens = Tokens::default();
            tokens.find(text, usize::MAX);
            shingle_count(text, &tokens, kind, width)
        };
        assert_eq!(count("a b c d e f", ShingleKind::Word, 2), 5);
        assert_eq!(count("abc", ShingleKind::Char, 5), 1);
    }
}
