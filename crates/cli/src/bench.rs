//! `neardup bench floor`: end-to-end dedup throughput against the floor.
//!
//! The floor is what any near-duplicate tool must pay at least on a JSONL
//! corpus: read the file, parse each line's JSON, split the text into
//! whitespace-separated words and hash every word k-gram (the configured
//! shingle width) with xxh3-64 — nothing else: no normalization, no
//! signature, no index, no verification. Both are measured in one run, on
//! the same input, with the same reader, chunking and thread pool, the runs
//! alternating, best of `--repeat`; the ratio `dedup / floor` is what holds
//! across machines.
//!
//! A second reference, the normalizing floor, does the same but hashes the
//! k-grams of the text normalized by the configured normalizer (what any
//! tool that tokenizes as neardup does must pay): `dedup / normalizing
//! floor` is the cost of everything after tokenizing — the exact hash, the
//! sort, the signature, the index and verification.

use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Subcommand};
use rayon::prelude::*;

use crate::args::{InputArgs, PipelineArgs};
use crate::input::for_each_chunk;
use crate::pipeline::Batch;

/// Measure neardup against the floor any tool must pay.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Dedup throughput as a ratio of the floor: read + JSON + split words +
    /// xxh3 of every word k-gram, measured in the same run on the same input.
    Floor(FloorArgs),
}

#[derive(Debug, Args)]
pub struct FloorArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Runs of each; the best is reported.
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, serde::Serialize)]
struct FloorReport {
    input: String,
    bytes: u64,
    records: u64,
    threads: usize,
    /// CPUs this process may run on (fewer than the machine's under
    /// `taskset`): a one-thread run with a CPU to spare uses ~1.1 of them.
    cpus: usize,
    /// Best floor run, MB/s of JSONL input.
    floor_mb_per_s: f64,
    /// Best dedup run, MB/s of JSONL input.
    dedup_mb_per_s: f64,
    /// dedup / floor.
    ratio: f64,
    /// Best normalizing-floor run (the floor, hashing the k-grams of the
    /// normalized text), MB/s of JSONL input.
    normalizing_floor_mb_per_s: f64,
    /// dedup / normalizing floor.
    normalizing_ratio: f64,
    floor_runs_s: Vec<f64>,
    normalizing_floor_runs_s: Vec<f64>,
    dedup_runs_s: Vec<f64>,
    /// Checksum of the floor's hashes (keeps the work from being optimized away).
    floor_checksum: u64,
    /// Items the dedup runs kept (the same in every run).
    kept: u64,
}

pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    match a.what {
        BenchCommand::Floor(f) => floor(f),
    }
}

fn floor(a: FloorArgs) -> anyhow::Result<ExitCode> {
    crate::usage::init_threads(a.input.threads)?;
    let input = match a.input.inputs.as_slice() {
        [one] if one != "-" && !std::path::Path::new(one).is_dir() => one.clone(),
        _ => {
            let why = "bench floor reads its input several times: give one file";
            return Err(crate::usage::UsageError(why.into()).into());
        }
    };
    if a.repeat == 0 {
        return Err(crate::usage::UsageError("--repeat must be at least 1".into()).into());
    }
    let params = a.pipeline.config()?.resolve()?;
    let width = params.config().shingle_width as usize;
    let seed = params.config().seed;
    let normalizer = params.config().normalizer;
    let (mut floor_runs, mut normalizing_runs, mut dedup_runs) = (Vec::new(), Vec::new(), Vec::new());
    let (mut bytes, mut records, mut checksum, mut kept) = (0u64, 0u64, 0u64, None);
    for _ in 0..a.repeat {
        let t = Instant::now();
        let (b, r, c) =
            floor_once(&input, &a.input, |text, scratch| hash_word_grams(text, width, seed, &mut scratch.1))?;
        floor_runs.push(t.elapsed().as_secs_f64());
        (bytes, records, checksum) = (b, r, c);

        let t = Instant::now();
        floor_once(&input, &a.input, |text, (normalized, spans)| {
            normalizer.normalize_into(text, normalized);
            hash_word_grams(normalized, width, seed, spans)
        })?;
        normalizing_runs.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let k = dedup_once(&input, &a.input, params.clone())?;
        dedup_runs.push(t.elapsed().as_secs_f64());
        if kept.is_some_and(|prev| prev != k) {
            anyhow::bail!("dedup kept {k} items in one run and {} in another", kept.unwrap_or_default());
        }
        kept = Some(k);
    }
    let best = |runs: &[f64]| runs.iter().copied().fold(f64::INFINITY, f64::min);
    let mb = bytes as f64 / 1e6;
    let report = FloorReport {
        input: input.clone(),
        bytes,
        records,
        threads: rayon::current_num_threads(),
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        floor_mb_per_s: mb / best(&floor_runs),
        dedup_mb_per_s: mb / best(&dedup_runs),
        ratio: best(&floor_runs) / best(&dedup_runs),
        normalizing_floor_mb_per_s: mb / best(&normalizing_runs),
        normalizing_ratio: best(&normalizing_runs) / best(&dedup_runs),
        floor_runs_s: floor_runs,
        normalizing_floor_runs_s: normalizing_runs,
        dedup_runs_s: dedup_runs,
        floor_checksum: checksum,
        kept: kept.unwrap_or_default(),
    };
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{}: {:.1} MB, {} records, {} threads on {} CPUs\n  floor             {:8.1} MB/s  (read, JSON, split words, xxh3 of every word {width}-gram)\n  normalizing floor {:8.1} MB/s  (the same on the text normalized {})\n  dedup             {:8.1} MB/s\n  ratio             {:8.3}  (dedup / floor, best of {})\n  normalizing ratio {:8.3}  (dedup / normalizing floor)",
            report.input,
            mb,
            report.records,
            report.threads,
            report.cpus,
            report.floor_mb_per_s,
            report.normalizing_floor_mb_per_s,
            normalizer.version(),
            report.dedup_mb_per_s,
            report.ratio,
            a.repeat,
            report.normalizing_ratio,
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Per-thread scratch of a floor pass: a normalized text and word spans.
type Scratch = (String, Vec<(usize, usize)>);

/// One floor pass, `work` hashing each record's text: (bytes of accepted
/// lines, records, checksum of what `work` returned).
fn floor_once<W>(path: &str, input: &InputArgs, work: W) -> anyhow::Result<(u64, u64, u64)>
where
    W: Fn(&str, &mut Scratch) -> u64 + Sync,
{
    let inputs = crate::input::expand(&[path.to_owned()])?;
    let (mut bytes, mut records, mut checksum) = (0u64, 0u64, 0u64);
    let (tf, idf) = (input.text_field.as_str(), input.id_field.as_str());
    for_each_chunk(&inputs, &input.read_options(), None, |chunk| {
        let (b, r, c) = chunk
            .lines
            .par_iter()
            .map_init(Scratch::default, |scratch, line| match line.record(tf, idf) {
                Ok(rec) => (line.len() as u64, 1, work(&rec.text, scratch)),
                Err(_) => (0, 0, 0),
            })
            .reduce(|| (0, 0, 0), |x, y| (x.0 + y.0, x.1 + y.1, x.2.wrapping_add(y.2)));
        bytes += b;
        records += r;
        checksum = checksum.wrapping_add(c);
        Ok(())
    })?;
    Ok((bytes, records, checksum))
}

/// Splits `text` on ASCII whitespace and hashes every run of `width` words
/// (one hash of the whole text when it is shorter); returns the sum of the
/// hashes.
fn hash_word_grams(text: &str, width: usize, seed: u64, spans: &mut Vec<(usize, usize)>) -> u64 {
    let bytes = text.as_bytes();
    spans.clear();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i > start {
            spans.push((start, i));
        }
    }
    if spans.is_empty() {
        return 0;
    }
    if spans.len() < width {
        return neardup_core::hash_bytes(bytes, seed);
    }
    spans
        .windows(width)
        .map(|w| neardup_core::hash_bytes(&bytes[w[0].0..w[width - 1].1], seed))
        .fold(0u64, u64::wrapping_add)
}

/// One dedup pass without outputs: the items kept.
fn dedup_once(path: &str, input: &InputArgs, params: neardup_core::Params) -> anyhow::Result<u64> {
    let inputs = crate::input::expand(&[path.to_owned()])?;
    let mut batch = Batch::new(params, &input.text_field, &input.id_field)?;
    let mut rejects = Vec::new();
    let mut kept = 0u64;
    batch.run(&inputs, &input.read_options(), &mut rejects, |_, _, outcomes| {
        kept += outcomes.iter().filter(|o| o.decided.kept).count() as u64;
        Ok(())
    })?;
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_grams_are_hashed_in_place() {
        let mut spans = Vec::new();
        let h = |s: &str| neardup_core::hash_bytes(s.as_bytes(), 1);
        assert_eq!(hash_word_grams("  a b\tc  ", 2, 1, &mut spans), h("a b").wrapping_add(h("b\tc")));
        assert_eq!(hash_word_grams("a b", 5, 1, &mut spans), h("a b"));
        assert_eq!(hash_word_grams(" \n", 5, 1, &mut spans), 0);
    }
}
