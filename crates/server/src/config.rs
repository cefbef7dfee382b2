//! Service configuration: [`ServeSettings`], every option once (flags,
//! `NEARDUP_*` environment variables and the TOML file fill it), and the
//! validated [`ServerConfig`]. Precedence: flag > environment variable >
//! TOML file > default.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use neardup_index::{EngineOptions, FsyncPolicy, StoreKind};
use serde::Deserialize;

use crate::error::ServeError;
use crate::quota::QuotaConfig;
use crate::state::GatewayConfig;

/// When the command log is fsynced (like Redis's `appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncSetting {
    /// Before every acknowledgement: an acknowledged write survives power loss.
    Always,
    /// Once a second from a background thread: a power loss or kernel
    /// crash loses at most about the last second of acknowledged writes
    /// (a process crash loses nothing: the bytes are in the page cache).
    Everysec,
    /// Never explicitly: the OS decides (typically up to ~30 s at risk on
    /// power loss).
    Os,
}

impl FsyncSetting {
    /// Parses `always`, `everysec` or `os`.
    pub fn parse(s: &str) -> Result<FsyncSetting, String> {
        match s {
            "always" => Ok(FsyncSetting::Always),
            "everysec" => Ok(FsyncSetting::Everysec),
            "os" => Ok(FsyncSetting::Os),
            other => Err(format!("fsync must be always, everysec or os, not {other:?}")),
        }
    }

    fn policy(self) -> FsyncPolicy {
        match self {
            FsyncSetting::Always => FsyncPolicy::Always,
            FsyncSetting::Everysec => FsyncPolicy::EveryMs(1000),
            FsyncSetting::Os => FsyncPolicy::Os,
        }
    }
}

/// Where items are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreSetting {
    /// fjall on disk in `DATA_DIR/store` (restart reads it back).
    Fjall,
    /// RAM, rebuilt from snapshots and the command log on start.
    Memory,
}

impl StoreSetting {
    /// Parses `fjall` or `memory`.
    pub fn parse(s: &str) -> Result<StoreSetting, String> {
        match s {
            "fjall" => Ok(StoreSetting::Fjall),
            "memory" => Ok(StoreSetting::Memory),
            other => Err(format!("store must be fjall or memory, not {other:?}")),
        }
    }
}

/// Writes the settings struct and its merge from one list of fields, so
/// that each option is written once.
macro_rules! settings {
    ($(#[$outer:meta])* pub struct $name:ident { $( $(#[$attr:meta])* pub $field:ident : Option<$ty:ty>, )* }) => {
        $(#[$outer])*
        pub struct $name { $( $(#[$attr])* pub $field: Option<$ty>, )* }

        impl $name {
            /// These settings, each one unset here taken from `lower` (the
            /// one rule of precedence: flag and environment, then file).
            pub fn or(self, lower: $name) -> $name {
                $name { $( $field: self.$field.or(lower.$field), )* }
            }
        }
    };
}

settings! {
    /// Every `neardup serve` setting, each optional: the one definition that
    /// clap fills from flags and `NEARDUP_*` environment variables (its doc
    /// comments are the `--help` text), that the `--config` TOML file
    /// deserializes into (snake_case keys, unknown keys refused), that
    /// [`ServeSettings::or`] layers — flag > environment > file — and that
    /// [`ServeSettings::validate`] completes with defaults and checks.
    #[derive(Debug, Clone, Default, PartialEq, Deserialize, clap::Args)]
    #[serde(deny_unknown_fields)]
    pub struct ServeSettings {
        /// Address to listen on, IP:PORT (port 0 picks a free one; the address
        /// is printed as `listening on ADDR`). [default: 127.0.0.1:8080]
        #[arg(long, env = "NEARDUP_LISTEN", value_name = "ADDR")]
        pub listen: Option<String>,

        /// Directory for the command log, snapshots, item store and keys.json.
        /// [default: ./neardup-data]
        #[arg(long, env = "NEARDUP_DATA_DIR", value_name = "DIR")]
        pub data_dir: Option<PathBuf>,

        /// When the command log is fsynced. `always`: before every
        /// acknowledgement (an acknowledged write survives power loss);
        /// `everysec`: once a second (power loss or kernel crash loses up to
        /// ~1 s of acknowledged writes; a process crash loses nothing);
        /// `os`: left to the OS (up to ~30 s on power loss). [default: always]
        #[arg(long, env = "NEARDUP_FSYNC", value_name = "POLICY", value_parser = FsyncSetting::parse)]
        pub fsync: Option<FsyncSetting>,

        /// Item store: `fjall` (on disk) or `memory` (rebuilt from snapshots
        /// and the log at start). [default: fjall]
        #[arg(long, env = "NEARDUP_STORE", value_name = "KIND", value_parser = StoreSetting::parse)]
        pub store: Option<StoreSetting>,

        /// Largest JSON request body in bytes; checked from Content-Length
        /// before the body is read. [default: 8388608]
        #[arg(long, env = "NEARDUP_MAX_BODY_BYTES", value_name = "N")]
        pub max_body_bytes: Option<u64>,

        /// Largest snapshot upload in bytes. [default: 1073741824]
        #[arg(long, env = "NEARDUP_MAX_SNAPSHOT_BYTES", value_name = "N")]
        pub max_snapshot_bytes: Option<u64>,

        /// Whole-request timeout in milliseconds (408 after it; a write may
        /// still have been applied: retry with the same idempotency key).
        /// [default: 30000]
        #[arg(long, env = "NEARDUP_REQUEST_TIMEOUT_MS", value_name = "MS")]
        pub request_timeout_ms: Option<u64>,

        /// Sustained requests per second per tenant (429 + Retry-After above).
        /// [default: 5000]
        #[arg(long, env = "NEARDUP_RATE_LIMIT_RPS", value_name = "N")]
        pub rate_limit_rps: Option<f64>,

        /// Request burst per tenant. [default: 10000]
        #[arg(long, env = "NEARDUP_RATE_LIMIT_BURST", value_name = "N")]
        pub rate_limit_burst: Option<f64>,

        /// Sustained request-body bytes per second per tenant. [default: 67108864]
        #[arg(long, env = "NEARDUP_BYTE_QUOTA_PER_SEC", value_name = "N")]
        pub byte_quota_per_sec: Option<u64>,

        /// Request-body byte burst per tenant. [default: 134217728]
        #[arg(long, env = "NEARDUP_BYTE_QUOTA_BURST", value_name = "N")]
        pub byte_quota_burst: Option<u64>,

        /// File with the 32-byte snapshot encryption key (raw or 64 hex
        /// characters); snapshots at rest and downloaded are then encrypted
        /// and clear ones are refused.
        #[arg(long, env = "NEARDUP_SNAPSHOT_KEY_FILE", value_name = "FILE")]
        pub snapshot_key_file: Option<PathBuf>,

        /// File holding the operator token (used when NEARDUP_ADMIN_TOKEN is
        /// unset). At least 16 characters.
        #[arg(long, env = "NEARDUP_ADMIN_TOKEN_FILE", value_name = "FILE")]
        pub admin_token_file: Option<PathBuf>,

        /// Seconds between automatic checkpoints (snapshot every tenant, trim
        /// the log); 0 disables them. [default: 300]
        #[arg(long, env = "NEARDUP_CHECKPOINT_INTERVAL_SECS", value_name = "SECS")]
        pub checkpoint_interval_secs: Option<u64>,

        /// Snapshots kept per tenant. [default: 2]
        #[arg(long, env = "NEARDUP_KEEP_SNAPSHOTS", value_name = "N")]
        pub keep_snapshots: Option<usize>,

        /// Log format on stderr: `json` or `text` (filter with NEARDUP_LOG,
        /// e.g. `info,neardup_server=debug`). [default: json]
        #[arg(long, env = "NEARDUP_LOG_FORMAT", value_name = "FORMAT")]
        pub log_format: Option<String>,

        /// Cluster mode: join the NATS JetStream cluster at these servers
        /// (comma-separated `nats://HOST:PORT`); writes go through its
        /// replicated stream and every node is a replica. See docs/cluster.md.
        #[arg(long, env = "NEARDUP_CLUSTER", value_name = "URLS")]
        pub cluster: Option<String>,

        /// This node's id in the cluster ([A-Za-z0-9_-], up to 64).
        #[arg(long, env = "NEARDUP_NODE_ID", value_name = "ID")]
        pub node_id: Option<String>,

        /// Cluster mode: seconds between snapshot sets written to the
        /// cluster's object store, from which new nodes start and behind
        /// which the stream is trimmed; written by whichever node finds the
        /// newest set older than this (0 = never). [default: 600]
        #[arg(long, env = "NEARDUP_CLUSTER_SNAPSHOT_SECS", value_name = "SECS")]
        pub cluster_snapshot_secs: Option<u64>,

        /// Cluster mode: tenants are spread over this many partitions, each
        /// its own replicated stream (the same count on every node; 1..=256).
        /// [default: 1, every node a full replica]
        #[arg(long, env = "NEARDUP_PARTITIONS", value_name = "N")]
        pub partitions: Option<u32>,

        /// Cluster mode: the partitions this node serves, e.g. `0,2-3`;
        /// requests for tenants of other partitions are redirected (307) to a
        /// node that serves them. [default: all]
        #[arg(long, env = "NEARDUP_SERVE_PARTITIONS", value_name = "LIST")]
        pub serve_partitions: Option<String>,

        /// Cluster mode: the URL clients reach this node at
        /// (`http://HOST:PORT`), given to other nodes for their redirects.
        /// [default: http://LISTEN when --listen is not a wildcard address]
        #[arg(long, env = "NEARDUP_ADVERTISE_URL", value_name = "URL")]
        pub advertise_url: Option<String>,

        /// Cluster mode: redirect (307) each write of a tenant (upsert,
        /// batch, tombstone) to the tenant's home node, one of the live
        /// nodes with an advertised URL, so that its writers meet in one
        /// queue instead of racing for the log. Clients must follow a 307
        /// with their credentials (the Python client does, to its own
        /// nodes). [default: false]
        #[arg(long, env = "NEARDUP_HOME_REDIRECTS", value_name = "BOOL")]
        pub home_redirects: Option<bool>,

        /// Cluster mode: log each upsert with what the event feed says of
        /// its decision (closest match and score, versions, inserted or
        /// replaced), so the feed's upserts carry it as on a single node.
        /// Turn on only once every node runs this build or a later one: a
        /// node of an older build skips entries it cannot read, and would
        /// miss those writes. [default: false]
        #[arg(long, env = "NEARDUP_CLUSTER_EVENT_DECISIONS", value_name = "BOOL")]
        pub cluster_event_decisions: Option<bool>,

        /// Cluster mode: file holding the cluster secret (at least 32 random
        /// bytes, the same file on every node). Every stream entry, key
        /// record, registry entry and snapshot manifest is then tagged with
        /// it, and one that does not verify is refused on every node.
        /// [default: none: whoever can write to NATS can write to the cluster]
        #[arg(long, env = "NEARDUP_CLUSTER_SECRET_FILE", value_name = "FILE")]
        pub cluster_secret_file: Option<PathBuf>,

        /// Cluster mode: NATS credentials file (`.creds`: JWT and nkey seed).
        #[arg(long, env = "NEARDUP_NATS_CREDS_FILE", value_name = "FILE")]
        pub nats_creds_file: Option<PathBuf>,

        /// Cluster mode: file holding the NATS nkey seed (`SU…`).
        #[arg(long, env = "NEARDUP_NATS_NKEY_FILE", value_name = "FILE")]
        pub nats_nkey_file: Option<PathBuf>,

        /// Cluster mode: NATS user name (with --nats-password-file).
        #[arg(long, env = "NEARDUP_NATS_USER", value_name = "USER")]
        pub nats_user: Option<String>,

        /// Cluster mode: file holding the NATS user's password.
        #[arg(long, env = "NEARDUP_NATS_PASSWORD_FILE", value_name = "FILE")]
        pub nats_password_file: Option<PathBuf>,

        /// Cluster mode: CA certificate (PEM) to verify the NATS servers
        /// with; set, the connection must be TLS.
        #[arg(long, env = "NEARDUP_NATS_TLS_CA", value_name = "FILE")]
        pub nats_tls_ca: Option<PathBuf>,

        /// Cluster mode: client certificate (PEM) for NATS servers that
        /// verify clients (with --nats-tls-key).
        #[arg(long, env = "NEARDUP_NATS_TLS_CERT", value_name = "FILE")]
        pub nats_tls_cert: Option<PathBuf>,

        /// Cluster mode: the client certificate's private key (PEM).
        #[arg(long, env = "NEARDUP_NATS_TLS_KEY", value_name = "FILE")]
        pub nats_tls_key: Option<PathBuf>,

        /// TOML file of content stores (`[[store]]`: name, endpoint, bucket,
        /// prefix, credentials, limits, tenants) from which items may be read
        /// by `content_uri`; see docs/service.md. [default: none]
        #[arg(long, env = "NEARDUP_CONTENT_STORES", value_name = "FILE")]
        pub content_stores: Option<PathBuf>,

        /// The operator token: from NEARDUP_ADMIN_TOKEN only (never a flag,
        /// never in the file), so it stays out of process listings.
        #[arg(skip)]
        #[serde(skip)]
        pub admin_token: Option<String>,
    }
}

/// A validated service configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (port 0 picks a free port, printed at start).
    pub listen: SocketAddr,
    /// Engine directory; `keys.json` lives here too.
    pub data_dir: PathBuf,
    /// Command log fsync.
    pub fsync: FsyncSetting,
    /// Item store.
    pub store: StoreSetting,
    /// The operator token (never logged).
    pub admin_token: String,
    /// Snapshot encryption key.
    pub snapshot_key: Option<[u8; 32]>,
    /// Gateway limits.
    pub gateway: GatewayConfig,
    /// Automatic checkpoints.
    pub checkpoint_interval: Option<Duration>,
    /// Snapshots kept per tenant.
    pub keep_snapshots: usize,
    /// JSON logs (else human-readable).
    pub json_logs: bool,
    /// Cluster mode: the NATS servers and this node's id.
    pub cluster: Option<neardup_cluster::ClusterOptions>,
    /// Cluster mode: upserts are proposed with their decision's note.
    pub cluster_event_decisions: bool,
}

impl ServeSettings {
    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<ServeSettings, ServeError> {
        let bad = |e: &dyn std::fmt::Display| ServeError::Config(format!("--config {}: {e}", path.display()));
        let bytes = neardup_fs::read_small(path, 1 << 20).map_err(|e| bad(&e))?;
        let text = std::str::from_utf8(&bytes).map_err(|e| bad(&e))?;
        ServeSettings::parse(text).map_err(|e| bad(&e))
    }

    /// Parses TOML text.
    pub fn parse(text: &str) -> Result<ServeSettings, toml::de::Error> {
        toml::from_str(text)
    }

    /// Applies defaults and validates everything, with errors that name the option.
    pub fn validate(self) -> Result<ServerConfig, ServeError> {
        let bad = |m: String| ServeError::Config(m);
        let listen_s = self.listen.unwrap_or_else(|| "127.0.0.1:8080".into());
        let listen: SocketAddr =
            listen_s.parse().map_err(|e| bad(format!("--listen {listen_s:?}: not an IP:PORT address ({e})")))?;
        let data_dir = self.data_dir.unwrap_or_else(|| PathBuf::from("./neardup-data"));
        let admin_token = match (self.admin_token, self.admin_token_file) {
            (Some(t), _) if !t.trim().is_empty() => t.trim().to_string(),
            (_, Some(path)) => neardup_fs::read_small(&path, 4096)
                .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other))
                .map_err(|e| bad(format!("--admin-token-file {}: {e}", path.display())))?
                .trim()
                .to_string(),
            _ => return Err(bad("no operator credential: set NEARDUP_ADMIN_TOKEN or --admin-token-file".to_string())),
        };
        if admin_token.len() < crate::auth::KeyStore::MIN_ADMIN_TOKEN {
            return Err(bad(format!(
                "the operator token must be at least {} characters",
                crate::auth::KeyStore::MIN_ADMIN_TOKEN
            )));
        }
        let snapshot_key = match self.snapshot_key_file {
            None => None,
            Some(path) => {
                let raw = neardup_fs::read_small(&path, 1024)
                    .map_err(|e| bad(format!("--snapshot-key-file {}: {e}", path.display())))?;
                Some(parse_key(&raw).ok_or_else(|| {
                    bad(format!("--snapshot-key-file {}: must hold 32 raw bytes or 64 hex characters", path.display()))
                })?)
            }
        };
        let d = GatewayConfig::default();
        let max_body_bytes = self.max_body_bytes.unwrap_or(d.max_body_bytes as u64);
        if !(1024..=1 << 30).contains(&max_body_bytes) {
            return Err(bad(format!("--max-body-bytes must be in 1024..=1073741824, got {max_body_bytes}")));
        }
        let max_snapshot_bytes = self.max_snapshot_bytes.unwrap_or(d.max_snapshot_bytes as u64);
        if !(1024..=1 << 50).contains(&max_snapshot_bytes) {
            return Err(bad(format!("--max-snapshot-bytes must be in 1024..=2^50, got {max_snapshot_bytes}")));
        }
        let timeout_ms = self.request_timeout_ms.unwrap_or(d.request_timeout.as_millis() as u64);
        if !(1..=3_600_000).contains(&timeout_ms) {
            return Err(bad(format!("--request-timeout-ms must be in 1..=3600000, got {timeout_ms}")));
        }
        let q = QuotaConfig::default();
        let quotas = QuotaConfig {
            requests_per_sec: self.rate_limit_rps.unwrap_or(q.requests_per_sec),
            request_burst: self.rate_limit_burst.unwrap_or(q.request_burst),
            bytes_per_sec: self.byte_quota_per_sec.map(|v| v as f64).unwrap_or(q.bytes_per_sec),
            byte_burst: self.byte_quota_burst.map(|v| v as f64).unwrap_or(q.byte_burst),
        };
        for (name, v) in [
            ("--rate-limit-rps", quotas.requests_per_sec),
            ("--rate-limit-burst", quotas.request_burst),
            ("--byte-quota-per-sec", quotas.bytes_per_sec),
            ("--byte-quota-burst", quotas.byte_burst),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(format!("{name} must be a positive number, got {v}")));
            }
        }
        if quotas.request_burst < 1.0 {
            return Err(bad("--rate-limit-burst must be at least 1".into()));
        }
        let keep_snapshots = self.keep_snapshots.unwrap_or(2);
        if keep_snapshots == 0 {
            return Err(bad("--keep-snapshots must be at least 1".into()));
        }
        let json_logs = match self.log_format.as_deref().unwrap_or("json") {
            "json" => true,
            "text" => false,
            other => return Err(bad(format!("--log-format must be json or text, not {other:?}"))),
        };
        let cluster = match (self.cluster.filter(|c| !c.trim().is_empty()), self.node_id) {
            (None, None) => None,
            (Some(_), None) => return Err(bad("--cluster needs --node-id (NEARDUP_NODE_ID)".into())),
            (None, Some(_)) => {
                return Err(bad("--node-id is for cluster mode: add --cluster (NEARDUP_CLUSTER)".into()))
            }
            (Some(c), Some(id)) => {
                let mut c = neardup_cluster::ClusterOptions::new(&c, &id).map_err(|e| bad(e.to_string()))?;
                c.snapshot_interval = match self.cluster_snapshot_secs {
                    None => Some(neardup_cluster::DEFAULT_SNAPSHOT_INTERVAL),
                    Some(0) => None,
                    Some(s) => Some(Duration::from_secs(s)),
                };
                c.layout = neardup_cluster::partition::Layout::new(
                    self.partitions.unwrap_or(1),
                    self.serve_partitions.as_deref(),
                )
                .map_err(|e| bad(e.to_string()))?;
                // Without one, the address bound is advertised (at start,
                // once a port 0 has become a real port) unless it is a
                // wildcard, which names no host a client can use.
                if let Some(url) = &self.advertise_url {
                    c.advertise(url).map_err(|e| bad(e.to_string()))?;
                }
                c.home_redirects = self.home_redirects.unwrap_or(false);
                if let Some(f) = &self.cluster_secret_file {
                    c.seal = neardup_cluster::secret::Seal::from_file(f).map_err(|e| bad(e.to_string()))?;
                }
                c.nats = neardup_cluster::NatsAuth::new(
                    self.nats_creds_file.clone(),
                    self.nats_nkey_file.as_deref(),
                    self.nats_user.clone(),
                    self.nats_password_file.as_deref(),
                    self.nats_tls_ca.clone(),
                    self.nats_tls_cert.clone(),
                    self.nats_tls_key.clone(),
                )
                .map_err(|e| bad(e.to_string()))?;
                if c.advertise_url.is_none() && c.layout.count > 1 && listen.ip().is_unspecified() {
                    return Err(bad(format!(
                        "--partitions {} with --listen {listen}: add --advertise-url http://HOST:PORT, the address \
                         other nodes redirect clients to",
                        c.layout.count
                    )));
                }
                Some(c)
            }
        };
        for (set, flag) in [
            (self.cluster_snapshot_secs.is_some(), "--cluster-snapshot-secs"),
            (self.partitions.is_some(), "--partitions"),
            (self.serve_partitions.is_some(), "--serve-partitions"),
            (self.advertise_url.is_some(), "--advertise-url"),
            (self.home_redirects.is_some(), "--home-redirects"),
            (self.cluster_event_decisions.is_some(), "--cluster-event-decisions"),
            (self.cluster_secret_file.is_some(), "--cluster-secret-file"),
            (self.nats_creds_file.is_some(), "--nats-creds-file"),
            (self.nats_nkey_file.is_some(), "--nats-nkey-file"),
            (self.nats_user.is_some(), "--nats-user"),
            (self.nats_password_file.is_some(), "--nats-password-file"),
            (self.nats_tls_ca.is_some(), "--nats-tls-ca"),
            (self.nats_tls_cert.is_some(), "--nats-tls-cert"),
            (self.nats_tls_key.is_some(), "--nats-tls-key"),
        ] {
            if cluster.is_none() && set {
                return Err(bad(format!("{flag} is for cluster mode: add --cluster (NEARDUP_CLUSTER)")));
            }
        }
        let content_stores = match &self.content_stores {
            None => Vec::new(),
            Some(path) => {
                let stores = crate::content::load(path).map_err(bad)?;
                crate::content::ContentStores::check(&stores)
                    .map_err(|e| bad(format!("--content-stores {}: {e}", path.display())))?;
                stores
            }
        };
        let checkpoint_interval = match self.checkpoint_interval_secs.unwrap_or(300) {
            0 => None,
            s => Some(Duration::from_secs(s)),
        };
        Ok(ServerConfig {
            listen,
            data_dir,
            fsync: self.fsync.unwrap_or(FsyncSetting::Always),
            store: self.store.unwrap_or(StoreSetting::Fjall),
            admin_token,
            snapshot_key,
            gateway: GatewayConfig {
                max_body_bytes: max_body_bytes as usize,
                max_snapshot_bytes: max_snapshot_bytes as usize,
                request_timeout: Duration::from_millis(timeout_ms),
                quotas,
                journal_capacity: d.journal_capacity,
                content_stores,
            },
            checkpoint_interval,
            keep_snapshots,
            json_logs,
            cluster,
            cluster_event_decisions: self.cluster_event_decisions.unwrap_or(false),
        })
    }
}

fn parse_key(raw: &[u8]) -> Option<[u8; 32]> {
    if raw.len() == 32 {
        return raw.try_into().ok();
    }
    let text = std::str::from_utf8(raw).ok()?.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl ServerConfig {
    /// The engine options this configuration implies.
    pub fn engine_options(&self) -> EngineOptions {
        EngineOptions {
            fsync: self.fsync.policy(),
            store: match self.store {
                StoreSetting::Fjall => StoreKind::Fjall,
                StoreSetting::Memory => StoreKind::Memory,
            },
            snapshot_key: self.snapshot_key,
            keep_snapshots: self.keep_snapshots,
            replicated_notes: self.cluster_event_decisions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw() -> ServeSettings {
        ServeSettings { admin_token: Some("x".repeat(20)), ..ServeSettings::default() }
    }

    #[test]
    fn defaults_validate() {
        let c = raw().validate().unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.fsync, FsyncSetting::Always);
    }

    #[test]
    fn errors_name_the_option() {
        let cases: [(ServeSettings, &str); 5] = [
            (ServeSettings { listen: Some("nope".into()), ..raw() }, "--listen"),
            (ServeSettings { max_body_bytes: Some(1), ..raw() }, "--max-body-bytes"),
            (ServeSettings { rate_limit_rps: Some(-1.0), ..raw() }, "--rate-limit-rps"),
            (ServeSettings { admin_token: None, ..raw() }, "NEARDUP_ADMIN_TOKEN"),
            (ServeSettings { log_format: Some("xml".into()), ..raw() }, "--log-format"),
        ];
        for (c, want) in cases {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn partition_options_are_checked() {
        let cluster = |r: ServeSettings| ServeSettings {
            cluster: Some("nats://127.0.0.1:4222".into()),
            node_id: Some("n1".into()),
            ..r
        };
        let c = cluster(ServeSettings { partitions: Some(4), serve_partitions: Some("1,3".into()), ..raw() })
            .validate()
            .unwrap();
        assert!(!c.engine_options().replicated_notes, "a cluster keeps the forms older nodes read");
        let c = c.cluster.unwrap();
        assert_eq!(c.layout.served, vec![1, 3]);
        assert_eq!(c.advertise_url, None, "the bound address is advertised at start");
        let noted = cluster(ServeSettings { cluster_event_decisions: Some(true), ..raw() }).validate().unwrap();
        assert!(noted.engine_options().replicated_notes);
        let cases: [(ServeSettings, &str); 6] = [
            (ServeSettings { partitions: Some(4), ..raw() }, "--partitions is for cluster mode"),
            (
                ServeSettings { cluster_event_decisions: Some(true), ..raw() },
                "--cluster-event-decisions is for cluster mode",
            ),
            (cluster(ServeSettings { partitions: Some(0), ..raw() }), "--partitions 0"),
            (cluster(ServeSettings { serve_partitions: Some("2".into()), ..raw() }), "--serve-partitions"),
            (
                cluster(ServeSettings { partitions: Some(2), listen: Some("0.0.0.0:8080".into()), ..raw() }),
                "--advertise-url",
            ),
            (cluster(ServeSettings { advertise_url: Some("ftp://x".into()), ..raw() }), "--advertise-url"),
        ];
        for (c, want) in cases {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn credential_files_are_read_bounded() {
        if !Path::new("/dev/zero").exists() {
            return;
        }
        // An endless file is refused, not read until memory runs out.
        let key = ServeSettings { snapshot_key_file: Some("/dev/zero".into()), ..raw() }.validate().unwrap_err();
        assert!(key.to_string().contains("--snapshot-key-file"), "{key}");
        let token = ServeSettings { admin_token: None, admin_token_file: Some("/dev/zero".into()), ..raw() }
            .validate()
            .unwrap_err();
        assert!(token.to_string().contains("--admin-token-file"), "{token}");
        let clustered =
            || ServeSettings { cluster: Some("nats://127.0.0.1:4222".into()), node_id: Some("n1".into()), ..raw() };
        let secret =
            ServeSettings { cluster_secret_file: Some("/dev/zero".into()), ..clustered() }.validate().unwrap_err();
        assert!(secret.to_string().contains("--cluster-secret-file"), "{secret}");
        let password =
            ServeSettings { nats_user: Some("u".into()), nats_password_file: Some("/dev/zero".into()), ..clustered() }
                .validate()
                .unwrap_err();
        assert!(password.to_string().contains("--nats-password-file"), "{password}");
        let file = ServeSettings::load(Path::new("/dev/zero")).unwrap_err();
        assert!(file.to_string().contains("--config"), "{file}");
    }

    #[test]
    fn content_stores_are_read_and_checked_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("stores.toml");
        let store = |endpoint: &str| {
            format!(
                "[[store]]\nname = \"corpus\"\nendpoint = \"{endpoint}\"\nbucket = \"docs\"\ntenants = \
                 [\"t\"]\ncredentials_file = \"{}\"\n",
                dir.path().join("keys.toml").display()
            )
        };
        std::fs::write(dir.path().join("keys.toml"), "access_key_id = \"a\"\nsecret_access_key = \"s\"\n").unwrap();
        std::fs::write(&file, store("http://127.0.0.1:8333")).unwrap();
        let c = ServeSettings { content_stores: Some(file.clone()), ..raw() }.validate().unwrap();
        assert_eq!(c.gateway.content_stores.len(), 1);
        assert_eq!(c.gateway.content_stores[0].credentials.access_key_id, "a");
        std::fs::write(&file, store("http://10.1.2.3:8333")).unwrap();
        let e = ServeSettings { content_stores: Some(file), ..raw() }.validate().unwrap_err().to_string();
        assert!(e.contains("--content-stores") && e.contains("\"corpus\"") && e.contains("plain http"), "{e}");
    }

    #[test]
    fn toml_fills_unset_values_only() {
        let file: ServeSettings = toml::from_str("listen = \"0.0.0.0:9000\"\nfsync = \"everysec\"\n").unwrap();
        let c = ServeSettings { fsync: Some(FsyncSetting::Os), ..raw() }.or(file).validate().unwrap();
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.fsync, FsyncSetting::Os);
        assert!(toml::from_str::<ServeSettings>("surprise = 1").is_err());
    }
}
