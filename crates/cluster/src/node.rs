//! A running replica of one partition: its engine, the task applying the
//! partition's stream, and the loop writing snapshot sets.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use neardup_index::{Engine, EngineOptions};
use tokio::runtime::Handle;

use crate::error::{ClusterError, ErrorKind};
use crate::nats::Connections;
use crate::options::ClusterOptions;
use crate::partition::Partition;
use crate::proposer::NatsProposer;
use crate::snapshots;
use crate::stream::{ensure_stream, spawn_applier, ApplierState};

/// Background tasks that end with their owner (a node's registry
/// heartbeat and watch; a partition's stream reader and snapshot loop —
/// the applying thread ends with its reader).
#[derive(Default)]
pub(crate) struct Tasks(pub(crate) Vec<tokio::task::AbortHandle>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
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
    /// bucket or registry: see `Cluster::start` for a whole node).
    /// Connects, creates the stream if it is missing, opens the engine in
    /// `dir` as a replica and starts applying the stream from the node's
    /// last checkpoint. Must run inside a multi-threaded tokio runtime.
    pub async fn start(
        dir: &std::path::Path,
        opts: EngineOptions,
        cluster: ClusterOptions,
    ) -> Result<Node, ClusterError> {
        if cluster.layout.count != 1 {
            return Err(ClusterError::option("layout", "Node::start is for one partition; use Cluster::start"));
        }
        let conns = Connections::open(&cluster).await?;
        Node::start_partition(&conns, dir, opts, cluster, Partition::ONLY).await
    }

    /// Starts the replica of `partition` in `dir` over `conns`.
    pub(crate) async fn start_partition(
        conns: &Connections,
        dir: &std::path::Path,
        opts: EngineOptions,
        cluster: ClusterOptions,
        partition: Partition,
    ) -> Result<Node, ClusterError> {
        let js = conns.js.clone();
        let mut stream = ensure_stream(&js, cluster.replicas, partition).await?;
        let bucket = snapshots::bucket(&js, cluster.replicas, partition, cluster.seal.clone()).await?;
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
            seal: cluster.seal.clone(),
            ids: format!("{}-{}-{}", cluster.node_id, partition.index, crate::snapshots::now_ms()),
            proposed: Default::default(),
        });
        let engine = {
            let dir = dir.to_path_buf();
            tokio::task::spawn_blocking(move || Engine::open_replica(&dir, opts, proposer))
                .await
                .map_err(ClusterError::engine)?
                .map_err(ClusterError::engine)?
        };
        let engine = Arc::new(engine);
        let info = stream.info().await.map_err(|e| ClusterError::jetstream("reading the stream", e))?;
        let from = engine.applied_position() + 1;
        // After a trim the stream starts past the commands it dropped (even
        // when it holds none now); a new, empty stream starts at 0 or 1.
        if info.state.first_sequence > from {
            return Err(ClusterError::new(ErrorKind::Trimmed {
                stream: partition.stream(),
                first: info.state.first_sequence,
                checkpoint: from - 1,
            }));
        }
        let state = Arc::new(ApplierState::default());
        engine.set_catch_up_target(info.state.last_sequence);
        state.stream_last.store(info.state.last_sequence, Ordering::Relaxed);
        // Requests of the applier (the stream's info, a new consumer) get a
        // short timeout: one sent while the stream elects a new leader is
        // never answered, and the default 5 s each held every write of the
        // node behind it; tried again, the next finds the new leader.
        let mut read_js = jetstream::new(conns.reads.clone());
        read_js.set_timeout(std::time::Duration::from_secs(2));
        let reader =
            spawn_applier(read_js, Arc::clone(&engine), Arc::clone(&state), from, partition, cluster.seal.clone());
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

    /// The stream's last position, asked of NATS now (and remembered as
    /// the last seen).
    pub async fn stream_end(&self) -> Result<u64, ClusterError> {
        let mut stream = self
            .js
            .get_stream(self.partition.stream())
            .await
            .map_err(|e| ClusterError::jetstream("reading the stream", e))?;
        let last =
            stream.info().await.map_err(|e| ClusterError::jetstream("reading the stream", e))?.state.last_sequence;
        self.state.stream_last.fetch_max(last, Ordering::Relaxed);
        Ok(last)
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
