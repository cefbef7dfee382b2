//! [`FjallStore`]: item records in fjall, a pure-Rust embedded LSM tree.
//!
//! Keyspace `items` maps (tenant length byte, tenant, item id) to a postcard
//! [`ItemRecord`] (zstd-compressed when over 256 bytes); keyspace `applied` maps a tenant to its applied LSN (see
//! `docs/index-format.md`).
//!
//! The tenant length prefix makes one tenant's key range disjoint from every
//! other's (`t` + `1a` can never read as `t1` + `a`). Each [`StoreBatch`] is
//! one fjall write batch, so records and the applied LSN move together.
//! Writes are not fsynced here: the command log is the durable truth.
//!
//! With a key ([`FjallStore::open_sealed`]) each value is sealed (see
//! `seal`), bound to its store key: item text is not clear text on disk.

use std::ops::{Bound, ControlFlow};
use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{Store, StoreBatch, StoreView};
use crate::error::{Error, Result};
use crate::item::ItemRecord;

/// A frozen copy of one tenant's records: an MVCC snapshot of the database.
struct FjallView {
    snapshot: fjall::Snapshot,
    items: Keyspace,
    prefix: Vec<u8>,
    key: Option<[u8; 32]>,
}

/// A stored value back to its record, opened with `key` when sealed.
fn decode(key: Option<&[u8; 32]>, k: &[u8], v: &[u8]) -> Result<ItemRecord> {
    ItemRecord::decode_stored(&crate::seal::open(key, "store record", k, v)?)
}

impl StoreView for FjallView {
    fn scan(&self, f: &mut dyn FnMut(ItemRecord) -> Result<ControlFlow<()>>) -> Result<()> {
        use fjall::Readable;
        for guard in self.snapshot.prefix(&self.items, &self.prefix) {
            let (k, v) = guard.into_inner().map_err(err)?;
            if f(decode(self.key.as_ref(), &k, &v)?)?.is_break() {
                break;
            }
        }
        Ok(())
    }
}

/// Item records in an embedded fjall database.
pub struct FjallStore {
    db: Database,
    items: Keyspace,
    applied: Keyspace,
    /// Seals values at rest when set.
    key: Option<[u8; 32]>,
}

impl std::fmt::Debug for FjallStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FjallStore").finish_non_exhaustive()
    }
}

fn err(e: impl std::fmt::Display) -> Error {
    Error::store("fjall", e)
}

fn prefix(tenant: &str) -> Vec<u8> {
    // Tenant ids are at most 64 bytes (checked at creation).
    let mut k = Vec::with_capacity(1 + tenant.len());
    k.push(tenant.len().min(255) as u8);
    k.extend_from_slice(tenant.as_bytes());
    k
}

fn item_key(tenant: &str, item_id: &str) -> Vec<u8> {
    let mut k = prefix(tenant);
    k.extend_from_slice(item_id.as_bytes());
    k
}

impl FjallStore {
    /// Opens (or creates) a store in `dir`.
    pub fn open(dir: &Path) -> Result<FjallStore> {
        FjallStore::open_sealed(dir, None)
    }

    /// Opens (or creates) a store in `dir` that seals every value it
    /// writes under `key` (and reads plain values written before).
    pub fn open_sealed(dir: &Path, key: Option<[u8; 32]>) -> Result<FjallStore> {
        let db = Database::builder(dir).worker_threads(1).open().map_err(err)?;
        let items = db.keyspace("items", KeyspaceCreateOptions::default).map_err(err)?;
        let applied = db.keyspace("applied", KeyspaceCreateOptions::default).map_err(err)?;
        Ok(FjallStore { db, items, applied, key })
    }
}

impl Store for FjallStore {
    fn backend(&self) -> &'static str {
        "fjall"
    }

    fn get(&self, tenant: &str, item_id: &str) -> Result<Option<ItemRecord>> {
        let k = item_key(tenant, item_id);
        match self.items.get(&k).map_err(err)? {
            Some(v) => Ok(Some(decode(self.key.as_ref(), &k, &v)?)),
            None => Ok(None),
        }
    }

    fn apply(&self, tenant: &str, mut batch: StoreBatch, lsn: u64) -> Result<()> {
        let mut b = self.db.batch();
        for id in &batch.deletes {
            b.remove(&self.items, item_key(tenant, id));
        }
        for r in &mut batch.puts {
            let k = item_key(tenant, &r.item_id);
            let v = match &self.key {
                Some(key) => crate::seal::seal(key, crate::seal::STORE, &k, &r.encode_stored()?)?,
                None => r.encode_stored()?,
            };
            b.insert(&self.items, k, v);
        }
        b.insert(&self.applied, tenant.as_bytes().to_vec(), lsn.to_le_bytes().to_vec());
        b.commit().map_err(err)
    }

    fn scan(
        &self,
        tenant: &str,
        after: Option<&str>,
        f: &mut dyn FnMut(ItemRecord) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let p = prefix(tenant);
        let from = match after {
            Some(a) => Bound::Excluded(item_key(tenant, a)),
            None => Bound::Included(p.clone()),
        };
        for guard in self.items.range((from, Bound::<Vec<u8>>::Unbounded)) {
            let (k, v) = guard.into_inner().map_err(err)?;
            if !k.starts_with(&p) {
                break;
            }
            if f(decode(self.key.as_ref(), &k, &v)?)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn view(&self, tenant: &str) -> Result<Box<dyn StoreView>> {
        Ok(Box::new(FjallView {
            snapshot: self.db.snapshot(),
            items: self.items.clone(),
            prefix: prefix(tenant),
            key: self.key,
        }))
    }

    fn is_persistent(&self) -> bool {
        true
    }

    fn applied_lsn(&self, tenant: &str) -> Result<Option<u64>> {
        match self.applied.get(tenant.as_bytes()).map_err(err)? {
            Some(v) => {
                let b: [u8; 8] =
                    v.as_ref().try_into().map_err(|_| Error::corrupt("store record", "applied LSN is not 8 bytes"))?;
                Ok(Some(u64::from_le_bytes(b)))
            }
            None => Ok(None),
        }
    }

    fn clear_tenant(&self, tenant: &str) -> Result<()> {
        let mut b = self.db.batch();
        for guard in self.items.prefix(prefix(tenant)) {
            let k = guard.key().map_err(err)?;
            b.remove(&self.items, k);
        }
        b.remove(&self.applied, tenant.as_bytes().to_vec());
        b.commit().map_err(err)
    }

    fn persist(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncAll).map_err(err)
    }

    fn resident_bytes(&self) -> u64 {
        self.db.cache_size() + self.db.write_buffer_size()
    }
}
