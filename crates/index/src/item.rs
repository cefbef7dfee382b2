//! Items as producers send them, and item records as the store keeps them.

use serde::{Deserialize, Serialize};

use crate::decision::DecisionState;
use crate::error::{Error, Result};

/// An item as a producer sends it (the seed's command, with the content
/// already resolved from its URI by the gateway).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// Producer's id, unique within the tenant.
    pub item_id: String,
    /// The text.
    pub content: String,
    /// Only `text/*` is accepted.
    pub media_type: String,
    /// Producer's timestamp (ms since the Unix epoch), kept as metadata.
    pub source_time: Option<i64>,
    /// When set, must equal the tenant's normalizer version (e.g. `seed-v1`):
    /// a producer that normalized for another version is refused, not coerced.
    pub normalization_version: Option<String>,
    /// Replaying a key returns the first answer and changes nothing.
    pub idempotency_key: Option<String>,
    /// Version of this item id. `None` means 1 for a new item. Replacing an
    /// item with different content needs an epoch above its current one.
    pub epoch: Option<u64>,
}

impl Item {
    /// A `text/plain` item with no optional fields.
    pub fn text(item_id: impl Into<String>, content: impl Into<String>) -> Item {
        Item { item_id: item_id.into(), content: content.into(), media_type: "text/plain".into(), ..Item::default() }
    }

    /// Digest of every field that defines the request, for idempotency.
    pub(crate) fn request_digest(&self) -> [u8; 16] {
        let mut h = blake3::Hasher::new();
        for part in [self.item_id.as_bytes(), self.content.as_bytes(), self.media_type.as_bytes()] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(&self.source_time.unwrap_or(i64::MIN).to_le_bytes());
        let nv = self.normalization_version.as_deref().unwrap_or("");
        h.update(&(nv.len() as u64).to_le_bytes());
        h.update(nv.as_bytes());
        h.update(&self.epoch.unwrap_or(0).to_le_bytes());
        let mut out = [0u8; 16];
        out.copy_from_slice(&h.finalize().as_bytes()[..16]);
        out
    }

    pub(crate) fn check_media_type(&self) -> Result<()> {
        let mt = self.media_type.trim();
        if mt.is_empty() || mt.starts_with("text/") {
            Ok(())
        } else {
            Err(Error::input("media_type", format!("{mt:?} is not supported; only text/* is indexed")))
        }
    }
}

/// The first bytes of a compressed stored record.
const COMPRESSED: [u8; 2] = [0xFF, 0x00];

/// Stated content sizes up to which a stored record is decompressed in one
/// call into a buffer of that size (larger ones stream, so a damaged
/// header cannot make a read allocate more than this).
const BULK_LIMIT: u64 = 16 << 20;

thread_local! {
    /// This thread's zstd contexts, each made on first use and kept.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// `plain` compressed at level 1 by this thread's context.
fn compress(plain: &[u8]) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with(|cell| match &mut *cell.borrow_mut() {
        Some(c) => c.compress(plain),
        slot @ None => slot.insert(zstd::bulk::Compressor::new(1)?).compress(plain),
    })
}

/// A frame of at most `size` bytes decompressed by this thread's context.
fn decompress(z: &[u8], size: usize) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with(|cell| match &mut *cell.borrow_mut() {
        Some(d) => d.decompress(z, size),
        slot @ None => slot.insert(zstd::bulk::Decompressor::new()?).decompress(z, size),
    })
}

/// What the store keeps per item: canonical features, signature and metadata.
/// Band keys are not stored; they are derived from the signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemRecord {
    /// The item id.
    pub item_id: String,
    /// Version of this item id.
    pub epoch: u64,
    /// Log sequence number of the command that wrote it; orders slots.
    pub lsn: u64,
    /// BLAKE3-128 of the normalized content.
    pub content_hash: [u8; 16],
    /// Tokens in the normalized content.
    pub tokens: u32,
    /// Canonical, sorted, unique feature hashes (empty when degraded).
    pub features: Vec<u64>,
    /// MinHash signature: in logged records; empty in stored ones (it is
    /// recomputed from the features when needed) and when `features` is.
    pub signature: Vec<u32>,
    /// Shingles the content would have had, when over `max_shingles`
    /// (the item is then matched by exact hash only).
    pub degraded_shingles: Option<u64>,
    /// Media type as sent.
    pub media_type: String,
    /// Producer timestamp.
    pub source_time: Option<i64>,
    /// Content length in bytes (what budgets count).
    pub content_bytes: u64,
    /// Original content, when the tenant retains it.
    pub content: Option<String>,
    /// Epoch of the tombstone, once tombstoned (the record stays until compaction).
    pub tombstone: Option<u64>,
    /// Decision state when it was written.
    pub decision: DecisionState,
}

impl ItemRecord {
    /// True unless tombstoned.
    pub fn is_live(&self) -> bool {
        self.tombstone.is_none()
    }

    /// The fingerprint parts this record keeps. `signature`: use the
    /// record's signature, when it has one (same parameters), instead of
    /// recomputing it from the features (stored records carry none; logged
    /// ones do).
    pub(crate) fn stored_fingerprint(&self, signature: bool) -> neardup_core::StoredFingerprint {
        neardup_core::StoredFingerprint {
            content_hash: neardup_core::ContentHash(self.content_hash),
            tokens: self.tokens,
            features: self.features.clone(),
            signature: (signature && !self.signature.is_empty()).then(|| self.signature.clone()),
            degraded_shingles: self.degraded_shingles,
        }
    }

    /// Encodes for the store: postcard, compressed with zstd (level 1) when
    /// longer than 256 bytes — the text of a retained item shrinks two to
    /// four times; a compressed value starts with the two bytes `FF 00`,
    /// which no postcard record starts with (a non-canonical varint), so
    /// values written before compression still read.
    ///
    /// One compression context per thread is reused (creating one per
    /// record cost more than compressing a 2 KB text); its frames carry
    /// their content size, which [`ItemRecord::decode_stored`] reads first.
    pub(crate) fn encode_stored(&self) -> Result<Vec<u8>> {
        let plain = self.encode()?;
        if plain.len() <= 256 {
            return Ok(plain);
        }
        let failed = |e: std::io::Error| Error::state(format!("compressing the record of {:?}: {e}", self.item_id));
        let z = compress(&plain).map_err(failed)?;
        let mut out = Vec::with_capacity(COMPRESSED.len() + z.len());
        out.extend_from_slice(&COMPRESSED);
        out.extend_from_slice(&z);
        Ok(out)
    }

    /// Decodes [`ItemRecord::encode_stored`]'s output (compressed or not)
    /// and validates it like input. A compressed value may expand to at
    /// most 1 GiB plus the record's fixed parts.
    ///
    /// A frame that states a content size of at most [`BULK_LIMIT`] is
    /// decompressed in one call by the thread's reused context into a
    /// buffer of that size; others (larger, or written before frames
    /// carried their size) stream through the 1 GiB limit.
    pub(crate) fn decode_stored(bytes: &[u8]) -> Result<ItemRecord> {
        match bytes.strip_prefix(&COMPRESSED) {
            Some(z) => {
                let corrupt = |e: std::io::Error| Error::corrupt("store record", e.to_string());
                if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(z) {
                    if size <= BULK_LIMIT {
                        let plain = decompress(z, size as usize).map_err(corrupt)?;
                        return ItemRecord::decode(&plain);
                    }
                }
                let mut plain = Vec::new();
                let limit = (1u64 << 30) + (64 << 20);
                std::io::Read::read_to_end(
                    &mut std::io::Read::take(
                        zstd::stream::Decoder::new(z).map_err(|e| Error::corrupt("store record", e.to_string()))?,
                        limit + 1,
                    ),
                    &mut plain,
                )
                .map_err(|e| Error::corrupt("store record", e.to_string()))?;
                if plain.len() as u64 > limit {
                    return Err(Error::corrupt("store record", "expands beyond any record's size"));
                }
                ItemRecord::decode(&plain)
            }
            None => ItemRecord::decode(bytes),
        }
    }

    /// Encodes with postcard.
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        postcard::to_stdvec(self).map_err(|e| Error::state(format!("encoding the record of {:?}: {e}", self.item_id)))
    }

    /// Decodes and validates like input: loaded state is never trusted.
    pub(crate) fn decode(bytes: &[u8]) -> Result<ItemRecord> {
        let r: ItemRecord = postcard::from_bytes(bytes).map_err(|e| Error::corrupt("store record", e.to_string()))?;
        r.validate()?;
        Ok(r)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !neardup_core::verify::is_canonical(&self.features) {
            return Err(Error::corrupt("store record", format!("features of {:?} are not canonical", self.item_id)));
        }
        if self.features.is_empty() && !self.signature.is_empty() {
            return Err(Error::corrupt(
                "store record",
                format!("signature of {:?} does not match its features", self.item_id),
            ));
        }
        Ok(())
    }
}

/// A public view of a stored item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemInfo {
    /// The item id.
    pub item_id: String,
    /// Its epoch.
    pub epoch: u64,
    /// Hex BLAKE3-128 of the normalized content.
    pub content_hash: String,
    /// Number of canonical features.
    pub features: usize,
    /// Tokens in the normalized content.
    pub tokens: u32,
    /// Content bytes.
    pub content_bytes: u64,
    /// Media type.
    pub media_type: String,
    /// Producer timestamp.
    pub source_time: Option<i64>,
    /// Over the shingle cap: matched by exact hash only.
    pub degraded: bool,
    /// Decision state when written.
    pub decision: DecisionState,
    /// Tombstone epoch, if tombstoned and not yet compacted away.
    pub tombstone: Option<u64>,
}

impl From<&ItemRecord> for ItemInfo {
    fn from(r: &ItemRecord) -> ItemInfo {
        ItemInfo {
            item_id: r.item_id.clone(),
            epoch: r.epoch,
            content_hash: r.content_hash.iter().map(|b| format!("{b:02x}")).collect(),
            features: r.features.len(),
            tokens: r.tokens,
            content_bytes: r.content_bytes,
            media_type: r.media_type.clone(),
            source_time: r.source_time,
            degraded: r.degraded_shingles.is_some(),
            decision: r.decision,
            tombstone: r.tombstone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_records_compress_and_old_ones_still_read() {
        let mut r = crate::store::tests::record("a", 1);
        assert_eq!(ItemRecord::decode_stored(&r.encode_stored().unwrap()).unwrap(), r, "small: plain");
        r.content = Some("the same words again and again ".repeat(200));
        let stored = r.encode_stored().unwrap();
        let plain = r.encode().unwrap();
        assert!(
            stored.starts_with(&COMPRESSED) && stored.len() * 4 < plain.len(),
            "{} vs {}",
            stored.len(),
            plain.len()
        );
        assert_eq!(ItemRecord::decode_stored(&stored).unwrap(), r);
        assert_eq!(ItemRecord::decode_stored(&plain).unwrap(), r, "a value written before compression");
        // The frame states its size (the one-call path reads it) ...
        let size = zstd::zstd_safe::get_frame_content_size(&stored[COMPRESSED.len()..]).unwrap();
        assert_eq!(size, Some(plain.len() as u64));
        // ... and a value streamed without one, as stores hold from before
        // the contexts were reused, still reads.
        let mut streamed = COMPRESSED.to_vec();
        zstd::stream::copy_encode(&plain[..], &mut streamed, 1).unwrap();
        assert_eq!(zstd::zstd_safe::get_frame_content_size(&streamed[COMPRESSED.len()..]).unwrap(), None);
        assert_eq!(ItemRecord::decode_stored(&streamed).unwrap(), r, "a value streamed without its size");
        // A well-formed frame of half a record is no record.
        let mut half = COMPRESSED.to_vec();
        half.extend(zstd::bulk::Compressor::new(1).unwrap().compress(&plain[..plain.len() / 2]).unwrap());
        assert_eq!(ItemRecord::decode_stored(&half).unwrap_err().code(), "corrupt");
        let mut broken = stored.clone();
        broken.truncate(stored.len() / 2);
        assert_eq!(ItemRecord::decode_stored(&broken).unwrap_err().code(), "corrupt");
        // A compression bomb is cut at the limit, not expanded.
        let bomb =
            zstd::stream::encode_all(std::io::Read::take(std::io::repeat(0), (1 << 30) + (65 << 20)), 3).unwrap();
        let mut v = COMPRESSED.to_vec();
        v.extend_from_slice(&bomb);
        assert_eq!(ItemRecord::decode_stored(&v).unwrap_err().code(), "corrupt");
    }
}
