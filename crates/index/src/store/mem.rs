//! [`MemStore`]: item records in RAM. Nothing survives the process; on open
//! every tenant is reloaded from its snapshot and the log.

use std::collections::{BTreeMap, HashMap};
use std::ops::{Bound, ControlFlow};
use std::sync::RwLock;

use super::{Store, StoreBatch};
use crate::error::{Error, Result};
use crate::item::ItemRecord;

#[derive(Debug, Default)]
struct TenantItems {
    items: BTreeMap<String, ItemRecord>,
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

impl Store for MemStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn get(&self, tenant: &str, item_id: &str) -> Result<Option<ItemRecord>> {
        let t = self.tenants.read().map_err(|_| poisoned())?;
        Ok(t.get(tenant).and_then(|t| t.items.get(item_id)).cloned())
    }

    fn apply(&self, tenant: &str, batch: StoreBatch, lsn: u64) -> Result<()> {
        let mut t = self.tenants.write().map_err(|_| poisoned())?;
        let t = t.entry(tenant.to_string()).or_default();
        for id in batch.deletes {
            t.items.remove(&id);
        }
        for r in batch.puts {
            t.items.insert(r.item_id.clone(), r);
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
        // Pages are copied out under the lock and handed to `f` without it,
        // so `f` may call back into the store.
        const PAGE: usize = 1024;
        let mut cursor: Option<String> = after.map(str::to_string);
        loop {
            let page: Vec<ItemRecord> = {
                let t = self.tenants.read().map_err(|_| poisoned())?;
                let Some(t) = t.get(tenant) else { return Ok(()) };
                let from = match &cursor {
                    Some(c) => Bound::Excluded(c.as_str()),
                    None => Bound::Unbounded,
                };
                t.items.range::<str, _>((from, Bound::Unbounded)).take(PAGE).map(|(_, r)| r.clone()).collect()
            };
            let full = page.len() == PAGE;
            cursor = page.last().map(|r| r.item_id.clone());
            for r in page {
                if f(r)?.is_break() {
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
        }
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
}
