//! Keeper policies: which copy of a group of near duplicates survives, for
//! every batch (the command line's two engines, the Python package, the
//! Spark job).
//!
//! The greedy rule keeps an item unless it verifies against an item kept
//! before it. A policy only says what "before" means: items are decided in
//! the order it induces, ties (and items without a value) in input order.
//! So every dropped item has a kept near duplicate that the policy prefers
//! (or ranks equal and that came earlier in the input).
//!
//! | policy | decided first |
//! |---|---|
//! | `first` (default) | the earlier record in the input |
//! | `longest` | the record with the most text (UTF-8 bytes of the text field) |
//! | `max:FIELD` | the record with the highest value of FIELD |
//! | `min:FIELD` | the record with the lowest value of FIELD |
//!
//! FIELD is a JSON field (a dotted path reaches into objects, as
//! `--text-field`) or a Parquet column. Its value may be a number, a string
//! holding one, or a date or time in ISO 8601 (`2024-05-01`,
//! `2024-05-01T12:30:00Z`, `…+02:00`), compared as seconds since 1970 (UTC).
//! A record whose field is missing, null or not one of these is still
//! deduplicated, after every record that has a value; the run counts them.

use std::fmt;

/// Which copy survives: see the module doc.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Keep {
    #[default]
    First,
    Longest,
    Max(String),
    Min(String),
}

impl Keep {
    /// Parses `first`, `longest`, `max:FIELD` or `min:FIELD` (a clap value
    /// parser).
    pub fn parse(s: &str) -> Result<Keep, String> {
        let field = |f: &str| {
            if f.is_empty() {
                Err(format!("{s:?} names no field; use max:FIELD or min:FIELD"))
            } else {
                Ok(f.to_owned())
            }
        };
        match s {
            "first" => Ok(Keep::First),
            "longest" => Ok(Keep::Longest),
            _ => match s.split_once(':') {
                Some(("max", f)) => Ok(Keep::Max(field(f)?)),
                Some(("min", f)) => Ok(Keep::Min(field(f)?)),
                _ => Err(format!("{s:?}: use first, longest, max:FIELD or min:FIELD")),
            },
        }
    }

    /// The field the policy reads, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            Keep::Max(f) | Keep::Min(f) => Some(f),
            Keep::First | Keep::Longest => None,
        }
    }

    /// Whether items are decided in input order.
    pub fn is_first(&self) -> bool {
        *self == Keep::First
    }

    /// The order key of a record (smaller is decided first; ties in input
    /// order): from its text's length for `longest`, from its field's value
    /// otherwise. `u64::MAX` only for a record without a usable value of
    /// the policy's field (`first` and `longest` never give it).
    pub fn order(&self, text_len: usize, value: Option<f64>) -> u64 {
        match self {
            Keep::First => 0,
            Keep::Longest => u64::MAX - 1 - text_len as u64,
            Keep::Max(_) => value.map_or(u64::MAX, |v| (u64::MAX - 1) - ordered_bits(v)),
            Keep::Min(_) => value.map_or(u64::MAX, ordered_bits),
        }
    }
}

impl fmt::Display for Keep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Keep::First => f.write_str("first"),
            Keep::Longest => f.write_str("longest"),
            Keep::Max(field) => write!(f, "max:{field}"),
            Keep::Min(field) => write!(f, "min:{field}"),
        }
    }
}

/// A finite number's bits, mapped so that unsigned order is numeric order,
/// kept below `u64::MAX - 1` (the places of "no value"). -0.0 is 0.0.
fn ordered_bits(v: f64) -> u64 {
    let v = if v == 0.0 { 0.0 } else { v };
    let b = v.to_bits();
    let o = if b >> 63 == 1 { !b } else { b | 1 << 63 };
    o.min(u64::MAX - 2)
}

impl Keep {
    /// A field's value given as text: see [`value_of_text`].
    pub fn value_of_text(s: &str) -> Option<f64> {
        value_of_text(s)
    }

    /// A field's value given as a number: itself when finite.
    pub fn value_of_number(v: f64) -> Option<f64> {
        finite(v)
    }
}

/// A field's value as a number: a finite number, a string holding one, or
/// an ISO 8601 date or date-time (seconds since 1970-01-01T00:00:00Z).
fn value_of_text(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Ok(v) = s.parse::<f64>() {
        return v.is_finite().then_some(v);
    }
    iso_seconds(s)
}

/// A finite number, else nothing.
fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// `YYYY-MM-DD`, optionally followed by `T` or a space and
/// `HH:MM[:SS[.fff…]]` and an offset (`Z`, `±HH:MM`, `±HHMM`; none is UTC).
fn iso_seconds(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    let mut secs = days_from_civil(y, m, d) as f64 * 86_400.0;
    let rest = &s[10..];
    if rest.is_empty() {
        return Some(secs);
    }
    let t = rest.strip_prefix(['T', 't', ' '])?;
    let tb = t.as_bytes();
    if tb.len() < 5 || tb[2] != b':' {
        return None;
    }
    let hm = |i: usize| -> Option<i64> {
        let p = tb.get(i..i + 2)?;
        p.iter().all(u8::is_ascii_digit).then(|| i64::from(p[0] - b'0') * 10 + i64::from(p[1] - b'0'))
    };
    let (hh, mm) = (hm(0)?, hm(3)?);
    let mut at = 5;
    let mut ss = 0.0;
    if tb.get(5) == Some(&b':') {
        ss = hm(6)? as f64;
        at = 8;
        if tb.get(8) == Some(&b'.') {
            let digits = tb[9..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            ss += format!("0.{}", &t[9..9 + digits]).parse::<f64>().ok()?;
            at = 9 + digits;
        }
    }
    if hh > 23 || mm > 59 || ss >= 61.0 {
        return None;
    }
    secs += (hh * 3600 + mm * 60) as f64 + ss;
    let offset = match &t[at..] {
        "" | "Z" | "z" => 0,
        o => {
            let sign = match o.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let ob = &o.as_bytes()[1..];
            let (oh, om) = match ob.len() {
                5 if ob[2] == b':' => (&ob[0..2], &ob[3..5]),
                4 => (&ob[0..2], &ob[2..4]),
                2 => (&ob[0..2], &b"00"[..]),
                _ => return None,
            };
            if !oh.iter().chain(om).all(u8::is_ascii_digit) {
                return None;
            }
            let v = |p: &[u8]| i64::from(p[0] - b'0') * 10 + i64::from(p[1] - b'0');
            sign * (v(oh) * 3600 + v(om) * 60)
        }
    };
    Some(secs - offset as f64)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print() {
        for s in ["first", "longest", "max:quality", "min:meta.date"] {
            assert_eq!(Keep::parse(s).unwrap().to_string(), s);
        }
        assert!(Keep::parse("max:").unwrap_err().contains("no field"));
        assert!(Keep::parse("newest").unwrap_err().contains("max:FIELD"));
        assert_eq!(Keep::parse("max:a:b").unwrap().field(), Some("a:b"));
    }

    #[test]
    fn order_keys_sort_as_the_policy_says() {
        let max = Keep::Max("q".into());
        let min = Keep::Min("q".into());
        let values = [-1e300, -2.5, -0.0, 0.0, 1e-300, 3.0, 7.5, 1e300];
        for w in values.windows(2) {
            assert!(max.order(0, Some(w[0])) >= max.order(0, Some(w[1])), "{w:?}");
            assert!(min.order(0, Some(w[0])) <= min.order(0, Some(w[1])), "{w:?}");
        }
        assert_eq!(max.order(0, Some(-0.0)), max.order(0, Some(0.0)));
        // No value: after every value, under both directions.
        assert!(values.iter().all(|&v| max.order(0, Some(v)) < max.order(0, None)));
        assert!(values.iter().all(|&v| min.order(0, Some(v)) < min.order(0, None)));
        assert!(Keep::Longest.order(10, None) < Keep::Longest.order(9, None));
        assert_eq!(Keep::First.order(10, Some(1.0)), Keep::First.order(0, None));
    }

    #[test]
    fn values_from_text_and_dates() {
        assert_eq!(value_of_text(" 0.75 "), Some(0.75));
        assert_eq!(value_of_text("1e3"), Some(1000.0));
        assert_eq!(value_of_text("NaN"), None);
        assert_eq!(value_of_text("inf"), None);
        assert_eq!(value_of_text("1970-01-01"), Some(0.0));
        assert_eq!(value_of_text("1970-01-02T00:00:00Z"), Some(86_400.0));
        assert_eq!(value_of_text("2000-03-01"), Some(951_868_800.0));
        assert_eq!(value_of_text("2024-05-01T12:30:00+02:00"), value_of_text("2024-05-01T10:30:00Z"));
        assert_eq!(value_of_text("2024-05-01 10:30"), value_of_text("2024-05-01T10:30:00"));
        assert_eq!(value_of_text("2024-05-01T10:30:00.250Z"), value_of_text("2024-05-01T10:30:00Z").map(|v| v + 0.25));
        assert_eq!(value_of_text("2024-05-01T10:30:00-0130"), value_of_text("2024-05-01T12:00:00Z"));
        assert!(value_of_text("2023-02-29").is_none());
        assert!(value_of_text("2024-02-29").is_some());
        for bad in ["2024-13-01", "2024-05-01T25:00", "2024-05-01X", "yesterday", "", "2024-05-01T10:30:00+2"] {
            assert_eq!(value_of_text(bad), None, "{bad}");
        }
        assert!(value_of_text("1969-12-31").unwrap() < 0.0);
    }
}
