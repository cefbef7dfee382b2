//! The saved dedup index: `neardup dedup --index DIR` loads the items of
//! earlier runs from `DIR/index.ndx`, deduplicates the new input against
//! them and saves them all back; `--reference DIR` loads without saving.
//!
//! # Format (version 1)
//!
//! A compact binary file, read and written as a stream (never mapped):
//!
//! | part     | bytes | contents                                                   |
//! |----------|-------|------------------------------------------------------------|
//! | magic    | 8     | `NDUPDIDX`                                                 |
//! | version  | 4     | format version, little-endian u32 ([`FORMAT_VERSION`])     |
//! | header   | 4 + n | length, then a JSON [`Header`]: the pipeline configuration, its fingerprint version, counts |
//! | items    | ...   | one record per item, in the order the runs read them       |
//! | trailer  | 24    | `NDUPEND!`, the item count (u64), XXH3-64 of every byte before this checksum (u64) |
//!
//! An item record: id length (u32) and id bytes (UTF-8); flags (u8: 1 kept,
//! 2 has band keys); the number of the first item of its cluster (u32, at
//! most its own); content hash (16 bytes); with band keys, the folded band
//! keys (`bands` × u32) and the ranking sketch (`sketch_bytes`); the
//! number of canonical features (u32) and the features (u64 each). All
//! integers little-endian.
//!
//! Every item a run reads is saved, kept and dropped alike, with its
//! verdict, so a run against the index makes the decisions and finds the
//! pairs one run over all the inputs would. MinHash signatures are not
//! stored: the candidate index is rebuilt from the folded keys and
//! sketches, exact verification uses the features.
//!
//! A file whose checksum, counts or lengths do not add up is refused with
//! the reason; one written under another configuration is refused with the
//! settings that differ, never mixed. The file is replaced atomically
//! (`neardup_fs::write_atomic_with`): a run killed while saving leaves the
//! previous index whole.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use neardup_core::{ContentHash, ImageRow, Params};
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

use crate::pipeline::Batch;

const MAGIC: &[u8; 8] = b"NDUPDIDX";
const TRAILER: &[u8; 8] = b"NDUPEND!";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The file inside the index folder.
pub const FILE: &str = "index.ndx";
const MAX_HEADER: u32 = 1 << 20;
const MAX_ID: u32 = 64 << 20;
const KEPT: u8 = 1;
const BANDED: u8 = 2;

/// The clear JSON header.
#[derive(Debug, Serialize, Deserialize)]
pub struct Header {
    pub format_version: u32,
    /// [`Params::fingerprint_version`] of the configuration.
    pub fingerprint_version: String,
    /// The whole pipeline configuration the items were decided under.
    pub config: neardup_core::Config,
    pub items: u64,
    pub kept: u64,
    /// Runs that added to the index.
    pub runs: u64,
    pub bands: u32,
    pub sketch_bytes: u32,
    /// The neardup that wrote it.
    pub written_by: String,
}

/// What a load found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Loaded {
    pub path: String,
    pub items: u64,
    pub runs: u64,
    pub seconds: f64,
}

/// What a save wrote.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Saved {
    pub path: String,
    pub items: u64,
    pub bytes: u64,
    pub seconds: f64,
}

/// The index file in `dir`.
pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// A reader or writer that hashes the bytes it passes.
struct Hashing<T> {
    inner: T,
    hash: Xxh3,
    bytes: u64,
}

impl<T> Hashing<T> {
    fn new(inner: T) -> Self {
        Hashing { inner, hash: Xxh3::new(), bytes: 0 }
    }
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

/// The settings two configurations differ in, as `name: index X, this run Y`.
fn differences(saved: &neardup_core::Config, run: &neardup_core::Config) -> Vec<String> {
    let (a, b) = (serde_json::to_value(saved).unwrap_or_default(), serde_json::to_value(run).unwrap_or_default());
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return vec!["the configuration".into()] };
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: index {v}, this run {}", b.get(k).cloned().unwrap_or_default()))
        .collect()
}

/// Loads the index in `dir` into `batch` (which must be empty); `None`
/// when there is none yet.
pub fn load(dir: &Path, params: &Params, batch: &mut Batch) -> anyhow::Result<Option<Loaded>> {
    let path = path_in(dir);
    let started = Instant::now();
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot open the index {}", path.display())),
    };
    let shown = path.display().to_string();
    let runs = read_into(BufReader::with_capacity(4 << 20, file), params, batch)
        .with_context(|| format!("cannot load the index {shown}"))?;
    Ok(Some(Loaded { path: shown, items: batch.ids.len() as u64, runs, seconds: started.elapsed().as_secs_f64() }))
}

fn read_into(raw: impl Read, params: &Params, batch: &mut Batch) -> anyhow::Result<u64> {
    let mut r = Hashing::new(raw);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic).context("the file ends inside its header")?;
    if &magic != MAGIC {
        anyhow::bail!("not a neardup dedup index (no {:?} at its start)", std::str::from_utf8(MAGIC).unwrap_or(""));
    }
    let version = read_u32(&mut r)?;
    if version != FORMAT_VERSION {
        anyhow::bail!(
            "written in index format {version}; this neardup reads format {FORMAT_VERSION} (rebuild the index with \
             this version, or use the neardup that wrote it)"
        );
    }
    let header_len = read_u32(&mut r)?;
    if header_len > MAX_HEADER {
        anyhow::bail!("a header of {header_len} bytes (at most {MAX_HEADER}): the file is damaged");
    }
    let mut header = vec![0u8; header_len as usize];
    r.read_exact(&mut header).context("the file ends inside its header")?;
    let header: Header = serde_json::from_slice(&header).context("its header is not valid")?;
    if header.fingerprint_version != params.fingerprint_version() || &header.config != params.config() {
        let mut diff = differences(&header.config, params.config());
        if diff.is_empty() {
            diff.push(format!(
                "fingerprints: index {}, this run {}",
                header.fingerprint_version,
                params.fingerprint_version()
            ));
        }
        anyhow::bail!(
            "it was built with other settings ({}); run with the index's settings, or give a new --index folder",
            diff.join("; ")
        );
    }
    let lsh = params.lsh();
    let sketch_bytes = batch.index.candidate_index().sketch_len();
    if header.bands != lsh.bands || header.sketch_bytes as usize != sketch_bytes {
        anyhow::bail!(
            "its rows have {} bands and {}-byte sketches where this run makes {} and {}",
            header.bands,
            header.sketch_bytes,
            lsh.bands,
            sketch_bytes
        );
    }
    if header.items > u64::from(neardup_core::MAX_ITEM_ID) {
        anyhow::bail!("it claims {} items, more than an index holds", header.items);
    }
    let max_features = params.config().max_shingles;
    let (mut folded, mut sketch, mut bytes) = (vec![0u32; lsh.bands as usize], vec![0u8; sketch_bytes], Vec::new());
    let mut firsts: Vec<u32> = Vec::with_capacity(header.items.min(1 << 20) as usize);
    let mut id_buf = Vec::new();
    for n in 0..header.items {
        let damaged = || format!("the file ends or is damaged at item {n}");
        let id_len = read_u32(&mut r).with_context(damaged)?;
        if id_len > MAX_ID {
            anyhow::bail!("item {n} has an id of {id_len} bytes (at most {MAX_ID}): the file is damaged");
        }
        id_buf.resize(id_len as usize, 0);
        r.read_exact(&mut id_buf).with_context(damaged)?;
        let id = String::from_utf8(std::mem::take(&mut id_buf))
            .map_err(|_| anyhow::anyhow!("item {n} has an id that is not UTF-8: the file is damaged"))?;
        let mut flags = [0u8; 1];
        r.read_exact(&mut flags).with_context(damaged)?;
        let flags = flags[0];
        let first = read_u32(&mut r).with_context(damaged)?;
        if u64::from(first) > n || (u64::from(first) < n && firsts.get(first as usize) != Some(&first)) {
            anyhow::bail!("item {n} names item {first} as its cluster's first: the file is damaged");
        }
        let mut hash = [0u8; 16];
        r.read_exact(&mut hash).with_context(damaged)?;
        let banded = flags & BANDED != 0;
        if banded {
            bytes.resize(folded.len() * 4, 0);
            r.read_exact(&mut bytes).with_context(damaged)?;
            for (k, b) in folded.iter_mut().zip(bytes.chunks_exact(4)) {
                *k = u32::from_le_bytes(b.try_into().expect("4 bytes"));
            }
            r.read_exact(&mut sketch).with_context(damaged)?;
        }
        let count = read_u32(&mut r).with_context(damaged)?;
        if count > max_features {
            anyhow::bail!("item {n} has {count} features, over max_shingles {max_features}: the file is damaged");
        }
        bytes.resize(count as usize * 8, 0);
        r.read_exact(&mut bytes).with_context(damaged)?;
        let features: Vec<u64> =
            bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
        let row = ImageRow {
            folded: if banded { &folded } else { &[] },
            sketch: if banded { &sketch } else { &[] },
            content_hash: ContentHash(hash),
        };
        let item = batch.push_saved(id, flags & KEPT != 0, row, features)?;
        if first != item {
            batch.uf.union(item, first);
        }
        firsts.push(first);
    }
    let mut trailer = [0u8; 8];
    r.read_exact(&mut trailer).context("the file ends before its trailer")?;
    let items = read_u64(&mut r).context("the file ends inside its trailer")?;
    if &trailer != TRAILER || items != header.items {
        anyhow::bail!("its trailer does not match its header: the file is damaged");
    }
    let expected = r.hash.digest();
    let stored = read_u64(&mut r.inner).context("the file ends before its checksum")?;
    if stored != expected {
        anyhow::bail!("its checksum does not match its contents: the file is damaged");
    }
    if r.inner.read(&mut [0u8; 1])? != 0 {
        anyhow::bail!("bytes follow its checksum: the file is damaged");
    }
    Ok(header.runs)
}

/// Saves every item of `batch` to the index in `dir` (created if missing),
/// replacing the file atomically; `runs` is the count to record.
pub fn save(dir: &Path, batch: &mut Batch, runs: u64) -> anyhow::Result<Saved> {
    let started = Instant::now();
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create the index folder {}", dir.display()))?;
    let path = path_in(dir);
    let n = batch.ids.len() as u32;
    // The first item of each cluster, so a load rebuilds the same clusters.
    let mut first_of_root = vec![u32::MAX; n as usize];
    let mut firsts = Vec::with_capacity(n as usize);
    for i in 0..n {
        let r = batch.uf.find(i) as usize;
        if first_of_root[r] == u32::MAX {
            first_of_root[r] = i;
        }
        firsts.push(first_of_root[r]);
    }
    let params = batch.index.params().clone();
    let view = batch.index.candidate_index().view();
    let header = Header {
        format_version: FORMAT_VERSION,
        fingerprint_version: params.fingerprint_version(),
        config: params.config().clone(),
        items: u64::from(n),
        kept: batch.kept.iter().filter(|&&k| k).count() as u64,
        runs,
        bands: params.lsh().bands,
        sketch_bytes: batch.index.candidate_index().sketch_len() as u32,
        written_by: format!("neardup {}", env!("CARGO_PKG_VERSION")),
    };
    let header = serde_json::to_vec(&header)?;
    let mut bytes_written = 0u64;
    let batch = &*batch;
    neardup_fs::write_atomic_with(&path, |w: &mut dyn Write| -> anyhow::Result<()> {
        let mut w = Hashing::new(w);
        w.write_all(MAGIC)?;
        w.write_all(&FORMAT_VERSION.to_le_bytes())?;
        w.write_all(&(header.len() as u32).to_le_bytes())?;
        w.write_all(&header)?;
        let mut buf = Vec::new();
        for i in 0..n {
            let row = view.row(i).with_context(|| format!("item {i} is not in the index"))?;
            let features = batch.index.features(i).unwrap_or(&[]);
            let id = batch.ids[i as usize].as_bytes();
            buf.clear();
            buf.extend_from_slice(&(id.len() as u32).to_le_bytes());
            buf.extend_from_slice(id);
            let banded = !row.folded.is_empty();
            buf.push((u8::from(batch.kept[i as usize]) * KEPT) | (u8::from(banded) * BANDED));
            buf.extend_from_slice(&firsts[i as usize].to_le_bytes());
            buf.extend_from_slice(&row.content_hash.0);
            if banded {
                for k in row.folded {
                    buf.extend_from_slice(&k.to_le_bytes());
                }
                buf.extend_from_slice(row.sketch);
            }
            buf.extend_from_slice(&(features.len() as u32).to_le_bytes());
            for f in features {
                buf.extend_from_slice(&f.to_le_bytes());
            }
            w.write_all(&buf)?;
        }
        w.write_all(TRAILER)?;
        w.write_all(&u64::from(n).to_le_bytes())?;
        let digest = w.hash.digest();
        w.inner.write_all(&digest.to_le_bytes())?;
        bytes_written = w.bytes + 8;
        Ok(())
    })
    .with_context(|| format!("cannot save the index {}", path.display()))?;
    Ok(Saved {
        path: path.display().to_string(),
        items: u64::from(n),
        bytes: bytes_written,
        seconds: started.elapsed().as_secs_f64(),
    })
}
