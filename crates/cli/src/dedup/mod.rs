//! `neardup dedup`: deduplicate datasets of JSONL (plain, zstd, gzip) and
//! Parquet files, optionally against a saved index of earlier runs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, ValueEnum};

use crate::args::{InputArgs, PipelineArgs};
use crate::chunk::{Input, Kind, ReadOptions};
use crate::input::Sources;
use crate::jsonl::Reject;
use crate::pipeline::{Batch, Outcome, Timings};
use crate::report::{ParamsOut, Percentiles};
use crate::usage::UsageError;
use neardup_core::Keep;

mod engine;
mod outputs;

use engine::{choose_engine, Engine};
use outputs::{is_parquet_path, open_rows, ClustersOut, RowsOut, ScoresOut};

/// Deduplicate a dataset: JSONL (plain, or compressed with zstd or gzip)
/// and Parquet files, folders of them and glob patterns, read in order as
/// one dataset.
///
/// Every LSH candidate is verified with exact Jaccard on canonical shingle
/// sets; pairs at or above --threshold are near duplicates. An item is
/// dropped only when it matches an earlier kept item. Over-cap candidate
/// lists and over-limit items are reported, never dropped silently. With
/// --index DIR the run also deduplicates against every item of earlier
/// runs saved there, and saves its own.
#[derive(Debug, Args)]
pub struct DedupArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Which copy of a group of near duplicates is kept: `first` (the
    /// earliest in the input), `longest` (the most text), `max:FIELD` or
    /// `min:FIELD` (the highest or lowest value of a numeric, date or
    /// timestamp field or column, such as a quality score or a crawl date;
    /// records without a value come last). Items are decided in that
    /// order, ties in input order: a dropped item always has a kept near
    /// duplicate that the policy prefers. Other than `first`, every record
    /// is read before any is decided, and --output is written in a second
    /// read of the inputs.
    #[arg(long, value_name = "POLICY", default_value = "first", value_parser = Keep::parse, help_heading = "Decision")]
    pub keep: Keep,
    /// Write kept records here, in input order; `-` for stdout, or
    /// `s3://bucket/key` (every output: the object appears whole when the
    /// run ends, or not at all). Parquet
    /// when the path ends in `.parquet`, or when every input is Parquet
    /// and the path has no JSONL extension (rows keep every column and
    /// the schema); JSONL otherwise (the original lines; Parquet rows as
    /// JSON objects), compressed when the path ends in `.zst` or `.gz`.
    #[arg(short, long, help_heading = "Output")]
    pub output: Option<String>,
    /// Write every record to --output, kept or not, with two added fields:
    /// `cluster_id` (the id of the first item of its cluster, its own when
    /// it has no near duplicate) and `duplicate_of` (the kept item it
    /// duplicates; null when kept). Reads the inputs twice.
    #[arg(long, requires = "output", help_heading = "Output")]
    pub annotate: bool,
    /// Write verified pairs: TSV `left<TAB>right<TAB>score` (exact Jaccard;
    /// a backslash, tab, newline or carriage return in an id is written
    /// `\\`, `\t`, `\n`, `\r`), or Parquet columns `left`, `right`, `score`.
    #[arg(long, help_heading = "Output")]
    pub pairs: Option<String>,
    /// Write clusters: JSONL `{"cluster", "size", "members", "kept"}`, or
    /// Parquet with those columns.
    #[arg(long, help_heading = "Output")]
    pub clusters: Option<String>,
    /// Write dropped items: TSV `item<TAB>kept_item<TAB>score` (ids escaped
    /// as in --pairs), or Parquet columns `item`, `kept_item`, `score`.
    #[arg(long, help_heading = "Output")]
    pub dropped: Option<String>,
    /// Format of --pairs, --dropped and --clusters (default: parquet for a
    /// path ending in `.parquet`, else text).
    #[arg(long, value_enum, help_heading = "Output")]
    pub format: Option<ReportFormat>,
    /// Deduplicate against the saved index in DIR (created if missing) and
    /// add this run's items to it: a later run finds its near duplicates
    /// among them. The index must have been built with the same pipeline
    /// settings. DIR may be `s3://bucket/prefix/` (like every output path:
    /// written by an upload completed only at the end).
    #[arg(long, value_name = "DIR", conflicts_with = "reference", help_heading = "Index")]
    pub index: Option<PathBuf>,
    /// Deduplicate against the saved index in DIR without adding to it.
    #[arg(long, value_name = "DIR", help_heading = "Index")]
    pub reference: Option<PathBuf>,
    /// Print the summary as JSON on stdout.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// No progress bar and no human summary.
    #[arg(short, long, help_heading = "Output")]
    pub quiet: bool,
    /// Most memory the run may hold, like `sort -S`: a size (`512M`, `4G`),
    /// `auto` or `none`.
    ///
    /// Under a limit, the run keeps its state on disk in --work-dir and
    /// gives the same results as in memory, byte for byte: the same
    /// candidates, verified exactly, decided by the same rule; kept rows
    /// are written in a second read of the inputs. It holds about 9 bytes
    /// per record besides its buffers. `auto` runs in memory (the fastest)
    /// when the inputs' estimated needs (about 1.8 times the text) fit in
    /// half of the memory available at start, and under that half
    /// otherwise; `none` always runs in memory. --index and --reference
    /// run in memory.
    #[arg(long, value_name = "SIZE", default_value = "auto", help_heading = "Resources")]
    pub memory_limit: String,
    /// Where a run under a memory limit writes its work folder, removed at
    /// the end (default: the system's temporary folder). Its free space is
    /// checked before the run starts.
    #[arg(long, value_name = "DIR", help_heading = "Resources")]
    pub work_dir: Option<PathBuf>,
}

/// How result tables are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// TSV for pairs and dropped, JSONL for clusters.
    Text,
    /// Apache Parquet.
    Parquet,
}

#[derive(Debug, serde::Serialize)]
struct Summary {
    records: u64,
    bytes: u64,
    seconds: f64,
    mb_per_s: f64,
    kept: u64,
    dropped: u64,
    verified_pairs: u64,
    clusters: u64,
    rejected: Vec<Reject>,
    degraded: Vec<String>,
    /// Queries whose candidate list hit --max-candidates or a hot bucket.
    capped_queries: u64,
    /// Queries the cap cut inside the near duplicates: the item may have
    /// more than --max-candidates of them, and its pairs are incomplete.
    saturated_queries: u64,
    /// Kept items whose search stayed partial even among kept items:
    /// possibly unresolved duplicates, for review.
    kept_unresolved: Vec<String>,
    candidates_per_query: Percentiles,
    params: ParamsOut,
    #[serde(skip)]
    params_max_candidates: u32,
    timings: Timings,
    /// Per input file, in reading order.
    inputs: Vec<InputSummary>,
    /// The saved index, with --index or --reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<IndexSummary>,
    /// A run under a memory limit: the limit, the peak and each phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<MemorySummary>,
    /// The keeper policy (`--keep`).
    keep: String,
    /// Under `--keep max:FIELD` or `min:FIELD`: records without a value,
    /// decided after every record with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    keep_missing: Option<u64>,
}

/// What a run under `--memory-limit` used.
#[derive(Debug, serde::Serialize)]
struct MemorySummary {
    limit_bytes: u64,
    /// The process's peak resident set (`getrusage`).
    peak_rss_bytes: u64,
    phases: Vec<crate::bounded::Phase>,
}

/// What one input held and what became of it.
#[derive(Debug, Default, serde::Serialize)]
struct InputSummary {
    file: String,
    format: &'static str,
    records: u64,
    kept: u64,
    dropped: u64,
    rejected: u64,
}

/// The saved index before and after the run.
#[derive(Debug, Default, serde::Serialize)]
struct IndexSummary {
    folder: String,
    /// Items it held before the run (0 when it was created).
    items_before: u64,
    /// Items it holds after the run (as before with --reference).
    items_after: u64,
    /// Runs that have added to it, this one included.
    runs: u64,
    load_s: f64,
    save_s: f64,
    /// Size of the index file written (0 with --reference).
    bytes: u64,
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

pub fn run(a: DedupArgs) -> anyhow::Result<ExitCode> {
    crate::usage::init_threads(a.input.threads)?;
    let params = a.pipeline.config()?.resolve()?;
    if a.json && a.output.as_deref() == Some("-") {
        return Err(UsageError("--json and --output - both want stdout; write one to a file".into()).into());
    }
    // Results and the saved index may be objects (s3://…); the work
    // folder is the machine's own.
    if let Some(p) = a.work_dir.as_deref().filter(|p| crate::remote::is_remote(&p.display().to_string())) {
        return Err(UsageError(format!("--work-dir {}: the work folder must be a local folder", p.display())).into());
    }
    let inputs = a.input.expand()?;
    let engine = choose_engine(&a, &inputs)?;
    // A stream (standard input, a pipe, a FIFO, a device) has no size: it
    // can be read once.
    let twice = if a.annotate {
        Some("--annotate reads the inputs twice")
    } else if matches!(engine, Engine::Bounded(_)) && a.output.is_some() {
        Some("a run under --memory-limit writes --output in a second read of the inputs")
    } else if !a.keep.is_first() && (a.output.is_some() || matches!(engine, Engine::Bounded(_))) {
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
    let report_parquet = |path: &str| match a.format {
        Some(f) => f == ReportFormat::Parquet,
        None => is_parquet_path(path),
    };
    let mut rows_out = a.output.as_deref().map(|p| open_rows(p, &inputs, a.annotate)).transpose()?;
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
        pairs_out: a
            .pairs
            .as_deref()
            .map(|p| ScoresOut::create(p, report_parquet(p), ["left", "right", "score"]))
            .transpose()?,
        dropped_out: a
            .dropped
            .as_deref()
            .map(|p| ScoresOut::create(p, report_parquet(p), ["item", "kept_item", "score"]))
            .transpose()?,
    };
    let mut clusters_out = a.clusters.as_deref().map(|p| ClustersOut::create(p, report_parquet(p))).transpose()?;
    // Parquet rows are read whole only when they are written out.
    let opts = ReadOptions {
        all_columns: rows_out.is_some(),
        key_field: a.keep.field().map(str::to_owned),
        ..a.input.read_options()
    };
    let sources = Sources::for_inputs(&inputs);
    let started = Instant::now();
    let mut rejects = Vec::new();
    let bar = crate::progress::bar(crate::input::total_size(&inputs), true, "dedup", !a.quiet);
    let outs =
        Outs { rejects: &mut rejects, tally: &mut tally, rows: &mut rows_out, clusters: &mut clusters_out, bar: &bar };
    let run = match engine {
        Engine::Memory => run_in_memory(&a, &params, &inputs, &opts, &sources, outs)?,
        Engine::Bounded(limits) => {
            let setup = crate::bounded::Setup {
                params: &params,
                text_field: &a.input.text_field,
                id_field: &a.input.id_field,
                inputs: &inputs,
                opts: &opts,
                sources: sources.as_deref(),
                quiet: a.quiet || a.json,
                keep: &a.keep,
            };
            run_bounded(&a, &setup, &limits, outs)?
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
    let summary = Summary {
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
        params: ParamsOut::of(&params),
        params_max_candidates: params.config().max_candidates,
        timings: run.timings,
        inputs: per_input,
        index: run.index,
        memory: run.memory,
        keep: a.keep.to_string(),
        keep_missing: a.keep.field().map(|_| run.keep_missing),
    };
    if let Some(field) = a.keep.field() {
        if summary.records > 0 && run.keep_missing == summary.records {
            eprintln!(
                "neardup: warning: no record has a value for {field:?} (--keep {}): every record was decided in \
                 input order",
                a.keep
            );
        } else if run.keep_missing > 0 && !a.quiet && !a.json {
            eprintln!(
                "neardup: {} of {} records have no value for {field:?}; they were decided after the others",
                run.keep_missing, summary.records
            );
        }
    }
    for r in &summary.rejected {
        eprintln!("neardup: {}: {}", r.place(), r.reason);
    }
    if a.json {
        crate::output::print_stdout(&serde_json::to_string_pretty(&summary)?)?;
    } else if !a.quiet {
        print_summary(&summary);
    }
    Ok(if summary.rejected.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(3) })
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
    a: &DedupArgs,
    params: &neardup_core::Params,
    inputs: &[Input],
    opts: &ReadOptions,
    sources: &Option<std::sync::Arc<Sources>>,
    outs: Outs<'_>,
) -> anyhow::Result<RunOut> {
    let Outs { rejects, tally, rows: rows_out, clusters: clusters_out, bar } = outs;
    let mut batch = Batch::new(params.clone(), &a.input.text_field, &a.input.id_field)?;
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
            second_pass(inputs, opts, &batch, firsts.as_deref(), &notes, w, !a.quiet)?;
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
    // The process ends soon, and the system takes the index back at exit
    // far faster than freeing its millions of allocations one by one
    // (~3 % of a run's wall time on 100k records). Everything was written.
    std::mem::forget(batch);
    Ok(out)
}

/// The run under a memory limit: decided after reading, its state on disk
/// ([`crate::bounded`]); kept rows are written in a second read.
fn run_bounded(
    a: &DedupArgs,
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
        let bar = crate::progress::bar(crate::input::total_size(setup.inputs), true, "write", !a.quiet);
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

fn few(ids: &[String]) -> String {
    let shown: Vec<&str> = ids.iter().take(5).map(String::as_str).collect();
    if ids.len() > shown.len() {
        format!("{} ... and {} more", shown.join(", "), ids.len() - shown.len())
    } else {
        shown.join(", ")
    }
}

fn print_summary(s: &Summary) {
    eprintln!("{} records, {:.1} MB in {:.2} s ({:.1} MB/s)", s.records, s.bytes as f64 / 1e6, s.seconds, s.mb_per_s);
    eprintln!(
        "kept {}, dropped {} near-duplicates; {} verified pairs in {} clusters (threshold {}, {} bands x {} rows)",
        s.kept, s.dropped, s.verified_pairs, s.clusters, s.params.threshold, s.params.bands, s.params.rows
    );
    if s.keep != "first" {
        eprintln!("the copy kept of each group: --keep {}", s.keep);
    }
    eprintln!(
        "candidates per item: p50 {}, p99 {}, max {}",
        s.candidates_per_query.p50, s.candidates_per_query.p99, s.candidates_per_query.max
    );
    if !s.rejected.is_empty() {
        eprintln!("rejected {} records (listed above)", s.rejected.len());
    }
    if !s.degraded.is_empty() {
        eprintln!(
            "{} items over --max-shingles were matched by exact hash only: {}",
            s.degraded.len(),
            few(&s.degraded)
        );
    }
    if s.capped_queries > 0 {
        eprintln!(
            "{} items hit the candidate cap (--max-candidates {}) or a hot bucket; candidates were ranked by \
             estimated similarity before the cap",
            s.capped_queries, s.params_max_candidates,
        );
    }
    if s.saturated_queries > 0 {
        eprintln!(
            "{} items may have more than {} near duplicates: their pair lists are incomplete (decisions are not)",
            s.saturated_queries, s.params_max_candidates
        );
    }
    if !s.kept_unresolved.is_empty() {
        eprintln!(
            "{} items were kept with a partial search even among kept items (review them; --json lists all): {}",
            s.kept_unresolved.len(),
            few(&s.kept_unresolved)
        );
    }
    if let Some(i) = &s.index {
        eprintln!(
            "index {}: {} items before, {} after ({} runs); loaded in {:.2}s, saved in {:.2}s",
            i.folder, i.items_before, i.items_after, i.runs, i.load_s, i.save_s
        );
    }
    let t = &s.timings;
    eprintln!(
        "time: read {:.2}s, parse+fingerprint {:.2}s, index {:.2}s, verify {:.2}s, output {:.2}s",
        t.read_s, t.fingerprint_s, t.index_s, t.verify_s, t.output_s
    );
}
