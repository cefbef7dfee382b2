//! The ASCII paths of `unicode-v1`: bytes classified eight at a time in
//! general registers, runs of letters and digits copied lower-cased, and
//! the block path that takes 64 plain bytes at once. The block step is
//! chosen at run time: AVX-512 (one register, one compressing store),
//! AVX2 (a byte shuffle per eight bytes) or the portable one (tokens
//! appended one by one, the reference the others are tested against).
//! Each appends exactly what the general loop in the parent module would,
//! byte by byte: the parent's tests hold the step this CPU chooses to it,
//! and a test here every step this CPU runs to the portable one.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// For bytes below 0x80: the high bit of each byte of the result is set
/// iff that byte of `x` is in `lo..=hi` (no carry crosses a byte).
#[inline]
fn bytes_in_range(x: u64, lo: u8, hi: u8) -> u64 {
    let at_least = x.wrapping_add(ONES * u64::from(0x80 - lo));
    let above = x.wrapping_add(ONES * u64::from(0x7F - hi));
    at_least & !above & HIGH
}

/// The high bit of each byte of `w` that is an ASCII letter or digit.
#[inline]
fn alnum_bytes(w: u64) -> u64 {
    let x = w & !HIGH;
    (bytes_in_range(x, b'0', b'9') | bytes_in_range(x | (ONES * 0x20), b'a', b'z')) & !w
}

/// `w` with its ASCII upper-case letters lower-cased (other bytes kept).
#[inline]
fn ascii_lower_word(w: u64) -> u64 {
    let upper = bytes_in_range(w & !HIGH, b'A', b'Z') & !w;
    w | upper >> 2
}

/// `w` with its ASCII letters and digits lower-cased and every other byte a
/// space (what [`Block::lower`] holds).
#[inline]
fn spaced_lower_word(w: u64) -> u64 {
    let keep = high_bits_to_bytes(alnum_bytes(w));
    (ascii_lower_word(w) & keep) | ((ONES * u64::from(b' ')) & !keep)
}

/// Each byte 0xFF where `high` has its high bit set, 0 elsewhere.
#[inline]
fn high_bits_to_bytes(high: u64) -> u64 {
    (high >> 7).wrapping_mul(0xFF)
}

/// Appends the run of ASCII letters and digits that starts `bytes` (maybe
/// empty), lower-cased, to `out`, eight bytes at a time; returns its length.
#[inline]
pub(super) fn push_lower_alnum_run(bytes: &[u8], out: &mut String) -> usize {
    let mut n = 0;
    while let Some(chunk) = bytes.get(n..n + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let stop = !alnum_bytes(w) & HIGH;
        let take = if stop == 0 { 8 } else { (stop.trailing_zeros() / 8) as usize };
        // SAFETY: the first `take` bytes are ASCII letters and digits
        // (`stop` marks the first other byte).
        unsafe { push_head(out, ascii_lower_word(w).to_le_bytes(), take) };
        n += take;
        if take < 8 {
            return n;
        }
    }
    let rest = bytes[n..].iter().take_while(|b| b.is_ascii_alphanumeric()).count();
    let mut buf = [0u8; 8];
    buf[..rest].copy_from_slice(&bytes[n..n + rest]);
    buf.make_ascii_lowercase();
    assert!(buf[..rest].is_ascii());
    // SAFETY: the first `rest` bytes are ASCII (checked above).
    unsafe { push_head(out, buf, rest) };
    n + rest
}

/// Appends the first `keep` of `bytes` to `out`, storing all `N` at once
/// past its end: a copy of a length known only at run time would be a call
/// to `memcpy`, which costs more than the short copies it makes here.
///
/// # Safety
/// `keep <= N`, and `bytes[..keep]` is valid UTF-8 on its own.
#[inline(always)]
pub(super) unsafe fn push_head<const N: usize>(out: &mut String, bytes: [u8; N], keep: usize) {
    debug_assert!(keep <= N && std::str::from_utf8(&bytes[..keep]).is_ok());
    out.reserve(N);
    // SAFETY: `N` bytes fit in the capacity reserved above; the length
    // grows only over the first `keep`, valid UTF-8 as the caller
    // promises, so the string stays valid whatever the bytes past it are.
    unsafe {
        let v = out.as_mut_vec();
        let len = v.len();
        v.as_mut_ptr().add(len).cast::<[u8; N]>().write_unaligned(bytes);
        v.set_len(len + keep);
    }
}

/// Bytes the block path classifies at once.
pub(super) const BLOCK: usize = 64;

/// Up to [`BLOCK`] bytes of text classified at once, one bit per byte.
pub(super) struct Block {
    /// The bytes as a token holds them: ASCII letters and digits lower-cased,
    /// every other byte a space; padded so that a 32-byte copy from any
    /// offset of the block stays inside.
    lower: [u8; BLOCK + 32],
    /// ASCII letters and digits.
    alnum: u64,
    /// ASCII whitespace (what ends a fragment).
    space: u64,
    /// Bytes the general loop must take: not ASCII, a hyphen, an apostrophe.
    pub(super) special: u64,
}

impl Block {
    /// Appends the tokens of the block's first `plain` bytes (none of them
    /// special) to `out` exactly as the general loop would, byte by byte:
    /// a letter or digit continues or starts a token (lower-cased; a
    /// separator first unless it continues one), any other byte ends it,
    /// whitespace also starts a fragment. `at` is the block's offset in the
    /// text; `in_token` is the loop's state, carried in and out. Returns
    /// where the last fragment the bytes started begins, in the text and in
    /// `out` (none when they hold no whitespace).
    pub(super) fn append(
        &self,
        plain: usize,
        at: usize,
        out: &mut String,
        in_token: &mut bool,
    ) -> Option<(usize, usize)> {
        debug_assert!((8..=BLOCK).contains(&plain) && self.special & low_bits(plain) == 0);
        let (alnum, space) = (self.alnum & low_bits(plain), self.space & low_bits(plain));
        let last_space = (space != 0).then(|| 63 - space.leading_zeros() as usize);
        // Room for every byte, a separator before each token and the last
        // 32-byte copy's overrun.
        out.reserve(plain + plain / 2 + 2 + 32);
        // SAFETY: only ASCII bytes (letters, digits, spaces) are written,
        // and only within the capacity reserved above: the string stays
        // valid UTF-8.
        let v = unsafe { out.as_mut_vec() };
        let (dst, mut len) = (v.as_mut_ptr(), v.len());
        let mut frag_out = None;
        let mut m = alnum;
        while m != 0 {
            let start = m.trailing_zeros() as usize;
            // `m >> start` brought zeros in at the top: the run ends.
            let end = start + (!(m >> start)).trailing_zeros() as usize;
            if last_space.is_some_and(|s| start > s) && frag_out.is_none() {
                frag_out = Some(len);
            }
            if !(start == 0 && *in_token) && len > 0 {
                // SAFETY: within the reserved capacity.
                unsafe { dst.add(len).write(b' ') };
                len += 1;
            }
            // A token of a block is at most 64 bytes: one or two 32-byte
            // copies, written out (a loop of copies alone is turned into a
            // call to `memcpy` of the rounded length).
            // SAFETY: `start < end <= 64`, so 32 bytes from `start`, and
            // from `start + 32` when `end - start > 32`, lie inside `lower`
            // (64 + 32 bytes); `len + (end - start)` plus an overrun of at
            // most 31 bytes stays inside the reserved capacity.
            unsafe {
                copy_32(self.lower.as_ptr().add(start), dst.add(len));
                if end - start > 32 {
                    copy_32(self.lower.as_ptr().add(start + 32), dst.add(len + 32));
                }
            }
            len += end - start;
            m = if end >= 64 { 0 } else { m & (u64::MAX << end) };
        }
        // SAFETY: bytes up to `len` were written above (or were there).
        unsafe { v.set_len(len) };
        *in_token = alnum >> (plain - 1) & 1 == 1;
        last_space.map(|s| (at + s + 1, frag_out.unwrap_or(len)))
    }
}

/// What a block's first `plain` bytes append, as masks over the block: the
/// same bytes [`Block::append`] writes token by token, found at once, so
/// that a compressing store can write them without a branch per token.
struct Plan {
    /// The bytes of [`Block::lower`] to append, in order: the letters and
    /// digits, and before each token that starts after the block's first
    /// byte the byte before it (not a letter or digit: a space there) —
    /// except before the output's first token, which has no separator.
    keep: u64,
    /// A space to append before them (a token at the block's first byte
    /// that does not continue one, after earlier output).
    lead: bool,
    /// The last whitespace byte among the `plain`.
    last_space: Option<usize>,
    /// Whether the last of the `plain` bytes is inside a token.
    in_token: bool,
}

impl Plan {
    fn new(block_alnum: u64, block_space: u64, plain: usize, in_token: bool, out_empty: bool) -> Plan {
        debug_assert!((8..=BLOCK).contains(&plain));
        let (alnum, space) = (block_alnum & low_bits(plain), block_space & low_bits(plain));
        let starts = alnum & !(alnum << 1 | u64::from(in_token));
        let mut separators = starts >> 1;
        if out_empty {
            // No separator before the output's first token.
            separators &= !low_bits(alnum.trailing_zeros() as usize);
        }
        Plan {
            keep: alnum | separators,
            lead: starts & 1 == 1 && !out_empty,
            last_space: (space != 0).then(|| 63 - space.leading_zeros() as usize),
            in_token: alnum >> (plain - 1) & 1 == 1,
        }
    }

    /// Makes room in `out` for the lead space and `room` more bytes, and
    /// appends the lead space: returns the output's length before the
    /// block and where the plan's bytes go.
    fn open(&self, out: &mut String, room: usize) -> (usize, usize) {
        out.reserve(1 + room);
        let start = out.len();
        if self.lead {
            out.push(' ');
        }
        (start, out.len())
    }

    /// What [`Block::append`] returns, once `len` is the output's length
    /// before the block: where the last fragment the bytes started begins,
    /// in the text (the block is at `at`) and in the output — before the
    /// separator of the first token after that whitespace.
    fn fragment(&self, at: usize, len: usize) -> Option<(usize, usize)> {
        self.last_space
            .map(|s| (at + s + 1, len + usize::from(self.lead) + (self.keep & low_bits(s)).count_ones() as usize))
    }
}

/// One step of the block path at `at`: classifies the first [`BLOCK`] bytes
/// of `bytes` and, when the first eight or more are plain (none special),
/// appends their tokens to `out` as [`Block::append`] does. Returns how
/// many bytes were plain (none were taken when fewer than eight) and what
/// [`Block::append`] returns.
pub(super) type BlockStep = fn(&[u8], usize, &mut String, &mut bool) -> (usize, Option<(usize, usize)>);

/// The fastest block step this CPU runs, chosen at run time.
pub(super) fn block_step() -> BlockStep {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512_step_runs() {
            return |bytes, at, out, in_token| {
                // SAFETY: the CPU supports every feature the function
                // enables (`avx512_step_runs`).
                unsafe { step_avx512(bytes, at, out, in_token) }
            };
        }
        if avx2_step_runs() {
            return |bytes, at, out, in_token| {
                // SAFETY: the CPU supports every feature the function
                // enables (`avx2_step_runs`).
                unsafe { step_avx2(bytes, at, out, in_token) }
            };
        }
    }
    step_portable
}

/// Whether this CPU has every feature [`step_avx2`] enables.
#[cfg(target_arch = "x86_64")]
fn avx2_step_runs() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
}

/// Whether this CPU has every feature [`step_avx512`] enables.
#[cfg(target_arch = "x86_64")]
fn avx512_step_runs() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi2")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
}

/// Every block step this CPU runs, the portable one first (for tests).
#[cfg(test)]
fn block_steps() -> Vec<(&'static str, BlockStep)> {
    let mut steps: Vec<(&'static str, BlockStep)> = vec![("portable", step_portable)];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2_step_runs() {
            // SAFETY: checked just above.
            steps.push(("avx2", |bytes, at, out, in_token| unsafe { step_avx2(bytes, at, out, in_token) }));
        }
        if avx512_step_runs() {
            // SAFETY: checked just above.
            steps.push(("avx512", |bytes, at, out, in_token| unsafe { step_avx512(bytes, at, out, in_token) }));
        }
    }
    steps
}

/// The portable step: the classifier in general registers, tokens appended
/// one by one.
fn step_portable(bytes: &[u8], at: usize, out: &mut String, in_token: &mut bool) -> (usize, Option<(usize, usize)>) {
    let block = classify_block_swar(bytes);
    let plain = block.special.trailing_zeros() as usize;
    if plain < 8 {
        return (plain, None);
    }
    (plain, block.append(plain, at, out, in_token))
}

/// Shuffle indices that gather the bytes of an eight-byte group marked by
/// an eight-bit mask to its front, one `u64` per mask (index `k` in byte
/// `k`; the bytes past the count are never appended).
#[cfg(target_arch = "x86_64")]
static GATHER_8: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut bit, mut taken) = (0, 0);
        while bit < 8 {
            if mask >> bit & 1 == 1 {
                table[mask] |= (bit as u64) << (8 * taken);
                taken += 1;
            }
            bit += 1;
        }
        mask += 1;
    }
    table
};

/// The AVX2 step: the AVX2 classifier, then the plan's bytes appended eight
/// at a time through a byte shuffle, with no branch per token.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn step_avx2(bytes: &[u8], at: usize, out: &mut String, in_token: &mut bool) -> (usize, Option<(usize, usize)>) {
    use std::arch::x86_64::*;
    // SAFETY: the CPU supports AVX2 (this function's contract).
    let block = unsafe { classify_block_avx2(bytes) };
    let plain = block.special.trailing_zeros() as usize;
    if plain < 8 {
        return (plain, None);
    }
    let plan = Plan::new(block.alnum, block.space, plain, *in_token, out.is_empty());
    // Room for every plain byte and the last group's overrun.
    let (start, mut len) = plan.open(out, BLOCK + 8);
    // SAFETY: only ASCII bytes (letters, digits, spaces: `lower` holds no
    // other) are written, within the capacity reserved above; the length
    // grows over the bytes the plan appends.
    unsafe {
        let v = out.as_mut_vec();
        let dst = v.as_mut_ptr();
        for group in 0..BLOCK / 8 {
            let mask = (plan.keep >> (8 * group)) as u8;
            let src = _mm_loadl_epi64(block.lower.as_ptr().add(8 * group).cast());
            let gathered = _mm_shuffle_epi8(src, _mm_cvtsi64_si128(GATHER_8[usize::from(mask)] as i64));
            debug_assert!(v.capacity() - len >= 8);
            _mm_storel_epi64(dst.add(len).cast(), gathered);
            len += mask.count_ones() as usize;
        }
        v.set_len(len);
        *in_token = plan.in_token;
        (plain, plan.fragment(at, start))
    }
}

/// The AVX-512 step: 64 bytes classified in one register and the plan's
/// bytes appended by one compressing store (VBMI2).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,popcnt,bmi1")]
unsafe fn step_avx512(
    bytes: &[u8],
    at: usize,
    out: &mut String,
    in_token: &mut bool,
) -> (usize, Option<(usize, usize)>) {
    use std::arch::x86_64::*;
    assert!(bytes.len() >= BLOCK);
    let splat = |b: u8| _mm512_set1_epi8(b as i8);
    // SAFETY: `bytes` holds at least 64 bytes (asserted above).
    let v = unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) };
    // Bytes of `v` in `lo..=lo + span` (an unsigned compare of the difference).
    let within = |v: __m512i, lo: u8, span: u8| _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, splat(lo)), splat(span));
    let special =
        _mm512_movepi8_mask(v) | _mm512_cmpeq_epi8_mask(v, splat(b'-')) | _mm512_cmpeq_epi8_mask(v, splat(b'\''));
    let plain = special.trailing_zeros() as usize;
    if plain < 8 {
        return (plain, None);
    }
    let lower = _mm512_mask_add_epi8(v, within(v, b'A', 25), v, splat(0x20));
    let alnum = within(lower, b'a', 25) | within(v, b'0', 9);
    let space = _mm512_cmpeq_epi8_mask(v, splat(b' ')) | within(v, b'\t', 1) | within(v, 0x0C, 1);
    let plan = Plan::new(alnum, space, plain, *in_token, out.is_empty());
    // Letters and digits lower-cased, every other byte a space; the plan's
    // bytes of it gathered to the front.
    let gathered = _mm512_maskz_compress_epi8(plan.keep, _mm512_mask_blend_epi8(alnum, splat(b' '), lower));
    // Room for a whole register.
    let (start, len) = plan.open(out, BLOCK);
    // SAFETY: only ASCII bytes (letters, digits, spaces) are written, within
    // the capacity reserved above; the length grows over the bytes the plan
    // appends.
    unsafe {
        let v = out.as_mut_vec();
        debug_assert!(v.capacity() - len >= BLOCK);
        _mm512_storeu_si512(v.as_mut_ptr().add(len).cast(), gathered);
        v.set_len(len + plan.keep.count_ones() as usize);
        *in_token = plan.in_token;
        (plain, plan.fragment(at, start))
    }
}

/// Copies 32 bytes as two unaligned 16-byte moves.
///
/// # Safety
/// `src` must be valid for reading and `dst` for writing 32 bytes, and the
/// two ranges must not overlap.
#[inline(always)]
unsafe fn copy_32(src: *const u8, dst: *mut u8) {
    // SAFETY: as the caller promises.
    unsafe { dst.cast::<[u8; 32]>().write_unaligned(src.cast::<[u8; 32]>().read_unaligned()) }
}

/// The low `n` bits (n ≤ 64).
#[inline]
fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// One bit per byte of `w` from the high bit of each of its bytes.
#[inline]
fn high_bits_mask(w: u64) -> u64 {
    ((w >> 7) & ONES).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// The portable classifier: eight bytes at a time, in general registers.
fn classify_block_swar(bytes: &[u8]) -> Block {
    let mut block = Block { lower: [0; BLOCK + 32], alnum: 0, space: 0, special: 0 };
    for (k, chunk) in bytes[..BLOCK].chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let x = w & !HIGH;
        let space =
            (bytes_in_range(x, b' ', b' ') | bytes_in_range(x, b'\t', b'\n') | bytes_in_range(x, 0x0C, b'\r')) & !w;
        let special = (w & HIGH) | bytes_in_range(x, b'-', b'-') | bytes_in_range(x, b'\'', b'\'');
        block.alnum |= high_bits_mask(alnum_bytes(w)) << (8 * k);
        block.space |= high_bits_mask(space) << (8 * k);
        block.special |= high_bits_mask(special) << (8 * k);
        block.lower[8 * k..8 * k + 8].copy_from_slice(&spaced_lower_word(w).to_le_bytes());
    }
    block
}

/// The AVX2 classifier: 32 bytes at a time (signed byte compares: a byte
/// at or above 0x80 is negative, below every ASCII bound).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn classify_block_avx2(bytes: &[u8]) -> Block {
    use std::arch::x86_64::*;
    assert!(bytes.len() >= BLOCK);
    let mut block = Block { lower: [0; BLOCK + 32], alnum: 0, space: 0, special: 0 };
    let splat = |b: u8| _mm256_set1_epi8(b as i8);
    // Bytes of `v` in `lo..=hi` (ASCII bounds).
    let within = |v: __m256i, lo: u8, hi: u8| {
        _mm256_and_si256(_mm256_cmpgt_epi8(v, splat(lo - 1)), _mm256_cmpgt_epi8(splat(hi + 1), v))
    };
    for half in 0..2 {
        // SAFETY: `bytes` holds at least 64 bytes (asserted above).
        let v = unsafe { _mm256_loadu_si256(bytes.as_ptr().add(32 * half).cast()) };
        let lower = _mm256_or_si256(v, _mm256_and_si256(within(v, b'A', b'Z'), splat(0x20)));
        let alnum = _mm256_or_si256(within(lower, b'a', b'z'), within(v, b'0', b'9'));
        let lower = _mm256_blendv_epi8(splat(b' '), lower, alnum);
        let space = _mm256_or_si256(
            _mm256_cmpeq_epi8(v, splat(b' ')),
            _mm256_or_si256(within(v, b'\t', b'\n'), within(v, 0x0C, b'\r')),
        );
        let special =
            _mm256_or_si256(v, _mm256_or_si256(_mm256_cmpeq_epi8(v, splat(b'-')), _mm256_cmpeq_epi8(v, splat(b'\''))));
        // SAFETY: 32 bytes at `32 * half` lie inside `lower` (96 bytes).
        unsafe { _mm256_storeu_si256(block.lower.as_mut_ptr().add(32 * half).cast(), lower) };
        let bits = |m: __m256i| u64::from(_mm256_movemask_epi8(m) as u32) << (32 * half);
        block.alnum |= bits(alnum);
        block.space |= bits(space);
        block.special |= bits(special);
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alnum_runs_match_the_byte_predicate() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        for len in 0..40 {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        // Mostly letters and digits, with every byte value possible.
                        if rng.is_multiple_of(4) {
                            (rng >> 8) as u8
                        } else {
                            b"azAZ09mM5"[(rng >> 8) as usize % 9]
                        }
                    })
                    .collect();
                let want = bytes.iter().take_while(|b| b.is_ascii_alphanumeric()).count();
                let mut out = String::from("x");
                assert_eq!(push_lower_alnum_run(&bytes, &mut out), want, "{bytes:?}");
                assert_eq!(out.as_bytes()[1..], bytes[..want].to_ascii_lowercase(), "{bytes:?}");
            }
        }
        for b in 0..=255u8 {
            assert_eq!(
                push_lower_alnum_run(&[b'a', b'b', b'c', b'd', b'e', b'f', b'g', b], &mut String::new()),
                7 + usize::from(b.is_ascii_alphanumeric())
            );
        }
    }

    #[test]
    fn block_steps_append_what_the_portable_step_does() {
        let alphabet = b"aaeetnosrhlAZMQ0123456789      \n\t\r\x0b\x0c.,;:!?()/-'\x80\xff";
        let mut x = 7u64;
        let mut next = |n: usize| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as usize % n
        };
        let steps = block_steps();
        for round in 0..20_000 {
            // Blocks of mostly plain bytes, some with a special byte placed anywhere.
            let mut bytes: Vec<u8> = (0..BLOCK + 8).map(|_| alphabet[next(alphabet.len() - 4)]).collect();
            if round % 3 == 0 {
                bytes[next(BLOCK)] = alphabet[alphabet.len() - 4 + next(4)];
            }
            if round % 7 == 0 {
                bytes[..BLOCK].fill(b'q');
            }
            let before = ["", "x", "some earlier words"][next(3)];
            let in_token = !before.is_empty() && next(2) == 1;
            let at = next(1000);
            let run = |step: BlockStep| {
                let (mut out, mut in_token) = (String::from(before), in_token);
                let (plain, frag) = step(&bytes, at, &mut out, &mut in_token);
                (plain, frag, out, in_token)
            };
            let want = run(steps[0].1);
            for &(name, step) in &steps[1..] {
                let got = run(step);
                if want.0 < 8 {
                    assert_eq!((got.0, got.1, &got.2, got.3), (want.0, None, &before.to_owned(), in_token), "{name}");
                } else {
                    assert_eq!(
                        got,
                        want,
                        "{name} on {:?} after {before:?}, in token {in_token}",
                        String::from_utf8_lossy(&bytes)
                    );
                }
            }
        }
    }

    /// The AVX2 classifier where the CPU has it, else the portable one.
    fn classify_block_fastest(bytes: &[u8]) -> Block {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, the only feature the function enables.
            return unsafe { classify_block_avx2(bytes) };
        }
        classify_block_swar(bytes)
    }

    #[test]
    fn block_classifiers_agree_on_every_byte() {
        let all: Vec<u8> = (0..=255u8).collect();
        let mut x = 5u64;
        let mut blocks: Vec<Vec<u8>> = all.chunks(64).map(<[u8]>::to_vec).collect();
        blocks.extend((0..200).map(|_| {
            (0..64)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    all[(x >> 56) as usize]
                })
                .collect()
        }));
        for bytes in blocks {
            let (want, got) = (classify_block_swar(&bytes), classify_block_fastest(&bytes));
            assert_eq!(
                (want.alnum, want.space, want.special, &want.lower[..]),
                (got.alnum, got.space, got.special, &got.lower[..]),
                "{bytes:?}"
            );
            for (n, &b) in bytes.iter().enumerate() {
                let bit = |m: u64| m >> n & 1 == 1;
                assert_eq!(bit(want.alnum), b.is_ascii_alphanumeric(), "{b}");
                assert_eq!(bit(want.space), b.is_ascii_whitespace(), "{b}");
                assert_eq!(bit(want.special), b >= 0x80 || b == b'-' || b == b'\'', "{b}");
                let spaced = if b.is_ascii_alphanumeric() { b.to_ascii_lowercase() } else { b' ' };
                assert_eq!(want.lower[n], spaced, "{b}");
            }
        }
    }
}
