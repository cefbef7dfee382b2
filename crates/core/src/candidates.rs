//! [`CandidateIndex`]: the one candidate index of neardup. Batch dedup
//! ([`crate::MemoryIndex`]), the document scan, the service's tenants and
//! their shadow indexes all hold an instance of it; none keeps postings of
//! its own.
//!
//! It owns, per item, a dense `u32` id handed out in insertion order, a live
//! flag, the content hash and the band keys; and across items the band
//! postings and the content-hash table. It does not hold features or text:
//! callers keep those where they like (in memory, in a store) and verify the
//! candidates it returns with [`crate::verify::verify_pair`].
//!
//! # The rules of a query, in one place
//!
//! - **Band candidates**: every live id sharing at least one band key with
//!   the query, reading at most `max_bucket_read` entries per bucket (a
//!   larger bucket is read partially and counted in `hot_buckets`). They are
//!   ranked by bands shared (most first, then lowest id) and cut to
//!   `max_candidates`; a cut sets `over_cap`.
//! - **Same content**: live ids whose content hash equals the query's are
//!   always candidates, whatever the bands found: the earliest
//!   `max_candidates` of them, so a flood of copies cannot grow the work.
//!   Those the bands did not find follow the band candidates with `bands: 0`.
//! - `exclude` (the querying item itself) is never returned; a
//!   [`CandidateIndex::candidates_before`] query sees only ids below its own.
//!
//! Memory per item: 16 bytes of content hash, 8 bytes per band key, one
//! flag byte, and one posting-map entry per band plus one for the content
//! hash ([`CandidateIndex::heap_bytes`] reports the total from capacities).

use crate::config::Params;
use crate::error::{Error, Result};
use crate::hash::ContentHash;
use crate::lsh::postings::{Postings, LIST_BIT};
use crate::lsh::{LshParams, QueryLimits};

/// Largest item id a [`CandidateIndex`] hands out.
pub const MAX_ITEM_ID: u32 = LIST_BIT - 1;

const LIVE: u8 = 1;
const BANDED: u8 = 2;

/// One candidate, before verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The item.
    pub id: u32,
    /// Band keys it shares with the query (0: found by content hash only).
    pub bands: u16,
    /// Its content hash equals the query's.
    pub same_content: bool,
}

/// The candidates of one query, with what limited them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CandidateSet {
    /// Band candidates, most bands shared first (then lowest id), at most
    /// `max_candidates`; then same-content ids the bands did not find,
    /// earliest first.
    pub ids: Vec<Candidate>,
    /// Distinct candidates seen before the cap: band candidates plus the
    /// same-content ids added.
    pub distinct: usize,
    /// More band candidates existed than `max_candidates`: the answer is
    /// partial, and the caller must treat the item as unresolved (review,
    /// quarantine), never as unique.
    pub over_cap: bool,
    /// Buckets larger than `max_bucket_read`, read partially.
    pub hot_buckets: u32,
    /// Bucket entries read.
    pub entries_read: usize,
}

impl CandidateSet {
    /// True when candidates may be missing (cap or hot bucket).
    pub fn is_partial(&self) -> bool {
        self.over_cap || self.hot_buckets > 0
    }
}

/// Band postings, content-hash table and per-item keys. See the module doc.
#[derive(Clone)]
pub struct CandidateIndex {
    lsh: LshParams,
    seed: u64,
    /// Tables `0..bands` are the bands; table `bands` is the content hash.
    postings: Postings,
    hashes: Vec<ContentHash>,
    /// `bands` keys per id (zeros for an item without keys).
    keys: Vec<u64>,
    flags: Vec<u8>,
    live: usize,
}

impl std::fmt::Debug for CandidateIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandidateIndex").field("lsh", &self.lsh).field("live", &self.live).finish_non_exhaustive()
    }
}

fn hash_key(h: &ContentHash) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&h.0[..8]);
    u64::from_le_bytes(b)
}

impl CandidateIndex {
    /// An empty index for band keys made with `lsh` and `seed`.
    pub fn new(lsh: LshParams, seed: u64) -> CandidateIndex {
        CandidateIndex {
            lsh,
            seed,
            postings: Postings::new(lsh.bands as usize + 1),
            hashes: Vec::new(),
            keys: Vec::new(),
            flags: Vec::new(),
            live: 0,
        }
    }

    /// An empty index for fingerprints made under `params`.
    pub fn for_params(params: &Params) -> CandidateIndex {
        CandidateIndex::new(params.lsh(), params.config().seed)
    }

    /// The banding.
    pub fn lsh(&self) -> LshParams {
        self.lsh
    }

    /// The band-key seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Live items.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no item is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Ids handed out so far (live or removed): the next id.
    pub fn slots(&self) -> u32 {
        self.flags.len() as u32
    }

    /// True when `id` was handed out and not removed.
    pub fn is_live(&self, id: u32) -> bool {
        self.flags.get(id as usize).is_some_and(|f| f & LIVE != 0)
    }

    /// The content hash of a live item.
    pub fn content_hash(&self, id: u32) -> Option<ContentHash> {
        self.is_live(id).then(|| self.hashes[id as usize])
    }

    /// The band keys of a live item (empty when it has none).
    pub fn band_keys(&self, id: u32) -> Option<&[u64]> {
        if !self.is_live(id) {
            return None;
        }
        let i = id as usize;
        if self.flags[i] & BANDED == 0 {
            return Some(&[]);
        }
        let b = self.lsh.bands as usize;
        Some(&self.keys[i * b..(i + 1) * b])
    }

    fn check_keys(&self, band_keys: &[u64]) -> Result<()> {
        if !band_keys.is_empty() && band_keys.len() != self.lsh.bands as usize {
            return Err(Error::incompatible(format!(
                "{} band keys for an index of {} bands",
                band_keys.len(),
                self.lsh.bands
            )));
        }
        Ok(())
    }

    /// Adds an item under its band keys (empty for an item matched by
    /// content hash only) and returns its id, the next in insertion order.
    pub fn insert(&mut self, band_keys: &[u64], content_hash: ContentHash) -> Result<u32> {
        self.check_keys(band_keys)?;
        let id = self.flags.len();
        let id = u32::try_from(id)
            .ok()
            .filter(|&i| i <= MAX_ITEM_ID)
            .ok_or_else(|| Error::limit("items per index", u64::from(MAX_ITEM_ID), id as u64))?;
        let bands = self.lsh.bands as usize;
        let mut flags = LIVE;
        if band_keys.is_empty() {
            self.keys.resize(self.keys.len() + bands, 0);
        } else {
            flags |= BANDED;
            for (band, &key) in band_keys.iter().enumerate() {
                self.postings.insert(band, key, id);
            }
            self.keys.extend_from_slice(band_keys);
        }
        self.postings.insert(bands, hash_key(&content_hash), id);
        self.hashes.push(content_hash);
        self.flags.push(flags);
        self.live += 1;
        Ok(id)
    }

    /// Removes item `id` from every posting; false when unknown or already removed.
    pub fn remove(&mut self, id: u32) -> bool {
        let Some(keys) = self.band_keys(id) else {
            return false;
        };
        let keys = keys.to_vec();
        for (band, &key) in keys.iter().enumerate() {
            self.postings.remove(band, key, id);
        }
        let i = id as usize;
        self.postings.remove(self.lsh.bands as usize, hash_key(&self.hashes[i]), id);
        self.flags[i] &= !LIVE;
        self.live -= 1;
        true
    }

    /// Candidates for an item with `band_keys` and `content_hash` among live
    /// items, never returning `exclude`.
    pub fn candidates(
        &self,
        band_keys: &[u64],
        content_hash: ContentHash,
        exclude: Option<u32>,
        limits: QueryLimits,
    ) -> Result<CandidateSet> {
        self.check_keys(band_keys)?;
        Ok(self.query(band_keys, content_hash, exclude, None, limits))
    }

    /// The candidates item `id` had just before it was inserted (only ids
    /// below it), exactly as [`CandidateIndex::candidates`] answered then,
    /// provided nothing was removed since. Lets a batch insert a chunk, then
    /// query all of it in parallel. An unknown or removed `id` has none.
    pub fn candidates_before(&self, id: u32, limits: QueryLimits) -> CandidateSet {
        match (self.band_keys(id), self.content_hash(id)) {
            (Some(keys), Some(hash)) => self.query(keys, hash, None, Some(id), limits),
            _ => CandidateSet::default(),
        }
    }

    fn query(
        &self,
        band_keys: &[u64],
        hash: ContentHash,
        exclude: Option<u32>,
        before: Option<u32>,
        limits: QueryLimits,
    ) -> CandidateSet {
        let mut out = CandidateSet::default();
        let visible = |bucket: &'_ [u32]| -> usize {
            match before {
                None => bucket.len(),
                Some(b) => bucket.partition_point(|&x| x < b),
            }
        };
        let mut seen: Vec<u32> = Vec::new();
        for (band, &key) in band_keys.iter().enumerate() {
            let bucket = self.postings.bucket(band, key);
            let bucket = &bucket[..visible(bucket)];
            let take = bucket.len().min(limits.max_bucket_read);
            if bucket.len() > limits.max_bucket_read {
                out.hot_buckets += 1;
            }
            seen.extend_from_slice(&bucket[..take]);
            out.entries_read += take;
        }
        seen.sort_unstable();
        let mut ranked: Vec<(u32, u16)> = Vec::new();
        for id in seen {
            if Some(id) == exclude {
                continue;
            }
            match ranked.last_mut() {
                Some((last, n)) if *last == id => *n += 1,
                _ => ranked.push((id, 1)),
            }
        }
        out.distinct = ranked.len();
        ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        if ranked.len() > limits.max_candidates {
            out.over_cap = true;
            ranked.truncate(limits.max_candidates);
        }
        out.ids = ranked
            .into_iter()
            .map(|(id, bands)| Candidate { id, bands, same_content: self.hashes[id as usize] == hash })
            .collect();
        let copies = self.postings.bucket(self.lsh.bands as usize, hash_key(&hash));
        let same = copies[..visible(copies)]
            .iter()
            .copied()
            .filter(|&id| Some(id) != exclude && self.hashes[id as usize] == hash)
            .take(limits.max_candidates);
        let banded = out.ids.len();
        for id in same {
            if !out.ids[..banded].iter().any(|c| c.id == id) {
                out.ids.push(Candidate { id, bands: 0, same_content: true });
                out.distinct += 1;
            }
        }
        out
    }

    /// The largest band buckets, for metrics: `(band, key, size)`, largest first.
    pub fn largest_buckets(&self, top: usize) -> Vec<(u32, u64, usize)> {
        self.postings.largest(self.lsh.bands as usize, top)
    }

    /// Heap bytes held by the index, from capacities.
    pub fn heap_bytes(&self) -> u64 {
        self.postings.heap_bytes()
            + (self.hashes.capacity() * 16 + self.keys.capacity() * 8 + self.flags.capacity()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsh::band_keys_into;

    const LIM: QueryLimits = QueryLimits { max_candidates: 100, max_bucket_read: 1000 };

    fn keys(p: LshParams, sig: &[u32]) -> Vec<u64> {
        let mut k = Vec::new();
        band_keys_into(p, 9, sig, &mut k).unwrap();
        k
    }

    fn h(n: u8) -> ContentHash {
        ContentHash([n; 16])
    }

    fn ids(c: &CandidateSet) -> Vec<(u32, u16)> {
        c.ids.iter().map(|c| (c.id, c.bands)).collect()
    }

    #[test]
    fn insert_query_remove() {
        let p = LshParams::new(4, 2).unwrap();
        let mut idx = CandidateIndex::new(p, 9);
        let a = keys(p, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let b = keys(p, &[1, 2, 0, 0, 0, 0, 7, 8]);
        let c = keys(p, &[9, 9, 9, 9, 9, 9, 9, 9]);
        assert_eq!(idx.insert(&a, h(0)).unwrap(), 0);
        assert_eq!(idx.insert(&b, h(1)).unwrap(), 1);
        assert_eq!(idx.insert(&c, h(2)).unwrap(), 2);
        let got = idx.candidates(&a, h(0), Some(0), LIM).unwrap();
        assert_eq!(ids(&got), vec![(1, 2)]);
        assert!(!got.is_partial());
        assert!(idx.remove(1));
        assert!(!idx.remove(1));
        assert!(idx.candidates(&a, h(0), Some(0), LIM).unwrap().ids.is_empty());
        assert_eq!(idx.len(), 2);
        assert_eq!(idx.slots(), 3);
        assert_eq!(idx.band_keys(1), None);
        assert_eq!(idx.band_keys(2), Some(&c[..]));
    }

    #[test]
    fn caps_are_reported_not_silent() {
        let p = LshParams::new(2, 1).unwrap();
        let mut idx = CandidateIndex::new(p, 1);
        let k = keys(p, &[5, 5]);
        for i in 0..50 {
            idx.insert(&k, h(i)).unwrap();
        }
        let got = idx.candidates(&k, h(200), None, QueryLimits { max_candidates: 10, max_bucket_read: 20 }).unwrap();
        assert!(got.over_cap);
        assert_eq!(got.hot_buckets, 2);
        assert_eq!(got.ids.len(), 10);
        assert_eq!(got.distinct, 20);
        assert_eq!(got.entries_read, 40);
    }

    #[test]
    fn same_content_is_always_a_candidate_up_to_the_cap() {
        let p = LshParams::new(2, 1).unwrap();
        let mut idx = CandidateIndex::new(p, 1);
        // Ten copies matched by hash only (no band keys), then one banded copy.
        for _ in 0..10 {
            idx.insert(&[], h(7)).unwrap();
        }
        let k = keys(p, &[1, 2]);
        idx.insert(&k, h(7)).unwrap();
        let lim = QueryLimits { max_candidates: 4, max_bucket_read: 10 };
        let got = idx.candidates(&k, h(7), Some(0), lim).unwrap();
        // The banded copy first; then the earliest copies, the cap counting
        // every same-content id taken (the banded one included only if early).
        assert_eq!(ids(&got), vec![(10, 2), (1, 0), (2, 0), (3, 0), (4, 0)]);
        assert!(got.ids.iter().all(|c| c.same_content));
        assert_eq!(got.distinct, 5);
        assert!(!got.is_partial());
        // A different hash sharing the first 8 bytes is not the same content.
        let mut other = [7u8; 16];
        other[15] = 0;
        assert!(idx.candidates(&[], ContentHash(other), None, lim).unwrap().ids.is_empty());
    }

    #[test]
    fn before_equals_querying_before_insertion() {
        let p = LshParams::new(3, 1).unwrap();
        let mut idx = CandidateIndex::new(p, 4);
        let lim = QueryLimits { max_candidates: 5, max_bucket_read: 7 };
        let sigs: Vec<Vec<u32>> = (0..60u32).map(|i| vec![i % 3, i % 5, i % 11]).collect();
        let mut then = Vec::new();
        for (i, s) in sigs.iter().enumerate() {
            let k = keys(p, s);
            let hash = h((i % 4) as u8);
            then.push(idx.candidates(&k, hash, None, lim).unwrap());
            assert_eq!(idx.insert(&k, hash).unwrap(), i as u32);
        }
        for (i, want) in then.iter().enumerate() {
            assert_eq!(&idx.candidates_before(i as u32, lim), want, "item {i}");
        }
    }

    #[test]
    fn wrong_key_count_is_an_error() {
        let mut idx = CandidateIndex::new(LshParams::new(2, 2).unwrap(), 1);
        assert!(idx.insert(&[1], h(0)).is_err());
        assert!(idx.candidates(&[1, 2, 3], h(0), None, LIM).is_err());
    }
}
