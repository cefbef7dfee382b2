//! The parse cache across runs: a rebuild reads every text back without
//! parsing, renamed copies share an entry, and entries written by format
//! version 1 stay readable (frozen fixture in tests/data/cache-v1).

use std::path::{Path, PathBuf};

use neardup_docs::{discover, parse_file, sha256_hex, Format, Limits, ParseCache, PARSER_VERSION};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/docs")
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn second_scan_parses_nothing() {
    let work = tempfile::tempdir().unwrap();
    let docs = work.path().join("docs");
    copy_dir(&fixtures(), &docs);
    let cache = ParseCache::open(work.path().join(".neardup/cache")).unwrap();
    let files = discover(&[&docs], &Default::default()).files;
    assert_eq!(files.len(), 10);

    let first: Vec<_> = files.iter().map(|f| parse_file(f, &Limits::default(), &cache).unwrap()).collect();
    assert!(first.iter().all(|o| !o.cache_hit));

    // A fresh cache handle (a new process, in effect) over the same folder.
    let cache = ParseCache::open(work.path().join(".neardup/cache")).unwrap();
    let second: Vec<_> = files.iter().map(|f| parse_file(f, &Limits::default(), &cache).unwrap()).collect();
    assert!(second.iter().all(|o| o.cache_hit));
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a.doc, b.doc);
    }

    // Same bytes under a new name: a hit. Changed bytes: a miss.
    std::fs::copy(docs.join("paper.pdf"), docs.join("copy-of-paper.pdf")).unwrap();
    assert!(parse_file(&docs.join("copy-of-paper.pdf"), &Limits::default(), &cache).unwrap().cache_hit);
    std::fs::write(docs.join("paper.txt"), "edited text").unwrap();
    assert!(!parse_file(&docs.join("paper.txt"), &Limits::default(), &cache).unwrap().cache_hit);
}

#[test]
fn parser_version_bump_reparses() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("cache");
    let file = fixtures().join("paper.md");
    assert!(!parse_file(&file, &Limits::default(), &ParseCache::open(&root).unwrap()).unwrap().cache_hit);
    let bumped = ParseCache::open(&root).unwrap().with_parser_version(PARSER_VERSION + 1);
    assert!(!parse_file(&file, &Limits::default(), &bumped).unwrap().cache_hit);
    assert!(parse_file(&file, &Limits::default(), &bumped).unwrap().cache_hit);
}

#[test]
fn frozen_v1_entry_still_reads() {
    let source = std::fs::read(data("cache-v1-source.md")).unwrap();
    let key = sha256_hex(&source);
    let cache = ParseCache::open(data("cache-v1")).unwrap().with_parser_version(1);
    let doc = cache.get(&key).unwrap().expect("the frozen v1 entry must stay readable");
    assert_eq!(doc.format, Format::Markdown);
    assert_eq!(doc.title.as_deref(), Some("Frozen entry"));
    assert_eq!(doc.bytes, source.len() as u64);
    assert_eq!(doc.text, "Frozen entry\nThis cache entry was written by format version 1.");
}
