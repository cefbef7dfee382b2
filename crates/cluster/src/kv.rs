//! The JetStream key-value buckets the nodes share (API keys, the node
//! registry): made and watched one way.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use tokio::runtime::Handle;

use crate::error::ClusterError;
use crate::nats::until_answered;

/// Opens bucket `name`, creating it if missing, with `replicas` and
/// entries aging out after `max_age` (zero: never).
///
/// The bucket's stream is made here rather than by the client's
/// create_key_value, whose account query the NATS 2.9 servers of Debian
/// answer in a form this client version cannot read. The settings are a
/// key-value bucket's (one value per key).
pub(crate) async fn bucket(
    js: &jetstream::Context,
    name: &str,
    description: &str,
    replicas: usize,
    max_age: Duration,
) -> Result<kv::Store, ClusterError> {
    let config = jetstream::stream::Config {
        name: format!("KV_{name}"),
        description: Some(description.into()),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age,
        storage: jetstream::stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        num_replicas: replicas,
        discard: jetstream::stream::DiscardPolicy::New,
        ..Default::default()
    };
    until_answered(|| async {
        js.get_or_create_stream(config.clone()).await.map_err(|e| e.to_string())?;
        js.get_key_value(name).await.map_err(|e| e.to_string())
    })
    .await
    .map_err(|last| ClusterError::jetstream(format!("creating the key-value bucket {name}"), last))
}

/// Hands every change of `kv` to `apply` — a key and its value, or `None`
/// once deleted — for as long as the returned task runs; with `history`,
/// every key's current value first. A broken watch is started again (with
/// `history`, from the current values).
pub(crate) fn watch(
    runtime: &Handle,
    kv: kv::Store,
    what: &'static str,
    history: bool,
    apply: impl Fn(String, Option<bytes::Bytes>) + Send + Sync + 'static,
) -> tokio::task::AbortHandle {
    runtime
        .spawn(async move {
            loop {
                let changes = if history { kv.watch_with_history(">").await } else { kv.watch(">").await };
                match changes {
                    Ok(mut changes) => {
                        while let Some(change) = changes.next().await {
                            match change {
                                Ok(e) => match e.operation {
                                    kv::Operation::Put => apply(e.key, Some(e.value)),
                                    kv::Operation::Delete | kv::Operation::Purge => apply(e.key, None),
                                },
                                Err(err) => {
                                    tracing::warn!(error = %err, "watching {what} failed; watching again");
                                    break;
                                }
                            }
                        }
                    }
                    Err(err) => tracing::warn!(error = %err, "watching {what} failed; retrying"),
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
        .abort_handle()
}
