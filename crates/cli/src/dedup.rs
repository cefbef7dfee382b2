//! `neardup dedup`: deduplicate datasets of JSONL (plain, zstd, gzip) and
//! Parquet files, optionally against a saved index of earlier runs. The run
//! itself is the batch library's ([`neardup_batch::dedup`]); this module
//! is its flags and its summary on a terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use neardup_batch::{dedup, Summary};
use neardup_core::Keep;

use crate::args::{InputArgs, PipelineArgs};
use crate::usage::UsageError;

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

impl From<ReportFormat> for dedup::ReportFormat {
    fn from(f: ReportFormat) -> Self {
        match f {
            ReportFormat::Text => dedup::ReportFormat::Text,
            ReportFormat::Parquet => dedup::ReportFormat::Parquet,
        }
    }
}

pub fn run(a: DedupArgs) -> anyhow::Result<ExitCode> {
    crate::usage::init_threads(a.input.threads)?;
    let params = a.pipeline.config()?.resolve()?;
    if a.json && a.output.as_deref() == Some("-") {
        return Err(UsageError("--json and --output - both want stdout; write one to a file".into()).into());
    }
    let options = dedup::Options {
        inputs: a.input.expand()?,
        read: a.input.read_options(),
        params,
        keep: a.keep.clone(),
        output: a.output.clone(),
        annotate: a.annotate,
        pairs: a.pairs.clone(),
        clusters: a.clusters.clone(),
        dropped: a.dropped.clone(),
        format: a.format.map(Into::into),
        index: a.index.clone(),
        reference: a.reference.clone(),
        memory_limit: a.memory_limit.clone(),
        work_dir: a.work_dir.clone(),
        progress: !a.quiet,
        notes: !a.quiet && !a.json,
        exits_after: true,
    };
    let summary = dedup::run(&options)?;
    if let (Some(field), Some(missing)) = (a.keep.field(), summary.keep_missing) {
        if summary.records > 0 && missing == summary.records {
            eprintln!(
                "neardup: warning: no record has a value for {field:?} (--keep {}): every record was decided in \
                 input order",
                a.keep
            );
        } else if missing > 0 && !a.quiet && !a.json {
            eprintln!(
                "neardup: {} of {} records have no value for {field:?}; they were decided after the others",
                missing, summary.records
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
