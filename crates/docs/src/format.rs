//! Document formats and their detection.
//!
//! Detection looks at the content first and the file name second: a PDF
//! named `.txt` is parsed as a PDF, and a PNG named `.txt` is rejected as
//! binary rather than decoded into garbage text. The extension only decides
//! between the text-based formats (plain text, Markdown, HTML), which share
//! no reliable magic bytes.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A document format neardup can parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Portable Document Format.
    Pdf,
    /// HTML or XHTML.
    Html,
    /// Office Open XML word-processing document.
    Docx,
    /// CommonMark / GitHub-flavoured Markdown.
    Markdown,
    /// Plain text in UTF-8, UTF-16 (with BOM) or Latin-1.
    Text,
}

impl Format {
    /// The lowercase name used in cache metadata and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Pdf => "pdf",
            Format::Html => "html",
            Format::Docx => "docx",
            Format::Markdown => "markdown",
            Format::Text => "text",
        }
    }

    /// The format a file extension (without the dot, any case) names, if any.
    pub fn from_extension(ext: &str) -> Option<Format> {
        match ext.to_ascii_lowercase().as_str() {
            "pdf" => Some(Format::Pdf),
            "html" | "htm" | "xhtml" => Some(Format::Html),
            "docx" => Some(Format::Docx),
            "md" | "markdown" | "mdown" | "mkd" => Some(Format::Markdown),
            "txt" | "text" => Some(Format::Text),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Pdf => "PDF",
            Format::Html => "HTML",
            Format::Docx => "DOCX",
            Format::Markdown => "Markdown",
            Format::Text => "text",
        })
    }
}

/// What the first bytes of a file say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sniffed {
    Pdf,
    /// A zip container; DOCX if it has `word/document.xml`.
    Zip,
    /// A known binary format we do not parse; the name is for the report.
    OtherBinary(&'static str),
    /// No binary signature: decode as text and look further.
    Unknown,
}

/// Binary signatures checked before anything else. Order matters only where
/// one signature is a prefix of another (none here).
const SIGNATURES: &[(&[u8], &str)] = &[
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"\x1f\x8b", "gzip archive"),
    (b"BZh", "bzip2 archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "7z archive"),
    (b"Rar!\x1a\x07", "RAR archive"),
    (b"\x7fELF", "ELF executable"),
    (b"MZ", "Windows executable"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "legacy Office (OLE) document"),
    (b"{\\rtf", "RTF document"),
    (b"%!PS", "PostScript document"),
    (b"II*\x00", "TIFF image"),
    (b"MM\x00*", "TIFF image"),
    (b"\x28\xb5\x2f\xfd", "zstd archive"),
    (b"SQLite format 3\x00", "SQLite database"),
];

/// How far into the file a `%PDF-` header may start. The PDF spec allows
/// leading garbage and readers accept up to 1 KiB of it.
const PDF_HEADER_WINDOW: usize = 1024;

pub(crate) fn sniff(bytes: &[u8]) -> Sniffed {
    let head = &bytes[..bytes.len().min(PDF_HEADER_WINDOW)];
    if head.starts_with(b"%PDF-") || find(head, b"%PDF-").is_some() {
        return Sniffed::Pdf;
    }
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return Sniffed::Zip;
    }
    // "MZ" is short; only trust it when the whole file is not plausibly text
    // starting with those letters, which the text decoder would accept.
    for (magic, name) in SIGNATURES {
        if bytes.starts_with(magic) && (*magic != b"MZ" || bytes.contains(&0)) {
            return Sniffed::OtherBinary(name);
        }
    }
    Sniffed::Unknown
}

/// The lowercase extension of `path`, if any.
pub(crate) fn extension(path: Option<&Path>) -> Option<String> {
    path?.extension()?.to_str().map(str::to_ascii_lowercase)
}

/// True when decoded text looks like an HTML document, for files whose name
/// does not say.
pub(crate) fn looks_like_html(text: &str) -> bool {
    let start = text.trim_start_matches('\u{feff}').trim_start();
    let head: String = start.chars().take(256).collect::<String>().to_ascii_lowercase();
    head.starts_with("<!doctype html") || head.starts_with("<html") || {
        head.starts_with("<?xml") && head.contains("<html")
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniff_table() {
        let cases: &[(&[u8], Sniffed)] = &[
            (b"%PDF-1.7\n", Sniffed::Pdf),
            (b"junk\n%PDF-1.4\n", Sniffed::Pdf),
            (b"PK\x03\x04rest", Sniffed::Zip),
            (b"\x89PNG\r\n\x1a\n....", Sniffed::OtherBinary("PNG image")),
            (b"MZ\x90\x00\x03", Sniffed::OtherBinary("Windows executable")),
            (b"MZ is a fine way to start a sentence", Sniffed::Unknown),
            (b"hello", Sniffed::Unknown),
        ];
        for (bytes, want) in cases {
            assert_eq!(sniff(bytes), *want, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn extensions() {
        assert_eq!(Format::from_extension("PDF"), Some(Format::Pdf));
        assert_eq!(Format::from_extension("htm"), Some(Format::Html));
        assert_eq!(Format::from_extension("markdown"), Some(Format::Markdown));
        assert_eq!(Format::from_extension("xls"), None);
        assert_eq!(extension(Some(Path::new("a/B.TXT"))).as_deref(), Some("txt"));
        assert_eq!(extension(Some(Path::new("README"))), None);
    }

    #[test]
    fn html_sniffing() {
        assert!(looks_like_html("\u{feff}  <!DOCTYPE html><html>"));
        assert!(looks_like_html("<html lang=en>"));
        assert!(!looks_like_html("# Title\n<p>inline html</p>"));
    }
}
