//! Ranking band candidates before the cap: the query itself, the sketch
//! agreement counts and the estimates they give, and the close-cut test.

use super::{hash_key, Candidate, CandidateIndex, CandidateSet};
use crate::hash::{fmix64, ContentHash};
use crate::lsh::postings::Screened;
use crate::lsh::QueryLimits;

impl CandidateIndex {
    /// Positions of `sketch` that agree with item `id`'s sketch.
    fn agreement(&self, sketch: &[u8], id: u32) -> u32 {
        self.agreement_of(sketch, self.sketch(id))
    }

    /// The [`rank_key`] of every `(id, bands)` against `sketch`. A dense
    /// neighbourhood (templated pages) ranks thousands of candidates per
    /// query, so the one-byte sketches are compared in one loop compiled
    /// for AVX2 where the CPU has it, not a dispatching call per candidate.
    fn rank_keys(&self, sketch: &[u8], ranked: &[(u32, u16)]) -> Vec<u64> {
        #[cfg(target_arch = "x86_64")]
        {
            if self.rank_bytes == 1 && avx2_popcnt() {
                // SAFETY: the CPU supports AVX2 and POPCNT, the features the function enables.
                return unsafe { self.rank_keys_avx2(sketch, ranked) };
            }
        }
        ranked
            .iter()
            .enumerate()
            .map(|(i, &(id, bands))| {
                self.prefetch_sketch(ranked, i);
                rank_key(self.agreement(sketch, id), bands, id)
            })
            .collect()
    }

    /// Candidates' sketches lie anywhere in the index: each is asked into
    /// the cache a few candidates before it is compared, so that the
    /// comparisons do not wait on memory one after another.
    #[inline(always)]
    fn prefetch_sketch(&self, ranked: &[(u32, u16)], i: usize) {
        const AHEAD: usize = 8;
        if let Some(&(id, _)) = ranked.get(i + AHEAD) {
            self.sketches.prefetch(id as usize);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn rank_keys_avx2(&self, sketch: &[u8], ranked: &[(u32, u16)]) -> Vec<u64> {
        let mut keys = Vec::with_capacity(ranked.len());
        for (i, &(id, bands)) in ranked.iter().enumerate() {
            self.prefetch_sketch(ranked, i);
            // SAFETY: this function's caller checked AVX2 and POPCNT.
            let agreement = unsafe { equal_bytes_avx2(sketch, self.sketch(id)) };
            keys.push(rank_key(agreement, bands, id));
        }
        keys
    }

    /// Positions of two sketches of this index's width that agree.
    fn agreement_of(&self, a: &[u8], b: &[u8]) -> u32 {
        match self.rank_bytes {
            1 => equal_bytes(a, b),
            w => a.chunks_exact(w).zip(b.chunks_exact(w)).map(|(x, y)| u32::from(x == y)).sum(),
        }
    }

    /// The rank keys of `ranked` against `sketch`, given the candidates'
    /// sketches in the same order (`sketches`, one [`Self::sketch_len`]
    /// after another): what [`CandidateIndex::select`] needs from a store
    /// that keeps sketches outside the index (the same keys the index
    /// computes from its own).
    pub fn rank_keys_by(&self, sketch: &[u8], ranked: &[(u32, u16)], sketches: &[u8]) -> Vec<u64> {
        let width = self.sketches.width().max(1);
        ranked
            .iter()
            .zip(sketches.chunks_exact(width))
            .map(|(&(id, bands), other)| rank_key(self.agreement_of(sketch, other), bands, id))
            .collect()
    }

    /// SimHash: whether sketch `other` is within the index's Hamming
    /// distance of `sketch` (always true for MinHash).
    pub fn within_hamming_of(&self, sketch: &[u8], other: &[u8]) -> bool {
        match self.max_hamming {
            None => true,
            Some(k) => self.agreement_of(sketch, other) + k >= self.num_perm as u32,
        }
    }

    /// Estimated Jaccard from an agreement count. MinHash: b-bit minwise
    /// hashing, agreement probability `J + (1 - J) / 2^b`. SimHash: the
    /// values are bits, kept whole, and agreement maps to Jaccard through
    /// the angle ([`crate::SignatureScheme::jaccard_from_agreement`]).
    fn estimate(&self, agreement: u32) -> f64 {
        let a = f64::from(agreement) / self.num_perm as f64;
        if self.scheme.is_simhash() {
            return self.scheme.jaccard_from_agreement(a);
        }
        let c = 0.5f64.powi(8 * self.rank_bytes as i32);
        ((a - c) / (1.0 - c)).clamp(0.0, 1.0)
    }

    /// The estimate below which a cut candidate is ruled out: `threshold`
    /// less three standard deviations of the agreement at the threshold
    /// and one position (a pair at the threshold is estimated lower with
    /// probability about 0.1 %), mapped back to Jaccard for SimHash.
    fn floor(&self, threshold: f64) -> f64 {
        let k = self.num_perm as f64;
        let p = self.scheme.agreement(threshold);
        let low = p - 3.0 * (p * (1.0 - p) / k).sqrt() - 1.0 / k;
        self.scheme.jaccard_from_agreement(low)
    }

    /// SimHash: whether item `id` is within the index's Hamming distance of
    /// `sketch` (always true for MinHash).
    fn within_hamming(&self, sketch: &[u8], id: u32) -> bool {
        self.max_hamming.is_none() || self.within_hamming_of(sketch, self.sketch(id))
    }

    pub(super) fn query(&self, q: &Query<'_>, limits: QueryLimits, keep: &dyn Fn(u32) -> bool) -> CandidateSet {
        let mut out = CandidateSet::default();
        // Asked for item `b` against the items before it: a table where `b`
        // found its bucket empty holds none of them, and is not read.
        let may_share = |table: usize| q.before.is_none_or(|b| self.postings.joined(table, b));
        let visible = |bucket: &'_ [u32]| -> usize {
            match q.before {
                None => bucket.len(),
                Some(b) => bucket.partition_point(|&x| x < b),
            }
        };
        // Bands shared per id, counted in a per-thread table indexed by id
        // (linear in the entries read; only the touched counters are reset).
        let ranked: Vec<(u32, u16)> = SHARED_BANDS.with(|table| {
            let mut counts = table.borrow_mut();
            if counts.len() < self.flags.len() {
                counts.resize(self.flags.len(), 0);
            }
            let mut distinct: Vec<u32> = Vec::new();
            // Every id is written past the end of `distinct`, which grows
            // by one only for an id not seen before: no branch on that
            // (which, in a dense neighbourhood, goes either way at random).
            let mut count = |ids: &[u32]| {
                distinct.reserve(ids.len());
                let spare = distinct.spare_capacity_mut();
                let mut new = 0;
                for &id in ids {
                    let c = &mut counts[id as usize];
                    spare[new].write(id);
                    new += usize::from(*c == 0);
                    *c += 1;
                }
                // SAFETY: the first `new` spare slots were written above.
                unsafe { distinct.set_len(distinct.len() + new) };
            };
            for (band, &key) in q.band_keys.iter().enumerate() {
                if !may_share(band) {
                    continue;
                }
                let (bucket, screened) = self.postings.screened_bucket(band, key);
                out.count_screen(screened, bucket.is_empty());
                let bucket = &bucket[..visible(bucket)];
                let n = bucket.len();
                if n > limits.max_bucket_read {
                    out.hot_buckets += 1;
                    // Read `max_bucket_read` entries from a rotation point that
                    // depends on the bucket, not always the oldest ones.
                    let start = (fmix64(u64::from(key) ^ ((band as u64) << 40) ^ n as u64) % n as u64) as usize;
                    let first = &bucket[start..(start + limits.max_bucket_read).min(n)];
                    count(first);
                    count(&bucket[..limits.max_bucket_read - first.len()]);
                    out.entries_read += limits.max_bucket_read;
                } else {
                    count(bucket);
                    out.entries_read += n;
                }
            }
            let ranked =
                distinct.iter().filter(|&&id| Some(id) != q.exclude).map(|&id| (id, counts[id as usize])).collect();
            for id in distinct {
                counts[id as usize] = 0;
            }
            ranked
        });
        let same_content = |id: u32| self.hashes.row(id as usize)[0] == q.hash.0;
        // Same content first: those copies are certain, and they count
        // against the cap like any other candidate.
        let content = self.lsh.bands as usize;
        let (copies, screened) = if may_share(content) {
            self.postings.screened_bucket(content, hash_key(&q.hash.0))
        } else {
            (&[][..], Screened::Unscreened)
        };
        out.count_screen(screened, copies.is_empty());
        let copies = copies[..visible(copies)].iter().copied().filter(|&id| Some(id) != q.exclude && same_content(id));
        let reads = SketchReads {
            same_content,
            within_hamming: |id: u32| self.within_hamming(q.sketch, id),
            rank_keys: |ranked: &[(u32, u16)]| self.rank_keys(q.sketch, ranked),
        };
        self.select(out, ranked, copies, reads, limits, keep)
    }

    /// The rule of a query past its bucket reads, in one place: the band
    /// candidates (`ranked`: each id with the bands it shares), filtered by
    /// `keep` and the Hamming gate; the query's copies (`copies`: the ids
    /// of equal content, earliest first, the query itself excluded) first,
    /// the earliest `max_candidates` of them; then the band candidates that
    /// are not copies, ranked by sketch agreement and cut at what the copies
    /// left of the cap, with the close cut kept in reserve. `out` holds the
    /// reads' counters. The in-memory index and the batch that keeps its
    /// postings on disk both decide through this function, so their
    /// candidates are the same.
    pub fn select<S, W, R>(
        &self,
        mut out: CandidateSet,
        mut ranked: Vec<(u32, u16)>,
        copies: impl Iterator<Item = u32>,
        reads: SketchReads<S, W, R>,
        limits: QueryLimits,
        keep: &dyn Fn(u32) -> bool,
    ) -> CandidateSet
    where
        S: Fn(u32) -> bool,
        W: Fn(u32) -> bool,
        R: FnOnce(&[(u32, u16)]) -> Vec<u64>,
    {
        let SketchReads { same_content, within_hamming, rank_keys } = reads;
        ranked.retain(|&(id, _)| keep(id) && within_hamming(id));
        let cap = limits.max_candidates;
        // The earliest `cap` copies (one more is read to know whether the
        // cap cut any).
        let mut same: Vec<Candidate> = copies
            .filter(|&id| keep(id))
            .take(cap + 1)
            .map(|id| Candidate { id, bands: 0, same_content: true })
            .collect();
        let same_cut = same.len() > cap;
        same.truncate(cap);
        // The band candidates that are copies are among `same` (or cut with
        // it): they keep the bands they share, and leave the ranking.
        let banded_seen = ranked.len();
        ranked.retain(|&(id, bands)| {
            if !same_content(id) {
                return true;
            }
            if let Ok(i) = same.binary_search_by_key(&id, |c| c.id) {
                same[i].bands = bands;
            }
            false
        });
        out.distinct = banded_seen + same.iter().filter(|c| c.bands == 0).count();
        let candidate = |id: u32, bands: u16| Candidate { id, bands, same_content: false };
        // What the copies left of the cap, for the band candidates.
        let room = cap - same.len();
        if same_cut {
            // A cut copy is the best cut candidate there can be.
            out.over_cap = true;
            out.cut_estimate = Some(1.0);
            out.cut_close = true;
        }
        if ranked.len() > room {
            out.over_cap = true;
            // Best first: agreement, then bands shared, falling; then id,
            // rising — packed into one integer, so that selecting and
            // sorting compare a word instead of three fields.
            let mut scored = rank_keys(&ranked);
            scored.select_nth_unstable(room);
            // Everything after position `room` ranks at most as high as it.
            let cut = self.estimate(unpack(scored[room]).0);
            let floor = self.floor(limits.threshold);
            if !same_cut {
                out.cut_estimate = Some(cut);
                out.cut_close = cut >= floor;
            }
            if cut >= floor {
                // The next best, for a caller that must look further among a
                // subset (a batch among its kept items) without asking again.
                let mut close: Vec<u64> =
                    scored[room..].iter().copied().filter(|&k| self.estimate(unpack(k).0) >= floor).collect();
                close.sort_unstable();
                out.close_cut_truncated = close.len() > cap;
                close.truncate(cap);
                out.close_cut = close
                    .into_iter()
                    .map(|k| {
                        let (_, bands, id) = unpack(k);
                        candidate(id, bands)
                    })
                    .collect();
            }
            scored.truncate(room);
            scored.sort_unstable();
            ranked = scored
                .into_iter()
                .map(|k| {
                    let (_, bands, id) = unpack(k);
                    (id, bands)
                })
                .collect();
        } else {
            ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        }
        out.ids = same;
        out.ids.extend(ranked.into_iter().map(|(id, bands)| candidate(id, bands)));
        out
    }
}

/// How [`CandidateIndex::select`] reads what it needs of a candidate:
/// whether it has the query's content, whether it passes the Hamming gate,
/// and the rank keys ([`rank_key`]) of a list of `(id, bands shared)`.
pub struct SketchReads<S, W, R> {
    /// The candidate's content hash equals the query's.
    pub same_content: S,
    /// SimHash: within the index's Hamming distance of the query (always
    /// true for MinHash).
    pub within_hamming: W,
    /// The rank key of each `(id, bands)`, in order.
    pub rank_keys: R,
}

impl<S, W, R> std::fmt::Debug for SketchReads<S, W, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SketchReads")
    }
}

/// One query's inputs.
pub(super) struct Query<'a> {
    pub(super) band_keys: &'a [u32],
    pub(super) hash: ContentHash,
    pub(super) sketch: &'a [u8],
    pub(super) exclude: Option<u32>,
    /// Only ids below this one: set only when asking for an indexed item
    /// with its own keys (the tables' `joined` bits are that item's).
    pub(super) before: Option<u32>,
}

/// Equal bytes at equal positions of two slices (over the shorter one's
/// length): compared 32 bytes at a time with AVX2 where the CPU has it
/// (chosen at run time), one by one otherwise.
fn equal_bytes(a: &[u8], b: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if avx2_popcnt() {
            // SAFETY: the CPU supports AVX2 and POPCNT, the features the function enables.
            return unsafe { equal_bytes_avx2(a, b) };
        }
    }
    equal_bytes_tail(a, b)
}

/// The CPU has what [`equal_bytes_avx2`] needs (every AVX2 CPU has POPCNT;
/// both are checked).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_popcnt() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
}

/// [`equal_bytes`] by 32-byte blocks: a byte compare gives a 32-bit mask of
/// the equal positions, counted by its ones.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
unsafe fn equal_bytes_avx2(a: &[u8], b: &[u8]) -> u32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (mut i, mut count) = (0usize, 0u32);
    while i + 32 <= n {
        // SAFETY: `i + 32 <= n`, the length of both slices' compared prefix.
        let (x, y) =
            unsafe { (_mm256_loadu_si256(a.as_ptr().add(i).cast()), _mm256_loadu_si256(b.as_ptr().add(i).cast())) };
        count += (_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, y)) as u32).count_ones();
        i += 32;
    }
    count + equal_bytes_tail(&a[i..n], &b[i..n])
}

/// [`equal_bytes`] one byte at a time.
#[inline]
fn equal_bytes_tail(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).map(|(x, y)| u32::from(x == y)).sum()
}

/// The ranking order as one integer, best lowest: agreement (at most
/// [`crate::minhash::MAX_NUM_PERM`]) and bands shared falling, then id
/// rising.
#[inline]
fn rank_key(agreement: u32, bands: u16, id: u32) -> u64 {
    debug_assert!(agreement <= 0xFFFF);
    u64::from(0xFFFF - agreement.min(0xFFFF)) << 48 | u64::from(0xFFFF - bands) << 32 | u64::from(id)
}

/// [`rank_key`]'s (agreement, bands, id).
#[inline]
fn unpack(key: u64) -> (u32, u16, u32) {
    (0xFFFF - (key >> 48) as u32, 0xFFFF - (key >> 32) as u16, key as u32)
}

thread_local! {
    /// Per-thread counters of bands shared, indexed by item id; all zero
    /// between queries.
    static SHARED_BANDS: std::cell::RefCell<Vec<u16>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::super::tests::{add, h};
    use super::*;

    #[test]
    fn rank_keys_order_as_the_three_fields() {
        let mut x = 11u64;
        let mut fields: Vec<(u32, u16, u32)> = (0..2000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((x >> 60) as u32 * 68, (x >> 20) as u16 % 5, (x >> 33) as u32 % 700)
            })
            .chain([(1024, u16::MAX, u32::MAX), (0, 0, 0), (1024, 0, 0), (0, u16::MAX, u32::MAX)])
            .collect();
        for &f in &fields {
            assert_eq!(unpack(rank_key(f.0, f.1, f.2)), f);
        }
        let mut keys: Vec<u64> = fields.iter().map(|&(a, b, id)| rank_key(a, b, id)).collect();
        fields.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        keys.sort_unstable();
        assert_eq!(keys.into_iter().map(unpack).collect::<Vec<_>>(), fields);
    }

    /// Bytes from a four-letter alphabet, so that about a quarter of the
    /// positions of two such slices agree.
    fn bytes(x: &mut u64, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (*x >> 61) as u8 & 3
            })
            .collect()
    }

    #[test]
    fn every_path_counts_as_the_byte_by_byte_count() {
        let mut x = 5u64;
        let lengths = [(0, 0), (1, 3), (31, 31), (32, 32), (33, 40), (100, 128), (128, 128), (200, 199), (1024, 1024)];
        for (n, m) in lengths {
            let (a, b) = (bytes(&mut x, n), bytes(&mut x, m));
            let want = a.iter().zip(&b).filter(|(p, q)| p == q).count() as u32;
            assert_eq!(equal_bytes_tail(&a, &b), want, "{n} {m}");
            assert_eq!(equal_bytes(&a, &b), want, "{n} {m}");
            assert_eq!(equal_bytes(&a, &a), n as u32);
            #[cfg(target_arch = "x86_64")]
            {
                if avx2_popcnt() {
                    // SAFETY: checked just above.
                    assert_eq!(unsafe { equal_bytes_avx2(&a, &b) }, want, "{n} {m}");
                }
            }
        }
    }

    #[test]
    fn ranking_keys_count_every_sketch_byte() {
        // 128 one-byte sketch values: the vector loop's 32-byte body runs.
        let lsh = crate::lsh::LshParams::new(16, 8).unwrap();
        let mut idx = CandidateIndex::new(lsh, 9, 128, 8).unwrap();
        let mut x = 3u64;
        let signature = |x: &mut u64| -> Vec<u32> {
            bytes(x, 128).into_iter().enumerate().map(|(i, b)| (i as u32) << 8 | u32::from(b)).collect()
        };
        let mut ranked = Vec::new();
        for n in 0..50u16 {
            let id = add(&mut idx, &signature(&mut x), h(n as u8));
            ranked.push((id, n % 7));
        }
        let query = idx.sketch_of(&signature(&mut x));
        let want: Vec<u64> =
            ranked.iter().map(|&(id, bands)| rank_key(equal_bytes_tail(&query, idx.sketch(id)), bands, id)).collect();
        assert!(want.iter().all(|&k| (16..=48).contains(&unpack(k).0)), "about a quarter of 128 agree");
        assert_eq!(idx.rank_keys(&query, &ranked), want);
    }
}
