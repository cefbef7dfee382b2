//! The cluster secret: what makes the cluster's shared state (the command
//! stream, the key bucket, the node registry, the snapshot manifests)
//! writable only by its nodes.
//!
//! NATS credentials keep other clients off the servers; the secret is the
//! second wall, for whoever gets past them (a client with publish rights
//! on the account, an operator's mistake): every value a node writes to the
//! shared state carries a 32-byte tag, a keyed BLAKE3 hash of what it is
//! (its kind and name: an entry's subject, a key's id, a node's id, a
//! manifest's object name) and its bytes, keyed by the secret every node
//! holds. A value whose tag does not verify is refused alike on every node
//! (counted and logged), never applied. Binding the name keeps a valid
//! value from being replayed under another tenant, key or node.
//!
//! Without a secret values carry no tag and every value is taken, as
//! before; `neardup serve --cluster` says so in its log at start.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::ClusterError;

/// The bytes of a tag.
pub const TAG_BYTES: usize = 32;
/// The fewest bytes a secret file may hold (after trimming whitespace).
pub const MIN_SECRET_BYTES: usize = 32;

/// What a tagged value is: part of what its tag covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A command of the stream, named by its subject.
    Entry,
    /// A tenant API key's record, named by the key's id.
    Key,
    /// A node's registry entry, named by the node's id.
    Node,
    /// A snapshot set's manifest, named by its object name.
    Manifest,
}

impl Kind {
    fn label(self) -> &'static [u8] {
        match self {
            Kind::Entry => b"entry",
            Kind::Key => b"key",
            Kind::Node => b"node",
            Kind::Manifest => b"manifest",
        }
    }
}

/// Tags and checks the shared state's values with the cluster secret, if
/// the node has one; counts the values refused.
#[derive(Clone, Default)]
pub struct Seal {
    key: Option<[u8; 32]>,
    refused: Arc<AtomicU64>,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seal").field("secret", &self.key.map(|_| "set")).finish_non_exhaustive()
    }
}

impl Seal {
    /// A seal keyed by `secret` (at least [`MIN_SECRET_BYTES`]).
    pub fn with_secret(secret: &[u8]) -> Result<Seal, ClusterError> {
        let secret = secret.trim_ascii();
        if secret.len() < MIN_SECRET_BYTES {
            return Err(ClusterError::option(
                "--cluster-secret-file",
                format!(
                    "the cluster secret holds {} bytes; use at least {MIN_SECRET_BYTES} random ones (e.g. `head -c 48 \
                     /dev/urandom | base64 > cluster.secret`), the same file on every node",
                    secret.len()
                ),
            ));
        }
        Ok(Seal { key: Some(blake3::derive_key("neardup cluster secret 2026-12 v1", secret)), refused: Arc::default() })
    }

    /// A seal keyed by the secret in file `path`.
    pub fn from_file(path: &Path) -> Result<Seal, ClusterError> {
        // Bounded: a path given as configuration may name /dev/zero.
        let bytes = neardup_fs::read_small(path, 4096).map_err(|e| {
            ClusterError::option("--cluster-secret-file", format!("--cluster-secret-file {}: {e}", path.display()))
        })?;
        Seal::with_secret(&bytes)
    }

    /// Whether values are tagged and checked.
    pub fn is_set(&self) -> bool {
        self.key.is_some()
    }

    fn tag(key: &[u8; 32], kind: Kind, name: &str, value: &[u8]) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(key);
        for part in [kind.label(), name.as_bytes()] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(value);
        h.finalize()
    }

    /// `value` with its tag after it (as it is, without a secret).
    pub fn seal(&self, kind: Kind, name: &str, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(value.len() + TAG_BYTES);
        out.extend_from_slice(value);
        if let Some(key) = &self.key {
            out.extend_from_slice(Self::tag(key, kind, name, value).as_bytes());
        }
        out
    }

    /// The value of `sealed` once its tag verifies (all of it, without a
    /// secret); why not otherwise, and the refusal is counted.
    pub fn open<'a>(&self, kind: Kind, name: &str, sealed: &'a [u8]) -> Result<&'a [u8], String> {
        let Some(key) = &self.key else { return Ok(sealed) };
        let verified = sealed.len().checked_sub(TAG_BYTES).and_then(|n| {
            let (value, tag) = sealed.split_at(n);
            let tag: [u8; TAG_BYTES] = tag.try_into().ok()?;
            // blake3::Hash compares in constant time.
            (Self::tag(key, kind, name, value) == blake3::Hash::from(tag)).then_some(value)
        });
        verified.ok_or_else(|| {
            self.refused.fetch_add(1, Ordering::Relaxed);
            format!(
                "its tag does not verify with the cluster secret ({} {name:?}, {} bytes)",
                kind_name(kind),
                sealed.len()
            )
        })
    }

    /// Values refused since the node started.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

fn kind_name(kind: Kind) -> &'static str {
    std::str::from_utf8(kind.label()).unwrap_or("value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_verify_only_with_the_secret_kind_and_name_they_were_sealed_with() {
        let a = Seal::with_secret(&[7u8; 40]).unwrap();
        let b = Seal::with_secret(&[8u8; 40]).unwrap();
        let sealed = a.seal(Kind::Entry, "neardup.log.t.x", b"command");
        assert_eq!(a.open(Kind::Entry, "neardup.log.t.x", &sealed).unwrap(), b"command");
        assert!(b.open(Kind::Entry, "neardup.log.t.x", &sealed).is_err(), "another secret");
        assert!(a.open(Kind::Entry, "neardup.log.t.y", &sealed).is_err(), "another subject");
        assert!(a.open(Kind::Key, "neardup.log.t.x", &sealed).is_err(), "another kind");
        assert!(a.open(Kind::Entry, "neardup.log.t.x", b"command").is_err(), "no tag");
        assert!(a.open(Kind::Entry, "neardup.log.t.x", b"").is_err(), "empty");
        let mut flipped = sealed.clone();
        flipped[0] ^= 1;
        assert!(a.open(Kind::Entry, "neardup.log.t.x", &flipped).is_err(), "changed value");
        assert_eq!(a.refused(), 5);
        assert_eq!(b.refused(), 1);
        // Without a secret: nothing added, everything taken.
        let none = Seal::default();
        assert_eq!(none.seal(Kind::Entry, "s", b"v"), b"v");
        assert_eq!(none.open(Kind::Entry, "s", b"v").unwrap(), b"v");
    }

    #[test]
    fn a_short_secret_is_refused_with_how_to_make_one() {
        let e = Seal::with_secret(b"  short\n").unwrap_err().to_string();
        assert!(e.contains("at least 32") && e.contains("urandom"), "{e}");
        assert!(format!("{:?}", Seal::with_secret(&[1u8; 32]).unwrap()).contains("set"));
        assert!(!format!("{:?}", Seal::with_secret(&[1u8; 32]).unwrap()).contains("[1,"));
    }
}
