//! The run's inputs: files, folders and glob patterns expanded in a
//! reproducible order, each recognised by its content — JSONL (plain, zstd
//! or gzip) or Parquet — and read as one stream of chunks of records.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;

use crate::chunk::{Chunk, Input, Kind, ReadOptions};
use crate::jsonl::{Head, JsonlReader, Limits, Reject};
use crate::parquet_io::ParquetInput;

/// Expands the inputs as given into files, in reading order: a folder
/// stands for its files (recursively, sorted by path, names starting with
/// `.` skipped); a path that does not exist but holds `*`, `?` or `[` is a
/// glob pattern, expanded to the sorted paths it matches; `-` is standard
/// input, once at most; an `s3://` URL is an object, a prefix or a glob
/// in an object store ([`crate::remote::list`], key order). Each file is
/// recognised by its first bytes.
pub fn expand(given: &[String]) -> anyhow::Result<Vec<Input>> {
    let mut files: Vec<PathBuf> = Vec::new();
    // Objects' sizes as their listing gave them (no second request).
    let mut listed: std::collections::HashMap<PathBuf, u64> = std::collections::HashMap::new();
    let mut stdin = false;
    for p in given {
        if crate::remote::is_remote(p) {
            for (url, size) in crate::remote::list(p)? {
                listed.insert(PathBuf::from(&url), size);
                files.push(PathBuf::from(url));
            }
            continue;
        }
        if p == "-" {
            if stdin {
                anyhow::bail!("standard input (-) can be read only once");
            }
            stdin = true;
            files.push(PathBuf::from("-"));
            continue;
        }
        let path = Path::new(p);
        if !path.exists() && p.contains(['*', '?', '[']) {
            let mut matched: Vec<PathBuf> = glob::glob(p)
                .with_context(|| format!("bad glob pattern {p}"))?
                .collect::<Result<_, _>>()
                .with_context(|| format!("cannot expand {p}"))?;
            if matched.is_empty() {
                anyhow::bail!("no files match {p}");
            }
            matched.sort();
            for m in matched {
                push_path(&m, &mut files)?;
            }
        } else {
            push_path(path, &mut files)?;
        }
    }
    if files.is_empty() {
        anyhow::bail!("no input files in {}", given.join(", "));
    }
    files.into_iter().map(|f| recognise(&f, listed.get(&f).copied())).collect()
}

fn push_path(path: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if path.is_dir() {
        let mut found = Vec::new();
        walk_files(path, &mut found).with_context(|| format!("cannot read folder {}", path.display()))?;
        found.sort();
        out.extend(found);
    } else {
        out.push(path.to_owned());
    }
    Ok(())
}

fn walk_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk_files(&entry.path(), out)?;
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
    Ok(())
}

/// Opens `path` far enough to tell what it holds.
fn recognise(path: &Path, listed_size: Option<u64>) -> anyhow::Result<Input> {
    let name = path.to_string_lossy().into_owned();
    if name == "-" {
        return Ok(Input { name, kind: Kind::Jsonl, size: None });
    }
    if crate::remote::is_remote(&name) {
        let object = match listed_size {
            Some(size) => crate::remote::Object::sized(&name, size)?,
            None => crate::remote::Object::open(&name)?,
        };
        let head = object.range(0, object.size.min(4) as usize).with_context(|| format!("cannot read {name}"))?;
        let kind = if Head::of(&head) == Head::Parquet { Kind::Parquet } else { Kind::Jsonl };
        return Ok(Input { name, kind, size: Some(object.size) });
    }
    // Asked of the path, not of an open file: a pipe or a FIFO (`<(zcat
    // f)`, `/dev/stdin`) is opened once, by its reader. Opened here to look
    // at its first bytes, they were gone when the reader opened it again
    // (and a FIFO whose writer had finished hung the second open). What is
    // not a regular file is JSONL: Parquet is read from its end, which a
    // stream does not have.
    let meta = std::fs::metadata(path).with_context(|| format!("cannot open {name}"))?;
    if !meta.is_file() {
        return Ok(Input { name, kind: Kind::Jsonl, size: None });
    }
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot open {name}"))?;
    let size = meta.len();
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < head.len() {
        match std::io::Read::read(&mut f, &mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read {name}")),
        }
    }
    let kind = if Head::of(&head[..got]) == Head::Parquet { Kind::Parquet } else { Kind::Jsonl };
    Ok(Input { name, kind, size: Some(size) })
}

/// The total size of the inputs, when every one has a known size.
pub fn total_size(inputs: &[Input]) -> Option<u64> {
    inputs.iter().map(|i| i.size).sum()
}

/// Where each input begins in the run's record numbering, when a run reads
/// several inputs one after the other: filled in as reading reaches each.
#[derive(Debug, Default)]
pub struct Sources {
    /// (first record of the run that is in it, name), in reading order.
    starts: std::sync::Mutex<Vec<(u64, String)>>,
}

impl Sources {
    /// Where-each-input-begins for a run over `inputs`: only when there are
    /// several (a single input's records are named by line alone).
    pub fn for_inputs(inputs: &[Input]) -> Option<Arc<Sources>> {
        (inputs.len() > 1).then(|| Arc::new(Sources::default()))
    }

    /// The input holding record `n` of the run, and the record's number in it
    /// (its line in a JSONL file, its row in a Parquet file, from 1).
    pub fn locate(&self, n: u64) -> Option<(String, u64)> {
        let starts = self.starts.lock().ok()?;
        let i = starts.partition_point(|(first, _)| *first <= n).checked_sub(1)?;
        let (first, name) = &starts[i];
        Some((name.clone(), n - first + 1))
    }

    /// Rewrites run record numbers in `rejects` as `file` and line in it.
    pub fn place_rejects(&self, rejects: &mut [Reject]) {
        for r in rejects.iter_mut().filter(|r| r.file.is_none()) {
            if let Some((file, line)) = self.locate(r.line) {
                (r.file, r.line) = (Some(file), line);
            }
        }
    }

    /// Where each input read so far begins: `(first record, name)`.
    pub fn starts(&self) -> Vec<(u64, String)> {
        self.starts.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Sets where each input begins, as [`Sources::starts`] gave it in an
    /// earlier read of the same inputs (a run that resumes without reading).
    pub fn restore(&self, starts: Vec<(u64, String)>) {
        if let Ok(mut s) = self.starts.lock() {
            *s = starts;
        }
    }

    fn begin(&self, first: u64, name: &str) {
        if let Ok(mut starts) = self.starts.lock() {
            starts.push((first, name.to_owned()));
        }
    }
}

/// Records per chunk, and bytes of JSONL per chunk.
const CHUNK_RECORDS: usize = 4096;
const CHUNK_BYTES: usize = 8 << 20;

/// An input's first chunk is 2^RAMP_SHIFT times smaller than a full one,
/// the next twice as large, and so on up to full size: the pool starts on
/// the first records within milliseconds, not after a full chunk is read
/// (8 MB of long records took the reader 25 ms, the pool idle meanwhile).
const RAMP_SHIFT: u32 = 5;

/// Reads every input in order on a separate thread (so reading overlaps
/// processing) and hands each chunk to `f`, in order. Records are numbered
/// across the run; `sources`, when given, learns where each input begins.
/// Returns the time spent reading.
pub fn for_each_chunk<F>(
    inputs: &[Input],
    opts: &ReadOptions,
    sources: Option<&Sources>,
    mut f: F,
) -> anyhow::Result<f64>
where
    F: FnMut(Chunk) -> anyhow::Result<()>,
{
    std::thread::scope(|scope| {
        // Two chunks in flight at most: bounded memory, and the reader stays one ahead.
        let (tx, rx) = std::sync::mpsc::sync_channel::<anyhow::Result<Chunk>>(1);
        let reading = scope.spawn(move || {
            let mut read_s = 0.0;
            let mut next = 0u64;
            for (index, input) in inputs.iter().enumerate() {
                if let Some(s) = sources {
                    s.begin(next + 1, &input.name);
                }
                match read_one(index, input, opts, &mut next, &mut read_s, &tx) {
                    Ok(true) => {}
                    Ok(false) => return read_s, // the consumer stopped
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return read_s;
                    }
                }
            }
            read_s
        });
        for chunk in rx {
            f(chunk?)?;
        }
        Ok(reading.join().expect("the reader thread does not panic"))
    })
}

/// Reads one input into chunks sent on `tx`; false when the receiver is gone.
fn read_one(
    index: usize,
    input: &Input,
    opts: &ReadOptions,
    next: &mut u64,
    read_s: &mut f64,
    tx: &std::sync::mpsc::SyncSender<anyhow::Result<Chunk>>,
) -> anyhow::Result<bool> {
    let send = |chunk: Chunk| tx.send(Ok(chunk)).is_ok();
    match input.kind {
        Kind::Jsonl => {
            let counter = Arc::new(AtomicU64::new(0));
            let mut reader = if crate::remote::is_remote(&input.name) {
                let stream = crate::remote::Object::sized(&input.name, input.size.unwrap_or(0))?.stream()?;
                JsonlReader::from_read(stream, Arc::clone(&counter), &input.name)?
            } else {
                JsonlReader::open(&input.name, opts.mmap, Arc::clone(&counter))?
            };
            let (mut reported, base) = (0u64, *next);
            let mut shift = RAMP_SHIFT;
            loop {
                let (mut lines, mut rejects) = (Vec::new(), Vec::new());
                let t = Instant::now();
                let (records, bytes) = (CHUNK_RECORDS >> shift, CHUNK_BYTES >> shift);
                shift = shift.saturating_sub(1);
                let more = reader
                    .read_chunk(next, Limits { records, bytes, max_line: opts.max_line }, &mut lines, &mut rejects)
                    .map_err(|e| anyhow::anyhow!("{e} (after line {} of {})", *next - base, input.name))?;
                *read_s += t.elapsed().as_secs_f64();
                let read = counter.load(Ordering::Relaxed);
                let chunk = Chunk { lines, rejects, rows: None, input: index, progress: read - reported };
                reported = read;
                if !send(chunk) {
                    return Ok(false);
                }
                if !more {
                    return Ok(true);
                }
            }
        }
        Kind::Parquet => {
            let mut reader = ParquetInput::open(input, opts)?;
            loop {
                let t = Instant::now();
                let chunk = reader.next_chunk(index, next, opts.max_line)?;
                *read_s += t.elapsed().as_secs_f64();
                let Some(chunk) = chunk else { return Ok(true) };
                if !send(chunk) {
                    return Ok(false);
                }
            }
        }
    }
}
