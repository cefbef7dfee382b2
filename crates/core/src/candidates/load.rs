//! Items from image rows: one at a time ([`CandidateIndex::insert_row`])
//! or many at once ([`RowLoader`], what a restart and a batch chunk use).

use super::{fold_key, posting_keys, CandidateIndex, ItemKeys, BANDED, LIVE, MAX_ITEM_ID};
use crate::error::{Error, Result};
use crate::hash::ContentHash;
use crate::lsh::postings::Table;

/// Rows filed in the posting tables per table and per round of a
/// [`RowLoader`] (8 bytes each, `bands + 1` tables: ~80 MB at 18 bands;
/// small in tests, so that they load over several rounds).
const LOAD_ROUND: usize = if cfg!(test) { 700 } else { 1 << 19 };

/// Loads many image rows into a [`CandidateIndex`]: each row's item is
/// appended at once (ids in row order, as [`CandidateIndex::insert_row`]
/// gives them), and its postings are filed in rounds of [`LOAD_ROUND`]
/// rows, each table's in the order of its slots
/// (`Table::insert_sorted`) — the same buckets, in the same order, as
/// row-by-row inserts, at a fraction of the cache misses once the tables
/// outgrow the caches. Dropping the loader files what is left, so the
/// index is whole whenever the loader is gone.
#[derive(Debug)]
pub struct RowLoader<'a> {
    index: &'a mut CandidateIndex,
    /// `(key, id)` per table, not yet filed.
    pending: Vec<Vec<(u32, u32)>>,
    queued: usize,
}

impl RowLoader<'_> {
    /// Appends an item from an image row, as [`CandidateIndex::insert_row`].
    pub fn insert_row(&mut self, folded: &[u32], sketch: &[u8], content_hash: ContentHash) -> Result<u32> {
        let id = self.index.append_row(folded, sketch, content_hash)?;
        for (table, key) in posting_keys(self.pending.len() - 1, folded, &content_hash) {
            self.pending[table].push((key, id));
        }
        self.queued += 1;
        if self.queued >= LOAD_ROUND {
            self.file();
        }
        Ok(id)
    }

    /// Adds an item and returns its id, as [`CandidateIndex::insert`]
    /// would; its postings are filed with the rest.
    pub fn insert(&mut self, keys: ItemKeys<'_>) -> Result<u32> {
        let (folded, sketch) = self.index.checked_row(&keys)?;
        self.insert_row(&folded, &sketch, keys.content_hash)
    }

    /// Files every queued posting now, as one job per posting table handed
    /// to `run`, which may run them on several threads at once: the tables
    /// share nothing, and each job files its table's postings in id order,
    /// so the buckets come out as filing them one by one would. A job `run`
    /// leaves undone is filed when the loader is dropped.
    pub fn file_with(&mut self, run: impl FnOnce(Vec<Filing<'_>>)) {
        let jobs = self
            .index
            .postings
            .tables_mut()
            .iter_mut()
            .zip(&mut self.pending)
            .filter(|(_, pairs)| !pairs.is_empty())
            .map(|(table, pairs)| Filing { table, pairs })
            .collect();
        run(jobs);
        self.queued = 0;
    }

    fn file(&mut self) {
        self.file_with(|jobs| jobs.into_iter().for_each(Filing::run));
    }
}

/// One posting table's share of a [`RowLoader`]'s filing (see
/// [`RowLoader::file_with`]); nothing is filed until it runs.
pub struct Filing<'a> {
    table: &'a mut Table,
    pairs: &'a mut Vec<(u32, u32)>,
}

impl std::fmt::Debug for Filing<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filing").field("postings", &self.pairs.len()).finish_non_exhaustive()
    }
}

impl Filing<'_> {
    /// Files the table's queued postings.
    pub fn run(self) {
        self.table.insert_sorted(self.pairs);
        self.pairs.clear();
    }
}

impl Drop for RowLoader<'_> {
    fn drop(&mut self) {
        // Not while a filing job unwinds: its table's postings are part
        // filed, and filing them again would list ids twice.
        if !std::thread::panicking() {
            self.file();
        }
    }
}

impl CandidateIndex {
    /// Room for `additional` more items in the posting tables without
    /// growing them: a restart loading a known number of rows rehashes
    /// nothing on the way.
    pub fn reserve(&mut self, additional: usize) {
        self.postings.reserve(additional);
    }

    /// Appends an item from an image row (see [`IndexView::row`]): folded
    /// band keys (empty when it has none), sketch and content hash, as they
    /// were stored. Returns its id.
    pub fn insert_row(&mut self, folded: &[u32], sketch: &[u8], content_hash: ContentHash) -> Result<u32> {
        let id = self.append_row(folded, sketch, content_hash)?;
        for (table, key) in posting_keys(self.lsh.bands as usize, folded, &content_hash) {
            self.postings.insert(table, key, id);
        }
        Ok(id)
    }

    /// A loader of many image rows at once (see [`RowLoader`]).
    pub fn loader(&mut self) -> RowLoader<'_> {
        let tables = self.lsh.bands as usize + 1;
        RowLoader { index: self, pending: vec![Vec::new(); tables], queued: 0 }
    }

    /// Appends an image row's item — id, keys, sketch, hash, flags —
    /// without filing it in the posting tables (the caller does).
    fn append_row(&mut self, folded: &[u32], sketch: &[u8], content_hash: ContentHash) -> Result<u32> {
        let bands = self.lsh.bands as usize;
        if !folded.is_empty() && (folded.len() != bands || sketch.len() != self.sketches.width()) {
            return Err(Error::incompatible(format!(
                "an image row of {} keys and {} sketch bytes for an index of {bands} bands and {}",
                folded.len(),
                sketch.len(),
                self.sketches.width()
            )));
        }
        let id = self.flags.len();
        let id = u32::try_from(id)
            .ok()
            .filter(|&i| i <= MAX_ITEM_ID)
            .ok_or_else(|| Error::limit("items per index", u64::from(MAX_ITEM_ID), id as u64))?;
        let mut flags = LIVE;
        if folded.is_empty() {
            self.keys.push(&[]);
            self.sketches.push(&[]);
        } else {
            flags |= BANDED;
            self.keys.push(folded);
            self.sketches.push(sketch);
        }
        self.hashes.push(&[content_hash.0]);
        self.flags.push(&[flags]);
        self.live += 1;
        Ok(id)
    }

    /// The row [`CandidateIndex::insert_row`] takes for an item with these
    /// band keys and signature: folded keys and sketch (both empty without keys).
    pub fn row_of(&self, band_keys: &[u64], signature: &[u32]) -> (Vec<u32>, Vec<u8>) {
        if band_keys.is_empty() {
            return (Vec::new(), Vec::new());
        }
        (band_keys.iter().map(|&k| fold_key(k)).collect(), self.sketch_of(signature))
    }
}
