//! Shared state of the service: the engine and the gateway's own parts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use neardup_index::Engine;

use crate::auth::{KeyStore, Principal, Scope};
use crate::error::{ApiError, ApiResult};
use crate::journal::Journal;
use crate::metrics::Metrics;
use crate::quota::{QuotaConfig, Quotas};

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
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            max_body_bytes: 8 << 20,
            max_snapshot_bytes: 1 << 40,
            request_timeout: Duration::from_secs(30),
            quotas: QuotaConfig::default(),
            journal_capacity: 1024,
        }
    }
}

/// The state every handler gets (cheap to clone).
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<Inner>,
}

/// What [`AppState`] holds.
#[derive(Debug)]
pub struct Inner {
    /// The index engine.
    pub engine: Arc<Engine>,
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
    ready: AtomicBool,
    /// The cluster node, in cluster mode.
    cluster: std::sync::OnceLock<Arc<neardup_cluster::Node>>,
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
        AppState {
            inner: Arc::new(Inner {
                engine,
                keys,
                quotas: Quotas::new(config.quotas),
                metrics: Metrics::new(),
                journal: Journal::new(config.journal_capacity),
                config,
                ready: AtomicBool::new(true),
                cluster: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Attaches the cluster node (cluster mode; once).
    pub fn set_cluster(&self, node: Arc<neardup_cluster::Node>) {
        let _ = self.inner.cluster.set(node);
    }

    /// The cluster node, in cluster mode.
    pub fn cluster(&self) -> Option<&Arc<neardup_cluster::Node>> {
        self.inner.cluster.get()
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
    pub(crate) fn spawn_engine(&self, f: impl FnOnce(&Engine) + Send + 'static) {
        let engine = Arc::clone(&self.inner.engine);
        tokio::task::spawn_blocking(move || f(&engine));
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

    /// Runs a blocking engine call off the async workers (it may fsync).
    pub async fn run<T, F>(&self, f: F) -> ApiResult<T>
    where
        F: FnOnce(&Engine) -> neardup_index::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let engine = Arc::clone(&self.inner.engine);
        match tokio::task::spawn_blocking(move || f(&engine)).await {
            Ok(r) => r.map_err(ApiError::from),
            Err(e) => Err(ApiError::internal(format!("engine task failed: {e}"))),
        }
    }
}
