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

/// The first bytes of a compressed stored record written without its
/// features, which are derived again from its content when read (see
/// [`FeaturesAt`]). Like [`COMPRESSED`] (and the seal's `FE 00`), a
/// non-canonical varint that no postcard record starts with; builds from
/// before it refuse such a value as corrupt rather than read it without
/// features.
const COMPRESSED_ELIDED: [u8; 2] = [0xFD, 0x00];

/// The first bytes of a stored record that keeps its content apart: a
/// little-endian `u32` length, the postcard record without its content
/// (and without features or signature: they are derived again, as behind
/// [`COMPRESSED_ELIDED`]), then a zstd frame of the content. The content
/// was compressed before its write took the tenant's lock
/// ([`PackedContent`]); builds from before it refuse such a value as
/// corrupt.
const PACKED: [u8; 2] = [0xFB, 0x00];

/// A retained text compressed (zstd level 1, as the store compresses)
/// where the write was prepared, on the writer's own thread, so the
/// tenant's lock is not held for it; the store writes it as it is
/// ([`PACKED`]). Not serialized, and no part of a record's identity:
/// records compare equal whatever it holds.
#[derive(Clone, Default)]
pub(crate) struct PackedContent(pub(crate) Option<std::sync::Arc<[u8]>>);

impl PackedContent {
    /// `content` compressed; empty when compressing fails (the store then
    /// compresses the record itself).
    pub(crate) fn of(content: &str) -> PackedContent {
        PackedContent(compress(content.as_bytes()).ok().map(Into::into))
    }
}

impl PartialEq for PackedContent {
    fn eq(&self, _: &PackedContent) -> bool {
        true
    }
}

impl std::fmt::Debug for PackedContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(z) => write!(f, "PackedContent({} bytes)", z.len()),
            None => f.write_str("PackedContent(none)"),
        }
    }
}

/// Where a record's canonical features are. Not serialized: the store's
/// encoding says it (`COMPRESSED_ELIDED`, `PACKED`); the local log's
/// lean upserts leave out those of every record that keeps its text, and
/// so does a version-3 snapshot (their readers mark them elided).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FeaturesAt {
    /// In `features`, and nothing says they can be derived again.
    #[default]
    Here,
    /// In `features`, which are exactly what the tenant's fingerprinter
    /// makes of `content`: the store may leave them out.
    Derivable,
    /// Left out by the store, the log or a snapshot: `features` is empty
    /// until the tenant derives them again from `content`
    /// (`Tenant::complete`). A record in this state is never compared.
    Elided,
}

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
pub(crate) fn compress(plain: &[u8]) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with(|cell| match &mut *cell.borrow_mut() {
        Some(c) => c.compress(plain),
        slot @ None => slot.insert(zstd::bulk::Compressor::new(1)?).compress(plain),
    })
}

/// A frame of at most `size` bytes decompressed by this thread's context.
pub(crate) fn decompress(z: &[u8], size: usize) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with(|cell| match &mut *cell.borrow_mut() {
        Some(d) => d.decompress(z, size),
        slot @ None => slot.insert(zstd::bulk::Decompressor::new()?).decompress(z, size),
    })
}

/// A stored zstd frame's bytes, at most 1 GiB plus a record's fixed parts:
/// decompressed in one call when the frame states a size of at most
/// [`BULK_LIMIT`], streamed through the limit otherwise.
fn decompress_frame(z: &[u8]) -> Result<Vec<u8>> {
    let corrupt = |e: std::io::Error| Error::corrupt("store record", e.to_string());
    if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(z) {
        if size <= BULK_LIMIT {
            return decompress(z, size as usize).map_err(corrupt);
        }
    }
    let mut plain = Vec::new();
    let limit = (1u64 << 30) + (64 << 20);
    std::io::Read::read_to_end(
        &mut std::io::Read::take(zstd::stream::Decoder::new(z).map_err(corrupt)?, limit + 1),
        &mut plain,
    )
    .map_err(corrupt)?;
    if plain.len() as u64 > limit {
        return Err(Error::corrupt("store record", "expands beyond any record's size"));
    }
    Ok(plain)
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
    /// Where the features are (not serialized; see [`FeaturesAt`]).
    #[serde(skip)]
    pub features_at: FeaturesAt,
    /// The content compressed before the write took the tenant's lock
    /// (not serialized; see [`PackedContent`]).
    #[serde(skip)]
    pub(crate) packed: PackedContent,
    /// What the plan decided beyond the state, for the event feed: in
    /// logged records only (not serialized here; the log's noted forms
    /// carry it, see `Command::UpsertNoted`).
    #[serde(skip)]
    pub(crate) note: Option<Box<crate::decision::ItemNote>>,
}

impl ItemRecord {
    /// True unless tombstoned.
    pub fn is_live(&self) -> bool {
        self.tombstone.is_none()
    }

    /// Derives the features the store left out ([`FeaturesAt::Elided`])
    /// again from the content, under `fingerprinter` (the tenant's), and
    /// returns the content's whole fingerprint; `None`, changing nothing,
    /// for a record that has its features. The content must still
    /// normalize to the hash it was written with: a build whose normalizer
    /// changed fails here, loudly, rather than compare another text's
    /// features.
    pub(crate) fn derive_features(
        &mut self,
        fingerprinter: &mut neardup_core::Fingerprinter,
    ) -> Result<Option<neardup_core::Fingerprint>> {
        if self.features_at != FeaturesAt::Elided {
            return Ok(None);
        }
        let content = self.content.as_deref().ok_or_else(|| {
            Error::corrupt("store record", format!("{:?}: features left out without content", self.item_id))
        })?;
        let fp = fingerprinter.fingerprint(content);
        if fp.content_hash.0 != self.content_hash {
            return Err(Error::corrupt(
                "store record",
                format!(
                    "the features of {:?} cannot be derived again: its content no longer normalizes to the \
                     hash it was stored with (was the normalizer changed?)",
                    self.item_id
                ),
            ));
        }
        self.features.clone_from(&fp.features);
        self.features_at = FeaturesAt::Derivable;
        Ok(Some(fp))
    }

    /// The fingerprint parts this record keeps. `signature`: use the
    /// record's signature, when it has one (same parameters), instead of
    /// recomputing it from the features (stored records carry none; logged
    /// ones do).
    pub(crate) fn stored_fingerprint(&self, signature: bool) -> neardup_core::StoredFingerprint {
        neardup_core::StoredFingerprint {
            features: self.features.clone(),
            signature: (signature && !self.signature.is_empty()).then(|| self.signature.clone()),
            ..self.stored_fingerprint_without_features()
        }
    }

    /// [`ItemRecord::stored_fingerprint`] with its signature (if it has
    /// one) and no features.
    pub(crate) fn stored_fingerprint_without_features(&self) -> neardup_core::StoredFingerprint {
        neardup_core::StoredFingerprint {
            content_hash: neardup_core::ContentHash(self.content_hash),
            tokens: self.tokens,
            features: Vec::new(),
            signature: (!self.signature.is_empty()).then(|| self.signature.clone()),
            degraded_shingles: self.degraded_shingles,
        }
    }

    /// Encodes for the store: postcard, compressed with zstd (level 1) when
    /// longer than 256 bytes — the text of a retained item shrinks two to
    /// four times; a compressed value starts with the two bytes `FF 00`,
    /// which no postcard record starts with (a non-canonical varint), so
    /// values written before compression still read.
    ///
    /// A record whose features can be derived from its content
    /// ([`FeaturesAt::Derivable`] or already [`FeaturesAt::Elided`]) is
    /// written without them (or a signature), compressed, behind `FD 00`: its features are
    /// 8 bytes a shingle of hash that does not compress, more than the
    /// compressed text itself. The record is left as it was.
    ///
    /// One compression context per thread is reused (creating one per
    /// record cost more than compressing a 2 KB text); its frames carry
    /// their content size, which [`ItemRecord::decode_stored`] reads first.
    ///
    /// A record that keeps its content and brings it compressed already
    /// ([`PackedContent`], matching the content) is written behind
    /// [`PACKED`] instead: only its small remainder is encoded here.
    pub(crate) fn encode_stored(&mut self) -> Result<Vec<u8>> {
        let elide = self.features_at != FeaturesAt::Here && self.content.is_some();
        if let (true, Some(z)) = (elide, self.packed.0.clone()) {
            let content = self.content.take();
            let meta = self.encode_without_features();
            self.content = content;
            let meta = meta?;
            let len = u32::try_from(meta.len()).map_err(|_| Error::state("a record's fields over 4 GiB"))?;
            let mut out = Vec::with_capacity(PACKED.len() + 4 + meta.len() + z.len());
            out.extend_from_slice(&PACKED);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&meta);
            out.extend_from_slice(&z);
            return Ok(out);
        }
        let plain = if elide { self.encode_without_features()? } else { self.encode()? };
        if plain.len() <= 256 && !elide {
            return Ok(plain);
        }
        let failed = |e: std::io::Error| Error::state(format!("compressing the record of {:?}: {e}", self.item_id));
        let z = compress(&plain).map_err(failed)?;
        let prefix = if elide { COMPRESSED_ELIDED } else { COMPRESSED };
        let mut out = Vec::with_capacity(prefix.len() + z.len());
        out.extend_from_slice(&prefix);
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
        if let Some(rest) = bytes.strip_prefix(&PACKED) {
            let corrupt = |why: String| Error::corrupt("store record", why);
            let (len, rest) =
                rest.split_first_chunk::<4>().ok_or_else(|| corrupt("a packed record cut short".into()))?;
            let len = u32::from_le_bytes(*len) as usize;
            let (meta, z) = (rest.get(..len), rest.get(len..));
            let (Some(meta), Some(z)) = (meta, z) else {
                return Err(corrupt("a packed record's fields run past its end".into()));
            };
            let mut r = ItemRecord::decode(meta)?;
            if r.content.is_some() || !r.features.is_empty() {
                return Err(corrupt(format!("{:?}: packed, but its fields hold content or features", r.item_id)));
            }
            let text = decompress_frame(z)?;
            r.content = Some(
                String::from_utf8(text)
                    .map_err(|_| corrupt(format!("{:?}: packed content is not UTF-8", r.item_id)))?,
            );
            r.features_at = FeaturesAt::Elided;
            return Ok(r);
        }
        if let Some(z) = bytes.strip_prefix(&COMPRESSED_ELIDED) {
            let mut r = ItemRecord::decode_compressed(z)?;
            if r.content.is_none() || !r.features.is_empty() {
                return Err(Error::corrupt(
                    "store record",
                    format!(
                        "{:?}: stored without its features, but it has no content or still has features",
                        r.item_id
                    ),
                ));
            }
            r.features_at = FeaturesAt::Elided;
            return Ok(r);
        }
        match bytes.strip_prefix(&COMPRESSED) {
            Some(z) => ItemRecord::decode_compressed(z),
            None => ItemRecord::decode(bytes),
        }
    }

    /// A zstd frame of a postcard record (see [`ItemRecord::decode_stored`]).
    fn decode_compressed(z: &[u8]) -> Result<ItemRecord> {
        ItemRecord::decode(&decompress_frame(z)?)
    }

    /// Encodes with postcard, its features and signature left out (the
    /// record is left as it was).
    pub(crate) fn encode_without_features(&mut self) -> Result<Vec<u8>> {
        let features = std::mem::take(&mut self.features);
        let signature = std::mem::take(&mut self.signature);
        let plain = self.encode();
        (self.features, self.signature) = (features, signature);
        plain
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
        if !neardup_core::is_canonical(&self.features) {
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

    /// A record whose content came compressed is stored packed and reads
    /// back as the same record the store would have made of it unpacked
    /// (features elided, content whole); damaged packed values are refused.
    #[test]
    fn packed_content_is_stored_as_it_came_and_reads_back() {
        let mut r = crate::store::tests::record("a", 1);
        r.content = Some("a text of some length, with words that repeat: ".repeat(40) + "é∑ fin");
        r.features_at = FeaturesAt::Derivable;
        let unpacked = ItemRecord::decode_stored(&r.encode_stored().unwrap()).unwrap();
        r.packed = PackedContent::of(r.content.as_deref().unwrap());
        let stored = r.encode_stored().unwrap();
        assert!(stored.starts_with(&PACKED), "not packed");
        assert!(stored.len() < r.content.as_ref().unwrap().len() / 2, "{} bytes", stored.len());
        let back = ItemRecord::decode_stored(&stored).unwrap();
        assert_eq!(back.features_at, FeaturesAt::Elided);
        assert_eq!(back.content, r.content);
        assert_eq!(back, unpacked);
        // Only a record whose features may be left out is packed.
        r.features_at = FeaturesAt::Here;
        assert!(!r.encode_stored().unwrap().starts_with(&PACKED));
        let meta_len = u32::from_le_bytes(stored[2..6].try_into().unwrap()) as usize;
        let damaged: Vec<(&str, Vec<u8>)> = vec![
            ("cut in its length", stored[..4].to_vec()),
            ("cut in its fields", stored[..6 + meta_len / 2].to_vec()),
            ("cut in its content", stored[..stored.len() - 3].to_vec()),
            ("length past the end", {
                let mut v = stored.clone();
                v[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
                v
            }),
            ("not UTF-8", {
                let mut v = stored[..6 + meta_len].to_vec();
                v.extend(compress(&[0xff, 0xfe]).unwrap());
                v
            }),
            ("content in its fields", {
                let mut with = r.clone();
                with.features = Vec::new();
                with.signature = Vec::new();
                let meta = with.encode().unwrap();
                let mut v = PACKED.to_vec();
                v.extend((meta.len() as u32).to_le_bytes());
                v.extend(meta);
                v.extend(compress(b"text").unwrap());
                v
            }),
        ];
        for (why, bytes) in damaged {
            let e = ItemRecord::decode_stored(&bytes).unwrap_err();
            assert_eq!(e.code(), "corrupt", "{why}: {e}");
        }
    }

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

    #[test]
    fn derivable_features_are_left_out_and_derived_again() {
        let params = neardup_core::Config::default().resolve().unwrap();
        let mut fingerprinter = neardup_core::Fingerprinter::new(params).unwrap();
        let text = "a retained text whose word five-grams the store need not keep, for they come back from it";
        let fp = fingerprinter.fingerprint(text);
        let mut r = crate::store::tests::record("a", 1);
        r.content = Some(text.into());
        r.content_hash = fp.content_hash.0;
        r.features.clone_from(&fp.features);
        let kept = r.encode_stored().unwrap();
        r.features_at = FeaturesAt::Derivable;
        let left_out = r.encode_stored().unwrap();
        assert_eq!(r.features, fp.features, "encoding leaves the record as it was");
        assert!(left_out.starts_with(&COMPRESSED_ELIDED) && left_out.len() + 8 * 10 < kept.len());
        assert!(!left_out.starts_with(&crate::seal::SEALED) && !left_out.starts_with(&COMPRESSED));
        // Read without the prefix (as a build from before it would): refused.
        assert!(ItemRecord::decode(&left_out).is_err());
        let mut back = ItemRecord::decode_stored(&left_out).unwrap();
        assert_eq!((back.features_at, back.features.len()), (FeaturesAt::Elided, 0));
        // Elided again when written back unchanged (a tombstone's put).
        assert!(back.encode_stored().unwrap().starts_with(&COMPRESSED_ELIDED));
        let again = back.derive_features(&mut fingerprinter).unwrap().unwrap();
        assert_eq!(
            (back.features_at, &back.features, &again.features),
            (FeaturesAt::Derivable, &fp.features, &fp.features)
        );
        assert!(back.derive_features(&mut fingerprinter).unwrap().is_none(), "only once");
        // A text that no longer normalizes to its hash is an error, not
        // another text's features.
        let mut drifted = ItemRecord::decode_stored(&left_out).unwrap();
        drifted.content = Some(format!("{text} and more"));
        assert_eq!(drifted.derive_features(&mut fingerprinter).unwrap_err().code(), "corrupt");
        // Without content nothing is left out.
        let mut lean = r.clone();
        lean.content = None;
        assert!(!lean.encode_stored().unwrap().starts_with(&COMPRESSED_ELIDED));
    }
}
