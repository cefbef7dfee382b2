//! Kernel benchmarks for neardup-core.
//!
//! What's measured: each stage of the pipeline over 64 seeded ~2.5 KB
//! English-like documents in turn (normalize — also over Russian ones —,
//! shingle, MinHash both schemes, band keys, exact Jaccard of neighbours and
//! of near-duplicate pairs),
//! one capped candidate query (ranking 2,000 candidates by the sketch) and
//! the all-pairs oracle on 2,000 documents.
//! How to run: `cargo bench -p neardup-core --bench kernels`.
//! Results: bench/results/kernels.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use neardup_core::band_keys_into;
use neardup_core::features_into;
use neardup_core::SplitMix64;
use neardup_core::{Config, Fingerprinter, ItemKeys, LshParams, MinHasher, Normalizer, ShingleKind, SignatureScheme};

const WORDS: [&str; 24] = [
    "the",
    "of",
    "and",
    "data",
    "system",
    "value",
    "results",
    "model",
    "time",
    "process",
    "which",
    "between",
    "analysis",
    "performance",
    "index",
    "query",
    "document",
    "similar",
    "measure",
    "large",
    "set",
    "we",
    "show",
    "in",
];

/// Russian words, for a document in a two-byte script.
const CYRILLIC: [&str; 16] = [
    "данные",
    "система",
    "значение",
    "результаты",
    "модель",
    "время",
    "процесс",
    "который",
    "между",
    "анализ",
    "индекс",
    "запрос",
    "документ",
    "похожий",
    "большой",
    "мы",
];

fn document(seed: u64, bytes: usize) -> String {
    document_from(&WORDS, seed, bytes)
}

fn document_from(words: &[&str], seed: u64, bytes: usize) -> String {
    let mut rng = SplitMix64::new(seed);
    let mut s = String::new();
    while s.len() < bytes {
        let w = words[(rng.next() % words.len() as u64) as usize];
        s.push_str(w);
        s.push_str(if rng.next().is_multiple_of(11) { ". " } else { " " });
        if rng.next().is_multiple_of(7) {
            s.push_str(&format!("x{} ", rng.next() % 5000));
        }
    }
    s
}

/// Documents a stage runs over in turn: distinct inputs, so that the branch
/// predictor cannot learn one document's pattern (one repeated input made
/// branchy kernels look up to 3x faster than they run on a corpus).
const DOCS: u64 = 64;

fn kernels(c: &mut Criterion) {
    let docs: Vec<String> = (0..DOCS).map(|i| document(1 + i, 2500)).collect();
    let bytes: usize = docs.iter().map(String::len).sum();
    let normalized: Vec<String> = docs.iter().map(|d| Normalizer::Unicode.normalize(d)).collect();
    let features: Vec<Vec<u64>> = normalized
        .iter()
        .map(|n| {
            let mut out = Vec::new();
            features_into(n, ShingleKind::Word, 5, 1, 1_000_000, &mut out).unwrap();
            out
        })
        .collect();
    let mut g = c.benchmark_group("stage");
    g.throughput(Throughput::Bytes(bytes as u64));
    for norm in [Normalizer::Unicode, Normalizer::Seed] {
        g.bench_function(BenchmarkId::new("normalize", norm.version()), |b| {
            let mut out = String::new();
            b.iter(|| docs.iter().for_each(|d| norm.normalize_into(d, &mut out)))
        });
    }
    let cyrillic: Vec<String> = (0..DOCS).map(|i| document_from(&CYRILLIC, 1 + i, bytes / DOCS as usize)).collect();
    g.bench_function("normalize/unicode-v1/cyrillic", |b| {
        let mut out = String::new();
        b.iter(|| cyrillic.iter().for_each(|d| Normalizer::Unicode.normalize_into(d, &mut out)))
    });
    g.bench_function("shingle/word5", |b| {
        let mut out = Vec::new();
        b.iter(|| {
            for n in &normalized {
                features_into(n, ShingleKind::Word, 5, 1, 1_000_000, &mut out).unwrap()
            }
        })
    });
    for scheme in [SignatureScheme::MinHash, SignatureScheme::OnePermutation] {
        let h = MinHasher::new(scheme, 128, 1).unwrap();
        g.bench_function(BenchmarkId::new("signature128", scheme.version()), |b| {
            let mut sig = Vec::new();
            b.iter(|| features.iter().for_each(|f| h.signature_into(f, &mut sig)))
        });
    }
    let hasher = MinHasher::new(SignatureScheme::MinHash, 128, 1).unwrap();
    let sigs: Vec<Vec<u32>> = features.iter().map(|f| hasher.signature(f)).collect();
    g.bench_function("band_keys/18x6", |b| {
        let mut keys = Vec::new();
        let p = LshParams::new(18, 6).unwrap();
        b.iter(|| sigs.iter().for_each(|s| band_keys_into(p, 1, s, &mut keys).unwrap()))
    });
    g.bench_function("jaccard", |b| {
        b.iter(|| features.windows(2).map(|w| neardup_core::jaccard(&w[0], &w[1])).sum::<f64>())
    });
    // Near duplicates: each document with one word in 40 changed (Jaccard
    // about 0.85), verified at 0.8 — the merge runs to the end.
    let variants: Vec<Vec<u64>> = normalized
        .iter()
        .map(|n| {
            let edited: Vec<&str> =
                n.split(' ').enumerate().map(|(i, w)| if i % 40 == 7 { "edited" } else { w }).collect();
            let mut out = Vec::new();
            features_into(&edited.join(" "), ShingleKind::Word, 5, 1, 1_000_000, &mut out).unwrap();
            out
        })
        .collect();
    g.bench_function("verify/near_duplicates@0.8", |b| {
        b.iter(|| features.iter().zip(&variants).filter_map(|(x, y)| neardup_core::jaccard_at_least(x, y, 0.8)).count())
    });
    g.bench_function("fingerprint/all", |b| {
        let mut f = Fingerprinter::new(Config::default().resolve().unwrap()).unwrap();
        b.iter(|| docs.iter().for_each(|d| drop(f.fingerprint(d))))
    });
    g.finish();

    // One capped query: 2,000 candidates sharing a band with the query are
    // ranked by the 8-bit sketch and the best 100 kept (what each capped
    // query costs before any exact verification), against the same query
    // with a cap above the candidate count (no ranking).
    let mut g = c.benchmark_group("candidates");
    let p = LshParams::new(18, 5).unwrap();
    let mut rng = SplitMix64::new(9);
    let mut index = neardup_core::CandidateIndex::new(p, 1, 128, 8).unwrap();
    let query: Vec<u32> = (0..128).map(|_| rng.next() as u32).collect();
    for i in 0..2000u32 {
        let mut s: Vec<u32> = (0..128).map(|_| rng.next() as u32).collect();
        s[..5].copy_from_slice(&query[..5]); // band 0 shared
        let mut keys = Vec::new();
        band_keys_into(p, 1, &s, &mut keys).unwrap();
        let item = ItemKeys { band_keys: &keys, content_hash: neardup_core::ContentHash([i as u8; 16]), signature: &s };
        index.insert(item).unwrap();
    }
    let mut qkeys = Vec::new();
    band_keys_into(p, 1, &query, &mut qkeys).unwrap();
    let q = ItemKeys { band_keys: &qkeys, content_hash: neardup_core::ContentHash([255; 16]), signature: &query };
    for (name, cap) in [("rank2000_keep100", 100), ("uncapped2000", 10_000)] {
        let lim = neardup_core::QueryLimits { max_candidates: cap, max_bucket_read: 10_000, threshold: 0.8 };
        g.bench_function(name, |b| b.iter(|| index.candidates(q, None, lim).unwrap()));
    }
    g.finish();

    let mut g = c.benchmark_group("oracle");
    g.sample_size(10);
    let mut f = Fingerprinter::new(Config::default().resolve().unwrap()).unwrap();
    let sets: Vec<Vec<u64>> = (0..2000).map(|i| f.fingerprint(&document(100 + i / 2, 2500)).features).collect();
    g.bench_function("all_pairs/2000docs@0.8", |b| b.iter(|| neardup_core::all_pairs(&sets, 0.8)));
    g.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
