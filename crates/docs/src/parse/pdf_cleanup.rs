//! Cleanup of text extracted from PDF pages, so that layout artefacts do not
//! decide a duplicate verdict.
//!
//! The same paper rendered by two tools differs in ligature glyphs, in where
//! lines break (and so which words get hyphenated), and in running headers,
//! footers and page numbers. [`clean_pages`] removes those differences:
//!
//! 1. ligature code points (`ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ`) are expanded and soft hyphens
//!    dropped;
//! 2. running headers and footers — lines within the first or last
//!    [`EDGE_LINES`] lines of a page that, with digits masked, recur on at
//!    least half the pages (and on two or more) — are removed;
//! 3. lines that are only a page number (`12`, `- 12 -`, `Page 3 of 9`,
//!    `xiv`) are removed;
//! 4. a word hyphenated across a line break (`exam-` / `ple`) is joined
//!    (`example`) when the next line starts with a lowercase letter;
//! 5. whitespace is collapsed and blank-line runs squeezed.
//!
//! It is a pure function of its input, so it is tested on its own.

use std::collections::HashMap;

/// How many lines at the top and at the bottom of a page are candidates for
/// running headers and footers.
pub const EDGE_LINES: usize = 3;

/// Cleans the text of each page and joins the pages into one text, one line
/// per extracted line.
///
/// ```
/// use neardup_docs::pdf_cleanup::clean_pages;
///
/// let pages = [
///     "Journal of Tests 12\nThe ﬁrst exam-\nple is here.\n1",
///     "Journal of Tests 12\nAnother line.\n2",
/// ];
/// assert_eq!(clean_pages(&pages), "The first example is here.\nAnother line.");
/// ```
pub fn clean_pages<S: AsRef<str>>(pages: &[S]) -> String {
    let pages: Vec<Vec<String>> = pages
        .iter()
        .map(|p| p.as_ref().lines().map(|l| collapse_ws(&expand_ligatures(l))).filter(|l| !l.is_empty()).collect())
        .collect();
    let running = running_lines(&pages);
    let mut lines: Vec<&str> = Vec::new();
    for page in &pages {
        let n = page.len();
        for (i, line) in page.iter().enumerate() {
            let at_edge = i < EDGE_LINES || i + EDGE_LINES >= n;
            if at_edge && running.contains_key(&mask_digits(line)) {
                continue;
            }
            if is_page_number(line) {
                continue;
            }
            lines.push(line);
        }
    }
    join_hyphenated(&lines)
}

/// Replaces ligature code points with their letters and drops soft hyphens.
pub fn expand_ligatures(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\u{fb00}' => out.push_str("ff"),
            '\u{fb01}' => out.push_str("fi"),
            '\u{fb02}' => out.push_str("fl"),
            '\u{fb03}' => out.push_str("ffi"),
            '\u{fb04}' => out.push_str("ffl"),
            '\u{fb05}' | '\u{fb06}' => out.push_str("st"),
            '\u{ad}' => {}
            c => out.push(c),
        }
    }
    out
}

/// True for a line that is only a page number: arabic or roman numerals,
/// optionally decorated (`- 3 -`, `[3]`, `Page 3`, `3 of 12`, `3/12`).
pub fn is_page_number(line: &str) -> bool {
    let lower = line.trim().to_lowercase();
    let stripped = lower.trim_matches(|c: char| matches!(c, '-' | '–' | '—' | '[' | ']' | '(' | ')' | '|' | '·' | ' '));
    let stripped = stripped.strip_prefix("page").map(str::trim_start).unwrap_or(stripped);
    let mut parts = stripped.splitn(2, [' ', '/']);
    let first = parts.next().unwrap_or("");
    let rest = parts.next().map(|r| r.trim().trim_start_matches("of").trim_start_matches('/').trim());
    let numeral = |s: &str| (!s.is_empty() && s.len() <= 5 && s.chars().all(|c| c.is_ascii_digit())) || is_roman(s);
    numeral(first) && rest.is_none_or(|r| r.chars().all(|c| c.is_ascii_digit()) && !r.is_empty())
}

/// True for a canonical lowercase roman numeral from 1 to 399 (front-matter
/// page numbers), so that words such as "civil" or "mix" are not taken
/// for numbers.
fn is_roman(s: &str) -> bool {
    if s.is_empty() || s.len() > 9 {
        return false;
    }
    let value = |c| match c {
        'i' => Some(1),
        'v' => Some(5),
        'x' => Some(10),
        'l' => Some(50),
        'c' => Some(100),
        _ => None,
    };
    let Some(digits) = s.chars().map(value).collect::<Option<Vec<u32>>>() else {
        return false;
    };
    let mut n = 0u32;
    for (i, d) in digits.iter().enumerate() {
        if digits.get(i + 1).is_some_and(|next| next > d) {
            n = n.wrapping_sub(*d);
        } else {
            n = n.wrapping_add(*d);
        }
    }
    (1..400).contains(&n) && to_roman(n) == s
}

fn to_roman(mut n: u32) -> String {
    const TABLE: &[(u32, &str)] =
        &[(100, "c"), (90, "xc"), (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")];
    let mut out = String::new();
    for &(v, r) in TABLE {
        while n >= v {
            out.push_str(r);
            n -= v;
        }
    }
    out
}

/// Lines that recur (digits masked) at the edges of at least half the pages,
/// and of at least two.
fn running_lines(pages: &[Vec<String>]) -> HashMap<String, usize> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for page in pages {
        let n = page.len();
        let mut seen = std::collections::HashSet::new();
        for (i, line) in page.iter().enumerate() {
            if (i < EDGE_LINES || i + EDGE_LINES >= n) && seen.insert(mask_digits(line)) {
                *counts.entry(mask_digits(line)).or_default() += 1;
            }
        }
    }
    let needed = pages.len().div_ceil(2).max(2);
    counts.retain(|_, c| *c >= needed);
    counts
}

fn mask_digits(line: &str) -> String {
    line.chars().map(|c| if c.is_ascii_digit() { '#' } else { c.to_ascii_lowercase() }).collect()
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Joins lines, merging a trailing `letter-` with a next line that starts
/// with a lowercase letter.
fn join_hyphenated(lines: &[&str]) -> String {
    let mut out = String::new();
    let mut pending_hyphen = false;
    for line in lines {
        if pending_hyphen && line.chars().next().is_some_and(char::is_lowercase) {
            out.pop(); // the hyphen
        } else if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
        let mut tail = line.chars().rev();
        pending_hyphen = tail.next() == Some('-') && tail.next().is_some_and(char::is_alphabetic);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ligatures() {
        assert_eq!(
            expand_ligatures("e\u{fb03}cient \u{fb02}ow o\u{fb00} \u{fb01}x \u{fb04}e"),
            "efficient flow off fix ffle"
        );
        assert_eq!(expand_ligatures("co\u{ad}operate"), "cooperate");
    }

    #[test]
    fn page_numbers() {
        for yes in ["12", " 3 ", "- 4 -", "Page 7", "page 7 of 12", "7 / 12", "xiv", "[9]", "— 10 —"] {
            assert!(is_page_number(yes), "{yes:?}");
        }
        for no in ["12 monkeys", "Table 3", "v2 of the model", "", "civil", "mix", "iiii", "in 2019 we"] {
            assert!(!is_page_number(no), "{no:?}");
        }
    }

    #[test]
    fn hyphenation_joined_only_before_lowercase() {
        let pages = ["an exam-\nple and a well-\nKnown name, x -\ny"];
        assert_eq!(clean_pages(&pages), "an example and a well-\nKnown name, x -\ny");
    }

    #[test]
    fn hyphenation_across_pages() {
        let pages = ["Header\nbody text that contin-\n1", "Header\nues here\n2"];
        assert_eq!(clean_pages(&pages), "body text that continues here");
    }

    #[test]
    fn running_headers_with_changing_numbers_removed() {
        let pages = [
            "Proc. Test Conf. 2024, pp. 11\nFirst page body.\nmore body\nA. Author et al.",
            "Proc. Test Conf. 2024, pp. 12\nSecond page body.\nA. Author et al.",
            "Proc. Test Conf. 2024, pp. 13\nThird page body.\nA. Author et al.",
        ];
        assert_eq!(clean_pages(&pages), "First page body.\nmore body\nSecond page body.\nThird page body.");
    }

    #[test]
    fn single_page_keeps_its_lines() {
        // With one page nothing can be "running"; only bare numbers go.
        assert_eq!(clean_pages(&["Title\nbody\n1"]), "Title\nbody");
    }

    #[test]
    fn repeated_body_lines_outside_edges_kept() {
        let body = "l1\nl2\nl3\nRepeated sentence.\nl5\nl6\nl7";
        assert_eq!(clean_pages(&[body, body]).matches("Repeated sentence.").count(), 2);
    }
}
