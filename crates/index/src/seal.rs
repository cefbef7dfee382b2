//! Sealing at rest with the engine's key (`--snapshot-key-file`). With a
//! key, snapshots are encrypted (see `snapshot`), and so are the command
//! log's records and the item store's values — item text among them — so
//! nothing an item holds is clear text on disk (item and tenant ids are:
//! they name files and store keys).
//!
//! A sealed value is `FE 00`, a 12-byte nonce, then the ChaCha20-Poly1305
//! ciphertext and tag. `FE 00` is a non-canonical varint, which postcard
//! never writes, so a sealed value is never taken for a plain one (nor for
//! a compressed store value, `FF 00`): what was written before a key was
//! set still reads, and is sealed when next written. The nonce is
//! synthetic — a keyed BLAKE3 of a domain string, the associated data and
//! the plaintext — so no random source is needed, and a nonce repeats only
//! for the same plaintext under the same associated data, when the
//! ciphertext repeats too (an observer learns only that two values are
//! equal). The associated data binds a value to its place: a store value
//! to its tenant and item id, so values cannot be swapped between ids.

use std::borrow::Cow;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};

use crate::error::{Error, ErrorKind, Result};

/// The first bytes of a sealed value.
pub(crate) const SEALED: [u8; 2] = [0xFE, 0x00];
const NONCE: usize = 12;

/// Domain of command-log records (and replicated-log commands).
pub(crate) const LOG: &[u8] = b"neardup sealed log record v1";
/// Domain of item-store values.
pub(crate) const STORE: &[u8] = b"neardup sealed store value v1";

/// The synthetic nonce of `plain` under `key`, `domain` and `aad` (also
/// the snapshot frames', under their own domain).
pub(crate) fn nonce(key: &[u8; 32], domain: &[u8], aad: &[u8], plain: &[u8]) -> [u8; NONCE] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(domain);
    h.update(aad);
    h.update(plain);
    let mut n = [0u8; NONCE];
    n.copy_from_slice(&h.finalize().as_bytes()[..NONCE]);
    n
}

/// `plain` sealed under `key`: `SEALED`, the nonce, the ciphertext. The
/// nonce is hashed under a key derived from `key` (not `key` itself), over
/// the associated data's length as well, so no two (aad, plaintext) splits
/// of one byte string share a nonce.
pub(crate) fn seal(key: &[u8; 32], domain: &[u8], aad: &[u8], plain: &[u8]) -> Result<Vec<u8>> {
    let nonce_key = blake3::derive_key("neardup seal nonce v1", key);
    let mut framed = Vec::with_capacity(8 + aad.len());
    framed.extend_from_slice(&(aad.len() as u64).to_le_bytes());
    framed.extend_from_slice(aad);
    let n = nonce(&nonce_key, domain, &framed, plain);
    let sealed = ChaCha20Poly1305::new(Key::from_slice(key))
        .encrypt(Nonce::from_slice(&n), Payload { msg: plain, aad })
        .map_err(|_| Error::state("sealing a value failed"))?;
    let mut out = Vec::with_capacity(SEALED.len() + NONCE + sealed.len());
    out.extend_from_slice(&SEALED);
    out.extend_from_slice(&n);
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// The plaintext of `bytes`: itself when it is not sealed, else opened
/// with `key`. A sealed value without a key, or that fails to open (another
/// key, or altered), is an error naming `what`.
pub(crate) fn open<'a>(
    key: Option<&[u8; 32]>,
    what: &'static str,
    aad: &[u8],
    bytes: &'a [u8],
) -> Result<Cow<'a, [u8]>> {
    let Some(rest) = bytes.strip_prefix(&SEALED) else {
        return Ok(Cow::Borrowed(bytes));
    };
    let auth = |detail: String| Error::new(ErrorKind::SnapshotAuth { detail });
    let Some(key) = key else {
        return Err(auth(format!(
            "this {what} is sealed with a key and none is configured: start with the --snapshot-key-file that wrote it"
        )));
    };
    if rest.len() < NONCE + 16 {
        return Err(Error::corrupt(what, "a sealed value shorter than its nonce and tag"));
    }
    let (n, sealed) = rest.split_at(NONCE);
    ChaCha20Poly1305::new(Key::from_slice(key))
        .decrypt(Nonce::from_slice(n), Payload { msg: sealed, aad })
        .map(Cow::Owned)
        .map_err(|_| {
            auth(format!("this {what} does not open with the configured key (another key wrote it, or it was altered)"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: [u8; 32] = [7; 32];

    #[test]
    fn sealed_values_open_only_with_their_key_and_place() {
        let v = seal(&K, STORE, b"tenant/item", b"the secret text").unwrap();
        assert!(v.starts_with(&SEALED));
        assert!(!v.windows(6).any(|w| w == b"secret"));
        assert_eq!(&*open(Some(&K), "store record", b"tenant/item", &v).unwrap(), b"the secret text");
        // Deterministic: the same value in the same place seals the same.
        assert_eq!(seal(&K, STORE, b"tenant/item", b"the secret text").unwrap(), v);
        for (key, aad) in [(None, &b"tenant/item"[..]), (Some(&[8u8; 32]), b"tenant/item"), (Some(&K), b"tenant/other")]
        {
            let e = open(key, "store record", aad, &v).unwrap_err();
            assert_eq!(e.code(), "snapshot_auth", "{e}");
        }
        let mut altered = v.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert_eq!(open(Some(&K), "store record", b"tenant/item", &altered).unwrap_err().code(), "snapshot_auth");
        assert_eq!(open(Some(&K), "store record", b"", &v[..10]).unwrap_err().code(), "corrupt");
        // A plain value reads as it is, with or without a key.
        assert_eq!(&*open(Some(&K), "store record", b"", b"plain").unwrap(), b"plain");
        assert_eq!(&*open(None, "store record", b"", b"plain").unwrap(), b"plain");
    }

    /// No plain value starts with `FE 00`: every log record and stored
    /// record starts with a varint (a command's variant, a record's item
    /// id length), and postcard writes varints canonically (it would read
    /// `FE 00` as 126, so the marker is checked first).
    #[test]
    fn no_plain_value_starts_like_a_sealed_one() {
        for n in [0u64, 126, 127, 128, 254, 255, 256, 16_383, 16_384] {
            let enc = postcard::to_stdvec(&n).unwrap();
            assert!(!enc.starts_with(&SEALED), "{n}: {enc:?}");
        }
        let mut r = crate::store::tests::record(&"x".repeat(126), 1);
        r.content = None;
        assert!(!r.encode().unwrap().starts_with(&SEALED));
    }
}
