//! `neardup`: near-duplicate detection for datasets, document folders and services.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::usage::UsageError;
use neardup_batch::{chunk, input, jsonl, output, pipeline, remote, report};

/// mimalloc, huge pages off: measured against glibc's allocator in
/// ARCHITECTURE.md ("The binary allocates with mimalloc").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `eprintln!` that cannot panic ([`neardup_batch::eprintln`]), for every
/// module below.
macro_rules! eprintln {
    ($($arg:tt)*) => { neardup_batch::eprintln!($($arg)*) };
}

mod args;
mod bench;
mod dedup;
mod eval;
mod gen;
mod scan;
mod serve;
mod tune;
mod usage;

/// Near-duplicate detection: MinHash-LSH candidates, exact Jaccard verification.
///
/// Exit status: 0 success; 1 error; 2 usage or configuration error;
/// 3 finished, but some input records were rejected (each reported with its line).
#[derive(Debug, Parser)]
#[command(name = "neardup", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Deduplicate a dataset (JSONL, zstd/gzip JSONL, Parquet; optionally against a saved index):
    /// verified pairs, clusters, kept or annotated records, summary.
    Dedup(dedup::DedupArgs),
    /// Recall and precision of the fast path against the exact all-pairs oracle.
    Eval(eval::EvalArgs),
    /// Generate a labelled synthetic corpus with controlled mutations.
    Gen(gen::GenArgs),
    /// Choose LSH bands and rows for a threshold and recall target; print or draw the S-curve.
    Tune(tune::TuneArgs),
    /// Scan folders of documents (PDF, HTML, DOCX, Markdown, text) for duplicate content.
    Scan(scan::ScanArgs),
    /// Show each scanned document's verdict, closest match and scores.
    Report(scan::ReportArgs),
    /// Write kept documents as Markdown; skip identical ones, flag similar ones.
    Export(scan::ExportArgs),
    /// Serve the multi-tenant HTTP deduplication service.
    Serve(Box<serve::ServeArgs>),
    /// Measure throughput against the floor any tool must pay.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dedup(a) => dedup::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Gen(a) => gen::run(a),
        Command::Tune(a) => tune::run(a),
        Command::Scan(a) => scan::run_scan(a),
        Command::Report(a) => scan::run_report(a),
        Command::Export(a) => scan::run_export(a),
        Command::Serve(a) => serve::run(*a),
        Command::Bench(a) => bench::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("neardup: error: {e:#}");
            if jsonl::is_unreadable_mapping(&e) {
                eprintln!("neardup: {}", jsonl::UNREADABLE);
            }
            let usage = e.downcast_ref::<UsageError>().is_some() || e.downcast_ref::<neardup_core::Error>().is_some();
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}
