//! Tenant API keys shared by every node: a JetStream key-value bucket
//! (replicated like the stream) from key id to the key's record (tenant,
//! scopes, hash of the secret — never the secret). A node writes a key
//! there before it answers the mint (or revocation), and every node watches
//! the bucket and keeps its own copy, so a key minted on one node
//! authenticates on every node a moment later (the watch's delivery time,
//! milliseconds on a healthy cluster).

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use tokio::runtime::Handle;

use crate::ClusterError;

/// The key-value bucket holding the keys.
pub const KEYS_BUCKET: &str = "NEARDUP_KEYS";

/// The shared key map (see the module docs).
#[derive(Clone)]
pub struct SharedKeys {
    kv: kv::Store,
    runtime: Handle,
    timeout: Duration,
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
    ) -> Result<Self, ClusterError> {
        // The bucket's stream is made here rather than by the client's
        // create_key_value, whose account query the NATS 2.9 servers of
        // Debian answer in a form this client version cannot read. The
        // settings are a key-value bucket's (one value per key).
        let config = jetstream::stream::Config {
            name: format!("KV_{KEYS_BUCKET}"),
            description: Some("neardup tenant API keys".into()),
            subjects: vec![format!("$KV.{KEYS_BUCKET}.>")],
            max_messages_per_subject: 1,
            storage: jetstream::stream::StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            num_replicas: replicas,
            discard: jetstream::stream::DiscardPolicy::New,
            ..Default::default()
        };
        let kv = crate::retry(20, Duration::from_millis(250), || async {
            js.get_or_create_stream(config.clone()).await.map_err(|e| e.to_string())?;
            js.get_key_value(KEYS_BUCKET).await.map_err(|e| e.to_string())
        })
        .await
        .map_err(|last| ClusterError(format!("creating the key bucket {KEYS_BUCKET}: {last}")))?;
        Ok(SharedKeys { kv, runtime: Handle::current(), timeout })
    }

    /// Stores `record` under `id` once a quorum has it. Call from a
    /// blocking thread, never inside the runtime.
    pub fn put(&self, id: &str, record: &[u8]) -> Result<(), String> {
        let value = bytes::Bytes::copy_from_slice(record);
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
    /// current records).
    pub fn watch(&self, apply: impl Fn(KeyChange) + Send + Sync + 'static) -> tokio::task::AbortHandle {
        let kv = self.kv.clone();
        self.runtime
            .spawn(async move {
                loop {
                    match kv.watch_with_history(">").await {
                        Ok(mut changes) => {
                            while let Some(change) = changes.next().await {
                                match change {
                                    Ok(e) => apply(match e.operation {
                                        kv::Operation::Put => (e.key, Some(e.value.to_vec())),
                                        kv::Operation::Delete | kv::Operation::Purge => (e.key, None),
                                    }),
                                    Err(err) => {
                                        tracing::warn!(error = %err, "watching the key bucket failed; watching again");
                                        break;
                                    }
                                }
                            }
                        }
                        Err(err) => tracing::warn!(error = %err, "watching the key bucket failed; retrying"),
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
            .abort_handle()
    }
}
