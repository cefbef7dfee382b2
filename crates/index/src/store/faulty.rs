//! [`FaultyStore`]: a memory store whose reads and writes fail or slow down
//! on demand — the seed's fault list (a slow or full disk, a feature store
//! gone) as a [`Store`] tests can drive. Built for this crate's tests and,
//! with the `fault-injection` feature, for other crates' tests; never in a
//! release build.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{MemStore, Store, StoreBatch, StoreView};
use crate::error::{Error, Result};
use crate::item::ItemRecord;

/// The switches of a [`FaultyStore`], shared with the test that drives it.
#[derive(Debug, Default, Clone)]
pub struct Faults(Arc<Switches>);

#[derive(Debug, Default)]
struct Switches {
    reads_fail: AtomicBool,
    writes_fail: AtomicBool,
    write_delay_ms: AtomicU64,
    write_gate: crate::fault::Gate,
}

impl Faults {
    /// Every read (`get`, `scan`, `view`) fails while `on`, as a store
    /// whose files are gone would.
    pub fn fail_reads(&self, on: bool) {
        self.0.reads_fail.store(on, Ordering::SeqCst);
    }

    /// Every write fails while `on`, as on a full disk.
    pub fn fail_writes(&self, on: bool) {
        self.0.writes_fail.store(on, Ordering::SeqCst);
    }

    /// Every write first sleeps `delay`, as on a slow disk.
    pub fn delay_writes(&self, delay: Duration) {
        self.0.write_delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// The gate every write first passes: closed, writes stall until it
    /// opens, as on a disk that hangs.
    pub fn write_gate(&self) -> crate::fault::Gate {
        self.0.write_gate.clone()
    }
}

/// A [`MemStore`] behind [`Faults`].
#[derive(Debug, Default)]
pub struct FaultyStore {
    inner: MemStore,
    faults: Faults,
}

impl FaultyStore {
    /// A store and the switches that drive it.
    pub fn new() -> (FaultyStore, Faults) {
        let s = FaultyStore::default();
        let f = s.faults.clone();
        (s, f)
    }

    fn read(&self) -> Result<()> {
        match self.faults.0.reads_fail.load(Ordering::SeqCst) {
            true => Err(Error::store("faulty", "the store's files are gone (injected)")),
            false => Ok(()),
        }
    }

    fn write(&self) -> Result<()> {
        let ms = self.faults.0.write_delay_ms.load(Ordering::SeqCst);
        if ms > 0 {
            std::thread::sleep(Duration::from_millis(ms));
        }
        self.faults.0.write_gate.pass();
        if self.faults.0.writes_fail.load(Ordering::SeqCst) {
            let e = std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left (injected)");
            return Err(Error::io("writing the store", e));
        }
        Ok(())
    }
}

impl Store for FaultyStore {
    fn backend(&self) -> &'static str {
        "faulty"
    }
    fn get(&self, tenant: &str, item_id: &str) -> Result<Option<ItemRecord>> {
        self.read()?;
        self.inner.get(tenant, item_id)
    }
    fn apply(&self, tenant: &str, batch: StoreBatch, lsn: u64) -> Result<()> {
        self.write()?;
        self.inner.apply(tenant, batch, lsn)
    }
    fn scan(
        &self,
        tenant: &str,
        after: Option<&str>,
        f: &mut dyn FnMut(ItemRecord) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        self.read()?;
        self.inner.scan(tenant, after, f)
    }
    fn view(&self, tenant: &str) -> Result<Box<dyn StoreView>> {
        self.read()?;
        self.inner.view(tenant)
    }
    fn is_persistent(&self) -> bool {
        false
    }
    fn applied_lsn(&self, tenant: &str) -> Result<Option<u64>> {
        self.inner.applied_lsn(tenant)
    }
    fn clear_tenant(&self, tenant: &str) -> Result<()> {
        self.inner.clear_tenant(tenant)
    }
    fn persist(&self) -> Result<()> {
        Ok(())
    }
}
