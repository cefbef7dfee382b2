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
//! by cosine. A pair's combined score is the larger of the two.
//!
//! Verdicts are asymmetric on purpose: a document is `identical` only to a
//! document ingested *before* it, which is the one kept (the export step
//! skips identical documents, so two copies must never both be identical).
//! When a later document beats an earlier document's recorded closest
//! match, the earlier entry is updated from the pair's scores (no
//! recomputation) — unless the later document is an identical copy of it:
//! that relation is recorded on the copy, and the original stays the kept
//! one, so a back-update can make a document `similar` at most. An
//! `identical` entry is never back-updated, so its `closest_match` always
//! leads to its kept original.

use neardup_core::{Candidate, Fingerprint, MemoryIndex, Params, Policy, Verdict};

use crate::embed::cosine;
use crate::error::Error;
use crate::progress::{Phase, Progress};
use crate::store::{Method, StoredDoc};

/// Scores of one pair.
#[derive(Clone, Copy, Debug, Default)]
struct Pair {
    embedding: Option<f64>,
    minhash: Option<f64>,
    same_content: bool,
}

impl Pair {
    /// Combined score and the method that produced it; equal normalized text
    /// scores 1.
    fn combined(&self) -> Option<(f64, Method)> {
        let best = match (self.embedding, self.minhash) {
            (Some(e), Some(m)) if e > m => Some((e, Method::Embedding)),
            (_, Some(m)) => Some((m, Method::Minhash)),
            (Some(e), None) => Some((e, Method::Embedding)),
            (None, None) => None,
        };
        if self.same_content {
            return Some((1.0, best.map_or(Method::Minhash, |b| b.1)));
        }
        best
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

/// Matcher switches and thresholds for [`compare`].
pub(crate) struct Matchers<'a> {
    pub params: &'a Params,
    pub policy: &'a Policy,
    pub minhash: bool,
    pub embedding: bool,
}

/// The progress-bar total for `n` new and `m` stored documents under the
/// all-pairs rule.
pub fn all_pairs_total(n: u64, m: u64) -> u64 {
    n * m + n * n.saturating_sub(1) / 2
}

/// Compares `docs[m..]` (new) with every earlier document. `fps[i]` is the
/// fingerprint of `docs[i]`; `docs[i].embedding` is set for every document
/// when `embedding` is on.
pub(crate) fn compare(
    docs: &mut [StoredDoc],
    fps: Vec<Fingerprint>,
    m: usize,
    matchers: &Matchers<'_>,
    progress: &dyn Progress,
) -> Result<CompareStats, Error> {
    let index_err = |e: neardup_core::Error| Error::store(format!("index: {e}"));
    let hashes: Vec<_> = fps.iter().map(|f| f.content_hash).collect();
    let mut index = MemoryIndex::new(matchers.params.clone());
    let mut candidates: Vec<Vec<Candidate>> = vec![Vec::new(); docs.len()];
    for (i, fp) in fps.into_iter().enumerate() {
        if matchers.minhash && i >= m {
            candidates[i] = index.candidates(&fp, None).map_err(index_err)?.ids;
        }
        index.insert(fp).map_err(index_err)?;
    }
    let n = (docs.len() - m) as u64;
    let total =
        if matchers.embedding { all_pairs_total(n, m as u64) } else { candidates.iter().map(|c| c.len() as u64).sum() };
    progress.start(Phase::Compare, total);
    let mut stats = CompareStats::default();

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
                if matchers.embedding {
                    pairs[j].1.minhash = Some(hit.score);
                    pairs[j].1.same_content |= hit.same_content;
                } else {
                    pairs.push((j, Pair { embedding: None, minhash: Some(hit.score), same_content: hit.same_content }));
                }
            }
            if !matchers.embedding {
                stats.comparisons += candidates[i].len() as u64;
                progress.advance(Phase::Compare, candidates[i].len() as u64);
            }
        }

        // The closest earlier document decides this one's verdict; ties go
        // to the earlier document, which is more likely the kept one.
        let mut best: Option<(usize, Pair, f64, Method)> = None;
        for &(j, pair) in &pairs {
            if let Some((score, method)) = pair.combined() {
                if best.as_ref().is_none_or(|b| score > b.2) {
                    best = Some((j, pair, score, method));
                }
            }
        }
        if let Some((j, mut pair, score, method)) = best {
            complete(&mut pair, i, j, &index, matchers);
            let slug = docs[j].slug.clone();
            let doc = &mut docs[i];
            doc.verdict = matchers.policy.classify(score, pair.same_content);
            set_closest(doc, slug, score, method, pair);
        }

        // Back-updates: this document may be a better match for earlier ones.
        for (j, mut pair) in pairs {
            let Some((score, method)) = pair.combined() else { continue };
            let earlier = &docs[j];
            let verdict = matchers.policy.classify(score, pair.same_content);
            // A copy is recorded on the copy: the original stays as it was.
            if verdict == Verdict::Identical
                || earlier.verdict == Verdict::Identical
                || earlier.closest_score.is_some_and(|c| score <= c)
            {
                continue;
            }
            complete(&mut pair, j, i, &index, matchers);
            let slug = docs[i].slug.clone();
            let earlier = &mut docs[j];
            earlier.verdict = verdict;
            set_closest(earlier, slug, score, method, pair);
            stats.back_updated.push(j);
        }
    }
    stats.back_updated.sort_unstable();
    stats.back_updated.dedup();
    progress.finish(Phase::Compare);
    Ok(stats)
}

/// Fills the MinHash score of a pair LSH did not propose, so the stored
/// entry has both scores in combined mode (one exact Jaccard per entry).
fn complete(pair: &mut Pair, a: usize, b: usize, index: &MemoryIndex, matchers: &Matchers<'_>) {
    if matchers.minhash && pair.minhash.is_none() {
        pair.minhash = index.score(a as u32, b as u32).map(|s| s.score);
    }
}

fn set_closest(doc: &mut StoredDoc, slug: String, score: f64, method: Method, pair: Pair) {
    doc.closest_match = Some(slug);
    doc.closest_score = Some(score);
    doc.closest_method = Some(method);
    doc.embedding_score = pair.embedding;
    doc.minhash_score = pair.minhash;
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

    #[test]
    fn combined_is_the_max() {
        let p = Pair { embedding: Some(0.9), minhash: Some(0.7), same_content: false };
        assert_eq!(p.combined(), Some((0.9, Method::Embedding)));
        let p = Pair { embedding: Some(0.9), minhash: Some(0.9), same_content: false };
        assert_eq!(p.combined(), Some((0.9, Method::Minhash)));
        let p = Pair { embedding: None, minhash: None, same_content: true };
        assert_eq!(p.combined(), Some((1.0, Method::Minhash)));
        assert_eq!(Pair::default().combined(), None);
    }
}
