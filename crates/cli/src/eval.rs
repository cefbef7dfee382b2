//! `neardup eval`: the fast path against the exact all-pairs oracle.

use std::collections::HashSet;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use neardup_core::all_pairs;
use neardup_core::{
    accuracy, decision_accuracy, greedy_drops, percentiles, recall_by_bin, recall_by_density, Accuracy, BinRecall,
    DecisionAccuracy, DensityRecall,
};
use neardup_core::{Config, Fingerprinter, MemoryIndex};

use crate::args::{InputArgs, PipelineArgs};
use crate::pipeline::Batch;
use crate::report::{ParamsOut, Percentiles};

/// Measure candidate recall by exact-Jaccard cohort, and decision recall and
/// precision at several thresholds, against the exact all-pairs oracle.
#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    pipeline: PipelineArgs,
    /// Thresholds at which to report decision recall and precision (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "0.8,0.85,0.9,0.95")]
    thresholds: Vec<f64>,
    /// Run the seed document's A/B/C demonstration instead of reading input.
    #[arg(long)]
    demo: bool,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, serde::Serialize)]
struct Report {
    records: usize,
    params: ParamsOut,
    fast_path_s: f64,
    oracle_s: f64,
    oracle_pairs: usize,
    candidate_pairs: usize,
    candidate_recall_by_bin: Vec<BinRecall>,
    decisions: Vec<Accuracy>,
    /// Verified-pair recall at the threshold by the later item's number of
    /// earlier near duplicates (≤ 10, 11–100, > 100).
    pair_recall_by_density: Vec<DensityRecall>,
    /// Keep/drop decisions against the greedy rule applied to the oracle.
    greedy_decisions: DecisionAccuracy,
    /// Queries whose candidates were capped or read a hot bucket partially.
    capped_queries: u64,
    /// Queries capped inside the near duplicates (pairs possibly incomplete).
    saturated_queries: u64,
    candidates_per_query: Percentiles,
}

pub fn run(a: EvalArgs) -> anyhow::Result<ExitCode> {
    if a.demo {
        return demo();
    }
    crate::usage::init_threads(a.input.threads)?;
    let params = a.pipeline.config()?.resolve()?;
    let base_t = params.threshold();
    let inputs = a.input.expand()?;
    let opts = a.input.read_options();
    let mut batch = Batch::new(params.clone(), &a.input.text_field, &a.input.id_field)?;
    let sources = crate::input::Sources::for_inputs(&inputs);
    batch.sources = sources.clone();
    batch.candidate_pairs = Some(Vec::new());
    let started = Instant::now();
    let mut rejects = Vec::new();
    let mut reported = Vec::new();
    let (mut dropped, mut capped, mut saturated) = (Vec::new(), 0u64, 0u64);
    batch.run(&inputs, &opts, &mut rejects, |_, _, outcomes| {
        for o in outcomes {
            reported.extend(o.decided.matches.iter().map(|m| (m.id.min(o.id), m.id.max(o.id), m.score)));
            dropped.push(!o.decided.kept);
            capped += u64::from(o.decided.capped);
            saturated += u64::from(o.decided.saturated);
        }
        Ok(())
    })?;
    let fast_path_s = started.elapsed().as_secs_f64();
    // In input order, as `dedup` reports them: a chunk's reading rejects
    // come before its parsing rejects, and chunk sizes vary.
    rejects.sort_by_key(|r| r.line);
    if let Some(s) = &sources {
        s.place_rejects(&mut rejects);
    }
    for r in &rejects {
        eprintln!("neardup: {}: {}", r.place(), r.reason);
    }
    let n = batch.ids.len() as u32;
    let sets: Vec<Vec<u64>> = (0..n).map(|i| batch.index.features(i).unwrap_or(&[]).to_vec()).collect();
    let lowest = a.thresholds.iter().copied().fold(base_t, f64::min);
    let t = Instant::now();
    let truth = all_pairs(&sets, lowest);
    let oracle_s = t.elapsed().as_secs_f64();
    let candidates: HashSet<(u32, u32)> =
        batch.candidate_pairs.take().unwrap_or_default().into_iter().map(|(x, y)| (x.min(y), x.max(y))).collect();
    let mut edges: Vec<f64> = vec![lowest];
    for e in [0.85, 0.9, 0.95, 0.99, 1.0] {
        if e > lowest {
            edges.push(e);
        }
    }
    let mut thresholds = a.thresholds.clone();
    thresholds.retain(|&t| t >= base_t);
    thresholds.sort_by(f64::total_cmp);
    let report = Report {
        records: n as usize,
        params: ParamsOut::of(&params),
        fast_path_s,
        oracle_s,
        oracle_pairs: truth.len(),
        candidate_pairs: candidates.len(),
        candidate_recall_by_bin: recall_by_bin(&truth, &candidates, &edges),
        decisions: thresholds.iter().map(|&t| accuracy(&truth, &reported, t)).collect(),
        pair_recall_by_density: {
            let found: HashSet<(u32, u32)> = reported.iter().map(|p| (p.0, p.1)).collect();
            recall_by_density(&truth, &found, base_t, &[10, 100])
        },
        greedy_decisions: decision_accuracy(&greedy_drops(n as usize, &truth, base_t), &dropped),
        capped_queries: capped,
        saturated_queries: saturated,
        candidates_per_query: {
            let (p50, p99, max) = percentiles(&mut batch.candidate_counts);
            Percentiles { p50, p99, max }
        },
    };
    if a.json {
        crate::output::print_stdout(&serde_json::to_string_pretty(&report)?)?;
    } else {
        print_report(&report);
    }
    Ok(if rejects.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(3) })
}

fn print_report(r: &Report) {
    println!(
        "{} records; fast path {:.2}s, oracle {:.2}s; {} bands x {} rows, threshold {}",
        r.records, r.fast_path_s, r.oracle_s, r.params.bands, r.params.rows, r.params.threshold
    );
    println!("\ncandidate recall by exact Jaccard (oracle pairs found among LSH candidates):");
    println!("  {:<14} {:>10} {:>10} {:>9}", "J bin", "oracle", "found", "recall");
    for b in &r.candidate_recall_by_bin {
        println!(
            "  [{:.2}, {:.2}{} {:>10} {:>10} {:>8.4}%",
            b.lo,
            b.hi,
            if b.hi >= 1.0 { "]" } else { ")" },
            b.truth,
            b.found,
            b.recall * 100.0
        );
    }
    println!("\nverified decisions:");
    println!(
        "  {:<10} {:>10} {:>10} {:>10} {:>9} {:>10}",
        "threshold", "oracle", "reported", "correct", "recall", "precision"
    );
    for d in &r.decisions {
        println!(
            "  {:<10} {:>10} {:>10} {:>10} {:>8.4}% {:>9.4}%",
            d.threshold,
            d.truth,
            d.reported,
            d.true_positives,
            d.recall * 100.0,
            d.precision * 100.0
        );
    }
    println!("\nverified-pair recall at {} by the later item's earlier near duplicates (oracle):", r.params.threshold);
    println!("  {:<14} {:>10} {:>10} {:>9}", "partners", "oracle", "found", "recall");
    for d in &r.pair_recall_by_density {
        let range = if d.max_partners == usize::MAX {
            format!("> {}", d.min_partners - 1)
        } else {
            format!("{}..={}", d.min_partners, d.max_partners)
        };
        println!("  {:<14} {:>10} {:>10} {:>8.4}%", range, d.truth, d.found, d.recall * 100.0);
    }
    let g = &r.greedy_decisions;
    println!(
        "\ndecisions vs the greedy rule on oracle pairs at {}: should drop {}, dropped {}, agreed {}; \
         recall {:.4}%, precision {:.4}%",
        r.params.threshold,
        g.truth,
        g.dropped,
        g.agreed,
        g.recall * 100.0,
        g.precision * 100.0
    );
    let c = &r.candidates_per_query;
    println!("\ncandidates per query: p50 {}, p99 {}, max {}", c.p50, c.p99, c.max);
    println!(
        "capped queries: {} (candidates ranked by estimated similarity before the cap); saturated (cap cut \
         inside the near duplicates): {}",
        r.capped_queries, r.saturated_queries
    );
}

/// The seed document's demonstration, step by step.
fn demo() -> anyhow::Result<ExitCode> {
    let params = Config::seed_example().resolve()?;
    let c = params.config();
    println!(
        "config: normalizer {}, word {}-grams, {} MinHash values in {} bands x {} rows, seed {}, threshold {}",
        c.normalizer.version(),
        c.shingle_width,
        c.num_perm,
        params.lsh().bands,
        params.lsh().rows,
        c.seed,
        c.threshold
    );
    let mut fpr = Fingerprinter::new(params.clone())?;
    let mut index = MemoryIndex::new(params.clone());
    let docs = [
        ("A", "red fox runs very fast"),
        ("B", "red fox runs very fast today"),
        ("C", "database backup completed nightly"),
    ];
    let mut names = Vec::new();
    let mut ok = true;
    for (name, text) in docs {
        let fp = fpr.fingerprint(text);
        let normalized = c.normalizer.normalize(text);
        let words: Vec<&str> = normalized.split(' ').collect();
        let shingles: Vec<String> = words.windows(2).map(|w| w.join(" ")).collect();
        println!("\n{name}: {text:?}");
        println!("  normalized {normalized:?}, content hash {}", fp.content_hash.to_hex());
        println!("  shingles {shingles:?}");
        let cands = index.candidates(&fp, None)?;
        let matches = index.verify(&fp, &cands.ids, c.threshold);
        let named: Vec<String> =
            matches.iter().map(|m| format!("{} (exact J = {})", names[m.id as usize], m.score)).collect();
        println!(
            "  candidates {:?} -> verified {:?}",
            cands.ids.iter().map(|c| names[c.id as usize]).collect::<Vec<_>>(),
            named
        );
        match name {
            "B" => ok &= matches.first().is_some_and(|m| names[m.id as usize] == "A" && m.score == 0.8),
            _ => ok &= matches.is_empty(),
        }
        index.insert(fp)?;
        names.push(name);
    }
    let bad = Config { num_perm: 31, bands: Some(8), rows: None, ..Config::seed_example() };
    match bad.resolve() {
        Err(e) => println!("\nincompatible layout (31 values, 8 bands) rejected: {e}"),
        Ok(_) => ok = false,
    }
    println!("duplicate id: `neardup dedup` rejects a repeated item id with its line number (exit status 3)");
    println!("\n{}", if ok { "demonstration passed" } else { "DEMONSTRATION FAILED" });
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
