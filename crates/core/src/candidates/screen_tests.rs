//! A membership screen changes no answer of the candidate index.

use super::*;
use crate::hash::SplitMix64;
use crate::lsh::band_keys_into;
use crate::Config;

/// Past the screen's first sizing (1,024 keys a table, then rebuilt at
/// twice the keys, again and again), with removals, shared bands and
/// repeated content hashes: an index with a screen answers every query
/// as one without.
#[test]
fn a_screen_that_grows_and_rebuilds_changes_no_answer() {
    let params = |bits| Config { screen_bits: bits, ..Config::default() }.resolve().unwrap();
    let (p0, p8) = (params(0), params(8));
    let (mut plain, mut screened) = (CandidateIndex::for_params(&p0), CandidateIndex::for_params(&p8));
    let (lsh, seed) = (p0.lsh(), p0.config().seed);
    let mut rng = SplitMix64::new(5);
    let mut items: Vec<(Vec<u64>, ContentHash, Vec<u32>)> = Vec::new();
    for i in 0..6_000u32 {
        // Every third item shares its first band with an earlier one.
        let mut sig: Vec<u32> = (0..128).map(|_| rng.next() as u32).collect();
        if i % 3 == 0 && i > 0 {
            let from = items[(rng.next() % u64::from(i)) as usize].2.clone();
            sig[..lsh.rows as usize].copy_from_slice(&from[..lsh.rows as usize]);
        }
        let mut keys = Vec::new();
        band_keys_into(lsh, seed, &sig, &mut keys).unwrap();
        let h = ContentHash(u128::from(i % 4_000).to_le_bytes());
        items.push((keys, h, sig));
    }
    let lim = QueryLimits { max_candidates: 10_000, max_bucket_read: 100_000, threshold: 0.8 };
    for (i, (k, h, s)) in items.iter().enumerate() {
        let item = ItemKeys { band_keys: k, content_hash: *h, signature: s };
        assert_eq!(plain.insert(item).unwrap(), screened.insert(item).unwrap());
        if i % 7 == 3 {
            assert_eq!(plain.remove(i as u32 / 2), screened.remove(i as u32 / 2));
        }
    }
    assert!(screened.screen_bytes() > 0 && plain.screen_bytes() == 0);
    let mut skipped = 0;
    for (k, h, s) in items.iter().step_by(5) {
        let item = ItemKeys { band_keys: k, content_hash: *h, signature: s };
        let (a, b) = (plain.candidates(item, None, lim).unwrap(), screened.candidates(item, None, lim).unwrap());
        assert_eq!(a.ids, b.ids);
        assert_eq!(a.distinct, b.distinct);
    }
    for _ in 0..500 {
        let sig: Vec<u32> = (0..128).map(|_| rng.next() as u32).collect();
        let mut k = Vec::new();
        band_keys_into(lsh, seed, &sig, &mut k).unwrap();
        let item = ItemKeys { band_keys: &k, content_hash: ContentHash([0xAB; 16]), signature: &sig };
        let (a, b) = (plain.candidates(item, None, lim).unwrap(), screened.candidates(item, None, lim).unwrap());
        assert_eq!(a.ids, b.ids);
        skipped += b.screened_out;
    }
    // 500 novel items, 19 lookups each, at most a few per cent let through.
    assert!(skipped > 500 * 19 * 9 / 10, "{skipped}");
}
