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
//!   larger bucket is read partially and counted in `hot_buckets`).
//! - **Rank before the cap**: when there are more than `max_candidates` of
//!   them, each is scored by how many values of its signature sketch agree
//!   with the query's (an unbiased estimate of Jaccard, far sharper than a
//!   count of bands shared), and the best `max_candidates` are kept (ties:
//!   more bands, then lowest id); the cut sets `over_cap`. Below the cap
//!   nothing is ranked: every candidate is verified anyway, in bands order.
//! - **Hot buckets** are read from a rotation point derived from the bucket
//!   key, the band and the bucket's length, not from their oldest entry, so
//!   a partial read does not systematically hide the same (newest) items; an
//!   item sharing several hot bands gets an independent chance in each. A
//!   partial read can miss a near duplicate that shares only hot buckets
//!   with the query; it cannot miss one that shares a bucket that was read
//!   whole, and it is always reported.
//! - **Same content**: live ids whose content hash equals the query's are
//!   always candidates, whatever the bands found: the earliest
//!   `max_candidates` of them, so a flood of copies cannot grow the work.
//!   Those the bands did not find follow the band candidates with `bands: 0`.
//! - `exclude` (the querying item itself) is never returned; a
//!   [`CandidateIndex::candidates_before`] query sees only ids below its own.
//!
//! Memory per item: 16 bytes of content hash, 8 bytes per band key, the
//! sketch (`rank_bits / 8` bytes per signature value: 128 bytes for 128
//! values at the default 8 bits), one flag byte, and one posting-map entry
//! per band plus one for the content hash ([`CandidateIndex::heap_bytes`]
//! reports the total from capacities).
//!
//! # The sketch
//!
//! The low `rank_bits` bits of each MinHash value. Two items agree on a
//! position with probability `J + (1 - J) / 2^b` (b-bit minwise hashing,
//! Li and König 2010), so the agreement count ranks candidates by Jaccard
//! with a bias that is the same for every candidate; at 8 bits and 128
//! values its standard deviation at J = 0.85 is about 0.03.

use crate::config::Params;
use crate::error::{Error, Result};
use crate::fingerprint::Fingerprint;
use crate::hash::ContentHash;
use crate::lsh::postings::{Postings, LIST_BIT};
use crate::lsh::{LshParams, QueryLimits};
use crate::minhash::SignatureScheme;
use crate::pages::Pages;

mod load;
mod rank;
#[cfg(test)]
mod screen_tests;
mod view;

pub use load::{Filing, RowLoader};

use rank::Query;
pub use view::{ImageRow, IndexView};

/// Largest item id a [`CandidateIndex`] hands out.
pub const MAX_ITEM_ID: u32 = LIST_BIT - 1;

const LIVE: u8 = 1;
const BANDED: u8 = 2;

/// What the candidate index keeps of one item, borrowed from its fingerprint
/// (or, for a stored item, from its stored signature).
#[derive(Debug, Clone, Copy)]
pub struct ItemKeys<'a> {
    /// LSH band keys (empty: matched by content hash only).
    pub band_keys: &'a [u64],
    /// The content hash.
    pub content_hash: ContentHash,
    /// The MinHash signature the band keys were made from (empty when they are).
    pub signature: &'a [u32],
}

impl<'a> From<&'a Fingerprint> for ItemKeys<'a> {
    fn from(fp: &'a Fingerprint) -> ItemKeys<'a> {
        ItemKeys { band_keys: &fp.band_keys, content_hash: fp.content_hash, signature: &fp.signature }
    }
}

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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateSet {
    /// Band candidates, most bands shared first (then lowest id), at most
    /// `max_candidates`; then same-content ids the bands did not find,
    /// earliest first.
    pub ids: Vec<Candidate>,
    /// Distinct candidates seen before the cap: band candidates plus the
    /// same-content ids added.
    pub distinct: usize,
    /// More band candidates existed than `max_candidates` and the best
    /// `max_candidates` by estimated similarity were kept.
    pub over_cap: bool,
    /// The estimated Jaccard of the best candidate the cap cut (when it cut).
    pub cut_estimate: Option<f64>,
    /// The cap cut a candidate whose estimate is within three standard
    /// deviations of the estimator of the query's threshold: a near duplicate
    /// may have been cut. The answer is then partial.
    pub cut_close: bool,
    /// When `cut_close`: the best cut candidates still within that margin,
    /// best first, at most `max_candidates` of them (not verified; a caller
    /// may look further among a subset of them).
    pub close_cut: Vec<Candidate>,
    /// More cut candidates were within the margin than `close_cut` holds.
    pub close_cut_truncated: bool,
    /// Buckets larger than `max_bucket_read`, read partially.
    pub hot_buckets: u32,
    /// Bucket entries read.
    pub entries_read: usize,
    /// Bucket lookups the membership screen answered "definitely none"
    /// without reading the table (0 without a screen).
    pub screened_out: u32,
    /// Bucket lookups the screen passed that found no bucket: its false
    /// positives.
    pub screen_false_positives: u32,
}

impl CandidateSet {
    /// Counts what a table's membership screen did for one bucket read
    /// (`empty`: the read found no bucket).
    pub(crate) fn count_screen(&mut self, screened: crate::lsh::postings::Screened, empty: bool) {
        use crate::lsh::postings::Screened;
        match screened {
            Screened::Skipped => self.screened_out += 1,
            Screened::Passed if empty => self.screen_false_positives += 1,
            Screened::Passed | Screened::Unscreened => {}
        }
    }

    /// True when a near duplicate may be missing: a hot bucket was read
    /// partially, or the cap cut close to the threshold. The caller must
    /// then treat the item as unresolved (review, quarantine), never as
    /// unique. A cap that cut only candidates estimated far below the
    /// threshold is reported (`over_cap`) but does not make the answer partial.
    pub fn is_partial(&self) -> bool {
        self.cut_close || self.hot_buckets > 0
    }
}

/// Band postings, content-hash table and per-item keys. See the module doc.
#[derive(Clone)]
pub struct CandidateIndex {
    lsh: LshParams,
    seed: u64,
    /// Signature values per item.
    num_perm: usize,
    /// Bytes of each value kept in the sketch (1, 2 or 4).
    rank_bytes: usize,
    /// The signature scheme: how sketch agreement estimates Jaccard.
    scheme: SignatureScheme,
    /// SimHash: the largest Hamming distance a candidate may have (its
    /// sketch holds every bit), checked on every band candidate.
    max_hamming: Option<u32>,
    /// `num_perm * rank_bytes` bytes per id (zeros for an item without keys).
    sketches: Pages<u8>,
    /// Tables `0..bands` are the bands; table `bands` is the content hash.
    postings: Postings,
    hashes: Pages<[u8; 16]>,
    /// `bands` folded keys per id (zeros for an item without keys).
    keys: Pages<u32>,
    flags: Pages<u8>,
    live: usize,
}

impl std::fmt::Debug for CandidateIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandidateIndex").field("lsh", &self.lsh).field("live", &self.live).finish_non_exhaustive()
    }
}

/// Where an item with these folded band keys (none, or one per band) and
/// this content hash is filed, as `(table, key)`: tables `0..bands` are
/// the bands, table `bands` the content hash.
fn posting_keys<'a>(
    bands: usize,
    folded: &'a [u32],
    content_hash: &ContentHash,
) -> impl Iterator<Item = (usize, u32)> + 'a {
    folded.iter().copied().enumerate().chain(std::iter::once((bands, hash_key(&content_hash.0))))
}

/// The posting key of a content hash: its first four bytes (equal hashes are
/// then confirmed on the full 16).
fn hash_key(h: &[u8; 16]) -> u32 {
    u32::from_le_bytes([h[0], h[1], h[2], h[3]])
}

/// The in-memory posting key of a band key: the 64-bit seeded key folded to
/// 32 bits. Two different band keys share a folded key with probability
/// 2⁻³², which can only add a candidate (verified and ranked like any
/// other), never hide one.
pub fn fold_key(key: u64) -> u32 {
    (key ^ (key >> 32)) as u32
}

impl CandidateIndex {
    /// An empty index for band keys made with `lsh` and `seed` from
    /// signatures of `num_perm` values, ranking with sketches of
    /// `rank_bits` (8, 16 or 32) bits per value: a MinHash index without
    /// a screen. [`CandidateIndex::for_params`] is the one for a
    /// configuration (a SimHash signature's estimates and Hamming gate, a
    /// membership screen).
    pub fn new(lsh: LshParams, seed: u64, num_perm: usize, rank_bits: u32) -> Result<CandidateIndex> {
        if !matches!(rank_bits, 8 | 16 | 32) {
            return Err(Error::config("rank_bits", format!("must be 8, 16 or 32, got {rank_bits}")));
        }
        if num_perm < lsh.width() as usize {
            return Err(Error::config(
                "bands/rows",
                format!(
                    "{} bands x {} rows need {} signature values, have {num_perm}",
                    lsh.bands,
                    lsh.rows,
                    lsh.width()
                ),
            ));
        }
        Ok(CandidateIndex {
            lsh,
            seed,
            num_perm,
            rank_bytes: rank_bits as usize / 8,
            scheme: SignatureScheme::MinHash,
            max_hamming: None,
            sketches: Pages::new(num_perm * (rank_bits as usize / 8)),
            postings: Postings::new(lsh.bands as usize + 1),
            hashes: Pages::new(1),
            keys: Pages::new(lsh.bands as usize),
            flags: Pages::new(1),
            live: 0,
        })
    }

    /// An empty index for fingerprints made under `params`.
    pub fn for_params(params: &Params) -> CandidateIndex {
        let c = params.config();
        let mut index = CandidateIndex::new(params.lsh(), c.seed, c.num_perm as usize, c.rank_bits)
            .expect("Params guarantees a valid layout and rank_bits");
        index.scheme = c.signature;
        index.max_hamming = params.max_hamming();
        index.postings.set_screen(c.screen_bits);
        index
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

    fn flag(&self, id: u32) -> u8 {
        if (id as usize) < self.flags.len() {
            self.flags.row(id as usize)[0]
        } else {
            0
        }
    }

    /// True when `id` was handed out and not removed.
    pub fn is_live(&self, id: u32) -> bool {
        self.flag(id) & LIVE != 0
    }

    /// The content hash of a live item.
    pub fn content_hash(&self, id: u32) -> Option<ContentHash> {
        self.is_live(id).then(|| ContentHash(self.hashes.row(id as usize)[0]))
    }

    /// The folded band keys of a live item (empty when it has none).
    pub fn band_keys(&self, id: u32) -> Option<&[u32]> {
        let f = self.flag(id);
        if f & LIVE == 0 {
            return None;
        }
        if f & BANDED == 0 {
            return Some(&[]);
        }
        Some(self.keys.row(id as usize))
    }

    fn check_keys(&self, keys: &ItemKeys<'_>) -> Result<()> {
        if keys.band_keys.is_empty() {
            return Ok(());
        }
        if keys.band_keys.len() != self.lsh.bands as usize {
            return Err(Error::incompatible(format!(
                "{} band keys for an index of {} bands",
                keys.band_keys.len(),
                self.lsh.bands
            )));
        }
        if keys.signature.len() != self.num_perm {
            return Err(Error::incompatible(format!(
                "a signature of {} values for an index of {}",
                keys.signature.len(),
                self.num_perm
            )));
        }
        Ok(())
    }

    /// The image row (folded keys, sketch) of an item with `keys`, once
    /// they fit this index: what every insert of keys files.
    fn checked_row(&self, keys: &ItemKeys<'_>) -> Result<(Vec<u32>, Vec<u8>)> {
        self.check_keys(keys)?;
        Ok(self.row_of(keys.band_keys, keys.signature))
    }

    /// The sketch of a signature: the low `rank_bytes` bytes of each value.
    fn sketch_of(&self, signature: &[u32]) -> Vec<u8> {
        // One loop per width, so each compiles to a plain narrowing copy
        // (a `take` per value did not vectorize, and this runs per insert).
        match self.rank_bytes {
            1 => signature.iter().map(|&v| v as u8).collect(),
            2 => signature.iter().flat_map(|&v| (v as u16).to_le_bytes()).collect(),
            _ => signature.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        }
    }

    fn sketch(&self, id: u32) -> &[u8] {
        self.sketches.row(id as usize)
    }

    /// Adds an item and returns its id, the next in insertion order. An
    /// item without band keys is matched by content hash only.
    pub fn insert(&mut self, keys: ItemKeys<'_>) -> Result<u32> {
        let (folded, sketch) = self.checked_row(&keys)?;
        self.insert_row(&folded, &sketch, keys.content_hash)
    }

    /// A consistent copy of every item's keys, sketch, hash and flags as they
    /// are now (shared pages: cheap), for writing an image while the index
    /// keeps changing.
    pub fn view(&self) -> IndexView {
        IndexView {
            keys: self.keys.view(),
            sketches: self.sketches.view(),
            hashes: self.hashes.view(),
            flags: self.flags.view(),
        }
    }

    /// Sketch bytes per item.
    pub fn sketch_len(&self) -> usize {
        self.sketches.width()
    }

    /// Removes item `id` from every posting; false when unknown or already removed.
    pub fn remove(&mut self, id: u32) -> bool {
        let Some(keys) = self.band_keys(id) else {
            return false;
        };
        let keys = keys.to_vec();
        let i = id as usize;
        let hash = ContentHash(self.hashes.row(i)[0]);
        for (table, key) in posting_keys(self.lsh.bands as usize, &keys, &hash) {
            self.postings.remove(table, key, id);
        }
        let f = self.flags.row(i)[0] & !LIVE;
        self.flags.set(i, &[f]);
        self.live -= 1;
        true
    }

    /// Candidates for an item with `keys` among live items, never
    /// returning `exclude`.
    pub fn candidates(&self, keys: ItemKeys<'_>, exclude: Option<u32>, limits: QueryLimits) -> Result<CandidateSet> {
        self.check_keys(&keys)?;
        let sketch = self.sketch_of(keys.signature);
        let folded: Vec<u32> = keys.band_keys.iter().map(|&k| fold_key(k)).collect();
        let q = Query { band_keys: &folded, hash: keys.content_hash, sketch: &sketch, exclude, before: None };
        Ok(self.query(&q, limits, &|_| true))
    }

    /// The candidates item `id` had just before it was inserted (only ids
    /// below it), exactly as [`CandidateIndex::candidates`] answered then,
    /// provided nothing was removed since (the screen counters aside: they
    /// count lookups in the tables as they are now). A table where the item
    /// found its bucket empty when filed holds no smaller id and is not
    /// read. Lets a batch insert a chunk, then query all of it in parallel.
    /// An unknown or removed `id` has none.
    pub fn candidates_before(&self, id: u32, limits: QueryLimits) -> CandidateSet {
        self.candidates_before_where(id, limits, &|_| true)
    }

    /// [`CandidateIndex::candidates_before`] among the ids `keep` accepts,
    /// applied before ranking and the cap: a batch asks again among the
    /// items it kept when a capped answer verified none of them.
    pub fn candidates_before_where(&self, id: u32, limits: QueryLimits, keep: &dyn Fn(u32) -> bool) -> CandidateSet {
        match (self.band_keys(id), self.content_hash(id)) {
            (Some(band_keys), Some(hash)) => {
                let q = Query { band_keys, hash, sketch: self.sketch(id), exclude: None, before: Some(id) };
                self.query(&q, limits, keep)
            }
            _ => CandidateSet::default(),
        }
    }

    /// The largest band buckets, for metrics: `(band, folded key, size)`, largest first.
    pub fn largest_buckets(&self, top: usize) -> Vec<(u32, u32, usize)> {
        self.postings.largest(self.lsh.bands as usize, top)
    }

    /// Band buckets by size: element `i` counts the buckets holding
    /// `[2^i, 2^(i+1))` items (see the dashboards' bucket-size plot).
    pub fn bucket_size_histogram(&self) -> Vec<u64> {
        self.postings.size_histogram(self.lsh.bands as usize)
    }

    /// Heap bytes of the membership screens (0 without; part of
    /// [`CandidateIndex::heap_bytes`]).
    pub fn screen_bytes(&self) -> u64 {
        self.postings.screen_bytes()
    }

    /// Heap bytes held by the index, from capacities.
    pub fn heap_bytes(&self) -> u64 {
        self.postings.heap_bytes()
            + self.hashes.heap_bytes()
            + self.keys.heap_bytes()
            + self.sketches.heap_bytes()
            + self.flags.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsh::band_keys_into;

    const LIM: QueryLimits = QueryLimits { max_candidates: 100, max_bucket_read: 1000, threshold: 0.8 };

    /// An index whose signatures are their own band keys' inputs.
    fn index(bands: u32, rows: u32) -> CandidateIndex {
        let p = LshParams::new(bands, rows).unwrap();
        CandidateIndex::new(p, 9, (bands * rows) as usize, 8).unwrap()
    }

    fn keys(idx: &CandidateIndex, sig: &[u32]) -> Vec<u64> {
        let mut k = Vec::new();
        band_keys_into(idx.lsh(), idx.seed(), sig, &mut k).unwrap();
        k
    }

    pub(super) fn h(n: u8) -> ContentHash {
        ContentHash([n; 16])
    }

    /// Inserts the item with signature `sig` (band keys made from it).
    pub(super) fn add(idx: &mut CandidateIndex, sig: &[u32], hash: ContentHash) -> u32 {
        let k = keys(idx, sig);
        idx.insert(ItemKeys { band_keys: &k, content_hash: hash, signature: sig }).unwrap()
    }

    fn ask(
        idx: &CandidateIndex,
        sig: &[u32],
        hash: ContentHash,
        exclude: Option<u32>,
        lim: QueryLimits,
    ) -> CandidateSet {
        let k = keys(idx, sig);
        idx.candidates(ItemKeys { band_keys: &k, content_hash: hash, signature: sig }, exclude, lim).unwrap()
    }

    fn ids(c: &CandidateSet) -> Vec<(u32, u16)> {
        c.ids.iter().map(|c| (c.id, c.bands)).collect()
    }

    /// Loading rows in bulk files the same buckets, in the same order, as
    /// row-by-row inserts — over several loader rounds (700 rows in tests),
    /// with many ids sharing buckets and content hashes — and the index
    /// answers, removes and inserts the same afterwards.
    #[test]
    fn bulk_loaded_rows_answer_as_inserted_ones() {
        let (mut one, mut bulk) = (index(4, 2), index(4, 2));
        let sig = |i: u32| -> Vec<u32> { (0..8).map(|j| (i.wrapping_mul(2_654_435_761) >> (j * 3)) % 5).collect() };
        let rows: Vec<_> = (0..2_500u32)
            .map(|i| {
                let k = keys(&one, &sig(i));
                let (folded, sketch) = one.row_of(&k, &sig(i));
                (folded, sketch, h((i % 40) as u8))
            })
            .collect();
        for (f, s, c) in &rows {
            one.insert_row(f, s, *c).unwrap();
        }
        let mut loader = bulk.loader();
        for (f, s, c) in &rows {
            loader.insert_row(f, s, *c).unwrap();
        }
        drop(loader);
        let lim = QueryLimits { max_candidates: 5_000, max_bucket_read: 5_000, threshold: 0.8 };
        let same = |one: &CandidateIndex, bulk: &CandidateIndex| {
            assert_eq!(one.bucket_size_histogram(), bulk.bucket_size_histogram());
            for i in (0..2_600u32).step_by(7) {
                let (a, b) = (ask(one, &sig(i), h(i as u8), None, lim), ask(bulk, &sig(i), h(i as u8), None, lim));
                assert_eq!(ids(&a), ids(&b), "query {i}");
            }
        };
        same(&one, &bulk);
        for id in (0..2_500).step_by(3) {
            one.remove(id);
            bulk.remove(id);
        }
        add(&mut one, &sig(7), h(7));
        add(&mut bulk, &sig(7), h(7));
        same(&one, &bulk);
    }

    /// Items added through a loader and filed chunk by chunk, each chunk's
    /// tables on threads of their own in reverse order (as a batch files
    /// them on its pool), answer as items inserted one by one — with
    /// screens, many ids sharing buckets and content hashes, and queries of
    /// each chunk's items against the items before them.
    #[test]
    fn tables_filed_on_threads_answer_as_one_by_one_inserts() {
        let (mut one, mut filed) = (index(4, 2), index(4, 2));
        one.postings.set_screen(8);
        filed.postings.set_screen(8);
        let sig = |i: u32| -> Vec<u32> { (0..8).map(|j| (i.wrapping_mul(2_654_435_761) >> (j * 3)) % 5).collect() };
        let lim = QueryLimits { max_candidates: 5_000, max_bucket_read: 5_000, threshold: 0.8 };
        for chunk in 0..6u32 {
            let items: Vec<u32> = (chunk * 450..(chunk + 1) * 450).collect();
            for &i in &items {
                add(&mut one, &sig(i), h((i % 40) as u8));
            }
            let item_keys: Vec<Vec<u64>> = items.iter().map(|&i| keys(&filed, &sig(i))).collect();
            let mut loader = filed.loader();
            for (&i, k) in items.iter().zip(&item_keys) {
                let id = loader.insert(ItemKeys { band_keys: k, content_hash: h((i % 40) as u8), signature: &sig(i) });
                assert_eq!(id.unwrap(), i);
            }
            loader.file_with(|jobs| {
                assert_eq!(jobs.len(), 5, "four bands and the content hash");
                std::thread::scope(|s| {
                    for job in jobs.into_iter().rev() {
                        s.spawn(move || job.run());
                    }
                });
            });
            drop(loader);
            assert_eq!(one.bucket_size_histogram(), filed.bucket_size_histogram());
            for &i in &items {
                assert_eq!(ids(&one.candidates_before(i, lim)), ids(&filed.candidates_before(i, lim)), "item {i}");
            }
        }
        for i in (0..3_000u32).step_by(11) {
            let (a, b) = (ask(&one, &sig(i), h(i as u8), None, lim), ask(&filed, &sig(i), h(i as u8), None, lim));
            assert_eq!(ids(&a), ids(&b), "query {i}");
        }
    }

    /// The whole answer but the screen counters (which count lookups in
    /// the tables as they are at the time of asking).
    fn unscreened(mut c: CandidateSet) -> CandidateSet {
        c.screened_out = 0;
        c.screen_false_positives = 0;
        c
    }

    /// Items filed through a loader — chunks crossing a loader round, every
    /// table on a thread of its own, a screen — with bands of their own and
    /// shared ones, items without band keys sharing content hashes, and an
    /// item removed between chunks: a batch's `candidates_before` of each
    /// equals what `candidates` answered just before it was added.
    #[test]
    fn loaded_items_answer_what_they_were_asked_before_insertion() {
        let (mut then_idx, mut filed) = (index(4, 2), index(4, 2));
        then_idx.postings.set_screen(8);
        filed.postings.set_screen(8);
        let lim = QueryLimits { max_candidates: 6, max_bucket_read: 40, threshold: 0.8 };
        // Bands 0 and 2 shared in small groups, bands 1 and 3 the item's own
        // for most items; every seventh item has no band keys at all.
        let sig = |i: u32| -> Vec<u32> {
            let own = if i % 3 == 0 { i % 17 } else { 1_000 + i };
            vec![i % 5, own, i % 9, own + 7, i % 13, own, i % 4, own]
        };
        let item = |idx: &CandidateIndex, i: u32| -> (Vec<u64>, Vec<u32>, ContentHash) {
            let hash = if i % 2 == 0 { h((i % 6) as u8) } else { h((100 + i % 150) as u8) };
            if i % 7 == 0 {
                (Vec::new(), Vec::new(), hash)
            } else {
                (keys(idx, &sig(i)), sig(i), hash)
            }
        };
        let mut then = Vec::new();
        for (chunk, range) in [0..900u32, 900..1_500].into_iter().enumerate() {
            if chunk == 1 {
                // Item 5's keys are shared with later items.
                assert!(then_idx.remove(5) && filed.remove(5));
            }
            let items: Vec<_> = range.clone().map(|i| item(&filed, i)).collect();
            for (i, (k, s, hash)) in range.clone().zip(&items) {
                let q = ItemKeys { band_keys: k, content_hash: *hash, signature: s };
                then.push(unscreened(then_idx.candidates(q, None, lim).unwrap()));
                assert_eq!(then_idx.insert(q).unwrap(), i);
            }
            let mut loader = filed.loader();
            for (k, s, hash) in &items {
                loader.insert(ItemKeys { band_keys: k, content_hash: *hash, signature: s }).unwrap();
            }
            loader.file_with(|jobs| {
                std::thread::scope(|sc| {
                    for job in jobs.into_iter().rev() {
                        sc.spawn(move || job.run());
                    }
                });
            });
            drop(loader);
            for i in range {
                let got = unscreened(filed.candidates_before(i, lim));
                assert_eq!(got, then[i as usize], "item {i}");
            }
        }
        let asked: usize = then.iter().map(|c| c.ids.len()).sum();
        assert!(asked > 1_000, "the items share buckets: {asked} candidates in all");
    }

    #[test]
    fn bucket_size_histogram_counts_every_band() {
        let mut idx = index(4, 2);
        assert_eq!(idx.bucket_size_histogram(), [0]);
        // Five copies of one signature: 4 buckets of 5 (bin 2: 4..=7).
        for i in 0..5 {
            add(&mut idx, &[1, 2, 3, 4, 5, 6, 7, 8], h(i));
        }
        // One that shares its first band only: that bucket grows to 6, and
        // 3 buckets of 1 (bin 0).
        add(&mut idx, &[1, 2, 9, 9, 8, 8, 7, 7], h(9));
        assert_eq!(idx.bucket_size_histogram(), [3, 0, 4]);
    }

    #[test]
    fn insert_query_remove() {
        let mut idx = index(4, 2);
        let (a, b, c) = ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 0, 0, 0, 0, 7, 8], [9; 8]);
        assert_eq!(add(&mut idx, &a, h(0)), 0);
        assert_eq!(add(&mut idx, &b, h(1)), 1);
        assert_eq!(add(&mut idx, &c, h(2)), 2);
        let got = ask(&idx, &a, h(0), Some(0), LIM);
        assert_eq!(ids(&got), vec![(1, 2)]);
        assert!(!got.is_partial());
        assert!(idx.remove(1));
        assert!(!idx.remove(1));
        assert!(ask(&idx, &a, h(0), Some(0), LIM).ids.is_empty());
        assert_eq!(idx.len(), 2);
        assert_eq!(idx.slots(), 3);
        assert_eq!(idx.band_keys(1), None);
        let folded: Vec<u32> = keys(&idx, &c).iter().map(|&k| fold_key(k)).collect();
        assert_eq!(idx.band_keys(2), Some(&folded[..]));
    }

    #[test]
    fn caps_are_reported_not_silent() {
        let mut idx = index(2, 1);
        for i in 0..50 {
            add(&mut idx, &[5, 5], h(i));
        }
        let lim = QueryLimits { max_candidates: 10, max_bucket_read: 20, threshold: 0.8 };
        let got = ask(&idx, &[5, 5], h(200), None, lim);
        assert!(got.over_cap);
        assert_eq!(got.hot_buckets, 2);
        assert_eq!(got.ids.len(), 10);
        assert!(got.distinct >= 20 && got.distinct <= 40, "{}", got.distinct);
        assert_eq!(got.entries_read, 40);
    }

    #[test]
    fn ranking_keeps_the_closest_signatures_not_the_first_ones() {
        // 4 bands of 2 rows. Twenty look-alikes share 3 bands and 6 of 8
        // values with the query; the needle, inserted last, shares the same
        // 3 bands but 7 values. By bands shared (then id) a cap of 3 keeps
        // the first look-alikes; by the sketch the needle comes first.
        let mut idx = index(4, 2);
        let q = [1, 2, 3, 4, 5, 6, 7, 8];
        for i in 0..20 {
            add(&mut idx, &[1, 2, 3, 4, 5, 6, 90 + i, 91 + i], h(i as u8));
        }
        let needle = add(&mut idx, &[1, 2, 3, 4, 5, 6, 7, 99], h(50));
        let lim = QueryLimits { max_candidates: 3, max_bucket_read: 100, threshold: 0.8 };
        let got = ask(&idx, &q, h(60), None, lim);
        assert!(got.over_cap);
        assert_eq!(got.distinct, 21);
        assert_eq!(ids(&got), [(needle, 3), (0, 3), (1, 3)]);
    }

    #[test]
    fn a_keep_filter_applies_before_the_cap() {
        let mut idx = index(2, 1);
        for i in 0..30 {
            add(&mut idx, &[5, 5], h(i));
        }
        let lim = QueryLimits { max_candidates: 4, max_bucket_read: 100, threshold: 0.8 };
        let got = idx.candidates_before_where(29, lim, &|id| id % 7 == 3);
        assert_eq!(got.ids.iter().map(|c| c.id).collect::<Vec<_>>(), [3, 10, 17, 24]);
        assert!(!got.over_cap);
        assert_eq!(got.distinct, 4);
    }

    #[test]
    fn hot_buckets_are_not_read_from_the_oldest_entry() {
        let mut idx = index(1, 1);
        for i in 0..1000 {
            add(&mut idx, &[5], h((i % 200) as u8));
        }
        let lim = QueryLimits { max_candidates: 1000, max_bucket_read: 100, threshold: 0.8 };
        let got = ask(&idx, &[5], h(255), None, lim);
        assert_eq!(got.hot_buckets, 1);
        assert_eq!(got.ids.len(), 100);
        let mut read: Vec<u32> = got.ids.iter().map(|c| c.id).collect();
        read.sort_unstable();
        assert_ne!(read, (0..100).collect::<Vec<_>>(), "read from the oldest entry");
        read.dedup();
        assert_eq!(read.len(), 100);
    }

    #[test]
    fn same_content_is_always_a_candidate_up_to_the_cap() {
        let mut idx = index(2, 1);
        // Ten copies matched by hash only (no band keys), then one banded copy.
        for _ in 0..10 {
            idx.insert(ItemKeys { band_keys: &[], content_hash: h(7), signature: &[] }).unwrap();
        }
        add(&mut idx, &[1, 2], h(7));
        let lim = QueryLimits { max_candidates: 4, max_bucket_read: 10, threshold: 0.8 };
        let got = ask(&idx, &[1, 2], h(7), Some(0), lim);
        // The banded copy first; then the earliest copies, the cap counting
        // every same-content id taken (the banded one included only if early).
        assert_eq!(ids(&got), vec![(10, 2), (1, 0), (2, 0), (3, 0), (4, 0)]);
        assert!(got.ids.iter().all(|c| c.same_content));
        assert_eq!(got.distinct, 5);
        assert!(!got.is_partial());
        // A different hash sharing the first 8 bytes is not the same content.
        let mut other = [7u8; 16];
        other[15] = 0;
        let none = ItemKeys { band_keys: &[], content_hash: ContentHash(other), signature: &[] };
        assert!(idx.candidates(none, None, lim).unwrap().ids.is_empty());
    }

    /// Buckets shared by many items and buckets of one (band 1, and every
    /// odd item's content hash, are the item's own: a batch's query skips
    /// the tables where the item found its bucket empty).
    #[test]
    fn before_equals_querying_before_insertion() {
        let mut idx = index(4, 1);
        let lim = QueryLimits { max_candidates: 5, max_bucket_read: 7, threshold: 0.8 };
        let sigs: Vec<Vec<u32>> = (0..60u32).map(|i| vec![i % 3, 1000 + i, i % 5, i % 11]).collect();
        let mut then = Vec::new();
        for (i, s) in sigs.iter().enumerate() {
            let hash = if i % 2 == 0 { h((i % 4) as u8) } else { h(100 + i as u8) };
            then.push(ask(&idx, s, hash, None, lim));
            assert_eq!(add(&mut idx, s, hash), i as u32);
        }
        for (i, want) in then.iter().enumerate() {
            assert_eq!(&idx.candidates_before(i as u32, lim), want, "item {i}");
        }
    }

    #[test]
    fn a_cut_far_below_the_threshold_is_not_partial() {
        // Twenty items agree with the query on one value in eight; one on all.
        let mut idx = index(8, 1);
        let q = [1, 2, 3, 4, 5, 6, 7, 8];
        for i in 0..20 {
            add(&mut idx, &[1, 100 + i, 101 + i, 102 + i, 103 + i, 104 + i, 105 + i, 106 + i], h(i as u8));
        }
        let lim = QueryLimits { max_candidates: 3, max_bucket_read: 100, threshold: 0.9 };
        let got = ask(&idx, &q, h(60), None, lim);
        assert!(got.over_cap && !got.cut_close && !got.is_partial(), "{got:?}");
        assert!(got.cut_estimate.unwrap() < 0.2);
        // A threshold the cut candidates could reach makes it partial.
        let got = ask(&idx, &q, h(60), None, QueryLimits { threshold: 0.1, ..lim });
        assert!(got.over_cap && got.cut_close && got.is_partial());
    }

    #[test]
    fn an_image_rebuilds_the_same_answers() {
        let mut idx = index(3, 1);
        let lim = QueryLimits { max_candidates: 5, max_bucket_read: 7, threshold: 0.5 };
        for i in 0..60u32 {
            add(&mut idx, &[i % 3, i % 5, i % 11], h((i % 4) as u8));
        }
        idx.remove(7);
        idx.remove(8);
        let view = idx.view();
        let reference = idx.clone();
        idx.remove(9); // after the view: not in it
        let mut copy = CandidateIndex::new(idx.lsh(), idx.seed(), 3, 8).unwrap();
        let mut old_of = Vec::new();
        for id in 0..view.slots() {
            if let Some(r) = view.row(id) {
                assert_eq!(copy.insert_row(r.folded, r.sketch, r.content_hash).unwrap() as usize, old_of.len());
                old_of.push(id);
            }
        }
        assert_eq!((copy.len(), reference.len()), (58, 58));
        // Ids are renumbered densely in the same order, so every answer maps
        // back to the reference's, in the same order.
        for q in 0..40u32 {
            let sig = [q % 3, q % 7, q % 11];
            let got: Vec<(u32, u16)> =
                ask(&copy, &sig, h(1), None, lim).ids.iter().map(|c| (old_of[c.id as usize], c.bands)).collect();
            assert_eq!(got, ids(&ask(&reference, &sig, h(1), None, lim)), "query {q}");
        }
        assert!(copy.insert_row(&[1, 2], &[0; 3], h(0)).is_err());
    }

    #[test]
    fn wrong_keys_are_an_error() {
        let mut idx = index(2, 2);
        let bad_bands = ItemKeys { band_keys: &[1], content_hash: h(0), signature: &[1, 2, 3, 4] };
        assert!(idx.insert(bad_bands).is_err());
        let bad_sig = ItemKeys { band_keys: &[1, 2], content_hash: h(0), signature: &[1, 2, 3] };
        assert!(idx.insert(bad_sig).is_err());
        assert!(CandidateIndex::new(LshParams::new(2, 2).unwrap(), 1, 4, 12).is_err());
        assert!(CandidateIndex::new(LshParams::new(2, 2).unwrap(), 1, 3, 8).is_err());
    }
}
