//! How a node joins a cluster: the NATS servers, its id, replicas,
//! timeouts, the partitions it serves and where clients reach it.

use std::time::Duration;

use crate::error::ClusterError;
use crate::partition::Layout;

/// How often snapshot sets are written by default.
pub const DEFAULT_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(600);

/// How a node joins a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// NATS server URLs (`nats://host:port`), any of the cluster's servers.
    pub servers: Vec<String>,
    /// This node's name (connection name, logs, metrics).
    pub node_id: String,
    /// Stream replicas (1..=5; JetStream needs that many servers).
    pub replicas: usize,
    /// How long a proposal waits for the stream's acknowledgement.
    pub propose_timeout: Duration,
    /// How often a snapshot set is written to the object store (by
    /// whichever node finds the newest one older than this); `None`: never.
    pub snapshot_interval: Option<Duration>,
    /// The partitions of the cluster and those this node serves.
    pub layout: Layout,
    /// Where clients reach this node (`http://host:port`), for redirects
    /// from nodes that do not serve a tenant's partition.
    pub advertise_url: Option<String>,
}

impl ClusterOptions {
    /// Options for `servers` (comma-separated or repeated), replicas = the
    /// number of servers given, at most 3.
    pub fn new(servers: &str, node_id: &str) -> Result<ClusterOptions, ClusterError> {
        let servers: Vec<String> =
            servers.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
        if servers.is_empty() {
            return Err(ClusterError::option(
                "--cluster",
                "--cluster needs at least one NATS server URL (nats://host:port)",
            ));
        }
        for s in &servers {
            s.parse::<async_nats::ServerAddr>()
                .map_err(|e| ClusterError::option("--cluster", format!("--cluster: {s:?}: {e}")))?;
        }
        if node_id.is_empty()
            || node_id.len() > 64
            || !node_id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        {
            return Err(ClusterError::option(
                "--node-id",
                format!("--node-id {node_id:?}: use 1..=64 of [A-Za-z0-9_-]"),
            ));
        }
        Ok(ClusterOptions {
            replicas: servers.len().min(3),
            servers,
            node_id: node_id.to_string(),
            propose_timeout: Duration::from_secs(10),
            snapshot_interval: Some(DEFAULT_SNAPSHOT_INTERVAL),
            layout: Layout::default(),
            advertise_url: None,
        })
    }

    /// Sets where clients reach this node: `http://` or `https://`, a host
    /// and a port, no path.
    pub fn advertise(&mut self, url: &str) -> Result<(), ClusterError> {
        let url = url.trim_end_matches('/');
        let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
        match rest {
            Some(r) if !r.is_empty() && !r.contains(['/', '?', '#', ' ']) => {
                self.advertise_url = Some(url.to_string());
                Ok(())
            }
            _ => Err(ClusterError::option("--advertise-url", format!("--advertise-url {url:?}: use http://host:port"))),
        }
    }
}
