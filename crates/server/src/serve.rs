//! Running the service: logging, the engine, the socket, periodic
//! checkpoints, and graceful shutdown on SIGTERM/SIGINT that stops
//! accepting, drains in-flight requests and fsyncs the command log.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use neardup_index::Engine;
use tokio::net::TcpListener;

use crate::auth::KeyStore;
use crate::config::ServerConfig;
use crate::error::ServeError;
use crate::routes::app;
use crate::state::AppState;

/// Installs the global `tracing` subscriber on stderr: JSON lines or text,
/// filtered by `NEARDUP_LOG` (default `info`).
pub fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NEARDUP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if json { builder.json().flatten_event(true).try_init() } else { builder.try_init() };
}

/// Opens everything and serves until SIGTERM or SIGINT (blocking; builds
/// its own tokio runtime). Prints `listening on ADDR` to stdout once bound.
pub fn run(cfg: ServerConfig) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("neardup-serve")
        .build()
        .map_err(|e| ServeError::Io(format!("starting the runtime: {e}")))?;
    rt.block_on(async move {
        std::fs::create_dir_all(&cfg.data_dir)
            .map_err(|e| ServeError::Io(format!("creating {}: {e}", cfg.data_dir.display())))?;
        let keys = KeyStore::open(Some(cfg.data_dir.join("keys.json")), Some(&cfg.admin_token))
            .map_err(|e| ServeError::Config(e.to_string()))?;
        // Bound first: a cluster node advertises the address it got.
        let listener =
            TcpListener::bind(cfg.listen).await.map_err(|e| ServeError::Io(format!("binding {}: {e}", cfg.listen)))?;
        let addr = listener.local_addr().map_err(|e| ServeError::Io(e.to_string()))?;
        let (dir, opts) = (cfg.data_dir.clone(), cfg.engine_options());
        // Cluster mode: the node (its partitions' appliers) lives as long
        // as serving.
        let state = match cfg.cluster.clone() {
            None => {
                let engine = tokio::task::spawn_blocking(move || Engine::open(&dir, opts))
                    .await
                    .map_err(|e| ServeError::Io(format!("opening the engine: {e}")))?
                    .map_err(ServeError::Engine)?;
                AppState::new(Arc::new(engine), keys, cfg.gateway.clone())
            }
            Some(mut c) => {
                if c.advertise_url.is_none() && !addr.ip().is_unspecified() {
                    c.advertise(&format!("http://{addr}")).map_err(|e| ServeError::Config(e.to_string()))?;
                }
                let cluster = neardup_cluster::Cluster::start(&dir, opts, c)
                    .await
                    .map_err(|e| ServeError::Config(e.to_string()))?;
                for n in cluster.nodes() {
                    tracing::info!(node = n.node_id(), partition = %n.partition, lag = n.lag(), "joined the cluster");
                }
                let cluster = Arc::new(cluster);
                // Tenant keys are shared through the cluster's key bucket;
                // this node's copy follows it.
                keys.share(Arc::new(SharedKeys(cluster.keys.clone())));
                AppState::clustered(cluster, keys, cfg.gateway.clone())
            }
        };
        let _key_watch = state.cluster().map(|c| {
            let watching = state.clone();
            c.keys.watch(move |(id, record)| watching.keys.apply_shared(&id, record.as_deref()))
        });
        for engine in state.engines() {
            let r = engine.recovery_report();
            tracing::info!(
                snapshots_loaded = r.snapshots_loaded.len(),
                snapshots_rejected = r.snapshots_rejected.len(),
                records_replayed = r.records_replayed,
                log_bytes_dropped = r.log.bytes_dropped,
                "engine open"
            );
            for cut in &r.log.cuts {
                tracing::warn!(%cut, "command log repaired");
            }
            for rej in &r.snapshots_rejected {
                tracing::warn!(snapshot = %rej, "snapshot rejected; an older one or the log was used");
            }
            for img in &r.index_images_rebuilt {
                tracing::warn!(snapshot = %img, "damaged index image set aside; the index was rebuilt from the store");
            }
            seed_snapshot_ages(&state, engine.dir());
        }
        raise_fd_limit();
        tracing::info!(%addr, fsync = ?cfg.fsync, store = ?cfg.store, "listening");
        println!("listening on {addr}");
        if let Some(every) = cfg.checkpoint_interval {
            tokio::spawn(checkpoint_loop(state.clone(), every));
        }
        serve(listener, state.clone(), shutdown_signal()).await?;
        state.set_ready(false);
        tracing::info!("draining done; checkpointing so the next start is quick");
        let engines = state.engines();
        tokio::task::spawn_blocking(move || {
            // A checkpoint makes the next start load each tenant's index
            // image instead of reading the store; if it fails, the command
            // log still holds everything: flush it.
            for e in &engines {
                if let Err(err) = e.checkpoint() {
                    tracing::warn!(error = %err, "shutdown checkpoint failed; the command log keeps everything");
                }
                e.sync()?;
            }
            Ok(())
        })
        .await
        .map_err(|e| ServeError::Io(format!("flushing: {e}")))?
        .map_err(ServeError::Engine)?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// The cluster's key bucket as the key store sees it.
struct SharedKeys(neardup_cluster::keys::SharedKeys);

impl crate::auth::KeyReplica for SharedKeys {
    fn put(&self, id: &str, record: &[u8]) -> Result<(), String> {
        self.0.put(id, record)
    }
    fn remove(&self, id: &str) -> Result<(), String> {
        self.0.remove(id)
    }
}

/// How long a connection may take to send a request's headers. A client
/// that sends half a request is closed after it, so such connections cannot
/// pile up until the process runs out of file descriptors.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `state` on `listener` until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    serve_with(listener, state, shutdown, HEADER_READ_TIMEOUT).await
}

/// [`serve`] with a chosen header-read timeout.
pub async fn serve_with(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    header_read_timeout: Duration,
) -> Result<(), ServeError> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let app = app(state.clone());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, or a connection gone before
                    // it was accepted: back off a moment and keep serving.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection closed with an error");
            }
        });
    }
    state.set_ready(false);
    tracing::info!("shutdown requested; draining in-flight requests");
    graceful.shutdown().await;
    Ok(())
}

/// Raises the soft limit on open files to the hard limit (Unix), so that
/// the service is not capped at an inherited 1,024 connections.
fn raise_fd_limit() {
    #[cfg(unix)]
    {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        match getrlimit(Resource::RLIMIT_NOFILE) {
            Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                Ok(()) => tracing::info!(from = soft, to = hard, "raised the open-file limit"),
                Err(e) => tracing::warn!(soft, hard, error = %e, "could not raise the open-file limit"),
            },
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not read the open-file limit"),
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

async fn checkpoint_loop(state: AppState, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let started = std::time::Instant::now();
        match state.run_each(|e| e.checkpoint()).await {
            Ok(reports) => {
                let now = SystemTime::now();
                for report in reports {
                    for (tenant, _) in &report.snapshots {
                        state.metrics.snapshot_written(tenant, now);
                    }
                    tracing::info!(
                        snapshots = report.snapshots.len(),
                        segments_removed = report.segments_removed,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "checkpoint"
                    );
                }
            }
            Err(e) => tracing::error!(error = %e, "checkpoint failed; the command log keeps everything"),
        }
    }
}

/// Snapshot age starts from the newest snapshot file of each tenant.
fn seed_snapshot_ages(state: &AppState, data_dir: &Path) {
    let Ok(tenants) = std::fs::read_dir(data_dir.join("snapshots")) else { return };
    for t in tenants.flatten() {
        let Ok(name) = t.file_name().into_string() else { continue };
        let newest = std::fs::read_dir(t.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|f| f.file_name().to_string_lossy().ends_with(".snap"))
            .filter_map(|f| f.metadata().ok()?.modified().ok())
            .max();
        if let Some(at) = newest {
            state.metrics.snapshot_written(&name, at);
        }
    }
}
