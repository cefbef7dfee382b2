//! Service configuration: the validated [`ServerConfig`] and the TOML file
//! form, [`FileConfig`]. Precedence (done by the CLI): flag > `NEARDUP_*`
//! environment variable > TOML file > default.

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

/// The TOML configuration file: every key optional, unknown keys refused.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `listen = "127.0.0.1:8080"`.
    pub listen: Option<String>,
    /// `data_dir = "./neardup-data"`.
    pub data_dir: Option<PathBuf>,
    /// `fsync = "always" | "everysec" | "os"`.
    pub fsync: Option<FsyncSetting>,
    /// `store = "fjall" | "memory"`.
    pub store: Option<StoreSetting>,
    /// Largest JSON body.
    pub max_body_bytes: Option<u64>,
    /// Largest snapshot upload.
    pub max_snapshot_bytes: Option<u64>,
    /// Request timeout.
    pub request_timeout_ms: Option<u64>,
    /// Requests per second per tenant.
    pub rate_limit_rps: Option<f64>,
    /// Request burst per tenant.
    pub rate_limit_burst: Option<f64>,
    /// Body bytes per second per tenant.
    pub byte_quota_per_sec: Option<u64>,
    /// Body byte burst per tenant.
    pub byte_quota_burst: Option<u64>,
    /// File with the 32-byte snapshot key (raw or 64 hex characters).
    pub snapshot_key_file: Option<PathBuf>,
    /// File holding the operator token.
    pub admin_token_file: Option<PathBuf>,
    /// Seconds between automatic checkpoints (0 = never).
    pub checkpoint_interval_secs: Option<u64>,
    /// Snapshots kept per tenant.
    pub keep_snapshots: Option<usize>,
    /// `json` or `text`.
    pub log_format: Option<String>,
    /// `cluster = "nats://h1:4222,nats://h2:4222,nats://h3:4222"`.
    pub cluster: Option<String>,
    /// `node_id = "node-1"`.
    pub node_id: Option<String>,
    /// Seconds between snapshot sets in the cluster's object store (0 = never).
    pub cluster_snapshot_secs: Option<u64>,
    /// `partitions = 4`: tenants spread over that many streams.
    pub partitions: Option<u32>,
    /// `serve_partitions = "0,2-3"`: the partitions this node serves.
    pub serve_partitions: Option<String>,
    /// `advertise_url = "http://10.0.0.5:8080"`: where clients reach it.
    pub advertise_url: Option<String>,
}

impl FileConfig {
    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<FileConfig, ServeError> {
        let bad = |e: &dyn std::fmt::Display| ServeError::Config(format!("--config {}: {e}", path.display()));
        let bytes = neardup_fs::read_small(path, 1 << 20).map_err(|e| bad(&e))?;
        let text = std::str::from_utf8(&bytes).map_err(|e| bad(&e))?;
        FileConfig::parse(text).map_err(|e| bad(&e))
    }

    /// Parses TOML text.
    pub fn parse(text: &str) -> Result<FileConfig, toml::de::Error> {
        toml::from_str(text)
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
}

/// Raw values before validation (what the CLI collected).
#[derive(Debug, Clone, Default)]
pub struct RawConfig {
    /// Listen address.
    pub listen: Option<String>,
    /// Data dir.
    pub data_dir: Option<PathBuf>,
    /// Fsync.
    pub fsync: Option<FsyncSetting>,
    /// Store.
    pub store: Option<StoreSetting>,
    /// Body limit.
    pub max_body_bytes: Option<u64>,
    /// Snapshot upload limit.
    pub max_snapshot_bytes: Option<u64>,
    /// Timeout.
    pub request_timeout_ms: Option<u64>,
    /// Rate.
    pub rate_limit_rps: Option<f64>,
    /// Burst.
    pub rate_limit_burst: Option<f64>,
    /// Byte rate.
    pub byte_quota_per_sec: Option<u64>,
    /// Byte burst.
    pub byte_quota_burst: Option<u64>,
    /// Snapshot key file.
    pub snapshot_key_file: Option<PathBuf>,
    /// Admin token (from the environment).
    pub admin_token: Option<String>,
    /// Admin token file.
    pub admin_token_file: Option<PathBuf>,
    /// Checkpoint interval.
    pub checkpoint_interval_secs: Option<u64>,
    /// Snapshots kept.
    pub keep_snapshots: Option<usize>,
    /// Log format.
    pub log_format: Option<String>,
    /// NATS server URLs (cluster mode).
    pub cluster: Option<String>,
    /// This node's id (cluster mode).
    pub node_id: Option<String>,
    /// Seconds between snapshot sets (cluster mode; 0 = never).
    pub cluster_snapshot_secs: Option<u64>,
    /// Partitions in the cluster (cluster mode).
    pub partitions: Option<u32>,
    /// Partitions this node serves (cluster mode).
    pub serve_partitions: Option<String>,
    /// Where clients reach this node (cluster mode).
    pub advertise_url: Option<String>,
}

impl RawConfig {
    /// Fills every unset value from `file`.
    pub fn or_file(mut self, file: FileConfig) -> RawConfig {
        macro_rules! fill {
            ($($f:ident),*) => { $( if self.$f.is_none() { self.$f = file.$f; } )* };
        }
        fill!(
            listen,
            data_dir,
            fsync,
            store,
            max_body_bytes,
            max_snapshot_bytes,
            request_timeout_ms,
            rate_limit_rps,
            rate_limit_burst,
            byte_quota_per_sec,
            byte_quota_burst,
            snapshot_key_file,
            admin_token_file,
            checkpoint_interval_secs,
            keep_snapshots,
            log_format,
            cluster,
            node_id,
            cluster_snapshot_secs,
            partitions,
            serve_partitions,
            advertise_url
        );
        self
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
        ] {
            if cluster.is_none() && set {
                return Err(bad(format!("{flag} is for cluster mode: add --cluster (NEARDUP_CLUSTER)")));
            }
        }
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
            },
            checkpoint_interval,
            keep_snapshots,
            json_logs,
            cluster,
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw() -> RawConfig {
        RawConfig { admin_token: Some("x".repeat(20)), ..RawConfig::default() }
    }

    #[test]
    fn defaults_validate() {
        let c = raw().validate().unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.fsync, FsyncSetting::Always);
    }

    #[test]
    fn errors_name_the_option() {
        let cases: [(RawConfig, &str); 5] = [
            (RawConfig { listen: Some("nope".into()), ..raw() }, "--listen"),
            (RawConfig { max_body_bytes: Some(1), ..raw() }, "--max-body-bytes"),
            (RawConfig { rate_limit_rps: Some(-1.0), ..raw() }, "--rate-limit-rps"),
            (RawConfig { admin_token: None, ..raw() }, "NEARDUP_ADMIN_TOKEN"),
            (RawConfig { log_format: Some("xml".into()), ..raw() }, "--log-format"),
        ];
        for (c, want) in cases {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn partition_options_are_checked() {
        let cluster =
            |r: RawConfig| RawConfig { cluster: Some("nats://127.0.0.1:4222".into()), node_id: Some("n1".into()), ..r };
        let c = cluster(RawConfig { partitions: Some(4), serve_partitions: Some("1,3".into()), ..raw() })
            .validate()
            .unwrap();
        let c = c.cluster.unwrap();
        assert_eq!(c.layout.served, vec![1, 3]);
        assert_eq!(c.advertise_url, None, "the bound address is advertised at start");
        let cases: [(RawConfig, &str); 5] = [
            (RawConfig { partitions: Some(4), ..raw() }, "--partitions is for cluster mode"),
            (cluster(RawConfig { partitions: Some(0), ..raw() }), "--partitions 0"),
            (cluster(RawConfig { serve_partitions: Some("2".into()), ..raw() }), "--serve-partitions"),
            (
                cluster(RawConfig { partitions: Some(2), listen: Some("0.0.0.0:8080".into()), ..raw() }),
                "--advertise-url",
            ),
            (cluster(RawConfig { advertise_url: Some("ftp://x".into()), ..raw() }), "--advertise-url"),
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
        let key = RawConfig { snapshot_key_file: Some("/dev/zero".into()), ..raw() }.validate().unwrap_err();
        assert!(key.to_string().contains("--snapshot-key-file"), "{key}");
        let token = RawConfig { admin_token: None, admin_token_file: Some("/dev/zero".into()), ..raw() }
            .validate()
            .unwrap_err();
        assert!(token.to_string().contains("--admin-token-file"), "{token}");
        let file = FileConfig::load(Path::new("/dev/zero")).unwrap_err();
        assert!(file.to_string().contains("--config"), "{file}");
    }

    #[test]
    fn toml_fills_unset_values_only() {
        let file: FileConfig = toml::from_str("listen = \"0.0.0.0:9000\"\nfsync = \"everysec\"\n").unwrap();
        let c = RawConfig { fsync: Some(FsyncSetting::Os), ..raw() }.or_file(file).validate().unwrap();
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.fsync, FsyncSetting::Os);
        assert!(toml::from_str::<FileConfig>("surprise = 1").is_err());
    }
}
