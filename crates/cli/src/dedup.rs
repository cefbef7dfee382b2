//! `neardup dedup`: deduplicate a JSONL dataset.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use crate::args::{InputArgs, PipelineArgs};
use crate::jsonl::{open_inputs, Reject};
use crate::output::tsv_field;
use crate::pipeline::{Batch, Timings};
use crate::report::{ParamsOut, Percentiles};

/// Deduplicate JSONL records.
///
/// Every LSH candidate is verified with exact Jaccard on canonical shingle
/// sets; pairs at or above --threshold are near duplicates. An item is
/// dropped only when it matches an earlier kept item. Over-cap candidate
/// lists and over-limit items are reported, never dropped silently.
#[derive(Debug, Args)]
pub struct DedupArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Write kept records (original lines, input order) here; `-` for stdout.
    #[arg(short, long, help_heading = "Output")]
    pub output: Option<String>,
    /// Write verified pairs as TSV `left<TAB>right<TAB>score` (exact Jaccard);
    /// a backslash, tab, newline or carriage return in an id is written
    /// `\\`, `\t`, `\n`, `\r`.
    #[arg(long, help_heading = "Output")]
    pub pairs: Option<String>,
    /// Write clusters as JSONL `{"cluster", "size", "members", "kept"}`.
    #[arg(long, help_heading = "Output")]
    pub clusters: Option<String>,
    /// Write dropped items as TSV `item<TAB>kept_item<TAB>score` (ids escaped
    /// as in --pairs): each dropped item with the kept item it duplicates.
    #[arg(long, help_heading = "Output")]
    pub dropped: Option<String>,
    /// Print the summary as JSON on stdout.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// No progress bar and no human summary.
    #[arg(short, long, help_heading = "Output")]
    pub quiet: bool,
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
    /// Per input, when the run reads several.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    inputs: Vec<InputSummary>,
}

/// What one of several inputs held and what became of it.
#[derive(Debug, Default, serde::Serialize)]
struct InputSummary {
    file: String,
    records: u64,
    kept: u64,
    dropped: u64,
    rejected: u64,
}

fn create(path: &str) -> anyhow::Result<Box<dyn Write>> {
    Ok(if path == "-" {
        Box::new(BufWriter::new(io::stdout().lock()))
    } else {
        Box::new(BufWriter::new(File::create(path).with_context(|| format!("cannot create {path}"))?))
    })
}

pub fn run(a: DedupArgs) -> anyhow::Result<ExitCode> {
    crate::usage::init_threads(a.input.threads)?;
    let params = a.pipeline.config()?.resolve()?;
    if a.json && a.output.as_deref() == Some("-") {
        return Err(
            crate::usage::UsageError("--json and --output - both want stdout; write one to a file".into()).into()
        );
    }
    let (reader, size, sources) = open_inputs(&a.input.inputs)?;
    let mut kept_out = a.output.as_deref().map(create).transpose()?;
    let mut pairs_out = a.pairs.as_deref().map(create).transpose()?;
    let mut dropped_out = a.dropped.as_deref().map(create).transpose()?;
    let mut batch = Batch::new(params.clone(), &a.input.text_field, &a.input.id_field)?;
    batch.sources = sources.clone();
    let bar = crate::progress::bar(size, true, "dedup", !a.quiet);
    let started = Instant::now();
    let mut rejects = Vec::new();
    let (mut degraded, mut over_cap) = (Vec::new(), Vec::new());
    let (mut kept, mut dropped, mut pairs, mut capped_queries, mut saturated) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut output_s = 0.0;
    let mut per_input: std::collections::BTreeMap<String, InputSummary> = Default::default();
    let read_s = batch.run(reader, a.input.max_line_bytes, &mut rejects, |batch, lines, outcomes| {
        let t = Instant::now();
        let mut by_line = lines.iter().peekable();
        for o in outcomes {
            if let Some((file, _)) = sources.as_ref().and_then(|s| s.locate(o.line)) {
                let entry = per_input.entry(file).or_default();
                entry.records += 1;
                entry.kept += u64::from(o.kept);
                entry.dropped += u64::from(!o.kept);
            }
            if o.kept {
                kept += 1;
                if let Some(w) = kept_out.as_mut() {
                    while by_line.next_if(|l| l.number < o.line).is_some() {}
                    let line = by_line.next().expect("outcome lines come from this chunk, in order");
                    w.write_all(&line.bytes)?;
                    w.write_all(b"\n")?;
                }
            } else {
                dropped += 1;
                if let (Some(w), Some(m)) = (dropped_out.as_mut(), o.duplicate_of) {
                    let (a, b) = (tsv_field(&batch.ids[o.id as usize]), tsv_field(&batch.ids[m.id as usize]));
                    writeln!(w, "{a}\t{b}\t{}", m.score)?;
                }
            }
            if o.degraded {
                degraded.push(batch.ids[o.id as usize].clone());
            }
            capped_queries += u64::from(o.capped);
            saturated += u64::from(o.saturated);
            // A kept item whose search was cut even among kept items may
            // still have a duplicate that was not examined.
            if o.kept && o.unresolved {
                over_cap.push(batch.ids[o.id as usize].clone());
            }
            for m in &o.matches {
                pairs += 1;
                if let Some(w) = pairs_out.as_mut() {
                    let (a, b) = (tsv_field(&batch.ids[m.id as usize]), tsv_field(&batch.ids[o.id as usize]));
                    writeln!(w, "{a}\t{b}\t{}", m.score)?;
                }
            }
        }
        output_s += t.elapsed().as_secs_f64();
        bar.inc(lines.iter().map(|l| l.bytes.len() as u64 + 1).sum());
        Ok(())
    })?;
    bar.finish_and_clear();
    batch.timings.read_s = read_s;
    batch.timings.output_s = output_s;
    let clusters = batch.clusters();
    if let Some(path) = &a.clusters {
        let mut w = create(path)?;
        for (n, (members, kept_ids)) in clusters.iter().enumerate() {
            let name = |ids: &[u32]| ids.iter().map(|&i| batch.ids[i as usize].as_str()).collect::<Vec<_>>();
            let row = serde_json::json!({
                "cluster": n,
                "size": members.len(),
                "members": name(members),
                "kept": name(kept_ids),
            });
            serde_json::to_writer(&mut w, &row)?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
    }
    if let Some(w) = kept_out.as_mut() {
        w.flush()?;
    }
    for w in [pairs_out.as_mut(), dropped_out.as_mut()].into_iter().flatten() {
        w.flush()?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut counts = std::mem::take(&mut batch.candidate_counts);
    let (p50, p99, max) = neardup_core::eval::percentiles(&mut counts);
    rejects.sort_by_key(|r| r.line);
    if let Some(s) = &sources {
        s.place_rejects(&mut rejects);
        for r in &rejects {
            if let Some(f) = &r.file {
                per_input.entry(f.clone()).or_default().rejected += 1;
            }
        }
    }
    // In reading order.
    let inputs: Vec<InputSummary> = match &sources {
        Some(s) => s
            .files()
            .into_iter()
            .map(|f| {
                let mut entry = per_input.remove(&f).unwrap_or_default();
                entry.file = f;
                entry
            })
            .collect(),
        None => Vec::new(),
    };
    let summary = Summary {
        records: kept + dropped,
        bytes: batch.bytes,
        seconds,
        mb_per_s: batch.bytes as f64 / 1e6 / seconds.max(1e-9),
        kept,
        dropped,
        verified_pairs: pairs,
        clusters: clusters.len() as u64,
        rejected: rejects,
        degraded,
        capped_queries,
        saturated_queries: saturated,
        kept_unresolved: over_cap,
        candidates_per_query: Percentiles { p50, p99, max },
        params: ParamsOut::of(&params),
        params_max_candidates: params.config().max_candidates,
        timings: batch.timings.clone(),
        inputs,
    };
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
    let t = &s.timings;
    eprintln!(
        "time: read {:.2}s, parse+fingerprint {:.2}s, index {:.2}s, verify {:.2}s, output {:.2}s",
        t.read_s, t.fingerprint_s, t.index_s, t.verify_s, t.output_s
    );
}
