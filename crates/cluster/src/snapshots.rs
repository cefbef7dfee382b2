//! Snapshot sets in a JetStream object store: what a new or wiped node
//! starts from, and what lets the command stream be trimmed.
//!
//! A *set* is every tenant's full snapshot (the single-node snapshot
//! format: checksummed frames, encrypted with the snapshot key when the
//! nodes have one) plus a manifest, written last, that names them and the
//! log position `P` the set covers: `P` is the node's applied position
//! when the set began, and each tenant's snapshot covers the tenant at `P`
//! or later. A node seeded from a set applies the stream from `P + 1`;
//! entries a tenant's snapshot already covers are skipped, as after any
//! restart. Objects are named `sets/{P:020}-{node}/{tenant}` and
//! `sets/{P:020}-{node}/manifest.json` (two nodes writing a set at one
//! position never mix); a set without its manifest (the writer died) is
//! ignored and removed by the next writer.
//!
//! After a set is written, sets beyond the newest [`KEEP_SETS`] are deleted
//! and the stream is purged below the oldest set kept, so the log holds
//! what a node seeded from any kept set needs and no more.
//!
//! A set is trusted only when its manifest verifies (with the cluster
//! secret, when the nodes have one: [`crate::secret`]) and names a position
//! the command stream has reached; each tenant's snapshot must match the
//! BLAKE3 digest its manifest gives. Sets that are not trusted are never
//! seeded from, never count as newer than a trusted one, and never decide
//! how far the stream is purged.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, object_store};
use futures_util::StreamExt;
use neardup_index::Engine;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use crate::error::ClusterError;
use crate::nats::until_answered;
use crate::partition::Partition;
use crate::secret::{Kind, Seal};

/// The object store bucket holding snapshot sets (of the only partition;
/// see [`Partition::bucket`]).
pub const BUCKET: &str = crate::partition::SNAPSHOT_BUCKET;
/// Snapshot sets kept; the stream keeps what the oldest of them needs.
pub const KEEP_SETS: usize = 2;
const MANIFEST: &str = "manifest.json";

/// What a snapshot set holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// Every command of the log up to here is covered.
    pub position: u64,
    /// The node that wrote it.
    pub node: String,
    /// When it was finished, Unix ms.
    pub created_ms: u64,
    pub tenants: Vec<SetTenant>,
}

/// One tenant's snapshot in a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetTenant {
    pub tenant: String,
    /// The log position the tenant's snapshot covers (at or after the set's).
    pub covered_lsn: u64,
    pub bytes: u64,
    /// BLAKE3 of the snapshot's bytes, hex (absent in sets written before
    /// it was recorded; required when the nodes have a cluster secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
}

/// A set's id: its position (20 digits, so ids sort by position) and node.
fn set_id(position: u64, node: &str) -> String {
    format!("{position:020}-{node}")
}

fn position_of(id: &str) -> Option<u64> {
    id.get(..20)?.parse().ok()
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn err(what: &str, e: impl std::fmt::Display) -> ClusterError {
    ClusterError::snapshot(what, e)
}

/// A snapshot bucket: its objects, and the stream that holds them (which
/// [`names`] reads).
#[derive(Clone)]
pub struct SetBucket {
    objects: object_store::ObjectStore,
    stream: jetstream::stream::Stream,
    /// The bucket's name (its metadata subjects are `$O.{name}.M.*`).
    name: String,
    /// The partition's command stream, whose end bounds a set's position.
    js: jetstream::Context,
    partition: Partition,
    seal: Seal,
}

impl std::fmt::Debug for SetBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetBucket").field("name", &self.name).finish_non_exhaustive()
    }
}

impl SetBucket {
    /// The objects, to put, get and delete.
    pub fn objects(&self) -> &object_store::ObjectStore {
        &self.objects
    }
}

/// The snapshot bucket of `partition`, created if missing.
pub async fn bucket(
    js: &jetstream::Context,
    replicas: usize,
    partition: Partition,
    seal: Seal,
) -> Result<SetBucket, ClusterError> {
    let name = partition.bucket();
    let objects = match js.get_object_store(&name).await {
        Ok(b) => b,
        Err(_) => create_bucket(js, replicas, &name).await?,
    };
    // An object store is the stream `OBJ_{bucket}` (the JetStream object
    // store convention every client follows). Retried like every set-up
    // step: nodes started together all ask the servers at once, and a
    // request timed out there (seen once in six runs of three nodes).
    let stream = until_answered(|| async { js.get_stream(format!("OBJ_{name}")).await.map_err(|e| e.to_string()) })
        .await
        .map_err(|last| ClusterError::jetstream("reading the snapshot bucket", last))?;
    Ok(SetBucket { objects, stream, name, js: js.clone(), partition, seal })
}

async fn create_bucket(
    js: &jetstream::Context,
    replicas: usize,
    name: &str,
) -> Result<object_store::ObjectStore, ClusterError> {
    let config = object_store::Config {
        bucket: name.to_string(),
        description: Some("neardup snapshot sets".into()),
        num_replicas: replicas,
        storage: jetstream::stream::StorageType::File,
        ..Default::default()
    };
    until_answered(|| async {
        match js.create_object_store(config.clone()).await {
            Ok(b) => Ok(b),
            // Another node may have created it meanwhile.
            Err(e) => js.get_object_store(name).await.map_err(|_| e.to_string()),
        }
    })
    .await
    .map_err(|last| ClusterError::jetstream(format!("creating the object store {name}"), last))
}

/// Every live object name in the bucket.
///
/// Read from the stream's subjects, not with the object store's `list`:
/// `list` reads a consumer until a message says none are pending, and on
/// nats-server 2.9 a listing after objects were deleted was seen (once, in
/// a test) never to end. Here each object's metadata subject is named by
/// the stream's own subject index, and its last message (the object's
/// current metadata, or its deletion) is fetched by a request with a time
/// limit — every step ends.
pub async fn names(bucket: &SetBucket) -> Result<Vec<String>, ClusterError> {
    let filter = format!("$O.{}.M.>", bucket.name);
    let mut subjects = bucket.stream.info_with_subjects(&filter).await.map_err(|e| err("listing snapshot sets", e))?;
    let mut out = Vec::new();
    while let Some(subject) = subjects.next().await {
        let (subject, _) = subject.map_err(|e| err("listing snapshot sets", e))?;
        let message = match bucket.stream.get_last_raw_message_by_subject(&subject).await {
            Ok(m) => m,
            // Purged since the subjects were read (another node pruning).
            Err(e) if e.kind() == jetstream::stream::LastRawMessageErrorKind::NoMessageFound => continue,
            Err(e) => return Err(err("listing snapshot sets", e)),
        };
        let info: object_store::ObjectInfo = serde_json::from_slice(&message.payload)
            .map_err(|e| ClusterError::encoding("an object's metadata in the snapshot bucket", e))?;
        if !info.deleted {
            out.push(info.name);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The ids of the complete sets among object `names`, newest first.
fn complete_among(names: &[String]) -> Vec<String> {
    let mut sets: Vec<String> = names
        .iter()
        .filter_map(|n| n.strip_prefix("sets/")?.strip_suffix(&format!("/{MANIFEST}")))
        .filter(|id| position_of(id).is_some())
        .map(str::to_string)
        .collect();
    sets.sort_unstable_by(|a, b| b.cmp(a));
    sets
}

/// The manifest of set `id`: `Ok(None)` when it is not to be trusted
/// (logged: its tag does not verify, it is not one this node reads, or its
/// position is past `stream_last`, where the stream has not been).
async fn read_manifest(store: &SetBucket, id: &str, stream_last: u64) -> Result<Option<Manifest>, ClusterError> {
    let name = format!("sets/{id}/{MANIFEST}");
    let mut object = store.objects().get(name.as_str()).await.map_err(|e| err("reading a snapshot manifest", e))?;
    let mut bytes = Vec::new();
    // A manifest is small: a larger one is not one of ours.
    (&mut object).take(64 << 20).read_to_end(&mut bytes).await.map_err(|e| err("reading a snapshot manifest", e))?;
    let why = match store.seal.open(Kind::Manifest, &name, &bytes) {
        Err(why) => why,
        Ok(json) => match serde_json::from_slice::<Manifest>(json) {
            Err(e) => format!("it does not parse: {e}"),
            Ok(m) if m.format != 1 || set_id(m.position, &m.node) != id => "it is not one this node reads".into(),
            Ok(m) if m.position > stream_last => {
                format!("it claims position {} but the stream ends at {stream_last}", m.position)
            }
            Ok(m) if store.seal.is_set() && m.tenants.iter().any(|t| t.blake3.is_none()) => {
                "a tenant's snapshot has no digest".into()
            }
            Ok(m) => return Ok(Some(m)),
        },
    };
    tracing::warn!(set = id, %why, "a snapshot set that is not trusted");
    Ok(None)
}

/// The command stream's last position.
async fn stream_last(store: &SetBucket) -> Result<u64, ClusterError> {
    let mut stream = store
        .js
        .get_stream(store.partition.stream())
        .await
        .map_err(|e| ClusterError::jetstream("reading the stream", e))?;
    Ok(stream.info().await.map_err(|e| ClusterError::jetstream("reading the stream", e))?.state.last_sequence)
}

/// The trusted complete sets among object `names`, newest first, up to
/// `want` of them.
async fn trusted_sets(store: &SetBucket, names: &[String], want: usize) -> Result<Vec<Manifest>, ClusterError> {
    let last = stream_last(store).await?;
    let mut out = Vec::new();
    for id in complete_among(names) {
        if out.len() == want {
            break;
        }
        if let Some(m) = read_manifest(store, &id, last).await? {
            out.push(m);
        }
    }
    Ok(out)
}

/// The newest trusted set, if any.
pub async fn latest(store: &SetBucket) -> Result<Option<Manifest>, ClusterError> {
    Ok(trusted_sets(store, &names(store).await?, 1).await?.into_iter().next())
}

/// Writes a set of every tenant of `engine` (see the module docs), then
/// drops sets beyond [`KEEP_SETS`] and trims the stream behind the oldest
/// one kept. `work` is a folder for the snapshot files on their way out.
pub async fn publish(
    js: &jetstream::Context,
    store: &SetBucket,
    engine: &std::sync::Arc<Engine>,
    node: &str,
    work: &Path,
    partition: Partition,
) -> Result<Manifest, ClusterError> {
    let position = engine.applied_position();
    let prefix = format!("sets/{}/", set_id(position, node));
    tokio::fs::create_dir_all(work).await.map_err(|e| err("creating the snapshot work folder", e))?;
    let tenants = engine.tenants().map_err(|e| err("listing tenants", e))?;
    let mut entries = Vec::new();
    for tenant in tenants {
        let path = work.join(format!("{tenant}.snap"));
        let (e, p, t) = (std::sync::Arc::clone(engine), path.clone(), tenant.clone());
        let written = tokio::task::spawn_blocking(move || -> std::io::Result<neardup_index::Result<(u64, String)>> {
            let mut f = std::io::BufWriter::new(std::fs::File::create(&p)?);
            let covered = match e.snapshot_to(&t, &mut f) {
                Ok(h) => h.covered_lsn,
                Err(e) => return Ok(Err(e)),
            };
            std::io::Write::flush(&mut f)?;
            let digest = blake3::Hasher::new().update_reader(std::fs::File::open(&p)?)?.finalize();
            Ok(Ok((covered, digest.to_hex().to_string())))
        })
        .await
        .map_err(|e| err("writing a snapshot", e))?
        .map_err(|e| err("writing a snapshot", e))?;
        let (covered_lsn, digest) = match written {
            Ok(c) => c,
            // Dropped since it was listed: not in the set.
            Err(e) if matches!(e.kind(), neardup_index::ErrorKind::TenantNotFound { .. }) => continue,
            Err(e) => return Err(ClusterError::snapshot(format!("snapshot of {tenant}"), e)),
        };
        let mut file = tokio::fs::File::open(&path).await.map_err(|e| err("reading a snapshot", e))?;
        let info = store
            .objects()
            .put(format!("{prefix}{tenant}").as_str(), &mut file)
            .await
            .map_err(|e| err("uploading a snapshot", e))?;
        let _ = tokio::fs::remove_file(&path).await;
        entries.push(SetTenant { tenant, covered_lsn, bytes: info.size as u64, blake3: Some(digest) });
    }
    let manifest = Manifest { format: 1, position, node: node.to_string(), created_ms: now_ms(), tenants: entries };
    let json = serde_json::to_vec_pretty(&manifest).map_err(|e| ClusterError::encoding("encoding the manifest", e))?;
    let name = format!("{prefix}{MANIFEST}");
    let bytes = store.seal.seal(Kind::Manifest, &name, &json);
    store.objects().put(name.as_str(), &mut &bytes[..]).await.map_err(|e| err("uploading the manifest", e))?;
    prune(js, store, partition).await?;
    Ok(manifest)
}

/// Deletes sets beyond [`KEEP_SETS`] and unfinished ones older than the
/// newest, then purges the stream below the oldest set kept.
async fn prune(js: &jetstream::Context, store: &SetBucket, partition: Partition) -> Result<(), ClusterError> {
    let names = names(store).await?;
    // Only trusted sets count: a planted manifest can neither make the
    // real sets look old nor move the purge.
    let trusted = trusted_sets(store, &names, KEEP_SETS).await?;
    let kept: Vec<String> = trusted.iter().map(|m| set_id(m.position, &m.node)).collect();
    let (Some(oldest), Some(newest)) = (trusted.last().map(|m| m.position), trusted.first().map(|m| m.position)) else {
        return Ok(());
    };
    for name in &names {
        let Some(id) = name.strip_prefix("sets/").and_then(|r| r.split('/').next()) else { continue };
        let Some(p) = position_of(id) else { continue };
        // A set being written now (by another node) is at least as new as
        // every complete set: leave it.
        if !kept.iter().any(|k| k.as_str() == id) && p < newest {
            store.objects().delete(name).await.map_err(|e| err("deleting an old snapshot", e))?;
        }
    }
    if kept.len() == KEEP_SETS {
        let stream =
            js.get_stream(partition.stream()).await.map_err(|e| ClusterError::jetstream("reading the stream", e))?;
        // Keep every command after the oldest kept set's position.
        stream.purge().sequence(oldest + 1).await.map_err(|e| ClusterError::jetstream("trimming the stream", e))?;
    }
    Ok(())
}

/// Seeds an empty data directory from the newest set, when there is one:
/// downloads every tenant's snapshot into `dir/seed/` and installs them
/// ([`neardup_index::seed_replica`]). Returns the set's manifest.
pub async fn seed_from_latest(store: &SetBucket, dir: &Path) -> Result<Option<Manifest>, ClusterError> {
    let Some(manifest) = latest(store).await? else { return Ok(None) };
    let seed = dir.join("seed");
    let _ = tokio::fs::remove_dir_all(&seed).await;
    tokio::fs::create_dir_all(&seed).await.map_err(|e| err("creating the seed folder", e))?;
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for t in &manifest.tenants {
        let path = seed.join(format!("{}.snap", t.tenant));
        let mut object = store
            .objects()
            .get(format!("sets/{}/{}", set_id(manifest.position, &manifest.node), t.tenant))
            .await
            .map_err(|e| err("downloading a snapshot", e))?;
        let mut file = tokio::fs::File::create(&path).await.map_err(|e| err("writing a snapshot", e))?;
        // The object store checks the SHA-256 digest at the end of the read.
        let copied = tokio::io::copy(&mut object, &mut file).await.map_err(|e| err("downloading a snapshot", e))?;
        file.sync_all().await.map_err(|e| err("writing a snapshot", e))?;
        if copied != t.bytes {
            return Err(ClusterError::corrupt(
                format!("the snapshot of {}", t.tenant),
                format!("is {copied} bytes where the manifest says {}", t.bytes),
            ));
        }
        if let Some(want) = &t.blake3 {
            let p = path.clone();
            let got = tokio::task::spawn_blocking(move || {
                blake3::Hasher::new().update_reader(std::fs::File::open(p)?).map(|h| h.finalize().to_hex().to_string())
            })
            .await
            .map_err(|e| err("checking a snapshot", e))?
            .map_err(|e| err("checking a snapshot", e))?;
            if &got != want {
                return Err(ClusterError::corrupt(
                    format!("the snapshot of {}", t.tenant),
                    "does not match the digest its manifest gives",
                ));
            }
        }
        files.push((t.tenant.clone(), path));
    }
    let (dir2, position) = (dir.to_path_buf(), manifest.position);
    tokio::task::spawn_blocking(move || neardup_index::seed_replica(&dir2, position, files))
        .await
        .map_err(|e| err("installing the snapshot set", e))?
        .map_err(|e| err("installing the snapshot set", e))?;
    let _ = tokio::fs::remove_dir_all(&seed).await;
    Ok(Some(manifest))
}

/// Seconds since `manifest` was finished.
pub fn age_seconds(manifest: &Manifest) -> f64 {
    now_ms().saturating_sub(manifest.created_ms) as f64 / 1000.0
}

/// Keeps the newest set known to this node, for metrics.
#[derive(Debug, Default)]
pub struct SnapshotState {
    /// Unix ms when the newest set known was finished (0: none).
    pub newest_ms: std::sync::atomic::AtomicU64,
    /// Its position.
    pub newest_position: std::sync::atomic::AtomicU64,
    /// Sets this node wrote.
    pub written: std::sync::atomic::AtomicU64,
}

impl SnapshotState {
    pub(crate) fn saw(&self, m: &Manifest) {
        self.newest_ms.fetch_max(m.created_ms, Ordering::Relaxed);
        self.newest_position.fetch_max(m.position, Ordering::Relaxed);
    }

    /// Seconds since the newest set known was finished; `None` before any.
    pub fn age_seconds(&self) -> Option<f64> {
        match self.newest_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(now_ms().saturating_sub(ms) as f64 / 1000.0),
        }
    }
}
