//! [`MemoryIndex`]: the one candidate pipeline — band postings, exact-hash
//! lookup, capped candidate retrieval and exact verification — shared by
//! `neardup dedup`, `neardup scan` and the service engine.
//!
//! Items are numbered densely by insertion (`u32`). Features live in memory;
//! callers that keep them elsewhere use [`crate::LshIndex`] directly.

use std::collections::HashMap;

use crate::config::Params;
use crate::error::Result;
use crate::fingerprint::Fingerprint;
use crate::hash::ContentHash;
use crate::lsh::{Candidates, LshIndex, QueryLimits};
use crate::verify::jaccard_at_least;

/// A verified match.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    /// The matched item.
    pub id: u32,
    /// Exact Jaccard on canonical features (1.0 for equal content hashes).
    pub score: f64,
    /// True when the content hashes are equal.
    pub same_content: bool,
}

/// Candidates for one query, before verification.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CandidateSet {
    /// LSH candidates (capped) plus exact-hash matches, de-duplicated.
    pub ids: Vec<u32>,
    /// Items with the same content hash (always included, never capped away).
    pub same_content: Vec<u32>,
    /// The raw LSH outcome, with cap and hot-bucket reports.
    pub lsh: Candidates,
}

#[derive(Debug, Clone)]
struct Entry {
    features: Vec<u64>,
    band_keys: Vec<u64>,
    content_hash: ContentHash,
    live: bool,
}

/// In-memory near-duplicate index over fingerprints.
#[derive(Debug, Clone)]
pub struct MemoryIndex {
    params: Params,
    lsh: LshIndex,
    entries: Vec<Entry>,
    by_hash: HashMap<ContentHash, Vec<u32>>,
    live: usize,
}

impl MemoryIndex {
    /// An empty index for fingerprints made under `params`.
    pub fn new(params: Params) -> MemoryIndex {
        let lsh = LshIndex::new(params.lsh(), params.config().seed);
        MemoryIndex { params, lsh, entries: Vec::new(), by_hash: HashMap::new(), live: 0 }
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Live items.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no item is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn limits(&self) -> QueryLimits {
        let c = self.params.config();
        QueryLimits { max_candidates: c.max_candidates as usize, max_bucket_read: c.max_bucket_read as usize }
    }

    /// Candidates for `fp` among live items (excluding `exclude`).
    pub fn candidates(&self, fp: &Fingerprint, exclude: Option<u32>) -> Result<CandidateSet> {
        self.candidates_where(&fp.band_keys, fp.content_hash, exclude, None)
    }

    /// The candidates item `id` had just before it was inserted (only items
    /// inserted before it), exactly as [`MemoryIndex::candidates`] would
    /// have returned then. Lets a batch insert a chunk, then query it in parallel.
    pub fn candidates_before(&self, id: u32) -> Result<CandidateSet> {
        let Some(e) = self.entries.get(id as usize) else { return Ok(CandidateSet::default()) };
        self.candidates_where(&e.band_keys, e.content_hash, None, Some(id))
    }

    fn candidates_where(
        &self,
        band_keys: &[u64],
        hash: ContentHash,
        exclude: Option<u32>,
        before: Option<u32>,
    ) -> Result<CandidateSet> {
        let lsh = if band_keys.is_empty() {
            Candidates::default()
        } else {
            self.lsh.query_filtered(band_keys, exclude, before, self.limits())?
        };
        let visible = |id: u32| Some(id) != exclude && before.is_none_or(|b| id < b) && self.entries[id as usize].live;
        let same_content: Vec<u32> = self
            .by_hash
            .get(&hash)
            .map(|ids| ids.iter().copied().filter(|&id| visible(id)).collect())
            .unwrap_or_default();
        Ok(Self::merge(lsh, same_content))
    }

    fn merge(lsh: Candidates, same_content: Vec<u32>) -> CandidateSet {
        let mut ids: Vec<u32> = lsh.ids.iter().map(|&(id, _)| id).chain(same_content.iter().copied()).collect();
        ids.sort_unstable();
        ids.dedup();
        CandidateSet { ids, same_content, lsh }
    }

    /// Exact scores of `fp` against `candidates`, keeping those `>= threshold`,
    /// best first (ties by lower id).
    pub fn verify(&self, fp: &Fingerprint, candidates: &[u32], threshold: f64) -> Vec<Match> {
        self.verify_features(&fp.features, fp.content_hash, candidates, threshold)
    }

    /// [`MemoryIndex::verify`] for an item already in the index (an unknown or
    /// removed `id` matches nothing).
    pub fn verify_item(&self, id: u32, candidates: &[u32], threshold: f64) -> Vec<Match> {
        match self.entries.get(id as usize).filter(|e| e.live) {
            Some(e) => self.verify_features(&e.features, e.content_hash, candidates, threshold),
            None => Vec::new(),
        }
    }

    fn verify_features(&self, features: &[u64], hash: ContentHash, candidates: &[u32], threshold: f64) -> Vec<Match> {
        let mut out: Vec<Match> = candidates
            .iter()
            .filter_map(|&id| {
                let e = self.entries.get(id as usize)?;
                if !e.live {
                    return None;
                }
                let same = e.content_hash == hash;
                let score = if same { Some(1.0) } else { jaccard_at_least(features, &e.features, threshold) };
                score.map(|score| Match { id, score, same_content: same })
            })
            .collect();
        out.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        out
    }

    /// Adds `fp` (consumed) and returns its id.
    pub fn insert(&mut self, fp: Fingerprint) -> Result<u32> {
        let id = u32::try_from(self.entries.len()).ok().filter(|&i| i <= crate::lsh::MAX_ITEM_ID).ok_or_else(|| {
            crate::error::Error::limit("items per index", u64::from(crate::lsh::MAX_ITEM_ID), self.entries.len() as u64)
        })?;
        if !fp.band_keys.is_empty() {
            self.lsh.insert(id, &fp.band_keys)?;
        }
        self.by_hash.entry(fp.content_hash).or_default().push(id);
        self.entries.push(Entry {
            features: fp.features,
            band_keys: fp.band_keys,
            content_hash: fp.content_hash,
            live: true,
        });
        self.live += 1;
        Ok(id)
    }

    /// Removes item `id` from candidates; false when unknown or already removed.
    pub fn remove(&mut self, id: u32) -> Result<bool> {
        let Some(e) = self.entries.get_mut(id as usize) else {
            return Ok(false);
        };
        if !e.live {
            return Ok(false);
        }
        e.live = false;
        if !e.band_keys.is_empty() {
            self.lsh.remove(id, &e.band_keys)?;
        }
        if let Some(ids) = self.by_hash.get_mut(&e.content_hash) {
            ids.retain(|&x| x != id);
        }
        e.features = Vec::new();
        self.live -= 1;
        Ok(true)
    }

    /// The canonical features of a live item.
    pub fn features(&self, id: u32) -> Option<&[u64]> {
        self.entries.get(id as usize).filter(|e| e.live).map(|e| e.features.as_slice())
    }

    /// The underlying band index (for metrics such as bucket sizes).
    pub fn lsh(&self) -> &LshIndex {
        &self.lsh
    }
}
