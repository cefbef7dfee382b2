//! Writing snapshots as a stream of frames.

use super::*;

/// Writes a version-2 snapshot to `W`, frame by frame.
pub(crate) struct SnapshotWriter<W: Write> {
    out: W,
    key: Option<[u8; 32]>,
    crc: crc32fast::Hasher,
    digest: [u8; 32],
    index: u64,
    records: u64,
    pending: Vec<u8>,
    pending_count: u64,
    expected: u64,
    rows: Vec<u8>,
    rows_written: u64,
    rows_expected: Option<u64>,
}

impl<W: Write> SnapshotWriter<W> {
    /// Starts a snapshot: prefix, header and the meta frame.
    pub(crate) fn start(
        mut out: W,
        header: &SnapshotHeader,
        meta: &TenantMeta,
        key: Option<&[u8; 32]>,
        store_checkpoint: bool,
    ) -> Result<SnapshotWriter<W>> {
        let h = postcard::to_stdvec(header).map_err(|e| corrupt(format!("header: {e}")))?;
        let mut flags = if key.is_some() { FLAG_ENCRYPTED } else { 0 };
        if store_checkpoint {
            flags |= FLAG_STORE_CHECKPOINT;
        }
        let mut prefix = Vec::with_capacity(PREFIX + h.len());
        prefix.extend_from_slice(MAGIC);
        prefix.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        prefix.extend_from_slice(&flags.to_le_bytes());
        prefix.extend_from_slice(&(h.len() as u32).to_le_bytes());
        prefix.extend_from_slice(&h);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&prefix);
        out.write_all(&prefix).map_err(io)?;
        let mut w = SnapshotWriter {
            out,
            key: key.copied(),
            crc,
            digest: *blake3::hash(&prefix).as_bytes(),
            index: 0,
            records: 0,
            pending: Vec::new(),
            pending_count: 0,
            expected: header.items,
            rows: Vec::new(),
            rows_written: 0,
            rows_expected: None,
        };
        let m = postcard::to_stdvec(meta).map_err(|e| corrupt(format!("meta: {e}")))?;
        w.frame(KIND_META, &m)?;
        Ok(w)
    }

    fn frame(&mut self, kind: u8, plain: &[u8]) -> Result<()> {
        let aad = frame_aad(&self.digest, self.index, kind);
        let (nonce, body) = match &self.key {
            Some(k) => {
                let nonce = frame_nonce(k, &aad, plain);
                let cipher = ChaCha20Poly1305::new(Key::from_slice(k));
                let ct = cipher
                    .encrypt(Nonce::from_slice(&nonce), Payload { msg: plain, aad: &aad })
                    .map_err(|_| Error::new(ErrorKind::SnapshotAuth { detail: "encryption failed".into() }))?;
                (nonce, ct)
            }
            None => ([0u8; 12], plain.to_vec()),
        };
        let len = u32::try_from(body.len()).ok().filter(|&l| l <= MAX_FRAME).ok_or_else(|| {
            Error::new(ErrorKind::TooLarge {
                limit: "snapshot frame bytes",
                max: u64::from(MAX_FRAME),
                actual: body.len() as u64,
            })
        })?;
        let mut head = [0u8; FRAME_HEAD];
        head[0] = kind;
        head[1..5].copy_from_slice(&len.to_le_bytes());
        head[5..9].copy_from_slice(&crc32fast::hash(&body).to_le_bytes());
        head[9..21].copy_from_slice(&nonce);
        self.crc.update(&head);
        self.crc.update(&body);
        self.out.write_all(&head).and_then(|_| self.out.write_all(&body)).map_err(io)?;
        self.index += 1;
        Ok(())
    }

    /// Starts the index image (store checkpoints only, right after the meta).
    pub(crate) fn image(&mut self, h: &ImageHeader) -> Result<()> {
        if self.index != 1 || self.records != 0 {
            return Err(Error::state("an index image goes right after the meta frame"));
        }
        let b = postcard::to_stdvec(h).map_err(|e| corrupt(format!("image: {e}")))?;
        self.rows_expected = Some(h.rows);
        self.frame(KIND_IMAGE, &b)
    }

    /// Adds one image row.
    pub(crate) fn image_row(&mut self, row: &ImageRowOwned<'_>) -> Result<()> {
        encode_row(&mut self.rows, row);
        self.rows_written += 1;
        if self.rows.len() >= FRAME_TARGET {
            self.flush_rows()?;
        }
        Ok(())
    }

    fn flush_rows(&mut self) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.rows);
        self.frame(KIND_ROWS, &rows)
    }

    /// Adds one record (records are framed in batches of about
    /// [`FRAME_TARGET`] bytes). A record with its content goes without its
    /// features: every record's features are what the tenant's parameters
    /// make of its content, and the reader derives them again.
    pub(crate) fn record(&mut self, r: &mut ItemRecord) -> Result<()> {
        self.flush_rows()?;
        let bytes = if r.content.is_some() {
            r.encode_without_features()?
        } else if r.features_at == crate::item::FeaturesAt::Elided {
            return Err(Error::state(format!("the record of {:?} has neither features nor content", r.item_id)));
        } else {
            r.encode()?
        };
        // A records frame is a postcard sequence: a varint count, then records.
        self.pending.extend_from_slice(&bytes);
        self.pending_count += 1;
        self.records += 1;
        if self.pending.len() >= FRAME_TARGET {
            self.flush_records()?;
        }
        Ok(())
    }

    fn flush_records(&mut self) -> Result<()> {
        if self.pending_count == 0 {
            return Ok(());
        }
        let mut plain = Vec::with_capacity(self.pending.len() + 10);
        let mut n = self.pending_count;
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                plain.push(b);
                break;
            }
            plain.push(b | 0x80);
        }
        plain.extend_from_slice(&self.pending);
        self.pending.clear();
        self.pending_count = 0;
        let z = crate::item::compress(&plain).map_err(|e| Error::state(format!("compressing records: {e}")))?;
        self.frame(KIND_LEAN_RECORDS, &z)
    }

    /// Ends the snapshot (end frame, CRC) and returns the writer. Fails when
    /// the records written differ from the header's count.
    pub(crate) fn finish(mut self) -> Result<W> {
        self.flush_rows()?;
        self.flush_records()?;
        if let Some(want) = self.rows_expected.filter(|&w| w != self.rows_written) {
            return Err(Error::state(format!(
                "an index image of {} rows announced {want}; nothing was published",
                self.rows_written
            )));
        }
        if self.records != self.expected {
            return Err(Error::state(format!(
                "snapshot of {} records announced {}; nothing was published",
                self.records, self.expected
            )));
        }
        let end = postcard::to_stdvec(&EndFrame { records: self.records }).map_err(|e| corrupt(e.to_string()))?;
        self.frame(KIND_END, &end)?;
        let c = self.crc.clone().finalize();
        self.out.write_all(&c.to_le_bytes()).map_err(io)?;
        self.out.flush().map_err(io)?;
        Ok(self.out)
    }
}
