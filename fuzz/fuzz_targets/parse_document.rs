//! Document parsers (PDF, HTML, DOCX, Markdown, text) return a document or a
//! typed error for any bytes, under every file-name hint.
#![no_main]
use libfuzzer_sys::fuzz_target;
use neardup_docs::{parse_bytes, Limits};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    for hint in ["x.pdf", "x.html", "x.docx", "x.md", "x.txt", "x"] {
        let _ = parse_bytes(data, Some(Path::new(hint)), &limits);
    }
});
