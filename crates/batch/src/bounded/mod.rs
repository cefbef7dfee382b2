//! Batch dedup in bounded memory: the rule of the in-memory batch
//! ([`crate::pipeline`]), with its state on disk.
//!
//! The in-memory batch holds every item's features, sketch, band keys and
//! postings for the whole run (about 3.4 KB per 2 KB document). Here each
//! phase streams:
//!
//! 1. **Read and fingerprint** (the same first stage, [`fingerprint_all`]):
//!    each item is appended to a store on disk (one fixed-size record with
//!    its line, content hash and sketch; its id; its features
//!    delta-coded), and its posting keys go to external sorts:
//!    `(band, key, item)`, `(content hash, item)` and `(id hash, item)`.
//! 2. **Merge**: the id sort finds repeated ids (the later records are
//!    rejected, as in memory); the content sort groups equal content into
//!    classes; the band sort streams each bucket in item order. A bucket
//!    (or class) of more than one item is written to disk once, and each
//!    member after the first gets a *reference*: `(item, band, key, where
//!    the bucket is, how many members come before it)` — exactly the
//!    bucket an in-memory query of that item sees (only the items before
//!    it). References are sorted by item.
//! 3. **Verify**: items are taken in order, in blocks, each block in
//!    parallel (while the block before it is decided): an item's references give its bucket reads (a hot bucket's
//!    window from the same rotation point), the reads give the band
//!    candidates, and [`CandidateIndex::select`] — the one implementation
//!    of ranking, the cap and the close cut — picks them; candidates are
//!    verified exactly against features read from the store.
//! 4. **Decide** in input order with [`Greedy`], the one decision rule; the
//!    search further among kept items asks the same references again.
//!
//! Under a keeper policy (`--keep`, [`Keep`]) "input order" is the
//! policy's: a first read gives every record its order key and sorts the
//! keys externally, and items are numbered in that order — the store is
//! written at each item's place — so every phase above runs unchanged and
//! the in-memory run's numbering is met exactly. Records keep a 4-byte
//! map from record to item (`ranks.bin`) for writing rows in input order.
//!
//! What stays resident per item: its content class (4 bytes), its
//! union-find parent (4), the kept flag (1) and two bits (rejected, in a
//! cluster): 9.25 bytes. Everything else is on disk, read through the page
//! cache; the mapped pages are given back to the kernel whenever the
//! resident set nears the budget, so it stays near the limit whatever the
//! input size.

mod refs;
mod resident;
pub mod sort;
mod store;
mod work;

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use neardup_core::{CandidateIndex, CandidateSet, Decided, Fingerprinter, Greedy, Match, Params};
use rayon::prelude::*;

use crate::chunk::{Input, ReadOptions};
use crate::jsonl::Reject;
use crate::pipeline::{external_id, fingerprint_all, Outcome, Timings};
use neardup_core::Keep;
use refs::{be32, entry, ref_of, write_buckets, ItemLookup, Reader, Ref};
use resident::{Bits, Parents};
use sort::Sorter;
pub use store::Store;
use store::{Layout, Mapped, NewItem, StoreWriter, BANDED, DEGRADED};
pub use work::{available_memory, disk_estimate, free_space, peak_rss, RunKey};
use work::{read_words, resident_bytes, work_folder_name, write_words, Manifest, Relief, WorkDir};

/// The resident bytes per item (see the module doc), times 4 to count
/// them in quarters: class 4, parent 4, kept 1, two bits.
const RESIDENT_QUARTER_BYTES: u64 = 37;

/// The table number of content classes in references (bands are 0..bands).
const CONTENT: u16 = u16::MAX;

/// What a run may use.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Bytes of memory the run may hold.
    pub memory: u64,
    /// The folder the run's work folder is made in.
    pub work_dir: PathBuf,
}

/// One phase of a bounded run, for the summary.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Phase {
    pub name: String,
    pub seconds: f64,
    /// Bytes written to the work folder.
    pub disk_bytes: u64,
    /// The process's peak resident set at the phase's end.
    pub peak_rss_bytes: u64,
}

/// A finished bounded run: what the outputs still need.
pub struct Done {
    pub store: Store,
    pub timings: Timings,
    /// Text bytes of the items.
    pub bytes: u64,
    /// Items per candidate count (for percentiles).
    pub candidate_counts: Vec<u64>,
    pub phases: Vec<Phase>,
    /// Clusters of more than one item.
    pub clusters: u64,
    /// Under `--keep max:FIELD`/`min:FIELD`: records without a value.
    pub keep_missing: u64,
    /// Under a keeper policy: each record's item, by record number
    /// (`u32::MAX`: none), since items are numbered in the policy's order.
    ranks: Option<Mapped>,
    kept: Greedy,
    parents: Parents,
    rejected: Bits,
    clustered: Bits,
    decisions: Mapped,
    dir: WorkDir,
    budget: usize,
}

/// Phase bookkeeping.
struct Phases {
    list: Vec<Phase>,
    at: Instant,
    quiet: bool,
}

impl Phases {
    fn end(&mut self, name: &'static str, disk_bytes: u64) -> f64 {
        let seconds = self.at.elapsed().as_secs_f64();
        let peak = peak_rss();
        if !self.quiet {
            eprintln!(
                "neardup: {name}: {seconds:.1} s, {:.1} MB written, peak memory {:.1} MB",
                disk_bytes as f64 / 1e6,
                peak as f64 / 1e6
            );
        }
        self.list.push(Phase { name: name.to_owned(), seconds, disk_bytes, peak_rss_bytes: peak });
        self.at = Instant::now();
        seconds
    }
}

/// The fields the in-memory batch is built with, for the same first stage.
pub struct Setup<'a> {
    pub params: &'a Params,
    pub text_field: &'a str,
    pub id_field: &'a str,
    pub inputs: &'a [Input],
    pub opts: &'a ReadOptions,
    pub sources: Option<&'a crate::input::Sources>,
    pub quiet: bool,
    /// The keeper policy: items are numbered, and decided, in its order.
    pub keep: &'a Keep,
}

/// Runs the batch in bounded memory: `progress` is told of input bytes
/// read, `f` sees every item's outcome in input order (as the in-memory
/// batch's callback). Rejects (unparsable records, repeated ids) go to
/// `rejects`.
pub fn dedup<F>(
    setup: &Setup<'_>,
    limits: &Limits,
    rejects: &mut Vec<Reject>,
    progress: &dyn Fn(u64),
    mut f: F,
) -> anyhow::Result<Done>
where
    F: FnMut(&Store, &Outcome) -> anyhow::Result<()>,
{
    std::fs::create_dir_all(&limits.work_dir)
        .with_context(|| format!("cannot create the work folder {}", limits.work_dir.display()))?;
    let dir = WorkDir(limits.work_dir.join(work_folder_name(setup)?), false);
    let mut manifest = Manifest::read(&dir.0);
    if manifest.phase == 0 {
        // Nothing completed: whatever a killed run left is started over.
        let _ = std::fs::remove_dir_all(&dir.0);
    } else if !setup.quiet {
        eprintln!("neardup: continuing the run in {} after its {} completed phase(s)", dir.0.display(), manifest.phase);
    }
    std::fs::create_dir_all(&dir.0).with_context(|| format!("cannot create {}", dir.0.display()))?;
    let note = format!("the work folder {} is kept: the same command continues from its last phase", dir.0.display());
    dedup_in(setup, limits, dir, &mut manifest, rejects, progress, &mut f).with_context(move || note)
}

/// [`dedup`] in its work folder, from the phase after `manifest`'s.
fn dedup_in<F>(
    setup: &Setup<'_>,
    limits: &Limits,
    dir: WorkDir,
    manifest: &mut Manifest,
    rejects: &mut Vec<Reject>,
    progress: &dyn Fn(u64),
    f: &mut F,
) -> anyhow::Result<Done>
where
    F: FnMut(&Store, &Outcome) -> anyhow::Result<()>,
{
    let params = setup.params;
    // What the sorts and blocks may hold: the limit, less what the first
    // stage's chunks and threads hold (about 64 MB whatever the limit; a
    // smaller limit bounds the sorts and blocks to half of it).
    let budget = if limits.memory >= 128 << 20 { limits.memory - (64 << 20) } else { limits.memory / 2 } as usize;
    let scale = CandidateIndex::for_params(params);
    let layout = Layout::new(scale.sketch_len());
    let mut phases = Phases { list: Vec::new(), at: Instant::now(), quiet: setup.quiet };
    let mut timings = Timings::default();

    // 1. Read and fingerprint (under a keeper policy, after a first read
    // that numbers the records in its order).
    if manifest.phase < 1 {
        let ranks = if setup.keep.is_first() {
            None
        } else {
            let (ranks, items, missing) = number_in_order(setup, &dir.0, budget)?;
            manifest.keep_missing = missing;
            write_words(&dir.0.join("ranks.bin"), &ranks, |r: u32| r.to_le_bytes().to_vec())?;
            Some((ranks, items))
        };
        let mut w = match &ranks {
            Some((_, items)) => StoreWriter::create_numbered(&dir.0, layout, *items)?,
            None => StoreWriter::create(&dir.0, layout)?,
        };
        // The sorts share three quarters of the budget: the first stage's
        // chunks, the store's writers and the allocator's free pages come
        // on top (at 20 M documents the whole budget for the sorts peaked
        // at 1,223 MiB under a 1 GiB limit: bench/results/datasets-scale.md).
        let mut bands = Sorter::<10>::new(&dir.0, "bands", budget / 8 * 3);
        let mut contents = Sorter::<20>::new(&dir.0, "contents", budget / 16 * 3);
        let mut ids = Sorter::<12>::new(&dir.0, "ids", budget / 16 * 3);
        let fingerprinter = Fingerprinter::new(params.clone())?;
        let (read_s, fingerprint_s) = fingerprint_all(
            &fingerprinter,
            setup.text_field,
            setup.id_field,
            setup.keep,
            setup.inputs,
            setup.opts,
            setup.sources,
            rejects,
            |chunk, parsed, rejects| {
                for (line, result) in chunk.lines.iter().zip(parsed) {
                    let crate::pipeline::Fingerprinted { id, fp, .. } = match result {
                        Ok(x) => x,
                        Err(reason) => {
                            rejects.push(Reject::at(line.number, reason));
                            continue;
                        }
                    };
                    let external = external_id(id, line.number, setup.sources);
                    let (folded, sketch) = scale.row_of(&fp.band_keys, &fp.signature);
                    let flags =
                        if fp.degraded.is_some() { DEGRADED } else { 0 } | if folded.is_empty() { 0 } else { BANDED };
                    let at = match &ranks {
                        Some((ranks, _)) => match ranks.get(line.number as usize) {
                            Some(&r) if r != u32::MAX => Some(r),
                            _ => anyhow::bail!(
                                "record {} parsed on the second read but not the first: the input changed while read",
                                line.number
                            ),
                        },
                        None => None,
                    };
                    let item = w.push_at(
                        at,
                        &NewItem {
                            line: line.number,
                            input: chunk.input as u32,
                            text_len: line.len().min(u32::MAX as usize) as u32,
                            id: &external,
                            hash: fp.content_hash,
                            flags,
                            sketch: &sketch,
                            features: &fp.features,
                        },
                    )?;
                    for (b, key) in folded.iter().enumerate() {
                        let mut r = [0u8; 10];
                        r[0..2].copy_from_slice(&(b as u16).to_be_bytes());
                        r[2..6].copy_from_slice(&key.to_be_bytes());
                        r[6..10].copy_from_slice(&item.to_be_bytes());
                        bands.push(r)?;
                    }
                    let mut r = [0u8; 20];
                    r[0..16].copy_from_slice(&fp.content_hash.0);
                    r[16..20].copy_from_slice(&item.to_be_bytes());
                    contents.push(r)?;
                    let mut r = [0u8; 12];
                    r[0..8].copy_from_slice(&neardup_core::hash_bytes(external.as_bytes(), 0).to_be_bytes());
                    r[8..12].copy_from_slice(&item.to_be_bytes());
                    ids.push(r)?;
                }
                progress(chunk.progress);
                Ok(())
            },
        )?;
        timings.read_s = read_s;
        timings.fingerprint_s = fingerprint_s;
        if let Some((_, items)) = &ranks {
            if w.count != *items {
                anyhow::bail!(
                    "{items} records parsed on the first read and {} on the second: the input changed while read",
                    w.count
                );
            }
        }
        let store_bytes = w.disk_bytes();
        w.finish()?;
        let sorted = bands.disk_bytes + contents.disk_bytes + ids.disk_bytes;
        manifest.bands = bands.into_runs()?;
        manifest.contents = contents.into_runs()?;
        manifest.ids = ids.into_runs()?;
        manifest.rejects = rejects.clone();
        manifest.sources = setup.sources.map(|s| s.starts()).unwrap_or_default();
        phases.end("read and fingerprint", store_bytes + sorted);
        manifest.timings = timings.clone();
        manifest.phases = phases.list.clone();
        manifest.phase = 1;
        manifest.write(&dir.0)?;
    } else {
        rejects.extend(manifest.rejects.iter().cloned());
        if let Some(s) = setup.sources {
            s.restore(manifest.sources.clone());
        }
        timings = manifest.timings.clone();
        phases.list = manifest.phases.clone();
    }
    let store = Store::open(&dir.0, layout)?;
    let n = store.count as usize;
    let resident = n as u64 * RESIDENT_QUARTER_BYTES / 4;
    if resident > limits.memory / 2 {
        anyhow::bail!(
            "{n} records need {:.1} MB of resident bookkeeping (9.25 bytes each), more than half of --memory-limit \
             ({:.1} MB); raise the limit",
            resident as f64 / 1e6,
            limits.memory as f64 / 1e6
        );
    }

    // 2. Merge: repeated ids, content classes, band buckets.
    let (class, rejected) = if manifest.phase < 2 {
        let t = Instant::now();
        let mut rejected = Bits::new(n);
        let mut disk = 0u64;
        {
            let mut group: Vec<u32> = Vec::new();
            let mut key = None;
            let mut flush = |group: &mut Vec<u32>, rejects: &mut Vec<Reject>| {
                if group.len() > 1 {
                    // The first in the input keeps its id (items are
                    // numbered in input order unless a keeper policy
                    // numbers them in its own).
                    group.sort_by_key(|&item| store.rec(item).line());
                    let mut first: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
                    for &item in group.iter() {
                        let id = store.id(item);
                        if first.contains_key(id) {
                            rejected.set(item);
                            rejects.push(Reject::at(
                                store.rec(item).line(),
                                format!("duplicate item id {id:?} (first seen as item {id:?}); ids must be unique"),
                            ));
                        } else {
                            first.insert(id, item);
                        }
                    }
                }
                group.clear();
            };
            let merged = Sorter::<12>::resume(&dir.0, "ids-pass", manifest.ids.clone())?;
            for rec in merged {
                let rec = rec?;
                let k = u64::from_be_bytes(rec[0..8].try_into().expect("8 bytes"));
                if key != Some(k) {
                    flush(&mut group, rejects);
                    key = Some(k);
                }
                group.push(be32(&rec[8..12]));
            }
            flush(&mut group, rejects);
        }
        let mut refs = Sorter::<22>::new(&dir.0, "refs", budget / 2);
        let mut class: Vec<u32> = vec![0; n];
        let contents = Sorter::<20>::resume(&dir.0, "contents-pass", manifest.contents.clone())?;
        disk += write_buckets(
            contents,
            &dir.0.join("classes.bin"),
            &rejected,
            &mut refs,
            |_| (CONTENT, 0),
            |item, first| {
                class[item as usize] = first;
            },
        )?;
        let bands = Sorter::<10>::resume(&dir.0, "bands-pass", manifest.bands.clone())?;
        let table = |k: &[u8]| (u16::from_be_bytes([k[0], k[1]]), be32(&k[2..6]));
        disk += write_buckets(bands, &dir.0.join("buckets.bin"), &rejected, &mut refs, table, |_, _| {})?;
        disk += refs.disk_bytes;
        manifest.refs = refs.into_runs()?;
        write_words(&dir.0.join("class.bin"), &class, |c: u32| c.to_le_bytes().to_vec())?;
        write_words(&dir.0.join("rejected.bin"), &rejected.0, |w: u64| w.to_le_bytes().to_vec())?;
        timings.index_s = t.elapsed().as_secs_f64();
        phases.end("merge", disk + n as u64 * 4);
        manifest.rejects = rejects.clone();
        manifest.timings = timings.clone();
        manifest.phases = phases.list.clone();
        manifest.phase = 2;
        manifest.write(&dir.0)?;
        for run in manifest.bands.drain(..).chain(manifest.contents.drain(..)).chain(manifest.ids.drain(..)) {
            let _ = std::fs::remove_file(run);
        }
        manifest.write(&dir.0)?;

        (class, rejected)
    } else {
        rejects.clear();
        rejects.extend(manifest.rejects.iter().cloned());
        timings = manifest.timings.clone();
        phases.list = manifest.phases.clone();
        let class = read_words(&dir.0.join("class.bin"), n, u32::from_le_bytes)?;
        let rejected = Bits(read_words(&dir.0.join("rejected.bin"), n.div_ceil(64), u64::from_le_bytes)?);
        (class, rejected)
    };
    phases.at = Instant::now();

    // 3 and 4. Verify in blocks, in parallel; decide in order.
    let buckets = Mapped::open_random(&dir.0.join("buckets.bin"))?;
    let classes = Mapped::open_random(&dir.0.join("classes.bin"))?;
    let corrupt = std::sync::atomic::AtomicBool::new(false);
    // Mapped pages stay while the resident set is under a ceiling (a
    // block reads many of the last one's pages again), and are given back
    // above it, within a block too ([`Relief`]). The ceiling leaves a
    // quarter of the budget for what a block holds and what may be mapped
    // between two measurements (at 20 M documents ~440 MB are resident in
    // this phase: with half the budget as the ceiling, a tenth of the
    // decide thread's time went to unmapping).
    let ceiling = budget as u64 / 4 * 3;
    let release = || {
        store.release();
        buckets.release();
        classes.release();
    };
    let relief = Relief::new(ceiling, &release);
    // A block's candidates are found first, then verified. Features larger
    // than half the memory available are mostly read from the disk: in
    // between, the features of a whole block's candidates are asked for at
    // once, so that the disk serves many reads at a time, not one per
    // thread.
    let on_disk = available_memory().is_some_and(|a| store.features_bytes() > a / 2);
    let reader = Reader {
        store: &store,
        buckets: &buckets,
        classes: &classes,
        class: &class,
        scale: &scale,
        limits: params.query_limits(),
        threshold: params.threshold(),
        corrupt: &corrupt,
        relief: &relief,
        prefetch: on_disk,
    };
    let mut kept = Greedy::new();
    if n > 0 {
        kept.set_kept(n as u32 - 1, false);
    }
    let mut parents = Parents((0..n as u32).collect());
    let mut counts = vec![0u64; params.config().max_candidates as usize + 1];
    let mut bytes = 0u64;
    let mut refs = Sorter::<22>::resume(&dir.0, "refs-pass", manifest.refs.clone())?.peekable();
    // A block: at most this many items, or bucket entries to read.
    // Items per block: halved when a block's pages came near the limit,
    // doubled back when far below it (the pages a block reads are mapped
    // in 64 KB runs, so thousands of candidates can map hundreds of MB).
    const MAX_BLOCK: usize = 4096;
    let mut block_items = MAX_BLOCK;
    let block_entries = (budget / 64).max(256);
    let mut next = 0u32;
    let mut verify_s = 0.0;
    let bar = crate::progress::bar(Some(n as u64), false, "verify", !setup.quiet);
    // Each record's kept item it duplicates (`u32::MAX`: none), for `--annotate`.
    let mut decisions = BufWriter::with_capacity(1 << 20, std::fs::File::create(dir.0.join("decisions.bin"))?);
    // The next block: up to `items` items (or `block_entries` bucket
    // entries to read) and their references.
    let mut take_block = |items: usize| -> anyhow::Result<Vec<(u32, Vec<Ref>)>> {
        let mut block = Vec::new();
        let mut entries = 0usize;
        while (next as usize) < n && block.len() < items && entries < block_entries {
            let mut mine = Vec::new();
            while let Some(Ok(rec)) = refs.peek() {
                let (q, r) = ref_of(rec);
                if q != next {
                    break;
                }
                entries += (r.p as usize).min(reader.limits.max_bucket_read);
                mine.push(r);
                refs.next();
            }
            if let Some(Err(_)) = refs.peek() {
                refs.next().transpose()?;
            }
            block.push((next, mine));
            next += 1;
        }
        Ok(block)
    };
    type Look = Option<(CandidateSet, Vec<Match>)>;
    // Each item's first look: its candidates, verified (in parallel; a
    // look does not depend on decisions).
    let look_block = |block: &[(u32, Vec<Ref>)]| -> Vec<Look> {
        if let (Some(first), Some(last)) = (block.first(), block.last()) {
            store.prefetch(first.0, last.0 + 1);
        }
        let found: Vec<Option<CandidateSet>> = block
            .par_iter()
            .map(|(q, mine)| (!rejected.get(*q)).then(|| reader.candidates(*q, mine, &|_| true)))
            .collect();
        // Their features asked for all at once (when on disk), then read.
        for ((q, _), c) in block.iter().zip(&found) {
            if let Some(c) = c {
                reader.prefetch(*q, &c.ids);
            }
        }
        block
            .par_iter()
            .zip(found)
            .map(|((q, _), c)| {
                c.map(|c| {
                    let matches = reader.verify(*q, &c.ids);
                    (c, matches)
                })
            })
            .collect()
    };
    let t = Instant::now();
    let mut block = take_block(block_items)?;
    let mut looks = look_block(&block);
    verify_s += t.elapsed().as_secs_f64();
    while !block.is_empty() {
        let t = Instant::now();
        let following = take_block(block_items)?;
        // The following block is verified on the pool while this one is
        // decided here, in order.
        let (following_looks, decided) = std::thread::scope(|scope| {
            let verifying = scope.spawn(|| look_block(&following));
            let decided = (|| -> anyhow::Result<()> {
                for ((q, mine), look) in block.iter().zip(std::mem::take(&mut looks)) {
                    let Some(look) = look else {
                        decisions.write_all(&u32::MAX.to_le_bytes())?;
                        continue;
                    };
                    let top = counts.len() - 1;
                    counts[look.0.ids.len().min(top)] += 1;
                    let rec = store.rec(*q);
                    bytes += u64::from(rec.text_len());
                    let lookup = ItemLookup { reader: &reader, refs: mine };
                    let decided: Decided = kept.decide(&lookup, *q, look, &mut |_| {});
                    for m in &decided.matches {
                        parents.union(*q, m.id);
                    }
                    decisions.write_all(&decided.duplicate_of.map_or(u32::MAX, |m| m.id).to_le_bytes())?;
                    let degraded = rec.flags() & DEGRADED != 0;
                    f(&store, &Outcome { id: *q, line: rec.line(), input: rec.input(), decided, degraded })?;
                }
                Ok(())
            })();
            (verifying.join().expect("verification does not panic"), decided)
        });
        decided?;
        if corrupt.load(std::sync::atomic::Ordering::Relaxed) {
            anyhow::bail!(
                "the work folder {} was changed during the run (an item's features are missing)",
                dir.0.display()
            );
        }
        // Blocks are smaller while pages had to be given back.
        let resident = resident_bytes();
        relief.check(resident);
        if relief.took_back() {
            block_items = (block_items / 2).max(8);
        } else if resident < budget as u64 / 4 {
            block_items = (block_items * 2).min(MAX_BLOCK);
        }
        bar.inc(block.len() as u64);
        (block, looks) = (following, following_looks);
        verify_s += t.elapsed().as_secs_f64();
    }
    bar.finish_and_clear();
    decisions.into_inner().map_err(|e| e.into_error())?;
    let decisions = Mapped::open(&dir.0.join("decisions.bin"))?;
    // Verification and decisions overlap: their time is one figure.
    timings.verify_s = verify_s;
    phases.end("verify and decide", 0);
    drop(class);

    let mut clustered = Bits::new(n);
    for i in 0..n as u32 {
        if !rejected.get(i) {
            let r = parents.find(i);
            if r != i {
                clustered.set(r);
            }
        }
    }
    let clusters = clustered.count();
    Ok(Done {
        store,
        timings,
        bytes,
        candidate_counts: counts,
        phases: phases.list,
        clusters,
        keep_missing: manifest.keep_missing,
        ranks: if setup.keep.is_first() { None } else { Some(Mapped::open(&dir.0.join("ranks.bin"))?) },
        kept,
        parents,
        rejected,
        clustered,
        decisions,
        dir,
        budget,
    })
}

/// The first read under a keeper policy: every record that parses gets
/// its order key ([`Keep::order`], from the same parse the fingerprinting
/// does), the keys are sorted externally, and records are numbered in that
/// order, ties in input order. Returns each record's number by record
/// number (`u32::MAX`: it does not parse), how many there are, and how
/// many have no value for the policy's field.
fn number_in_order(setup: &Setup<'_>, dir: &std::path::Path, budget: usize) -> anyhow::Result<(Vec<u32>, u32, u64)> {
    let bar = crate::progress::bar(crate::input::total_size(setup.inputs), true, "order", !setup.quiet);
    let mut keys = Sorter::<12>::new(dir, "order", budget / 2);
    let (mut last, mut missing) = (0u64, 0u64);
    crate::input::for_each_chunk(setup.inputs, setup.opts, None, |chunk| {
        let orders: Vec<(u64, u64)> = chunk
            .lines
            .par_iter()
            .filter_map(|line| {
                let r = line.record_keyed(setup.text_field, setup.id_field, setup.keep.field()).ok()?;
                Some((line.number, setup.keep.order(r.text.len(), r.key)))
            })
            .collect();
        for (line, order) in orders {
            let line32 =
                u32::try_from(line).map_err(|_| anyhow::anyhow!("more than 4,294,967,295 records in one run"))?;
            missing += u64::from(order == u64::MAX);
            last = last.max(line);
            let mut r = [0u8; 12];
            r[0..8].copy_from_slice(&order.to_be_bytes());
            r[8..12].copy_from_slice(&line32.to_be_bytes());
            keys.push(r)?;
        }
        bar.inc(chunk.progress);
        Ok(())
    })?;
    bar.finish_and_clear();
    let mut ranks = vec![u32::MAX; last as usize + 1];
    let mut next = 0u32;
    for r in keys.finish()? {
        let r = r?;
        ranks[be32(&r[8..12]) as usize] = next;
        next += 1;
    }
    Ok((ranks, next, missing))
}

impl Done {
    /// Percentiles (p50, p99, max) of candidates per item, as
    /// [`neardup_core::percentiles`] gives them from the list.
    pub fn candidate_percentiles(&self) -> (usize, usize, usize) {
        let total: u64 = self.candidate_counts.iter().sum();
        if total == 0 {
            return (0, 0, 0);
        }
        let nth = |k: u64| {
            let mut seen = 0;
            for (v, &c) in self.candidate_counts.iter().enumerate() {
                seen += c;
                if seen > k {
                    return v;
                }
            }
            self.candidate_counts.len() - 1
        };
        let at = |q: f64| nth(((total - 1) as f64 * q).round() as u64);
        (at(0.5), at(0.99), nth(total - 1))
    }

    /// Removes the work folder when `self` is dropped: the outputs are written.
    pub fn remove_work_folder(&mut self) {
        self.dir.1 = true;
    }

    /// The first item of item `i`'s cluster (its own number when alone).
    pub fn cluster_first(&mut self, i: u32) -> u32 {
        self.parents.find(i)
    }

    /// Whether item `i` was kept.
    pub fn is_kept(&self, i: u32) -> bool {
        self.kept.is_kept(i)
    }

    /// The kept item that item `i` duplicates (None when kept).
    pub fn duplicate_of(&self, i: u32) -> Option<u32> {
        Some(entry(self.decisions.bytes(), u64::from(i))).filter(|&d| d != u32::MAX)
    }

    /// Gives back the mapped pages of the store and the decisions (see
    /// [`Store::release`]) when the resident set nears the budget.
    pub fn release_if_near_limit(&self) {
        if resident_bytes() > self.budget as u64 / 2 {
            self.store.release();
            self.decisions.release();
        }
    }

    /// Under a keeper policy, the item of record number `line` (`None`:
    /// no policy, items are in input order; `Some(None)`: not an item).
    pub fn item_of_record(&self, line: u64) -> Option<Option<u32>> {
        let ranks = self.ranks.as_ref()?;
        let item = entry(ranks.bytes(), line);
        Some((item != u32::MAX && !self.rejected.get(item)).then_some(item))
    }

    /// Whether record `i` of the store is an item (not a rejected repeat).
    pub fn is_item(&self, i: u32) -> bool {
        !self.rejected.get(i)
    }

    /// Each cluster of more than one item, by its first item: its members
    /// and its kept members, in input order.
    pub fn for_each_cluster(
        &mut self,
        mut f: impl FnMut(&Store, &[u32], &[u32]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut sorter = Sorter::<8>::new(&self.dir.0, "clusters", self.budget / 2);
        for i in 0..self.store.count {
            if self.rejected.get(i) {
                continue;
            }
            let r = self.parents.find(i);
            if self.clustered.get(r) {
                let mut rec = [0u8; 8];
                rec[0..4].copy_from_slice(&r.to_be_bytes());
                rec[4..8].copy_from_slice(&i.to_be_bytes());
                sorter.push(rec)?;
            }
        }
        let (mut members, mut kept) = (Vec::new(), Vec::new());
        let (mut root, mut written) = (None, 0u64);
        for rec in sorter.finish()? {
            let rec = rec?;
            let (r, i) = (be32(&rec[0..4]), be32(&rec[4..8]));
            if root != Some(r) {
                if !members.is_empty() {
                    f(&self.store, &members, &kept)?;
                }
                (members, kept) = (Vec::new(), Vec::new());
                root = Some(r);
                written += 1;
                if written % 1024 == 0 && resident_bytes() > self.budget as u64 / 2 {
                    self.store.release();
                }
            }
            members.push(i);
            if self.kept.is_kept(i) {
                kept.push(i);
            }
        }
        if !members.is_empty() {
            f(&self.store, &members, &kept)?;
        }
        Ok(())
    }
}
