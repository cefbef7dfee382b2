//! Tests of the candidate index: inserts, queries, ranking under the cap,
//! loaders and removal.

use super::*;
use crate::lsh::band_keys_into;

const LIM: QueryLimits = QueryLimits { max_candidates: 100, max_bucket_read: 1000, threshold: 0.8 };

/// An index whose signatures are their own band keys' inputs.
fn index(bands: u32, rows: u32) -> CandidateIndex {
    let p = LshParams::new(bands, rows).unwrap();
    CandidateIndex::new(p, 9, (bands * rows) as usize, 8).unwrap()
}

fn keys(idx: &CandidateIndex, sig: &[u32]) -> Vec<u64> {
    let mut k = Vec::new();
    band_keys_into(idx.lsh(), idx.seed(), sig, &mut k).unwrap();
    k
}

pub(super) fn h(n: u8) -> ContentHash {
    ContentHash([n; 16])
}

/// Inserts the item with signature `sig` (band keys made from it).
pub(super) fn add(idx: &mut CandidateIndex, sig: &[u32], hash: ContentHash) -> u32 {
    let k = keys(idx, sig);
    idx.insert(ItemKeys { band_keys: &k, content_hash: hash, signature: sig }).unwrap()
}

fn ask(idx: &CandidateIndex, sig: &[u32], hash: ContentHash, exclude: Option<u32>, lim: QueryLimits) -> CandidateSet {
    let k = keys(idx, sig);
    idx.candidates(ItemKeys { band_keys: &k, content_hash: hash, signature: sig }, exclude, lim).unwrap()
}

fn ids(c: &CandidateSet) -> Vec<(u32, u16)> {
    c.ids.iter().map(|c| (c.id, c.bands)).collect()
}

/// Loading rows in bulk files the same buckets, in the same order, as
/// row-by-row inserts — over several loader rounds (700 rows in tests),
/// with many ids sharing buckets and content hashes — and the index
/// answers, removes and inserts the same afterwards.
#[test]
fn bulk_loaded_rows_answer_as_inserted_ones() {
    let (mut one, mut bulk) = (index(4, 2), index(4, 2));
    let sig = |i: u32| -> Vec<u32> { (0..8).map(|j| (i.wrapping_mul(2_654_435_761) >> (j * 3)) % 5).collect() };
    let rows: Vec<_> = (0..2_500u32)
        .map(|i| {
            let k = keys(&one, &sig(i));
            let (folded, sketch) = one.row_of(&k, &sig(i));
            (folded, sketch, h((i % 40) as u8))
        })
        .collect();
    for (f, s, c) in &rows {
        one.insert_row(f, s, *c).unwrap();
    }
    let mut loader = bulk.loader();
    for (f, s, c) in &rows {
        loader.insert_row(f, s, *c).unwrap();
    }
    drop(loader);
    let lim = QueryLimits { max_candidates: 5_000, max_bucket_read: 5_000, threshold: 0.8 };
    let same = |one: &CandidateIndex, bulk: &CandidateIndex| {
        assert_eq!(one.bucket_size_histogram(), bulk.bucket_size_histogram());
        for i in (0..2_600u32).step_by(7) {
            let (a, b) = (ask(one, &sig(i), h(i as u8), None, lim), ask(bulk, &sig(i), h(i as u8), None, lim));
            assert_eq!(ids(&a), ids(&b), "query {i}");
        }
    };
    same(&one, &bulk);
    for id in (0..2_500).step_by(3) {
        one.remove(id);
        bulk.remove(id);
    }
    add(&mut one, &sig(7), h(7));
    add(&mut bulk, &sig(7), h(7));
    same(&one, &bulk);
}

/// Items added through a loader and filed chunk by chunk, each chunk's
/// tables on threads of their own in reverse order (as a batch files
/// them on its pool), answer as items inserted one by one — with
/// screens, many ids sharing buckets and content hashes, and queries of
/// each chunk's items against the items before them.
#[test]
fn tables_filed_on_threads_answer_as_one_by_one_inserts() {
    let (mut one, mut filed) = (index(4, 2), index(4, 2));
    one.postings.set_screen(8);
    filed.postings.set_screen(8);
    let sig = |i: u32| -> Vec<u32> { (0..8).map(|j| (i.wrapping_mul(2_654_435_761) >> (j * 3)) % 5).collect() };
    let lim = QueryLimits { max_candidates: 5_000, max_bucket_read: 5_000, threshold: 0.8 };
    for chunk in 0..6u32 {
        let items: Vec<u32> = (chunk * 450..(chunk + 1) * 450).collect();
        for &i in &items {
            add(&mut one, &sig(i), h((i % 40) as u8));
        }
        let item_keys: Vec<Vec<u64>> = items.iter().map(|&i| keys(&filed, &sig(i))).collect();
        let mut loader = filed.loader();
        for (&i, k) in items.iter().zip(&item_keys) {
            let id = loader.insert(ItemKeys { band_keys: k, content_hash: h((i % 40) as u8), signature: &sig(i) });
            assert_eq!(id.unwrap(), i);
        }
        loader.file_with(|jobs| {
            assert_eq!(jobs.len(), 5, "four bands and the content hash");
            std::thread::scope(|s| {
                for job in jobs.into_iter().rev() {
                    s.spawn(move || job.run());
                }
            });
        });
        drop(loader);
        assert_eq!(one.bucket_size_histogram(), filed.bucket_size_histogram());
        for &i in &items {
            assert_eq!(ids(&one.candidates_before(i, lim)), ids(&filed.candidates_before(i, lim)), "item {i}");
        }
    }
    for i in (0..3_000u32).step_by(11) {
        let (a, b) = (ask(&one, &sig(i), h(i as u8), None, lim), ask(&filed, &sig(i), h(i as u8), None, lim));
        assert_eq!(ids(&a), ids(&b), "query {i}");
    }
}

/// The whole answer but the screen counters (which count lookups in
/// the tables as they are at the time of asking).
fn unscreened(mut c: CandidateSet) -> CandidateSet {
    c.screened_out = 0;
    c.screen_false_positives = 0;
    c
}

/// Items filed through a loader — chunks crossing a loader round, every
/// table on a thread of its own, a screen — with bands of their own and
/// shared ones, items without band keys sharing content hashes, and an
/// item removed between chunks: a batch's `candidates_before` of each
/// equals what `candidates` answered just before it was added.
#[test]
fn loaded_items_answer_what_they_were_asked_before_insertion() {
    let (mut then_idx, mut filed) = (index(4, 2), index(4, 2));
    then_idx.postings.set_screen(8);
    filed.postings.set_screen(8);
    let lim = QueryLimits { max_candidates: 6, max_bucket_read: 40, threshold: 0.8 };
    // Bands 0 and 2 shared in small groups, bands 1 and 3 the item's own
    // for most items; every seventh item has no band keys at all.
    let sig = |i: u32| -> Vec<u32> {
        let own = if i.is_multiple_of(3) { i % 17 } else { 1_000 + i };
        vec![i % 5, own, i % 9, own + 7, i % 13, own, i % 4, own]
    };
    let item = |idx: &CandidateIndex, i: u32| -> (Vec<u64>, Vec<u32>, ContentHash) {
        let hash = if i.is_multiple_of(2) { h((i % 6) as u8) } else { h((100 + i % 150) as u8) };
        if i.is_multiple_of(7) {
            (Vec::new(), Vec::new(), hash)
        } else {
            (keys(idx, &sig(i)), sig(i), hash)
        }
    };
    let mut then = Vec::new();
    for (chunk, range) in [0..900u32, 900..1_500].into_iter().enumerate() {
        if chunk == 1 {
            // Item 5's keys are shared with later items.
            assert!(then_idx.remove(5) && filed.remove(5));
        }
        let items: Vec<_> = range.clone().map(|i| item(&filed, i)).collect();
        for (i, (k, s, hash)) in range.clone().zip(&items) {
            let q = ItemKeys { band_keys: k, content_hash: *hash, signature: s };
            then.push(unscreened(then_idx.candidates(q, None, lim).unwrap()));
            assert_eq!(then_idx.insert(q).unwrap(), i);
        }
        let mut loader = filed.loader();
        for (k, s, hash) in &items {
            loader.insert(ItemKeys { band_keys: k, content_hash: *hash, signature: s }).unwrap();
        }
        loader.file_with(|jobs| {
            std::thread::scope(|sc| {
                for job in jobs.into_iter().rev() {
                    sc.spawn(move || job.run());
                }
            });
        });
        drop(loader);
        for i in range {
            let got = unscreened(filed.candidates_before(i, lim));
            assert_eq!(got, then[i as usize], "item {i}");
        }
    }
    let asked: usize = then.iter().map(|c| c.ids.len()).sum();
    assert!(asked > 1_000, "the items share buckets: {asked} candidates in all");
}

#[test]
fn bucket_size_histogram_counts_every_band() {
    let mut idx = index(4, 2);
    assert_eq!(idx.bucket_size_histogram(), [0]);
    // Five copies of one signature: 4 buckets of 5 (bin 2: 4..=7).
    for i in 0..5 {
        add(&mut idx, &[1, 2, 3, 4, 5, 6, 7, 8], h(i));
    }
    // One that shares its first band only: that bucket grows to 6, and
    // 3 buckets of 1 (bin 0).
    add(&mut idx, &[1, 2, 9, 9, 8, 8, 7, 7], h(9));
    assert_eq!(idx.bucket_size_histogram(), [3, 0, 4]);
}

#[test]
fn insert_query_remove() {
    let mut idx = index(4, 2);
    let (a, b, c) = ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 0, 0, 0, 0, 7, 8], [9; 8]);
    assert_eq!(add(&mut idx, &a, h(0)), 0);
    assert_eq!(add(&mut idx, &b, h(1)), 1);
    assert_eq!(add(&mut idx, &c, h(2)), 2);
    let got = ask(&idx, &a, h(0), Some(0), LIM);
    assert_eq!(ids(&got), vec![(1, 2)]);
    assert!(!got.is_partial());
    assert!(idx.remove(1));
    assert!(!idx.remove(1));
    assert!(ask(&idx, &a, h(0), Some(0), LIM).ids.is_empty());
    assert_eq!(idx.len(), 2);
    assert_eq!(idx.slots(), 3);
    assert_eq!(idx.band_keys(1), None);
    let folded: Vec<u32> = keys(&idx, &c).iter().map(|&k| fold_key(k)).collect();
    assert_eq!(idx.band_keys(2), Some(&folded[..]));
}

#[test]
fn caps_are_reported_not_silent() {
    let mut idx = index(2, 1);
    for i in 0..50 {
        add(&mut idx, &[5, 5], h(i));
    }
    let lim = QueryLimits { max_candidates: 10, max_bucket_read: 20, threshold: 0.8 };
    let got = ask(&idx, &[5, 5], h(200), None, lim);
    assert!(got.over_cap);
    assert_eq!(got.hot_buckets, 2);
    assert_eq!(got.ids.len(), 10);
    assert!(got.distinct >= 20 && got.distinct <= 40, "{}", got.distinct);
    assert_eq!(got.entries_read, 40);
}

#[test]
fn ranking_keeps_the_closest_signatures_not_the_first_ones() {
    // 4 bands of 2 rows. Twenty look-alikes share 3 bands and 6 of 8
    // values with the query; the needle, inserted last, shares the same
    // 3 bands but 7 values. By bands shared (then id) a cap of 3 keeps
    // the first look-alikes; by the sketch the needle comes first.
    let mut idx = index(4, 2);
    let q = [1, 2, 3, 4, 5, 6, 7, 8];
    for i in 0..20 {
        add(&mut idx, &[1, 2, 3, 4, 5, 6, 90 + i, 91 + i], h(i as u8));
    }
    let needle = add(&mut idx, &[1, 2, 3, 4, 5, 6, 7, 99], h(50));
    let lim = QueryLimits { max_candidates: 3, max_bucket_read: 100, threshold: 0.8 };
    let got = ask(&idx, &q, h(60), None, lim);
    assert!(got.over_cap);
    assert_eq!(got.distinct, 21);
    assert_eq!(ids(&got), [(needle, 3), (0, 3), (1, 3)]);
}

#[test]
fn a_keep_filter_applies_before_the_cap() {
    let mut idx = index(2, 1);
    for i in 0..30 {
        add(&mut idx, &[5, 5], h(i));
    }
    let lim = QueryLimits { max_candidates: 4, max_bucket_read: 100, threshold: 0.8 };
    let got = idx.candidates_before_where(29, lim, &|id| id % 7 == 3);
    assert_eq!(got.ids.iter().map(|c| c.id).collect::<Vec<_>>(), [3, 10, 17, 24]);
    assert!(!got.over_cap);
    assert_eq!(got.distinct, 4);
}

#[test]
fn hot_buckets_are_not_read_from_the_oldest_entry() {
    let mut idx = index(1, 1);
    for i in 0..1000 {
        add(&mut idx, &[5], h((i % 200) as u8));
    }
    let lim = QueryLimits { max_candidates: 1000, max_bucket_read: 100, threshold: 0.8 };
    let got = ask(&idx, &[5], h(255), None, lim);
    assert_eq!(got.hot_buckets, 1);
    assert_eq!(got.ids.len(), 100);
    let mut read: Vec<u32> = got.ids.iter().map(|c| c.id).collect();
    read.sort_unstable();
    assert_ne!(read, (0..100).collect::<Vec<_>>(), "read from the oldest entry");
    read.dedup();
    assert_eq!(read.len(), 100);
}

#[test]
fn same_content_is_always_a_candidate_up_to_the_cap() {
    let mut idx = index(2, 1);
    // Ten copies matched by hash only (no band keys), then one banded copy.
    for _ in 0..10 {
        idx.insert(ItemKeys { band_keys: &[], content_hash: h(7), signature: &[] }).unwrap();
    }
    add(&mut idx, &[1, 2], h(7));
    let lim = QueryLimits { max_candidates: 4, max_bucket_read: 10, threshold: 0.8 };
    let got = ask(&idx, &[1, 2], h(7), Some(0), lim);
    // The earliest copies, inside the cap (issue 39: the banded copy used
    // to come on top of them, five candidates under a cap of four); the
    // cut copies are reported as a cut.
    assert_eq!(ids(&got), vec![(1, 0), (2, 0), (3, 0), (4, 0)]);
    assert!(got.ids.iter().all(|c| c.same_content));
    assert_eq!(got.distinct, 5);
    assert!(got.over_cap && got.is_partial());
    assert_eq!(got.cut_estimate, Some(1.0));
    // Under the cap nothing is cut, and a copy the bands found keeps the
    // bands it shares.
    let lim = QueryLimits { max_candidates: 11, ..lim };
    let got = ask(&idx, &[1, 2], h(7), Some(0), lim);
    let want: Vec<(u32, u16)> = (1..10).map(|id| (id, 0)).chain([(10, 2)]).collect();
    assert_eq!(ids(&got), want);
    assert!(!got.over_cap && !got.is_partial());
    // A different hash sharing the first 8 bytes is not the same content.
    let mut other = [7u8; 16];
    other[15] = 0;
    let none = ItemKeys { band_keys: &[], content_hash: ContentHash(other), signature: &[] };
    assert!(idx.candidates(none, None, lim).unwrap().ids.is_empty());
}

/// Issue 39 item 1: candidates per query never exceed `max_candidates`,
/// copies included; copies rank first (they are certain) and the band
/// candidates fill what they leave of the cap, best first.
#[test]
fn copies_count_against_the_cap_and_rank_first() {
    let mut idx = index(4, 2);
    let q = [1, 2, 3, 4, 5, 6, 7, 8];
    // 150 identical items: the cap holds the earliest 100 of them.
    for _ in 0..150 {
        add(&mut idx, &q, h(1));
    }
    let lim = QueryLimits { max_candidates: 100, max_bucket_read: 1000, threshold: 0.8 };
    let got = ask(&idx, &q, h(1), None, lim);
    assert_eq!(got.ids.len(), 100);
    assert_eq!(got.ids.iter().map(|c| c.id).collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
    assert!(got.ids.iter().all(|c| c.same_content && c.bands == 4));
    assert!(got.over_cap);

    // Three copies and twenty near items under a cap of five: the copies,
    // then the two near items whose signatures agree most with the query.
    let mut idx = index(4, 2);
    for i in 0..20 {
        add(&mut idx, &[1, 2, 3, 4, 5, 6, 90 + i, 91 + i], h(10 + i as u8));
    }
    let close = add(&mut idx, &[1, 2, 3, 4, 5, 6, 7, 99], h(50));
    let copies: Vec<u32> = (0..3).map(|_| add(&mut idx, &q, h(1))).collect();
    let lim = QueryLimits { max_candidates: 5, max_bucket_read: 1000, threshold: 0.8 };
    let got = ask(&idx, &q, h(1), None, lim);
    assert_eq!(got.ids.len(), 5);
    assert_eq!(got.ids[..3].iter().map(|c| c.id).collect::<Vec<_>>(), copies);
    assert!(got.ids[..3].iter().all(|c| c.same_content));
    assert_eq!((got.ids[3].id, got.ids[3].same_content), (close, false));
    assert!(got.over_cap);
    assert_eq!(got.distinct, 24);
}

/// Buckets shared by many items and buckets of one (band 1, and every
/// odd item's content hash, are the item's own: a batch's query skips
/// the tables where the item found its bucket empty).
#[test]
fn before_equals_querying_before_insertion() {
    let mut idx = index(4, 1);
    let lim = QueryLimits { max_candidates: 5, max_bucket_read: 7, threshold: 0.8 };
    let sigs: Vec<Vec<u32>> = (0..60u32).map(|i| vec![i % 3, 1000 + i, i % 5, i % 11]).collect();
    let mut then = Vec::new();
    for (i, s) in sigs.iter().enumerate() {
        let hash = if i % 2 == 0 { h((i % 4) as u8) } else { h(100 + i as u8) };
        then.push(ask(&idx, s, hash, None, lim));
        assert_eq!(add(&mut idx, s, hash), i as u32);
    }
    for (i, want) in then.iter().enumerate() {
        assert_eq!(&idx.candidates_before(i as u32, lim), want, "item {i}");
    }
}

#[test]
fn a_cut_far_below_the_threshold_is_not_partial() {
    // Twenty items agree with the query on one value in eight; one on all.
    let mut idx = index(8, 1);
    let q = [1, 2, 3, 4, 5, 6, 7, 8];
    for i in 0..20 {
        add(&mut idx, &[1, 100 + i, 101 + i, 102 + i, 103 + i, 104 + i, 105 + i, 106 + i], h(i as u8));
    }
    let lim = QueryLimits { max_candidates: 3, max_bucket_read: 100, threshold: 0.9 };
    let got = ask(&idx, &q, h(60), None, lim);
    assert!(got.over_cap && !got.cut_close && !got.is_partial(), "{got:?}");
    assert!(got.cut_estimate.unwrap() < 0.2);
    // A threshold the cut candidates could reach makes it partial.
    let got = ask(&idx, &q, h(60), None, QueryLimits { threshold: 0.1, ..lim });
    assert!(got.over_cap && got.cut_close && got.is_partial());
}

#[test]
fn an_image_rebuilds_the_same_answers() {
    let mut idx = index(3, 1);
    let lim = QueryLimits { max_candidates: 5, max_bucket_read: 7, threshold: 0.5 };
    for i in 0..60u32 {
        add(&mut idx, &[i % 3, i % 5, i % 11], h((i % 4) as u8));
    }
    idx.remove(7);
    idx.remove(8);
    let view = idx.view();
    let reference = idx.clone();
    idx.remove(9); // after the view: not in it
    let mut copy = CandidateIndex::new(idx.lsh(), idx.seed(), 3, 8).unwrap();
    let mut old_of = Vec::new();
    for id in 0..view.slots() {
        if let Some(r) = view.row(id) {
            assert_eq!(copy.insert_row(r.folded, r.sketch, r.content_hash).unwrap() as usize, old_of.len());
            old_of.push(id);
        }
    }
    assert_eq!((copy.len(), reference.len()), (58, 58));
    // Ids are renumbered densely in the same order, so every answer maps
    // back to the reference's, in the same order.
    for q in 0..40u32 {
        let sig = [q % 3, q % 7, q % 11];
        let got: Vec<(u32, u16)> =
            ask(&copy, &sig, h(1), None, lim).ids.iter().map(|c| (old_of[c.id as usize], c.bands)).collect();
        assert_eq!(got, ids(&ask(&reference, &sig, h(1), None, lim)), "query {q}");
    }
    assert!(copy.insert_row(&[1, 2], &[0; 3], h(0)).is_err());
}

#[test]
fn wrong_keys_are_an_error() {
    let mut idx = index(2, 2);
    let bad_bands = ItemKeys { band_keys: &[1], content_hash: h(0), signature: &[1, 2, 3, 4] };
    assert!(idx.insert(bad_bands).is_err());
    let bad_sig = ItemKeys { band_keys: &[1, 2], content_hash: h(0), signature: &[1, 2, 3] };
    assert!(idx.insert(bad_sig).is_err());
    assert!(CandidateIndex::new(LshParams::new(2, 2).unwrap(), 1, 4, 12).is_err());
    assert!(CandidateIndex::new(LshParams::new(2, 2).unwrap(), 1, 3, 8).is_err());
}
