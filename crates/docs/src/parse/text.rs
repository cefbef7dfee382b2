//! Byte-to-text decoding with encoding detection and a binary check.
//!
//! Order: a byte-order mark decides (UTF-8, UTF-16 LE, UTF-16 BE); without
//! one, valid UTF-8 is taken as UTF-8 and anything else as Latin-1 (decoded
//! as windows-1252, the WHATWG reading of the `latin1` label, which maps
//! 0x80–0x9F to the punctuation such files really mean). Content with NUL
//! bytes or many control characters is rejected as binary instead, so a
//! binary file named `.txt` is never "decoded" into garbage.

use crate::error::{Error, ErrorKind};

/// The text encoding a document was decoded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TextEncoding {
    Utf8,
    Utf16Le,
    Utf16Be,
    Latin1,
}

/// Share of control characters (other than tab, newline, carriage return,
/// form feed) above which decoded text is judged binary.
const MAX_CONTROL_PER_MILLE: usize = 10;

/// Decodes `bytes` as text, or explains why they are not text.
pub(crate) fn decode(bytes: &[u8]) -> Result<(String, TextEncoding), Error> {
    let (text, encoding) = if let Some(rest) = bytes.strip_prefix(b"\xef\xbb\xbf") {
        let text =
            std::str::from_utf8(rest).map_err(|e| binary(format!("UTF-8 BOM followed by invalid UTF-8 ({e})")))?;
        (text.to_owned(), TextEncoding::Utf8)
    } else if bytes.starts_with(b"\xff\xfe") {
        (decode_utf16(encoding_rs::UTF_16LE, &bytes[2..])?, TextEncoding::Utf16Le)
    } else if bytes.starts_with(b"\xfe\xff") {
        (decode_utf16(encoding_rs::UTF_16BE, &bytes[2..])?, TextEncoding::Utf16Be)
    } else {
        if let Some(pos) = bytes.iter().position(|&b| b == 0) {
            return Err(binary(format!("NUL byte at offset {pos}")));
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => (text.to_owned(), TextEncoding::Utf8),
            Err(_) => {
                let (text, _, _) = encoding_rs::WINDOWS_1252.decode(bytes);
                (text.into_owned(), TextEncoding::Latin1)
            }
        }
    };
    check_not_binary(&text)?;
    Ok((text, encoding))
}

fn decode_utf16(encoding: &'static encoding_rs::Encoding, body: &[u8]) -> Result<String, Error> {
    if !body.len().is_multiple_of(2) {
        return Err(binary(format!("{} BOM but an odd number of bytes", encoding.name())));
    }
    encoding
        .decode_without_bom_handling_and_without_replacement(body)
        .map(|text| text.into_owned())
        .ok_or_else(|| binary(format!("{} BOM but invalid {0} data", encoding.name())))
}

fn check_not_binary(text: &str) -> Result<(), Error> {
    let mut total = 0usize;
    let mut control = 0usize;
    for c in text.chars() {
        total += 1;
        if c == '\0' {
            return Err(binary("NUL character in decoded text".to_owned()));
        }
        if c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\u{c}') {
            control += 1;
        }
    }
    if total > 0 && control * 1000 > total * MAX_CONTROL_PER_MILLE {
        return Err(binary(format!("{control} of {total} characters are control characters")));
    }
    Ok(())
}

fn binary(reason: String) -> Error {
    Error::new(ErrorKind::Binary { reason })
}

/// Normalises line endings to `\n` and trims trailing whitespace per line.
pub(crate) fn tidy_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.trim_start_matches('\u{feff}').lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16(s: &str, big_endian: bool) -> Vec<u8> {
        let mut out = if big_endian { vec![0xfe, 0xff] } else { vec![0xff, 0xfe] };
        for unit in s.encode_utf16() {
            let b = if big_endian { unit.to_be_bytes() } else { unit.to_le_bytes() };
            out.extend_from_slice(&b);
        }
        out
    }

    #[test]
    fn encodings() {
        let s = "Naïve café — ﬁne";
        assert_eq!(decode(s.as_bytes()).unwrap(), (s.to_owned(), TextEncoding::Utf8));
        let bom = [b"\xef\xbb\xbf".as_slice(), s.as_bytes()].concat();
        assert_eq!(decode(&bom).unwrap(), (s.to_owned(), TextEncoding::Utf8));
        assert_eq!(decode(&utf16(s, false)).unwrap(), (s.to_owned(), TextEncoding::Utf16Le));
        assert_eq!(decode(&utf16(s, true)).unwrap(), (s.to_owned(), TextEncoding::Utf16Be));
        // "café" in Latin-1, plus a windows-1252 right single quote (0x92).
        let latin1 = b"caf\xe9 isn\x92t UTF-8";
        assert_eq!(decode(latin1).unwrap(), ("café isn\u{2019}t UTF-8".to_owned(), TextEncoding::Latin1));
    }

    #[test]
    fn binary_rejected() {
        let err = decode(b"abc\0def").unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Binary { .. }), "{err}");
        assert!(err.to_string().contains("NUL byte at offset 3"));
        let noisy: Vec<u8> = (0u8..=255).cycle().skip(1).take(4000).filter(|&b| b != 0).collect();
        assert!(matches!(decode(&noisy).unwrap_err().kind(), ErrorKind::Binary { .. }));
        // Odd-length UTF-16 body.
        assert!(matches!(decode(b"\xff\xfea\0b").unwrap_err().kind(), ErrorKind::Binary { .. }));
    }

    #[test]
    fn tidy() {
        assert_eq!(tidy_lines("\u{feff}a  \r\nb\t\n\n\n"), "a\nb");
    }
}
