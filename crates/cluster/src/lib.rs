//! neardup's cluster mode: the engine's command log as a NATS JetStream
//! stream, every service node a replica that applies it.
//!
//! We do not build consensus: JetStream's RAFT-replicated stream orders and
//! stores the commands (R = 3 on a three-server cluster), and the engine is
//! already a deterministic state machine over its commands. A write is
//! planned by the node that takes the request, proposed to the stream with
//! the tenant's last position as JetStream's *expected last subject
//! sequence* (each tenant has its own subject), and acknowledged once a
//! quorum stored it and the node applied it. Another node's command of the
//! same tenant in between makes the proposal fail, and the engine plans
//! again once it has applied that command: two nodes racing on one item
//! give exactly one winner, and the loser the answer it would get on one
//! node. Every node consumes the stream in order and applies each command
//! with the same code as single-node replay (`Engine::apply_replicated`),
//! so replicas reach the same state at the same position.
//!
//! Tenants may be spread over [`partition`]s: each is its own stream,
//! snapshot bucket and engine, and a node replicates the partitions it is
//! configured for ([`Cluster`]); the [`registry`] tells which node serves
//! which, for redirects. One partition (the default) makes every node a
//! full replica.
//!
//! See `docs/cluster.md` for running it and what each failure does.

pub mod keys;
mod kv;
pub mod partition;
pub mod registry;
pub mod snapshots;
pub mod testkit;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;
use neardup_index::{Engine, EngineOptions, Error as EngineError, Proposer};
use partition::{Layout, Partition};
use tokio::runtime::Handle;

/// The stream holding the command log (of the only partition; see
/// [`Partition::stream`]).
pub const STREAM: &str = "NEARDUP_LOG";
/// Subjects of the stream: one per tenant under this prefix (of the only
/// partition; see [`Partition::subject_prefix`]).
pub const SUBJECT_PREFIX: &str = "neardup.log.t.";

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
            return Err(ClusterError("--cluster needs at least one NATS server URL (nats://host:port)".into()));
        }
        for s in &servers {
            s.parse::<async_nats::ServerAddr>().map_err(|e| ClusterError(format!("--cluster: {s:?}: {e}")))?;
        }
        if node_id.is_empty()
            || node_id.len() > 64
            || !node_id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        {
            return Err(ClusterError(format!("--node-id {node_id:?}: use 1..=64 of [A-Za-z0-9_-]")));
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
            _ => Err(ClusterError(format!("--advertise-url {url:?}: use http://host:port"))),
        }
    }
}

/// A cluster error at start-up (connecting, creating the stream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterError(pub String);

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ClusterError {}

/// The stream subject of `tenant` in partition `p`. Tenant ids are
/// `[A-Za-z0-9_.-]`; `.` separates subject tokens, so it is written `~`
/// (which ids never hold).
pub fn tenant_subject(p: Partition, tenant: &str) -> String {
    format!("{}{}", p.subject_prefix(), tenant.replace('.', "~"))
}

fn unavailable(detail: impl Into<String>) -> EngineError {
    EngineError::unavailable(detail)
}

/// Proposes commands to the stream (see [`Proposer`]).
struct NatsProposer {
    partition: Partition,
    js: jetstream::Context,
    runtime: Handle,
    timeout: Duration,
    client: async_nats::Client,
}

impl NatsProposer {
    async fn propose_async(&self, tenant: &str, after: u64, payload: &[u8]) -> Result<u64, EngineError> {
        use jetstream::context::PublishErrorKind as K;
        let subject = tenant_subject(self.partition, tenant);
        let payload = bytes::Bytes::copy_from_slice(payload);
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let publish =
                jetstream::context::Publish::build().payload(payload.clone()).expected_last_subject_sequence(after);
            let ack = async {
                let fut = self.js.send_publish(subject.clone(), publish).await?;
                fut.await
            };
            let e = match tokio::time::timeout_at(deadline, ack).await {
                Err(_) => {
                    return Err(unavailable(format!(
                        "the NATS stream did not acknowledge within {:?}; the write may still land",
                        self.timeout
                    )))
                }
                Ok(Ok(ack)) => return Ok(ack.sequence),
                Ok(Err(e)) => e,
            };
            match e.kind() {
                K::WrongLastSequence => {
                    let last = self.last_of(&subject).await?;
                    return Err(EngineError::log_conflict(tenant, last));
                }
                // No responders: the stream has no leader right now (an
                // election after a server died) or the client is between
                // servers. Nothing was stored, so trying again is safe.
                K::StreamNotFound | K::BrokenPipe if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ => return Err(unavailable(format!("the NATS stream refused or lost the write ({e})"))),
            }
        }
    }

    /// The position of the last command of `subject` (0: none).
    async fn last_of(&self, subject: &str) -> Result<u64, EngineError> {
        let stream = self
            .js
            .get_stream(self.partition.stream())
            .await
            .map_err(|e| unavailable(format!("reading the stream: {e}")))?;
        match stream.get_last_raw_message_by_subject(subject).await {
            Ok(m) => Ok(m.sequence),
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => Ok(0),
            Err(e) => Err(unavailable(format!("reading the stream: {e}"))),
        }
    }
}

impl Proposer for NatsProposer {
    fn propose(&self, tenant: &str, after: u64, payload: &[u8]) -> neardup_index::Result<u64> {
        // The server's limit (1 MiB unless its max_payload says more); 0
        // until the first connection told it.
        let max = self.client.server_info().max_payload;
        if max > 0 && payload.len() > max {
            return Err(EngineError::too_large("command bytes (the NATS server's max_payload)", max, payload.len()));
        }
        // Called from blocking threads (the service runs engine calls with
        // spawn_blocking), never from inside the runtime.
        self.runtime.block_on(self.propose_async(tenant, after, payload))
    }

    fn max_entry_bytes(&self) -> Option<usize> {
        Some(self.client.server_info().max_payload).filter(|&m| m > 0)
    }
}

/// What the applier has done, for readiness and metrics.
#[derive(Debug, Default)]
pub struct ApplierState {
    /// The stream's last position as last seen (for lag).
    pub stream_last: AtomicU64,
    /// The last position handed to the applying thread (a reconnect
    /// resumes after it).
    pub stream_last_handed: AtomicU64,
    /// Why the applier stopped (the node then answers 503 on /readyz).
    pub failed: Mutex<Option<String>>,
    /// Commands applied since the node started.
    pub applied_total: AtomicU64,
}

/// The NATS connections of a node, shared by its partitions: one for
/// writes and one for reads, so a slow applier never delays proposals'
/// acknowledgements.
#[derive(Clone)]
struct Connections {
    writes: async_nats::Client,
    reads: async_nats::Client,
    js: jetstream::Context,
}

impl Connections {
    async fn open(cluster: &ClusterOptions) -> Result<Connections, ClusterError> {
        let addrs: Vec<async_nats::ServerAddr> = cluster
            .servers
            .iter()
            .map(|s| s.parse().map_err(|e| ClusterError(format!("{s}: {e}"))))
            .collect::<Result<_, _>>()?;
        let connect = |role: &str| {
            async_nats::ConnectOptions::new()
                .name(format!("neardup-{}-{role}", cluster.node_id))
                .retry_on_initial_connect()
                .connect(addrs.clone())
        };
        let writes = connect("writes").await.map_err(|e| ClusterError(format!("connecting to NATS: {e}")))?;
        let reads = connect("reads").await.map_err(|e| ClusterError(format!("connecting to NATS: {e}")))?;
        Ok(Connections { js: jetstream::new(writes.clone()), writes, reads })
    }
}

/// A node of a cluster: the partitions it serves (each a [`Node`]), the
/// shared API keys, and the registry of who serves what.
pub struct Cluster {
    nodes: Vec<Node>,
    /// Tenant API keys shared by every node.
    pub keys: keys::SharedKeys,
    /// Which node serves which partition.
    pub registry: registry::Registry,
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

/// Background tasks that end with their owner (a node's registry
/// heartbeat and watch; a partition's stream reader and snapshot loop —
/// the applying thread ends with its reader).
#[derive(Default)]
struct Tasks(Vec<tokio::task::AbortHandle>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// What a data directory records of the cluster it belongs to.
const LAYOUT_FILE: &str = "cluster-layout.json";

/// Refuses a data directory written with another partition count (its
/// tenants would be looked for in the wrong partitions), and records the
/// count in a new one.
fn check_layout(dir: &std::path::Path, count: u32) -> Result<(), ClusterError> {
    let path = dir.join(LAYOUT_FILE);
    let recorded = match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice::<serde_json::Value>(&b)
            .ok()
            .and_then(|v| v.get("partitions")?.as_u64())
            .ok_or_else(|| ClusterError(format!("{} is damaged", path.display())))?,
        // Written before partitions existed: one partition, if anything.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if ["replica.json", "wal", "snapshots"].iter().any(|f| dir.join(f).exists()) {
                1
            } else {
                std::fs::create_dir_all(dir).map_err(|e| ClusterError(format!("{}: {e}", dir.display())))?;
                let body = serde_json::json!({ "partitions": count }).to_string();
                neardup_fs::write_atomic(&path, body.as_bytes())
                    .map_err(|e| ClusterError(format!("{}: {e}", path.display())))?;
                return Ok(());
            }
        }
        Err(e) => return Err(ClusterError(format!("{}: {e}", path.display()))),
    };
    if recorded != u64::from(count) {
        return Err(ClusterError(format!(
            "{} holds a node of a cluster with {recorded} partition(s), and this node is started with --partitions \
             {count}: use the same count, or an empty data directory",
            dir.display()
        )));
    }
    Ok(())
}

impl Cluster {
    /// Connects, opens the shared buckets, joins the registry and starts a
    /// [`Node`] for every partition this node serves, each in its own
    /// folder of `dir` ([`Partition::dir`]). Must run inside a
    /// multi-threaded tokio runtime.
    pub async fn start(
        dir: &std::path::Path,
        opts: EngineOptions,
        cluster: ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        check_layout(dir, cluster.layout.count)?;
        let conns = Connections::open(&cluster).await?;
        let keys = keys::SharedKeys::open(&conns.js, cluster.replicas, cluster.propose_timeout).await?;
        let me = registry::NodeEntry {
            node: cluster.node_id.clone(),
            url: cluster.advertise_url.clone(),
            partitions: cluster.layout.count,
            serves: cluster.layout.served.clone(),
            at_ms: 0,
        };
        let (registry, tasks) = registry::join(&conns.js, cluster.replicas, me, &cluster.layout).await?;
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
    /// its partition: a live node that does (`None`: none is known).
    pub fn redirect_url(&self, tenant: &str) -> Option<String> {
        let p = self.partition_of(tenant);
        self.registry.url_for(p, &self.options.node_id, partition::fnv1a(tenant.as_bytes()))
    }

    /// Whether every partition served here is ready ([`Node::is_ready`]).
    pub fn is_ready(&self) -> bool {
        self.nodes.iter().all(Node::is_ready)
    }
}

/// A running replica of one partition: its engine and the task applying
/// the partition's stream.
pub struct Node {
    /// The replica engine: reads and writes go here as on a single node.
    pub engine: Arc<Engine>,
    /// The applier's progress.
    pub state: Arc<ApplierState>,
    /// Snapshot sets seen and written.
    pub snapshots: Arc<snapshots::SnapshotState>,
    /// The position of the set this node was seeded from, when it was.
    pub seeded_from: Option<u64>,
    /// The partition it replicates.
    pub partition: Partition,
    options: ClusterOptions,
    js: jetstream::Context,
    bucket: snapshots::SetBucket,
    dir: std::path::PathBuf,
    /// One set at a time from this node.
    publishing: tokio::sync::Mutex<()>,
    tasks: Tasks,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("node_id", &self.options.node_id)
            .field("partition", &self.partition)
            .field("dir", &self.dir)
            .finish()
    }
}

impl Node {
    /// The replica of an unpartitioned cluster (one partition, no key
    /// bucket or registry: see [`Cluster::start`] for a whole node).
    /// Connects, creates the stream if it is missing, opens the engine in
    /// `dir` as a replica and starts applying the stream from the node's
    /// last checkpoint. Must run inside a multi-threaded tokio runtime.
    pub async fn start(
        dir: &std::path::Path,
        opts: EngineOptions,
        cluster: ClusterOptions,
    ) -> Result<Node, ClusterError> {
        if cluster.layout.count != 1 {
            return Err(ClusterError("Node::start is for one partition; use Cluster::start".into()));
        }
        let conns = Connections::open(&cluster).await?;
        Node::start_partition(&conns, dir, opts, cluster, Partition::ONLY).await
    }

    async fn start_partition(
        conns: &Connections,
        dir: &std::path::Path,
        opts: EngineOptions,
        cluster: ClusterOptions,
        partition: Partition,
    ) -> Result<Node, ClusterError> {
        let js = conns.js.clone();
        let mut stream = ensure_stream(&js, cluster.replicas, partition).await?;
        let bucket = snapshots::bucket(&js, cluster.replicas, partition).await?;
        // A node without state starts from the newest snapshot set, if any.
        let fresh = !dir.join("replica.json").exists()
            && std::fs::read_dir(dir.join("snapshots")).map_or(true, |mut d| d.next().is_none());
        let seeded = if fresh { snapshots::seed_from_latest(&bucket, dir).await? } else { None };
        if let Some(m) = &seeded {
            tracing::info!(%partition, position = m.position, "seeded from the newest snapshot set");
        }
        let proposer = Arc::new(NatsProposer {
            partition,
            js: js.clone(),
            runtime: Handle::current(),
            timeout: cluster.propose_timeout,
            client: conns.writes.clone(),
        });
        let engine = {
            let dir = dir.to_path_buf();
            tokio::task::spawn_blocking(move || Engine::open_replica(&dir, opts, proposer))
                .await
                .map_err(|e| ClusterError(format!("opening the engine: {e}")))?
                .map_err(|e| ClusterError(format!("opening the engine: {e}")))?
        };
        let engine = Arc::new(engine);
        let info = stream.info().await.map_err(|e| ClusterError(format!("reading the stream: {e}")))?;
        let from = engine.applied_position() + 1;
        // After a trim the stream starts past the commands it dropped (even
        // when it holds none now); a new, empty stream starts at 0 or 1.
        if info.state.first_sequence > from {
            return Err(ClusterError(format!(
                "the stream {} starts at {} but this node's checkpoints end at {}: the commands between are gone; \
                 start this node with an empty data directory",
                partition.stream(),
                info.state.first_sequence,
                from - 1
            )));
        }
        let state = Arc::new(ApplierState::default());
        engine.set_catch_up_target(info.state.last_sequence);
        state.stream_last.store(info.state.last_sequence, Ordering::Relaxed);
        let read_js = jetstream::new(conns.reads.clone());
        let reader = spawn_applier(read_js, Arc::clone(&engine), Arc::clone(&state), from, partition);
        let snapshot_state = Arc::new(snapshots::SnapshotState::default());
        // The newest set, for metrics: the one seeded from, else a look.
        let newest = match &seeded {
            Some(m) => Some(m.clone()),
            None => snapshots::latest(&bucket).await.ok().flatten(),
        };
        if let Some(m) = &newest {
            snapshot_state.saw(m);
        }
        let mut node = Node {
            engine,
            state,
            snapshots: snapshot_state,
            seeded_from: seeded.map(|m| m.position),
            partition,
            options: cluster,
            js,
            bucket,
            dir: dir.to_path_buf(),
            publishing: tokio::sync::Mutex::new(()),
            tasks: Tasks(vec![reader]),
        };
        if let Some(every) = node.options.snapshot_interval {
            let loop_node = node.handle();
            node.tasks.0.push(tokio::spawn(snapshot_loop(loop_node, every)).abort_handle());
        }
        Ok(node)
    }

    /// What the snapshot loop needs of the node.
    fn handle(&self) -> SnapshotHandle {
        SnapshotHandle {
            engine: Arc::clone(&self.engine),
            snapshots: Arc::clone(&self.snapshots),
            js: self.js.clone(),
            bucket: self.bucket.clone(),
            node: self.options.node_id.clone(),
            work: self.dir.join("upload"),
            partition: self.partition,
        }
    }

    /// Writes a snapshot set of every tenant to the object store now, then
    /// drops old sets and trims the stream behind the oldest set kept (see
    /// [`snapshots`]).
    pub async fn publish_snapshot(&self) -> Result<snapshots::Manifest, ClusterError> {
        let _one = self.publishing.lock().await;
        self.handle().publish().await
    }

    /// The newest complete snapshot set in the object store.
    pub async fn latest_snapshot(&self) -> Result<Option<snapshots::Manifest>, ClusterError> {
        snapshots::latest(&self.bucket).await
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.options.node_id
    }

    /// Whether the node has applied the stream as it was at start and its
    /// applier runs.
    pub fn is_ready(&self) -> bool {
        self.engine.caught_up() && self.failure().is_none()
    }

    /// Why the applier stopped, if it did.
    pub fn failure(&self) -> Option<String> {
        self.state.failed.lock().map_or_else(|_| Some("applier state poisoned".into()), |f| f.clone())
    }

    /// Positions between the stream's last command and this node's applied
    /// position (as last seen).
    pub fn lag(&self) -> u64 {
        self.state.stream_last.load(Ordering::Relaxed).saturating_sub(self.engine.applied_position())
    }
}

/// The parts of a node the snapshot loop uses.
struct SnapshotHandle {
    engine: Arc<Engine>,
    snapshots: Arc<snapshots::SnapshotState>,
    js: jetstream::Context,
    bucket: snapshots::SetBucket,
    node: String,
    work: std::path::PathBuf,
    partition: Partition,
}

impl SnapshotHandle {
    async fn publish(&self) -> Result<snapshots::Manifest, ClusterError> {
        let m =
            snapshots::publish(&self.js, &self.bucket, &self.engine, &self.node, &self.work, self.partition).await?;
        self.snapshots.saw(&m);
        self.snapshots.written.fetch_add(1, Ordering::Relaxed);
        tracing::info!(partition = %self.partition, position = m.position, tenants = m.tenants.len(), "wrote a snapshot set");
        Ok(m)
    }
}

/// Every `every / 4`, writes a set when the newest one (by any node) is
/// older than `every`; only a caught-up node writes.
async fn snapshot_loop(h: SnapshotHandle, every: Duration) {
    let tick = (every / 4).max(Duration::from_millis(200));
    loop {
        tokio::time::sleep(tick).await;
        if !h.engine.caught_up() || h.engine.write_refusal().is_some() {
            continue;
        }
        match snapshots::latest(&h.bucket).await {
            Ok(Some(m)) if snapshots::age_seconds(&m) < every.as_secs_f64() => {
                h.snapshots.saw(&m);
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "reading the snapshot sets failed");
                continue;
            }
        }
        if let Err(e) = h.publish().await {
            tracing::warn!(error = %e, "writing a snapshot set failed; the stream keeps everything");
        }
    }
}

async fn ensure_stream(
    js: &jetstream::Context,
    replicas: usize,
    partition: Partition,
) -> Result<stream::Stream, ClusterError> {
    let name = partition.stream();
    let config = stream::Config {
        name: name.clone(),
        subjects: vec![format!("{}>", partition.subject_prefix())],
        storage: stream::StorageType::File,
        num_replicas: replicas,
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::New,
        // Commands are the durable truth: nothing ages out; checkpoints
        // decide what may be trimmed.
        max_age: Duration::ZERO,
        ..Default::default()
    };
    // The cluster may still be electing a meta leader right after start, or
    // (after a server restarted) still be learning its peers: up to a minute.
    retry(120, Duration::from_millis(500), || async {
        js.get_or_create_stream(config.clone()).await.map_err(|e| e.to_string())
    })
    .await
    .map_err(|last| ClusterError(format!("creating the JetStream stream {name}: {last}")))
}

/// Runs `attempt` until it succeeds, at most `times` times, `pause` apart
/// (right after start a NATS cluster may still be electing its leaders);
/// the last error when none did.
pub(crate) async fn retry<T, F, Fut>(times: usize, pause: Duration, mut attempt: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let mut last = String::from("no attempt");
    for _ in 0..times {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) => last = e,
        }
        tokio::time::sleep(pause).await;
    }
    Err(last)
}

/// Reads the stream from `from` and applies each command, in order, on one
/// blocking thread; a failed read starts again after the last command
/// handed over.
fn spawn_applier(
    js: jetstream::Context,
    engine: Arc<Engine>,
    state: Arc<ApplierState>,
    from: u64,
    partition: Partition,
) -> tokio::task::AbortHandle {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, bytes::Bytes)>(1024);
    let apply_state = Arc::clone(&state);
    std::thread::Builder::new()
        .name(format!("neardup-applier-{}", partition.index))
        .spawn(move || {
            while let Some((seq, payload)) = rx.blocking_recv() {
                let result = engine.apply_replicated(seq, &payload);
                apply_state.applied_total.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = result {
                    tracing::error!(seq, error = %e, "a command of the stream could not be applied; this node stops applying");
                    if let Ok(mut f) = apply_state.failed.lock() {
                        *f = Some(format!("command {seq} could not be applied: {e}"));
                    }
                    return;
                }
            }
        })
        .ok();
    tokio::spawn(async move {
        loop {
            match read_stream(&js, &tx, &state, from, partition).await {
                Ok(()) => return, // the applier thread stopped
                Err(e) if e.starts_with(TRIMMED) => {
                    tracing::error!(error = %e, "the stream was trimmed past this node; it stops applying");
                    if let Ok(mut f) = state.failed.lock() {
                        *f = Some(e);
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the command stream failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    })
    .abort_handle()
}

/// How the applier's error begins when the stream was trimmed past it.
const TRIMMED: &str = "trimmed past this node";

async fn read_stream(
    js: &jetstream::Context,
    tx: &tokio::sync::mpsc::Sender<(u64, bytes::Bytes)>,
    state: &ApplierState,
    from: u64,
    partition: Partition,
) -> Result<(), String> {
    let stream = js.get_stream(partition.stream()).await.map_err(|e| e.to_string())?;
    // After a retry, resume after what was already handed over.
    let last = state.stream_last_handed.load(Ordering::Relaxed);
    let start = from.max(last + 1);
    // A plain pull consumer without acks, with a 1 s heartbeat: when its
    // server dies the missed heartbeats end the stream within seconds and
    // the loop above makes a new one where this one stopped. (The client's
    // ordered consumer waits 15 s heartbeats to notice.)
    let consumer = stream
        .create_consumer(consumer::pull::Config {
            deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence: start },
            ack_policy: consumer::AckPolicy::None,
            inactive_threshold: Duration::from_secs(60),
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(500)
        .heartbeat(Duration::from_secs(1))
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .map_err(|e| e.to_string())?;
    let mut expect = None;
    while let Some(m) = messages.next().await {
        let m = m.map_err(|e| e.to_string())?;
        let info = m.info().map_err(|e| e.to_string())?;
        let seq = info.stream_sequence;
        // In order, none missed. Positions are never deleted but by a trim,
        // so a first message past the start means the commands this node
        // still needed were trimmed: applying on would diverge.
        if expect.is_none() && seq > start {
            return Err(format!(
                "{TRIMMED}: this node needed command {start} but the stream now starts at {seq}; restart it with an \
                 empty data directory (it then starts from the newest snapshot set)"
            ));
        }
        if expect.is_some_and(|e| seq != e) {
            return Err(format!("delivery gap: expected {expect:?}, got {seq}"));
        }
        expect = Some(seq + 1);
        state.stream_last.fetch_max(seq + info.pending, Ordering::Relaxed);
        state.stream_last_handed.store(seq, Ordering::Relaxed);
        if tx.send((seq, m.payload.clone())).await.is_err() {
            return Ok(());
        }
    }
    Err("the consumer ended".into())
}
