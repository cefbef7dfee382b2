//! BLAKE3 of many short texts at once, bit-identical to `blake3::hash` of
//! each.
//!
//! The `blake3` crate hashes one message at a time: its SIMD kernels run
//! one lane per 1 KiB chunk *of that message*, so a 2.5 KB text (three
//! chunks) fills three lanes of sixteen and the rest of the work runs one
//! block at a time — about 1 GB/s on one core, against 7.6 GB/s for one
//! long buffer (measured, AMD EPYC with AVX-512). Here the lanes are
//! chunks of *different* texts: every chunk of every short text in a batch
//! is a job, jobs of about the same length share a pass, sixteen lanes
//! (AVX-512F) or eight (AVX2) compress side by side, and the chunk chaining
//! values of a text with more than one chunk are merged into its tree
//! by the crate's own `hazmat` functions. Texts of 16 chunks or more (over
//! 15 KiB) go to the crate, which already fills its lanes with them.
//!
//! The specification followed is BLAKE3's (hash mode, 32-byte output):
//! a chunk's blocks chain from the IV with the chunk's index as counter,
//! flags CHUNK_START on its first block and CHUNK_END on its last, ROOT
//! as well on the last block of a text of one chunk. The tests hold every
//! kernel to the crate on texts of every length class.

use super::ContentHash;

const CHUNK_LEN: usize = 1024;
const BLOCK_LEN: usize = 64;
/// Texts of this many chunks or more are hashed by the crate.
const BATCH_CHUNKS: usize = 16;

const IV: [u32; 8] = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19];
const CHUNK_START: u32 = 1;
const CHUNK_END: u32 = 2;
const ROOT: u32 = 8;

/// Message word order of each of the seven rounds.
const SCHEDULE: [[usize; 16]; 7] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8],
    [3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1],
    [10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6],
    [12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4],
    [9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7],
    [11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13],
];

/// The state words each G function of a round mixes: four columns, then
/// four diagonals; G function `i` takes message words `2i` and `2i + 1` of
/// the round's schedule.
const G: [[usize; 4]; 8] = [
    [0, 4, 8, 12],
    [1, 5, 9, 13],
    [2, 6, 10, 14],
    [3, 7, 11, 15],
    [0, 5, 10, 15],
    [1, 6, 11, 12],
    [2, 7, 8, 13],
    [3, 4, 9, 14],
];

/// One chunk of one text.
#[derive(Clone, Copy)]
struct Job<'a> {
    /// The chunk's bytes (1 to 1,024; empty only for an empty text).
    bytes: &'a [u8],
    /// The chunk's index in its text (the compression counter).
    counter: u64,
    /// Whether this chunk is its text's only one (its output is the hash).
    root: bool,
}

impl Job<'_> {
    fn blocks(&self) -> usize {
        self.bytes.len().div_ceil(BLOCK_LEN).max(1)
    }

    /// The bytes of block `b` (`b < blocks()`), zero-padded into `pad`
    /// when short, and the block's length and flags.
    #[inline]
    fn block<'p>(&'p self, b: usize, pad: &'p mut [u8; BLOCK_LEN]) -> (&'p [u8; BLOCK_LEN], u32, u32) {
        let last = self.blocks() - 1;
        let from = b * BLOCK_LEN;
        let rest = &self.bytes[from.min(self.bytes.len())..];
        let mut flags = if b == 0 { CHUNK_START } else { 0 };
        if b == last {
            flags |= CHUNK_END;
            if self.root {
                flags |= ROOT;
            }
        }
        if rest.len() >= BLOCK_LEN {
            let block: &[u8; BLOCK_LEN] = rest[..BLOCK_LEN].try_into().expect("64 bytes");
            (block, BLOCK_LEN as u32, flags)
        } else {
            *pad = [0; BLOCK_LEN];
            pad[..rest.len()].copy_from_slice(rest);
            (pad, rest.len() as u32, flags)
        }
    }
}

/// Computes the chaining value (or, for a root chunk, the hash) of up to
/// `LANES` jobs at once.
type Kernel = fn(&[Job<'_>], &mut [[u32; 8]]);

/// The widest kernel this CPU runs, chosen once; `None` where only the
/// crate's one-text-at-a-time path is fast.
fn kernel() -> Option<(Kernel, usize)> {
    static CHOSEN: std::sync::OnceLock<Option<(Kernel, usize)>> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F, all the function enables.
                return Some((|jobs, out| unsafe { x86::lanes16(jobs, out) }, 16));
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2, all the function enables.
                return Some((|jobs, out| unsafe { x86::lanes8(jobs, out) }, 8));
            }
        }
        None
    })
}

/// [`super::content_hash`] of each text, in order, into `out` (cleared
/// first).
pub fn content_hashes(texts: &[&[u8]], out: &mut Vec<ContentHash>) {
    out.clear();
    match kernel() {
        Some((kernel, lanes)) => hash_batched(texts, kernel, lanes, out),
        None => out.extend(texts.iter().map(|t| super::content_hash(t))),
    }
}

/// [`content_hashes`] with a given kernel (the tests run each).
fn hash_batched(texts: &[&[u8]], kernel: Kernel, lanes: usize, out: &mut Vec<ContentHash>) {
    out.resize(texts.len(), ContentHash([0; 16]));
    // Every chunk of the batched texts in text and chunk order, and each
    // such text's run of them: (text, first job, chunks).
    let mut jobs: Vec<Job<'_>> = Vec::new();
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let chunks = text.len().div_ceil(CHUNK_LEN).max(1);
        if chunks >= BATCH_CHUNKS {
            out[i] = super::content_hash(text);
            continue;
        }
        runs.push((i, jobs.len(), chunks));
        for c in 0..chunks {
            let bytes = &text[(c * CHUNK_LEN).min(text.len())..((c + 1) * CHUNK_LEN).min(text.len())];
            jobs.push(Job { bytes, counter: c as u64, root: chunks == 1 });
        }
    }
    // Jobs of the same length share a pass: full chunks first, then the
    // texts' last chunks by length; each result goes back to its job's place.
    let mut passes: Vec<usize> = (0..jobs.len()).collect();
    passes.sort_by_key(|&j| std::cmp::Reverse(jobs[j].blocks()));
    let mut cvs = vec![[0u32; 8]; jobs.len()];
    let (mut group, mut group_cvs) = (Vec::with_capacity(lanes), vec![[0u32; 8]; lanes]);
    for pass in passes.chunks(lanes) {
        group.clear();
        group.extend(pass.iter().map(|&j| jobs[j]));
        kernel(&group, &mut group_cvs[..pass.len()]);
        for (&j, cv) in pass.iter().zip(&group_cvs) {
            cvs[j] = *cv;
        }
    }
    let mut chain: Vec<blake3::hazmat::ChainingValue> = Vec::new();
    for (text, first, chunks) in runs {
        let cvs = &cvs[first..first + chunks];
        out[text] = if chunks == 1 {
            truncate(&words_to_bytes(&cvs[0]))
        } else {
            chain.clear();
            chain.extend(cvs.iter().map(words_to_bytes));
            truncate(root_of(&chain).as_bytes())
        };
    }
}

/// The hash of a text whose chunk chaining values are `cvs` (two or
/// more): BLAKE3's tree, whose left subtree holds the largest power of two
/// of chunks smaller than the whole.
fn root_of(cvs: &[blake3::hazmat::ChainingValue]) -> blake3::Hash {
    let left = left_len(cvs.len());
    blake3::hazmat::merge_subtrees_root(&subtree(&cvs[..left]), &subtree(&cvs[left..]), blake3::hazmat::Mode::Hash)
}

/// The chaining value of a subtree of chunks (not the root).
fn subtree(cvs: &[blake3::hazmat::ChainingValue]) -> blake3::hazmat::ChainingValue {
    if cvs.len() == 1 {
        return cvs[0];
    }
    let left = left_len(cvs.len());
    blake3::hazmat::merge_subtrees_non_root(&subtree(&cvs[..left]), &subtree(&cvs[left..]), blake3::hazmat::Mode::Hash)
}

/// Chunks in the left subtree of `n` (at least two): the largest power of
/// two below `n`.
fn left_len(n: usize) -> usize {
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

fn words_to_bytes(words: &[u32; 8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, w) in out.chunks_exact_mut(4).zip(words) {
        o.copy_from_slice(&w.to_le_bytes());
    }
    out
}

fn truncate(bytes: &[u8; 32]) -> ContentHash {
    let mut out = [0u8; 16];
    out.copy_from_slice(&bytes[..16]);
    ContentHash(out)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Job, BLOCK_LEN, G, IV, SCHEDULE};

    /// Lanes done with their blocks read this one.
    static ZERO: [u8; BLOCK_LEN] = [0; BLOCK_LEN];

    /// The scalar side of a pass over up to `N` jobs, one per lane: the
    /// counters, and each block's bytes, lengths and flags per lane.
    struct Plan<'j, 'a, const N: usize> {
        jobs: &'j [Job<'a>],
        pads: [[u8; BLOCK_LEN]; N],
    }

    /// Block `b` of every lane: its 64 bytes, length and flags, and a bit
    /// per lane still running.
    struct Step<'p, const N: usize> {
        blocks: [&'p [u8; BLOCK_LEN]; N],
        lens: [u32; N],
        flags: [u32; N],
        active: u32,
    }

    impl<'j, 'a, const N: usize> Plan<'j, 'a, N> {
        fn new(jobs: &'j [Job<'a>]) -> Self {
            assert!(jobs.len() <= N);
            Plan { jobs, pads: [[0; BLOCK_LEN]; N] }
        }

        /// Low and high halves of each lane's counter.
        fn counters(&self) -> ([u32; N], [u32; N]) {
            let (mut lo, mut hi) = ([0u32; N], [0u32; N]);
            for (l, job) in self.jobs.iter().enumerate() {
                lo[l] = job.counter as u32;
                hi[l] = (job.counter >> 32) as u32;
            }
            (lo, hi)
        }

        /// Blocks in the longest job.
        fn blocks(&self) -> usize {
            self.jobs.iter().map(Job::blocks).max().unwrap_or(0)
        }

        fn step(&mut self, b: usize) -> Step<'_, N> {
            let mut step = Step { blocks: [&ZERO; N], lens: [0; N], flags: [0; N], active: 0 };
            for (l, (job, pad)) in self.jobs.iter().zip(self.pads.iter_mut()).enumerate() {
                if b < job.blocks() {
                    let (block, len, flags) = job.block(b, pad);
                    (step.blocks[l], step.lens[l], step.flags[l]) = (block, len, flags);
                    step.active |= 1 << l;
                }
            }
            step
        }

        /// Each lane's words out of eight vectors of `N` lanes (stored).
        fn unpack(&self, words: &[[u32; N]; 8], out: &mut [[u32; 8]]) {
            for (l, o) in out.iter_mut().enumerate().take(self.jobs.len()) {
                for (i, word) in o.iter_mut().enumerate() {
                    *word = words[i][l];
                }
            }
        }
    }

    /// Up to 16 jobs, one per lane of a 512-bit register.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn lanes16(jobs: &[Job<'_>], out: &mut [[u32; 8]]) {
        let mut plan = Plan::<16>::new(jobs);
        let (lo, hi) = plan.counters();
        let (counter_lo, counter_hi) = (load16(&lo), load16(&hi));
        let mut h = IV.map(|w| _mm512_set1_epi32(w as i32));
        for b in 0..plan.blocks() {
            let step = plan.step(b);
            let m = transpose16(step.blocks.map(|block| load16(block)));
            let iv = IV.map(|w| _mm512_set1_epi32(w as i32));
            let mut v = [
                h[0],
                h[1],
                h[2],
                h[3],
                h[4],
                h[5],
                h[6],
                h[7],
                iv[0],
                iv[1],
                iv[2],
                iv[3],
                counter_lo,
                counter_hi,
                load16(&step.lens),
                load16(&step.flags),
            ];
            for s in &SCHEDULE {
                round16(&mut v, &m, s);
            }
            for i in 0..8 {
                h[i] = _mm512_mask_xor_epi32(h[i], step.active as u16, v[i], v[i + 8]);
            }
        }
        let mut words = [[0u32; 16]; 8];
        for (w, v) in words.iter_mut().zip(&h) {
            // SAFETY: `w` is 64 bytes, written whole.
            unsafe { _mm512_storeu_si512(w.as_mut_ptr().cast(), *v) };
        }
        plan.unpack(&words, out);
    }

    /// 64 bytes as one vector.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load16<T: Copy, const N: usize>(bytes: &[T; N]) -> __m512i {
        const { assert!(size_of::<[T; N]>() == 64) };
        // SAFETY: the array is 64 bytes (checked above), read unaligned.
        unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn round16(v: &mut [__m512i; 16], m: &[__m512i; 16], s: &[usize; 16]) {
        for (i, &[a, b, c, d]) in G.iter().enumerate() {
            g16(v, a, b, c, d, m[s[2 * i]], m[s[2 * i + 1]]);
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn g16(v: &mut [__m512i; 16], a: usize, b: usize, c: usize, d: usize, x: __m512i, y: __m512i) {
        v[a] = _mm512_add_epi32(_mm512_add_epi32(v[a], v[b]), x);
        v[d] = _mm512_ror_epi32::<16>(_mm512_xor_si512(v[d], v[a]));
        v[c] = _mm512_add_epi32(v[c], v[d]);
        v[b] = _mm512_ror_epi32::<12>(_mm512_xor_si512(v[b], v[c]));
        v[a] = _mm512_add_epi32(_mm512_add_epi32(v[a], v[b]), y);
        v[d] = _mm512_ror_epi32::<8>(_mm512_xor_si512(v[d], v[a]));
        v[c] = _mm512_add_epi32(v[c], v[d]);
        v[b] = _mm512_ror_epi32::<7>(_mm512_xor_si512(v[b], v[c]));
    }

    /// Row `l` holds lane `l`'s 16 message words; the result's vector `w`
    /// holds word `w` of every lane.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn transpose16(r: [__m512i; 16]) -> [__m512i; 16] {
        // In 128-bit lane j, q[k][g] holds word 4j + k of rows 4g..4g+3.
        let mut q = [[_mm512_setzero_si512(); 4]; 4];
        for g in 0..4 {
            let (r0, r1, r2, r3) = (r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]);
            let ab0 = _mm512_unpacklo_epi32(r0, r1);
            let ab1 = _mm512_unpackhi_epi32(r0, r1);
            let cd0 = _mm512_unpacklo_epi32(r2, r3);
            let cd1 = _mm512_unpackhi_epi32(r2, r3);
            q[0][g] = _mm512_unpacklo_epi64(ab0, cd0);
            q[1][g] = _mm512_unpackhi_epi64(ab0, cd0);
            q[2][g] = _mm512_unpacklo_epi64(ab1, cd1);
            q[3][g] = _mm512_unpackhi_epi64(ab1, cd1);
        }
        let mut m = [_mm512_setzero_si512(); 16];
        for (k, q) in q.iter().enumerate() {
            // Lanes 0, 1 of groups 0 and 1; lanes 2, 3 of them; the same
            // of groups 2 and 3.
            let x_lo = _mm512_shuffle_i32x4::<0x44>(q[0], q[1]);
            let x_hi = _mm512_shuffle_i32x4::<0xEE>(q[0], q[1]);
            let y_lo = _mm512_shuffle_i32x4::<0x44>(q[2], q[3]);
            let y_hi = _mm512_shuffle_i32x4::<0xEE>(q[2], q[3]);
            m[k] = _mm512_shuffle_i32x4::<0x88>(x_lo, y_lo);
            m[4 + k] = _mm512_shuffle_i32x4::<0xDD>(x_lo, y_lo);
            m[8 + k] = _mm512_shuffle_i32x4::<0x88>(x_hi, y_hi);
            m[12 + k] = _mm512_shuffle_i32x4::<0xDD>(x_hi, y_hi);
        }
        m
    }

    /// Up to 8 jobs, one per lane of a 256-bit register.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn lanes8(jobs: &[Job<'_>], out: &mut [[u32; 8]]) {
        let mut plan = Plan::<8>::new(jobs);
        let (lo, hi) = plan.counters();
        let (counter_lo, counter_hi) = (load8(&lo, 0), load8(&hi, 0));
        let mut h = IV.map(|w| _mm256_set1_epi32(w as i32));
        for b in 0..plan.blocks() {
            let step = plan.step(b);
            let low = transpose8(step.blocks.map(|block| load8(block, 0)));
            let high = transpose8(step.blocks.map(|block| load8(block, 32)));
            let m: [__m256i; 16] = std::array::from_fn(|w| if w < 8 { low[w] } else { high[w - 8] });
            let iv = IV.map(|w| _mm256_set1_epi32(w as i32));
            let mut v = [
                h[0],
                h[1],
                h[2],
                h[3],
                h[4],
                h[5],
                h[6],
                h[7],
                iv[0],
                iv[1],
                iv[2],
                iv[3],
                counter_lo,
                counter_hi,
                load8(&step.lens, 0),
                load8(&step.flags, 0),
            ];
            for s in &SCHEDULE {
                round8(&mut v, &m, s);
            }
            let active: [u32; 8] = std::array::from_fn(|l| if step.active >> l & 1 == 1 { u32::MAX } else { 0 });
            let active = load8(&active, 0);
            for i in 0..8 {
                h[i] = _mm256_blendv_epi8(h[i], _mm256_xor_si256(v[i], v[i + 8]), active);
            }
        }
        let mut words = [[0u32; 8]; 8];
        for (w, v) in words.iter_mut().zip(&h) {
            // SAFETY: `w` is 32 bytes, written whole.
            unsafe { _mm256_storeu_si256(w.as_mut_ptr().cast(), *v) };
        }
        plan.unpack(&words, out);
    }

    /// The 32 bytes of `bytes` from `at` on as one vector.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load8<T: Copy, const N: usize>(bytes: &[T; N], at: usize) -> __m256i {
        assert!(at + 32 <= size_of::<[T; N]>());
        // SAFETY: 32 bytes from `at` are in the array (checked above).
        unsafe { _mm256_loadu_si256(bytes.as_ptr().cast::<u8>().add(at).cast()) }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn round8(v: &mut [__m256i; 16], m: &[__m256i; 16], s: &[usize; 16]) {
        for (i, &[a, b, c, d]) in G.iter().enumerate() {
            g8(v, a, b, c, d, m[s[2 * i]], m[s[2 * i + 1]]);
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn g8(v: &mut [__m256i; 16], a: usize, b: usize, c: usize, d: usize, x: __m256i, y: __m256i) {
        // Rotations by 16 and 8 move whole bytes: one shuffle each.
        let rot16 = _mm256_setr_epi8(
            2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
        );
        let rot8 = _mm256_setr_epi8(
            1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12, 1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12,
        );
        v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), x);
        v[d] = _mm256_shuffle_epi8(_mm256_xor_si256(v[d], v[a]), rot16);
        v[c] = _mm256_add_epi32(v[c], v[d]);
        let t = _mm256_xor_si256(v[b], v[c]);
        v[b] = _mm256_or_si256(_mm256_srli_epi32::<12>(t), _mm256_slli_epi32::<20>(t));
        v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), y);
        v[d] = _mm256_shuffle_epi8(_mm256_xor_si256(v[d], v[a]), rot8);
        v[c] = _mm256_add_epi32(v[c], v[d]);
        let t = _mm256_xor_si256(v[b], v[c]);
        v[b] = _mm256_or_si256(_mm256_srli_epi32::<7>(t), _mm256_slli_epi32::<25>(t));
    }

    /// Row `l` holds eight words of lane `l`; the result's vector `w`
    /// holds word `w` of every lane.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn transpose8(r: [__m256i; 8]) -> [__m256i; 8] {
        // In 128-bit lane j, q[k][g] holds word 4j + k of rows 4g..4g+3.
        let mut q = [[_mm256_setzero_si256(); 2]; 4];
        for g in 0..2 {
            let (r0, r1, r2, r3) = (r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]);
            let ab0 = _mm256_unpacklo_epi32(r0, r1);
            let ab1 = _mm256_unpackhi_epi32(r0, r1);
            let cd0 = _mm256_unpacklo_epi32(r2, r3);
            let cd1 = _mm256_unpackhi_epi32(r2, r3);
            q[0][g] = _mm256_unpacklo_epi64(ab0, cd0);
            q[1][g] = _mm256_unpackhi_epi64(ab0, cd0);
            q[2][g] = _mm256_unpacklo_epi64(ab1, cd1);
            q[3][g] = _mm256_unpackhi_epi64(ab1, cd1);
        }
        let mut m = [_mm256_setzero_si256(); 8];
        for (k, q) in q.iter().enumerate() {
            m[k] = _mm256_permute2x128_si256::<0x20>(q[0], q[1]);
            m[4 + k] = _mm256_permute2x128_si256::<0x31>(q[0], q[1]);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts() -> Vec<Vec<u8>> {
        let mut x = 5u64;
        let mut byte = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 56) as u8
        };
        let mut lens: Vec<usize> = (0..=130).collect();
        lens.extend([191, 192, 193, 1023, 1024, 1025, 1500, 2047, 2048, 2049, 2570, 3071, 3072, 3073, 4096, 5000]);
        lens.extend([
            7 * 1024 + 3,
            8 * 1024,
            15 * 1024,
            15 * 1024 + 1,
            16 * 1024 - 1,
            16 * 1024,
            16 * 1024 + 1,
            40_000,
        ]);
        // A last chunk of every block count, full or partial last block,
        // in texts of one, two and three chunks.
        for chunks in 0..3 {
            for blocks in 0..16 {
                for rest in [0, 1, 63] {
                    lens.push(chunks * 1024 + blocks * 64 + rest);
                }
            }
        }
        lens.into_iter().map(|n| (0..n).map(|_| byte()).collect()).collect()
    }

    fn check(kernel: Kernel, lanes: usize) {
        let texts = texts();
        let want: Vec<ContentHash> = texts.iter().map(|t| super::super::content_hash(t)).collect();
        // The whole set at once, and in shifting windows (other groupings
        // of jobs into passes).
        let all: Vec<&[u8]> = texts.iter().map(Vec::as_slice).collect();
        let mut got = vec![ContentHash([1; 16])];
        hash_batched(&all, kernel, lanes, &mut got);
        assert_eq!(got, want);
        for size in [1, 2, 3, 7, 16, 17] {
            for (i, window) in all.windows(size).enumerate().step_by(5) {
                hash_batched(window, kernel, lanes, &mut got);
                assert_eq!(got, want[i..i + size], "window {i} of {size}");
            }
        }
    }

    #[test]
    fn batched_hashes_are_blake3() {
        let mut ran = 0;
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            check(|jobs, out| unsafe { x86::lanes16(jobs, out) }, 16);
            ran += 1;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            check(|jobs, out| unsafe { x86::lanes8(jobs, out) }, 8);
            ran += 1;
        }
        // The widest kernel this CPU runs is the one chosen.
        #[cfg(target_arch = "x86_64")]
        {
            let widest = if std::arch::is_x86_feature_detected!("avx512f") {
                Some(16)
            } else if std::arch::is_x86_feature_detected!("avx2") {
                Some(8)
            } else {
                None
            };
            assert_eq!(kernel().map(|(_, lanes)| lanes), widest);
        }
        let texts = texts();
        let all: Vec<&[u8]> = texts.iter().map(Vec::as_slice).collect();
        let mut got = Vec::new();
        content_hashes(&all, &mut got);
        assert_eq!(got, all.iter().map(|t| super::super::content_hash(t)).collect::<Vec<_>>());
        eprintln!("{ran} batched kernels checked against the blake3 crate");
    }

    #[test]
    fn left_subtrees_are_powers_of_two() {
        assert_eq!([2, 3, 4, 5, 8, 9, 15].map(left_len), [1, 2, 2, 4, 4, 8, 8]);
    }
}
