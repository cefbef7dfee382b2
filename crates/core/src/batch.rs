//! The batch decision rule, in one place: `neardup dedup` and the Python
//! package's `neardup.dedup` both call [`Greedy`].
//!
//! Items are decided in input order. An item is dropped only when it
//! verifies at or above the threshold against an earlier *kept* item, which
//! it names as `duplicate_of`; so every dropped item has a kept near
//! duplicate. When the candidate cap cut close to the threshold and none of
//! the candidates verified is kept, the rule looks further among the kept
//! items: first in the cut candidates the query held in reserve, then, only
//! if the reserve was cut too, by asking the index again among the kept
//! items it has not tried. A kept item whose search stayed partial even
//! then is `unresolved`: its uniqueness is unproven.

use crate::candidates::{Candidate, CandidateSet};
use crate::index::{Match, MemoryIndex};

/// What the rule asks of an index while it decides: the in-memory
/// [`MemoryIndex`], or a batch's index kept on disk. Both answer by the
/// same rules ([`crate::CandidateIndex::select`], [`crate::verify_pair`]).
pub trait Lookup {
    /// Exact scores of item `item` against `candidates`, those at or above
    /// the threshold, best first (ties by lower id).
    fn verify_item(&self, item: u32, candidates: &[Candidate]) -> Vec<Match>;
    /// The candidates of item `item` among the items before it that `keep`
    /// accepts (applied before ranking and the cap).
    fn candidates_before_where(&self, item: u32, keep: &dyn Fn(u32) -> bool) -> CandidateSet;
}

impl Lookup for MemoryIndex {
    fn verify_item(&self, item: u32, candidates: &[Candidate]) -> Vec<Match> {
        MemoryIndex::verify_item(self, item, candidates, self.params().threshold())
    }
    fn candidates_before_where(&self, item: u32, keep: &dyn Fn(u32) -> bool) -> CandidateSet {
        MemoryIndex::candidates_before_where(self, item, keep)
    }
}

/// The rule's state: which items (by [`MemoryIndex`] id) were kept.
#[derive(Debug, Clone, Default)]
pub struct Greedy {
    kept: Vec<bool>,
}

/// What the rule decided for one item.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// Kept (no earlier kept item verifies against it).
    pub kept: bool,
    /// The best kept match, when dropped.
    pub duplicate_of: Option<Match>,
    /// Every verified match at or above the threshold: those of the first
    /// query, best first, then those the search further found.
    pub matches: Vec<Match>,
    /// The candidate cap or a hot bucket cut the first query.
    pub capped: bool,
    /// The search stayed partial even among the kept items.
    pub unresolved: bool,
    /// The cap cut, and the lowest-ranked candidate it let in was a match:
    /// the item may have more near duplicates than the cap, and its list
    /// of matches is incomplete (its decision is not).
    pub saturated: bool,
}

impl Greedy {
    /// An empty rule.
    pub fn new() -> Greedy {
        Greedy::default()
    }

    /// Whether item `id` was kept (false for one not decided).
    pub fn is_kept(&self, id: u32) -> bool {
        self.kept.get(id as usize).copied().unwrap_or(false)
    }

    /// Records item `id`'s outcome decided elsewhere (an item of a saved
    /// index, loaded before the input).
    pub fn set_kept(&mut self, id: u32, kept: bool) {
        let i = id as usize;
        if self.kept.len() <= i {
            self.kept.resize(i + 1, false);
        }
        self.kept[i] = kept;
    }

    /// Which items were kept, by id.
    pub fn kept(&self) -> &[bool] {
        &self.kept
    }

    /// The first look at inserted item `item`: its candidates among the
    /// items inserted before it, verified. Independent of the rule's state,
    /// so a chunk's looks may run in parallel before it is decided.
    pub fn look(index: &MemoryIndex, item: u32) -> (CandidateSet, Vec<Match>) {
        let cands = index.candidates_before(item);
        let matches = index.verify_item(item, &cands.ids, index.params().threshold());
        (cands, matches)
    }

    /// Decides inserted item `item` from its first [`Greedy::look`]; items
    /// must be decided in input order. `tried` is called with the further
    /// candidates the search verified (for a caller that lists candidate
    /// pairs).
    pub fn decide<L: Lookup + ?Sized>(
        &mut self,
        index: &L,
        item: u32,
        (cands, mut matches): (CandidateSet, Vec<Match>),
        tried: &mut dyn FnMut(&[Candidate]),
    ) -> Decided {
        let capped = cands.over_cap || cands.hot_buckets > 0;
        let saturated = cands.over_cap && cands.ids.last().is_some_and(|c| matches.iter().any(|m| m.id == c.id));
        let mut duplicate_of = matches.iter().find(|m| self.is_kept(m.id)).copied();
        let mut unresolved = cands.is_partial();
        if duplicate_of.is_none() && cands.cut_close {
            // The cap may have cut a kept near duplicate: look further among
            // the kept items, first in the cut candidates the query kept in
            // reserve, and ask the index again only if the reserve itself
            // was cut.
            let reserve: Vec<Candidate> = cands.close_cut.iter().copied().filter(|c| self.is_kept(c.id)).collect();
            let mut found = index.verify_item(item, &reserve);
            tried(&reserve);
            unresolved = cands.hot_buckets > 0 || cands.close_cut_truncated;
            if found.is_empty() && cands.close_cut_truncated {
                let mut seen: Vec<u32> = cands.ids.iter().chain(&cands.close_cut).map(|c| c.id).collect();
                seen.sort_unstable();
                let keep = |id: u32| self.is_kept(id) && seen.binary_search(&id).is_err();
                let again = index.candidates_before_where(item, &keep);
                found = index.verify_item(item, &again.ids);
                tried(&again.ids);
                unresolved = cands.hot_buckets > 0 || again.is_partial();
            }
            duplicate_of = found.first().copied();
            if duplicate_of.is_some() {
                unresolved = false;
            }
            matches.extend(found);
        }
        let kept = duplicate_of.is_none();
        self.set_kept(item, kept);
        Decided { kept, duplicate_of, matches, capped, unresolved, saturated }
    }
}
