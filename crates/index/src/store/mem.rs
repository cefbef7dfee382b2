//! [`MemStore`]: item records in RAM. Nothing survives the process; on open
//! every tenant is reloaded from its snapshot and the log.
//!
//! Each tenant's records sit in a persistent ordered map (`imbl::OrdMap`,
//! shared-structure B-tree) of shared records, so a [`Store::view`] is a
//! constant-time clone: a checkpoint can stream a consistent copy of a
//! tenant while writes continue, without copying it.

use std::collections::HashMap;
use std::ops::{Bound, ControlFlow};
use std::sync::{Arc, RwLock};

use super::{Store, StoreBatch, StoreView};
use crate::error::{Error, Result};
use crate::item::ItemRecord;

type Records = imbl::OrdMap<String, Arc<ItemRecord>>;

#[derive(Debug, Default)]
struct TenantItems {
    items: Records,
    applied: Option<u64>,
}

/// Item records in memory.
#[derive(Debug, Default)]
pub struct MemStore {
    tenants: RwLock<HashMap<String, TenantItems>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore::default()
    }
}

fn poisoned() -> Error {
    Error::store("memory", "lock poisoned by a panic in another thread")
}

/// Calls `f` with the records of `items` after `after`, in id order.
fn scan_map(
    items: &Records,
    after: Option<&str>,
    f: &mut dyn FnMut(ItemRecord) -> Result<ControlFlow<()>>,
) -> Result<()> {
    let from = match after {
        Some(a) => Bound::Excluded(a.to_string()),
        None => Bound::Unbounded,
    };
    for (_, r) in items.range((from, Bound::Unbounded)) {
        if f(ItemRecord::clone(r))?.is_break() {
            break;
        }
    }
    Ok(())
}

/// A frozen copy of one tenant's records (a clone of the persistent map).
struct MemView(Records);

impl StoreView for MemView {
    fn scan(&self, f: &mut dyn FnMut(ItemRecord) -> Result<ControlFlow<()>>) -> Result<()> {
        scan_map(&self.0, None, f)
    }
}

impl Store for MemStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn get(&self, tenant: &str, item_id: &str) -> Result<Option<ItemRecord>> {
        let t = self.tenants.read().map_err(|_| poisoned())?;
        Ok(t.get(tenant).and_then(|t| t.items.get(item_id)).map(|r| ItemRecord::clone(r)))
    }

    fn apply(&self, tenant: &str, batch: StoreBatch, lsn: u64) -> Result<()> {
        let mut t = self.tenants.write().map_err(|_| poisoned())?;
        let t = t.entry(tenant.to_string()).or_default();
        for id in batch.deletes {
            t.items.remove(&id);
        }
        for mut r in batch.puts {
            // Kept as the text itself: a compressed copy would only add
            // to memory.
            r.packed = crate::item::PackedContent::default();
            t.items.insert(r.item_id.clone(), Arc::new(r));
        }
        t.applied = Some(lsn);
        Ok(())
    }

    fn scan(
        &self,
        tenant: &str,
        after: Option<&str>,
        f: &mut dyn FnMut(ItemRecord) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        // Scan a frozen copy (a constant-time clone), so `f` may call back
        // into the store and writers are never blocked.
        let items = {
            let t = self.tenants.read().map_err(|_| poisoned())?;
            match t.get(tenant) {
                Some(t) => t.items.clone(),
                None => return Ok(()),
            }
        };
        scan_map(&items, after, f)
    }

    fn view(&self, tenant: &str) -> Result<Box<dyn StoreView>> {
        let t = self.tenants.read().map_err(|_| poisoned())?;
        Ok(Box::new(MemView(t.get(tenant).map(|t| t.items.clone()).unwrap_or_default())))
    }

    fn applied_lsn(&self, tenant: &str) -> Result<Option<u64>> {
        let t = self.tenants.read().map_err(|_| poisoned())?;
        Ok(t.get(tenant).and_then(|t| t.applied))
    }

    fn clear_tenant(&self, tenant: &str) -> Result<()> {
        self.tenants.write().map_err(|_| poisoned())?.remove(tenant);
        Ok(())
    }

    fn persist(&self) -> Result<()> {
        Ok(())
    }

    fn is_persistent(&self) -> bool {
        false
    }
}
