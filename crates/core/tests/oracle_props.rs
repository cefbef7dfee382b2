//! Property tests: the fast path against the exact oracle, and the
//! statistical contracts of MinHash and LSH.

use std::collections::BTreeSet;

use neardup_core::band_keys_into;
use neardup_core::candidate_probability;
use neardup_core::content_hash;
use neardup_core::{all_pairs, all_pairs_brute_force};
use neardup_core::{intersection_size, is_canonical, jaccard};
use neardup_core::{
    CandidateIndex, Config, ContentHash, ItemKeys, LshParams, MemoryIndex, MinHasher, Normalizer, QueryLimits,
    SignatureScheme,
};
use proptest::prelude::*;

fn canonical(v: Vec<u64>) -> Vec<u64> {
    let s: BTreeSet<u64> = v.into_iter().collect();
    s.into_iter().collect()
}

fn set_strategy() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(0u64..200, 0..60).prop_map(canonical)
}

/// Corpora with planted near duplicates: bases plus edited copies.
fn corpus_strategy() -> impl Strategy<Value = Vec<Vec<u64>>> {
    prop::collection::vec((prop::collection::vec(0u64..5000, 5..80), 0usize..4, 0usize..6), 2..40).prop_map(|specs| {
        let mut out = Vec::new();
        for (i, (base, copies, edits)) in specs.into_iter().enumerate() {
            let base = canonical(base);
            for c in 0..copies {
                let mut v = base.clone();
                for e in 0..edits.min(v.len()) {
                    let at = (e * 7 + c) % v.len();
                    v[at] = 10_000 + (i * 100 + c * 10 + e) as u64;
                }
                out.push(canonical(v));
            }
            out.push(base);
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn jaccard_is_symmetric_bounded_and_reflexive(a in set_strategy(), b in set_strategy()) {
        let (x, y) = (jaccard(&a, &b), jaccard(&b, &a));
        prop_assert_eq!(x, y);
        prop_assert!((0.0..=1.0).contains(&x));
        prop_assert_eq!(jaccard(&a, &a), 1.0);
        let naive = {
            let (sa, sb): (BTreeSet<_>, BTreeSet<_>) = (a.iter().collect(), b.iter().collect());
            let u = sa.union(&sb).count();
            if u == 0 { 1.0 } else { sa.intersection(&sb).count() as f64 / u as f64 }
        };
        prop_assert_eq!(x, naive);
        prop_assert!(is_canonical(&a));
        prop_assert_eq!(intersection_size(&a, &b), intersection_size(&b, &a));
    }

    #[test]
    fn oracle_equals_brute_force(corpus in corpus_strategy(), t in 0.3f64..1.0) {
        prop_assert_eq!(all_pairs(&corpus, t), all_pairs_brute_force(&corpus, t));
    }

    /// With one row per band and 256 bands, P(candidate | J >= 0.5) >= 1 - 2^-256:
    /// the LSH path must then report exactly the oracle's pairs, with its scores.
    #[test]
    fn verified_pairs_equal_oracle_pairs(corpus in corpus_strategy(), t in 0.5f64..1.0) {
        let params = Config { num_perm: 256, bands: Some(256), rows: Some(1), threshold: t,
            max_candidates: 10_000, ..Config::default() }.resolve().unwrap();
        let hasher = MinHasher::new(SignatureScheme::MinHash, 256, params.config().seed).unwrap();
        let mut index = CandidateIndex::for_params(&params);
        let limits = QueryLimits { max_candidates: 10_000, max_bucket_read: 100_000, threshold: 0.8 };
        let mut found = Vec::new();
        for (i, set) in corpus.iter().enumerate() {
            let mut keys = Vec::new();
            let sig = hasher.signature(set);
            band_keys_into(params.lsh(), params.config().seed, &sig, &mut keys).unwrap();
            // Equal sets share a content hash; empty ones never match.
            let hash = if set.is_empty() { ContentHash([i as u8; 16]) } else {
                content_hash(&set.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
            };
            if !keys.is_empty() {
                let item = ItemKeys { band_keys: &keys, content_hash: hash, signature: &sig };
                for c in index.candidates(item, None, limits).unwrap().ids {
                    let s = jaccard(set, &corpus[c.id as usize]);
                    if s >= t { found.push((c.id, i as u32, s)); }
                }
            }
            let item = ItemKeys { band_keys: &keys, content_hash: hash, signature: &sig };
            prop_assert_eq!(index.insert(item).unwrap(), i as u32);
        }
        found.sort_by_key(|p| (p.0, p.1));
        let truth: Vec<_> = all_pairs(&corpus, t).into_iter().filter(|p| !corpus[p.0 as usize].is_empty()).collect();
        prop_assert_eq!(found, truth);
    }

    /// SimHash: the banded index finds exactly the items within the
    /// Hamming distance its bands allow (pigeonhole, then the gate), for
    /// every k the bands give, whatever the corpus.
    #[test]
    fn simhash_candidates_are_exactly_those_within_k(corpus in corpus_strategy(), bands in 1u32..=5) {
        let params = Config { signature: SignatureScheme::SimHash, num_perm: 64, bands: Some(bands), rows: Some(64 / bands),
            max_candidates: 10_000, ..Config::default() }.resolve().unwrap();
        let k = params.max_hamming().unwrap();
        prop_assert_eq!(k, bands - 1);
        let hasher = MinHasher::new(SignatureScheme::SimHash, 64, params.config().seed).unwrap();
        let mut index = CandidateIndex::for_params(&params);
        let limits = QueryLimits { max_candidates: 10_000, max_bucket_read: 100_000, threshold: 0.8 };
        let sigs: Vec<Vec<u32>> = corpus.iter().map(|set| hasher.signature(set)).collect();
        let distance = |a: &[u32], b: &[u32]| a.iter().zip(b).filter(|(x, y)| x != y).count() as u32;
        for (i, set) in corpus.iter().enumerate() {
            let mut keys = Vec::new();
            band_keys_into(params.lsh(), params.config().seed, &sigs[i], &mut keys).unwrap();
            // Distinct content hashes: only the bands can make candidates.
            let item = ItemKeys { band_keys: &keys, content_hash: ContentHash([i as u8; 16]), signature: &sigs[i] };
            if !set.is_empty() {
                let mut got: Vec<u32> = index.candidates(item, None, limits).unwrap().ids.iter().map(|c| c.id).collect();
                got.sort_unstable();
                let want: Vec<u32> = (0..i)
                    .filter(|&j| !corpus[j].is_empty() && distance(&sigs[i], &sigs[j]) <= k)
                    .map(|j| j as u32)
                    .collect();
                prop_assert_eq!(got, want);
            }
            let item = ItemKeys { band_keys: &keys, content_hash: ContentHash([i as u8; 16]), signature: &sigs[i] };
            prop_assert_eq!(index.insert(item).unwrap(), i as u32);
        }
    }
}

/// Random sets with an exact, planted Jaccard similarity.
fn pair_with_jaccard(n_union: usize, j: f64, salt: u64) -> (Vec<u64>, Vec<u64>) {
    let shared = (n_union as f64 * j).round() as usize;
    let rest = n_union - shared;
    let mix = |i: u64| neardup_core::fmix64(i ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut a: Vec<u64> = (0..shared as u64).map(mix).collect();
    let mut b = a.clone();
    a.extend((0..(rest / 2) as u64).map(|i| mix(1_000_000 + i)));
    b.extend((0..(rest - rest / 2) as u64).map(|i| mix(2_000_000 + i)));
    (canonical(a), canonical(b))
}

#[test]
fn minhash_estimates_are_within_statistical_error() {
    for scheme in [SignatureScheme::MinHash, SignatureScheme::OnePermutation] {
        for &j in &[0.1, 0.3, 0.5, 0.7, 0.85, 0.95] {
            let n = 256;
            let mut total_err = 0.0;
            let trials = 40;
            for t in 0..trials {
                let (a, b) = pair_with_jaccard(600, j, t);
                let exact = jaccard(&a, &b);
                let h = MinHasher::new(scheme, n, 1000 + t).unwrap();
                let est = neardup_core::estimate_jaccard(&h.signature(&a), &h.signature(&b)).unwrap();
                let sigma = (exact * (1.0 - exact) / n as f64).sqrt();
                assert!((est - exact).abs() <= 5.0 * sigma + 1e-9, "{scheme:?} j={exact} est={est}");
                total_err += est - exact;
            }
            // Unbiased: the mean error shrinks like sigma / sqrt(trials).
            let mean = total_err / trials as f64;
            let sigma = (j * (1.0 - j) / n as f64).sqrt();
            assert!(mean.abs() <= 4.0 * sigma / (trials as f64).sqrt() + 1e-9, "{scheme:?} j={j} bias {mean}");
        }
    }
}

#[test]
fn candidate_rate_per_jaccard_bin_follows_the_s_curve() {
    let params = LshParams::new(16, 8).unwrap();
    let trials = 600;
    for &j in &[0.5, 0.6, 0.7, 0.8, 0.9] {
        let mut hits = 0;
        for t in 0..trials {
            let (a, b) = pair_with_jaccard(300, j, 77 + t);
            let h = MinHasher::new(SignatureScheme::MinHash, 128, 5_000 + t).unwrap();
            let mut idx = CandidateIndex::new(params, t, 128, 8).unwrap();
            let (mut ka, mut kb) = (Vec::new(), Vec::new());
            let (sa, sb) = (h.signature(&a), h.signature(&b));
            band_keys_into(params, t, &sa, &mut ka).unwrap();
            band_keys_into(params, t, &sb, &mut kb).unwrap();
            idx.insert(ItemKeys { band_keys: &ka, content_hash: ContentHash([0; 16]), signature: &sa }).unwrap();
            let lim = QueryLimits { max_candidates: 10, max_bucket_read: 10, threshold: 0.8 };
            let query = ItemKeys { band_keys: &kb, content_hash: ContentHash([1; 16]), signature: &sb };
            hits += usize::from(!idx.candidates(query, None, lim).unwrap().ids.is_empty());
        }
        let rate = hits as f64 / trials as f64;
        let p = candidate_probability(j, 16, 8);
        let sd = (p * (1.0 - p) / trials as f64).sqrt();
        assert!((rate - p).abs() <= 4.5 * sd + 0.01, "J={j}: rate {rate} vs S-curve {p}");
    }
}

/// Known text → known fingerprint. If this fails, every stored index and
/// snapshot is invalid: bump a version instead of editing the numbers.
#[test]
fn frozen_fingerprints() {
    let text = "The quick brown fox jumps over the lazy dog; the dog sleeps. Ünïcödé ﬁnal words.";
    for (scheme, want_head, want_digest) in [
        (SignatureScheme::MinHash, FROZEN_MINHASH_HEAD, FROZEN_MINHASH_DIGEST),
        (SignatureScheme::OnePermutation, FROZEN_OPH_HEAD, FROZEN_OPH_DIGEST),
        (SignatureScheme::SimHash, FROZEN_SIMHASH_HEAD, FROZEN_SIMHASH_DIGEST),
    ] {
        let params = Config { signature: scheme, ..Config::default() }.resolve().unwrap();
        let fp = neardup_core::Fingerprinter::new(params).unwrap().fingerprint(text);
        let digest = neardup_core::hash_u32s(&fp.signature, 0);
        assert_eq!((&fp.signature[..4], digest), (&want_head[..], want_digest), "{scheme:?}");
        assert_eq!(fp.features.len(), 11);
        assert_eq!(fp.content_hash.to_hex(), FROZEN_CONTENT_HASH);
    }
    assert_eq!(
        Normalizer::Unicode.normalize(text),
        "the quick brown fox jumps over the lazy dog the dog sleeps ünïcödé final words"
    );
}

const FROZEN_MINHASH_HEAD: [u32; 4] = [398_932_183, 446_866_618, 792_316_805, 303_304_344];
const FROZEN_MINHASH_DIGEST: u64 = 15_354_642_068_105_365_995;
const FROZEN_OPH_HEAD: [u32; 4] = [1_398_328_997, 71_978_773, 2_739_011_208, 1_166_897_440];
const FROZEN_OPH_DIGEST: u64 = 1_150_130_919_011_007_623;
const FROZEN_SIMHASH_HEAD: [u32; 4] = [0, 0, 1, 1];
const FROZEN_SIMHASH_DIGEST: u64 = 12_455_774_870_033_328_604;
const FROZEN_CONTENT_HASH: &str = "289a674ca342df079cba377d28d598a2";

#[test]
fn memory_index_matches_seed_example() {
    let params = Config::seed_example().resolve().unwrap();
    let mut fpr = neardup_core::Fingerprinter::new(params.clone()).unwrap();
    let mut idx = MemoryIndex::new(params);
    let a = idx.insert(fpr.fingerprint("red fox runs very fast")).unwrap();
    let b = fpr.fingerprint("red fox runs very fast today");
    let m = idx.verify(&b, &idx.candidates(&b, None).unwrap().ids, 0.75);
    assert_eq!((m[0].id, m[0].score), (a, 0.8));
    let b = idx.insert(b).unwrap();
    let c = fpr.fingerprint("database backup completed nightly");
    assert!(idx.verify(&c, &idx.candidates(&c, None).unwrap().ids, 0.75).is_empty());
    assert!(idx.remove(a));
    let again = fpr.fingerprint("red fox runs very fast today");
    let ids = idx.candidates(&again, Some(b)).unwrap().ids;
    assert!(ids.iter().all(|c| c.id != a));
}

proptest! {
    #[test]
    fn thresholded_jaccard_equals_full_jaccard(a in set_strategy(), b in set_strategy(), t in 0.0f64..=1.0) {
        let full = jaccard(&a, &b);
        prop_assert_eq!(neardup_core::jaccard_at_least(&a, &b, t), (full >= t).then_some(full));
    }
}

proptest! {
    /// The membership screen changes no answer: an index with one gives
    /// every item the candidates an index without one gives, and on a
    /// corpus with unrelated items it does answer lookups without reading
    /// the tables.
    #[test]
    fn the_membership_screen_changes_no_candidate(corpus in corpus_strategy(), bits in 4u32..=16) {
        let config = Config { threshold: 0.5, max_candidates: 10_000, ..Config::default() };
        let plain = config.resolve().unwrap();
        let screened = Config { screen_bits: bits, ..config }.resolve().unwrap();
        prop_assert_eq!(plain.fingerprint_version(), screened.fingerprint_version());
        let (mut a, mut b) = (MemoryIndex::new(plain.clone()), MemoryIndex::new(screened.clone()));
        let mut fa = neardup_core::Fingerprinter::new(plain).unwrap();
        for (i, set) in corpus.iter().enumerate() {
            // Texts whose words are the set's values: real fingerprints.
            let text: String = set.iter().map(|v| format!("w{v} ")).collect();
            let fp = fa.fingerprint(&text);
            a.insert(fp.clone()).unwrap();
            b.insert(fp).unwrap();
            let (x, y) = (a.candidates_before(i as u32), b.candidates_before(i as u32));
            prop_assert_eq!(&x.ids, &y.ids);
            prop_assert_eq!(x.distinct, y.distinct);
            prop_assert_eq!(x.screened_out, 0);
        }
        // A text unlike any: the screen answers most of its lookups.
        let novel = fa.fingerprint("an unrelated text none of the corpus holds, word for word, at all");
        let (x, y) = (a.candidates(&novel, None).unwrap(), b.candidates(&novel, None).unwrap());
        prop_assert_eq!(&x.ids, &y.ids);
        let lookups = novel.band_keys.len() as u32 + 1;
        prop_assert!(y.screened_out + y.screen_false_positives == lookups, "{y:?}");
        prop_assert!(y.screened_out * 2 > lookups, "{y:?}");
    }
}
