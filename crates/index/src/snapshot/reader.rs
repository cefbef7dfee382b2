//! Reading snapshots part by part, every frame checked.

use super::*;

/// What a snapshot holds, part by part.
#[derive(Debug)]
pub(crate) enum Part {
    /// The tenant's state besides records (always first).
    Meta(TenantMeta),
    /// A batch of records.
    Records(Vec<ItemRecord>),
    /// The start of an index image.
    Image(ImageHeader),
    /// Encoded image rows (see [`decode_rows`]).
    ImageRows(Vec<u8>),
}

/// Reads a snapshot (version 2 as a stream; version 1 whole) part by part,
/// checking every frame; the last call checks the count and the CRC.
pub(crate) struct SnapshotReader<R: Read> {
    inner: Inner<R>,
    header: SnapshotHeader,
    store_checkpoint: bool,
}

enum Inner<R: Read> {
    V1 { parts: std::vec::IntoIter<Part> },
    V2(Box<V2Reader<R>>),
}

struct V2Reader<R: Read> {
    input: R,
    /// 2 or 3: which records frames it holds.
    version: u32,
    key: Option<[u8; 32]>,
    encrypted: bool,
    crc: crc32fast::Hasher,
    digest: [u8; 32],
    index: u64,
    records: u64,
    last: u8,
    image: Option<ImageHeader>,
    rows_bytes: u64,
    done: bool,
}

fn read_exact_or(r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => corrupt(format!("truncated in the {what}")),
        _ => io(e),
    })
}

impl<R: Read> SnapshotReader<R> {
    /// Reads the prefix and header; `key` as the engine's (a keyed engine
    /// accepts only encrypted snapshots, an engine without one only plain).
    /// Version 1 files are read whole here (at most `max_v1` bytes).
    pub(crate) fn open(mut input: R, key: Option<&[u8; 32]>, max_v1: u64) -> Result<SnapshotReader<R>> {
        let mut prefix = [0u8; PREFIX];
        read_exact_or(&mut input, &mut prefix, "prefix")?;
        if &prefix[..8] != MAGIC {
            return Err(corrupt("bad magic"));
        }
        let version = u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]);
        if version == v1::VERSION {
            let mut bytes = prefix.to_vec();
            (&mut input).take(max_v1.saturating_sub(PREFIX as u64) + 1).read_to_end(&mut bytes).map_err(io)?;
            if bytes.len() as u64 > max_v1 {
                return Err(Error::new(ErrorKind::TooLarge {
                    limit: "version 1 snapshot bytes",
                    max: max_v1,
                    actual: bytes.len() as u64,
                }));
            }
            let (header, state) = v1::decode(&bytes, key)?;
            let (meta, items) = state.split();
            let mut parts = vec![Part::Meta(meta)];
            parts.extend(items.chunks(4096).map(|c| Part::Records(c.to_vec())));
            return Ok(SnapshotReader {
                inner: Inner::V1 { parts: parts.into_iter() },
                header,
                store_checkpoint: false,
            });
        }
        if version != SNAPSHOT_VERSION && version != V2 {
            return Err(Error::new(ErrorKind::UnsupportedFormat { what: "snapshot", version }));
        }
        let flags = u32::from_le_bytes([prefix[12], prefix[13], prefix[14], prefix[15]]);
        if flags & !(FLAG_ENCRYPTED | FLAG_STORE_CHECKPOINT) != 0 {
            return Err(corrupt(format!("unknown flags {flags:#x}")));
        }
        let encrypted = flags & FLAG_ENCRYPTED != 0;
        check_key_matches(encrypted, key)?;
        let h = u32::from_le_bytes([prefix[16], prefix[17], prefix[18], prefix[19]]);
        if h > MAX_HEADER {
            return Err(corrupt("header too long"));
        }
        let mut hb = vec![0u8; h as usize];
        read_exact_or(&mut input, &mut hb, "header")?;
        let header: SnapshotHeader = postcard::from_bytes(&hb).map_err(|e| corrupt(format!("header: {e}")))?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&prefix);
        crc.update(&hb);
        let mut all = prefix.to_vec();
        all.extend_from_slice(&hb);
        let reader = V2Reader {
            input,
            version,
            key: key.copied(),
            encrypted,
            crc,
            digest: *blake3::hash(&all).as_bytes(),
            index: 0,
            records: 0,
            last: 0,
            image: None,
            rows_bytes: 0,
            done: false,
        };
        Ok(SnapshotReader {
            inner: Inner::V2(Box::new(reader)),
            header,
            store_checkpoint: flags & FLAG_STORE_CHECKPOINT != 0,
        })
    }

    /// The header.
    pub(crate) fn header(&self) -> &SnapshotHeader {
        &self.header
    }

    /// True for a store checkpoint (records live in the engine's store).
    pub(crate) fn is_store_checkpoint(&self) -> bool {
        self.store_checkpoint
    }

    /// The next part, or `None` after the last one (count and CRC checked).
    pub(crate) fn next_part(&mut self) -> Result<Option<Part>> {
        match &mut self.inner {
            Inner::V1 { parts } => Ok(parts.next()),
            Inner::V2(r) => r.next_part(&self.header),
        }
    }
}

impl<R: Read> V2Reader<R> {
    fn next_part(&mut self, header: &SnapshotHeader) -> Result<Option<Part>> {
        if self.done {
            return Ok(None);
        }
        let mut head = [0u8; FRAME_HEAD];
        read_exact_or(&mut self.input, &mut head, "frames")?;
        let kind = head[0];
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
        if len > MAX_FRAME {
            return Err(corrupt(format!("a frame of {len} bytes is over the limit")));
        }
        let mut body = vec![0u8; len as usize];
        read_exact_or(&mut self.input, &mut body, "frames")?;
        if u32::from_le_bytes([head[5], head[6], head[7], head[8]]) != crc32fast::hash(&body) {
            return Err(corrupt(format!("frame {} fails its checksum", self.index)));
        }
        self.crc.update(&head);
        self.crc.update(&body);
        // meta, [image, rows*], records*, end; version 3 writes its
        // records compressed and lean, version 2 plain.
        let records = if self.version == V2 { KIND_RECORDS } else { KIND_LEAN_RECORDS };
        let allowed = match kind {
            KIND_META => self.last == 0,
            KIND_IMAGE => self.last == KIND_META,
            KIND_ROWS => matches!(self.last, KIND_IMAGE | KIND_ROWS),
            k if k == records || k == KIND_END => {
                matches!(self.last, KIND_META | KIND_IMAGE | KIND_ROWS) || self.last == records
            }
            _ => false,
        };
        if !allowed {
            return Err(corrupt(format!("frame {} of kind {kind} cannot follow kind {}", self.index, self.last)));
        }
        self.last = kind;
        let aad = frame_aad(&self.digest, self.index, kind);
        let plain = match (&self.key, self.encrypted) {
            (Some(k), true) => ChaCha20Poly1305::new(Key::from_slice(k))
                .decrypt(Nonce::from_slice(&head[9..21]), Payload { msg: &body, aad: &aad })
                .map_err(|_| {
                    Error::new(ErrorKind::SnapshotAuth {
                        detail: "a frame was modified, moved or sealed with another key".into(),
                    })
                })?,
            _ => body,
        };
        self.index += 1;
        match kind {
            KIND_META => {
                let meta: TenantMeta = postcard::from_bytes(&plain).map_err(|e| corrupt(format!("meta: {e}")))?;
                Ok(Some(Part::Meta(meta)))
            }
            KIND_IMAGE => {
                let h: ImageHeader = postcard::from_bytes(&plain).map_err(|e| corrupt(format!("image: {e}")))?;
                self.image = Some(h.clone());
                Ok(Some(Part::Image(h)))
            }
            KIND_ROWS => {
                self.rows_bytes += plain.len() as u64;
                Ok(Some(Part::ImageRows(plain)))
            }
            KIND_RECORDS | KIND_LEAN_RECORDS => {
                let lean = kind == KIND_LEAN_RECORDS;
                let plain = if lean {
                    let size = zstd::zstd_safe::get_frame_content_size(&plain)
                        .ok()
                        .flatten()
                        .filter(|&s| s <= u64::from(MAX_FRAME))
                        .ok_or_else(|| corrupt(format!("frame {}: no records frame of a size allowed", self.index)))?;
                    crate::item::decompress(&plain, size as usize)
                        .map_err(|e| corrupt(format!("frame {}: {e}", self.index)))?
                } else {
                    plain
                };
                let mut records: Vec<ItemRecord> =
                    postcard::from_bytes(&plain).map_err(|e| corrupt(format!("records: {e}")))?;
                for r in &mut records {
                    r.validate()?;
                    if lean && r.content.is_some() {
                        if !r.features.is_empty() || !r.signature.is_empty() {
                            return Err(corrupt(format!("record {:?} keeps features beside its content", r.item_id)));
                        }
                        r.features_at = crate::item::FeaturesAt::Elided;
                    }
                }
                self.records += records.len() as u64;
                Ok(Some(Part::Records(records)))
            }
            _ => {
                let end: EndFrame = postcard::from_bytes(&plain).map_err(|e| corrupt(format!("end: {e}")))?;
                if end.records != self.records || end.records != header.items {
                    return Err(corrupt(format!(
                        "{} records read, the end frame says {}, the header {}",
                        self.records, end.records, header.items
                    )));
                }
                let mut c = [0u8; 4];
                read_exact_or(&mut self.input, &mut c, "checksum")?;
                if u32::from_le_bytes(c) != self.crc.clone().finalize() {
                    return Err(corrupt("checksum mismatch"));
                }
                let mut extra = [0u8; 1];
                if self.input.read(&mut extra).map_err(io)? != 0 {
                    return Err(corrupt("bytes after the checksum"));
                }
                self.done = true;
                Ok(None)
            }
        }
    }
}

/// Reads the header of a snapshot of either version from its first bytes
/// (a version-1 file must be whole: its checksum is checked).
pub fn read_header(bytes: &[u8]) -> Result<SnapshotHeader> {
    if bytes.len() >= 12 && bytes[8..12] == v1::VERSION.to_le_bytes() {
        return v1::read_header(bytes);
    }
    let r = SnapshotReader::open(bytes, None, 0).or_else(|e| match e.kind() {
        ErrorKind::SnapshotAuth { .. } => SnapshotReader::open(bytes, Some(&[0; 32]), 0),
        _ => Err(e),
    })?;
    Ok(r.header)
}

/// Reads a whole snapshot from `bytes` into memory (tests and small files).
#[cfg(test)]
pub(crate) fn decode_all(bytes: &[u8], key: Option<&[u8; 32]>) -> Result<(SnapshotHeader, TenantState, bool)> {
    let mut r = SnapshotReader::open(bytes, key, u64::MAX)?;
    let (mut meta, mut items) = (None, Vec::new());
    while let Some(p) = r.next_part()? {
        match p {
            Part::Meta(m) => meta = Some(m),
            Part::Records(rs) => items.extend(rs),
            Part::Image(_) | Part::ImageRows(_) => {}
        }
    }
    let m = meta.ok_or_else(|| corrupt("no meta frame"))?;
    let state = TenantState {
        config_json: m.config_json,
        previous_json: m.previous_json,
        tombstones: m.tombstones,
        idempotency: m.idempotency,
        labels: m.labels,
        items,
    };
    Ok((r.header, state, r.store_checkpoint))
}
