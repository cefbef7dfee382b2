//! Which parts of a text a pair shares: the shingles of one text that are
//! in the other's feature set, mapped back onto the original text, so a
//! reviewer sees *why* two items scored as they did.
//!
//! The text is cut at whitespace into fragments, each normalized on its
//! own by the tenant's normalizer; a fragment's tokens keep the fragment's
//! place in the original. Shingles are then hashed exactly as
//! [`crate::shingle::features_into`] hashes them (the same tokens joined by
//! one space, the same seed) and looked up in the other item's canonical
//! feature set, so a highlighted passage is a shared feature, not a guess.
//! Where the normalizer joins across whitespace (`unicode-v1` joins a word
//! hyphenated over a line break) the fragments' tokens differ from the
//! whole text's, and the shingles around that spot are not highlighted
//! even if shared: highlighting can miss, never invent.

use crate::config::Config;
use crate::hash::hash_bytes;
use crate::shingle::ShingleKind;

/// A run of the original text: `start..end` in bytes, and whether it is
/// part of a shingle the other item shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Byte offset where the run starts.
    pub start: usize,
    /// Byte offset just after the run.
    pub end: usize,
    /// Covered by a shared shingle.
    pub shared: bool,
}

/// Cuts `text` into runs that are and are not covered by a shingle (under
/// `config`'s normalizer and shingling) whose hash is in `other`, a sorted
/// feature set. The runs cover the whole text in order; whitespace between
/// two shared fragments is shared, so a passage reads as one run.
pub fn shared_segments(text: &str, config: &Config, other: &[u64]) -> Vec<Segment> {
    segments_where(text, config, |h| other.binary_search(&h).is_ok())
}

/// [`shared_segments`] with any test of a shingle's hash: the runs covered
/// by a shingle whose hash `marked` accepts are `shared`.
pub fn segments_where(text: &str, config: &Config, marked: impl Fn(u64) -> bool) -> Vec<Segment> {
    // Fragments: maximal runs of non-whitespace, as byte ranges.
    let mut frags: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                frags.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        frags.push((s, text.len()));
    }
    // Tokens, each with the fragment it came from.
    let mut tokens: Vec<(String, usize)> = Vec::new();
    let mut buf = String::new();
    for (f, &(s, e)) in frags.iter().enumerate() {
        config.normalizer.normalize_into(&text[s..e], &mut buf);
        tokens.extend(crate::normalize::tokens(&buf).map(|t| (t.to_string(), f)));
    }
    let mut shared_frag = vec![false; frags.len()];
    let contains = marked;
    let width = (config.shingle_width as usize).max(1);
    let seed = config.seed;
    match config.shingle_kind {
        ShingleKind::Word => {
            let n = tokens.len();
            let windows: Vec<(usize, usize)> = if n == 0 {
                vec![]
            } else if n < width {
                vec![(0, n)]
            } else {
                (0..=n - width).map(|i| (i, i + width)).collect()
            };
            let mut joined = String::new();
            for (a, b) in windows {
                joined.clear();
                for (k, (t, _)) in tokens[a..b].iter().enumerate() {
                    if k > 0 {
                        joined.push(' ');
                    }
                    joined.push_str(t);
                }
                if contains(hash_bytes(joined.as_bytes(), seed)) {
                    for (_, f) in &tokens[a..b] {
                        shared_frag[*f] = true;
                    }
                }
            }
        }
        ShingleKind::Char => {
            // The normalized string, and the token each character belongs to
            // (a separating space to the token before it).
            let mut normalized = String::new();
            let mut owner: Vec<usize> = Vec::new();
            for (k, (t, _)) in tokens.iter().enumerate() {
                if k > 0 {
                    normalized.push(' ');
                    owner.push(k - 1);
                }
                normalized.push_str(t);
                owner.extend(std::iter::repeat_n(k, t.chars().count()));
            }
            let bounds: Vec<usize> =
                normalized.char_indices().map(|(i, _)| i).chain(std::iter::once(normalized.len())).collect();
            let chars = bounds.len() - 1;
            let windows: Vec<(usize, usize)> = if chars == 0 {
                vec![]
            } else if chars < width {
                vec![(0, chars)]
            } else {
                (0..=chars - width).map(|i| (i, i + width)).collect()
            };
            for (a, b) in windows {
                if contains(hash_bytes(&normalized.as_bytes()[bounds[a]..bounds[b]], seed)) {
                    for &k in &owner[a..b] {
                        shared_frag[tokens[k].1] = true;
                    }
                }
            }
        }
    }
    // Runs over the whole text.
    let mut out: Vec<Segment> = Vec::new();
    let mut push = |start: usize, end: usize, shared: bool| {
        if start >= end {
            return;
        }
        match out.last_mut() {
            Some(last) if last.shared == shared && last.end == start => last.end = end,
            _ => out.push(Segment { start, end, shared }),
        }
    };
    let mut at = 0;
    for (f, &(s, e)) in frags.iter().enumerate() {
        let gap_shared = shared_frag[f] && f > 0 && shared_frag[f - 1];
        push(at, s, gap_shared);
        push(s, e, shared_frag[f]);
        at = e;
    }
    push(at, text.len(), false);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fingerprinter, Normalizer};

    fn features(text: &str, c: &Config) -> Vec<u64> {
        Fingerprinter::new(c.resolve().unwrap()).unwrap().fingerprint(text).features
    }

    fn shared_text<'a>(text: &'a str, segs: &[Segment]) -> Vec<&'a str> {
        segs.iter().filter(|s| s.shared).map(|s| &text[s.start..s.end]).collect()
    }

    fn covers(text: &str, segs: &[Segment]) {
        let mut at = 0;
        for s in segs {
            assert_eq!(s.start, at, "{segs:?}");
            assert!(s.end > s.start);
            at = s.end;
        }
        assert_eq!(at, text.len());
    }

    #[test]
    fn the_seed_pair_highlights_the_shared_passage() {
        let c = Config::seed_example();
        let a = "Red fox runs very fast";
        let b = "red fox runs very, fast today!";
        let segs = shared_segments(b, &c, &features(a, &c));
        covers(b, &segs);
        assert_eq!(shared_text(b, &segs), ["red fox runs very, fast"]);
        let segs = shared_segments(a, &c, &features(b, &c));
        assert_eq!(shared_text(a, &segs), ["Red fox runs very fast"]);
        // Nothing in common, nothing highlighted.
        let segs = shared_segments("database backup completed", &c, &features(a, &c));
        assert!(segs.iter().all(|s| !s.shared));
    }

    #[test]
    fn char_shingles_and_unicode_text() {
        let c = Config {
            shingle_kind: ShingleKind::Char,
            shingle_width: 5,
            normalizer: Normalizer::Unicode,
            ..Config::default()
        };
        let a = "Über die Brücke gehen — 東京タワー";
        let b = "  Wir sahen: über die BRÜCKE!\n";
        let segs = shared_segments(b, &c, &features(a, &c));
        covers(b, &segs);
        assert_eq!(shared_text(b, &segs), ["über die BRÜCKE!"]);
        assert!(shared_segments("", &c, &features(a, &c)).is_empty());
        let segs = shared_segments("   ", &c, &[]);
        assert_eq!(segs, [Segment { start: 0, end: 3, shared: false }]);
    }

    /// Texts shorter than the width are one shingle, as in `features_into`.
    #[test]
    fn short_texts_are_one_shingle() {
        let c = Config::seed_example();
        let segs = shared_segments("red fox", &c, &features("Red, fox.", &c));
        assert_eq!(shared_text("red fox", &segs), ["red fox"]);
    }
}
