//! The comparison pass: each new document against every stored document and
//! against the documents before it in the batch, then verdicts and
//! back-updates.
//!
//! Documents are numbered in ingest order: the `m` stored ones first, then
//! the batch. Document `i` is compared with every `j < i`, so each pair is
//! scored exactly once — N×M + N×(N−1)÷2 pairs for N new and M stored
//! documents. The MinHash matcher does not score every pair: LSH (tuned to
//! `minhash_lsh_threshold`) proposes candidates from a core
//! [`MemoryIndex`], and each candidate is verified with exact Jaccard; only
//! those verifications are counted. The embedding matcher scores every pair
//! by cosine. Each raw score is mapped onto the common scale by its
//! matcher's [`Calibration`]; a pair's combined score is the larger of the
//! two calibrated scores.
//!
//! What each entry records, whichever document came first:
//!
//! * `closest_*` — the best-scoring other document, earlier or later: when
//!   a later document beats an earlier one's recorded closest match, the
//!   earlier entry is updated from the pair's scores (no recomputation), so
//!   both documents of a pair name each other with the same score.
//! * `verdict` — `identical` only to a document ingested *before* it
//!   (`duplicate_of`), which is the one kept: the export skips identical
//!   documents, so two copies are never both identical. A kept document is
//!   `similar` when another kept document that is not one of its own copies
//!   scores at least `threshold_similar` against it, earlier or later
//!   (`similar_to` names the best one: the page the export's duplicate
//!   callout names), and `different` otherwise — its own identical copies,
//!   which the export skips, do not make it a duplicate of anything.

use neardup_core::{Candidate, ContentHash, Fingerprint, MemoryIndex, Params, Policy, Verdict};

use crate::boilerplate::Boilerplate;
use crate::calibrate::Calibration;
use crate::embed::cosine;
use crate::error::Error;
use crate::progress::{Phase, Progress};
use crate::store::{Method, StoredDoc};

/// Raw scores of one pair.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Pair {
    /// Cosine of the document embeddings.
    pub embedding: Option<f64>,
    /// Exact Jaccard of the shingle sets.
    pub minhash: Option<f64>,
    /// Equal content hashes (the same normalized text).
    pub same_content: bool,
}

/// A pair's scores on the common scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Scored {
    /// The raw scores.
    pub raw: Pair,
    /// The calibrated embedding score.
    pub embedding: Option<f64>,
    /// The calibrated MinHash score.
    pub minhash: Option<f64>,
    /// max(calibrated scores); 1 for equal normalized text.
    pub combined: f64,
    /// Which calibrated score is the combined one (MinHash on a tie).
    pub method: Method,
}

/// The calibration of each matcher.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Calibrations {
    pub minhash: Calibration,
    pub embedding: Calibration,
}

impl Pair {
    /// The pair on the common scale; `None` when no matcher scored it.
    pub(crate) fn scored(self, cal: &Calibrations) -> Option<Scored> {
        let embedding = self.embedding.map(|e| cal.embedding.apply(e));
        let minhash = self.minhash.map(|m| cal.minhash.apply(m));
        let best = match (embedding, minhash) {
            (Some(e), Some(m)) if e > m => Some((e, Method::Embedding)),
            (_, Some(m)) => Some((m, Method::Minhash)),
            (Some(e), None) => Some((e, Method::Embedding)),
            (None, None) => None,
        };
        let (combined, method) = match (best, self.same_content) {
            (best, true) => (1.0, best.map_or(Method::Minhash, |b| b.1)),
            (Some(best), false) => best,
            (None, false) => return None,
        };
        Some(Scored { raw: self, embedding, minhash, combined, method })
    }
}

/// What the pass did, for the summary.
#[derive(Debug, Default)]
pub(crate) struct CompareStats {
    /// Pairs scored (all pairs for embeddings, verified LSH candidates for
    /// MinHash alone).
    pub comparisons: u64,
    /// Indexes of earlier documents whose entry a later one updated.
    pub back_updated: Vec<usize>,
}

/// Matcher switches, calibrations and thresholds for [`compare`].
pub(crate) struct Matchers<'a> {
    pub policy: &'a Policy,
    pub calibrations: &'a Calibrations,
    pub minhash: bool,
    pub embedding: bool,
}

/// The MinHash side of a scan, built before the embeddings are (the
/// embedding matcher leaves out the boilerplate it finds): every
/// document's fingerprint in a core [`MemoryIndex`], each document's LSH
/// candidates among the ones before it, and the boilerplate groups.
pub(crate) struct MinhashIndex {
    index: MemoryIndex,
    hashes: Vec<ContentHash>,
    /// `candidates[i]`: document `i`'s candidates among `0..i` — for the
    /// new documents always, for every one with the boilerplate discount
    /// (one LSH query per document serves both).
    candidates: Vec<Vec<Candidate>>,
    boilerplate: Option<Boilerplate>,
}

impl MinhashIndex {
    /// Indexes `fps` (the `m` stored documents first); `minhash` and
    /// `boilerplate` as in [`Matchers`].
    pub(crate) fn build(
        fps: Vec<Fingerprint>,
        m: usize,
        params: &Params,
        minhash: bool,
        boilerplate: bool,
    ) -> Result<MinhashIndex, Error> {
        let index_err = |e: neardup_core::Error| Error::store(format!("index: {e}"));
        let hashes: Vec<_> = fps.iter().map(|f| f.content_hash).collect();
        let n = fps.len();
        let mut index = MemoryIndex::new(params.clone());
        for fp in fps {
            index.insert(fp).map_err(index_err)?;
        }
        let boilerplate = minhash && boilerplate;
        let candidates: Vec<Vec<Candidate>> = (0..n)
            .map(|i| match minhash && (i >= m || boilerplate) {
                true => index.candidates_before(i as u32).ids,
                false => Vec::new(),
            })
            .collect();
        let boilerplate = boilerplate.then(|| Boilerplate::of_candidates(&index, &candidates));
        Ok(MinhashIndex { index, hashes, candidates, boilerplate })
    }

    /// The shingles of document `i` whose words its embedding leaves out
    /// ([`Boilerplate::embedding_strip`]); empty without the discount.
    pub(crate) fn embedding_strip(&self, i: usize) -> Vec<u64> {
        match (&self.boilerplate, self.index.features(i as u32)) {
            (Some(bp), Some(f)) => bp.embedding_strip(f),
            _ => Vec::new(),
        }
    }

    /// Document `i`'s content hash.
    pub(crate) fn content_hash(&self, i: usize) -> ContentHash {
        self.hashes[i]
    }

    /// Document `i`'s feature set (sorted; empty for a document without).
    pub(crate) fn features(&self, i: usize) -> &[u64] {
        self.index.features(i as u32).unwrap_or_default()
    }

    fn weigh(&self, a: usize, b: usize, jaccard: f64) -> f64 {
        match (&self.boilerplate, self.index.features(a as u32), self.index.features(b as u32)) {
            (Some(bp), Some(fa), Some(fb)) => bp.score(a, b, fa, fb, jaccard),
            _ => jaccard,
        }
    }
}

/// The progress-bar total for `n` new and `m` stored documents under the
/// all-pairs rule.
pub fn all_pairs_total(n: u64, m: u64) -> u64 {
    n * m + n * n.saturating_sub(1) / 2
}

/// The kept original of each of `docs[..m]` (an index), from the stored
/// `duplicate_of` links (`closest_match` for a version-1 entry).
fn stored_clusters(docs: &[StoredDoc], m: usize) -> Vec<usize> {
    let index: std::collections::HashMap<&str, usize> =
        docs[..m].iter().enumerate().map(|(i, d)| (d.slug.as_str(), i)).collect();
    (0..m)
        .map(|start| {
            let mut current = start;
            for _ in 0..m {
                let d = &docs[current];
                if d.verdict != Verdict::Identical {
                    break;
                }
                match d.duplicate_of.as_deref().or(d.closest_match.as_deref()).and_then(|s| index.get(s)) {
                    Some(&next) => current = next,
                    None => break,
                }
            }
            current
        })
        .collect()
}

/// Compares `docs[m..]` (new) with every earlier document. `scores`
/// indexes every document (`docs[i]` is its item `i`);
/// `docs[i].embedding` is set for every document when `embedding` is on.
pub(crate) fn compare(
    docs: &mut [StoredDoc],
    scores: &MinhashIndex,
    m: usize,
    matchers: &Matchers<'_>,
    progress: &dyn Progress,
) -> Result<CompareStats, Error> {
    let (index, hashes, candidates) = (&scores.index, &scores.hashes, &scores.candidates);
    let n = (docs.len() - m) as u64;
    let total = if matchers.embedding {
        all_pairs_total(n, m as u64)
    } else {
        candidates[m..].iter().map(|c| c.len() as u64).sum()
    };
    progress.start(Phase::Compare, total);
    let mut stats = CompareStats::default();
    // The kept original of every document decided so far.
    let mut cluster = stored_clusters(docs, m);
    let policy = matchers.policy;

    for i in m..docs.len() {
        // Scores against every earlier document that has any.
        let mut pairs: Vec<(usize, Pair)> = Vec::new();
        if matchers.embedding {
            pairs.reserve(i);
            for j in 0..i {
                let emb = match (&docs[i].embedding, &docs[j].embedding) {
                    (Some(a), Some(b)) => Some(f64::from(cosine(a, b))),
                    _ => None,
                };
                pairs.push((j, Pair { embedding: emb, minhash: None, same_content: hashes[i] == hashes[j] }));
            }
            stats.comparisons += i as u64;
            progress.advance(Phase::Compare, i as u64);
        }
        if matchers.minhash {
            let verified = index.verify_item(i as u32, &candidates[i], 0.0);
            for hit in verified {
                let j = hit.id as usize;
                let score = scores.weigh(i, j, hit.score);
                if matchers.embedding {
                    pairs[j].1.minhash = Some(score);
                    pairs[j].1.same_content |= hit.same_content;
                } else {
                    pairs.push((j, Pair { embedding: None, minhash: Some(score), same_content: hit.same_content }));
                }
            }
            if !matchers.embedding {
                stats.comparisons += candidates[i].len() as u64;
                progress.advance(Phase::Compare, candidates[i].len() as u64);
            }
        }
        let mut scored: Vec<(usize, Scored)> = pairs
            .into_iter()
            .filter_map(|(j, pair)| {
                let pair = complete(pair, i, j, scores, matchers, false);
                pair.scored(matchers.calibrations).map(|s| (j, s))
            })
            .collect();
        // Best first; ties go to the earlier document, more likely the kept one.
        scored.sort_by(|a, b| b.1.combined.total_cmp(&a.1.combined).then(a.0.cmp(&b.0)));

        // The closest earlier document decides this one's verdict.
        cluster.push(i);
        if let Some(&(j, best)) = scored.first() {
            let verdict = policy.classify(best.combined, best.raw.same_content);
            let best = stored_scores(best, i, j, scores, matchers);
            let slug = docs[j].slug.clone();
            let doc = &mut docs[i];
            doc.verdict = verdict;
            set_closest(doc, slug.clone(), &best);
            if verdict == Verdict::Identical {
                doc.duplicate_of = Some(slug);
                cluster[i] = cluster[j];
            }
        }
        // A kept document: its best earlier match is outside its own copies
        // (every earlier document is: it is kept).
        if cluster[i] == i {
            if let Some(&(j, s)) = scored.first() {
                offer_similar(docs, i, cluster[j], s.combined, policy);
            }
        }

        // Back-updates: this document may be a better match for earlier ones.
        for &(j, s) in &scored {
            if cluster[j] == j && cluster[i] != cluster[j] {
                offer_similar(docs, j, cluster[i], s.combined, policy);
            }
            if docs[j].closest_score.is_some_and(|c| s.combined <= c) {
                continue;
            }
            let s = stored_scores(s, i, j, scores, matchers);
            let slug = docs[i].slug.clone();
            set_closest(&mut docs[j], slug, &s);
            stats.back_updated.push(j);
        }
    }
    stats.back_updated.sort_unstable();
    stats.back_updated.dedup();
    progress.finish(Phase::Compare);
    Ok(stats)
}

/// Records kept document `target` as what kept document `doc` is similar
/// to, when the pair scores at least `threshold_similar` and beats what is
/// recorded; `doc` becomes `similar` (a kept document is never identical).
fn offer_similar(docs: &mut [StoredDoc], doc: usize, target: usize, score: f64, policy: &Policy) {
    if target == doc || policy.classify(score, false) == Verdict::Different {
        return;
    }
    if docs[doc].similar_score.is_some_and(|s| score <= s) {
        return;
    }
    let slug = docs[target].slug.clone();
    let d = &mut docs[doc];
    d.similar_to = Some(slug);
    d.similar_score = Some(score);
    d.verdict = Verdict::Similar;
}

/// Fills the MinHash score of a pair LSH did not propose. Unless `always`,
/// only when it could be the larger calibrated score: the score is at most
/// the Jaccard (the boilerplate discount only lowers it), the Jaccard at
/// most the ratio of the two set sizes, and when even that bound
/// calibrates below the embedding's score the merge is skipped (it cannot
/// change the ranking).
fn complete(mut pair: Pair, a: usize, b: usize, scores: &MinhashIndex, matchers: &Matchers<'_>, always: bool) -> Pair {
    let index = &scores.index;
    if !matchers.minhash || pair.minhash.is_some() {
        return pair;
    }
    if !always {
        if let (Some(e), Some(fa), Some(fb)) = (pair.embedding, index.features(a as u32), index.features(b as u32)) {
            let (small, large) = (fa.len().min(fb.len()) as f64, fa.len().max(fb.len()) as f64);
            let bound = if large > 0.0 { small / large } else { 0.0 };
            let cal = matchers.calibrations;
            if !pair.same_content && cal.minhash.apply(bound) < cal.embedding.apply(e) {
                return pair;
            }
        }
    }
    if let Some(s) = index.score(a as u32, b as u32) {
        pair.minhash = Some(scores.weigh(a, b, s.score));
        pair.same_content |= s.same_content;
    }
    pair
}

/// The scores an entry stores: both matchers' scores, in combined mode
/// (the Jaccard skipped while ranking is computed now; it cannot change the
/// combined score).
fn stored_scores(s: Scored, a: usize, b: usize, scores: &MinhashIndex, matchers: &Matchers<'_>) -> Scored {
    if s.raw.minhash.is_some() || !matchers.minhash {
        return s;
    }
    complete(s.raw, a, b, scores, matchers, true).scored(matchers.calibrations).unwrap_or(s)
}

fn set_closest(doc: &mut StoredDoc, slug: String, s: &Scored) {
    doc.closest_match = Some(slug);
    doc.closest_score = Some(s.combined);
    doc.closest_method = Some(s.method);
    doc.embedding_score = s.raw.embedding;
    doc.minhash_score = s.raw.minhash;
    doc.embedding_calibrated = s.embedding;
    doc.minhash_calibrated = s.minhash;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_follow_the_seed_formula() {
        assert_eq!(all_pairs_total(10, 0), 45);
        assert_eq!(all_pairs_total(3, 4), 12 + 3);
        assert_eq!(all_pairs_total(0, 9), 0);
        assert_eq!(all_pairs_total(1, 0), 0);
    }

    fn identity() -> Calibrations {
        Calibrations { minhash: Calibration::identity(), embedding: Calibration::identity() }
    }

    fn combined(p: Pair, cal: &Calibrations) -> Option<(f64, Method)> {
        p.scored(cal).map(|s| (s.combined, s.method))
    }

    #[test]
    fn combined_is_the_max_of_calibrated_scores() {
        let id = identity();
        let p = Pair { embedding: Some(0.9), minhash: Some(0.7), same_content: false };
        assert_eq!(combined(p, &id), Some((0.9, Method::Embedding)));
        let p = Pair { embedding: Some(0.9), minhash: Some(0.9), same_content: false };
        assert_eq!(combined(p, &id), Some((0.9, Method::Minhash)));
        let p = Pair { embedding: None, minhash: None, same_content: true };
        assert_eq!(combined(p, &id), Some((1.0, Method::Minhash)));
        assert_eq!(combined(Pair::default(), &id), None);
        // Calibrated: a cosine of 0.9 is below the similar knot, a Jaccard of
        // 0.7 above it, so MinHash wins and both raw scores are kept.
        let cal = Calibrations {
            minhash: Calibration::parse("0.45:0.8,0.95:0.95").unwrap(),
            embedding: Calibration::parse("0.93:0.8,0.99:0.95").unwrap(),
        };
        let s = Pair { embedding: Some(0.9), minhash: Some(0.7), same_content: false }.scored(&cal).unwrap();
        assert_eq!(s.method, Method::Minhash);
        assert!(s.embedding.unwrap() < 0.8 && s.minhash.unwrap() > 0.8, "{s:?}");
        assert_eq!((s.raw.embedding, s.raw.minhash), (Some(0.9), Some(0.7)));
    }
}
