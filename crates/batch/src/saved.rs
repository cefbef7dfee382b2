//! The saved dedup index: `neardup dedup --index DIR` loads the items of
//! earlier runs from `DIR/index.ndx`, deduplicates the new input against
//! them and saves them all back; `--reference DIR` loads without saving.
//! The file format is neardup-core's saved index ([`neardup_core::Reader`];
//! shared with the Python package's `Index.save`/`Index.load`).
//!
//! Every item a run reads is saved, kept and dropped alike, with its
//! verdict and the first item of its cluster, so a run against the index
//! makes the decisions and finds the pairs one run over all the inputs
//! would. The file is replaced atomically (`neardup_fs::write_atomic_with`):
//! a run killed while saving leaves the previous index whole. The folder
//! may be an object store's prefix (`s3://bucket/indexes/crawl/`): the
//! index is then one object, read by one streamed GET and written by an
//! upload completed only at the end.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use neardup_core::Params;
use neardup_core::{write_saved_index, FormatError, Header, Reader, SavedItem};

use crate::output::Sink;
use crate::pipeline::Batch;
use crate::remote;

/// The file inside the index folder.
pub const FILE: &str = "index.ndx";

/// What a load found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Loaded {
    pub path: String,
    pub items: u64,
    pub runs: u64,
    pub seconds: f64,
}

/// What a save wrote.
#[derive(Debug, Default, Clone, serde::Serialize)]
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

/// Loads the index in `dir` into `batch` (which must be empty); `None`
/// when there is none yet.
pub fn load(dir: &Path, params: &Params, batch: &mut Batch) -> anyhow::Result<Option<Loaded>> {
    let path = path_in(dir);
    let shown = path.display().to_string();
    let started = Instant::now();
    let source: Box<dyn io::Read> = if remote::is_remote(&shown) {
        match remote::Object::open(&shown) {
            Ok(object) => Box::new(object.stream()?),
            Err(e) if remote::is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot open the index {shown}")),
        }
    } else {
        match File::open(&path) {
            Ok(f) => Box::new(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot open the index {shown}")),
        }
    };
    let context = || format!("cannot load the index {shown}");
    let reader = Reader::open(BufReader::with_capacity(4 << 20, source)).with_context(context)?;
    reader.check(params).with_context(context)?;
    let sketch_bytes = batch.index.candidate_index().sketch_len();
    let header = reader
        .read_items(sketch_bytes, |item| {
            let n = batch
                .push_saved(item.id, item.kept, item.row, item.features)
                .map_err(|e| FormatError(format!("{e:#}")))?;
            if item.first != n {
                batch.uf.union(n, item.first);
            }
            Ok(())
        })
        .with_context(context)?;
    Ok(Some(Loaded {
        path: shown,
        items: batch.ids.len() as u64,
        runs: header.runs,
        seconds: started.elapsed().as_secs_f64(),
    }))
}

/// Saves every item of `batch` to the index in `dir` (created if missing),
/// replacing the file atomically; `runs` is the count to record.
pub fn save(dir: &Path, batch: &mut Batch, runs: u64) -> anyhow::Result<Saved> {
    let started = Instant::now();
    let path = path_in(dir);
    let object = remote::is_remote(&path.display().to_string());
    if !object {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create the index folder {}", dir.display()))?;
    }
    let n = batch.ids.len() as u32;
    // The first item of each cluster, so a load rebuilds the same clusters.
    let firsts = batch.cluster_firsts();
    let batch = &*batch;
    let params = batch.index.params();
    let kept = batch.rule.kept().iter().filter(|&&k| k).count() as u64;
    let header = Header::new(
        params,
        u64::from(n),
        kept,
        runs,
        batch.index.candidate_index().sketch_len(),
        concat!("neardup ", env!("CARGO_PKG_VERSION")),
    );
    let view = batch.index.candidate_index().view();
    let mut bytes = 0;
    let mut write = |w: &mut dyn Write| -> anyhow::Result<()> {
        let items = (0..n).map_while(|i| {
            Some(SavedItem {
                id: &batch.ids[i as usize],
                kept: batch.rule.is_kept(i),
                first: firsts[i as usize],
                row: view.row(i)?,
                features: batch.index.features(i).unwrap_or(&[]),
            })
        });
        bytes = write_saved_index(w, &header, items)?;
        Ok(())
    };
    let context = || format!("cannot save the index {}", path.display());
    if object {
        // Whole or not at all, as the local file: the upload completes last.
        let mut sink = Sink::create(&path.display().to_string()).with_context(context)?;
        write(&mut sink).with_context(context)?;
        sink.finish().with_context(context)?;
    } else {
        neardup_fs::write_atomic_with(&path, write).with_context(context)?;
    }
    Ok(Saved { path: path.display().to_string(), items: u64::from(n), bytes, seconds: started.elapsed().as_secs_f64() })
}
