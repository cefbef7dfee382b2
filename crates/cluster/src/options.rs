//! How a node joins a cluster: the NATS servers, its id, replicas,
//! timeouts, the partitions it serves and where clients reach it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::ClusterError;
use crate::partition::Layout;
use crate::secret::Seal;

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
    /// Writes of a tenant (upserts, batches, tombstones) that reach a node
    /// other than the tenant's home are redirected there (`307`), so a
    /// tenant's writers meet in one queue instead of racing for the log;
    /// off by default: clients must follow a redirect with their
    /// credentials (see docs/cluster.md).
    pub home_redirects: bool,
    /// Tags every value the node writes to the shared state and refuses
    /// those that do not verify (see [`crate::secret`]); none by default.
    pub seal: Seal,
    /// How the node proves itself to the NATS servers and checks them.
    pub nats: NatsAuth,
}

/// A node's NATS credentials and TLS settings (all optional: a NATS
/// deployment that requires none takes none).
#[derive(Clone, Default)]
pub struct NatsAuth {
    /// A `.creds` file (JWT and nkey seed).
    pub creds_file: Option<PathBuf>,
    /// An nkey seed.
    pub nkey_seed: Option<String>,
    /// A user name and password.
    pub user_password: Option<(String, String)>,
    /// The CA to verify servers with; set, TLS is required.
    pub tls_ca: Option<PathBuf>,
    /// A client certificate and its key.
    pub tls_client: Option<(PathBuf, PathBuf)>,
}

impl std::fmt::Debug for NatsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsAuth")
            .field("creds_file", &self.creds_file)
            .field("nkey_seed", &self.nkey_seed.as_ref().map(|_| "set"))
            .field("user", &self.user_password.as_ref().map(|(u, _)| u))
            .field("tls_ca", &self.tls_ca)
            .field("tls_client", &self.tls_client)
            .finish()
    }
}

fn read_secret(flag: &'static str, path: &Path) -> Result<String, ClusterError> {
    // Bounded: a path given as configuration may name /dev/zero.
    let bytes = neardup_fs::read_small(path, 4096)
        .map_err(|e| ClusterError::option(flag, format!("{flag} {}: {e}", path.display())))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ClusterError::option(flag, format!("{flag} {}: not UTF-8 text", path.display())))?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ClusterError::option(flag, format!("{flag} {}: the file is empty", path.display())));
    }
    Ok(text.to_string())
}

impl NatsAuth {
    /// Checks the settings' combinations and reads the secrets' files
    /// (one way to authenticate at most; a password needs a user; a client
    /// certificate needs its key).
    pub fn new(
        creds_file: Option<PathBuf>,
        nkey_file: Option<&Path>,
        user: Option<String>,
        password_file: Option<&Path>,
        tls_ca: Option<PathBuf>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
    ) -> Result<NatsAuth, ClusterError> {
        let ways = usize::from(creds_file.is_some()) + usize::from(nkey_file.is_some()) + usize::from(user.is_some());
        if ways > 1 {
            return Err(ClusterError::option(
                "--nats-creds-file",
                "give one of --nats-creds-file, --nats-nkey-file and --nats-user",
            ));
        }
        if let Some(f) = &creds_file {
            std::fs::metadata(f).map_err(|e| {
                ClusterError::option("--nats-creds-file", format!("--nats-creds-file {}: {e}", f.display()))
            })?;
        }
        let nkey_seed = nkey_file.map(|f| read_secret("--nats-nkey-file", f)).transpose()?;
        let user_password = match (user, password_file) {
            (Some(u), Some(p)) => Some((u, read_secret("--nats-password-file", p)?)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(ClusterError::option("--nats-user", "--nats-user needs --nats-password-file"))
            }
            (None, Some(_)) => {
                return Err(ClusterError::option("--nats-password-file", "--nats-password-file needs --nats-user"))
            }
        };
        let tls_client = match (tls_cert, tls_key) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => return Err(ClusterError::option("--nats-tls-cert", "--nats-tls-cert and --nats-tls-key go together")),
        };
        for f in tls_ca.iter().chain(tls_client.iter().flat_map(|(c, k)| [c, k])) {
            std::fs::metadata(f).map_err(|e| ClusterError::option("--nats-tls-ca", format!("{}: {e}", f.display())))?;
        }
        Ok(NatsAuth { creds_file, nkey_seed, user_password, tls_ca, tls_client })
    }

    /// `options` with these credentials and TLS settings.
    pub(crate) async fn apply(
        &self,
        mut options: async_nats::ConnectOptions,
    ) -> Result<async_nats::ConnectOptions, ClusterError> {
        if let Some(f) = &self.creds_file {
            options = options.credentials_file(f).await.map_err(|e| {
                ClusterError::option("--nats-creds-file", format!("--nats-creds-file {}: {e}", f.display()))
            })?;
        }
        if let Some(seed) = &self.nkey_seed {
            options = options.nkey(seed.clone());
        }
        if let Some((u, p)) = &self.user_password {
            options = options.user_and_password(u.clone(), p.clone());
        }
        if let Some(ca) = &self.tls_ca {
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        }
        if let Some((cert, key)) = &self.tls_client {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        Ok(options)
    }
}

impl ClusterOptions {
    /// Options for `servers` (comma-separated or repeated), replicas = the
    /// number of servers given, at most 3.
    pub fn new(servers: &str, node_id: &str) -> Result<ClusterOptions, ClusterError> {
        let servers: Vec<String> =
            servers.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
        if servers.is_empty() {
            return Err(ClusterError::option(
                "--cluster",
                "--cluster needs at least one NATS server URL (nats://host:port)",
            ));
        }
        for s in &servers {
            s.parse::<async_nats::ServerAddr>()
                .map_err(|e| ClusterError::option("--cluster", format!("--cluster: {s:?}: {e}")))?;
        }
        if node_id.is_empty()
            || node_id.len() > 64
            || !node_id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        {
            return Err(ClusterError::option(
                "--node-id",
                format!("--node-id {node_id:?}: use 1..=64 of [A-Za-z0-9_-]"),
            ));
        }
        Ok(ClusterOptions {
            replicas: servers.len().min(3),
            servers,
            node_id: node_id.to_string(),
            propose_timeout: Duration::from_secs(10),
            snapshot_interval: Some(DEFAULT_SNAPSHOT_INTERVAL),
            layout: Layout::default(),
            advertise_url: None,
            home_redirects: false,
            seal: Seal::default(),
            nats: NatsAuth::default(),
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
            _ => Err(ClusterError::option("--advertise-url", format!("--advertise-url {url:?}: use http://host:port"))),
        }
    }
}
