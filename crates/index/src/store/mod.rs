//! Item records behind a [`Store`] trait.
//!
//! The store keeps each tenant's [`ItemRecord`]s (canonical features,
//! signature, metadata, optionally content) and, per tenant, the log sequence
//! number up to which its store effects have been applied. Band postings are
//! not stored: they are derived state, rebuilt in memory on open.
//!
//! The store need not be durable on its own: the command log is the source
//! of truth. On open, a tenant's store contents are kept when their applied
//! LSN is at least the newest snapshot's; otherwise the tenant is reloaded
//! from the snapshot, and either way the log tail is re-applied.
//!
//! Implementations: [`MemStore`] (RAM) and [`FjallStore`] (embedded LSM).
//! A distributed backend implements the same trait; [`tests::suite`] is the
//! one test suite every implementation runs.

use std::fmt;
use std::ops::ControlFlow;

use crate::error::Result;
use crate::item::ItemRecord;

#[cfg(any(test, feature = "fault-injection"))]
mod faulty;
mod fjall;
mod mem;

pub use self::fjall::FjallStore;
#[cfg(any(test, feature = "fault-injection"))]
pub use faulty::{Faults, FaultyStore};
pub use mem::MemStore;

/// Puts and deletes applied atomically, together with the applied LSN.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StoreBatch {
    /// Records to write (replacing any with the same item id).
    pub puts: Vec<ItemRecord>,
    /// Item ids to delete.
    pub deletes: Vec<String>,
}

/// A frozen copy of one tenant's records (see [`Store::view`]).
pub trait StoreView: Send {
    /// Calls `f` with every record, in item id (byte) order, until it breaks.
    fn scan(&self, f: &mut dyn FnMut(ItemRecord) -> Result<ControlFlow<()>>) -> Result<()>;
}

/// Where item records live.
pub trait Store: Send + Sync + fmt::Debug {
    /// Backend name for errors and stats (`memory`, `fjall`).
    fn backend(&self) -> &'static str;

    /// The record of `item_id` in `tenant`.
    fn get(&self, tenant: &str, item_id: &str) -> Result<Option<ItemRecord>>;

    /// Applies `batch` and records `lsn` as applied, atomically: after a
    /// crash either all of it is visible or none.
    fn apply(&self, tenant: &str, batch: StoreBatch, lsn: u64) -> Result<()>;

    /// Calls `f` with the records of `tenant` in item id (byte) order,
    /// starting just after `after` (from the first when `None`), until `f`
    /// breaks or the records end. An error from `f` or from reading stops
    /// the scan and is returned.
    fn scan(
        &self,
        tenant: &str,
        after: Option<&str>,
        f: &mut dyn FnMut(ItemRecord) -> Result<ControlFlow<()>>,
    ) -> Result<()>;

    /// A consistent, read-only copy of `tenant`'s records as they are now;
    /// later writes do not show in it, and it blocks none. Cheap: a
    /// persistent-map clone in RAM, an MVCC snapshot in fjall.
    fn view(&self, tenant: &str) -> Result<Box<dyn StoreView>>;

    /// True when the store keeps its records across restarts by itself
    /// (after [`Store::persist`]), so a checkpoint need not copy them.
    fn is_persistent(&self) -> bool;

    /// The LSN of the last batch applied to `tenant`, if any.
    fn applied_lsn(&self, tenant: &str) -> Result<Option<u64>>;

    /// Removes every record of `tenant` and its applied LSN.
    fn clear_tenant(&self, tenant: &str) -> Result<()>;

    /// Makes everything applied so far durable (a no-op in RAM).
    fn persist(&self) -> Result<()>;

    /// Bytes the store itself holds in memory now, beyond what the tenants
    /// count (fjall: its block cache and memtables); 0 where unknown.
    fn resident_bytes(&self) -> u64 {
        0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::decision::DecisionState;

    pub(crate) fn record(id: &str, lsn: u64) -> ItemRecord {
        ItemRecord {
            item_id: id.into(),
            epoch: 1,
            lsn,
            content_hash: [lsn as u8; 16],
            tokens: 3,
            features: vec![1, 2, lsn + 3],
            signature: vec![7, 8],
            degraded_shingles: None,
            media_type: "text/plain".into(),
            source_time: Some(5),
            content_bytes: 10,
            content: Some("x y z".into()),
            tombstone: None,
            decision: DecisionState::Distinct,
            features_at: crate::item::FeaturesAt::Here,
            packed: crate::item::PackedContent::default(),
            note: None,
        }
    }

    fn ids(s: &dyn Store, tenant: &str) -> Vec<String> {
        ids_after(s, tenant, None, usize::MAX)
    }

    fn ids_after(s: &dyn Store, tenant: &str, after: Option<&str>, limit: usize) -> Vec<String> {
        let mut out = Vec::new();
        s.scan(tenant, after, &mut |r| {
            out.push(r.item_id);
            Ok(if out.len() >= limit { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
        })
        .unwrap();
        out
    }

    /// The shared suite: every implementation must pass it.
    pub(crate) fn suite(s: &dyn Store) {
        assert_eq!(s.applied_lsn("t1").unwrap(), None);
        assert_eq!(s.get("t1", "a").unwrap(), None);
        let batch = StoreBatch { puts: vec![record("b", 1), record("a", 2), record("é", 3)], deletes: vec![] };
        s.apply("t1", batch, 3).unwrap();
        // Tenants never see each other's records, even with prefix-like ids.
        s.apply("t", StoreBatch { puts: vec![record("1a", 4)], deletes: vec![] }, 4).unwrap();
        assert_eq!(s.applied_lsn("t1").unwrap(), Some(3));
        assert_eq!(s.applied_lsn("t").unwrap(), Some(4));
        assert_eq!(ids(s, "t1"), ["a", "b", "é"]);
        assert_eq!(ids(s, "t"), ["1a"]);
        // Pages: start after an id (present or not), stop when told.
        assert_eq!(ids_after(s, "t1", Some("a"), 10), ["b", "é"]);
        assert_eq!(ids_after(s, "t1", Some("aa"), 1), ["b"]);
        assert_eq!(ids_after(s, "t1", None, 2), ["a", "b"]);
        assert!(ids_after(s, "t1", Some("é"), 10).is_empty());
        assert!(ids_after(s, "t", Some("1a"), 10).is_empty());
        // A view is frozen: later writes do not show in it.
        let view = s.view("t1").unwrap();
        s.apply("t1", StoreBatch { puts: vec![record("zz-later", 9)], deletes: vec!["a".into()] }, 4).unwrap();
        let mut seen = Vec::new();
        view.scan(&mut |r| {
            seen.push(r.item_id);
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(seen, ["a", "b", "é"]);
        s.apply("t1", StoreBatch { puts: vec![record("a", 2)], deletes: vec!["zz-later".into()] }, 4).unwrap();
        // An error from the callback stops the scan and is returned.
        let mut calls = 0;
        let e = s.scan("t1", None, &mut |_| {
            calls += 1;
            Err(crate::error::Error::state("stop"))
        });
        assert!(e.is_err());
        assert_eq!(calls, 1);
        assert_eq!(s.get("t1", "a").unwrap(), Some(record("a", 2)));
        assert_eq!(s.get("t", "a").unwrap(), None);
        // Replace and delete in one batch.
        let mut a2 = record("a", 5);
        a2.tombstone = Some(2);
        s.apply("t1", StoreBatch { puts: vec![a2.clone()], deletes: vec!["b".into()] }, 5).unwrap();
        assert_eq!(s.get("t1", "a").unwrap(), Some(a2));
        assert_eq!(ids(s, "t1"), ["a", "é"]);
        assert_eq!(s.applied_lsn("t1").unwrap(), Some(5));
        // Deleting what is not there is fine.
        s.apply("t1", StoreBatch { puts: vec![], deletes: vec!["zz".into()] }, 6).unwrap();
        s.persist().unwrap();
        s.clear_tenant("t1").unwrap();
        assert!(ids(s, "t1").is_empty());
        assert_eq!(s.applied_lsn("t1").unwrap(), None);
        assert_eq!(ids(s, "t"), ["1a"]);
    }

    #[test]
    fn mem_store_suite() {
        suite(&MemStore::new());
    }

    #[test]
    fn fjall_store_suite() {
        let dir = tempfile::tempdir().unwrap();
        suite(&FjallStore::open(dir.path()).unwrap());
    }

    /// Sealed at rest: the same suite with a key, every value opaque on
    /// disk; plain values written before the key still read; without the
    /// key a sealed value is refused, not misread.
    #[test]
    fn fjall_store_suite_sealed() {
        let dir = tempfile::tempdir().unwrap();
        {
            let plain = FjallStore::open(dir.path()).unwrap();
            plain.apply("old", StoreBatch { puts: vec![record("kept", 1)], deletes: vec![] }, 1).unwrap();
            plain.persist().unwrap();
        }
        let key = [9u8; 32];
        {
            let s = FjallStore::open_sealed(dir.path(), Some(key)).unwrap();
            suite(&s);
            assert_eq!(s.get("old", "kept").unwrap(), Some(record("kept", 1)));
            let mut secret = record("s", 2);
            secret.content = Some("tangerine launch code".into());
            s.apply("t", StoreBatch { puts: vec![secret.clone()], deletes: vec![] }, 2).unwrap();
            assert_eq!(s.get("t", "s").unwrap(), Some(secret));
            s.persist().unwrap();
        }
        let s = FjallStore::open(dir.path()).unwrap();
        assert_eq!(s.get("t", "s").unwrap_err().code(), "snapshot_auth");
        assert_eq!(s.get("old", "kept").unwrap(), Some(record("kept", 1)));
    }

    #[test]
    fn fjall_store_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = FjallStore::open(dir.path()).unwrap();
            s.apply("t", StoreBatch { puts: vec![record("a", 1)], deletes: vec![] }, 9).unwrap();
            s.persist().unwrap();
        }
        let s = FjallStore::open(dir.path()).unwrap();
        assert_eq!(s.applied_lsn("t").unwrap(), Some(9));
        assert_eq!(s.get("t", "a").unwrap(), Some(record("a", 1)));
    }
}
