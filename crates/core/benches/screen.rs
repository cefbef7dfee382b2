//! The membership screen against no screen (plain binary, no harness):
//! candidate queries of items the index does not hold (every lookup a miss)
//! and of items it holds, on indexes of N items of the default layout
//! (18 bands × 5 rows, 128 values), with `screen_bits` 0, 8 and 12.
//!
//! `NEARDUP_BENCH_SIZES` (comma-separated item counts, default
//! `100000,1000000`); best of three alternating rounds of 200,000 queries
//! each. Prints ns per query, the screen's bytes per item and its observed
//! false-positive rate.

use std::time::Instant;

use neardup_core::band_keys_into;
use neardup_core::SplitMix64;
use neardup_core::{CandidateIndex, Config, ContentHash, ItemKeys, QueryLimits};

fn signature(rng: &mut SplitMix64) -> Vec<u32> {
    (0..128).map(|_| rng.next() as u32).collect()
}

fn main() {
    let sizes: Vec<usize> = std::env::var("NEARDUP_BENCH_SIZES")
        .unwrap_or_else(|_| "100000,1000000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("a size"))
        .collect();
    let queries = 200_000usize;
    println!("# membership screen: ns per candidate query, best of 3 rounds of {queries} queries");
    println!("items screen_bits miss_ns hit_ns screen_bytes_per_item observed_fpr");
    for &n in &sizes {
        for bits in [0u32, 8, 12] {
            let params = Config { screen_bits: bits, ..Config::default() }.resolve().unwrap();
            let (lsh, seed) = (params.lsh(), params.config().seed);
            let mut index = CandidateIndex::for_params(&params);
            let mut rng = SplitMix64::new(7);
            let mut held = Vec::new();
            let mut keys = Vec::new();
            for i in 0..n {
                let sig = signature(&mut rng);
                band_keys_into(lsh, seed, &sig, &mut keys).unwrap();
                let h = ContentHash((i as u128).to_le_bytes());
                index.insert(ItemKeys { band_keys: &keys, content_hash: h, signature: &sig }).unwrap();
                if i % (n / 1000).max(1) == 0 {
                    held.push((keys.clone(), h, sig));
                }
            }
            let screen_bytes = index.screen_bytes();
            let mut qrng = SplitMix64::new(99);
            let novel: Vec<(Vec<u64>, ContentHash, Vec<u32>)> = (0..1000)
                .map(|i| {
                    let sig = signature(&mut qrng);
                    let mut k = Vec::new();
                    band_keys_into(lsh, seed, &sig, &mut k).unwrap();
                    (k, ContentHash((u128::MAX - i).to_le_bytes()), sig)
                })
                .collect();
            let lim = QueryLimits { max_candidates: 100, max_bucket_read: 1000, threshold: 0.8 };
            let run = |set: &[(Vec<u64>, ContentHash, Vec<u32>)]| -> (f64, u64, u64) {
                let t = Instant::now();
                let (mut skipped, mut fp) = (0u64, 0u64);
                for q in 0..queries {
                    let (k, h, s) = &set[q % set.len()];
                    let c =
                        index.candidates(ItemKeys { band_keys: k, content_hash: *h, signature: s }, None, lim).unwrap();
                    skipped += u64::from(c.screened_out);
                    fp += u64::from(c.screen_false_positives);
                }
                (t.elapsed().as_secs_f64() * 1e9 / queries as f64, skipped, fp)
            };
            let (mut miss, mut hit) = (f64::MAX, f64::MAX);
            let mut fpr = 0.0;
            for _ in 0..3 {
                let (m, skipped, fp) = run(&novel);
                miss = miss.min(m);
                if skipped + fp > 0 {
                    fpr = fp as f64 / (skipped + fp) as f64;
                }
                hit = hit.min(run(&held).0);
            }
            println!(
                "{n} {bits} {miss:.0} {hit:.0} {:.1} {}",
                screen_bytes as f64 / n as f64,
                if bits == 0 { "-".to_owned() } else { format!("{fpr:.4}") }
            );
        }
    }
}
