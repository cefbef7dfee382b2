//! A frozen copy of a candidate index's per-item data, for index images.

use super::{BANDED, LIVE};
use crate::hash::ContentHash;
use crate::pages::Pages;

/// A frozen copy of a [`CandidateIndex`]'s per-item data (see
/// [`CandidateIndex::view`]); postings are not copied: they are rebuilt
/// from the keys when an image is loaded.
#[derive(Debug, Clone)]
pub struct IndexView {
    pub(super) keys: Pages<u32>,
    pub(super) sketches: Pages<u8>,
    pub(super) hashes: Pages<[u8; 16]>,
    pub(super) flags: Pages<u8>,
}

/// One item of an [`IndexView`].
#[derive(Debug, Clone, Copy)]
pub struct ImageRow<'a> {
    /// Folded band keys (empty when the item has none).
    pub folded: &'a [u32],
    /// Sketch bytes (empty when the item has no band keys).
    pub sketch: &'a [u8],
    /// Content hash.
    pub content_hash: ContentHash,
}

impl IndexView {
    /// Ids in the view (live or removed).
    pub fn slots(&self) -> u32 {
        self.flags.len() as u32
    }

    /// Item `id` as [`CandidateIndex::insert_row`] takes it, when it was live.
    pub fn row(&self, id: u32) -> Option<ImageRow<'_>> {
        let i = id as usize;
        if i >= self.flags.len() {
            return None;
        }
        let f = self.flags.row(i)[0];
        if f & LIVE == 0 {
            return None;
        }
        let banded = f & BANDED != 0;
        Some(ImageRow {
            folded: if banded { self.keys.row(i) } else { &[] },
            sketch: if banded { self.sketches.row(i) } else { &[] },
            content_hash: ContentHash(self.hashes.row(i)[0]),
        })
    }
}
