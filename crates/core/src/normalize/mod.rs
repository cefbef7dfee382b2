//! Versioned text normalizers.
//!
//! A normalizer turns raw text into a canonical token string: tokens separated
//! by exactly one ASCII space, no leading or trailing space. Everything
//! downstream (shingles, the exact content hash) reads only that string, so the
//! normalizer's version is part of every fingerprint and is stored with every
//! item. A version never changes behaviour once released; a new behaviour is a
//! new version.
//!
//! | version      | what it keeps | what it erases |
//! |--------------|---------------|----------------|
//! | `seed-v1`    | runs of `[a-z0-9]` after Unicode lower-casing (exactly the seed's `re.findall(r"[a-z0-9]+", text.lower())`) | case; every non-ASCII letter and digit (they split tokens); all punctuation and whitespace differences |
//! | `unicode-v1` | runs of Unicode letters, digits and combining marks; each Han / Hiragana / Katakana character as its own token | compatibility forms (NFKC: full-width, ligatures ﬁ→fi, superscripts); case (lower-casing plus ß→ss, ς→σ); punctuation and whitespace differences; apostrophes inside words (`don't` = `dont`); soft hyphens; hyphenated line breaks (`exam-⏎ple` = `example`) |
//!
//! Neither version folds accents or digits, and neither segments scripts
//! written without spaces other than CJK (Thai, Lao, Khmer, ...: a whole
//! phrase becomes one token; use character shingles for such text).

use std::sync::OnceLock;

use unicode_normalization::char::{canonical_combining_class, is_combining_mark};
use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};

use crate::error::{Error, Result};

mod ascii;

use ascii::{block_step, push_lower_alnum_run, BLOCK};

/// A normalization version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Normalizer {
    /// `seed-v1`: the seed's reference tokenizer, `[a-z0-9]+` on lower-cased text.
    #[serde(rename = "seed-v1")]
    Seed,
    /// `unicode-v1`: NFKC, case folding, punctuation folding, hyphenation joining.
    #[serde(rename = "unicode-v1")]
    #[default]
    Unicode,
}

impl Normalizer {
    /// The stable version string stored with every fingerprint.
    pub fn version(self) -> &'static str {
        match self {
            Normalizer::Seed => "seed-v1",
            Normalizer::Unicode => "unicode-v1",
        }
    }

    /// Parses a user-facing name: `seed`, `seed-v1`, `default`, `unicode`, `unicode-v1`.
    pub fn from_name(name: &str) -> Result<Normalizer> {
        match name {
            "seed" | "seed-v1" => Ok(Normalizer::Seed),
            "default" | "unicode" | "unicode-v1" => Ok(Normalizer::Unicode),
            other => Err(Error::unknown_version("normalizer", other)),
        }
    }

    /// Normalizes `text` into a new string.
    pub fn normalize(self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        self.normalize_into(text, &mut out);
        out
    }

    /// Normalizes `text`, replacing the contents of `out` (whose capacity is reused).
    pub fn normalize_into(self, text: &str, out: &mut String) {
        out.clear();
        match self {
            Normalizer::Seed => seed_v1(text, out),
            Normalizer::Unicode => {
                // Most real text is already NFKC: only the whitespace-delimited
                // fragments holding a character NFKC could change are composed.
                unicode_v1(text, out, false);
            }
        }
    }
}

/// `unicode-v1` by its general loop alone, one character at a time, with
/// none of the fast paths (runs, blocks): the reference the fuzz target
/// holds [`Normalizer::normalize`] to.
#[doc(hidden)]
pub fn unicode_v1_reference(text: &str) -> String {
    let mut out = String::new();
    unicode_v1_runs::<false>(text, &mut out, false);
    out
}

/// Iterates the tokens of a normalized string.
pub fn tokens(normalized: &str) -> impl Iterator<Item = &str> {
    normalized.split(' ').filter(|t| !t.is_empty())
}

fn seed_v1(text: &str, out: &mut String) {
    let mut in_token = false;
    let mut push = |c: char, out: &mut String| {
        if c.is_ascii_alphanumeric() {
            if !in_token && !out.is_empty() {
                out.push(' ');
            }
            out.push(c);
            in_token = true;
        } else {
            in_token = false;
        }
    };
    for c in text.chars() {
        if c.is_ascii() {
            push(c.to_ascii_lowercase(), out);
        } else {
            // Python's str.lower() and Rust's to_lowercase share Unicode's
            // default mapping; a few non-ASCII letters lower to ASCII ones
            // (KELVIN SIGN → k, İ → i + U+0307).
            for l in c.to_lowercase() {
                push(l, out);
            }
        }
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // CJK Extensions B.. and supplement
}

/// Per-character classes of the Basic Multilingual Plane, computed once from
/// the same predicates the slow path uses, so both paths agree by construction.
/// Entry: bits 0..21 the single-char lower-case mapping, bits 24..26 the class,
/// bit 28 set when the character is NFKC-stable (quick check Yes, combining
/// class 0): a text of only such characters is already in NFKC.
struct BmpTable {
    entries: Box<[u32]>,
    /// The two-byte characters a word run appends as they are, from `entries`.
    two_byte_same: TwoByteSame,
}

/// One bit per code point below U+0800 (the two-byte UTF-8 characters):
/// set for a word character that is NFKC-stable and lower-cases to itself,
/// which a word run appends as it is — most of a word in Cyrillic, Greek,
/// Armenian, Hebrew or accented Latin.
struct TwoByteSame([u64; 32]);

impl TwoByteSame {
    /// Whether the two-byte character at the start of `bytes` (a lead byte
    /// `0xC2..=0xDF`, as UTF-8 has them, then a continuation byte) appends
    /// as it is.
    #[inline]
    fn at(&self, bytes: &[u8]) -> bool {
        match *bytes {
            [lead, cont, ..] if lead & 0xE0 == 0xC0 => {
                let cp = u32::from(lead & 0x1F) << 6 | u32::from(cont & 0x3F);
                self.0[(cp >> 6) as usize & 31] >> (cp & 63) & 1 == 1
            }
            _ => false,
        }
    }
}

const CLASS_OTHER: u32 = 0;
const CLASS_WORD: u32 = 1;
const CLASS_CJK: u32 = 2;
/// A word character whose lower-casing is not a single char (or is folded specially).
const CLASS_WORD_SLOW: u32 = 3;
const NFKC_STABLE: u32 = 1 << 28;

fn nfkc_stable(c: char) -> bool {
    canonical_combining_class(c) == 0 && is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes
}

fn classify_slow(c: char) -> (u32, char) {
    if is_cjk(c) {
        return (CLASS_CJK, c);
    }
    if !is_word_char(c) {
        return (CLASS_OTHER, c);
    }
    if matches!(c, 'ß' | 'ẞ' | 'ς') {
        return (CLASS_WORD_SLOW, c);
    }
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => (CLASS_WORD, l),
        _ => (CLASS_WORD_SLOW, c),
    }
}

fn bmp_table() -> &'static BmpTable {
    static TABLE: OnceLock<BmpTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let table = (0u32..=0xFFFF)
            .map(|cp| match char::from_u32(cp) {
                Some(c) => {
                    let (class, lower) = classify_slow(c);
                    let stable = if nfkc_stable(c) { NFKC_STABLE } else { 0 };
                    stable | class << 24 | lower as u32
                }
                None => CLASS_OTHER << 24,
            })
            .collect::<Box<[u32]>>();
        let mut same = TwoByteSame([0; 32]);
        for cp in 0x80..0x800u32 {
            let e = table[cp as usize];
            if (e >> 24) & 0x7 == CLASS_WORD && e & NFKC_STABLE != 0 && e & 0x1F_FFFF == cp {
                same.0[(cp >> 6) as usize] |= 1 << (cp & 63);
            }
        }
        BmpTable { entries: table, two_byte_same: same }
    })
}

/// (class, lower-case char, NFKC-stable).
#[inline]
fn classify(table: &BmpTable, c: char) -> (u32, char, bool) {
    match table.entries.get(c as usize) {
        Some(&e) => ((e >> 24) & 0x7, char::from_u32(e & 0x1F_FFFF).unwrap_or(c), e & NFKC_STABLE != 0),
        None => {
            let (class, lower) = classify_slow(c);
            (class, lower, nfkc_stable(c))
        }
    }
}

#[inline]
fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric()
    } else {
        c.is_alphanumeric() || is_combining_mark(c)
    }
}

fn push_lower(c: char, out: &mut String) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
        return;
    }
    match c {
        'ß' | 'ẞ' => out.push_str("ss"),
        'ς' => out.push('σ'),
        _ => out.extend(c.to_lowercase()),
    }
}

/// If a hyphen at `after` (the byte just past it) ends a line and the next
/// line continues with a lower-case letter, returns the byte offset where
/// that letter starts.
fn hyphen_break_continues(text: &str, after: usize) -> Option<usize> {
    match hyphen_break(text, after, None) {
        Join::At(j) => Some(j),
        Join::No | Join::Unsure(_) => None,
    }
}

/// Whether a hyphen ending at `after` joins the next line's word.
enum Join {
    /// Yes: the word continues at this byte offset.
    At(usize),
    /// No.
    No,
    /// The answer depends on a character NFKC could change (at this offset).
    Unsure(usize),
}

/// A hyphen joins when only spaces, one newline and spaces follow, then a
/// lower-case letter. With `table` (text not yet composed), a deciding
/// character that NFKC could change makes the answer [`Join::Unsure`].
fn hyphen_break(text: &str, after: usize, table: Option<&BmpTable>) -> Join {
    let rest = &text[after..];
    let mut saw_newline = false;
    for (i, c) in rest.char_indices() {
        match c {
            '\n' if !saw_newline => saw_newline = true,
            ' ' | '\t' | '\r' => {}
            c => {
                if table.is_some_and(|t| !is_stable(t, c)) {
                    return Join::Unsure(after + i);
                }
                return if saw_newline && c.is_lowercase() { Join::At(after + i) } else { Join::No };
            }
        }
    }
    Join::No
}

#[inline]
fn is_stable(table: &BmpTable, c: char) -> bool {
    c.is_ascii() || classify(table, c).2
}

/// The end of the fragment that holds byte `i`: the next ASCII whitespace,
/// extended past hyphenated line breaks so that a join is never cut.
fn fragment_end(text: &str, i: usize) -> usize {
    let bytes = text.as_bytes();
    let mut end = i;
    loop {
        while end < bytes.len() && !bytes[end].is_ascii_whitespace() {
            end += 1;
        }
        let hyphenated = text[..end].ends_with(['-', '\u{2010}', '\u{00AD}']);
        match hyphen_break_continues(text, end).filter(|_| hyphenated) {
            Some(j) => end = j,
            None => return end,
        }
    }
}

/// Tokenizes `text` into `out`. Unless `composed` (the caller guarantees NFKC
/// input), a character that NFKC could change sends its fragment — the text
/// between the surrounding ASCII whitespace — through NFKC first. ASCII
/// whitespace is a starter that composes with nothing, so NFKC of the
/// fragments equals NFKC of the whole text.
fn unicode_v1(text: &str, out: &mut String, composed: bool) {
    unicode_v1_runs::<true>(text, out, composed)
}

/// [`unicode_v1`]; `RUNS` false takes every non-ASCII character through the
/// general loop, one at a time (the reference the fast runs are tested
/// against).
fn unicode_v1_runs<const RUNS: bool>(text: &str, out: &mut String, composed: bool) {
    let table = bmp_table();
    // Lookaheads consult the table only while the text is not yet composed.
    let guard = (!composed).then_some(table);
    let mut in_token = false;
    let mut i = 0;
    let bytes = text.as_bytes();
    // Where the current fragment began, in `text` and in `out`.
    let (mut frag_start, mut frag_out) = (0usize, out.len());
    let block_step = block_step();
    // Below this offset the block path is not tried again: it just found
    // a byte it cannot take close ahead. After a few misses with no half
    // block taken between them (text in another script, with short ASCII
    // runs between its words) it waits longer and longer, up to 512 bytes.
    let (mut no_block_until, mut misses) = (0, 0u32);
    while i < bytes.len() {
        if RUNS && i >= no_block_until {
            if let Some(chunk) = bytes.get(i..i + BLOCK) {
                // Up to 64 plain bytes at once, ended by the first byte that
                // needs this loop (or the block's end).
                let (plain, frag) = block_step(chunk, i, out, &mut in_token);
                if plain >= 8 {
                    if let Some(frag) = frag {
                        (frag_start, frag_out) = frag;
                    }
                    i += plain;
                    if plain >= BLOCK / 2 {
                        misses = 0;
                    }
                    continue;
                }
                misses += 1;
                let wait = if misses > 2 { BLOCK << (misses - 3).min(3) } else { 0 };
                no_block_until = i + plain + 1 + wait;
            }
        }
        let b = bytes[i];
        if b.is_ascii_alphanumeric() {
            // The common case: a run of ASCII letters and digits, copied
            // and lower-cased whole, without decoding or table lookups.
            if !in_token && !out.is_empty() {
                out.push(' ');
            }
            i += push_lower_alnum_run(&bytes[i..], out);
            in_token = true;
            continue;
        }
        if b < 0x80 && b != b'-' && b != b'\'' {
            // ASCII space or punctuation (the hyphen and the apostrophe
            // can join words, below): ends a token; whitespace also ends
            // the fragment NFKC would compose.
            in_token = false;
            i += 1;
            if b.is_ascii_whitespace() {
                (frag_start, frag_out) = (i, out.len());
            }
            continue;
        }
        if RUNS && b >= 0xC0 {
            // A token of simple word characters, taken whole when it starts here.
            if let Some(j) = simple_word(table, bytes, i, out, !in_token && !out.is_empty()) {
                in_token = true;
                i = j;
                // The words that follow, one space apart, taken here as the
                // loop would take them (the space ends the token and starts
                // a fragment), without a trip through its ASCII cases.
                while bytes.get(i) == Some(&b' ') && bytes.get(i + 1).is_some_and(|&n| n >= 0xC0) {
                    let after_space = out.len();
                    // Not a simple word: the loop takes the space and what follows.
                    let Some(j) = simple_word(table, bytes, i + 1, out, true) else { break };
                    (frag_start, frag_out) = (i + 1, after_space);
                    i = j;
                }
                continue;
            }
        }
        let c = if b < 0x80 { b as char } else { text[i..].chars().next().expect("i is on a char boundary") };
        let next = i + c.len_utf8();
        let (class, lower, stable) = if b < 0x80 { (CLASS_OTHER, c, true) } else { classify(table, c) };
        // A character NFKC could change, here or in a lookahead that decides
        // a join, sends the fragment through NFKC.
        let mut unsure = (!stable && !composed).then_some(i);
        if unsure.is_none() {
            if class == CLASS_CJK {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push(c);
                in_token = false;
            } else if class == CLASS_WORD || class == CLASS_WORD_SLOW {
                if !in_token && !out.is_empty() {
                    out.push(' ');
                }
                in_token = true;
                if class == CLASS_WORD {
                    out.push(lower);
                    i = if RUNS { simple_word_run(table, bytes, next, out) } else { next };
                    continue;
                }
                push_lower(c, out);
            } else if c == '\u{00AD}' || (in_token && (c == '-' || c == '\u{2010}')) {
                // A soft hyphen is invisible and never splits a word; a hyphen
                // at a line break joins the word's two halves.
                match hyphen_break(text, next, guard) {
                    Join::At(j) => {
                        i = j;
                        continue;
                    }
                    Join::No => in_token &= c == '\u{00AD}',
                    Join::Unsure(p) => unsure = Some(p),
                }
            } else if in_token && (c == '\'' || c == '\u{2019}') {
                // Apostrophe inside a word joins it: "don't" -> "dont".
                match text[next..].chars().next() {
                    Some(n) if guard.is_some_and(|t| !is_stable(t, n)) => unsure = Some(next),
                    n => in_token = n.is_some_and(|n| is_word_char(n) && !is_cjk(n)),
                }
            } else {
                in_token = false;
                if b.is_ascii_whitespace() {
                    (frag_start, frag_out) = (next, out.len());
                }
            }
        }
        if let Some(p) = unsure {
            i = compose_fragment::<RUNS>(text, frag_start, p, out, frag_out);
            in_token = false;
            continue;
        }
        i = next;
    }
}

/// The token of simple word characters ([`simple_word_run`]) that starts
/// at byte `i` of `bytes`, appended after a separating space when
/// `separate`: returns where it ends, or `None` — `out` left as it was —
/// when none starts there.
fn simple_word(table: &BmpTable, bytes: &[u8], i: usize, out: &mut String, separate: bool) -> Option<usize> {
    let mark = out.len();
    if separate {
        out.push(' ');
    }
    let j = simple_word_run(table, bytes, i, out);
    if j == i {
        out.truncate(mark);
        return None;
    }
    Some(j)
}

/// Continues a token from byte `i` of `bytes` (a `str`'s) for as long as
/// its characters are ASCII letters and digits, or Basic Multilingual Plane
/// word characters that are NFKC-stable and lower-case to one character —
/// what the general loop would append one by one, lower-cased — decoding
/// and appending them without its per-character branches (the common case
/// of Cyrillic, Greek, Latin with accents, ...). Returns where it stopped.
fn simple_word_run(table: &BmpTable, bytes: &[u8], mut i: usize, out: &mut String) -> usize {
    // Characters that are already lower case are appended as they are: the
    // bytes from `same_from` to `i` wait to be appended in one copy.
    let mut same_from = i;
    while let Some(&b) = bytes.get(i) {
        if b < 0x80 {
            if !b.is_ascii_alphanumeric() {
                break;
            }
            push_same(out, bytes, same_from, i);
            i += push_lower_alnum_run(&bytes[i..], out);
            same_from = i;
            continue;
        }
        // Two-byte characters that append as they are, one bit each.
        let from = i;
        while table.two_byte_same.at(&bytes[i..]) {
            i += 2;
        }
        if i > from {
            continue;
        }
        // A lead byte (a `str` is valid UTF-8, so its continuation bytes follow).
        let cont = |k: usize| u32::from(bytes[i + k] & 0x3F);
        let (cp, len) = match b {
            0xC0..=0xDF => (u32::from(b & 0x1F) << 6 | cont(1), 2),
            0xE0..=0xEF => (u32::from(b & 0x0F) << 12 | cont(1) << 6 | cont(2), 3),
            _ => break,
        };
        let Some(&e) = table.entries.get(cp as usize) else { break };
        if (e >> 24) & 0x7 != CLASS_WORD || e & NFKC_STABLE == 0 {
            break;
        }
        let lower = e & 0x1F_FFFF;
        if lower != cp {
            let Some(lower) = char::from_u32(lower) else { break };
            push_same(out, bytes, same_from, i);
            out.push(lower);
            same_from = i + len;
        }
        i += len;
    }
    push_same(out, bytes, same_from, i);
    i
}

/// Appends `bytes[from..to]` — whole characters of the `str` that `bytes`
/// is — to `out`: a run of a word's characters, usually a few dozen bytes,
/// stored as 32 at once where the text has them (a copy of a length known
/// only at run time is a call to `memcpy`).
#[inline]
fn push_same(out: &mut String, bytes: &[u8], from: usize, to: usize) {
    debug_assert!(std::str::from_utf8(&bytes[from..to]).is_ok());
    if from == to {
        return;
    }
    match bytes.get(from..from + 32) {
        Some(head) if to - from <= 32 => {
            let head: [u8; 32] = head.try_into().expect("32 bytes");
            // SAFETY: the first `to - from` bytes are whole characters of
            // a `str` (the caller's contract): valid UTF-8 on their own.
            unsafe { ascii::push_head(out, head, to - from) };
        }
        // SAFETY: as above.
        _ => out.push_str(unsafe { std::str::from_utf8_unchecked(&bytes[from..to]) }),
    }
}

/// Composes the fragment of `text` that starts at `start` and holds byte
/// `p`, tokenizes it into `out` (truncated back to `out_len` first) and
/// returns where the fragment ends.
fn compose_fragment<const RUNS: bool>(text: &str, start: usize, p: usize, out: &mut String, out_len: usize) -> usize {
    let bytes = text.as_bytes();
    let mut end = fragment_end(text, p);
    let mut fragment: String = text[start..end].nfkc().collect();
    // NFKC can turn the fragment's tail into "hyphen + spaces" (U+FF0D,
    // U+3000, ...): a hyphenated line break may then continue past `end`, so
    // take in the next word too. Fragments split at ASCII whitespace compose
    // independently, so appending is exact.
    while end < bytes.len()
        && fragment.trim_end_matches([' ', '\t', '\r', '\n']).ends_with(['-', '\u{2010}', '\u{00AD}'])
    {
        let mut j = end;
        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
            j += 1;
        }
        let next_end = fragment_end(text, j);
        fragment.extend(text[end..next_end].nfkc());
        end = next_end;
    }
    out.truncate(out_len);
    unicode_v1_runs::<RUNS>(&fragment, out, true);
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! t {
        ($name:ident, $norm:expr, $input:expr, $want:expr) => {
            #[test]
            fn $name() {
                assert_eq!($norm.normalize($input), $want);
            }
        };
    }

    t!(seed_basic, Normalizer::Seed, "Red Fox, runs  very-fast!", "red fox runs very fast");
    t!(seed_drops_non_ascii, Normalizer::Seed, "café naïve", "caf na ve");
    t!(seed_kelvin, Normalizer::Seed, "\u{212A}elvin", "kelvin");
    t!(seed_dotted_i, Normalizer::Seed, "\u{0130}stanbul", "i stanbul");
    t!(seed_empty, Normalizer::Seed, "  ,;  ", "");
    t!(uni_basic, Normalizer::Unicode, "Red Fox, runs  very-fast!", "red fox runs very fast");
    t!(uni_accents_kept, Normalizer::Unicode, "Café NAÏVE", "café naïve");
    t!(uni_nfkc_ligature, Normalizer::Unicode, "ﬁnal ﬂow", "final flow");
    t!(uni_fullwidth, Normalizer::Unicode, "ＡＢＣ１２３", "abc123");
    t!(uni_decomposed_input, Normalizer::Unicode, "cafe\u{0301}", "café");
    t!(uni_sharp_s, Normalizer::Unicode, "Straße STRASSE", "strasse strasse");
    t!(uni_final_sigma, Normalizer::Unicode, "ΟΔΟΣ οδος", "οδοσ οδοσ");
    t!(uni_apostrophe, Normalizer::Unicode, "Don't stop ’til it's done'", "dont stop til its done");
    t!(uni_hyphen_break, Normalizer::Unicode, "exam-\nple and exam-\n  Ple", "example and exam ple");
    t!(uni_hyphen_break_crlf, Normalizer::Unicode, "exam- \r\nple", "example");
    t!(uni_soft_hyphen, Normalizer::Unicode, "hy\u{00AD}phen", "hyphen");
    t!(uni_cjk_chars, Normalizer::Unicode, "日本語のテキスト abc", "日 本 語 の テ キ ス ト abc");
    t!(uni_devanagari_marks, Normalizer::Unicode, "हिन्दी भाषा", "हिन्दी भाषा");
    t!(uni_punct_only, Normalizer::Unicode, "—…!?", "");
    t!(uni_trailing_hyphen, Normalizer::Unicode, "end-", "end");

    #[test]
    fn ascii_fast_path_equals_general_path() {
        let s = "Hello, World! It's a pre-\nprocessed TEXT with 42 numbers.";
        let mut fast = String::new();
        unicode_v1(s, &mut fast, false);
        let general: String = s.nfkc().collect();
        let mut slow = String::new();
        unicode_v1(&general, &mut slow, true);
        assert_eq!(fast, slow);
    }

    #[test]
    fn table_agrees_with_predicates_everywhere() {
        let table = bmp_table();
        for cp in 0x80u32..=0xFFFF {
            if let Some(c) = char::from_u32(cp) {
                let (class, lower) = classify_slow(c);
                assert_eq!(classify(table, c), (class, lower, nfkc_stable(c)), "U+{cp:04X}");
            }
        }
    }

    #[test]
    fn two_byte_bits_agree_with_the_table() {
        let table = bmp_table();
        let mut set = 0;
        for cp in 0x80u32..0x800 {
            let c = char::from_u32(cp).expect("below the surrogates");
            let mut buf = [0u8; 4];
            let bytes = c.encode_utf8(&mut buf).as_bytes();
            let (class, lower, stable) = classify(table, c);
            let want = class == CLASS_WORD && stable && lower == c;
            assert_eq!(table.two_byte_same.at(bytes), want, "U+{cp:04X}");
            set += usize::from(want);
        }
        // Cyrillic, Greek and Latin small letters are among them; capitals are not.
        assert!(set > 300, "{set}");
        for s in ["д", "ω", "é", "ա", "ש"] {
            assert!(table.two_byte_same.at(s.as_bytes()), "{s}");
        }
        for s in ["Д", "Ω", "É", "a", "", "日", "😀", "\u{0301}", "ß"] {
            assert!(!table.two_byte_same.at(s.as_bytes()), "{s:?}");
        }
        assert!(!table.two_byte_same.at(&"д".as_bytes()[..1]));
    }

    #[test]
    fn optimistic_path_equals_composing_everything() {
        for s in ["Ｆｕｌｌ width ﬁ", "cafe\u{0301} café", "Ωμέγα ΟΔΟΣ", "日本語 ｶﾀｶﾅ", "x\u{0308}\u{0301}y", "plain"]
        {
            let composed: String = s.nfkc().collect();
            let mut want = String::new();
            unicode_v1(&composed, &mut want, true);
            assert_eq!(Normalizer::Unicode.normalize(s), want, "{s:?}");
        }
    }

    /// Characters of every path: ASCII, two- and three-byte word characters
    /// that take the fast run (Cyrillic, Greek, accented Latin, Armenian,
    /// Hebrew, Devanagari), ones that do not (lower-casing to several
    /// characters, NFKC-unstable, CJK, marks, four-byte), and separators.
    fn mixed_chars() -> Vec<char> {
        "aZ9 \n-'’.дЖяЁΩωέΣςßİéÀñÇ\u{0301}ﬁＡ日ｶ²Աբשׁאहि\u{093F}\u{00AD}\u{2010}𝐀😀ǅ\u{212B}ŉ".chars().collect()
    }

    /// The fast paths (runs, blocks) append exactly what the general loop
    /// does, one character at a time, composed or not.
    fn fast_paths_equal_the_general_loop(s: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let (mut fast, mut slow) = (String::new(), String::new());
        for composed in [false, true] {
            unicode_v1_runs::<true>(s, &mut fast, composed);
            unicode_v1_runs::<false>(s, &mut slow, composed);
            proptest::prop_assert_eq!(&fast, &slow, "{:?}", s);
        }
        Ok(())
    }

    #[test]
    fn long_runs_of_lower_case_letters_are_appended_whole() {
        // Runs of already lower-case two-byte letters longer than the
        // 32-byte copy, in the middle of a text, at its very end, and
        // followed by a letter that lower-cases.
        let long = "достопримечательность";
        assert!(long.len() > 32);
        for s in [
            format!("{long} и {long}"),
            format!("Слово {long}"),
            format!("{long}{long}Я {long}"),
            format!("ab{long}ЖЖ {long}cd"),
            format!("{}Ω", "ωωωωωωωωωωωωωωωωωω"),
        ] {
            fast_paths_equal_the_general_loop(&s).unwrap();
        }
        assert_eq!(Normalizer::Unicode.normalize(&format!("Слово {long}Я!")), format!("слово {long}я"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20000))]
        /// The fast runs append exactly what the general loop does, one
        /// character at a time.
        #[test]
        fn fast_runs_equal_the_general_loop(chars in proptest::collection::vec(proptest::sample::select(mixed_chars()), 0..40)) {
            fast_paths_equal_the_general_loop(&chars.into_iter().collect::<String>())?;
        }

        /// Long, mostly plain ASCII text (what the block path takes, in
        /// blocks cut anywhere by the odd hyphen, apostrophe or non-ASCII
        /// character) normalizes exactly as the general loop does it.
        #[test]
        fn blocks_equal_the_general_loop(chars in proptest::collection::vec(proptest::sample::select(
            "aaaaeeeetttoonnssrrhhlldcuBTAZMz0123456789          \n\n\t\r\x0b\x0c..,,;:!?\"()/-'é’дЖ日\u{00AD}ﬁ\u{0301}"
                .chars()
                .collect::<Vec<char>>(),
        ), 0..400)) {
            fast_paths_equal_the_general_loop(&chars.into_iter().collect::<String>())?;
        }

        /// Composing only the fragments that need it is exactly composing everything.
        #[test]
        fn fragment_nfkc_equals_whole_nfkc(chars in proptest::collection::vec(proptest::sample::select(vec![
            'a', 'B', 'e', 'z', '1', ' ', ' ', '\n', '\t', '-', '\'', '’', '.', '\u{0301}', '\u{0308}', '\u{0327}',
            'é', 'ﬁ', 'ﬂ', '\u{00A0}', '\u{00AD}', '\u{2010}', 'Ａ', '１', '日', 'ｶ', 'ß', 'Σ', 'ς', 'İ', '\u{212B}',
            '…', '²', 'Ⅻ', '\u{3000}', 'ㄱ', '\u{1100}', '\u{1161}', '\u{FF0D}', 'ｐ', 'Ｐ', 'ⅰ', '\u{FE63}',
            '\r', 'ʰ', '\u{2003}',
        ]), 0..40)) {
            let s: String = chars.into_iter().collect();
            let composed: String = s.nfkc().collect();
            let mut want = String::new();
            unicode_v1(&composed, &mut want, true);
            proptest::prop_assert_eq!(Normalizer::Unicode.normalize(&s), want, "{:?}", s);
        }
    }

    #[test]
    fn names_round_trip() {
        for n in [Normalizer::Seed, Normalizer::Unicode] {
            assert_eq!(Normalizer::from_name(n.version()).unwrap(), n);
        }
        assert!(Normalizer::from_name("nope").is_err());
    }
}
