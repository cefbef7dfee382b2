//! A node's NATS connections, and the retry loop for a NATS cluster that
//! may still be electing its leaders.

use std::time::Duration;

use async_nats::jetstream;

use crate::error::ClusterError;
use crate::options::ClusterOptions;

/// The NATS connections of a node, shared by its partitions: one for
/// writes and one for reads, so a slow applier never delays proposals'
/// acknowledgements.
#[derive(Clone)]
pub(crate) struct Connections {
    pub(crate) writes: async_nats::Client,
    pub(crate) reads: async_nats::Client,
    pub(crate) js: jetstream::Context,
}

impl Connections {
    pub(crate) async fn open(cluster: &ClusterOptions) -> Result<Connections, ClusterError> {
        let addrs: Vec<async_nats::ServerAddr> = cluster
            .servers
            .iter()
            .map(|s| s.parse().map_err(|e| ClusterError::option("--cluster", format!("{s}: {e}"))))
            .collect::<Result<_, _>>()?;
        let connect = |role: &str| {
            async_nats::ConnectOptions::new()
                .name(format!("neardup-{}-{role}", cluster.node_id))
                .retry_on_initial_connect()
                .connect(addrs.clone())
        };
        let writes = connect("writes").await.map_err(ClusterError::connect)?;
        let reads = connect("reads").await.map_err(ClusterError::connect)?;
        Ok(Connections { js: jetstream::new(writes.clone()), writes, reads })
    }
}

/// Runs `attempt` until NATS answers it, for up to a minute: right after
/// its servers start (or one restarts), a NATS cluster may still be
/// electing the leader of the meta layer or of a stream just created, and
/// answers `no responders` / `no stream found` meanwhile. Every node runs
/// its set-up (the stream, the buckets, its first registry entry) through
/// this, so nodes started together in any order all come up.
pub(crate) async fn until_answered<T, F, Fut>(mut attempt: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let mut last = String::from("no attempt");
    for _ in 0..120 {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(last)
}
