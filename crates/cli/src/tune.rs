//! `neardup tune`: LSH parameters for a threshold and a recall target.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use neardup_core::LshParams;
use neardup_core::{choose_lsh_params, optimal_weighted, s_curve_svg};

/// Choose (bands, rows) so that pairs at the threshold become candidates with
/// at least the recall target, with the fewest false candidates below it.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Jaccard threshold.
    #[arg(long, default_value_t = 0.8)]
    threshold: f64,
    /// Candidate probability required at the threshold.
    #[arg(long, default_value_t = neardup_core::DEFAULT_RECALL_TARGET)]
    recall_target: f64,
    /// Signature length available.
    #[arg(long, default_value_t = 128)]
    num_perm: u32,
    /// Evaluate these bands instead of choosing (with --rows).
    #[arg(long, requires = "rows")]
    bands: Option<u32>,
    /// Evaluate these rows instead of choosing (with --bands).
    #[arg(long, requires = "bands")]
    rows: Option<u32>,
    /// Write the S-curve as SVG to this file.
    #[arg(long)]
    svg: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

const POINTS: [f64; 11] = [0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 1.0];

pub fn run(a: TuneArgs) -> anyhow::Result<ExitCode> {
    let (params, meets) = match (a.bands, a.rows) {
        (Some(b), Some(r)) => {
            let p = LshParams::new(b, r)?;
            (p, p.probability(a.threshold) >= a.recall_target)
        }
        _ => {
            let c = choose_lsh_params(a.threshold, a.recall_target, a.num_perm)?;
            (c.params, c.meets_target)
        }
    };
    let weighted = optimal_weighted(a.threshold, a.num_perm, 0.5, 0.5)?;
    let curve: Vec<(f64, f64)> = POINTS.iter().map(|&s| (s, params.probability(s))).collect();
    if let Some(path) = &a.svg {
        std::fs::write(path, s_curve_svg(params, a.threshold)).with_context(|| format!("cannot write {path}"))?;
    }
    if a.json {
        let v = serde_json::json!({
            "threshold": a.threshold,
            "recall_target": a.recall_target,
            "num_perm": a.num_perm,
            "bands": params.bands,
            "rows": params.rows,
            "meets_target": meets,
            "recall_at_threshold": params.probability(a.threshold),
            "false_positive_area": params.false_positive_area(a.threshold),
            "false_negative_area": params.false_negative_area(a.threshold),
            "curve": curve.iter().map(|(s, p)| serde_json::json!({"s": s, "p": p})).collect::<Vec<_>>(),
            "datasketch_optimum": {"bands": weighted.bands, "rows": weighted.rows,
                "recall_at_threshold": weighted.probability(a.threshold)},
        });
        crate::output::print_stdout(&serde_json::to_string_pretty(&v)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "bands {} x rows {} ({} of {} signature values), P(candidate | J={}) = {:.6}{}",
        params.bands,
        params.rows,
        params.width(),
        a.num_perm,
        a.threshold,
        params.probability(a.threshold),
        if meets { String::new() } else { format!("  (below the {} target: raise --num-perm)", a.recall_target) }
    );
    println!("false-candidate area below threshold {:.4}", params.false_positive_area(a.threshold));
    println!("\n     J   P(candidate) = 1-(1-J^{})^{}", params.rows, params.bands);
    for (s, p) in curve {
        println!("  {s:>4.2}   {p:.6}");
    }
    println!(
        "\nfor comparison, datasketch's FP/FN-area optimum: bands {} x rows {}, P(J={}) = {:.4}",
        weighted.bands,
        weighted.rows,
        a.threshold,
        weighted.probability(a.threshold)
    );
    Ok(ExitCode::SUCCESS)
}
