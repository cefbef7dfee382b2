//! Test corpora shared by the scan tests.

use std::path::{Path, PathBuf};

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/docs").join(name)
}

/// A templated site from real text, written to `dir`: every page
/// (`page-NN.txt`) is the same header and footer (the orchestra fixture's
/// first 120 and last 50 words) around its own paragraph (the paper
/// fixture's paragraphs of 40 words or more, 65–134 words), plus
/// `page-00-revised.txt`, page 0 with one word changed. Returns the
/// paragraphs, in page order.
pub fn templated_site(dir: &Path) -> Vec<String> {
    let paper = std::fs::read_to_string(fixture("paper.md")).unwrap();
    let orchestra = std::fs::read_to_string(fixture("unrelated-orchestra.txt")).unwrap();
    let words: Vec<&str> = orchestra.split_whitespace().collect();
    let (head, foot) = (words[..120].join(" "), words[words.len() - 50..].join(" "));
    let paragraphs: Vec<String> = paper
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| p.split(' ').count() >= 40)
        .collect();
    assert!(paragraphs.len() >= 10, "{}", paragraphs.len());
    std::fs::create_dir_all(dir).unwrap();
    for (i, p) in paragraphs.iter().enumerate() {
        std::fs::write(dir.join(format!("page-{i:02}.txt")), format!("{head}\n\n{p}\n\n{foot}\n")).unwrap();
    }
    let mut revised: Vec<&str> = paragraphs[0].split(' ').collect();
    let mid = revised.len() / 2;
    revised[mid] = "changed";
    std::fs::write(dir.join("page-00-revised.txt"), format!("{head}\n\n{}\n\n{foot}\n", revised.join(" "))).unwrap();
    paragraphs
}
