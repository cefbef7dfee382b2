//! Reads waiting for a log position (`min_lsn`), bounded per tenant and per
//! node, so that a flood of reads asking for a position that is slow to
//! come (or never comes) cannot crowd out the node's other work.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::{ApiError, ApiResult};

/// Reads of one tenant that may wait at a time.
pub const PER_TENANT: usize = 64;
/// Reads of the node that may wait at a time.
pub const PER_NODE: usize = 256;

/// The waiting reads, by tenant.
#[derive(Debug, Default)]
pub struct Waiters {
    by_tenant: Mutex<HashMap<String, usize>>,
}

/// A read's place among the waiters; given back when dropped.
#[derive(Debug)]
pub(crate) struct Waiting<'a> {
    waiters: &'a Waiters,
    tenant: String,
}

impl Waiters {
    /// A place for a read of `tenant`, or `503 unavailable` when the tenant
    /// or the node has as many waiting as it takes.
    pub(crate) fn admit(&self, tenant: &str) -> ApiResult<Waiting<'_>> {
        let mut map = self.by_tenant.lock().unwrap_or_else(|e| e.into_inner());
        let node: usize = map.values().sum();
        let mine = map.get(tenant).copied().unwrap_or(0);
        if mine >= PER_TENANT || node >= PER_NODE {
            return Err(ApiError::from(neardup_index::Error::unavailable(format!(
                "{} reads are waiting for a log position already (at most {PER_TENANT} a tenant, {PER_NODE} a node); \
                 retry, or read without min_lsn",
                if mine >= PER_TENANT { mine } else { node }
            ))));
        }
        *map.entry(tenant.to_string()).or_default() += 1;
        Ok(Waiting { waiters: self, tenant: tenant.to_string() })
    }

    /// Reads waiting now, on the whole node.
    pub fn waiting(&self) -> usize {
        self.by_tenant.lock().unwrap_or_else(|e| e.into_inner()).values().sum()
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut map = self.waiters.by_tenant.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_per_tenant_and_per_node_and_given_back() {
        let w = Waiters::default();
        let held: Vec<_> = (0..PER_TENANT).map(|_| w.admit("a").unwrap()).collect();
        assert_eq!(w.admit("a").unwrap_err().parts().1, "unavailable");
        let others: Vec<_> = (0..PER_NODE - PER_TENANT).map(|i| w.admit(&format!("t{}", i % 7)).unwrap()).collect();
        assert_eq!(w.waiting(), PER_NODE);
        assert!(w.admit("fresh").is_err(), "the node is full");
        drop(held);
        assert!(w.admit("a").is_ok());
        drop(others);
        assert_eq!(w.waiting(), 0);
    }
}
