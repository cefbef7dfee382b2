//! The item directory of a tenant: which slot of the candidate index holds
//! which item id, in about 20 bytes per item.
//!
//! Ids are stored once, back to back, in 1 MiB pages (an id never spans two
//! pages); each slot has one packed `u64` locating its id. A live id is
//! found through a map from a 32-bit hash of the id to its slot, confirmed
//! against the stored bytes; the rare live ids whose hash collides with
//! another live id's go to a small overflow map keyed by the id itself.
//! Slots of removed items keep their bytes (the candidate index says they
//! are dead) until the tenant is rebuilt or reloaded.
//!
//! Full pages are shared (`Arc`), so [`Directory::view`] is cheap and
//! consistent, like [`neardup_core::Pages::view`].

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use neardup_core::Pages;

/// Bytes per id page.
const PAGE_BYTES: usize = 1 << 20;

/// Slot → id bytes, in shared pages.
#[derive(Debug, Clone, Default)]
struct Arena {
    full: Vec<Arc<[u8]>>,
    tail: Vec<u8>,
}

impl Arena {
    /// Stores `id` and returns its packed location: page (32 bits), offset
    /// (20 bits), length (12 bits).
    fn push(&mut self, id: &[u8]) -> u64 {
        debug_assert!(id.len() < 1 << 12);
        if self.tail.len() + id.len() > PAGE_BYTES {
            let page: Arc<[u8]> = std::mem::take(&mut self.tail).into();
            self.full.push(page);
        }
        if self.tail.capacity() == 0 {
            self.tail.reserve_exact(PAGE_BYTES);
        }
        let at = (self.full.len() as u64) << 32 | (self.tail.len() as u64) << 12 | id.len() as u64;
        self.tail.extend_from_slice(id);
        at
    }

    fn get(&self, at: u64) -> &[u8] {
        let (page, off, len) = ((at >> 32) as usize, ((at >> 12) & 0xF_FFFF) as usize, (at & 0xFFF) as usize);
        let bytes = self.full.get(page).map_or(&self.tail[..], |p| &p[..]);
        &bytes[off..off + len]
    }

    fn heap_bytes(&self) -> u64 {
        (self.full.len() * (PAGE_BYTES + 16) + self.tail.capacity()) as u64
    }
}

/// Item ids of a tenant's slots, and the live ids' slots.
#[derive(Debug, Clone)]
pub(crate) struct Directory {
    arena: Arena,
    at: Pages<u64>,
    by_hash: HashMap<u32, u32, IdentityState>,
    overflow: HashMap<Box<str>, u32>,
    secret: std::collections::hash_map::RandomState,
}

/// The map keys are already hashes (seeded per process): no second hash.
#[derive(Debug, Clone, Default)]
struct IdentityState;

impl BuildHasher for IdentityState {
    type Hasher = Identity;
    fn build_hasher(&self) -> Identity {
        Identity(0)
    }
}

#[derive(Debug)]
struct Identity(u64);

impl std::hash::Hasher for Identity {
    fn finish(&self) -> u64 {
        // Spread the 32 bits over the 64 hashbrown uses (top bits pick the group).
        self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0 << 8 | u64::from(b);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v);
    }
}

impl Directory {
    pub(crate) fn new() -> Directory {
        Directory {
            arena: Arena::default(),
            at: Pages::new(1),
            by_hash: HashMap::default(),
            overflow: HashMap::new(),
            secret: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Room for `additional` more live ids without growing the id map.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.by_hash.reserve(additional);
    }

    fn hash(&self, id: &str) -> u32 {
        self.secret.hash_one(id) as u32
    }

    /// Slots handed out (live or not).
    pub(crate) fn slots(&self) -> u32 {
        self.at.len() as u32
    }

    /// The id stored for `slot` (live or not).
    pub(crate) fn id(&self, slot: u32) -> Option<&str> {
        if slot as usize >= self.at.len() {
            return None;
        }
        std::str::from_utf8(self.arena.get(self.at.row(slot as usize)[0])).ok()
    }

    /// The slot of a live id.
    pub(crate) fn slot_of(&self, id: &str) -> Option<u32> {
        if let Some(&slot) = self.by_hash.get(&self.hash(id)) {
            if self.id(slot) == Some(id) {
                return Some(slot);
            }
        }
        self.overflow.get(id).copied()
    }

    /// Records `id` at `slot`, the next slot (`slots()`); the id must not be live.
    pub(crate) fn insert(&mut self, id: &str, slot: u32) {
        debug_assert_eq!(slot, self.slots());
        let at = self.arena.push(id.as_bytes());
        self.at.push(&[at]);
        let h = self.hash(id);
        match self.by_hash.get(&h) {
            Some(_) => {
                self.overflow.insert(id.into(), slot);
            }
            None => {
                self.by_hash.insert(h, slot);
            }
        }
    }

    /// Forgets the live id `id`; returns its slot.
    pub(crate) fn remove(&mut self, id: &str) -> Option<u32> {
        let h = self.hash(id);
        if let Some(&slot) = self.by_hash.get(&h) {
            if self.id(slot) == Some(id) {
                self.by_hash.remove(&h);
                return Some(slot);
            }
        }
        self.overflow.remove(id)
    }

    /// A consistent copy of the slot → id table as it is now (cheap: the
    /// full pages are shared).
    pub(crate) fn view(&self) -> DirectoryView {
        DirectoryView { arena: self.arena.clone(), at: self.at.view() }
    }

    /// Heap bytes held, from capacities.
    pub(crate) fn heap_bytes(&self) -> u64 {
        let buckets = neardup_core::map_slots(self.by_hash.capacity());
        let overflow: usize = self.overflow.keys().map(|k| k.len() + 40).sum();
        self.arena.heap_bytes() + self.at.heap_bytes() + (buckets * 9 + overflow) as u64
    }
}

/// A frozen slot → id table (see [`Directory::view`]).
#[derive(Debug, Clone)]
pub(crate) struct DirectoryView {
    arena: Arena,
    at: Pages<u64>,
}

impl DirectoryView {
    /// The id of `slot`.
    pub(crate) fn id(&self, slot: u32) -> Option<&str> {
        if slot as usize >= self.at.len() {
            return None;
        }
        std::str::from_utf8(self.arena.get(self.at.row(slot as usize)[0])).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_slots_and_collisions() {
        let mut d = Directory::new();
        let n = 300_000u32;
        for i in 0..n {
            d.insert(&format!("item-{i}"), i);
        }
        // 300k ids in a 32-bit hash space collide about ten times.
        for i in (0..n).step_by(997) {
            assert_eq!(d.slot_of(&format!("item-{i}")), Some(i));
            assert_eq!(d.id(i), Some(format!("item-{i}").as_str()));
        }
        assert_eq!(d.slot_of("nope"), None);
        let view = d.view();
        for i in (0..n).step_by(3) {
            assert_eq!(d.remove(&format!("item-{i}")), Some(i));
        }
        assert_eq!(d.remove("item-0"), None);
        for i in 0..n {
            let want = if i % 3 == 0 { None } else { Some(i) };
            assert_eq!(d.slot_of(&format!("item-{i}")), want, "{i}");
        }
        // Removed slots keep their bytes; a re-inserted id gets a new slot;
        // the view predates it.
        assert_eq!(d.id(3), Some("item-3"));
        d.insert("item-3", n);
        assert_eq!(d.slot_of("item-3"), Some(n));
        assert_eq!(view.id(n - 1), Some(format!("item-{}", n - 1).as_str()));
        assert!(view.id(n).is_none());
    }

    #[test]
    fn long_ids_fill_pages_without_spanning_them() {
        let mut d = Directory::new();
        let id = "x".repeat(256);
        let n = (PAGE_BYTES / 256) as u32 * 3 + 5;
        for i in 0..n {
            let mut s = id.clone();
            s.replace_range(..10, &format!("{i:010}"));
            d.insert(&s, i);
        }
        for i in [0, 4095, 4096, 4097, n - 1] {
            assert!(d.id(i).unwrap().starts_with(&format!("{i:010}")), "{i}");
        }
    }
}
