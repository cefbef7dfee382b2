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

use unicode_normalization::{char::is_combining_mark, UnicodeNormalization};

use crate::error::{Error, Result};

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
                if text.is_ascii() {
                    unicode_v1(text, out);
                } else {
                    let composed: String = text.nfkc().collect();
                    unicode_v1(&composed, out);
                }
            }
        }
    }
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
    let rest = &text[after..];
    let mut saw_newline = false;
    for (i, c) in rest.char_indices() {
        match c {
            '\n' if !saw_newline => saw_newline = true,
            ' ' | '\t' | '\r' => {}
            c if saw_newline && c.is_lowercase() => return Some(after + i),
            _ => return None,
        }
    }
    None
}

fn unicode_v1(text: &str, out: &mut String) {
    let mut in_token = false;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        let c =
            if bytes[i] < 0x80 { bytes[i] as char } else { text[i..].chars().next().expect("i is on a char boundary") };
        let next = i + c.len_utf8();
        if is_cjk(c) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push(c);
            in_token = false;
        } else if is_word_char(c) {
            if !in_token && !out.is_empty() {
                out.push(' ');
            }
            push_lower(c, out);
            in_token = true;
        } else if c == '\u{00AD}' {
            // Soft hyphen: invisible; never splits a word.
            if let Some(j) = hyphen_break_continues(text, next) {
                i = j;
                continue;
            }
        } else if in_token && (c == '\'' || c == '\u{2019}') {
            // Apostrophe inside a word joins it: "don't" -> "dont".
            let joins = text[next..].chars().next().is_some_and(|n| is_word_char(n) && !is_cjk(n));
            if !joins {
                in_token = false;
            }
        } else if in_token && (c == '-' || c == '\u{2010}') {
            match hyphen_break_continues(text, next) {
                Some(j) => {
                    i = j;
                    continue;
                }
                None => in_token = false,
            }
        } else {
            in_token = false;
        }
        i = next;
    }
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
        unicode_v1(s, &mut fast);
        let general: String = s.nfkc().collect();
        let mut slow = String::new();
        unicode_v1(&general, &mut slow);
        assert_eq!(fast, slow);
    }

    #[test]
    fn names_round_trip() {
        for n in [Normalizer::Seed, Normalizer::Unicode] {
            assert_eq!(Normalizer::from_name(n.version()).unwrap(), n);
        }
        assert!(Normalizer::from_name("nope").is_err());
    }
}
