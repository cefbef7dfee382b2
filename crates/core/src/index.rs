//! [`MemoryIndex`]: the [`CandidateIndex`] with every item's canonical
//! features in memory, and exact verification against them. Used by
//! `neardup dedup`, `neardup eval`, `neardup scan` and the service's shadow
//! index; the service's tenants hold a bare [`CandidateIndex`] and keep
//! features in their store.

use crate::candidates::{Candidate, CandidateIndex, CandidateSet, Filing, RowLoader};
use crate::config::Params;
use crate::error::Result;
use crate::fingerprint::Fingerprint;
use crate::hash::ContentHash;
use crate::verify::{verify_pair, PairScore};

/// A verified match.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    /// The matched item.
    pub id: u32,
    /// Exact Jaccard on canonical features (1.0 for equal content hashes).
    pub score: f64,
    /// True when the content hashes are equal.
    pub same_content: bool,
    /// Band keys the candidate shared with the query (0: content hash only).
    pub bands: u16,
}

/// Orders verified matches as every verification answers them: best score
/// first, ties by lower id.
pub fn best_first(matches: &mut [Match]) {
    matches.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
}

/// In-memory near-duplicate index over fingerprints.
#[derive(Debug, Clone)]
pub struct MemoryIndex {
    params: Params,
    index: CandidateIndex,
    features: Vec<Vec<u64>>,
}

impl MemoryIndex {
    /// An empty index for fingerprints made under `params`.
    pub fn new(params: Params) -> MemoryIndex {
        MemoryIndex { index: CandidateIndex::for_params(&params), params, features: Vec::new() }
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Live items.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when no item is live.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Candidates for `fp` among live items (excluding `exclude`), under the
    /// parameters' limits.
    pub fn candidates(&self, fp: &Fingerprint, exclude: Option<u32>) -> Result<CandidateSet> {
        self.index.candidates(fp.into(), exclude, self.params.query_limits())
    }

    /// The candidates item `id` had just before it was inserted (only items
    /// inserted before it), exactly as [`MemoryIndex::candidates`] would
    /// have returned then. Lets a batch insert a chunk, then query it in parallel.
    pub fn candidates_before(&self, id: u32) -> CandidateSet {
        self.index.candidates_before(id, self.params.query_limits())
    }

    /// [`MemoryIndex::candidates_before`] among the ids `keep` accepts
    /// (applied before ranking and the cap).
    pub fn candidates_before_where(&self, id: u32, keep: &dyn Fn(u32) -> bool) -> CandidateSet {
        self.index.candidates_before_where(id, self.params.query_limits(), keep)
    }

    /// Exact scores of `fp` against `candidates`, keeping those `>= threshold`,
    /// best first (ties by lower id).
    pub fn verify(&self, fp: &Fingerprint, candidates: &[Candidate], threshold: f64) -> Vec<Match> {
        self.verify_features(&fp.features, &fp.content_hash, candidates, threshold)
    }

    /// [`MemoryIndex::verify`] for an item already in the index (an unknown or
    /// removed `id` matches nothing).
    pub fn verify_item(&self, id: u32, candidates: &[Candidate], threshold: f64) -> Vec<Match> {
        match (self.features(id), self.index.content_hash(id)) {
            (Some(f), Some(h)) => self.verify_features(f, &h, candidates, threshold),
            _ => Vec::new(),
        }
    }

    fn verify_features(
        &self,
        features: &[u64],
        hash: &ContentHash,
        candidates: &[Candidate],
        threshold: f64,
    ) -> Vec<Match> {
        let mut out: Vec<Match> = candidates
            .iter()
            .enumerate()
            .filter_map(|(k, c)| {
                self.prefetch_candidates(candidates, k);
                let other = self.features(c.id)?;
                let h = self.index.content_hash(c.id)?;
                let s = verify_pair(features, hash, other, &h, threshold)?;
                Some(Match { id: c.id, score: s.score, same_content: s.same_content, bands: c.bands })
            })
            .collect();
        best_first(&mut out);
        out
    }

    /// Candidates lie anywhere in memory, in no order the hardware can
    /// guess: while candidate `k` is verified, the one two ahead has its
    /// entries (flags, content hash, where its features are) asked into the
    /// cache, and the one after it the head of its features (the hardware
    /// follows the rest of a run it has seen start). Hints only.
    #[inline]
    fn prefetch_candidates(&self, candidates: &[Candidate], k: usize) {
        /// Features asked for ahead: their first kilobyte.
        const HEAD: usize = 128;
        if let Some(c) = candidates.get(k + 2) {
            self.index.prefetch_entries(c.id);
            if let Some(f) = self.features.get(c.id as usize) {
                crate::pages::prefetch(std::slice::from_ref(f));
            }
        }
        if let Some(f) = candidates.get(k + 1).and_then(|c| self.features.get(c.id as usize)) {
            crate::pages::prefetch(&f[..f.len().min(HEAD)]);
        }
    }

    /// The exact score of two live items by the one rule
    /// ([`verify_pair`]); `None` when either is unknown or removed.
    pub fn score(&self, a: u32, b: u32) -> Option<PairScore> {
        let (fa, ha) = (self.features(a)?, self.index.content_hash(a)?);
        let (fb, hb) = (self.features(b)?, self.index.content_hash(b)?);
        verify_pair(fa, &ha, fb, &hb, 0.0)
    }

    /// Adds `fp` (consumed) and returns its id.
    pub fn insert(&mut self, fp: Fingerprint) -> Result<u32> {
        let id = self.index.insert((&fp).into())?;
        debug_assert_eq!(id as usize, self.features.len());
        self.features.push(fp.features);
        Ok(id)
    }

    /// A loader of many fingerprints at once, for a batch: ids are handed
    /// out as [`MemoryIndex::insert`] would, and the postings are filed
    /// when [`Loader::file_with`] is called (or the loader is dropped).
    pub fn loader(&mut self) -> Loader<'_> {
        Loader { rows: self.index.loader(), features: &mut self.features }
    }

    /// Adds an item saved earlier as an image row (see
    /// [`crate::candidates::IndexView::row`]) with its canonical features,
    /// without recomputing its signature; returns its id.
    pub fn insert_row(&mut self, row: crate::candidates::ImageRow<'_>, features: Vec<u64>) -> Result<u32> {
        let id = self.index.insert_row(row.folded, row.sketch, row.content_hash)?;
        debug_assert_eq!(id as usize, self.features.len());
        self.features.push(features);
        Ok(id)
    }

    /// Removes item `id` from candidates; false when unknown or already removed.
    pub fn remove(&mut self, id: u32) -> bool {
        if !self.index.remove(id) {
            return false;
        }
        self.features[id as usize] = Vec::new();
        true
    }

    /// The canonical features of a live item.
    pub fn features(&self, id: u32) -> Option<&[u64]> {
        if self.index.is_live(id) {
            self.features.get(id as usize).map(Vec::as_slice)
        } else {
            None
        }
    }

    /// The candidate index underneath (for metrics such as bucket sizes).
    pub fn candidate_index(&self) -> &CandidateIndex {
        &self.index
    }
}

/// Many fingerprints added to a [`MemoryIndex`] at once (see
/// [`MemoryIndex::loader`]): items are appended as they come, their
/// postings filed a table at a time, so a batch can file the tables on
/// several threads.
#[derive(Debug)]
pub struct Loader<'a> {
    rows: RowLoader<'a>,
    features: &'a mut Vec<Vec<u64>>,
}

impl Loader<'_> {
    /// Adds `fp` (consumed) and returns its id, as [`MemoryIndex::insert`].
    pub fn insert(&mut self, fp: Fingerprint) -> Result<u32> {
        let id = self.rows.insert((&fp).into())?;
        debug_assert_eq!(id as usize, self.features.len());
        self.features.push(fp.features);
        Ok(id)
    }

    /// Files the postings of the items added so far (see
    /// [`RowLoader::file_with`]).
    pub fn file_with(&mut self, run: impl FnOnce(Vec<Filing<'_>>)) {
        self.rows.file_with(run);
    }
}
