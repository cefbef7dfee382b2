//! The committed fixtures (tests/fixtures/docs, made by
//! scripts/fixtures/make_docs.py) parse to the same words in every format.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use neardup_docs::{parse_file, Format, Limits, ParseCache, ParsedDoc};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/docs").join(name)
}

fn parse(name: &str) -> ParsedDoc {
    let dir = tempfile::tempdir().unwrap();
    let cache = ParseCache::open(dir.path()).unwrap();
    parse_file(&fixture(name), &Limits::default(), &cache).unwrap_or_else(|e| panic!("{name}: {e}")).doc
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Multiset word overlap: shared word occurrences over the longer text.
fn word_overlap(a: &[String], b: &[String]) -> f64 {
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for w in a {
        *counts.entry(w).or_default() += 1;
    }
    let mut shared = 0;
    for w in b {
        if let Some(c) = counts.get_mut(w.as_str()) {
            if *c > 0 {
                *c -= 1;
                shared += 1;
            }
        }
    }
    shared as f64 / a.len().max(b.len()) as f64
}

fn jaccard5(a: &[String], b: &[String]) -> f64 {
    let set = |w: &[String]| w.windows(5).map(|s| s.join(" ")).collect::<HashSet<_>>();
    let (sa, sb) = (set(a), set(b));
    sa.intersection(&sb).count() as f64 / sa.union(&sb).count() as f64
}

#[test]
fn every_format_of_the_paper_yields_the_same_words() {
    let reference = words(&parse("paper.txt").text);
    assert!(reference.len() > 1000, "{} words", reference.len());
    for (name, format) in [
        ("paper.pdf", Format::Pdf),
        ("paper.html", Format::Html),
        ("paper.docx", Format::Docx),
        ("paper.md", Format::Markdown),
        ("paper.txt", Format::Text),
    ] {
        let doc = parse(name);
        assert_eq!(doc.format, format, "{name}");
        let got = words(&doc.text);
        let overlap = word_overlap(&reference, &got);
        let j = jaccard5(&reference, &got);
        assert!(overlap >= 0.95, "{name}: word overlap {overlap:.3}\n{}", doc.text);
        // Shingles, not just words, must survive: layout artefacts break 5-grams.
        assert!(j >= 0.9, "{name}: 5-gram Jaccard {j:.3}\n{}", doc.text);
    }
}

#[test]
fn pdf_cleanup_applied_to_the_paper() {
    let doc = parse("paper.pdf");
    let text = &doc.text;
    assert!(!text.contains('\u{fb01}'), "ligature left in:\n{text}");
    assert!(text.contains("fingerprints"), "{text}");
    assert!(text.contains("configuration"), "hyphenated word not joined:\n{text}");
    assert!(!text.contains("configu-"), "{text}");
    assert!(!text.contains("Preprint. Under review"), "running header left in:\n{text}");
    assert!(text.lines().all(|l| !l.trim().chars().all(|c| c.is_ascii_digit())), "page number left in:\n{text}");
}

#[test]
fn boilerplate_and_headers_stay_out() {
    let html = parse("paper.html").text;
    for junk in ["About the journal", "All rights reserved", "analytics", "font-family"] {
        assert!(!html.contains(junk), "{junk:?} in HTML text");
    }
    // The DOCX page header is a separate part and must not leak in.
    assert!(!parse("paper.docx").text.contains("Under review"));
}

#[test]
fn titles() {
    let want = "Shingle Fingerprints for Near-Duplicate Detection in Heterogeneous Document Collections";
    for name in ["paper.pdf", "paper.html", "paper.docx", "paper.md"] {
        assert_eq!(parse(name).title.as_deref(), Some(want), "{name}");
    }
    assert_eq!(parse("paper.txt").title, None);
}

#[test]
fn revision_is_similar_and_unrelated_documents_are_different() {
    let paper = words(&parse("paper.txt").text);
    for name in ["paper-revised.pdf", "paper-revised.md"] {
        let j = jaccard5(&paper, &words(&parse(name).text));
        assert!((0.75..0.95).contains(&j), "{name}: 5-gram Jaccard {j:.3}");
    }
    for name in ["unrelated-beekeeping.docx", "unrelated-harbour.html", "unrelated-orchestra.txt"] {
        let doc = parse(name);
        let j = jaccard5(&paper, &words(&doc.text));
        assert!(j < 0.05, "{name}: 5-gram Jaccard {j:.3}");
        assert!(words(&doc.text).len() > 400, "{name}");
    }
}

/// Guards the fixture itself: the raw PDF text really has the artefacts the
/// cleanup test above claims to remove.
#[test]
fn pdf_fixture_has_the_artefacts() {
    let bytes = std::fs::read(fixture("paper.pdf")).unwrap();
    let pages = pdf_extract::extract_text_from_mem_by_pages(&bytes).unwrap();
    assert!(pages.len() >= 2, "{} pages", pages.len());
    for (i, page) in pages.iter().enumerate() {
        assert!(page.contains("Preprint. Under review"), "page {} lacks the running header", i + 1);
        let number = (i + 1).to_string();
        assert!(page.lines().any(|l| l.trim() == number), "page {} lacks its number", i + 1);
    }
    let raw = pages.concat();
    assert!(raw.contains('\u{fb01}'), "no ligature in the raw text");
    assert!(raw.contains("configu-\n"), "no hyphenated line break in the raw text");
}
