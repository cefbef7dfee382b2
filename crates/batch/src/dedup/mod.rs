//! A dataset deduplication run, as `neardup dedup` makes it: inputs read
//! in order as one dataset, every candidate verified exactly, the keeper
//! rule of [`neardup_core::Greedy`], results written to files or objects.
//! In memory ([`crate::pipeline`]) or under a memory limit
//! ([`crate::bounded`]), with the same results byte for byte.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::chunk::{Input, Kind, ReadOptions};
use crate::input::Sources;
use crate::jsonl::Reject;
use crate::pipeline::{Batch, Outcome, Timings};
use crate::report::{ParamsOut, Percentiles};
use crate::UsageError;
use neardup_core::{Keep, Params};

mod engine;
mod outputs;

pub use engine::parse_size;
use engine::{choose_engine, Engine};
use outputs::{is_parquet_path, open_rows, ClustersOut, RowsOut, ScoresOut};

/// What a run reads, how it decides, and what it writes.
#[derive(Debug, Clone)]
pub struct Options {
    /// The inputs, in reading order ([`crate::input::expand`]).
    pub inputs: Vec<Input>,
    /// How records are read (text and id fields, line limit, mapping).
    pub read: ReadOptions,
    /// The resolved pipeline: fingerprints, bands, limits, threshold.
    pub params: Params,
    /// Which copy of a group of near duplicates is kept.
    pub keep: Keep,
    /// Kept rows (`-` for stdout; `s3://` for an object).
    pub output: Option<String>,
    /// Every row to `output`, with `cluster_id` and `duplicate_of` added.
    pub annotate: bool,
    /// Verified pairs.
    pub pairs: Option<String>,
    /// Clusters.
    pub clusters: Option<String>,
    /// Dropped items and the kept item each duplicates.
    pub dropped: Option<String>,
    /// Format of pairs, dropped and clusters (by the path when `None`).
    pub format: Option<ReportFormat>,
    /// A saved index deduplicated against and added to.
    pub index: Option<PathBuf>,
    /// A saved index deduplicated against, not added to.
    pub reference: Option<PathBuf>,
    /// `none`, `auto` or a size such as `1G` ([`parse_size`]).
    pub memory_limit: String,
    /// Where a run under a memory limit keeps its work folder (default:
    /// the system's temporary folder).
    pub work_dir: Option<PathBuf>,
    /// Progress bars on a terminal.
    pub progress: bool,
    /// Notes on standard error about how the run goes.
    pub notes: bool,
    /// The process exits when the run returns: the in-memory index is
    /// left for the system to take back instead of freed item by item.
    pub exits_after: bool,
}

impl Options {
    /// A run over `inputs` under `params` with `neardup dedup`'s defaults:
    /// read as [`ReadOptions::default`], `--keep first`, `--memory-limit
    /// auto`, no outputs, no progress bars or notes; set what differs.
    pub fn new(inputs: Vec<Input>, params: Params) -> Options {
        Options {
            inputs,
            read: ReadOptions::default(),
            params,
            keep: Keep::default(),
            output: None,
            annotate: false,
            pairs: None,
            clusters: None,
            dropped: None,
            format: None,
            index: None,
            reference: None,
            memory_limit: "auto".to_owned(),
            work_dir: None,
            progress: false,
            notes: false,
            exits_after: false,
        }
    }
}

/// How result tables are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// TSV for pairs and dropped, JSONL for clusters.
    Text,
    /// Apache Parquet.
    Parquet,
}

/// What a run did: the `--json` summary of `neardup dedup`.
#[derive(Debug, serde::Serialize)]
pub struct Summary {
    pub records: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub kept: u64,
    pub dropped: u64,
    pub verified_pairs: u64,
    pub clusters: u64,
    pub rejected: Vec<Reject>,
    pub degraded: Vec<String>,
    /// Queries whose candidate list hit --max-candidates or a hot bucket.
    pub capped_queries: u64,
    /// Queries the cap cut inside the near duplicates: the item may have
    /// more than --max-candidates of them, and its pairs are incomplete.
    pub saturated_queries: u64,
    /// Kept items whose search stayed partial even among kept items:
    /// possibly unresolved duplicates, for review.
    pub kept_unresolved: Vec<String>,
    pub candidates_per_query: Percentiles,
    pub params: ParamsOut,
    #[serde(skip)]
    pub params_max_candidates: u32,
    pub timings: Timings,
    /// Per input file, in reading order.
    pub inputs: Vec<InputSummary>,
    /// The saved index, with --index or --reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexSummary>,
    /// A run under a memory limit: the limit, the peak and each phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemorySummary>,
    /// The keeper policy (`--keep`).
    pub keep: String,
    /// Under `--keep max:FIELD` or `min:FIELD`: records without a value,
    /// decided after every record with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_missing: Option<u64>,
}

/// What a run under `--memory-limit` used.
#[derive(Debug, serde::Serialize)]
pub struct MemorySummary {
    pub limit_bytes: u64,
    /// The process's peak resident set (`getrusage`).
    pub peak_rss_bytes: u64,
    pub phases: Vec<crate::bounded::Phase>,
}

/// What one input held and what became of it.
#[derive(Debug, Default, serde::Serialize)]
pub struct InputSummary {
    pub file: String,
    pub format: &'static str,
    pub records: u64,
    pub kept: u64,
    pub dropped: u64,
    pub rejected: u64,
}

/// The saved index before and after the run.
#[derive(Debug, Default, serde::Serialize)]
pub struct IndexSummary {
    pub folder: String,
    /// Items it held before the run (0 when it was created).
    pub items_before: u64,
    /// Items it holds after the run (as before with --reference).
    pub items_after: u64,
    /// Runs that have added to it, this one included.
    pub runs: u64,
    pub load_s: f64,
    pub save_s: f64,
    /// Size of the index file written (0 with --reference).
    pub bytes: u64,
}

/// What the outcomes add up to, and the per-outcome outputs.
struct Tally {
    kept: u64,
    dropped: u64,
    pairs: u64,
    capped_queries: u64,
    saturated: u64,
    degraded: Vec<String>,
    over_cap: Vec<String>,
    per_input: Vec<InputSummary>,
    pairs_out: Option<ScoresOut>,
    dropped_out: Option<ScoresOut>,
}

impl Tally {
    /// Counts one outcome and writes its pairs and drop; `name` gives an
    /// item's id, `input` the input it came from.
    fn add<'n>(&mut self, name: &dyn Fn(u32) -> &'n str, o: &Outcome, input: usize) -> anyhow::Result<()> {
        let entry = &mut self.per_input[input];
        entry.records += 1;
        entry.kept += u64::from(o.decided.kept);
        entry.dropped += u64::from(!o.decided.kept);
        if o.decided.kept {
            self.kept += 1;
        } else {
            self.dropped += 1;
            if let (Some(w), Some(m)) = (self.dropped_out.as_mut(), o.decided.duplicate_of) {
                w.row(name(o.id), name(m.id), m.score)?;
            }
        }
        if o.degraded {
            self.degraded.push(name(o.id).to_owned());
        }
        self.capped_queries += u64::from(o.decided.capped);
        self.saturated += u64::from(o.decided.saturated);
        // A kept item whose search was cut even among kept items may
        // still have a duplicate that was not examined.
        if o.decided.kept && o.decided.unresolved {
            self.over_cap.push(name(o.id).to_owned());
        }
        for m in &o.decided.matches {
            self.pairs += 1;
            if let Some(w) = self.pairs_out.as_mut() {
                w.row(name(m.id), name(o.id), m.score)?;
            }
        }
        Ok(())
    }
}

/// Runs the deduplication `o` describes; its outputs are complete when it
/// returns. Rejected records are in the summary (`rejected`), not errors.
pub fn run(o: &Options) -> anyhow::Result<Summary> {
    // Results and the saved index may be objects (s3://…); the work
    // folder is the machine's own.
    if let Some(p) = o.work_dir.as_deref().filter(|p| crate::remote::is_remote(&p.display().to_string())) {
        return Err(UsageError(format!("--work-dir {}: the work folder must be a local folder", p.display())).into());
    }
    let inputs = &o.inputs;
    let params = &o.params;
    let engine = choose_engine(o)?;
    // A stream (standard input, a pipe, a FIFO, a device) has no size: it
    // can be read once.
    let twice = if o.annotate {
        Some("--annotate reads the inputs twice")
    } else if matches!(engine, Engine::Bounded(_)) && o.output.is_some() {
        Some("a run under --memory-limit writes --output in a second read of the inputs")
    } else if !o.keep.is_first() && (o.output.is_some() || matches!(engine, Engine::Bounded(_))) {
        Some("--keep other than `first` reads the inputs twice (to order them, or to write --output)")
    } else {
        None
    };
    if let (Some(stream), Some(why)) = (inputs.iter().find(|i| i.size.is_none()), twice) {
        let what = if stream.name == "-" {
            "standard input".to_owned()
        } else {
            format!("{} (not a regular file)", stream.name)
        };
        return Err(UsageError(format!("{why}; {what} can be read once")).into());
    }
    let report_parquet = |path: &str| match o.format {
        Some(f) => f == ReportFormat::Parquet,
        None => is_parquet_path(path),
    };
    let mut rows_out = o.output.as_deref().map(|p| open_rows(p, inputs, o.annotate)).transpose()?;
    let mut tally = Tally {
        kept: 0,
        dropped: 0,
        pairs: 0,
        capped_queries: 0,
        saturated: 0,
        degraded: Vec::new(),
        over_cap: Vec::new(),
        per_input: inputs
            .iter()
            .map(|i| InputSummary {
                file: i.name.clone(),
                format: if i.kind == Kind::Parquet { "parquet" } else { "jsonl" },
                ..InputSummary::default()
            })
            .collect(),
        pairs_out: o
            .pairs
            .as_deref()
            .map(|p| ScoresOut::create(p, report_parquet(p), ["left", "right", "score"]))
            .transpose()?,
        dropped_out: o
            .dropped
            .as_deref()
            .map(|p| ScoresOut::create(p, report_parquet(p), ["item", "kept_item", "score"]))
            .transpose()?,
    };
    let mut clusters_out = o.clusters.as_deref().map(|p| ClustersOut::create(p, report_parquet(p))).transpose()?;
    // Parquet rows are read whole only when they are written out.
    let opts =
        ReadOptions { all_columns: rows_out.is_some(), key_field: o.keep.field().map(str::to_owned), ..o.read.clone() };
    let sources = Sources::for_inputs(inputs);
    let started = Instant::now();
    let mut rejects = Vec::new();
    let bar = crate::progress::bar(crate::input::total_size(inputs), true, "dedup", o.progress);
    let outs =
        Outs { rejects: &mut rejects, tally: &mut tally, rows: &mut rows_out, clusters: &mut clusters_out, bar: &bar };
    let run = match engine {
        Engine::Memory => run_in_memory(o, &opts, &sources, outs)?,
        Engine::Bounded(limits) => {
            let setup = crate::bounded::Setup {
                params,
                text_field: &o.read.text_field,
                id_field: &o.read.id_field,
                inputs,
                opts: &opts,
                sources: sources.as_deref(),
                quiet: !o.notes,
                keep: &o.keep,
            };
            run_bounded(o, &setup, &limits, outs)?
        }
    };
    for w in [
        rows_out.map(|w| w.finish()),
        tally.pairs_out.take().map(|w| w.finish()),
        tally.dropped_out.take().map(|w| w.finish()),
        clusters_out.map(|w| w.finish()),
    ] {
        w.transpose()?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let (p50, p99, max) = run.percentiles;
    rejects.sort_by_key(|r| r.line);
    let mut per_input = tally.per_input;
    if let Some(s) = &sources {
        s.place_rejects(&mut rejects);
        for r in &rejects {
            if let Some(e) = r.file.as_ref().and_then(|f| per_input.iter_mut().find(|i| &i.file == f)) {
                e.rejected += 1;
            }
        }
    } else if let Some(e) = per_input.first_mut() {
        e.rejected = rejects.len() as u64;
    }
    Ok(Summary {
        records: tally.kept + tally.dropped,
        bytes: run.bytes,
        seconds,
        mb_per_s: run.bytes as f64 / 1e6 / seconds.max(1e-9),
        kept: tally.kept,
        dropped: tally.dropped,
        verified_pairs: tally.pairs,
        clusters: run.clusters,
        rejected: rejects,
        degraded: tally.degraded,
        capped_queries: tally.capped_queries,
        saturated_queries: tally.saturated,
        kept_unresolved: tally.over_cap,
        candidates_per_query: Percentiles { p50, p99, max },
        params: ParamsOut::of(params),
        params_max_candidates: params.config().max_candidates,
        timings: run.timings,
        inputs: per_input,
        index: run.index,
        memory: run.memory,
        keep: o.keep.to_string(),
        keep_missing: o.keep.field().map(|_| run.keep_missing),
    })
}

/// What both engines write to and report through.
struct Outs<'a> {
    rejects: &'a mut Vec<Reject>,
    tally: &'a mut Tally,
    rows: &'a mut Option<RowsOut>,
    clusters: &'a mut Option<ClustersOut>,
    bar: &'a indicatif::ProgressBar,
}

/// What an engine's run leaves for the summary.
struct RunOut {
    bytes: u64,
    clusters: u64,
    percentiles: (usize, usize, usize),
    timings: Timings,
    index: Option<IndexSummary>,
    memory: Option<MemorySummary>,
    keep_missing: u64,
}

/// The run in memory: decided while reading.
fn run_in_memory(
    a: &Options,
    opts: &ReadOptions,
    sources: &Option<std::sync::Arc<Sources>>,
    outs: Outs<'_>,
) -> anyhow::Result<RunOut> {
    let Outs { rejects, tally, rows: rows_out, clusters: clusters_out, bar } = outs;
    let (params, inputs) = (&a.params, &a.inputs[..]);
    let mut batch = Batch::new(params.clone(), &a.read.text_field, &a.read.id_field)?;
    batch.sources = sources.clone();
    batch.keep = a.keep.clone();

    // The saved index.
    let index_dir: Option<&Path> = a.index.as_deref().or(a.reference.as_deref());
    let mut index_summary = None;
    if let Some(dir) = index_dir {
        let loaded = crate::saved::load(dir, params, &mut batch)?;
        if loaded.is_none() && a.reference.is_some() {
            anyhow::bail!("no index in {} (--reference reads one; --index creates one)", dir.display());
        }
        let loaded = loaded.unwrap_or_default();
        index_summary = Some(IndexSummary {
            folder: dir.display().to_string(),
            items_before: loaded.items,
            items_after: loaded.items,
            runs: loaded.runs,
            load_s: loaded.seconds,
            ..IndexSummary::default()
        });
    }
    let base = batch.ids.len() as u32;
    let mut output_s = 0.0;
    // With --annotate: (record number, item, kept item it duplicates) per item.
    let mut notes: Vec<(u64, u32, u32)> = Vec::new();
    let read_s = if a.keep.is_first() {
        batch.run(inputs, opts, rejects, |batch, chunk, outcomes| {
            let t = Instant::now();
            let mut picks = Vec::new();
            let mut line_at = 0usize;
            for o in outcomes {
                tally.add(&|i| batch.ids[i as usize].as_str(), o, o.input as usize)?;
                if a.annotate {
                    notes.push((o.line, o.id, o.decided.duplicate_of.map_or(u32::MAX, |m| m.id)));
                } else if o.decided.kept && rows_out.is_some() {
                    while chunk.lines[line_at].number < o.line {
                        line_at += 1;
                    }
                    picks.push((line_at, None));
                }
            }
            if let Some(w) = rows_out.as_mut() {
                w.write(chunk, &picks)?;
            }
            output_s += t.elapsed().as_secs_f64();
            bar.inc(chunk.progress);
            Ok(())
        })?
    } else {
        // Decided in the policy's order once every record is read; rows
        // are written in input order by a second read.
        let read_s = batch.run_ordered(
            inputs,
            opts,
            rejects,
            |chunk| bar.inc(chunk.progress),
            |batch, outcomes| {
                for o in outcomes {
                    tally.add(&|i| batch.ids[i as usize].as_str(), o, o.input as usize)?;
                    if rows_out.is_some() {
                        notes.push((o.line, o.id, o.decided.duplicate_of.map_or(u32::MAX, |m| m.id)));
                    }
                }
                Ok(())
            },
        )?;
        notes.sort_unstable_by_key(|n| n.0);
        read_s
    };
    bar.finish_and_clear();
    batch.timings.read_s = read_s;
    if a.annotate || (!a.keep.is_first() && rows_out.is_some()) {
        let t = Instant::now();
        let firsts = a.annotate.then(|| batch.cluster_firsts());
        if let Some(w) = rows_out.as_mut() {
            second_pass(inputs, opts, &batch, firsts.as_deref(), &notes, w, a.progress)?;
        }
        output_s += t.elapsed().as_secs_f64();
    }
    // Clusters with a member from this run (members of earlier runs included).
    let clusters: Vec<(Vec<u32>, Vec<u32>)> =
        batch.clusters().into_iter().filter(|(m, _)| m.last().is_some_and(|&l| l >= base)).collect();
    if let Some(w) = clusters_out.as_mut() {
        let name = |ids: &[u32]| ids.iter().map(|&i| batch.ids[i as usize].as_str()).collect::<Vec<_>>();
        for (n, (members, kept_ids)) in clusters.iter().enumerate() {
            w.row(n as u64, &name(members), &name(kept_ids))?;
        }
    }
    batch.timings.output_s = output_s;
    if let (Some(dir), Some(summary)) = (a.index.as_deref(), index_summary.as_mut()) {
        let saved = crate::saved::save(dir, &mut batch, summary.runs + 1)?;
        summary.items_after = saved.items;
        summary.runs += 1;
        summary.save_s = saved.seconds;
        summary.bytes = saved.bytes;
    }
    let mut counts = std::mem::take(&mut batch.candidate_counts);
    let out = RunOut {
        bytes: batch.bytes,
        clusters: clusters.len() as u64,
        percentiles: neardup_core::percentiles(&mut counts),
        timings: batch.timings.clone(),
        index: index_summary,
        memory: None,
        keep_missing: batch.keep_missing,
    };
    if a.exits_after {
        // The system takes the index back at exit far faster than freeing
        // its millions of allocations one by one (~3 % of a run's wall
        // time on 100k records). Everything was written.
        std::mem::forget(batch);
    }
    Ok(out)
}

/// The run under a memory limit: decided after reading, its state on disk
/// ([`crate::bounded`]); kept rows are written in a second read.
fn run_bounded(
    a: &Options,
    setup: &crate::bounded::Setup<'_>,
    limits: &crate::bounded::Limits,
    outs: Outs<'_>,
) -> anyhow::Result<RunOut> {
    let Outs { rejects, tally, rows: rows_out, clusters: clusters_out, bar } = outs;
    let mut done = crate::bounded::dedup(setup, limits, rejects, &|n| bar.inc(n), |store, o| {
        tally.add(&|i| store.id(i), o, store.rec(o.id).input() as usize)
    })?;
    bar.finish_and_clear();
    let t = Instant::now();
    if let Some(w) = rows_out.as_mut() {
        let bar = crate::progress::bar(crate::input::total_size(setup.inputs), true, "write", a.progress);
        let mut next = 0u32;
        crate::input::for_each_chunk(setup.inputs, setup.opts, setup.sources, |chunk| {
            let mut picks = Vec::new();
            for (i, line) in chunk.lines.iter().enumerate() {
                let item = match done.item_of_record(line.number) {
                    Some(Some(item)) => item,
                    Some(None) => continue,
                    // Items in input order: the next with this record number.
                    None => {
                        while next < done.store.count && done.store.rec(next).line() < line.number {
                            next += 1;
                        }
                        if next >= done.store.count || done.store.rec(next).line() != line.number || !done.is_item(next)
                        {
                            continue;
                        }
                        next
                    }
                };
                if a.annotate {
                    let first = done.cluster_first(item);
                    let cluster = done.store.id(first).to_owned();
                    let dup = done.duplicate_of(item).map(|d| done.store.id(d).to_owned());
                    picks.push((i, Some((cluster, dup))));
                } else if done.is_kept(item) {
                    picks.push((i, None));
                }
            }
            w.write(&chunk, &picks)?;
            done.release_if_near_limit();
            bar.inc(chunk.progress);
            Ok(())
        })?;
        bar.finish_and_clear();
    }
    if let Some(w) = clusters_out.as_mut() {
        let mut n = 0u64;
        done.for_each_cluster(|store, members, kept| {
            let names = |ids: &[u32]| ids.iter().map(|&i| store.id(i)).collect::<Vec<_>>();
            w.row(n, &names(members), &names(kept))?;
            n += 1;
            Ok(())
        })?;
    }
    let mut timings = done.timings.clone();
    timings.output_s = t.elapsed().as_secs_f64();
    done.remove_work_folder();
    Ok(RunOut {
        bytes: done.bytes,
        clusters: done.clusters,
        percentiles: done.candidate_percentiles(),
        timings,
        index: None,
        memory: Some(MemorySummary {
            limit_bytes: limits.memory,
            peak_rss_bytes: crate::bounded::peak_rss(),
            phases: done.phases.clone(),
        }),
        keep_missing: done.keep_missing,
    })
}

/// The second read of the inputs, for `--annotate` (`firsts` given:
/// every record with its cluster and the kept item it duplicates) or under
/// a keeper policy (the kept records), in input order. `notes` holds
/// (record number, item, kept item it duplicates) per item, by record.
fn second_pass(
    inputs: &[Input],
    opts: &ReadOptions,
    batch: &Batch,
    firsts: Option<&[u32]>,
    notes: &[(u64, u32, u32)],
    out: &mut RowsOut,
    progress: bool,
) -> anyhow::Result<()> {
    let name = if firsts.is_some() { "annotate" } else { "write" };
    let bar = crate::progress::bar(crate::input::total_size(inputs), true, name, progress);
    crate::input::for_each_chunk(inputs, opts, None, |chunk| {
        let mut picks = Vec::new();
        for (i, line) in chunk.lines.iter().enumerate() {
            // Records rejected in the first pass have no item and are not written.
            let Ok(at) = notes.binary_search_by_key(&line.number, |n| n.0) else { continue };
            let (_, item, dup) = notes[at];
            match firsts {
                Some(firsts) => {
                    let cluster = batch.ids[firsts[item as usize] as usize].clone();
                    let duplicate_of = (dup != u32::MAX).then(|| batch.ids[dup as usize].clone());
                    picks.push((i, Some((cluster, duplicate_of))));
                }
                None if batch.rule.is_kept(item) => picks.push((i, None)),
                None => {}
            }
        }
        out.write(&chunk, &picks)?;
        bar.inc(chunk.progress);
        Ok(())
    })?;
    bar.finish_and_clear();
    Ok(())
}
