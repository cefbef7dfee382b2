//! `neardup serve`: the multi-tenant HTTP service (see `docs/service.md`).
//!
//! Options come from flags, then `NEARDUP_*` environment variables, then
//! the `--config` TOML file, then defaults; everything is validated before
//! the engine opens. The rest of the CLI is synchronous; this command runs
//! its own tokio runtime inside `neardup_server::run`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use neardup_server::{ServeError, ServeSettings};

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
    /// Every option but `--config`, defined once with the service.
    #[command(flatten)]
    settings: ServeSettings,

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
        Some(path) => ServeSettings::load(path).map_err(usage)?,
        None => ServeSettings::default(),
    };
    let flags = ServeSettings { admin_token: std::env::var("NEARDUP_ADMIN_TOKEN").ok(), ..a.settings };
    let cfg = flags.or(file).validate().map_err(usage)?;
    neardup_server::init_logging(cfg.json_logs);
    neardup_server::run(cfg).map_err(usage)?;
    Ok(ExitCode::SUCCESS)
}
