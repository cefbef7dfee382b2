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
//! - **Same content first, inside the cap**: live ids whose content hash
//!   equals the query's are candidates whatever the bands found, and rank
//!   first (they are certain): the earliest `max_candidates` of them, with
//!   the bands they share (`bands: 0` where the bands did not find them).
//!   They count against the cap: the band candidates fill what the copies
//!   leave of it, so a query never returns more than `max_candidates`,
//!   and a flood of copies cannot grow the work. Copies past the cap are
//!   a cut like any other (`over_cap`, estimate 1).
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
pub use rank::SketchReads;
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
    /// Same-content ids first, earliest first; then band candidates, most
    /// bands shared first (then lowest id) or, when the cap cut, best
    /// estimated similarity first. At most `max_candidates` in all.
    pub ids: Vec<Candidate>,
    /// Distinct candidates seen before the cap: band candidates plus the
    /// same-content ids the bands did not find.
    pub distinct: usize,
    /// More candidates existed than `max_candidates`: the copies and the
    /// best band candidates by estimated similarity were kept.
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

/// The in-memory posting key of a content hash (what a query looks its
/// copies up by), for callers that group items as the index files them.
pub fn content_key(hash: &ContentHash) -> u32 {
    hash_key(&hash.0)
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

    /// Asks the cache for item `id`'s flags and content hash ahead of a
    /// read (a hint: see [`Pages::prefetch`](crate::Pages::prefetch)); nothing for an
    /// unknown id.
    pub fn prefetch_entries(&self, id: u32) {
        self.flags.prefetch(id as usize);
        self.hashes.prefetch(id as usize);
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
    pub fn sketch_of(&self, signature: &[u32]) -> Vec<u8> {
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
mod tests;
