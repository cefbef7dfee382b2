//! Locality-sensitive hashing over MinHash signatures: banding and a bounded
//! in-memory band index.
//!
//! A signature of `bands × rows` values is cut into `bands` slices of `rows`
//! values; each slice becomes a band key `xxh3_64(le_bytes(slice), seed + band)`.
//! Two items are candidates when they share a key in at least one band, which
//! happens with probability `1 - (1 - s^rows)^bands` at Jaccard `s`
//! ([`params::candidate_probability`]).
//!
//! Band keys are seeded, platform-independent u64 values and may be stored.
//! The in-memory tables additionally mix each key with a per-process secret
//! before it reaches the hash map, so crafted keys cannot degrade the map
//! (this mixing is never persisted).

pub mod params;

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use crate::error::{Error, Result};
use crate::hash::{fmix64, hash_u32s};

pub use params::{candidate_probability, LshParams};

/// Computes the band keys of `signature` into `keys` (cleared first).
pub fn band_keys_into(params: LshParams, seed: u64, signature: &[u32], keys: &mut Vec<u64>) -> Result<()> {
    keys.clear();
    if signature.is_empty() {
        return Ok(());
    }
    let (b, r) = (params.bands as usize, params.rows as usize);
    if signature.len() < b * r {
        return Err(Error::incompatible(format!(
            "signature of {} values cannot fill {b} bands x {r} rows",
            signature.len()
        )));
    }
    keys.extend((0..b).map(|band| hash_u32s(&signature[band * r..(band + 1) * r], seed.wrapping_add(band as u64))));
    Ok(())
}

/// Limits on one candidate query, checked while reading, so a hot bucket or a
/// flood of candidates cannot grow memory or latency without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryLimits {
    /// Most candidates returned; more are reported through [`Candidates::over_cap`].
    pub max_candidates: usize,
    /// Most entries read from one bucket; larger buckets are counted as hot.
    pub max_bucket_read: usize,
}

/// The outcome of a candidate query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Candidates {
    /// Candidate ids with how many bands they share with the query, most bands
    /// first (then lowest id). At most `max_candidates` entries.
    pub ids: Vec<(u32, u16)>,
    /// Distinct candidates seen before the cap was applied.
    pub distinct: usize,
    /// True when `distinct > max_candidates`: the answer is partial, and the
    /// caller must treat the item as unresolved (review / quarantine), never
    /// as unique.
    pub over_cap: bool,
    /// Buckets larger than `max_bucket_read` (read only partially).
    pub hot_buckets: u32,
    /// Total bucket entries read.
    pub entries_read: usize,
}

impl Candidates {
    /// True when the result may be missing candidates (cap or hot bucket).
    pub fn is_partial(&self) -> bool {
        self.over_cap || self.hot_buckets > 0
    }
}

#[derive(Clone)]
struct MixState(u64);

impl BuildHasher for MixState {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher(self.0, 0)
    }
}

struct MixHasher(u64, u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.1
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.1 = fmix64(self.1 ^ u64::from(*b) ^ self.0);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.1 = fmix64(v ^ self.0);
    }
}

const LIST_BIT: u32 = 1 << 31;

/// One band's table: key → a single id, or (tag bit set) an index into `lists`.
#[derive(Clone)]
struct BandTable {
    map: HashMap<u64, u32, MixState>,
}

/// Band postings for many items: the candidate index shared by batch dedup,
/// document scans and the service engine.
///
/// Item ids are dense `u32` below 2³¹ chosen by the caller. Memory: one hash
/// map entry (16 bytes + control byte) per item per band, plus a list for each
/// bucket holding more than one item.
#[derive(Clone)]
pub struct LshIndex {
    params: LshParams,
    seed: u64,
    tables: Vec<BandTable>,
    lists: Vec<Vec<u32>>,
    free_lists: Vec<u32>,
    len: usize,
}

impl std::fmt::Debug for LshIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LshIndex").field("params", &self.params).field("len", &self.len).finish()
    }
}

/// Largest item id an [`LshIndex`] accepts.
pub const MAX_ITEM_ID: u32 = LIST_BIT - 1;

impl LshIndex {
    /// An empty index. `seed` is the band-key seed (recorded with the index).
    pub fn new(params: LshParams, seed: u64) -> LshIndex {
        let secret = std::collections::hash_map::RandomState::new().hash_one(0x006c_7368_u64);
        let tables = (0..params.bands).map(|_| BandTable { map: HashMap::with_hasher(MixState(secret)) }).collect();
        LshIndex { params, seed, tables, lists: Vec::new(), free_lists: Vec::new(), len: 0 }
    }

    /// The banding parameters.
    pub fn params(&self) -> LshParams {
        self.params
    }

    /// The band-key seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Number of items inserted and not removed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Band keys of a signature under this index's parameters.
    pub fn band_keys(&self, signature: &[u32]) -> Result<Vec<u64>> {
        let mut keys = Vec::with_capacity(self.params.bands as usize);
        band_keys_into(self.params, self.seed, signature, &mut keys)?;
        Ok(keys)
    }

    fn check_keys(&self, keys: &[u64]) -> Result<()> {
        if keys.len() != self.tables.len() {
            return Err(Error::incompatible(format!(
                "{} band keys for an index of {} bands",
                keys.len(),
                self.tables.len()
            )));
        }
        Ok(())
    }

    /// Adds `id` under its band `keys`. Inserting the same id twice is the
    /// caller's bug and makes it appear twice in buckets (harmless: queries
    /// de-duplicate).
    pub fn insert(&mut self, id: u32, keys: &[u64]) -> Result<()> {
        if id > MAX_ITEM_ID {
            return Err(Error::limit("item id", u64::from(MAX_ITEM_ID), u64::from(id)));
        }
        self.check_keys(keys)?;
        for (table, &key) in self.tables.iter_mut().zip(keys) {
            match table.map.get_mut(&key) {
                None => {
                    table.map.insert(key, id);
                }
                Some(slot) if *slot & LIST_BIT != 0 => self.lists[(*slot & !LIST_BIT) as usize].push(id),
                Some(slot) => {
                    let first = *slot;
                    let list_index = match self.free_lists.pop() {
                        Some(i) => {
                            self.lists[i as usize].extend([first, id]);
                            i
                        }
                        None => {
                            self.lists.push(vec![first, id]);
                            (self.lists.len() - 1) as u32
                        }
                    };
                    *slot = list_index | LIST_BIT;
                }
            }
        }
        self.len += 1;
        Ok(())
    }

    /// Removes `id` from the buckets of its band `keys` (the keys it was inserted with).
    pub fn remove(&mut self, id: u32, keys: &[u64]) -> Result<bool> {
        self.check_keys(keys)?;
        let mut found = false;
        for (table, &key) in self.tables.iter_mut().zip(keys) {
            let Some(slot) = table.map.get(&key).copied() else {
                continue;
            };
            if slot & LIST_BIT == 0 {
                if slot == id {
                    table.map.remove(&key);
                    found = true;
                }
                continue;
            }
            let li = (slot & !LIST_BIT) as usize;
            let list = &mut self.lists[li];
            if let Some(pos) = list.iter().position(|&x| x == id) {
                list.remove(pos);
                found = true;
            }
            if list.len() == 1 {
                let last = list[0];
                list.clear();
                list.shrink_to(4);
                self.free_lists.push(li as u32);
                table.map.insert(key, last);
            }
        }
        if found {
            self.len -= 1;
        }
        Ok(found)
    }

    /// Items sharing at least one band key with `keys`, bounded by `limits`.
    /// `exclude` (typically the querying item itself) is never returned.
    pub fn query(&self, keys: &[u64], exclude: Option<u32>, limits: QueryLimits) -> Result<Candidates> {
        self.query_filtered(keys, exclude, None, limits)
    }

    /// The candidates item `before` had just before it was inserted: only ids
    /// below `before` count, and caps apply as they did then. Requires that
    /// ids were inserted in increasing order (as [`crate::MemoryIndex`] does),
    /// so each bucket is sorted and its visible part is a prefix. Lets a batch
    /// insert a chunk first and then query all of it in parallel, with the
    /// same answers as querying before each insertion.
    pub fn query_before(&self, keys: &[u64], before: u32, limits: QueryLimits) -> Result<Candidates> {
        self.query_filtered(keys, None, Some(before), limits)
    }

    pub(crate) fn query_filtered(
        &self,
        keys: &[u64],
        exclude: Option<u32>,
        before: Option<u32>,
        limits: QueryLimits,
    ) -> Result<Candidates> {
        self.check_keys(keys)?;
        let mut out = Candidates::default();
        let mut seen: Vec<u32> = Vec::new();
        for (table, key) in self.tables.iter().zip(keys) {
            let Some(&slot) = table.map.get(key) else {
                continue;
            };
            if slot & LIST_BIT == 0 {
                if before.is_none_or(|b| slot < b) {
                    seen.push(slot);
                    out.entries_read += 1;
                }
                continue;
            }
            let list = &self.lists[(slot & !LIST_BIT) as usize];
            let visible = match before {
                None => &list[..],
                Some(b) => &list[..list.partition_point(|&x| x < b)],
            };
            let take = visible.len().min(limits.max_bucket_read);
            if visible.len() > limits.max_bucket_read {
                out.hot_buckets += 1;
            }
            seen.extend_from_slice(&visible[..take]);
            out.entries_read += take;
        }
        seen.sort_unstable();
        let mut ids: Vec<(u32, u16)> = Vec::new();
        for id in seen {
            if Some(id) == exclude {
                continue;
            }
            match ids.last_mut() {
                Some((last, n)) if *last == id => *n += 1,
                _ => ids.push((id, 1)),
            }
        }
        out.distinct = ids.len();
        if ids.len() > limits.max_candidates {
            out.over_cap = true;
            ids.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            ids.truncate(limits.max_candidates);
        } else {
            ids.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        }
        out.ids = ids;
        Ok(out)
    }

    /// Sizes of the largest buckets, for metrics: (band, key, size), largest first.
    pub fn largest_buckets(&self, top: usize) -> Vec<(u32, u64, usize)> {
        let mut all: Vec<(u32, u64, usize)> = Vec::new();
        for (band, table) in self.tables.iter().enumerate() {
            for (&key, &slot) in &table.map {
                if slot & LIST_BIT != 0 {
                    all.push((band as u32, key, self.lists[(slot & !LIST_BIT) as usize].len()));
                }
            }
        }
        all.sort_unstable_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        all.truncate(top);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: QueryLimits = QueryLimits { max_candidates: 100, max_bucket_read: 1000 };

    #[test]
    fn insert_query_remove() {
        let p = LshParams::new(4, 2).unwrap();
        let mut idx = LshIndex::new(p, 9);
        let a = idx.band_keys(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let b = idx.band_keys(&[1, 2, 0, 0, 0, 0, 7, 8]).unwrap();
        let c = idx.band_keys(&[9, 9, 9, 9, 9, 9, 9, 9]).unwrap();
        idx.insert(0, &a).unwrap();
        idx.insert(1, &b).unwrap();
        idx.insert(2, &c).unwrap();
        let got = idx.query(&a, Some(0), LIM).unwrap();
        assert_eq!(got.ids, vec![(1, 2)]);
        assert!(!got.is_partial());
        assert!(idx.remove(1, &b).unwrap());
        assert!(idx.query(&a, Some(0), LIM).unwrap().ids.is_empty());
        assert_eq!(idx.len(), 2);
    }

    #[test]
    fn caps_are_reported_not_silent() {
        let p = LshParams::new(2, 1).unwrap();
        let mut idx = LshIndex::new(p, 1);
        let keys = idx.band_keys(&[5, 5]).unwrap();
        for id in 0..50 {
            idx.insert(id, &keys).unwrap();
        }
        let got = idx.query(&keys, None, QueryLimits { max_candidates: 10, max_bucket_read: 20 }).unwrap();
        assert!(got.over_cap);
        assert_eq!(got.hot_buckets, 2);
        assert_eq!(got.ids.len(), 10);
        assert_eq!(got.distinct, 20);
        assert_eq!(got.entries_read, 40);
    }

    #[test]
    fn query_before_equals_querying_before_insertion() {
        let p = LshParams::new(3, 1).unwrap();
        let mut idx = LshIndex::new(p, 4);
        let lim = QueryLimits { max_candidates: 5, max_bucket_read: 7 };
        let sigs: Vec<Vec<u32>> = (0..60u32).map(|i| vec![i % 3, i % 5, i % 11]).collect();
        let mut then = Vec::new();
        for (i, s) in sigs.iter().enumerate() {
            let keys = idx.band_keys(s).unwrap();
            then.push(idx.query(&keys, None, lim).unwrap());
            idx.insert(i as u32, &keys).unwrap();
        }
        for (i, s) in sigs.iter().enumerate() {
            let keys = idx.band_keys(s).unwrap();
            assert_eq!(idx.query_before(&keys, i as u32, lim).unwrap(), then[i], "item {i}");
        }
    }

    #[test]
    fn keys_are_platform_independent() {
        let keys = LshIndex::new(LshParams::new(2, 2).unwrap(), 17).band_keys(&[1, 2, 3, 4]).unwrap();
        assert_eq!(keys[0], hash_u32s(&[1, 2], 17));
        assert_eq!(keys[1], hash_u32s(&[3, 4], 18));
    }

    #[test]
    fn wrong_key_count_is_an_error() {
        let mut idx = LshIndex::new(LshParams::new(2, 2).unwrap(), 1);
        assert!(idx.insert(0, &[1]).is_err());
        assert!(idx.band_keys(&[1, 2, 3]).is_err());
    }
}
