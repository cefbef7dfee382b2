//! Which node serves which partition, and at what address: a JetStream
//! key-value bucket where every node writes its entry (its URL, the
//! partition count and the partitions it serves) every
//! [`HEARTBEAT`], and which every node watches. A request for a tenant of a
//! partition this node does not serve is redirected to a node that does
//! (see `docs/cluster.md`); an entry not renewed for [`EXPIRY`] is taken
//! for a node gone.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::error::{ClusterError, ErrorKind};
use crate::nats::until_answered;
use crate::partition::{Layout, Partition};
use crate::secret::{Kind, Seal};
use crate::snapshots::now_ms;

/// The key-value bucket of node entries.
pub const NODES_BUCKET: &str = "NEARDUP_NODES";
/// How often a node renews its entry.
pub const HEARTBEAT: Duration = Duration::from_secs(3);
/// An entry older than this is a node gone.
pub const EXPIRY: Duration = Duration::from_secs(15);

/// A node's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEntry {
    pub node: String,
    /// Where clients reach it (`http://host:port`); `None`: not reachable
    /// by redirect (no `--advertise-url`).
    pub url: Option<String>,
    /// The cluster's partition count as this node was started with.
    pub partitions: u32,
    /// The partitions it serves.
    pub serves: Vec<u32>,
    /// When the entry was written, Unix ms (the writer's clock).
    pub at_ms: u64,
}

impl NodeEntry {
    /// Written within [`EXPIRY`] (by this node's clock).
    fn fresh(&self) -> bool {
        now_ms().saturating_sub(self.at_ms) < EXPIRY.as_millis() as u64
    }

    fn encode(&mut self, seal: &Seal) -> Result<bytes::Bytes, ClusterError> {
        self.at_ms = now_ms();
        serde_json::to_vec(self)
            .map(|json| bytes::Bytes::from(seal.seal(Kind::Node, &self.node, &json)))
            .map_err(|e| ClusterError::encoding("encoding this node's entry", e))
    }

    /// The entry stored under `key`, once its tag verifies and it names the
    /// node it is filed under.
    fn decode(seal: &Seal, key: &str, value: &[u8]) -> Result<NodeEntry, String> {
        let json = seal.open(Kind::Node, key, value)?;
        let e: NodeEntry = serde_json::from_slice(json).map_err(|e| e.to_string())?;
        if e.node != key {
            return Err(format!("the entry of node {:?} is filed under {key:?}", e.node));
        }
        Ok(e)
    }
}

/// The live entries as this node last saw them.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    seen: Arc<RwLock<BTreeMap<String, (NodeEntry, Instant)>>>,
}

impl Registry {
    /// A URL of a live node, other than `me`, that serves `p`; among
    /// several, the one `spread` picks (so tenants spread over them).
    pub fn url_for(&self, p: Partition, me: &str, spread: u64) -> Option<String> {
        let urls: Vec<String> = self.serving(p).into_iter().filter(|e| e.node != me).filter_map(|e| e.url).collect();
        if urls.is_empty() {
            return None;
        }
        Some(urls[(spread % urls.len() as u64) as usize].clone())
    }

    /// The live nodes serving `p` (this one included), by node id.
    pub fn serving(&self, p: Partition) -> Vec<NodeEntry> {
        self.seen.read().map_or_else(
            |_| Vec::new(),
            |s| {
                s.values()
                    .filter(|(e, at)| at.elapsed() < EXPIRY && e.partitions == p.count && e.serves.contains(&p.index))
                    .map(|(e, _)| e.clone())
                    .collect()
            },
        )
    }

    fn saw(&self, e: NodeEntry) {
        if let Ok(mut s) = self.seen.write() {
            s.insert(e.node.clone(), (e, Instant::now()));
        }
    }

    fn forget(&self, node: &str) {
        if let Ok(mut s) = self.seen.write() {
            s.remove(node);
        }
    }
}

/// Joins the registry: refuses to start when a live node runs with
/// another partition count, writes this node's entry, and keeps renewing
/// it and watching the others' (the returned tasks run until aborted).
pub(crate) async fn join(
    js: &jetstream::Context,
    replicas: usize,
    me: NodeEntry,
    layout: &Layout,
    seal: &Seal,
) -> Result<(Registry, Vec<tokio::task::AbortHandle>), ClusterError> {
    // Entries of nodes gone age out of the bucket itself too.
    let kv = crate::kv::bucket(js, NODES_BUCKET, "neardup nodes and the partitions they serve", replicas, EXPIRY * 4)
        .await?;
    let registry = Registry::default();
    // Current entries first, to check the partition count.
    let entries = until_answered(|| async {
        let mut entries = Vec::new();
        let mut keys = kv.keys().await.map_err(|e| e.to_string())?;
        while let Some(k) = keys.next().await {
            let Ok(k) = k else { continue };
            let Ok(Some(v)) = kv.get(&k).await else { continue };
            entries.push((k, v));
        }
        Ok(entries)
    })
    .await
    .map_err(|e| ClusterError::jetstream(format!("reading {NODES_BUCKET}"), e))?;
    for (k, v) in entries {
        let e = match NodeEntry::decode(seal, &k, &v) {
            Ok(e) => e,
            Err(why) => {
                tracing::warn!(key = k, %why, "refused an entry of {NODES_BUCKET}");
                continue;
            }
        };
        // A node stopped a while ago (perhaps restarted since with another
        // count) does not count; a live one with another count is a
        // misconfiguration that would put a tenant in two partitions.
        if !e.fresh() || e.node == me.node {
            continue;
        }
        if e.partitions != layout.count {
            return Err(ClusterError::new(ErrorKind::NodePartitions {
                node: e.node,
                theirs: e.partitions,
                ours: layout.count,
            }));
        }
        registry.saw(e);
    }
    let mut me = me;
    let value = me.encode(seal)?;
    // The bucket's stream, just created by this node or another, may not
    // have its leader yet.
    until_answered(|| async { kv.put(&me.node, value.clone()).await.map_err(|e| e.to_string()) })
        .await
        .map_err(|e| ClusterError::jetstream(format!("writing to {NODES_BUCKET}"), e))?;
    registry.saw(me.clone());
    let renew = {
        let (kv, seal) = (kv.clone(), seal.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(HEARTBEAT).await;
                let Ok(value) = me.encode(&seal) else { continue };
                if let Err(e) = kv.put(&me.node, value).await {
                    tracing::warn!(error = %e, "renewing this node's entry in {NODES_BUCKET} failed");
                }
            }
        })
        .abort_handle()
    };
    let watch =
        {
            let (registry, seal) = (registry.clone(), seal.clone());
            crate::kv::watch(&tokio::runtime::Handle::current(), kv, "the node bucket", false, move |key, value| {
                match value {
                    Some(v) => match NodeEntry::decode(&seal, &key, &v) {
                        Ok(n) => registry.saw(n),
                        Err(why) => tracing::warn!(key, %why, "refused an entry of {NODES_BUCKET}"),
                    },
                    None => registry.forget(&key),
                }
            })
        };
    Ok((registry, vec![renew, watch]))
}
