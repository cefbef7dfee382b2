//! Shared state of the service: the engine and the gateway's own parts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use neardup_index::{Engine, Item, UpsertOutcome};

use crate::auth::{KeyStore, Principal, Scope};
use crate::error::{ApiError, ApiResult, GatewayKind};
use crate::journal::Journal;
use crate::metrics::Metrics;
use crate::quota::{QuotaConfig, Quotas};

/// Largest item a single upsert fingerprints on an async worker (about
/// 0.3 ms of work); larger ones are fingerprinted on a blocking thread.
pub const QUEUED_ITEM_BYTES: usize = 16 << 10;

/// Gateway limits.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayConfig {
    /// Largest request body (JSON routes), checked from Content-Length
    /// before reading and again while reading chunked bodies.
    pub max_body_bytes: usize,
    /// Largest snapshot upload.
    pub max_snapshot_bytes: usize,
    /// Whole-request timeout.
    pub request_timeout: Duration,
    /// Per-tenant quotas.
    pub quotas: QuotaConfig,
    /// Entries kept per tenant in the decision and audit rings.
    pub journal_capacity: usize,
    /// The content stores items may be read from by `content_uri`.
    pub content_stores: Vec<crate::content::StoreConfig>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            max_body_bytes: 8 << 20,
            max_snapshot_bytes: 1 << 40,
            request_timeout: Duration::from_secs(30),
            quotas: QuotaConfig::default(),
            journal_capacity: 1024,
            content_stores: Vec::new(),
        }
    }
}

/// The state every handler gets (cheap to clone).
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<Inner>,
}

/// Where tenants' engines are.
#[derive(Debug, Clone)]
pub enum Engines {
    /// One engine holds every tenant (single-node mode).
    One(Arc<Engine>),
    /// A cluster node: a tenant's engine is its partition's replica, when
    /// this node serves that partition.
    Cluster(Arc<neardup_cluster::Cluster>),
}

/// What [`AppState`] holds.
#[derive(Debug)]
pub struct Inner {
    /// The index engines.
    pub engines: Engines,
    /// Credentials.
    pub keys: KeyStore,
    /// Quotas.
    pub quotas: Quotas,
    /// Metrics.
    pub metrics: Metrics,
    /// Decision and audit rings.
    pub journal: Journal,
    /// Limits.
    pub config: GatewayConfig,
    /// Reads waiting for a log position (`min_lsn`).
    pub waiters: crate::waiters::Waiters,
    /// Content stores (`content_uri`).
    pub content: crate::content::ContentStores,
    ready: AtomicBool,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl AppState {
    /// State over an open engine and key store; ready at once.
    pub fn new(engine: Arc<Engine>, keys: KeyStore, config: GatewayConfig) -> AppState {
        AppState::over(Engines::One(engine), keys, config)
    }

    /// State over a cluster node's partitions (cluster mode).
    pub fn clustered(cluster: Arc<neardup_cluster::Cluster>, keys: KeyStore, config: GatewayConfig) -> AppState {
        AppState::over(Engines::Cluster(cluster), keys, config)
    }

    fn over(engines: Engines, keys: KeyStore, config: GatewayConfig) -> AppState {
        AppState {
            inner: Arc::new(Inner {
                engines,
                keys,
                quotas: Quotas::new(config.quotas),
                metrics: Metrics::new(),
                journal: Journal::new(config.journal_capacity),
                content: crate::content::ContentStores::new(config.content_stores.clone()),
                config,
                waiters: crate::waiters::Waiters::default(),
                ready: AtomicBool::new(true),
            }),
        }
    }

    /// The cluster node, in cluster mode.
    pub fn cluster(&self) -> Option<&Arc<neardup_cluster::Cluster>> {
        match &self.inner.engines {
            Engines::One(_) => None,
            Engines::Cluster(c) => Some(c),
        }
    }

    /// Every engine of this node (one per partition served here).
    pub fn engines(&self) -> Vec<Arc<Engine>> {
        match &self.inner.engines {
            Engines::One(e) => vec![Arc::clone(e)],
            Engines::Cluster(c) => c.nodes().iter().map(|n| Arc::clone(&n.engine)).collect(),
        }
    }

    /// The engine holding `tenant`; in a partitioned cluster, an error
    /// that redirects to a node serving its partition when this one does
    /// not.
    pub fn engine_for(&self, tenant: &str) -> ApiResult<Arc<Engine>> {
        match &self.inner.engines {
            Engines::One(e) => Ok(Arc::clone(e)),
            Engines::Cluster(c) => match c.local(tenant) {
                Some(n) => Ok(Arc::clone(&n.engine)),
                None => Err(self.elsewhere(c, tenant)),
            },
        }
    }

    /// In a partitioned cluster, the answer for a request about `tenant`
    /// when this node does not serve its partition; `None` when it does.
    pub fn redirect_for(&self, tenant: &str) -> Option<ApiError> {
        self.engine_for(tenant).err()
    }

    /// With home redirects on, the answer for a write of `tenant` when its
    /// home is another node; `None` when it is this one (or none is known,
    /// or the rule is off).
    pub fn home_for(&self, tenant: &str) -> Option<ApiError> {
        let (node, base_url) = self.cluster()?.home_elsewhere(tenant)?;
        Some(ApiError::gateway(GatewayKind::OtherHome { tenant: tenant.to_string(), node, base_url }))
    }

    fn elsewhere(&self, c: &neardup_cluster::Cluster, tenant: &str) -> ApiError {
        let p = c.partition_of(tenant);
        ApiError::gateway(GatewayKind::OtherPartition {
            tenant: tenant.to_string(),
            partition: p.to_string(),
            base_url: c.redirect_url(tenant),
        })
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::Acquire)
    }

    /// Marks the service ready or not (not ready while shutting down).
    pub fn set_ready(&self, ready: bool) {
        self.inner.ready.store(ready, Ordering::Release);
    }

    /// Authorizes `p` for `scope` on `tenant` and charges the tenant's quota.
    pub fn enter(&self, p: &Principal, tenant: &str, scope: Scope, body_bytes: usize) -> ApiResult<()> {
        p.require(tenant, scope)?;
        if let Err(e) = self.quotas.admit(tenant, body_bytes as u64) {
            self.metrics.rate_limited(tenant);
            return Err(e);
        }
        Ok(())
    }

    /// Starts a blocking engine task that outlives the request handler (a
    /// streamed response body).
    pub(crate) fn spawn_engine(&self, tenant: &str, f: impl FnOnce(&Engine) + Send + 'static) -> ApiResult<()> {
        let engine = self.engine_for(tenant)?;
        tokio::task::spawn_blocking(move || f(&engine));
        Ok(())
    }

    /// Runs a key store call off the async workers: it may fsync, and in
    /// cluster mode it waits for the shared key bucket.
    pub async fn keys_call<T, F>(&self, f: F) -> ApiResult<T>
    where
        F: FnOnce(&crate::auth::KeyStore) -> ApiResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let state = self.clone();
        match tokio::task::spawn_blocking(move || f(&state.keys)).await {
            Ok(r) => r,
            Err(e) => Err(ApiError::internal(format!("key store task failed: {e}"))),
        }
    }

    /// Runs a blocking call on the engine holding `tenant` off the async
    /// workers (it may fsync).
    pub async fn run<T, F>(&self, tenant: &str, f: F) -> ApiResult<T>
    where
        F: FnOnce(&Engine) -> neardup_index::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let engine = self.engine_for(tenant)?;
        match tokio::task::spawn_blocking(move || f(&engine)).await {
            Ok(r) => r.map_err(ApiError::from),
            Err(e) => Err(ApiError::internal(format!("engine task failed: {e}"))),
        }
    }

    /// Upserts one item. It joins the tenant's queue of writes from this
    /// task — fingerprinted here, written in a round by whichever thread
    /// leads the queue, answered once durable (cluster mode: stored by the
    /// log's quorum and applied here) — so no blocking thread waits per
    /// write; items over [`QUEUED_ITEM_BYTES`] (too long to fingerprint on
    /// an async worker) take [`AppState::run`]. As with `run`, a request
    /// that times out still lands.
    pub async fn upsert(&self, tenant: &str, item: Item) -> ApiResult<UpsertOutcome> {
        let engine = self.engine_for(tenant)?;
        if item.content.len() > QUEUED_ITEM_BYTES {
            let t = tenant.to_string();
            return self.run(tenant, move |e| e.upsert(&t, item)).await;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let answer = Box::new(move |r| {
            let _ = tx.send(r);
        });
        // When the queue needs a leader for this write, its rounds run on a
        // blocking thread, which leads while writes keep coming.
        let e = Arc::clone(&engine);
        let spawn: neardup_index::Spawn = Arc::new(move |lead| {
            let e = Arc::clone(&e);
            tokio::task::spawn_blocking(move || e.lead(lead));
        });
        engine.upsert_queued(tenant, item, answer, spawn)?;
        match rx.await {
            Ok(r) => r.map_err(ApiError::from),
            Err(_) => Err(ApiError::internal("the write's answer was lost")),
        }
    }

    /// Reads an item's raw content from its store (see
    /// [`crate::content::ContentStores::read`]) and records the access in
    /// the tenant's audit log, whatever the outcome: `p` read the item's
    /// content from its object, for a purpose.
    pub async fn read_content(
        &self,
        p: &Principal,
        tenant: &str,
        req: crate::content::ReadRequest<'_>,
    ) -> Result<crate::content::Fetched, crate::content::ContentError> {
        let r = self.content.read(tenant, req.uri, req.cap, req.expect).await;
        let outcome = match &r {
            Ok(f) => format!(
                "ok, {} bytes from store {} (etag {}, blake3 {})",
                f.text.len(),
                f.source.store,
                f.source.etag.as_deref().unwrap_or("none"),
                f.source.blake3
            ),
            Err(e) => format!("refused: {e}"),
        };
        self.journal.content_access(
            tenant,
            p.actor(),
            crate::journal::ContentAccess {
                item_id: req.item_id,
                object: &crate::content::shorten(req.uri),
                purpose: req.purpose.as_str(),
                outcome,
            },
        );
        r
    }

    /// Runs a blocking call on every engine of this node, in order, off
    /// the async workers; the results in the same order.
    pub async fn run_each<T, F>(&self, f: F) -> ApiResult<Vec<T>>
    where
        F: Fn(&Engine) -> neardup_index::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let engines = self.engines();
        match tokio::task::spawn_blocking(move || {
            engines.iter().map(|e| f(e)).collect::<neardup_index::Result<Vec<T>>>()
        })
        .await
        {
            Ok(r) => r.map_err(ApiError::from),
            Err(e) => Err(ApiError::internal(format!("engine task failed: {e}"))),
        }
    }
}
