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
    /// The home of `tenant`'s writes among the live nodes serving `p` that
    /// clients can reach (an advertised URL): the one of highest
    /// rendezvous weight for the pair (tenant, node), so every node that
    /// sees the same members picks the same home, tenants spread evenly
    /// over the nodes, and a node leaving or joining moves only the
    /// tenants whose home it is (or becomes). `None` when no such node is
    /// live.
    pub fn home(&self, p: Partition, tenant: &str) -> Option<NodeEntry> {
        let t = crate::partition::fnv1a(tenant.as_bytes());
        self.serving(p).into_iter().filter(|e| e.url.is_some()).max_by_key(|e| (weight(t, &e.node), e.node.clone()))
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

/// The rendezvous weight of a (tenant, node) pair: the tenant's hash and
/// the node id's, mixed (SplitMix64's finalizer), so a node's rank among
/// the others is independent for each tenant.
fn weight(tenant_hash: u64, node: &str) -> u64 {
    let mut z = tenant_hash ^ crate::partition::fnv1a(node.as_bytes()).rotate_left(32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(node: &str, url: Option<&str>) -> NodeEntry {
        NodeEntry { node: node.into(), url: url.map(str::to_string), partitions: 1, serves: vec![0], at_ms: 0 }
    }

    /// Every node picks the same home for a tenant from the same members;
    /// homes spread over the nodes; a node without a URL is never one; a
    /// node gone moves only its own tenants.
    #[test]
    fn homes_are_agreed_spread_and_move_only_with_their_node() {
        let p = Partition { index: 0, count: 1 };
        let r = Registry::default();
        for n in ["n1", "n2", "n3"] {
            r.saw(entry(n, Some(&format!("http://{n}:8080"))));
        }
        r.saw(entry("hidden", None));
        let tenants: Vec<String> = (0..3000).map(|i| format!("tenant-{i}")).collect();
        let homes: Vec<String> = tenants.iter().map(|t| r.home(p, t).unwrap().node).collect();
        for n in ["n1", "n2", "n3"] {
            let share = homes.iter().filter(|h| *h == n).count();
            assert!((800..1200).contains(&share), "{n} is home of {share} of 3000");
        }
        assert!(!homes.iter().any(|h| h == "hidden"));
        // The same members seen in another order pick the same homes.
        let other = Registry::default();
        for n in ["n3", "hidden", "n1", "n2"] {
            other.saw(entry(n, (n != "hidden").then_some("http://x:1")));
        }
        assert!(tenants.iter().zip(&homes).all(|(t, h)| other.home(p, t).unwrap().node == *h));
        // n2 gone: its tenants move, the others stay.
        r.forget("n2");
        for (t, h) in tenants.iter().zip(&homes) {
            let now = r.home(p, t).unwrap().node;
            match h.as_str() {
                "n2" => assert_ne!(now, "n2"),
                _ => assert_eq!(&now, h, "{t} moved though its home stayed"),
            }
        }
        assert!(Registry::default().home(p, "t").is_none());
    }
}
