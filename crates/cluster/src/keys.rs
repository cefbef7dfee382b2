//! Tenant API keys shared by every node: a JetStream key-value bucket
//! (replicated like the stream) from key id to the key's record (tenant,
//! scopes, hash of the secret — never the secret). A node writes a key
//! there before it answers the mint (or revocation), and every node watches
//! the bucket and keeps its own copy, so a key minted on one node
//! authenticates on every node a moment later (the watch's delivery time,
//! milliseconds on a healthy cluster).

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use tokio::runtime::Handle;

use crate::error::ClusterError;
use crate::secret::{Kind, Seal};

/// The key-value bucket holding the keys.
pub const KEYS_BUCKET: &str = "NEARDUP_KEYS";

/// The shared key map (see the module docs).
#[derive(Clone)]
pub struct SharedKeys {
    kv: kv::Store,
    runtime: Handle,
    timeout: Duration,
    seal: Seal,
}

impl std::fmt::Debug for SharedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedKeys").finish_non_exhaustive()
    }
}

/// A change of the map: a key's record, or its removal (`None`).
pub type KeyChange = (String, Option<Vec<u8>>);

impl SharedKeys {
    /// Opens the bucket, creating it if missing.
    pub(crate) async fn open(
        js: &jetstream::Context,
        replicas: usize,
        timeout: Duration,
        seal: Seal,
    ) -> Result<Self, ClusterError> {
        let kv = crate::kv::bucket(js, KEYS_BUCKET, "neardup tenant API keys", replicas, Duration::ZERO).await?;
        Ok(SharedKeys { kv, runtime: Handle::current(), timeout, seal })
    }

    /// Stores `record` under `id` once a quorum has it. Call from a
    /// blocking thread, never inside the runtime.
    pub fn put(&self, id: &str, record: &[u8]) -> Result<(), String> {
        let value = bytes::Bytes::from(self.seal.seal(Kind::Key, id, record));
        self.block(async { self.kv.put(id, value).await.map(|_| ()).map_err(|e| e.to_string()) })
    }

    /// Removes `id` once a quorum has the removal. Call from a blocking
    /// thread, never inside the runtime.
    pub fn remove(&self, id: &str) -> Result<(), String> {
        self.block(async { self.kv.purge(id).await.map_err(|e| e.to_string()) })
    }

    fn block(&self, f: impl std::future::Future<Output = Result<(), String>>) -> Result<(), String> {
        let timeout = self.timeout;
        self.runtime.block_on(async move {
            match tokio::time::timeout(timeout, f).await {
                Ok(r) => r,
                Err(_) => Err(format!("the NATS key bucket did not answer within {timeout:?}")),
            }
        })
    }

    /// Hands every key's current record to `apply`, then every change, for
    /// as long as the node runs (a broken watch is started again, from the
    /// current records). A record whose tag does not verify with the
    /// cluster secret is never handed over (logged and counted).
    pub fn watch(&self, apply: impl Fn(KeyChange) + Send + Sync + 'static) -> tokio::task::AbortHandle {
        let seal = self.seal.clone();
        crate::kv::watch(&self.runtime, self.kv.clone(), "the key bucket", true, move |key, value| match value {
            None => apply((key, None)),
            Some(v) => match seal.open(Kind::Key, &key, &v) {
                Ok(record) => apply((key, Some(record.to_vec()))),
                Err(why) => tracing::warn!(key, %why, "refused a key record of {KEYS_BUCKET}"),
            },
        })
    }
}
