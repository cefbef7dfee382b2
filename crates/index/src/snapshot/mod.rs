//! Tenant snapshots: one tenant's state at one log position, written and
//! read as a stream, so that neither side ever holds the whole state.
//!
//! Format version 3 (byte layout in `docs/index-format.md`): a fixed prefix
//! (magic, version, flags, header length), a clear-text postcard
//! [`SnapshotHeader`], then frames — one `meta` frame (configuration,
//! tombstones, idempotency keys, labels), any number of `records` frames of
//! at most [`FRAME_TARGET`] bytes before compression (zstd; a record that
//! keeps its text is written without its features, which come back from
//! the text), one `end` frame with the record count —
//! and a CRC-32 of everything before it. Each frame carries its own CRC-32;
//! with a key, each frame's body is sealed with ChaCha20-Poly1305 under a
//! synthetic nonce (keyed BLAKE3 of the frame's position, kind and
//! plaintext), with the header, the frame's index and kind as associated
//! data: frames cannot be altered, reordered, dropped or moved between
//! files, a missing `end` frame is a truncated file, and equal states give
//! equal bytes. An engine configured with a key refuses unencrypted
//! snapshots, so encryption cannot be stripped.
//!
//! Flag bit 1 marks a *store checkpoint*: the meta frame and no records,
//! written by an engine whose item store is persistent (fjall) after the
//! store itself was made durable; its records are the store's. A store
//! checkpoint may carry the tenant's *index image* after its meta frame: an
//! `image` frame (counts and layout) and `rows` frames, one row per live
//! item in slot order — its id, content hash, folded band keys and sketch —
//! from which a restart rebuilds the candidate index without reading the
//! store or recomputing a signature.
//!
//! Version 2 (the same frames, records in plain postcard with their
//! features) and version 1 (one payload, read whole; [`v1`]) are still read.

mod reader;
pub(crate) mod v1;
mod writer;

#[cfg(test)]
pub(crate) use reader::decode_all;
pub use reader::read_header;
pub(crate) use reader::{Part, SnapshotReader};
pub(crate) use writer::SnapshotWriter;

use std::io::{Read, Write};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use serde::{Deserialize, Serialize};

use crate::command::IdemEntry;
use crate::error::{Error, ErrorKind, Result};
use crate::feedback::LabelEvent;
use crate::item::ItemRecord;

pub(crate) const MAGIC: &[u8; 8] = b"NDUPSNAP";
/// The snapshot format version this build writes (it reads 1, 2 and 3).
pub const SNAPSHOT_VERSION: u32 = 3;
/// Version 2: records frames in plain postcard, with their features.
pub(crate) const V2: u32 = 2;
pub(crate) const FLAG_ENCRYPTED: u32 = 1;
/// Records live in the engine's persistent store, not in the file.
pub(crate) const FLAG_STORE_CHECKPOINT: u32 = 2;
pub(crate) const MAX_HEADER: u32 = 64 << 10;
/// Plaintext bytes a records frame is filled to before it is written.
pub const FRAME_TARGET: usize = 4 << 20;
/// Largest frame body accepted, so a corrupt length cannot drive an allocation.
const MAX_FRAME: u32 = 64 << 20;
const PREFIX: usize = 20;
const FRAME_HEAD: usize = 1 + 4 + 4 + 12;

const KIND_META: u8 = 1;
const KIND_RECORDS: u8 = 2;
const KIND_END: u8 = 3;
const KIND_IMAGE: u8 = 4;
const KIND_ROWS: u8 = 5;
/// Version 3's records frame: zstd-compressed, and every record that has
/// its content is written without its features (derived again from the
/// content, under the header's parameters, when read).
const KIND_LEAN_RECORDS: u8 = 6;

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
    /// Records in the snapshot (0 in a store checkpoint).
    pub items: u64,
}

/// A tenant's state besides its records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TenantMeta {
    pub config_json: String,
    pub previous_json: Option<String>,
    /// Tombstone markers, sorted by item id.
    pub tombstones: Vec<(String, u64)>,
    /// Idempotency keys, oldest first.
    pub idempotency: Vec<IdemEntry>,
    pub labels: Vec<LabelEvent>,
}

/// A tenant's whole state in memory (version 1, and tests).
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

impl TenantState {
    pub(crate) fn split(self) -> (TenantMeta, Vec<ItemRecord>) {
        let meta = TenantMeta {
            config_json: self.config_json,
            previous_json: self.previous_json,
            tombstones: self.tombstones,
            idempotency: self.idempotency,
            labels: self.labels,
        };
        (meta, self.items)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct EndFrame {
    records: u64,
}

/// The layout and counts of an index image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ImageHeader {
    /// Rows that follow (live items).
    pub rows: u64,
    /// Band keys per banded row.
    pub bands: u32,
    /// Sketch bytes per banded row.
    pub sketch_len: u32,
    /// The tenant's live content bytes.
    pub live_bytes: u64,
    /// Records in the store, tombstoned ones included.
    pub stored_records: u64,
}

/// One row of an index image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageRowOwned<'a> {
    pub item_id: &'a str,
    pub content_hash: [u8; 16],
    pub folded: &'a [u32],
    pub sketch: &'a [u8],
}

/// Appends a row: id length (u16 LE), id, content hash (16), banded flag,
/// then when banded the keys (u32 LE each) and the sketch.
pub(crate) fn encode_row(out: &mut Vec<u8>, row: &ImageRowOwned<'_>) {
    out.extend_from_slice(&(row.item_id.len() as u16).to_le_bytes());
    out.extend_from_slice(row.item_id.as_bytes());
    out.extend_from_slice(&row.content_hash);
    out.push(u8::from(!row.folded.is_empty()));
    for k in row.folded {
        out.extend_from_slice(&k.to_le_bytes());
    }
    out.extend_from_slice(row.sketch);
}

/// Decodes the rows of one `rows` frame, calling `f` with each; `keys` is
/// scratch. Every length is checked against the frame and the header.
pub(crate) fn decode_rows(
    mut bytes: &[u8],
    h: &ImageHeader,
    keys: &mut Vec<u32>,
    f: &mut dyn FnMut(ImageRowOwned<'_>) -> Result<()>,
) -> Result<u64> {
    let bad = || corrupt("an index image row is truncated or malformed");
    let mut n = 0;
    while !bytes.is_empty() {
        let take = |b: &mut &[u8], k: usize| -> Result<Vec<u8>> {
            if b.len() < k {
                return Err(bad());
            }
            let (head, rest) = b.split_at(k);
            *b = rest;
            Ok(head.to_vec())
        };
        let len = u16::from_le_bytes(take(&mut bytes, 2)?.try_into().map_err(|_| bad())?) as usize;
        if len > crate::tenant_config::MAX_ITEM_ID || bytes.len() < len {
            return Err(bad());
        }
        let (id, rest) = bytes.split_at(len);
        bytes = rest;
        let item_id = std::str::from_utf8(id).map_err(|_| bad())?;
        let hash: [u8; 16] = take(&mut bytes, 16)?.try_into().map_err(|_| bad())?;
        let banded = take(&mut bytes, 1)?[0];
        keys.clear();
        let sketch: &[u8] = match banded {
            0 => &[],
            1 => {
                let kb = take(&mut bytes, h.bands as usize * 4)?;
                keys.extend(kb.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
                if bytes.len() < h.sketch_len as usize {
                    return Err(bad());
                }
                let (sk, rest) = bytes.split_at(h.sketch_len as usize);
                bytes = rest;
                sk
            }
            _ => return Err(bad()),
        };
        f(ImageRowOwned { item_id, content_hash: hash, folded: keys, sketch })?;
        n += 1;
    }
    Ok(n)
}

/// A keyed engine reads only encrypted snapshots, an engine without a key
/// only plain ones (so encryption cannot be stripped): the one check, for
/// both format versions.
fn check_key_matches(encrypted: bool, key: Option<&[u8; 32]>) -> Result<()> {
    let detail = match (encrypted, key) {
        (true, None) => "the snapshot is encrypted and no key is configured",
        (false, Some(_)) => "a key is configured and the snapshot is not encrypted",
        _ => return Ok(()),
    };
    Err(Error::new(ErrorKind::SnapshotAuth { detail: detail.into() }))
}

fn corrupt(detail: impl Into<String>) -> Error {
    Error::corrupt("snapshot", detail)
}

fn io(e: std::io::Error) -> Error {
    Error::io("snapshot", e)
}

/// Where a frame sits, bound into its seal: the header digest, index and kind.
fn frame_aad(header_digest: &[u8; 32], index: u64, kind: u8) -> [u8; 41] {
    let mut aad = [0u8; 41];
    aad[..32].copy_from_slice(header_digest);
    aad[32..40].copy_from_slice(&index.to_le_bytes());
    aad[40] = kind;
    aad
}

fn frame_nonce(key: &[u8; 32], aad: &[u8], plain: &[u8]) -> [u8; 12] {
    crate::seal::nonce(key, b"neardup snapshot frame nonce v2", aad, plain)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A header and state with `n` records (shared with the version-1 tests).
    pub(crate) fn sample(n: usize) -> (SnapshotHeader, TenantState) {
        let items: Vec<ItemRecord> = (0..n)
            .map(|i| {
                // Every third record without content (it keeps its features).
                let mut r = crate::store::tests::record(&format!("i{i:06}"), i as u64);
                r.content = (i % 3 != 0).then(|| format!("{i} ").repeat(50));
                r
            })
            .collect();
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
                items: n as u64,
            },
            TenantState {
                config_json: "{}".into(),
                previous_json: None,
                tombstones: vec![("gone".into(), 2)],
                idempotency: vec![],
                labels: vec![],
                items,
            },
        )
    }

    fn encode(h: &SnapshotHeader, s: &TenantState, key: Option<&[u8; 32]>) -> Vec<u8> {
        let (meta, mut items) = s.clone().split();
        let mut w = SnapshotWriter::start(Vec::new(), h, &meta, key, false).unwrap();
        for r in &mut items {
            w.record(r).unwrap();
        }
        w.finish().unwrap()
    }

    /// `s` as a version-3 snapshot gives it back: a record that keeps its
    /// content comes without its features (and signature), to be derived.
    fn lean(s: &TenantState) -> TenantState {
        let mut s = s.clone();
        for r in s.items.iter_mut().filter(|r| r.content.is_some()) {
            r.features.clear();
            r.signature.clear();
            r.features_at = crate::item::FeaturesAt::Elided;
        }
        s
    }

    #[test]
    fn round_trip_plain_and_encrypted_over_many_frames() {
        // Enough records for several 4 MiB frames.
        let (h, s) = sample(40_000);
        let key = [9u8; 32];
        for k in [None, Some(&key)] {
            let bytes = encode(&h, &s, k);
            let mut r = SnapshotReader::open(&bytes[..], k, 0).unwrap();
            let mut frames = 0;
            while let Some(p) = r.next_part().unwrap() {
                frames += usize::from(matches!(p, Part::Records(_)));
            }
            assert!(frames > 2, "{frames} records frames");
            assert_eq!(encode(&h, &s, k), bytes, "deterministic");
            let (h2, s2, ckpt) = decode_all(&bytes, k).unwrap();
            assert_eq!((h2, s2, ckpt), (h.clone(), lean(&s), false));
            assert_eq!(read_header(&bytes).unwrap().covered_lsn, 7);
        }
    }

    #[test]
    fn version_1_files_still_read() {
        let (h, s) = sample(3);
        let bytes = v1::encode(&h, &s, None).unwrap();
        let (h2, s2, _) = decode_all(&bytes, None).unwrap();
        assert_eq!((h2, s2), (h.clone(), s));
        assert_eq!(read_header(&bytes).unwrap(), h);
    }

    #[test]
    fn truncated_flipped_and_extended_files_are_rejected() {
        let (h, s) = sample(5);
        let bytes = encode(&h, &s, None);
        for cut in [0, 10, 19, 40, bytes.len() / 2, bytes.len() - 5, bytes.len() - 1] {
            assert_eq!(decode_all(&bytes[..cut], None).unwrap_err().code(), "corrupt", "cut {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 1;
            assert!(decode_all(&b, None).is_err(), "flip at {i} accepted");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_all(&longer, None).is_err());
        // A header announcing more records than were written is refused at write time.
        let (mut h2, s2) = sample(2);
        h2.items = 3;
        let (meta, mut items) = s2.split();
        let mut w = SnapshotWriter::start(Vec::new(), &h2, &meta, None, false).unwrap();
        for r in &mut items {
            w.record(r).unwrap();
        }
        assert!(w.finish().is_err());
    }

    #[test]
    fn store_checkpoints_carry_an_index_image() {
        let (mut h, s) = sample(0);
        h.items = 0;
        let (meta, _) = s.split();
        let ih = ImageHeader { rows: 20_000, bands: 3, sketch_len: 8, live_bytes: 99, stored_records: 21_000 };
        let key = [5u8; 32];
        for k in [None, Some(&key)] {
            let mut w = SnapshotWriter::start(Vec::new(), &h, &meta, k, true).unwrap();
            w.image(&ih).unwrap();
            for i in 0..20_000u32 {
                let id = format!("item-{i}");
                let (keys, sketch) = if i % 5 == 0 { (vec![], vec![]) } else { (vec![i, i + 1, i + 2], vec![7u8; 8]) };
                w.image_row(&ImageRowOwned {
                    item_id: &id,
                    content_hash: [i as u8; 16],
                    folded: &keys,
                    sketch: &sketch,
                })
                .unwrap();
            }
            let bytes = w.finish().unwrap();
            let mut r = SnapshotReader::open(&bytes[..], k, 0).unwrap();
            assert!(r.is_store_checkpoint());
            let (mut rows, mut scratch, mut got_header) = (0u64, Vec::new(), None);
            while let Some(p) = r.next_part().unwrap() {
                match p {
                    Part::Image(g) => got_header = Some(g),
                    Part::ImageRows(b) => {
                        rows += decode_rows(&b, &ih, &mut scratch, &mut |row| {
                            let i: u32 = row.item_id[5..].parse().unwrap();
                            assert_eq!(row.folded.is_empty(), i.is_multiple_of(5));
                            assert_eq!(row.content_hash, [i as u8; 16]);
                            Ok(())
                        })
                        .unwrap()
                    }
                    _ => {}
                }
            }
            assert_eq!((rows, got_header), (20_000, Some(ih.clone())));
        }
        // A short image is refused at write time; garbage rows at read time.
        let mut w = SnapshotWriter::start(Vec::new(), &h, &meta, None, true).unwrap();
        w.image(&ih).unwrap();
        assert!(w.finish().is_err());
        assert!(decode_rows(&[3, 0, b'a'], &ih, &mut Vec::new(), &mut |_| Ok(())).is_err());
    }

    #[test]
    fn sealed_frames_cannot_be_altered_moved_or_unsealed() {
        let (h, s) = sample(5);
        let key = [3u8; 32];
        let bytes = encode(&h, &s, Some(&key));
        // Alter a body byte and fix both checksums: authentication still fails.
        let body = PREFIX + postcard::to_stdvec(&h).unwrap().len() + FRAME_HEAD + 2;
        let mut b = bytes.clone();
        b[body] ^= 0x80;
        let head = body - 2 - FRAME_HEAD;
        let len = u32::from_le_bytes(b[head + 1..head + 5].try_into().unwrap()) as usize;
        let c = crc32fast::hash(&b[head + FRAME_HEAD..head + FRAME_HEAD + len]);
        b[head + 5..head + 9].copy_from_slice(&c.to_le_bytes());
        let n = b.len() - 4;
        let c = crc32fast::hash(&b[..n]);
        b[n..].copy_from_slice(&c.to_le_bytes());
        assert_eq!(decode_all(&b, Some(&key)).unwrap_err().code(), "snapshot_auth");
        assert_eq!(decode_all(&bytes, Some(&[4u8; 32])).unwrap_err().code(), "snapshot_auth");
        assert_eq!(decode_all(&bytes, None).unwrap_err().code(), "snapshot_auth");
        let plain = encode(&h, &s, None);
        assert_eq!(decode_all(&plain, Some(&key)).unwrap_err().code(), "snapshot_auth");
        // The header is readable without the key.
        assert_eq!(read_header(&bytes).unwrap(), h);
    }
}
