//! Tenant snapshots: one tenant's complete state at one log position.
//!
//! A file is a magic and version, a clear-text postcard [`SnapshotHeader`],
//! the postcard tenant state (optionally ChaCha20-Poly1305 encrypted), and a
//! CRC-32 over everything; the byte layout is in `docs/index-format.md`
//! (format version 1).
//!
//! The header is readable without the key (so recovery can pick the newest
//! snapshot of each tenant) but is authenticated with the payload when
//! encrypted. The nonce is derived from the key, the header and the
//! plaintext (a synthetic IV): equal states give equal bytes, which keeps
//! replay byte-deterministic, and a nonce never repeats for different
//! plaintexts under one key. An engine configured with a key refuses
//! unencrypted snapshots, so encryption cannot be stripped.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use serde::{Deserialize, Serialize};

use crate::command::IdemEntry;
use crate::error::{Error, ErrorKind, Result};
use crate::feedback::LabelEvent;
use crate::item::ItemRecord;

const MAGIC: &[u8; 8] = b"NDUPSNAP";
/// The snapshot format version this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;
const FLAG_ENCRYPTED: u32 = 1;
const MAX_HEADER: u32 = 64 << 10;

/// The clear-text header of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotHeader {
    /// Tenant id.
    pub tenant: String,
    /// Epoch: the log sequence number the snapshot covers (every command of
    /// this tenant at or below it is included).
    pub covered_lsn: u64,
    /// Normalizer version (e.g. `seed-v1`).
    pub normalization_version: String,
    /// Feature hash version.
    pub feature_hash_version: String,
    /// Content hash version.
    pub content_hash_version: String,
    /// Signature scheme version.
    pub signature_version: String,
    /// LSH layout, `{bands}x{rows}`.
    pub lsh_version: String,
    /// Policy, `{id}@v{version}`.
    pub policy_version: String,
    /// The full fingerprint version string.
    pub fingerprint_version: String,
    /// Records in the payload.
    pub items: u64,
}

/// A tenant's whole state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TenantState {
    pub config_json: String,
    pub previous_json: Option<String>,
    /// Tombstone markers, sorted by item id.
    pub tombstones: Vec<(String, u64)>,
    /// Idempotency keys, oldest first.
    pub idempotency: Vec<IdemEntry>,
    pub labels: Vec<LabelEvent>,
    /// Every stored record (live and tombstoned), sorted by item id.
    pub items: Vec<ItemRecord>,
}

fn le_u32(b: &[u8], at: usize) -> Result<u32> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| Error::corrupt("snapshot", "truncated"))
}

fn le_u64(b: &[u8], at: usize) -> Result<u64> {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| Error::corrupt("snapshot", "truncated"))
}

fn nonce_for(key: &[u8; 32], pre: &[u8], plain: &[u8]) -> [u8; 12] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(b"neardup snapshot nonce v1");
    h.update(&(pre.len() as u64).to_le_bytes());
    h.update(pre);
    h.update(plain);
    let mut n = [0u8; 12];
    n.copy_from_slice(&h.finalize().as_bytes()[..12]);
    n
}

/// Encodes a snapshot, encrypting the payload when `key` is set.
pub(crate) fn encode(header: &SnapshotHeader, state: &TenantState, key: Option<&[u8; 32]>) -> Result<Vec<u8>> {
    let h = postcard::to_stdvec(header).map_err(|e| Error::corrupt("snapshot", e.to_string()))?;
    let plain = postcard::to_stdvec(state).map_err(|e| Error::corrupt("snapshot", e.to_string()))?;
    let mut out = Vec::with_capacity(plain.len() + h.len() + 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
    let flags = if key.is_some() { FLAG_ENCRYPTED } else { 0 };
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&h);
    let payload_len = plain.len() as u64 + if key.is_some() { 16 } else { 0 };
    out.extend_from_slice(&payload_len.to_le_bytes());
    match key {
        Some(k) => {
            let nonce = nonce_for(k, &out, &plain);
            out.extend_from_slice(&nonce);
            let cipher = ChaCha20Poly1305::new(Key::from_slice(k));
            let ct = cipher
                .encrypt(Nonce::from_slice(&nonce), Payload { msg: &plain, aad: &out })
                .map_err(|_| Error::new(ErrorKind::SnapshotAuth { detail: "encryption failed".into() }))?;
            out.extend_from_slice(&ct);
        }
        None => {
            out.extend_from_slice(&[0u8; 12]);
            out.extend_from_slice(&plain);
        }
    }
    let c = crc32fast::hash(&out);
    out.extend_from_slice(&c.to_le_bytes());
    Ok(out)
}

/// Reads and checks the header (magic, version, checksum) without decrypting.
pub fn read_header(bytes: &[u8]) -> Result<SnapshotHeader> {
    split(bytes).map(|p| p.header)
}

struct Parts<'a> {
    header: SnapshotHeader,
    encrypted: bool,
    aad: &'a [u8],
    nonce: &'a [u8],
    payload: &'a [u8],
}

fn split(bytes: &[u8]) -> Result<Parts<'_>> {
    if bytes.len() < 44 {
        return Err(Error::corrupt("snapshot", format!("{} bytes is too short", bytes.len())));
    }
    if &bytes[..8] != MAGIC {
        return Err(Error::corrupt("snapshot", "bad magic"));
    }
    let version = le_u32(bytes, 8)?;
    if version != SNAPSHOT_VERSION {
        return Err(Error::new(ErrorKind::UnsupportedFormat { what: "snapshot", version }));
    }
    let body = bytes.len() - 4;
    if le_u32(bytes, body)? != crc32fast::hash(&bytes[..body]) {
        return Err(Error::corrupt("snapshot", "checksum mismatch"));
    }
    let flags = le_u32(bytes, 12)?;
    if flags & !FLAG_ENCRYPTED != 0 {
        return Err(Error::corrupt("snapshot", format!("unknown flags {flags:#x}")));
    }
    let h = le_u32(bytes, 16)?;
    if h > MAX_HEADER {
        return Err(Error::corrupt("snapshot", "header too long"));
    }
    let h = h as usize;
    let header_bytes = bytes.get(20..20 + h).ok_or_else(|| Error::corrupt("snapshot", "truncated header"))?;
    let header: SnapshotHeader =
        postcard::from_bytes(header_bytes).map_err(|e| Error::corrupt("snapshot", format!("header: {e}")))?;
    let p = le_u64(bytes, 20 + h)?;
    let start = 40 + h;
    if (body as u64).checked_sub(start as u64) != Some(p) {
        return Err(Error::corrupt("snapshot", "payload length does not match the file"));
    }
    Ok(Parts {
        header,
        encrypted: flags & FLAG_ENCRYPTED != 0,
        aad: &bytes[..start],
        nonce: &bytes[28 + h..start],
        payload: &bytes[start..body],
    })
}

/// Decodes and authenticates a snapshot. With a key, only encrypted
/// snapshots are accepted.
pub(crate) fn decode(bytes: &[u8], key: Option<&[u8; 32]>) -> Result<(SnapshotHeader, TenantState)> {
    let parts = split(bytes)?;
    let plain;
    let payload = match (parts.encrypted, key) {
        (true, Some(k)) => {
            let cipher = ChaCha20Poly1305::new(Key::from_slice(k));
            plain = cipher
                .decrypt(Nonce::from_slice(parts.nonce), Payload { msg: parts.payload, aad: parts.aad })
                .map_err(|_| {
                    Error::new(ErrorKind::SnapshotAuth {
                        detail: "the payload or header was modified, or the key is wrong".into(),
                    })
                })?;
            &plain[..]
        }
        (true, None) => {
            return Err(Error::new(ErrorKind::SnapshotAuth {
                detail: "the snapshot is encrypted and no key is configured".into(),
            }))
        }
        (false, Some(_)) => {
            return Err(Error::new(ErrorKind::SnapshotAuth {
                detail: "a key is configured and the snapshot is not encrypted".into(),
            }))
        }
        (false, None) => parts.payload,
    };
    let state: TenantState =
        postcard::from_bytes(payload).map_err(|e| Error::corrupt("snapshot", format!("payload: {e}")))?;
    for r in &state.items {
        r.validate()?;
    }
    if state.items.len() as u64 != parts.header.items {
        return Err(Error::corrupt("snapshot", "item count does not match the header"));
    }
    Ok((parts.header, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (SnapshotHeader, TenantState) {
        let items = vec![crate::store::tests::record("a", 1)];
        (
            SnapshotHeader {
                tenant: "t".into(),
                covered_lsn: 7,
                normalization_version: "seed-v1".into(),
                feature_hash_version: "xxh3-64".into(),
                content_hash_version: "blake3-128".into(),
                signature_version: "minhash-mulshift-v1".into(),
                lsh_version: "8x4".into(),
                policy_version: "default@v1".into(),
                fingerprint_version: "f".into(),
                items: 1,
            },
            TenantState {
                config_json: "{}".into(),
                previous_json: None,
                tombstones: vec![],
                idempotency: vec![],
                labels: vec![],
                items,
            },
        )
    }

    #[test]
    fn round_trip_plain_and_encrypted() {
        let (h, s) = sample();
        let key = [9u8; 32];
        for k in [None, Some(&key)] {
            let bytes = encode(&h, &s, k).unwrap();
            assert_eq!(encode(&h, &s, k).unwrap(), bytes, "deterministic");
            let (h2, s2) = decode(&bytes, k).unwrap();
            assert_eq!((h2, s2), (h.clone(), s.clone()));
            assert_eq!(read_header(&bytes).unwrap().covered_lsn, 7);
        }
    }

    #[test]
    fn truncated_and_flipped_detected() {
        let (h, s) = sample();
        let bytes = encode(&h, &s, None).unwrap();
        for cut in [0, 10, 43, bytes.len() / 2, bytes.len() - 1] {
            assert_eq!(decode(&bytes[..cut], None).unwrap_err().code(), "corrupt");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 1;
            assert!(decode(&b, None).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn tampered_encrypted_snapshot_not_decoded() {
        let (h, s) = sample();
        let key = [3u8; 32];
        let bytes = encode(&h, &s, Some(&key)).unwrap();
        // An attacker who recomputes the CRC still fails authentication.
        for i in [20, 30, bytes.len() - 20] {
            let mut b = bytes.clone();
            b[i] ^= 0x80;
            let n = b.len() - 4;
            let c = crc32fast::hash(&b[..n]);
            b[n..].copy_from_slice(&c.to_le_bytes());
            let e = decode(&b, Some(&key)).unwrap_err();
            assert!(matches!(e.code(), "snapshot_auth" | "corrupt"), "{e}");
        }
        assert_eq!(decode(&bytes, Some(&[4u8; 32])).unwrap_err().code(), "snapshot_auth");
        assert_eq!(decode(&bytes, None).unwrap_err().code(), "snapshot_auth");
        let plain = encode(&h, &s, None).unwrap();
        assert_eq!(decode(&plain, Some(&key)).unwrap_err().code(), "snapshot_auth");
    }
}
