//! `neardup`: near-duplicate detection for datasets, document folders and services.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod args;
mod dedup;
mod eval;
mod gen;
mod jsonl;
mod pipeline;
mod progress;
mod scan;
mod serve;
mod tune;
mod unionfind;

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
    /// Deduplicate a JSONL dataset: verified pairs, clusters, kept records, summary.
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
    Serve(serve::ServeArgs),
}

/// An error that should exit with status 2 (bad usage or configuration).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

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
        Command::Serve(a) => serve::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("neardup: error: {e:#}");
            let usage = e.downcast_ref::<UsageError>().is_some() || e.downcast_ref::<neardup_core::Error>().is_some();
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}

/// Writes `text` and a newline to stdout; a closed pipe (`| head`) is not an error.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Sets the rayon pool size once.
pub fn init_threads(threads: Option<usize>) -> anyhow::Result<()> {
    if let Some(n) = threads {
        if n == 0 {
            return Err(UsageError("--threads must be at least 1".into()).into());
        }
        rayon::ThreadPoolBuilder::new().num_threads(n).build_global()?;
    }
    Ok(())
}
