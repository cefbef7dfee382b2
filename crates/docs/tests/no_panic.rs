//! Property tests: no input makes the parsers panic, and the PDF cleanup
//! keeps its promises on arbitrary pages.

use std::path::{Path, PathBuf};

use neardup_docs::pdf_cleanup::{clean_pages, expand_ligatures};
use neardup_docs::{parse_bytes, Limits};
use proptest::prelude::*;

const NAMES: &[&str] = &["x.pdf", "x.docx", "x.html", "x.md", "x.txt", "x", "x.bin"];

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/docs").join(name)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), name in 0..NAMES.len()) {
        let _ = parse_bytes(&bytes, Some(Path::new(NAMES[name])), &Limits::default());
    }

    #[test]
    fn corrupted_fixtures_never_panic(
        which in 0..3usize,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        cut in any::<prop::sample::Index>(),
    ) {
        let name = ["paper.pdf", "paper.docx", "paper.html"][which];
        let mut bytes = fixture(name);
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        bytes.truncate(cut.index(bytes.len()) + 1);
        let result = parse_bytes(&bytes, Some(Path::new(name)), &Limits::default());
        if let Err(e) = result {
            prop_assert!(e.is_document_error(), "{e}");
        }
    }

    #[test]
    fn cleanup_removes_artefacts(pages in proptest::collection::vec("[a-zA-Z0-9 \\-\u{fb01}\u{fb02}\n]{0,200}", 0..6)) {
        let text = clean_pages(&pages);
        let ligatures = ['\u{fb01}', '\u{fb02}'];
        prop_assert!(!text.contains(ligatures), "ligature left in {:?}", text);
        for line in text.lines() {
            prop_assert!(!line.trim().is_empty(), "blank line kept");
            prop_assert!(!line.chars().all(|c| c.is_ascii_digit()), "bare number {line:?} kept");
        }
        // Nothing but removals and joins: every word of the output occurs,
        // possibly as a hyphen-joined pair, in the ligature-expanded input.
        let input = expand_ligatures(&pages.concat()).replace(['-', '\n', ' '], "");
        let output = text.replace(['-', '\n', ' '], "");
        prop_assert!(output.len() <= input.len());
    }
}
