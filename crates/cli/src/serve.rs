//! `neardup serve`: the multi-tenant HTTP service (see `docs/service.md`).
//!
//! Options come from flags, then `NEARDUP_*` environment variables, then
//! the `--config` TOML file, then defaults; everything is validated before
//! the engine opens. The rest of the CLI is synchronous; this command runs
//! its own tokio runtime inside `neardup_server::run`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use neardup_server::{FileConfig, FsyncSetting, RawConfig, ServeError, StoreSetting};

use crate::usage::UsageError;

/// Serve the JSON API (tenants, items, candidates, decisions, snapshots,
/// shadow indexes, feedback) with per-tenant API keys.
///
/// The operator credential is read from NEARDUP_ADMIN_TOKEN (or
/// --admin-token-file) and sent as `Authorization: Bearer <token>`; it
/// creates tenants, each of which gets its own API key. /healthz, /readyz,
/// /metrics and /openapi.json need no credential. SIGTERM or SIGINT stops
/// accepting, drains in-flight requests and fsyncs the command log.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on, IP:PORT (port 0 picks a free one; the address
    /// is printed as `listening on ADDR`). [default: 127.0.0.1:8080]
    #[arg(long, env = "NEARDUP_LISTEN", value_name = "ADDR")]
    listen: Option<String>,

    /// Directory for the command log, snapshots, item store and keys.json.
    /// [default: ./neardup-data]
    #[arg(long, env = "NEARDUP_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// When the command log is fsynced. `always`: before every
    /// acknowledgement (an acknowledged write survives power loss);
    /// `everysec`: once a second (power loss or kernel crash loses up to
    /// ~1 s of acknowledged writes; a process crash loses nothing);
    /// `os`: left to the OS (up to ~30 s on power loss). [default: always]
    #[arg(long, env = "NEARDUP_FSYNC", value_name = "POLICY", value_parser = FsyncSetting::parse)]
    fsync: Option<FsyncSetting>,

    /// Item store: `fjall` (on disk) or `memory` (rebuilt from snapshots
    /// and the log at start). [default: fjall]
    #[arg(long, env = "NEARDUP_STORE", value_name = "KIND", value_parser = StoreSetting::parse)]
    store: Option<StoreSetting>,

    /// Largest JSON request body in bytes; checked from Content-Length
    /// before the body is read. [default: 8388608]
    #[arg(long, env = "NEARDUP_MAX_BODY_BYTES", value_name = "N")]
    max_body_bytes: Option<u64>,

    /// Largest snapshot upload in bytes. [default: 1073741824]
    #[arg(long, env = "NEARDUP_MAX_SNAPSHOT_BYTES", value_name = "N")]
    max_snapshot_bytes: Option<u64>,

    /// Whole-request timeout in milliseconds (408 after it; a write may
    /// still have been applied: retry with the same idempotency key).
    /// [default: 30000]
    #[arg(long, env = "NEARDUP_REQUEST_TIMEOUT_MS", value_name = "MS")]
    request_timeout_ms: Option<u64>,

    /// Sustained requests per second per tenant (429 + Retry-After above).
    /// [default: 5000]
    #[arg(long, env = "NEARDUP_RATE_LIMIT_RPS", value_name = "N")]
    rate_limit_rps: Option<f64>,

    /// Request burst per tenant. [default: 10000]
    #[arg(long, env = "NEARDUP_RATE_LIMIT_BURST", value_name = "N")]
    rate_limit_burst: Option<f64>,

    /// Sustained request-body bytes per second per tenant. [default: 67108864]
    #[arg(long, env = "NEARDUP_BYTE_QUOTA_PER_SEC", value_name = "N")]
    byte_quota_per_sec: Option<u64>,

    /// Request-body byte burst per tenant. [default: 134217728]
    #[arg(long, env = "NEARDUP_BYTE_QUOTA_BURST", value_name = "N")]
    byte_quota_burst: Option<u64>,

    /// File with the 32-byte snapshot encryption key (raw or 64 hex
    /// characters); snapshots at rest and downloaded are then encrypted
    /// and clear ones are refused.
    #[arg(long, env = "NEARDUP_SNAPSHOT_KEY_FILE", value_name = "FILE")]
    snapshot_key_file: Option<PathBuf>,

    /// File holding the operator token (used when NEARDUP_ADMIN_TOKEN is
    /// unset). At least 16 characters.
    #[arg(long, env = "NEARDUP_ADMIN_TOKEN_FILE", value_name = "FILE")]
    admin_token_file: Option<PathBuf>,

    /// Seconds between automatic checkpoints (snapshot every tenant, trim
    /// the log); 0 disables them. [default: 300]
    #[arg(long, env = "NEARDUP_CHECKPOINT_INTERVAL_SECS", value_name = "SECS")]
    checkpoint_interval_secs: Option<u64>,

    /// Snapshots kept per tenant. [default: 2]
    #[arg(long, env = "NEARDUP_KEEP_SNAPSHOTS", value_name = "N")]
    keep_snapshots: Option<usize>,

    /// Log format on stderr: `json` or `text` (filter with NEARDUP_LOG,
    /// e.g. `info,neardup_server=debug`). [default: json]
    #[arg(long, env = "NEARDUP_LOG_FORMAT", value_name = "FORMAT")]
    log_format: Option<String>,

    /// Cluster mode: join the NATS JetStream cluster at these servers
    /// (comma-separated `nats://HOST:PORT`); writes go through its
    /// replicated stream and every node is a replica. See docs/cluster.md.
    #[arg(long, env = "NEARDUP_CLUSTER", value_name = "URLS")]
    cluster: Option<String>,

    /// This node's id in the cluster ([A-Za-z0-9_-], up to 64).
    #[arg(long, env = "NEARDUP_NODE_ID", value_name = "ID")]
    node_id: Option<String>,

    /// Cluster mode: seconds between snapshot sets written to the
    /// cluster's object store, from which new nodes start and behind
    /// which the stream is trimmed; written by whichever node finds the
    /// newest set older than this (0 = never). [default: 600]
    #[arg(long, env = "NEARDUP_CLUSTER_SNAPSHOT_SECS", value_name = "SECS")]
    cluster_snapshot_secs: Option<u64>,

    /// Cluster mode: tenants are spread over this many partitions, each
    /// its own replicated stream (the same count on every node; 1..=256).
    /// [default: 1, every node a full replica]
    #[arg(long, env = "NEARDUP_PARTITIONS", value_name = "N")]
    partitions: Option<u32>,

    /// Cluster mode: the partitions this node serves, e.g. `0,2-3`;
    /// requests for tenants of other partitions are redirected (307) to a
    /// node that serves them. [default: all]
    #[arg(long, env = "NEARDUP_SERVE_PARTITIONS", value_name = "LIST")]
    serve_partitions: Option<String>,

    /// Cluster mode: the URL clients reach this node at
    /// (`http://HOST:PORT`), given to other nodes for their redirects.
    /// [default: http://LISTEN when --listen is not a wildcard address]
    #[arg(long, env = "NEARDUP_ADVERTISE_URL", value_name = "URL")]
    advertise_url: Option<String>,

    /// TOML file with any of the options above (snake_case keys, e.g.
    /// `listen = "0.0.0.0:8080"`, `fsync = "everysec"`); flags and
    /// environment variables win over it.
    #[arg(long, env = "NEARDUP_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Runs the service until SIGTERM/SIGINT.
pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let usage = |e: ServeError| -> anyhow::Error {
        match e {
            ServeError::Config(m) => UsageError(m).into(),
            other => anyhow::anyhow!(other),
        }
    };
    let file = match &a.config {
        Some(path) => FileConfig::load(path).map_err(usage)?,
        None => FileConfig::default(),
    };
    let raw = RawConfig {
        listen: a.listen,
        data_dir: a.data_dir,
        fsync: a.fsync,
        store: a.store,
        max_body_bytes: a.max_body_bytes,
        max_snapshot_bytes: a.max_snapshot_bytes,
        request_timeout_ms: a.request_timeout_ms,
        rate_limit_rps: a.rate_limit_rps,
        rate_limit_burst: a.rate_limit_burst,
        byte_quota_per_sec: a.byte_quota_per_sec,
        byte_quota_burst: a.byte_quota_burst,
        snapshot_key_file: a.snapshot_key_file,
        admin_token: std::env::var("NEARDUP_ADMIN_TOKEN").ok(),
        admin_token_file: a.admin_token_file,
        checkpoint_interval_secs: a.checkpoint_interval_secs,
        keep_snapshots: a.keep_snapshots,
        log_format: a.log_format,
        cluster: a.cluster,
        node_id: a.node_id,
        cluster_snapshot_secs: a.cluster_snapshot_secs,
        partitions: a.partitions,
        serve_partitions: a.serve_partitions,
        advertise_url: a.advertise_url,
    };
    let cfg = raw.or_file(file).validate().map_err(usage)?;
    neardup_server::init_logging(cfg.json_logs);
    neardup_server::run(cfg).map_err(usage)?;
    Ok(ExitCode::SUCCESS)
}
