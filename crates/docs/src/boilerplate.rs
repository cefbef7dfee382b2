//! Boilerplate weighs little: the MinHash matcher's score for a pair is
//! discounted by how widely the shingles the pair has in common are shared
//! across the rest of the scan.
//!
//! Pages of one manual share their navigation, titles and footers; two
//! different pages can share half their shingles that way and look
//! "similar" while the text each is about differs. But "shared by many
//! documents" is also what copies look like: twenty copies of one licence
//! share everything. So shingles are counted per *group of near copies*,
//! not per document: documents whose exact Jaccard is at least
//! [`NEAR_COPY`] are one group (connected through LSH-verified pairs), and
//! each shingle `s` is weighted by how many other groups hold it,
//! leaving the pair's own groups out:
//!
//! `w(s) = ln((1 + g) / (1 + max(0, others(s) − FREE_GROUPS)))`
//!
//! with `g` the groups of the scan. The weighted Jaccard
//! `Σ_{A∩B} w / Σ_{A∪B} w` replaces the Jaccard only when lower: the
//! weighting takes similarity away from shared boilerplate, never adds any.
//! A pair whose shingles no other group holds keeps its exact Jaccard, and
//! so do copies of a common text (they are one group); two manual pages
//! that share only navigation fall to what their own text shares.
//!
//! The embedding matcher cannot weigh shingles: a document's embedding is
//! one vector of its text. So its boilerplate is left out of the text it
//! embeds instead ([`Boilerplate::embedding_strip`]): the words covered by
//! a shingle that at least [`STRIP_GROUPS`] other groups hold. The choice
//! is per document and two copies make the same one, so a copy still
//! embeds as its original. Shingles alone cannot tell a template from the
//! text a family of revisions shares (both are one set of shingles that
//! many groups hold, each around text of its own; a revision with 10 % of
//! its words changed is far below [`NEAR_COPY`] from its original), so the
//! bar is high: a text revised separately into more than [`STRIP_GROUPS`]
//! versions embeds as what its versions change, and is found by MinHash,
//! which keeps the shared text (discounted, not removed).

use std::collections::HashMap;

use neardup_core::segments_where;
use neardup_core::UnionFind;
use neardup_core::{Candidate, Config, MemoryIndex};

/// Exact Jaccard at or above which two documents are near copies: one group.
pub(crate) const NEAR_COPY: f64 = 0.8;
/// Other groups that may hold a shingle before it weighs less.
const FREE_GROUPS: u32 = 2;
/// Other groups that must hold a shingle for the embedding matcher to
/// leave its words out.
pub(crate) const STRIP_GROUPS: u32 = 6;

/// Fewest words the embedding matcher embeds once boilerplate is left
/// out: a document with fewer left (a page of navigation alone) embeds its
/// whole text.
pub(crate) const MIN_KEPT_WORDS: usize = 8;

/// `text` without the words covered by a shingle in `strip` (sorted), the
/// kept runs one per line; `None` when nothing is left out or fewer than
/// [`MIN_KEPT_WORDS`] words are left (the whole text is embedded then).
/// Shingles are found as `config` makes features
/// ([`neardup_core::segments_where`]).
pub(crate) fn without_boilerplate(text: &str, config: &Config, strip: &[u64]) -> Option<String> {
    if strip.is_empty() {
        return None;
    }
    let mut out = String::new();
    let mut left_out = false;
    for seg in segments_where(text, config, |h| strip.binary_search(&h).is_ok()) {
        let run = text[seg.start..seg.end].trim();
        if seg.shared {
            left_out |= !run.is_empty();
        } else if !run.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(run);
        }
    }
    (left_out && out.split_whitespace().count() >= MIN_KEPT_WORDS).then_some(out)
}

/// What a document's embedding is of: its content hash when it embeds its
/// whole text (`embedded` is `None`), else `strip:` and the SHA-256 of the
/// text it embeds — so two choices that embed the same text share a key.
pub(crate) fn embedding_key(content_hash: &str, embedded: Option<&str>) -> String {
    match embedded {
        None => content_hash.to_owned(),
        Some(text) => format!("strip:{}", crate::parse::sha256_hex(text.as_bytes())),
    }
}

/// Group frequencies of every shingle of a scan.
#[derive(Debug, Default)]
pub(crate) struct Boilerplate {
    /// Per shingle: groups holding it, and the last group counted.
    groups_of: HashMap<u64, (u32, u32)>,
    /// Each document's group.
    group: Vec<u32>,
    groups: u32,
}

impl Boilerplate {
    /// Groups the `n` documents of `index` (ids `0..n`) into near copies
    /// through LSH-verified pairs, and counts each shingle's groups.
    pub(crate) fn of_index(index: &MemoryIndex, n: usize) -> Boilerplate {
        let before: Vec<Vec<Candidate>> = (0..n as u32).map(|i| index.candidates_before(i).ids).collect();
        Boilerplate::of_candidates(index, &before)
    }

    /// [`Boilerplate::of_index`] given each document's candidates among
    /// the documents before it (`before[i]`, as `candidates_before(i)`
    /// gives them), for a caller that has them already.
    pub(crate) fn of_candidates(index: &MemoryIndex, before: &[Vec<Candidate>]) -> Boilerplate {
        let n = before.len();
        let mut uf = UnionFind::default();
        for _ in 0..n {
            uf.push();
        }
        for (i, set) in before.iter().enumerate() {
            for m in index.verify_item(i as u32, set, NEAR_COPY) {
                uf.union(i as u32, m.id);
            }
        }
        let mut group = vec![0u32; n];
        let mut names: HashMap<u32, u32> = HashMap::new();
        for (i, g) in group.iter_mut().enumerate() {
            let root = uf.find(i as u32);
            let next = names.len() as u32;
            *g = *names.entry(root).or_insert(next);
        }
        let mut by_group: Vec<usize> = (0..n).collect();
        by_group.sort_by_key(|&i| group[i]);
        let mut groups_of: HashMap<u64, (u32, u32)> = HashMap::new();
        for i in by_group {
            let g = group[i];
            for &s in index.features(i as u32).unwrap_or_default() {
                let e = groups_of.entry(s).or_insert((0, u32::MAX));
                if e.1 != g {
                    *e = (e.0 + 1, g);
                }
            }
        }
        Boilerplate { groups_of, group, groups: names.len() as u32 }
    }

    fn weight(&self, s: u64, own_groups: u32) -> f64 {
        let holding = self.groups_of.get(&s).map_or(0, |e| e.0);
        let others = holding.saturating_sub(own_groups).saturating_sub(FREE_GROUPS);
        ((1.0 + f64::from(self.groups)) / (1.0 + f64::from(others))).ln()
    }

    /// The shingles of document `i` (feature set `features`, sorted) whose
    /// words the embedding matcher leaves out: those at least
    /// [`STRIP_GROUPS`] groups hold besides the document's own. Sorted;
    /// empty when the document has no boilerplate (or the scan is too
    /// small to tell).
    pub(crate) fn embedding_strip(&self, features: &[u64]) -> Vec<u64> {
        // The own group holds every shingle of the document.
        features.iter().copied().filter(|s| self.groups_of.get(s).is_some_and(|e| e.0 > STRIP_GROUPS)).collect()
    }

    /// The MinHash score of documents `a` and `b` with feature sets `fa`
    /// and `fb` (sorted, unique): `jaccard`, or the boilerplate-weighted
    /// Jaccard when that is lower.
    pub(crate) fn score(&self, a: usize, b: usize, fa: &[u64], fb: &[u64], jaccard: f64) -> f64 {
        let (ga, gb) = (self.group.get(a).copied(), self.group.get(b).copied());
        let (mut i, mut j) = (0, 0);
        let (mut shared, mut union) = (0.0f64, 0.0f64);
        loop {
            let (s, in_a, in_b) = match (fa.get(i), fb.get(j)) {
                (Some(&x), Some(&y)) if x == y => (x, true, true),
                (Some(&x), Some(&y)) if x < y => (x, true, false),
                (Some(&x), None) => (x, true, false),
                (_, Some(&y)) => (y, false, true),
                (None, None) => break,
            };
            i += usize::from(in_a);
            j += usize::from(in_b);
            // The pair's own groups that hold `s` (one when both are in one group).
            let own = match (in_a, in_b) {
                (true, true) if ga == gb => 1,
                (true, true) => 2,
                _ => 1,
            };
            let w = self.weight(s, own);
            union += w;
            if in_a && in_b {
                shared += w;
            }
        }
        let weighted = if union > 0.0 { shared / union } else { jaccard };
        // Only a real discount counts: rounding must not move a pair that
        // sits exactly on a threshold.
        if weighted < jaccard - 1e-9 {
            weighted
        } else {
            jaccard
        }
    }
}

#[cfg(test)]
mod tests {
    use neardup_core::{Config, Fingerprinter, MemoryIndex};

    use super::*;

    /// An index of `texts` under the scan's default parameters.
    fn index(texts: &[String]) -> MemoryIndex {
        let params = Config { threshold: 0.45, max_candidates: 10_000, ..Config::default() }.resolve().unwrap();
        let mut f = Fingerprinter::new(params.clone()).unwrap();
        let mut idx = MemoryIndex::new(params);
        for t in texts {
            idx.insert(f.fingerprint(t)).unwrap();
        }
        idx
    }

    fn score(idx: &MemoryIndex, b: &Boilerplate, x: u32, y: u32) -> (f64, f64) {
        let j = idx.score(x, y).unwrap().score;
        let (fx, fy) = (idx.features(x).unwrap(), idx.features(y).unwrap());
        (j, b.score(x as usize, y as usize, fx, fy, j))
    }

    /// Words no other text uses: `tag` makes them unique.
    fn words(tag: &str, n: usize) -> String {
        (0..n).map(|i| format!("{tag}{i}x")).collect::<Vec<_>>().join(" ")
    }

    /// Forty pages of one manual: the same navigation on every page and
    /// their own text. Two pages share the navigation and score well above
    /// zero; weighted, almost nothing. A page and a revision of it keep a
    /// high score.
    #[test]
    fn pages_sharing_only_navigation_fall() {
        let nav = words("nav", 60);
        let mut texts: Vec<String> = (0..40).map(|p| format!("{nav} {}", words(&format!("page{p}w"), 60))).collect();
        let own: Vec<String> = (0..60).map(|i| format!("page0w{i}x")).collect();
        let revised = own.iter().enumerate().map(|(i, w)| if i == 30 { "changed".to_string() } else { w.clone() });
        texts.push(format!("{nav} {}", revised.collect::<Vec<_>>().join(" ")));
        let idx = index(&texts);
        let b = Boilerplate::of_index(&idx, texts.len());
        let (j, w) = score(&idx, &b, 0, 1);
        assert!(j > 0.25, "{j}");
        assert!(w < 0.05, "{w}");
        // One word changed: what the page's own text shares is what counts.
        let (j, w) = score(&idx, &b, 0, 40);
        assert!(j > 0.9 && w > 0.8 && w <= j, "{w} vs {j}");
    }

    /// Twenty copies of one licence, each with its own short header: one
    /// group of near copies, so the shared text is not boilerplate.
    #[test]
    fn copies_of_a_common_text_keep_their_score() {
        let body = words("licence", 200);
        let mut texts: Vec<String> = (0..20).map(|c| format!("{} {body}", words(&format!("header{c}w"), 4))).collect();
        // Other documents, unrelated.
        texts.extend((0..10).map(|d| words(&format!("other{d}w"), 100)));
        let idx = index(&texts);
        let b = Boilerplate::of_index(&idx, texts.len());
        let (j, w) = score(&idx, &b, 0, 1);
        assert!(j > 0.9 && (w - j).abs() < 1e-12, "{w} vs {j}");
    }

    /// The embedding matcher's text: the navigation of forty pages is left
    /// out, each page keeps its own words, a page and its one-word revision
    /// leave out the same shingles, and copies of a licence (one group)
    /// keep their whole text.
    #[test]
    fn embeddings_leave_the_navigation_out() {
        let nav = words("nav", 60);
        let mut texts: Vec<String> = (0..40).map(|p| format!("{nav} {}", words(&format!("page{p}w"), 60))).collect();
        let mut revised: Vec<String> = (0..60).map(|i| format!("page0w{i}x")).collect();
        revised[30] = "changed".to_owned();
        texts.push(format!("{nav} {}", revised.join(" ")));
        let body = words("licence", 200);
        texts.extend((0..20).map(|c| format!("{} {body}", words(&format!("header{c}w"), 4))));
        let idx = index(&texts);
        let b = Boilerplate::of_index(&idx, texts.len());
        let config = idx.params().config();
        let strip = |i: u32| b.embedding_strip(idx.features(i).unwrap());
        let kept = |i: u32| without_boilerplate(&texts[i as usize], config, &strip(i));
        assert_eq!(kept(1).as_deref(), Some(words("page1w", 60).as_str()));
        assert_eq!(kept(40).as_deref(), Some(revised.join(" ").as_str()));
        assert_eq!(strip(0), strip(40), "a revision leaves out what its page does");
        assert_ne!(embedding_key("h", kept(0).as_deref()), "h");
        assert_eq!(embedding_key("h", kept(1).as_deref()), embedding_key("g", Some(&words("page1w", 60))));
        assert!(strip(45).is_empty() && kept(45).is_none(), "a licence's copies are one group");
        assert_eq!(embedding_key("h", kept(45).as_deref()), "h");
        // Fewer than MIN_KEPT_WORDS words of its own: the whole text.
        let mut short = texts.clone();
        short.push(format!("{nav} {}", words("tiny", MIN_KEPT_WORDS - 1)));
        let idx = index(&short);
        let b = Boilerplate::of_index(&idx, short.len());
        let last = short.len() as u32 - 1;
        let strip = b.embedding_strip(idx.features(last).unwrap());
        assert!(!strip.is_empty());
        assert!(without_boilerplate(&short[last as usize], idx.params().config(), &strip).is_none());
    }

    /// Few documents: no shingle is down-weighted, the score is the Jaccard.
    #[test]
    fn small_scans_score_plain_jaccard() {
        let texts: Vec<String> =
            (0..3).map(|d| format!("{} {}", words("shared", 50), words(&format!("d{d}w"), 50))).collect();
        let idx = index(&texts);
        let b = Boilerplate::of_index(&idx, texts.len());
        let (j, w) = score(&idx, &b, 0, 1);
        assert!((w - j).abs() < 1e-12, "{w} vs {j}");
        assert_eq!(b.score(0, 1, &[], &[], 0.0), 0.0);
        assert!(b.embedding_strip(idx.features(0).unwrap()).is_empty());
    }
}
