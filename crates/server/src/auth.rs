//! Credentials: the admin bootstrap token and per-tenant API keys.
//!
//! A tenant key is `ndk_<key id, 16 hex>_<secret, 64 hex>`: 32 random bytes
//! from the OS, shown once when minted. Only `blake3(secret)` is kept, in
//! `DATA_DIR/keys.json`, which is replaced atomically (write, fsync,
//! rename, fsync the directory). Lookup is by the (non-secret) key id; the
//! secret's hash is compared in constant time, as is the admin token's.
//!
//! `keys.json` (format 1):
//!
//! | field            | meaning                                        |
//! |------------------|------------------------------------------------|
//! | `format`         | `1`                                            |
//! | `keys[].id`      | key id (16 hex)                                |
//! | `keys[].tenant`  | the one tenant the key can reach               |
//! | `keys[].scopes`  | subset of `ingest`, `query`, `review`, `admin` |
//! | `keys[].hash`    | blake3 of the secret, 64 hex                   |
//! | `keys[].created_ms` | creation time, Unix ms                      |

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult, GatewayKind};

/// What a key may do within its tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Upsert, batch upsert, tombstone.
    Ingest,
    /// Read items, candidates, decide, verify, stats, decision log, event feed.
    Query,
    /// Record and read reviewer labels.
    Review,
    /// Snapshots, restore, rebuild, shadow, rollback, compaction, keys, audit.
    Admin,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 4] = [Scope::Ingest, Scope::Query, Scope::Review, Scope::Admin];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Query => "query",
            Scope::Review => "review",
            Scope::Admin => "admin",
        }
    }
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The operator (bootstrap token): every tenant, every scope.
    Admin,
    /// A tenant key.
    Tenant {
        /// The one tenant it reaches.
        tenant: String,
        /// Its scopes.
        scopes: Vec<Scope>,
        /// Its id (for logs and audit).
        key_id: String,
    },
}

impl Principal {
    /// Checks that the caller may act on `tenant` with `scope`. A key for
    /// another tenant gets exactly the answer an unknown tenant gets.
    pub fn require(&self, tenant: &str, scope: Scope) -> ApiResult<()> {
        match self {
            Principal::Admin => Ok(()),
            Principal::Tenant { tenant: own, scopes, .. } => {
                if own != tenant {
                    return Err(ApiError::no_such_tenant(tenant));
                }
                if !scopes.contains(&scope) {
                    return Err(ApiError::gateway(GatewayKind::Forbidden { scope: scope.name() }));
                }
                Ok(())
            }
        }
    }

    /// The operator only.
    pub fn require_admin(&self) -> ApiResult<()> {
        match self {
            Principal::Admin => Ok(()),
            Principal::Tenant { .. } => Err(ApiError::gateway(GatewayKind::Forbidden { scope: "operator" })),
        }
    }

    /// A short name for logs and the audit trail.
    pub fn actor(&self) -> String {
        match self {
            Principal::Admin => "operator".into(),
            Principal::Tenant { key_id, .. } => format!("key:{key_id}"),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct KeyRecord {
    id: String,
    tenant: String,
    scopes: Vec<Scope>,
    hash: String,
    created_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct KeyFile {
    format: u32,
    keys: Vec<KeyRecord>,
}

const KEY_FILE_FORMAT: u32 = 1;

/// A freshly minted key; `api_key` is the only time the secret exists.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MintedKey {
    /// The key id (not secret).
    pub key_id: String,
    /// The full bearer token; store it now, it cannot be shown again.
    pub api_key: String,
    /// Its scopes.
    pub scopes: Vec<Scope>,
}

/// Where tenant keys are shared with the other nodes of a cluster: a
/// replicated map from key id to the key's record (never the secret).
/// Calls block until a quorum stored the change; make them from blocking
/// threads.
pub trait KeyReplica: Send + Sync {
    /// Stores `record` (JSON) under `id`.
    fn put(&self, id: &str, record: &[u8]) -> Result<(), String>;
    /// Removes `id`.
    fn remove(&self, id: &str) -> Result<(), String>;
}

/// The credential store.
pub struct KeyStore {
    path: Option<PathBuf>,
    admin_hash: Option<[u8; 32]>,
    keys: RwLock<BTreeMap<String, KeyRecord>>,
    /// Cluster mode: where keys are shared (see [`KeyStore::share`]).
    replica: std::sync::OnceLock<std::sync::Arc<dyn KeyReplica>>,
}

impl std::fmt::Debug for KeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyStore").field("path", &self.path).field("shared", &self.replica.get().is_some()).finish()
    }
}

fn unavailable(detail: String) -> ApiError {
    ApiError::from(neardup_index::Error::unavailable(format!("the cluster's key bucket: {detail}")))
}

/// Why the key store could not be opened or written.
#[derive(Debug)]
pub struct KeyStoreError(pub String);

impl std::fmt::Display for KeyStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KeyStoreError {}

fn hash(secret: &[u8]) -> [u8; 32] {
    *blake3::hash(secret).as_bytes()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl KeyStore {
    /// Minimum admin token length.
    pub const MIN_ADMIN_TOKEN: usize = 16;

    /// Opens `DATA_DIR/keys.json` (or an in-memory store with `path: None`).
    pub fn open(path: Option<PathBuf>, admin_token: Option<&str>) -> Result<KeyStore, KeyStoreError> {
        let admin_hash = match admin_token {
            Some(t) if t.len() < Self::MIN_ADMIN_TOKEN => {
                return Err(KeyStoreError(format!("the admin token must be at least {} bytes", Self::MIN_ADMIN_TOKEN)))
            }
            Some(t) => Some(hash(t.as_bytes())),
            None => None,
        };
        let mut keys = BTreeMap::new();
        if let Some(p) = &path {
            match std::fs::read(p) {
                Ok(bytes) => {
                    let file: KeyFile = serde_json::from_slice(&bytes)
                        .map_err(|e| KeyStoreError(format!("{}: not a key file: {e}", p.display())))?;
                    if file.format != KEY_FILE_FORMAT {
                        return Err(KeyStoreError(format!(
                            "{}: unsupported key file format {}",
                            p.display(),
                            file.format
                        )));
                    }
                    for k in file.keys {
                        if unhex32(&k.hash).is_none() {
                            return Err(KeyStoreError(format!("{}: key {} has a malformed hash", p.display(), k.id)));
                        }
                        keys.insert(k.id.clone(), k);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(KeyStoreError(format!("{}: {e}", p.display()))),
            }
        }
        Ok(KeyStore { path, admin_hash, keys: RwLock::new(keys), replica: std::sync::OnceLock::new() })
    }

    /// Cluster mode: from now on keys are minted and revoked in `replica`
    /// first (the call fails with `unavailable` when it cannot be), and
    /// [`KeyStore::apply_shared`] brings in the other nodes' changes.
    pub fn share(&self, replica: std::sync::Arc<dyn KeyReplica>) {
        let _ = self.replica.set(replica);
    }

    /// Applies a change of the shared key map (a key's record, or `None`
    /// when it was revoked) to this node's copy and persists it. A record
    /// that does not parse, or names another id, is ignored with a warning.
    pub fn apply_shared(&self, id: &str, record: Option<&[u8]>) {
        let parsed = match record.map(serde_json::from_slice::<KeyRecord>) {
            None => None,
            Some(Ok(r)) if r.id == id && unhex32(&r.hash).is_some() => Some(r),
            Some(_) => {
                tracing::warn!(key_id = id, "a shared key record that does not parse was ignored");
                return;
            }
        };
        let Ok(mut keys) = self.keys.write() else { return };
        let changed = match parsed {
            Some(r) => keys.insert(id.to_string(), r.clone()).is_none_or(|old| old.hash != r.hash),
            None => keys.remove(id).is_some(),
        };
        if changed {
            if let Err(e) = self.persist(&keys) {
                tracing::warn!(error = %e, "persisting the shared keys failed; they stay in memory");
            }
        }
    }

    /// Who holds `token`, if anyone.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        if let Some(rest) = token.strip_prefix("ndk_") {
            let (id, secret) = rest.split_once('_')?;
            let keys = self.keys.read().ok()?;
            let rec = keys.get(id)?;
            let want = unhex32(&rec.hash)?;
            let got = hash(secret.as_bytes());
            return bool::from(got.ct_eq(&want)).then(|| Principal::Tenant {
                tenant: rec.tenant.clone(),
                scopes: rec.scopes.clone(),
                key_id: rec.id.clone(),
            });
        }
        let want = self.admin_hash?;
        bool::from(hash(token.as_bytes()).ct_eq(&want)).then_some(Principal::Admin)
    }

    /// Mints a key for `tenant` with `scopes` and persists it before returning.
    pub fn mint(&self, tenant: &str, scopes: &[Scope]) -> ApiResult<MintedKey> {
        let mut raw = [0u8; 40];
        getrandom::fill(&mut raw).map_err(|e| ApiError::internal(format!("os random: {e}")))?;
        let id = hex(&raw[..8]);
        let secret = hex(&raw[8..]);
        let mut scopes = scopes.to_vec();
        scopes.sort();
        scopes.dedup();
        let rec = KeyRecord {
            id: id.clone(),
            tenant: tenant.to_string(),
            scopes: scopes.clone(),
            hash: hex(&hash(secret.as_bytes())),
            created_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        };
        if let Some(r) = self.replica.get() {
            let json = serde_json::to_vec(&rec).map_err(|e| ApiError::internal(format!("encoding a key: {e}")))?;
            r.put(&id, &json).map_err(unavailable)?;
        }
        let mut keys = self.keys.write().map_err(|_| ApiError::internal("key store lock poisoned"))?;
        keys.insert(id.clone(), rec);
        if let Err(e) = self.persist(&keys) {
            keys.remove(&id);
            if let Some(r) = self.replica.get() {
                // Nobody will ever hold its secret: take it back.
                let _ = r.remove(&id);
            }
            return Err(ApiError::internal(format!("persisting keys: {e}")));
        }
        Ok(MintedKey { key_id: id.clone(), api_key: format!("ndk_{id}_{secret}"), scopes })
    }

    /// Key ids and scopes of a tenant (never secrets or hashes).
    pub fn list(&self, tenant: &str) -> Vec<(String, Vec<Scope>)> {
        self.keys
            .read()
            .map(|k| k.values().filter(|r| r.tenant == tenant).map(|r| (r.id.clone(), r.scopes.clone())).collect())
            .unwrap_or_default()
    }

    /// Revokes a key of `tenant`; false when there is none.
    pub fn revoke(&self, tenant: &str, key_id: &str) -> ApiResult<bool> {
        let ours = self
            .keys
            .read()
            .map_err(|_| ApiError::internal("key store lock poisoned"))?
            .get(key_id)
            .is_some_and(|r| r.tenant == tenant);
        if !ours {
            return Ok(false);
        }
        if let Some(r) = self.replica.get() {
            r.remove(key_id).map_err(unavailable)?;
        }
        let mut keys = self.keys.write().map_err(|_| ApiError::internal("key store lock poisoned"))?;
        let removed = keys.remove(key_id);
        if let Err(e) = self.persist(&keys) {
            if let Some(r) = removed {
                keys.insert(key_id.to_string(), r);
            }
            return Err(ApiError::internal(format!("persisting keys: {e}")));
        }
        Ok(true)
    }

    fn persist(&self, keys: &BTreeMap<String, KeyRecord>) -> std::io::Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let file = KeyFile { format: KEY_FILE_FORMAT, keys: keys.values().cloned().collect() };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        neardup_fs::write_atomic(path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_key_authenticates_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let ks = KeyStore::open(Some(path.clone()), Some("admin-token-0123456789")).unwrap();
        let k = ks.mint("t1", &[Scope::Query, Scope::Ingest]).unwrap();
        assert!(matches!(ks.authenticate(&k.api_key), Some(Principal::Tenant { ref tenant, .. }) if tenant == "t1"));
        let on_disk = std::fs::read_to_string(&path).unwrap();
        assert!(!on_disk.contains(k.api_key.rsplit('_').next().unwrap()), "secret must not be stored");
        let again = KeyStore::open(Some(path), None).unwrap();
        assert!(again.authenticate(&k.api_key).is_some());
        assert_eq!(again.authenticate("admin-token-0123456789"), None, "no admin without a token");
    }

    #[test]
    fn wrong_secrets_and_ids_fail() {
        let ks = KeyStore::open(None, Some("admin-token-0123456789")).unwrap();
        let k = ks.mint("t1", &Scope::ALL).unwrap();
        let mut bad = k.api_key.clone();
        bad.pop();
        bad.push('x');
        assert_eq!(ks.authenticate(&bad), None);
        assert_eq!(ks.authenticate("ndk_0000000000000000_00"), None);
        assert_eq!(ks.authenticate("ndk_"), None);
        assert_eq!(ks.authenticate(""), None);
        assert_eq!(ks.authenticate("admin-token-0123456789"), Some(Principal::Admin));
        assert!(KeyStore::open(None, Some("short")).is_err());
    }

    /// A shared map standing in for the cluster's key bucket.
    #[derive(Default)]
    struct Shared(std::sync::Mutex<BTreeMap<String, Vec<u8>>>);

    impl KeyReplica for Shared {
        fn put(&self, id: &str, record: &[u8]) -> Result<(), String> {
            self.0.lock().unwrap().insert(id.into(), record.to_vec());
            Ok(())
        }
        fn remove(&self, id: &str) -> Result<(), String> {
            self.0.lock().unwrap().remove(id);
            Ok(())
        }
    }

    #[test]
    fn shared_keys_reach_other_nodes_and_revocations_too() {
        let shared = std::sync::Arc::new(Shared::default());
        let (a, b) = (KeyStore::open(None, None).unwrap(), KeyStore::open(None, None).unwrap());
        a.share(shared.clone());
        b.share(shared.clone());
        let k = a.mint("t1", &[Scope::Query]).unwrap();
        // Node b learns of it from the shared map (as its watch would tell it).
        assert_eq!(b.authenticate(&k.api_key), None);
        let record = shared.0.lock().unwrap().get(&k.key_id).cloned().unwrap();
        assert!(!String::from_utf8_lossy(&record).contains(k.api_key.rsplit('_').next().unwrap()));
        b.apply_shared(&k.key_id, Some(&record));
        assert!(matches!(b.authenticate(&k.api_key), Some(Principal::Tenant { ref tenant, .. }) if tenant == "t1"));
        // Revoked on b: gone from the shared map, and from a once told.
        assert!(b.revoke("t1", &k.key_id).unwrap());
        assert!(shared.0.lock().unwrap().is_empty());
        a.apply_shared(&k.key_id, None);
        assert_eq!(a.authenticate(&k.api_key), None);
        // A record under another id is ignored.
        let k2 = a.mint("t1", &[Scope::Query]).unwrap();
        let rec2 = shared.0.lock().unwrap().get(&k2.key_id).cloned().unwrap();
        b.apply_shared("0000000000000000", Some(&rec2));
        assert_eq!(b.authenticate(&k2.api_key), None);
    }

    #[test]
    fn other_tenant_looks_like_no_tenant() {
        let p = Principal::Tenant { tenant: "a".into(), scopes: vec![Scope::Query], key_id: "k".into() };
        let e = p.require("b", Scope::Query).unwrap_err();
        assert_eq!(e.parts(), ApiError::no_such_tenant("b").parts());
        assert_eq!(p.require("a", Scope::Ingest).unwrap_err().parts().1, "forbidden");
        assert!(p.require("a", Scope::Query).is_ok());
    }
}
