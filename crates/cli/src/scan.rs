//! `neardup scan`, `neardup report` and `neardup export`: content-level
//! duplicate detection for folders of documents (the batch mode of
//! docs/scan.md), on top of `neardup-docs`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use neardup_docs::{ConfigLayer, DiscoverOptions, ErrorKind, ParseCache, Phase, ScanOptions, Store};

use crate::output::print_stdout;
use crate::usage::UsageError;

/// Where scan state lives.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// State folder: the parse cache is DIR/cache/, the fingerprint store
    /// DIR/dedup/fingerprints.json.
    #[arg(long, value_name = "DIR", default_value = ".neardup")]
    pub store: PathBuf,
}

/// Every `[dedup]` key of neardup.toml as a flag ([`ConfigLayer`] is the
/// one definition of them). Flags beat environment variables
/// (NEARDUP_DEDUP_*, or the KOMP_DEDUP_* aliases), which beat the file.
#[derive(Debug, Args)]
pub struct DedupFlags {
    /// Config file with a [dedup] section [default: ./neardup.toml if present].
    #[arg(long, value_name = "FILE", help_heading = "Configuration")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub layer: ConfigLayer,
}

impl DedupFlags {
    /// neardup.toml, then the environment, then the flags.
    fn resolve(&self) -> anyhow::Result<neardup_docs::ScanSettings> {
        let file = match &self.config {
            Some(path) => ConfigLayer::from_toml_file(path).map_err(usage)?,
            None if Path::new("neardup.toml").is_file() => {
                ConfigLayer::from_toml_file(Path::new("neardup.toml")).map_err(usage)?
            }
            None => ConfigLayer::default(),
        };
        let env = ConfigLayer::from_env(|k| std::env::var(k).ok()).map_err(usage)?;
        file.merge(env).merge(self.layer.clone()).resolve().map_err(usage)
    }
}

fn usage(e: neardup_docs::Error) -> anyhow::Error {
    UsageError(e.to_string()).into()
}

/// A docs error: configuration problems exit 2, the rest 1.
fn docs_error(e: neardup_docs::Error) -> anyhow::Error {
    match e.kind() {
        ErrorKind::Config { .. } => usage(e),
        _ => anyhow::Error::new(e),
    }
}

/// Scan files and folders for duplicate content (PDF, HTML, DOCX, Markdown, text).
///
/// Phases: parse every file (cached by SHA-256 under STORE/cache), fingerprint
/// the new documents (MinHash, and embeddings when --model is set), then one
/// comparison pass: each new document against every stored document and the
/// rest of the batch. Each matcher's raw score is calibrated onto one scale
/// (docs/scan.md); verdicts: identical (score >= threshold_identical, or
/// the same normalized text) means a copy of an earlier document; similar
/// (>= threshold_similar) a possible duplicate; different otherwise. Results
/// go to STORE/dedup/fingerprints.json.
///
/// With --labels FILE (pairs labelled format, revision, sibling, unrelated,
/// as bench/corpus/scan_pairs.py writes them), the scan also reports verdict
/// precision and recall per class and matcher, and fits a calibration.
///
/// The `dedup N/TOTAL` bar counts pairs: N×M + N×(N−1)÷2 when embeddings run
/// (every pair is scored); with MinHash alone, only the candidate pairs LSH
/// proposes are verified, and TOTAL is their real number.
///
/// Exit status: 0 ok; 1 error; 2 usage or configuration error; 3 finished,
/// but some files were skipped (each reported on stderr with its reason).
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Files and folders to scan (folders are walked; .gitignore, .ignore and
    /// .neardupignore are honoured). Only regular files are read: a FIFO,
    /// socket or device named here is skipped and reported, one inside a
    /// folder is left out.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub dedup: DedupFlags,
    /// Walk ignored files too.
    #[arg(long)]
    pub no_ignore: bool,
    /// Walk hidden files and folders too.
    #[arg(long)]
    pub hidden: bool,
    /// Worker threads for parsing and fingerprinting [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the summary (with timings and documents/s per phase) as JSON on stdout.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// No progress bars and no human summary.
    #[arg(short, long, help_heading = "Output")]
    pub quiet: bool,
    /// Labelled pairs to measure verdicts on (tab-separated: class, detail, path a, path b; paths relative
    /// to FILE's folder).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub labels: Option<PathBuf>,
}

/// One indicatif bar per phase, drawn only on a terminal.
struct Bars {
    enabled: bool,
    current: Mutex<Option<ProgressBar>>,
}

impl neardup_docs::Progress for Bars {
    fn start(&self, phase: Phase, total: u64) {
        let pb = ProgressBar::new(total);
        if !self.enabled {
            pb.set_draw_target(ProgressDrawTarget::hidden());
        } else {
            let style = ProgressStyle::with_template("{prefix} {pos}/{len} [{bar:30}] {per_sec} eta {eta}")
                .expect("static template")
                .progress_chars("=> ");
            pb.set_style(style);
            pb.set_prefix(phase.label());
        }
        if let Ok(mut cur) = self.current.lock() {
            *cur = Some(pb);
        }
    }
    fn advance(&self, _phase: Phase, n: u64) {
        if let Ok(cur) = self.current.lock() {
            if let Some(pb) = cur.as_ref() {
                pb.inc(n);
            }
        }
    }
    fn finish(&self, _phase: Phase) {
        if let Ok(mut cur) = self.current.lock() {
            if let Some(pb) = cur.take() {
                pb.finish_and_clear();
            }
        }
    }
}

#[derive(serde::Serialize)]
struct ScanOut<'a> {
    #[serde(flatten)]
    summary: &'a neardup_docs::ScanSummary,
    /// Documents per second per phase (files for parse, new documents for
    /// fingerprint and compare; documents embedded for embedding).
    docs_per_s: Rates,
    /// Model input tokens embedded per second, when the provider counts them.
    embedding_tokens_per_s: Option<f64>,
    /// Verdicts on the labelled pairs of --labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    accuracy: Option<neardup_docs::Accuracy>,
}

#[derive(serde::Serialize)]
struct Rates {
    parse: f64,
    fingerprint: f64,
    compare: f64,
    embedding: f64,
}

fn rate(n: usize, s: f64) -> f64 {
    if s > 0.0 {
        (n as f64 / s * 10.0).round() / 10.0
    } else {
        0.0
    }
}

pub fn run_scan(args: ScanArgs) -> anyhow::Result<ExitCode> {
    crate::usage::init_threads(args.threads)?;
    let settings = args.dedup.resolve()?;
    let mut options = ScanOptions::new(settings, &args.store.store);
    let mut discover = DiscoverOptions::default();
    discover.respect_ignore_files = !args.no_ignore;
    discover.include_hidden = args.hidden;
    options.discover = discover;
    let bars = Bars { enabled: !args.quiet && std::io::stderr().is_terminal(), current: Mutex::new(None) };
    let labels = match &args.labels {
        Some(path) => Some(neardup_docs::read_labels(path).map_err(docs_error)?),
        None => None,
    };
    let summary = neardup_docs::scan(&args.paths, &options, &bars).map_err(docs_error)?;
    let accuracy = match labels {
        Some(labels) => {
            let store = load_store(&args.store.store)?;
            Some(neardup_docs::evaluate_labels(&store, &labels, &options.settings).map_err(docs_error)?)
        }
        None => None,
    };

    for note in &summary.notes {
        eprintln!("neardup: note: {note}");
    }
    for s in &summary.skipped {
        eprintln!("neardup: skipped {}: {}", s.path.display(), s.reason);
    }
    for d in &summary.dropped {
        eprintln!("neardup: dropped from the store (text no longer available): {d}");
    }
    let t = &summary.timings;
    if args.json {
        let out = ScanOut {
            summary: &summary,
            docs_per_s: Rates {
                parse: rate(summary.discovered, t.parse_s),
                fingerprint: rate(summary.new_documents, t.fingerprint_s),
                compare: rate(summary.new_documents, t.compare_s),
                embedding: rate(summary.embedded, summary.embedding_s),
            },
            embedding_tokens_per_s: summary.embedded_tokens.map(|n| rate(n as usize, summary.embedding_s)),
            accuracy,
        };
        print_stdout(&serde_json::to_string_pretty(&out)?)?;
    } else if !args.quiet {
        let mut lines = vec![format!(
            "scanned {} files: {} parsed, {} from cache, {} unchanged, {} skipped",
            summary.discovered,
            summary.parsed,
            summary.cache_hits,
            summary.unchanged,
            summary.skipped.len()
        )];
        if let Some(why) = &summary.rebuilt {
            lines.push(format!(
                "store rebuilt ({why}): {} documents from the parse cache, {} re-parsed",
                summary.rebuilt_from_cache, summary.reparsed_for_rebuild
            ));
        }
        lines.push(format!(
            "compared {} new against {} stored documents with {}: {} comparisons ({})",
            summary.new_documents,
            summary.stored_documents,
            summary.matchers,
            summary.comparisons,
            summary.comparison_rule
        ));
        let v = &summary.verdicts;
        lines.push(format!(
            "new documents: {} identical, {} similar, {} different",
            v.identical, v.similar, v.different
        ));
        if summary.embedded > 0 {
            let tokens = summary
                .embedded_tokens
                .map(|n| format!(", {} tokens/s", rate(n as usize, summary.embedding_s)))
                .unwrap_or_default();
            let boilerplate = match summary.embedded_without_boilerplate {
                0 => String::new(),
                n => format!(" ({n} without their boilerplate)"),
            };
            lines.push(format!(
                "embedded {} documents{boilerplate} ({} chunks) in {:.1} s: {} documents/s{tokens}; {} reused",
                summary.embedded,
                summary.embedded_chunks,
                summary.embedding_s,
                rate(summary.embedded, summary.embedding_s),
                summary.embeddings_reused
            ));
        }
        if !summary.back_updated.is_empty() {
            lines.push(format!("updated closest match of: {}", summary.back_updated.join(", ")));
        }
        if let Some(a) = &accuracy {
            lines.push(render_accuracy(a));
        }
        lines.push(format!("store: {} (see `neardup report`)", summary.store.display()));
        print_stdout(&lines.join("\n"))?;
    }
    Ok(if summary.skipped.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(3) })
}

/// The --labels results as text: one table per matcher.
fn render_accuracy(a: &neardup_docs::Accuracy) -> String {
    let pct =
        |n: usize, d: usize| if d == 0 { "-".to_owned() } else { format!("{:.1} %", 100.0 * n as f64 / d as f64) };
    let mut out = format!(
        "labelled pairs: {} ({} missing from the store); model: {}; calibration: minhash {}, embedding {}\n",
        a.labels,
        a.missing,
        a.model.as_deref().unwrap_or("none"),
        a.minhash_calibration,
        a.embedding_calibration.as_deref().unwrap_or("-")
    );
    for m in &a.matchers {
        out.push_str(&format!(
            "{}: precision {:.3}, recall {:.3}; sibling pages called duplicates: {} of {} ({})\n",
            m.matcher,
            m.precision,
            m.recall,
            m.sibling_pages_called,
            m.sibling_pages,
            pct(m.sibling_pages_called, m.sibling_pages)
        ));
        for c in &m.classes {
            out.push_str(&format!(
                "  {:<16} target {:<9} pairs {:>4}  identical {:>4}  similar {:>4}  different {:>4}  found {}\n",
                c.class,
                c.target,
                c.pairs,
                c.identical,
                c.similar,
                c.different,
                pct(c.identical + c.similar, c.pairs)
            ));
        }
    }
    for f in &a.fitted {
        out.push_str(&format!(
            "fitted {} calibration: similar at raw {}, identical at raw {}{}\n",
            f.matcher,
            f.similar_knot.map_or("-".to_owned(), |x| format!("{x:.3}")),
            f.identical_knot.map_or("-".to_owned(), |x| format!("{x:.3}")),
            f.knots.as_ref().map(|k| format!(" (\"{k}\")")).unwrap_or_default()
        ));
    }
    out.trim_end().to_owned()
}

fn load_store(root: &Path) -> anyhow::Result<Store> {
    let path = Store::path_in(root);
    Store::load(&path)
        .map_err(docs_error)?
        .with_context(|| format!("no fingerprint store at {}; run `neardup scan` first", path.display()))
}

/// Show each scanned document's verdict, closest match, scores and method.
///
/// Reads STORE/dedup/fingerprints.json. For an identical document the kept
/// original (the document exported in its place) is shown as well.
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print the rows as a JSON array.
    #[arg(long)]
    pub json: bool,
}

pub fn run_report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let store = load_store(&args.store.store)?;
    let rows = neardup_docs::report_rows(&store);
    if args.json {
        print_stdout(&serde_json::to_string_pretty(&rows)?)?;
    } else {
        print_stdout(neardup_docs::render_table(&rows).trim_end())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Write every kept document as Markdown: OUT_DIR/slug.md.
///
/// Identical documents are skipped and the kept original is named (on
/// stdout and in OUT_DIR/_index.md). Similar documents start with the
/// callout `> [!warning] Possible duplicate` / `> This document is similar
/// to **slug** (score=0.83).`
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Output folder (created if missing).
    #[arg(value_name = "OUT_DIR")]
    pub out_dir: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run_export(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let store = load_store(&args.store.store)?;
    let cache = ParseCache::open(args.store.store.join("cache")).map_err(docs_error)?;
    let summary = neardup_docs::export(&store, &cache, &args.out_dir).map_err(docs_error)?;
    if args.json {
        print_stdout(&serde_json::to_string_pretty(&summary)?)?;
    } else {
        let mut lines = vec![format!(
            "wrote {} pages ({} with a duplicate warning) to {}",
            summary.written.len(),
            summary.with_warning.len(),
            args.out_dir.display()
        )];
        for s in &summary.skipped {
            lines.push(format!("skipped {}: {}", s.slug, s.reason));
        }
        lines.push(format!("index: {}", summary.index.display()));
        print_stdout(&lines.join("\n"))?;
    }
    let lost = summary.skipped.iter().any(|s| s.kept_original.is_none() && s.reason.starts_with("text unavailable"));
    Ok(if lost { ExitCode::from(3) } else { ExitCode::SUCCESS })
}
