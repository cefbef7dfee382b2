//! Posting tables: for each of several tables, key → the ids filed under it.
//!
//! One `HashMap<u64, u32>` per table. The value is either the single id in
//! the bucket or, with the tag bit set, an index into a shared arena of id
//! lists: most buckets hold one item, so most cost one map entry. Lists keep
//! ids in insertion order (ascending when ids are handed out in increasing
//! order, as [`crate::CandidateIndex`] does), so "ids below `b`" is a prefix.
//!
//! Keys are mixed with a per-process secret before they reach the map, so
//! crafted keys cannot degrade it; the mixing never reaches disk.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use crate::hash::fmix64;
use crate::lsh::screen::Screen;

/// Tag bit of a map value that points into the list arena.
pub(crate) const LIST_BIT: u32 = 1 << 31;

#[derive(Clone)]
pub(crate) struct MixState(u64);

impl BuildHasher for MixState {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher(self.0, 0)
    }
}

pub(crate) struct MixHasher(u64, u64);

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
    fn write_u32(&mut self, v: u32) {
        self.1 = fmix64(u64::from(v) ^ self.0);
    }
}

/// Several posting tables, each with its own list arena and screen, so
/// that the tables can be filled at the same time ([`Postings::tables_mut`]).
#[derive(Clone)]
pub(crate) struct Postings {
    tables: Vec<Table>,
}

/// One posting table: key → the ids filed under it.
#[derive(Clone)]
pub(crate) struct Table {
    map: HashMap<u32, u32, MixState>,
    lists: Vec<Vec<u32>>,
    free_lists: Vec<u32>,
    /// Its membership screen ([`Screen`]), if the tables have them.
    screen: Option<Screen>,
    /// Bits per key of the screen; 0 without.
    screen_bits: u32,
    /// Bit `id` is set when `id` was filed under a key that already held
    /// ids. Ids are filed in increasing order under each key, so a clear
    /// bit means no smaller id shares the item's bucket, ever: a batch's
    /// query of an item against the items before it skips that bucket.
    joined: Vec<u64>,
}

/// What a table's screen did for one bucket read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Screened {
    /// The table has no screen: it was read.
    Unscreened,
    /// The screen said "possibly": the table was read.
    Passed,
    /// The screen said "definitely not": the table was not read.
    Skipped,
}

impl Postings {
    /// `tables` empty tables.
    pub(crate) fn new(tables: usize) -> Postings {
        let secret = std::collections::hash_map::RandomState::new().hash_one(0x006c_7368_u64);
        let table = Table {
            map: HashMap::with_hasher(MixState(secret)),
            lists: Vec::new(),
            free_lists: Vec::new(),
            screen: None,
            screen_bits: 0,
            joined: Vec::new(),
        };
        Postings { tables: vec![table; tables] }
    }

    /// Puts a membership screen of `bits_per_key` bits in front of every
    /// table (none for 0), built from the keys already filed.
    pub(crate) fn set_screen(&mut self, bits_per_key: u32) {
        for t in &mut self.tables {
            t.screen_bits = bits_per_key;
            t.screen = (bits_per_key != 0).then(|| Screen::rebuilt(t.map.keys().copied(), bits_per_key));
        }
    }

    /// Room for `additional` more keys in every table without growing (a
    /// restart knows how many rows it loads: no table rehashes on the way).
    pub(crate) fn reserve(&mut self, additional: usize) {
        for t in &mut self.tables {
            t.map.reserve(additional);
        }
    }

    /// Files `id` (below [`LIST_BIT`]) under `key` in `table`, after the ids
    /// already there (see [`Table::insert`]).
    pub(crate) fn insert(&mut self, table: usize, key: u32, id: u32) {
        self.tables[table].insert(key, id);
    }

    /// Every table, each to be filled on its own (at the same time, by
    /// several threads: they share nothing).
    pub(crate) fn tables_mut(&mut self) -> &mut [Table] {
        &mut self.tables
    }

    /// Removes `id` from `key`'s bucket in `table`; false when it was not there.
    pub(crate) fn remove(&mut self, table: usize, key: u32, id: u32) -> bool {
        self.tables[table].remove(key, id)
    }

    /// The ids filed under `key` in `table`, in insertion order, through
    /// the table's screen when it has one: a key the screen has never seen
    /// is answered without reading the table.
    pub(crate) fn screened_bucket(&self, table: usize, key: u32) -> (&[u32], Screened) {
        let t = &self.tables[table];
        let screened = match &t.screen {
            None => Screened::Unscreened,
            Some(s) if s.may_contain(key) => Screened::Passed,
            Some(_) => return (&[], Screened::Skipped),
        };
        (t.bucket(key), screened)
    }

    /// Whether `id` was filed in `table` under a key that already held
    /// ids; false means its bucket holds no smaller id.
    #[inline]
    pub(crate) fn joined(&self, table: usize, id: u32) -> bool {
        let joined = &self.tables[table].joined;
        joined.get(id as usize / 64).is_some_and(|w| w >> (id % 64) & 1 != 0)
    }

    /// The largest buckets of tables `0..tables` as `(table, key, size)`,
    /// largest first (ties by table, then key).
    pub(crate) fn largest(&self, tables: usize, top: usize) -> Vec<(u32, u32, usize)> {
        let mut all: Vec<(u32, u32, usize)> = Vec::new();
        for (i, t) in self.tables.iter().enumerate().take(tables) {
            for (&key, &slot) in &t.map {
                if slot & LIST_BIT != 0 {
                    all.push((i as u32, key, t.lists[(slot & !LIST_BIT) as usize].len()));
                }
            }
        }
        all.sort_unstable_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        all.truncate(top);
        all
    }

    /// How many buckets of the first `tables` tables hold 1, 2–3, 4–7, ...
    /// entries: element `i` counts the buckets of size in `[2^i, 2^(i+1))`.
    pub(crate) fn size_histogram(&self, tables: usize) -> Vec<u64> {
        let mut bins = vec![0u64; 33];
        for t in self.tables.iter().take(tables) {
            for &slot in t.map.values() {
                let size = if slot & LIST_BIT != 0 { t.lists[(slot & !LIST_BIT) as usize].len() } else { 1 };
                if size > 0 {
                    bins[size.ilog2() as usize] += 1;
                }
            }
        }
        while bins.len() > 1 && bins.last() == Some(&0) {
            bins.pop();
        }
        bins
    }

    /// Heap bytes held, from capacities: hashbrown keeps `buckets` slots of
    /// 8 bytes (key and value) plus one control byte each.
    pub(crate) fn heap_bytes(&self) -> u64 {
        let tables: usize = self
            .tables
            .iter()
            .map(|t| {
                let buckets = crate::hash::map_slots(t.map.capacity());
                let lists: usize = t.lists.iter().map(|l| 24 + l.capacity() * 4).sum();
                buckets * 9 + lists + t.free_lists.capacity() * 4 + t.joined.capacity() * 8
            })
            .sum();
        tables as u64 + self.screen_bytes()
    }

    /// Heap bytes of the screens.
    pub(crate) fn screen_bytes(&self) -> u64 {
        self.tables.iter().filter_map(|t| t.screen.as_ref()).map(Screen::heap_bytes).sum()
    }
}

impl Table {
    /// Files `id` (below [`LIST_BIT`]) under `key`, after the ids already
    /// there. One probe of the table (`entry`): at millions of keys each
    /// probe is a cache miss.
    pub(crate) fn insert(&mut self, key: u32, id: u32) {
        debug_assert!(id < LIST_BIT);
        let Table { map, lists, free_lists, screen, screen_bits, joined } = self;
        match map.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(id);
                if let Some(screen) = screen {
                    screen.insert(key);
                    if screen.is_full() {
                        *screen = Screen::rebuilt(map.keys().copied(), *screen_bits);
                    }
                }
            }
            std::collections::hash_map::Entry::Occupied(mut o) => {
                let word = id as usize / 64;
                if joined.len() <= word {
                    joined.resize(word + 1, 0);
                }
                joined[word] |= 1 << (id % 64);
                let slot = o.get_mut();
                if *slot & LIST_BIT != 0 {
                    lists[(*slot & !LIST_BIT) as usize].push(id);
                    return;
                }
                let first = *slot;
                let list_index = match free_lists.pop() {
                    Some(i) => {
                        lists[i as usize].extend([first, id]);
                        i
                    }
                    None => {
                        lists.push(vec![first, id]);
                        (lists.len() - 1) as u32
                    }
                };
                *slot = list_index | LIST_BIT;
            }
        }
    }

    /// Files many `(key, id)` pairs — ids ascending as given, each id once
    /// — exactly as inserting them one by one would, but in the order of
    /// the table slots they land in: many inserts into a table far larger
    /// than the caches then walk it once instead of jumping at random (a
    /// restart files every row of an index image this way, a batch each
    /// chunk). Equal keys keep their ids' order, so every bucket lists its
    /// ids as an insert-by-insert load would.
    pub(crate) fn insert_sorted(&mut self, pairs: &[(u32, u32)]) {
        // Room first, so the table does not grow (and move every slot)
        // while it is being filed.
        self.map.reserve(pairs.len());
        // A slot is the hash's low bits. (The mask only orders the filing
        // for locality: a slot count that is off, after removals say, files
        // the same buckets.)
        let mask = crate::hash::map_slots(self.map.capacity()).max(1) as u64 - 1;
        let hasher = self.map.hasher().clone();
        let mut order: Vec<(u64, u32, u32)> = pairs.iter().map(|&(k, id)| (hasher.hash_one(k) & mask, id, k)).collect();
        order.sort_unstable();
        for (_, id, key) in order {
            self.insert(key, id);
        }
    }

    /// Removes `id` from `key`'s bucket; false when it was not there.
    fn remove(&mut self, key: u32, id: u32) -> bool {
        let Some(slot) = self.map.get(&key).copied() else {
            return false;
        };
        if slot & LIST_BIT == 0 {
            if slot == id {
                self.map.remove(&key);
                return true;
            }
            return false;
        }
        let li = (slot & !LIST_BIT) as usize;
        let list = &mut self.lists[li];
        let found = match list.iter().position(|&x| x == id) {
            Some(pos) => {
                list.remove(pos);
                true
            }
            None => false,
        };
        if list.len() == 1 {
            let last = list[0];
            list.clear();
            list.shrink_to(4);
            self.free_lists.push(li as u32);
            self.map.insert(key, last);
        }
        found
    }

    /// The ids filed under `key`, in insertion order.
    fn bucket(&self, key: u32) -> &[u32] {
        match self.map.get(&key) {
            None => &[],
            Some(slot) if *slot & LIST_BIT != 0 => &self.lists[(*slot & !LIST_BIT) as usize],
            Some(slot) => std::slice::from_ref(slot),
        }
    }
}
