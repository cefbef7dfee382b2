//! The operator's content stores: `--content-stores FILE`, a TOML file of
//! `[[store]]` tables, validated once at start.
//!
//! ```toml
//! [[store]]
//! name = "corpus"                      # [A-Za-z0-9_-], unique
//! endpoint = "https://s3.example.net"  # scheme, host, port: nothing else
//! bucket = "docs"
//! prefix = "incoming/"                 # optional: keys must start with it
//! region = "us-east-1"                 # optional (default us-east-1)
//! credentials_env = "CORPUS"           # CORPUS_ACCESS_KEY_ID, CORPUS_SECRET_ACCESS_KEY
//! # credentials_file = "/etc/neardup/corpus.toml"  # access_key_id, secret_access_key
//! max_object_bytes = 4194304           # optional (default 4 MiB)
//! media_types = ["text/plain"]         # optional (default: any text/*)
//! timeout_ms = 10000                   # optional: a whole read, body included
//! tenants = ["acme"]                   # the tenants whose items may come from it
//! ```
//!
//! Plain `http://` endpoints are accepted only on loopback addresses unless
//! `allow_http = true`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The file: a list of stores.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoresFile {
    #[serde(default)]
    store: Vec<StoreSettings>,
}

/// One `[[store]]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSettings {
    name: String,
    endpoint: String,
    bucket: String,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    credentials_env: Option<String>,
    #[serde(default)]
    credentials_file: Option<PathBuf>,
    #[serde(default)]
    max_object_bytes: Option<u64>,
    #[serde(default)]
    media_types: Option<Vec<String>>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    allow_http: Option<bool>,
    tenants: Vec<String>,
}

/// Access key and secret, read at start.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Access key id.
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("access_key_id", &self.access_key_id).finish_non_exhaustive()
    }
}

/// A validated content store.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// The operator's name (metrics label, audit events).
    pub name: String,
    /// `scheme://host[:port]`.
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// Keys must start with this (may be empty).
    pub prefix: String,
    /// Signing region.
    pub region: String,
    /// Credentials.
    pub credentials: Credentials,
    /// Largest object read.
    pub max_object_bytes: u64,
    /// Allowed media types (essences, lowercase); empty: any `text/*`.
    pub media_types: Vec<String>,
    /// A whole read (HEAD, or GET with its body), retries included.
    pub timeout: Duration,
    /// Plain HTTP allowed.
    pub allow_http: bool,
    /// Tenants that may read from it.
    pub tenants: Vec<String>,
}

impl StoreConfig {
    /// True when `media_type` (a Content-Type, parameters allowed) is one
    /// this store allows.
    pub fn allows_media_type(&self, media_type: &str) -> bool {
        let essence = media_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        if self.media_types.is_empty() {
            return essence.starts_with("text/");
        }
        self.media_types.contains(&essence)
    }
}

/// Reads and validates `--content-stores FILE`; errors name the file and
/// the store.
pub fn load(path: &Path) -> Result<Vec<StoreConfig>, String> {
    let bytes =
        neardup_fs::read_small(path, 1 << 20).map_err(|e| format!("--content-stores {}: {e}", path.display()))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| format!("--content-stores {}: {e}", path.display()))?;
    parse(text, &|name| std::env::var(name).ok()).map_err(|e| format!("--content-stores {}: {e}", path.display()))
}

/// Parses and validates the file's text; `env` reads the environment.
pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<StoreConfig>, String> {
    let file: StoresFile = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut out: Vec<StoreConfig> = Vec::new();
    for s in file.store {
        let c = validate(s, env)?;
        if out.iter().any(|o| o.name == c.name) {
            return Err(format!("store {:?} is defined twice", c.name));
        }
        // One store per (tenant, bucket): a URI names a bucket, and must
        // name one store.
        for o in &out {
            if o.bucket == c.bucket {
                if let Some(t) = o.tenants.iter().find(|t| c.tenants.contains(t)) {
                    return Err(format!(
                        "stores {:?} and {:?} both give tenant {t:?} bucket {:?}; a tenant may read a bucket \
                         through one store",
                        o.name, c.name, c.bucket
                    ));
                }
            }
        }
        out.push(c);
    }
    Ok(out)
}

fn validate(s: StoreSettings, env: &dyn Fn(&str) -> Option<String>) -> Result<StoreConfig, String> {
    let name = s.name;
    let bad = |m: String| format!("store {name:?}: {m}");
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        return Err(format!("store name {name:?}: must be 1 to 64 of [A-Za-z0-9_-]"));
    }
    let allow_http = s.allow_http.unwrap_or(false);
    let endpoint = check_endpoint(&s.endpoint, allow_http).map_err(bad)?;
    if super::uri::ContentUri::parse(&format!("s3://{}/k", s.bucket)).is_err() {
        return Err(bad(format!("bucket {:?}: 3 to 63 characters of a-z, 0-9, '.' and '-'", s.bucket)));
    }
    let prefix = s.prefix.unwrap_or_default();
    if prefix.starts_with('/') || prefix.contains("//") || prefix.split('/').any(|p| p == "." || p == "..") {
        return Err(bad(format!("prefix {prefix:?}: no leading '/', no empty, '.' or '..' segments")));
    }
    let credentials = match (s.credentials_env, s.credentials_file) {
        (Some(_), Some(_)) => return Err(bad("credentials_env or credentials_file, not both".into())),
        (None, Some(path)) => {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct File {
                access_key_id: String,
                secret_access_key: String,
            }
            let bytes = neardup_fs::read_small(&path, 64 << 10)
                .map_err(|e| bad(format!("credentials_file {}: {e}", path.display())))?;
            let text =
                std::str::from_utf8(&bytes).map_err(|e| bad(format!("credentials_file {}: {e}", path.display())))?;
            let f: File = toml::from_str(text)
                .map_err(|e| bad(format!("credentials_file {}: {}", path.display(), e.message())))?;
            Credentials { access_key_id: f.access_key_id, secret_access_key: f.secret_access_key }
        }
        (prefix, None) => {
            let p = prefix.unwrap_or_else(|| "AWS".into());
            let get = |suffix: &str| {
                let var = format!("{p}_{suffix}");
                env(&var).filter(|v| !v.is_empty()).ok_or_else(|| bad(format!("${var} is not set")))
            };
            Credentials { access_key_id: get("ACCESS_KEY_ID")?, secret_access_key: get("SECRET_ACCESS_KEY")? }
        }
    };
    let max_object_bytes = s.max_object_bytes.unwrap_or(4 << 20);
    if !(1..=1 << 30).contains(&max_object_bytes) {
        return Err(bad("max_object_bytes must be in 1..=1073741824".into()));
    }
    let media_types: Vec<String> =
        s.media_types.unwrap_or_default().iter().map(|m| m.trim().to_ascii_lowercase()).collect();
    if let Some(m) = media_types.iter().find(|m| !m.starts_with("text/") || m.contains(';')) {
        return Err(bad(format!("media type {m:?}: only text/* essences (no parameters) can be indexed")));
    }
    let timeout_ms = s.timeout_ms.unwrap_or(10_000);
    if !(1..=600_000).contains(&timeout_ms) {
        return Err(bad("timeout_ms must be in 1..=600000".into()));
    }
    if s.tenants.is_empty() {
        return Err(bad("tenants is empty: name the tenants whose items may come from this store".into()));
    }
    Ok(StoreConfig {
        endpoint,
        bucket: s.bucket,
        prefix,
        region: s.region.unwrap_or_else(|| "us-east-1".into()),
        credentials,
        max_object_bytes,
        media_types,
        timeout: Duration::from_millis(timeout_ms),
        allow_http,
        tenants: s.tenants,
        name,
    })
}

/// `scheme://host[:port]` and nothing else: no user, path, query or
/// fragment; `http` only on loopback or when allowed.
fn check_endpoint(endpoint: &str, allow_http: bool) -> Result<String, String> {
    let bad = |why: &str| format!("endpoint {endpoint:?}: {why}");
    let (scheme, rest) = endpoint.split_once("://").ok_or_else(|| bad("not scheme://host[:port]"))?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
        return Err(bad("only scheme://host[:port], no user, path or query"));
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?,
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, p),
            None => (authority, ""),
        },
    };
    let port = port.strip_prefix(':').unwrap_or(port);
    if host.is_empty() || (!port.is_empty() && port.parse::<u16>().is_err()) {
        return Err(bad("bad host or port"));
    }
    match scheme {
        "https" => {}
        "http" => {
            let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
            if !loopback && !allow_http {
                return Err(bad("plain http only on loopback, or with allow_http = true"));
            }
        }
        _ => return Err(bad("the scheme must be https or http")),
    }
    Ok(format!("{scheme}://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "AWS_ACCESS_KEY_ID" | "C_ACCESS_KEY_ID" => Some("id".into()),
            "AWS_SECRET_ACCESS_KEY" | "C_SECRET_ACCESS_KEY" => Some("secret".into()),
            _ => None,
        }
    }

    const ONE: &str = "[[store]]\nname = \"corpus\"\nendpoint = \"http://127.0.0.1:8333\"\nbucket = \"docs\"\n\
                       tenants = [\"acme\"]\n";

    #[test]
    fn a_store_with_defaults() {
        let s = parse(ONE, &env).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].endpoint, "http://127.0.0.1:8333");
        assert_eq!(s[0].credentials.access_key_id, "id");
        assert_eq!(s[0].max_object_bytes, 4 << 20);
        assert!(s[0].allows_media_type("text/markdown; charset=utf-8"));
        assert!(!s[0].allows_media_type("application/pdf"));
        assert!(!format!("{:?}", s[0]).contains("secret"), "the secret is never printed");
    }

    #[test]
    fn bad_stores_are_refused_with_their_name() {
        let with = |extra: &str, endpoint: &str| {
            format!(
                "[[store]]\nname = \"corpus\"\nendpoint = \"{endpoint}\"\nbucket = \"docs\"\ntenants = \
                 [\"acme\"]\n{extra}"
            )
        };
        for (text, want) in [
            (with("", "http://10.0.0.1:8333"), "plain http"),
            (with("", "http://169.254.169.254"), "plain http"),
            (with("", "ftp://127.0.0.1"), "scheme"),
            (with("", "http://127.0.0.1:8333/path"), "no user, path"),
            (with("", "http://user@127.0.0.1:8333"), "no user, path"),
            (with("max_object_bytes = 0", "http://127.0.0.1:1"), "max_object_bytes"),
            (with("media_types = [\"application/pdf\"]", "http://127.0.0.1:1"), "text/*"),
            (with("credentials_env = \"NOPE\"", "http://127.0.0.1:1"), "$NOPE_ACCESS_KEY_ID"),
            (with("prefix = \"../x\"", "http://127.0.0.1:1"), "prefix"),
            (with("surprise = 1", "http://127.0.0.1:1"), "surprise"),
            (format!("{ONE}{ONE}"), "defined twice"),
            (format!("{ONE}{}", ONE.replace("corpus", "other")), "through one store"),
        ] {
            let e = parse(&text, &env).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
        }
        assert!(parse(&with("allow_http = true", "http://10.0.0.1:8333"), &env).is_ok());
        assert!(parse(&with("credentials_env = \"C\"", "https://s3.example.net"), &env).is_ok());
        assert!(parse(&with("", "http://[::1]:8333"), &env).is_ok());
    }
}
