//! Where the tokens of a normalized text start, found once per text.
//!
//! A normalized text separates its tokens by single ASCII spaces, so token
//! `t` starts one byte after the text's `t`-th space and every word shingle
//! is the slice from one token's start to one byte before a later token's
//! start. [`Tokens::find`] writes those starts into one array, a 64-byte
//! block at a time with no branch per token; the shingle loop and the
//! shingle count read it, instead of each walking the text's spaces again.
//! Starts are kept only up to a cap (the tokens the shingle limit allows):
//! past it a text's tokens are counted, not stored.
//!
//! Three ways to fill it, chosen at run time, the same array from each:
//! AVX-512 (BW + VBMI2: the space mask compresses the block's byte indices
//! into place), AVX2 (the mask a byte at a time through a table of bit
//! positions, eight fixed steps per block), and a portable loop that walks
//! the spaces one by one — the reference the tests hold the others to.

/// Bytes one step of the fast paths looks at.
const BLOCK: usize = 64;

/// The token starts of one text, when kept ([`Tokens::kept`]): `starts[t]`
/// is where token `t` begins, and one more entry, one past the text's end,
/// closes the last token. An empty text has no tokens and no entries; a
/// text over the cap it was found with has its tokens counted and no
/// entries. The array is kept between texts, so a caller that reuses a
/// `Tokens` allocates only when a text has more tokens than any before it
/// (an array grown past [`RETAINED`] is given back by [`Tokens::trim`]).
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    starts: Vec<u32>,
    /// Tokens in the last text, whether or not their starts were kept.
    count: usize,
}

/// Capacity of the starts array kept between texts (2 MiB, room for the
/// starts of about 2^18 tokens: the array grows by doubling); a larger one
/// is given back by [`Tokens::trim`].
const RETAINED: usize = 1 << 19;

impl Tokens {
    /// Finds the token starts of `text` (tokens separated by single ASCII
    /// spaces, as a normalizer writes them; any other text is split at
    /// every space, empty tokens included) and returns how many tokens it
    /// has. Past `max_tokens` tokens the starts are not kept, only counted
    /// (so the array never holds more than `max_tokens` + [`BLOCK`] + 1
    /// entries); a text of `u32::MAX` bytes or more is only counted too.
    pub fn find(&mut self, text: &str, max_tokens: usize) -> usize {
        let bytes = text.as_bytes();
        self.trim();
        self.starts.clear();
        self.count = if bytes.is_empty() {
            0
        } else if bytes.len() >= u32::MAX as usize {
            spaces(bytes) + 1
        } else {
            let done = (finder())(bytes, max_tokens, &mut self.starts);
            let count = counted(bytes, done, self.starts.len());
            if count > max_tokens {
                // Past the cap (a finder may have read a block beyond it).
                self.starts.clear();
            }
            count
        };
        self.count
    }

    /// How many tokens the last text had.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Gives back a starts array grown past [`RETAINED`] (its starts are
    /// then no longer kept; the count stays).
    pub fn trim(&mut self) {
        if self.starts.capacity() > RETAINED {
            self.starts = Vec::new();
        }
    }

    /// Whether the starts of the last text were kept: it was empty, or had
    /// at most the `max_tokens` it was found with and under `u32::MAX`
    /// bytes.
    pub fn kept(&self) -> bool {
        self.starts.len() == self.count + usize::from(self.count > 0)
    }

    /// The byte range of the `width` tokens from token `first` on, without
    /// the space that follows them (`first + width <= count()`, starts kept).
    #[inline]
    pub(super) fn span(&self, first: usize, width: usize) -> std::ops::Range<usize> {
        self.starts[first] as usize..self.starts[first + width] as usize - 1
    }

    /// Whether these are the token count and (if kept) starts of `text`
    /// (for assertions).
    pub(super) fn describe(&self, text: &str) -> bool {
        let count = if text.is_empty() { 0 } else { spaces(text.as_bytes()) + 1 };
        if count != self.count {
            return false;
        }
        !self.kept()
            || text.is_empty()
            || self.starts.first() == Some(&0) && self.starts.last().map(|&e| e as usize) == Some(text.len() + 1)
    }
}

/// Spaces in `bytes`.
fn spaces(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b' ', bytes).count()
}

/// Tokens in `bytes` (not empty) after a finder read `done` of them and
/// wrote `entries` starts: one per token begun before `done` (and the
/// closing entry when it read them all), and one per space after.
fn counted(bytes: &[u8], done: usize, entries: usize) -> usize {
    if done == bytes.len() {
        entries - 1
    } else {
        entries + spaces(&bytes[done..])
    }
}

/// Fills `starts` (empty; `bytes` not empty and shorter than `u32::MAX`)
/// and returns how many bytes it read: all of them, or fewer when the
/// entries passed `max_tokens` (entry `t` is the start of token `t`, and
/// the text's tokens are the entries plus the spaces in what is left).
type Finder = fn(&[u8], usize, &mut Vec<u32>) -> usize;

/// The fastest finder this CPU runs, chosen once.
fn finder() -> Finder {
    static CHOSEN: std::sync::OnceLock<Finder> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if avx512_runs() {
                // SAFETY: the CPU has every feature the function enables.
                return |bytes, max, starts| unsafe { find_avx512(bytes, max, starts) };
            }
            if avx2_runs() {
                // SAFETY: as above.
                return |bytes, max, starts| unsafe { find_avx2(bytes, max, starts) };
            }
        }
        find_portable
    })
}

/// Whether this CPU has every feature [`find_avx512`] enables.
#[cfg(target_arch = "x86_64")]
fn avx512_runs() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi2")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// Whether this CPU has every feature [`find_avx2`] enables.
#[cfg(target_arch = "x86_64")]
fn avx2_runs() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
}

/// Every finder this CPU runs, the portable one first (for tests).
#[cfg(test)]
fn finders() -> Vec<(&'static str, Finder)> {
    let mut all: Vec<(&'static str, Finder)> = vec![("portable", find_portable)];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2_runs() {
            // SAFETY: checked just above.
            all.push(("avx2", |bytes, max, starts| unsafe { find_avx2(bytes, max, starts) }));
        }
        if avx512_runs() {
            // SAFETY: checked just above.
            all.push(("avx512", |bytes, max, starts| unsafe { find_avx512(bytes, max, starts) }));
        }
    }
    all
}

/// The reference: one space at a time.
fn find_portable(bytes: &[u8], max_tokens: usize, starts: &mut Vec<u32>) -> usize {
    starts.push(0);
    for at in memchr::memchr_iter(b' ', bytes) {
        if starts.len() > max_tokens {
            return at;
        }
        starts.push(at as u32 + 1);
    }
    starts.push(bytes.len() as u32 + 1);
    bytes.len()
}

/// Room for one block's starts (at most [`BLOCK`], each step may write a
/// full vector past the last one it keeps) beyond the `len` kept so far;
/// returns where to write. The array grows by doubling, so a text costs
/// O(log n) reallocations at most and a reused `Tokens` none. Returns the
/// array's start (callers write at `len` and after).
#[inline(always)]
fn room(starts: &mut Vec<u32>, len: usize) -> *mut u32 {
    if starts.capacity() < len + BLOCK + 1 {
        // SAFETY: the first `len` entries were written by the caller.
        unsafe { starts.set_len(len) };
        starts.reserve((len + BLOCK + 1).max(2 * starts.capacity()) - len);
    }
    debug_assert!(starts.capacity() > len + BLOCK);
    starts.as_mut_ptr()
}

/// AVX-512: each block's space mask compresses the byte indices 0..63 to
/// the front of a register (one instruction), which four widening adds
/// turn into starts; blocks with more than 16 spaces (rare) store more.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,popcnt")]
unsafe fn find_avx512(bytes: &[u8], max_tokens: usize, starts: &mut Vec<u32>) -> usize {
    use std::arch::x86_64::*;
    let n = bytes.len();
    let mut out = room(starts, 0);
    // SAFETY (every store below): `room` left BLOCK + 1 entries free past
    // `len`, and a block stores at most BLOCK.
    unsafe { *out = 0 };
    let mut len = 1;
    let index = _mm512_set_epi8(
        63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36,
        35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8,
        7, 6, 5, 4, 3, 2, 1, 0,
    );
    let space = _mm512_set1_epi8(b' ' as i8);
    let mut at = 0;
    while at < n {
        if len > max_tokens {
            // SAFETY: entries up to `len` are written.
            unsafe { starts.set_len(len) };
            return at;
        }
        out = room(starts, len);
        let valid = if n - at >= BLOCK { u64::MAX } else { (1u64 << (n - at)) - 1 };
        // SAFETY: the masked load reads only the `valid` bytes, in `bytes`.
        let block = unsafe { _mm512_maskz_loadu_epi8(valid, bytes.as_ptr().add(at).cast()) };
        let mask = _mm512_cmpeq_epi8_mask(block, space) & valid;
        let found = mask.count_ones() as usize;
        let packed = _mm512_maskz_compress_epi8(mask, index);
        let base = _mm512_set1_epi32(at as i32 + 1);
        macro_rules! put {
            ($k:expr, $quarter:expr) => {
                unsafe {
                    _mm512_storeu_si512(
                        out.add(len + 16 * $k).cast(),
                        _mm512_add_epi32(_mm512_cvtepu8_epi32($quarter), base),
                    )
                }
            };
        }
        put!(0, _mm512_castsi512_si128(packed));
        if found > 16 {
            put!(1, _mm512_extracti32x4_epi32::<1>(packed));
            if found > 32 {
                put!(2, _mm512_extracti32x4_epi32::<2>(packed));
                put!(3, _mm512_extracti32x4_epi32::<3>(packed));
            }
        }
        len += found;
        at += BLOCK;
    }
    // SAFETY: the last block left room past `len`; entries up to it are written.
    unsafe {
        *out.add(len) = n as u32 + 1;
        starts.set_len(len + 1);
    }
    n
}

/// Bit positions of each byte value, packed to the front (`k`-th set bit's
/// position in byte `k`; the bytes past the count are never kept).
#[cfg(target_arch = "x86_64")]
static POSITIONS_8: [u64; 256] = {
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

/// AVX2: the block's space mask, then eight fixed steps, one per byte of
/// the mask: its bit positions from a table, widened and stored as eight
/// starts, of which the byte's popcount are kept.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn find_avx2(bytes: &[u8], max_tokens: usize, starts: &mut Vec<u32>) -> usize {
    use std::arch::x86_64::*;
    let n = bytes.len();
    let mut out = room(starts, 0);
    // SAFETY (every store below): `room` left BLOCK + 1 entries free past
    // `len`; step `g` stores eight at `len` + (spaces before it) <= len + 56.
    unsafe { *out = 0 };
    let mut len = 1;
    let space = _mm256_set1_epi8(b' ' as i8);
    let mut tail = [0u8; BLOCK];
    let mut at = 0;
    while at < n {
        if len > max_tokens {
            // SAFETY: entries up to `len` are written.
            unsafe { starts.set_len(len) };
            return at;
        }
        out = room(starts, len);
        let src = if n - at >= BLOCK {
            // SAFETY: `at < n`.
            unsafe { bytes.as_ptr().add(at) }
        } else {
            // The last block (only one is short): zeros past the end are
            // never a space.
            tail[..n - at].copy_from_slice(&bytes[at..]);
            tail.as_ptr()
        };
        // SAFETY: `src` has BLOCK readable bytes (the text or `tail`).
        let (lo, hi) = unsafe { (_mm256_loadu_si256(src.cast()), _mm256_loadu_si256(src.add(32).cast())) };
        let mask = u64::from(_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, space)) as u32)
            | u64::from(_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, space)) as u32) << 32;
        let mut kept = len;
        for g in 0..8 {
            let byte = (mask >> (8 * g)) as u8;
            let positions = _mm_cvtsi64_si128(POSITIONS_8[byte as usize] as i64);
            let first = _mm256_set1_epi32((at + 8 * g) as i32 + 1);
            unsafe {
                _mm256_storeu_si256(out.add(kept).cast(), _mm256_add_epi32(_mm256_cvtepu8_epi32(positions), first))
            };
            kept += byte.count_ones() as usize;
        }
        len = kept;
        at += BLOCK;
    }
    // SAFETY: the last block left room past `len`; entries up to it are written.
    unsafe {
        *out.add(len) = n as u32 + 1;
        starts.set_len(len + 1);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `finder` keeps of `text` under `max_tokens` into a reused
    /// array, and the token count it implies.
    fn with(finder: Finder, text: &[u8], max_tokens: usize, starts: &mut Vec<u32>) -> (Vec<u32>, usize) {
        starts.clear();
        if text.is_empty() {
            return (Vec::new(), 0);
        }
        let done = finder(text, max_tokens, starts);
        assert!(done <= text.len());
        assert!(
            starts.len() <= max_tokens.saturating_add(BLOCK + 2),
            "{} entries kept under {max_tokens}",
            starts.len()
        );
        assert!(done == text.len() || starts.len() > max_tokens, "stopped before the cap");
        let count = counted(text, done, starts.len());
        (if count > max_tokens { Vec::new() } else { starts.clone() }, count)
    }

    fn texts() -> Vec<Vec<u8>> {
        let mut x = 0x1234_5678_9ABC_DEF1u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut texts: Vec<Vec<u8>> =
            vec![b" ".to_vec(), b"a".to_vec(), b"  ".to_vec(), vec![b' '; 64], vec![b' '; 200]];
        for len in (0..300).chain([1000, 4095, 20_000]) {
            for density in [2u64, 5, 16, 64] {
                // Spaces at random, runs of spaces, other bytes including
                // UTF-8 lead and continuation bytes and 0x20 + 0x80.
                let text: Vec<u8> = (0..len)
                    .map(|_| {
                        let r = next();
                        match r % density {
                            0 => b' ',
                            1 => [0xA0u8, 0xC3, 0x00, b'\t'][(r >> 8) as usize % 4],
                            _ => b'a' + (r >> 16) as u8 % 26,
                        }
                    })
                    .collect();
                texts.push(text);
            }
        }
        texts
    }

    #[test]
    fn every_finder_finds_what_the_portable_one_does() {
        let all = finders();
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(all.len() > 1, avx2_runs(), "an AVX2 CPU runs the AVX2 finder");
            assert_eq!(all.len() > 2, avx512_runs(), "an AVX-512 VBMI2 CPU runs the AVX-512 finder");
        }
        // One array per finder, reused across every text and cap, as a
        // `Tokens` reuses its own.
        let mut arrays: Vec<Vec<u32>> = vec![Vec::new(); all.len()];
        let mut tokens = Tokens::default();
        for text in &texts() {
            let all_tokens = if text.is_empty() { 0 } else { spaces(text) + 1 };
            for max_tokens in [usize::MAX, all_tokens, all_tokens.saturating_sub(1), 3, 0] {
                let (want, count) = with(find_portable, text, max_tokens, &mut arrays[0]);
                assert_eq!(count, all_tokens);
                assert_eq!(want.is_empty(), all_tokens > max_tokens || text.is_empty());
                for (k, &(name, finder)) in all.iter().enumerate().skip(1) {
                    let got = with(finder, text, max_tokens, &mut arrays[k]);
                    assert_eq!(
                        got,
                        (want.clone(), count),
                        "{name} under {max_tokens} on {:?}",
                        String::from_utf8_lossy(text)
                    );
                }
                // The chosen one, through the public path, on UTF-8 input.
                if let Ok(s) = std::str::from_utf8(text) {
                    assert_eq!(tokens.find(s, max_tokens), all_tokens);
                    assert_eq!(tokens.starts, want);
                    assert_eq!(tokens.kept(), all_tokens <= max_tokens, "{max_tokens}");
                    assert!(tokens.describe(s));
                }
            }
        }
    }

    #[test]
    fn reused_tokens_grow_and_shrink_with_the_text() {
        let mut t = Tokens::default();
        let long = vec!["ab"; 5000].join(" ");
        let longest = vec!["a"; RETAINED + 10].join(" ");
        for text in ["", "one", "one two", long.as_str(), "x y z", longest.as_str(), "a b", ""] {
            let want = if text.is_empty() { 0 } else { text.split(' ').count() };
            assert_eq!(t.find(text, usize::MAX), want, "{text:.20}");
            assert_eq!(t.count(), want);
            assert!(t.kept() && t.describe(text));
            if want >= 2 {
                assert_eq!(&text[t.span(0, 2)], text.splitn(3, ' ').take(2).collect::<Vec<_>>().join(" "));
            }
            assert!(t.starts.capacity() <= RETAINED + BLOCK + 1 || text.len() == longest.len());
        }
    }
}
