//! The saved index format: a [`MemoryIndex`](crate::MemoryIndex)'s items
//! written to and read from a byte stream, for `neardup dedup --index` and
//! the Python `Index.save`/`Index.load`. Reading and writing take any
//! `Read`/`Write`; where the bytes go (and replacing a file atomically) is
//! the caller's.
//!
//! # Format (version 1)
//!
//! | part     | bytes | contents                                                   |
//! |----------|-------|------------------------------------------------------------|
//! | magic    | 8     | `NDUPDIDX`                                                 |
//! | version  | 4     | format version, little-endian u32 ([`SAVED_INDEX_FORMAT_VERSION`])     |
//! | header   | 4 + n | length, then a JSON [`Header`]: the pipeline configuration, its fingerprint version, counts |
//! | items    | ...   | one record per item, in order                              |
//! | trailer  | 24    | `NDUPEND!`, the item count (u64), XXH3-64 of every byte before this checksum (u64) |
//!
//! An item record: id length (u32) and id bytes (UTF-8); flags (u8: 1 kept,
//! 2 has band keys); the number of the first item of its cluster (u32, at
//! most its own); content hash (16 bytes); with band keys, the folded band
//! keys (`bands` × u32) and the ranking sketch (`sketch_bytes`); the number
//! of canonical features (u32) and the features (u64 each). All integers
//! little-endian. MinHash signatures are not stored: the candidate index is
//! rebuilt from the folded keys and sketches ([`crate::ImageRow`]), exact
//! verification uses the features.
//!
//! Every field of the header is checked before anything is allocated by
//! it: the format version, the counts against an index's limits, the bands
//! against what the header's own configuration makes, the sketch width.
//! Every length in an item is checked against its limit, and its bytes are
//! read as they come (a length the stream does not hold allocates nothing).
//! A stream whose checksum, counts or lengths do not add up is refused with
//! the reason, and one written under another configuration is refused with
//! the settings that differ.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

use crate::candidates::ImageRow;
use crate::config::{Config, Params};
use crate::hash::ContentHash;

const MAGIC: &[u8; 8] = b"NDUPDIDX";
const TRAILER: &[u8; 8] = b"NDUPEND!";
/// The format version this build writes and reads.
pub const SAVED_INDEX_FORMAT_VERSION: u32 = 1;
const MAX_HEADER: u32 = 1 << 20;
const MAX_ID: u32 = 64 << 20;
const KEPT: u8 = 1;
const BANDED: u8 = 2;

/// The clear JSON header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format_version: u32,
    /// [`Params::fingerprint_version`] of the configuration.
    pub fingerprint_version: String,
    /// The whole pipeline configuration the items were made (and decided) under.
    pub config: Config,
    pub items: u64,
    pub kept: u64,
    /// Runs (or saves) that added to the index.
    pub runs: u64,
    pub bands: u32,
    pub sketch_bytes: u32,
    /// What wrote it (`neardup 0.1.0`, `neardup-python 0.1.0`).
    pub written_by: String,
}

impl Header {
    /// A header for `items` items (`kept` of them kept) made under `params`,
    /// with sketches of `sketch_bytes`.
    pub fn new(params: &Params, items: u64, kept: u64, runs: u64, sketch_bytes: usize, written_by: &str) -> Header {
        Header {
            format_version: SAVED_INDEX_FORMAT_VERSION,
            fingerprint_version: params.fingerprint_version(),
            config: params.config().clone(),
            items,
            kept,
            runs,
            bands: params.lsh().bands,
            sketch_bytes: sketch_bytes as u32,
            written_by: written_by.to_string(),
        }
    }
}

/// Why a saved index could not be read or written.
#[derive(Debug)]
pub struct FormatError(pub String);

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatError {}

impl From<io::Error> for FormatError {
    fn from(e: io::Error) -> Self {
        FormatError(e.to_string())
    }
}

fn damaged(what: impl std::fmt::Display) -> FormatError {
    FormatError(format!("{what}: the file is damaged"))
}

/// One item to write.
#[derive(Debug, Clone, Copy)]
pub struct SavedItem<'a> {
    pub id: &'a str,
    pub kept: bool,
    /// The number (in this stream) of the first item of its cluster.
    pub first: u32,
    pub row: ImageRow<'a>,
    pub features: &'a [u64],
}

/// One item read (its row borrows the reader's buffers).
#[derive(Debug)]
pub struct LoadedItem<'a> {
    pub id: String,
    pub kept: bool,
    pub first: u32,
    pub row: ImageRow<'a>,
    pub features: Vec<u64>,
}

/// A reader or writer that hashes the bytes it passes.
struct Hashing<T> {
    inner: T,
    hash: Xxh3,
    bytes: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Writes `header` and the items (exactly `header.items` of them) to `w`;
/// returns the bytes written.
pub fn write<'a>(
    w: &mut dyn Write,
    header: &Header,
    items: impl Iterator<Item = SavedItem<'a>>,
) -> Result<u64, FormatError> {
    let mut w = Hashing { inner: w, hash: Xxh3::new(), bytes: 0 };
    let head = serde_json::to_vec(header).map_err(|e| FormatError(format!("encoding the header: {e}")))?;
    w.write_all(MAGIC)?;
    w.write_all(&SAVED_INDEX_FORMAT_VERSION.to_le_bytes())?;
    w.write_all(&(head.len() as u32).to_le_bytes())?;
    w.write_all(&head)?;
    let mut buf = Vec::new();
    let mut n = 0u64;
    for item in items {
        buf.clear();
        buf.extend_from_slice(&(item.id.len() as u32).to_le_bytes());
        buf.extend_from_slice(item.id.as_bytes());
        let banded = !item.row.folded.is_empty();
        buf.push((u8::from(item.kept) * KEPT) | (u8::from(banded) * BANDED));
        buf.extend_from_slice(&item.first.to_le_bytes());
        buf.extend_from_slice(&item.row.content_hash.0);
        if banded {
            for k in item.row.folded {
                buf.extend_from_slice(&k.to_le_bytes());
            }
            buf.extend_from_slice(item.row.sketch);
        }
        buf.extend_from_slice(&(item.features.len() as u32).to_le_bytes());
        for f in item.features {
            buf.extend_from_slice(&f.to_le_bytes());
        }
        w.write_all(&buf)?;
        n += 1;
    }
    if n != header.items {
        return Err(FormatError(format!("{n} items written where the header says {}", header.items)));
    }
    w.write_all(TRAILER)?;
    w.write_all(&n.to_le_bytes())?;
    let digest = w.hash.digest();
    w.inner.write_all(&digest.to_le_bytes())?;
    Ok(w.bytes + 8)
}

/// A saved index being read: the header first, then the items.
pub struct Reader<R> {
    r: Hashing<R>,
    header: Header,
}

impl<R> std::fmt::Debug for Reader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("header", &self.header).finish()
    }
}

/// The settings two configurations differ in, as `name: index X, this run Y`.
fn differences(saved: &Config, run: &Config) -> Vec<String> {
    let (a, b) = (serde_json::to_value(saved).unwrap_or_default(), serde_json::to_value(run).unwrap_or_default());
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return vec!["the configuration".into()] };
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: index {v}, this run {}", b.get(k).cloned().unwrap_or_default()))
        .collect()
}

/// Checks every field of a header against its own configuration and the
/// limits of an index, before anything is allocated by what it claims.
fn check_header(h: &Header) -> Result<(), FormatError> {
    if h.format_version != SAVED_INDEX_FORMAT_VERSION {
        return Err(damaged(format!(
            "its header says format {} where its prefix says {SAVED_INDEX_FORMAT_VERSION}",
            h.format_version
        )));
    }
    if h.items > u64::from(crate::MAX_ITEM_ID) {
        return Err(damaged(format!("it claims {} items, more than an index holds", h.items)));
    }
    if h.kept > h.items {
        return Err(damaged(format!("it claims {} kept items of {}", h.kept, h.items)));
    }
    let params =
        h.config.resolve().map_err(|e| damaged(format!("the configuration in its header is not valid ({e})")))?;
    let bands = params.lsh().bands;
    if h.bands != bands {
        return Err(damaged(format!("its header says {} bands where its configuration makes {bands}", h.bands)));
    }
    // A sketch holds at most a 32-bit value per signature value; the
    // exact width is checked against the index the items go into.
    let most = crate::minhash::MAX_NUM_PERM * 4;
    if h.sketch_bytes as usize > most {
        return Err(damaged(format!("its header says sketches of {} bytes (at most {most})", h.sketch_bytes)));
    }
    Ok(())
}

/// Reads exactly `n` bytes into `buf`, growing it only as bytes arrive: a
/// length that a damaged stream claims costs no more memory than the bytes
/// it really holds.
fn read_len(r: &mut impl Read, n: usize, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    if r.by_ref().take(n as u64).read_to_end(buf)? != n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

impl<R: Read> Reader<R> {
    /// Reads and checks the prefix and header: every field against its own
    /// configuration and the limits of an index.
    pub fn open(raw: R) -> Result<Reader<R>, FormatError> {
        let mut r = Hashing { inner: raw, hash: Xxh3::new(), bytes: 0 };
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic).map_err(|_| damaged("it ends inside its header"))?;
        if &magic != MAGIC {
            return Err(FormatError("not a neardup saved index (no NDUPDIDX at its start)".into()));
        }
        let version = read_u32(&mut r)?;
        if version != SAVED_INDEX_FORMAT_VERSION {
            return Err(FormatError(format!(
                "written in index format {version}; this neardup reads format {SAVED_INDEX_FORMAT_VERSION} (rebuild the index \
                 with this version, or use the neardup that wrote it)"
            )));
        }
        let len = read_u32(&mut r)?;
        if len > MAX_HEADER {
            return Err(damaged(format!("a header of {len} bytes (at most {MAX_HEADER})")));
        }
        let mut head = vec![0u8; len as usize];
        r.read_exact(&mut head).map_err(|_| damaged("it ends inside its header"))?;
        let header: Header =
            serde_json::from_slice(&head).map_err(|e| FormatError(format!("its header is not valid: {e}")))?;
        check_header(&header)?;
        Ok(Reader { r, header })
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Refuses an index made under other settings than `params`, naming each.
    pub fn check(&self, params: &Params) -> Result<(), FormatError> {
        let h = &self.header;
        if h.fingerprint_version != params.fingerprint_version() || &h.config != params.config() {
            let mut diff = differences(&h.config, params.config());
            if diff.is_empty() {
                diff.push(format!(
                    "fingerprints: index {}, this run {}",
                    h.fingerprint_version,
                    params.fingerprint_version()
                ));
            }
            return Err(FormatError(format!(
                "it was built with other settings ({}); run with the index's settings, or give a new index",
                diff.join("; ")
            )));
        }
        Ok(())
    }

    /// Reads every item, in order, into `on_item`, then the trailer and the
    /// checksum. `sketch_bytes` is the sketch width of the index the items
    /// go into (refused when the header's differs).
    pub fn read_items(
        mut self,
        sketch_bytes: usize,
        mut on_item: impl FnMut(LoadedItem<'_>) -> Result<(), FormatError>,
    ) -> Result<Header, FormatError> {
        let h = self.header.clone();
        if h.sketch_bytes as usize != sketch_bytes {
            return Err(FormatError(format!(
                "its sketches are {} bytes where this index's are {sketch_bytes}",
                h.sketch_bytes
            )));
        }
        let r = &mut self.r;
        let max_features = h.config.max_shingles;
        let (mut folded, mut sketch, mut bytes) = (vec![0u32; h.bands as usize], vec![0u8; sketch_bytes], Vec::new());
        // Which items are the first of their cluster (a first must be one).
        let mut is_first: Vec<bool> = Vec::with_capacity(h.items.min(1 << 20) as usize);
        let mut id_buf = Vec::new();
        for n in 0..h.items {
            let at = |what: &str| damaged(format!("item {n}: {what}"));
            let short = |_| at("the file ends");
            let id_len = read_u32(r).map_err(short)?;
            if id_len > MAX_ID {
                return Err(at(&format!("an id of {id_len} bytes (at most {MAX_ID})")));
            }
            read_len(r, id_len as usize, &mut id_buf).map_err(short)?;
            let id = String::from_utf8(std::mem::take(&mut id_buf)).map_err(|_| at("an id that is not UTF-8"))?;
            let mut flags = [0u8; 1];
            r.read_exact(&mut flags).map_err(short)?;
            let first = read_u32(r).map_err(short)?;
            let first_ok = u64::from(first) == n || is_first.get(first as usize) == Some(&true);
            if !first_ok {
                return Err(at(&format!("names item {first} as its cluster's first")));
            }
            is_first.push(u64::from(first) == n);
            let mut hash = [0u8; 16];
            r.read_exact(&mut hash).map_err(short)?;
            let banded = flags[0] & BANDED != 0;
            if banded {
                bytes.resize(folded.len() * 4, 0);
                r.read_exact(&mut bytes).map_err(short)?;
                for (k, b) in folded.iter_mut().zip(bytes.chunks_exact(4)) {
                    *k = u32::from_le_bytes(b.try_into().expect("4 bytes"));
                }
                r.read_exact(&mut sketch).map_err(short)?;
            }
            let count = read_u32(r).map_err(short)?;
            if count > max_features {
                return Err(at(&format!("{count} features, over max_shingles {max_features}")));
            }
            read_len(r, count as usize * 8, &mut bytes).map_err(short)?;
            let features = bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
            let row = ImageRow {
                folded: if banded { &folded } else { &[] },
                sketch: if banded { &sketch } else { &[] },
                content_hash: ContentHash(hash),
            };
            on_item(LoadedItem { id, kept: flags[0] & KEPT != 0, first, row, features })?;
        }
        let mut trailer = [0u8; 8];
        r.read_exact(&mut trailer).map_err(|_| damaged("it ends before its trailer"))?;
        let items = read_u64(r).map_err(|_| damaged("it ends inside its trailer"))?;
        if &trailer != TRAILER || items != h.items {
            return Err(damaged("its trailer does not match its header"));
        }
        let expected = r.hash.digest();
        let stored = read_u64(&mut r.inner).map_err(|_| damaged("it ends before its checksum"))?;
        if stored != expected {
            return Err(damaged("its checksum does not match its contents"));
        }
        if r.inner.read(&mut [0u8; 1])? != 0 {
            return Err(damaged("bytes follow its checksum"));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fingerprinter, MemoryIndex};

    #[test]
    fn an_index_round_trips_and_damage_is_refused() {
        let params = Config::default().resolve().unwrap();
        let mut fp = Fingerprinter::new(params.clone()).unwrap();
        let mut index = MemoryIndex::new(params.clone());
        let texts = ["the red fox runs very fast over the hill", "the red fox runs very fast over the hills", ""];
        for t in texts {
            index.insert(fp.fingerprint(t)).unwrap();
        }
        let view = index.candidate_index().view();
        let ids = ["a", "b", "c"];
        let items = (0..3u32).map(|i| SavedItem {
            id: ids[i as usize],
            kept: i != 1,
            first: if i == 1 { 0 } else { i },
            row: view.row(i).unwrap(),
            features: index.features(i).unwrap(),
        });
        let sketch = index.candidate_index().sketch_len();
        let header = Header::new(&params, 3, 2, 1, sketch, "test");
        let mut bytes = Vec::new();
        let n = write(&mut bytes, &header, items).unwrap();
        assert_eq!(n, bytes.len() as u64);

        let reader = Reader::open(&bytes[..]).unwrap();
        reader.check(&params).unwrap();
        let mut back = MemoryIndex::new(params.clone());
        let mut seen = Vec::new();
        reader
            .read_items(sketch, |it| {
                seen.push((it.id.clone(), it.kept, it.first));
                back.insert_row(it.row, it.features).map(|_| ()).map_err(|e| FormatError(e.to_string()))
            })
            .unwrap();
        assert_eq!(seen, [("a".into(), true, 0), ("b".into(), false, 0), ("c".into(), true, 2)]);
        // The loaded index answers as the original.
        let q = fp.fingerprint("the red fox runs very fast over the hill");
        let want = index.verify(&q, &index.candidates(&q, None).unwrap().ids, 0.5);
        let got = back.verify(&q, &back.candidates(&q, None).unwrap().ids, 0.5);
        assert_eq!(got, want);
        assert!(!got.is_empty());

        // Other settings, damage, truncation, another version.
        let other = Config { threshold: 0.7, ..Config::default() }.resolve().unwrap();
        let e = Reader::open(&bytes[..]).unwrap().check(&other).unwrap_err().to_string();
        assert!(e.contains("threshold: index 0.8, this run 0.7"), "{e}");
        for cut in [bytes.len() - 1, bytes.len() / 2, 30] {
            let r = Reader::open(&bytes[..cut]).and_then(|r| r.read_items(sketch, |_| Ok(())));
            assert!(r.unwrap_err().to_string().contains("damaged"), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        let at = flipped.len() - 40;
        flipped[at] ^= 1;
        let e = Reader::open(&flipped[..]).unwrap().read_items(sketch, |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("damaged"), "{e}");
        let mut v2 = bytes.clone();
        v2[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert!(Reader::open(&v2[..]).unwrap_err().to_string().contains("index format 2"));

        // A header field out of bounds is refused when the header is read.
        let with = |edit: &dyn Fn(&mut Header)| {
            let mut h = header.clone();
            edit(&mut h);
            let head = serde_json::to_vec(&h).unwrap();
            let mut b = bytes[..12].to_vec();
            b.extend_from_slice(&(head.len() as u32).to_le_bytes());
            b.extend_from_slice(&head);
            Reader::open(&b[..]).unwrap_err().to_string()
        };
        let e = with(&|h| h.bands = u32::MAX);
        assert!(e.contains("4294967295 bands where its configuration makes"), "{e}");
        assert!(with(&|h| h.sketch_bytes = u32::MAX).contains("sketches of 4294967295 bytes"));
        assert!(with(&|h| h.kept = 4).contains("4 kept items of 3"));
        assert!(with(&|h| h.format_version = 9).contains("format 9"));
        assert!(with(&|h| h.config.num_perm = 0).contains("configuration in its header is not valid"));
        // An id or feature count the stream does not hold allocates nothing.
        let mut long_id = bytes[..12 + 4 + u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize].to_vec();
        long_id.extend_from_slice(&MAX_ID.to_le_bytes());
        let e = Reader::open(&long_id[..]).unwrap().read_items(sketch, |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("item 0: the file ends"), "{e}");
    }
}
