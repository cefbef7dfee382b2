//! Snapshot format version 1, read for compatibility (the service writes
//! version 2, `super`): a magic and version, a clear-text postcard
//! [`SnapshotHeader`], the whole postcard tenant state in one payload
//! (optionally ChaCha20-Poly1305 encrypted), and a CRC-32 over everything.
//! Decoding holds the whole file in memory, which version 2 does not.
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

use crate::error::{Error, ErrorKind, Result};

use super::{SnapshotHeader, TenantState, FLAG_ENCRYPTED, MAGIC, MAX_HEADER};

/// This module's version.
pub(crate) const VERSION: u32 = 1;

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

#[cfg(test)]
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

/// Encodes a version-1 snapshot (tests and fixtures only).
#[cfg(test)]
pub(crate) fn encode(header: &SnapshotHeader, state: &TenantState, key: Option<&[u8; 32]>) -> Result<Vec<u8>> {
    let h = postcard::to_stdvec(header).map_err(|e| Error::corrupt("snapshot", e.to_string()))?;
    let plain = postcard::to_stdvec(state).map_err(|e| Error::corrupt("snapshot", e.to_string()))?;
    let mut out = Vec::with_capacity(plain.len() + h.len() + 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
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
pub(crate) fn read_header(bytes: &[u8]) -> Result<SnapshotHeader> {
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
    if version != VERSION {
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
    super::check_key_matches(parts.encrypted, key)?;
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
        _ => parts.payload,
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
    use crate::snapshot::tests::sample;

    #[test]
    fn round_trip_plain_and_encrypted() {
        let (h, s) = sample(1);
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
        let (h, s) = sample(1);
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
        let (h, s) = sample(1);
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
