//! A whole node: the partitions it serves (each a [`Node`]), the shared
//! API keys, and the registry of who serves what.

use std::path::Path;

use neardup_index::EngineOptions;

use crate::error::{ClusterError, ErrorKind};
use crate::keys::SharedKeys;
use crate::nats::Connections;
use crate::node::{Node, Tasks};
use crate::options::ClusterOptions;
use crate::partition::{self, Layout, Partition};
use crate::registry::{self, Registry};

/// A node of a cluster: the partitions it serves (each a [`Node`]), the
/// shared API keys, and the registry of who serves what.
pub struct Cluster {
    nodes: Vec<Node>,
    /// Tenant API keys shared by every node.
    pub keys: SharedKeys,
    /// Which node serves which partition.
    pub registry: Registry,
    options: ClusterOptions,
    /// Held for its drop: the registry's tasks end with the node.
    _tasks: Tasks,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.options.node_id)
            .field("layout", &self.options.layout)
            .finish_non_exhaustive()
    }
}

/// What a data directory records of the cluster it belongs to.
const LAYOUT_FILE: &str = "cluster-layout.json";

/// Refuses a data directory written with another partition count (its
/// tenants would be looked for in the wrong partitions), and records the
/// count in a new one.
fn check_layout(dir: &Path, count: u32) -> Result<(), ClusterError> {
    let path = dir.join(LAYOUT_FILE);
    let recorded = match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice::<serde_json::Value>(&b)
            .ok()
            .and_then(|v| v.get("partitions")?.as_u64())
            .ok_or_else(|| ClusterError::corrupt(path.display().to_string(), "is damaged"))?,
        // Written before partitions existed: one partition, if anything.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if ["replica.json", "wal", "snapshots"].iter().any(|f| dir.join(f).exists()) {
                1
            } else {
                std::fs::create_dir_all(dir).map_err(|e| ClusterError::data_dir(dir, e))?;
                let body = serde_json::json!({ "partitions": count }).to_string();
                neardup_fs::write_atomic(&path, body.as_bytes()).map_err(|e| ClusterError::data_dir(&path, e))?;
                return Ok(());
            }
        }
        Err(e) => return Err(ClusterError::data_dir(&path, e)),
    };
    if recorded != u64::from(count) {
        return Err(ClusterError::new(ErrorKind::DataDirPartitions { dir: dir.to_path_buf(), recorded, count }));
    }
    Ok(())
}

impl Cluster {
    /// Connects, opens the shared buckets, joins the registry and starts a
    /// [`Node`] for every partition this node serves, each in its own
    /// folder of `dir` ([`Partition::dir`]). Must run inside a
    /// multi-threaded tokio runtime.
    pub async fn start(dir: &Path, opts: EngineOptions, cluster: ClusterOptions) -> Result<Cluster, ClusterError> {
        check_layout(dir, cluster.layout.count)?;
        let conns = Connections::open(&cluster).await?;
        let keys = SharedKeys::open(&conns.js, cluster.replicas, cluster.propose_timeout, cluster.seal.clone()).await?;
        let me = registry::NodeEntry {
            node: cluster.node_id.clone(),
            url: cluster.advertise_url.clone(),
            partitions: cluster.layout.count,
            serves: cluster.layout.served.clone(),
            at_ms: 0,
        };
        let (registry, tasks) = registry::join(&conns.js, cluster.replicas, me, &cluster.layout, &cluster.seal).await?;
        let mut nodes = Vec::new();
        for p in cluster.layout.served() {
            nodes.push(Node::start_partition(&conns, &p.dir(dir), opts.clone(), cluster.clone(), p).await?);
        }
        Ok(Cluster { nodes, keys, registry, options: cluster, _tasks: Tasks(tasks) })
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.options.node_id
    }

    /// The partitions of the cluster and those served here.
    pub fn layout(&self) -> &Layout {
        &self.options.layout
    }

    /// The partitions served here, ascending.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The partition of `tenant`.
    pub fn partition_of(&self, tenant: &str) -> Partition {
        partition::partition_of(tenant, self.options.layout.count)
    }

    /// The partition `tenant` belongs to, if this node serves it.
    pub fn local(&self, tenant: &str) -> Option<&Node> {
        let p = self.partition_of(tenant);
        self.nodes.iter().find(|n| n.partition == p)
    }

    /// Where to send a request for `tenant` when this node does not serve
    /// its partition: the tenant's home among the live nodes that do (see
    /// [`crate::registry::Registry::home`]), so with home redirects on a
    /// write is sent there once, not twice; `None`: none is known.
    pub fn redirect_url(&self, tenant: &str) -> Option<String> {
        let home = self.registry.home(self.partition_of(tenant), tenant)?;
        home.url.filter(|_| home.node != self.options.node_id)
    }

    /// With home redirects on ([`ClusterOptions::home_redirects`]): the
    /// node id and URL of `tenant`'s home for writes when it is another
    /// node (see [`crate::registry::Registry::home`]); `None` when this node is the
    /// home, none is known, or the rule is off. Only a hint: correctness
    /// never depends on it (every write is still checked against the log).
    pub fn home_elsewhere(&self, tenant: &str) -> Option<(String, String)> {
        if !self.options.home_redirects {
            return None;
        }
        let home = self.registry.home(self.partition_of(tenant), tenant)?;
        match home.node == self.options.node_id {
            true => None,
            false => Some((home.node, home.url?)),
        }
    }

    /// Values of the shared state refused since start: their tag did not
    /// verify with the cluster secret ([`crate::secret`]).
    pub fn refused_records(&self) -> u64 {
        self.options.seal.refused()
    }

    /// Whether every partition served here is ready ([`Node::is_ready`]).
    pub fn is_ready(&self) -> bool {
        self.nodes.iter().all(Node::is_ready)
    }
}
