//! The batch library called as a library (what the `neardup dedup` binary
//! does through it): a real corpus deduplicated by `dedup::run` in memory
//! and under a memory limit small enough that every phase spills, with the
//! same results — summaries and every output file — and no process exit
//! to hide what the in-memory engine leaves behind.

use std::path::Path;
use std::process::Command;

use neardup_batch::{dedup, input, Options};
use neardup_core::Config;

/// The first `n` documents of the real corpus (bench/corpus/real.py:
/// Debian's licences, copyright files, documentation and man pages, where
/// near duplicates are neighbours), as one JSONL file.
fn real_corpus(dir: &Path, n: usize) -> std::path::PathBuf {
    let all = dir.join("real-all.jsonl");
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let built = Command::new("python3")
        .arg(format!("{root}/bench/corpus/real.py"))
        .arg(&all)
        .status()
        .expect("python3 runs the corpus builder");
    assert!(built.success());
    let text = std::fs::read_to_string(&all).unwrap();
    let lines: Vec<&str> = text.lines().take(n).collect();
    assert_eq!(lines.len(), n, "the corpus has fewer than {n} documents");
    let path = dir.join("real.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn options(input: &Path, out: &Path, tag: &str, memory_limit: &str) -> Options {
    let file = |name: &str| Some(out.join(format!("{tag}.{name}")).display().to_string());
    let inputs = input::expand(&[input.display().to_string()]).unwrap();
    let mut o = Options::new(inputs, Config::default().resolve().unwrap());
    o.output = file("kept.jsonl");
    o.pairs = file("pairs.tsv");
    o.clusters = file("clusters.jsonl");
    o.dropped = file("dropped.tsv");
    o.memory_limit = memory_limit.into();
    o.work_dir = Some(out.to_owned());
    o
}

#[test]
fn the_library_gives_the_same_results_in_memory_and_under_a_tiny_limit() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = real_corpus(dir.path(), 2_000);

    let memory = dedup::run(&options(&corpus, dir.path(), "memory", "none")).unwrap();
    let bounded = dedup::run(&options(&corpus, dir.path(), "bounded", "256K")).unwrap();

    assert_eq!(memory.records, 2_000);
    assert!(memory.verified_pairs > 0 && memory.dropped > 0, "the real corpus has near duplicates");
    assert_eq!(memory.kept + memory.dropped, memory.records);
    assert!(memory.memory.is_none(), "`none` runs in memory");
    let phases = &bounded.memory.as_ref().expect("a limit runs the bounded engine").phases;
    assert!(phases.iter().any(|p| p.disk_bytes > 0), "the bounded run wrote its state to disk");
    for (a, b) in [
        (memory.kept, bounded.kept),
        (memory.dropped, bounded.dropped),
        (memory.verified_pairs, bounded.verified_pairs),
        (memory.clusters, bounded.clusters),
        (memory.capped_queries, bounded.capped_queries),
        (memory.saturated_queries, bounded.saturated_queries),
    ] {
        assert_eq!(a, b);
    }
    assert_eq!(memory.kept_unresolved, bounded.kept_unresolved);
    for name in ["kept.jsonl", "pairs.tsv", "clusters.jsonl", "dropped.tsv"] {
        let read = |tag: &str| std::fs::read(dir.path().join(format!("{tag}.{name}"))).unwrap();
        assert!(read("memory") == read("bounded"), "{name} differs between the engines");
    }
    // The bounded run removes its work folder: what is left is the corpus
    // and the outputs.
    let left = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(left, 2 + 2 * 4, "work folder left behind");
}

#[test]
fn a_bad_limit_is_a_usage_error_before_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("one.jsonl");
    std::fs::write(&corpus, "{\"id\": \"a\", \"text\": \"one line of text\"}\n").unwrap();
    let err = dedup::run(&options(&corpus, dir.path(), "bad", "lots")).unwrap_err();
    assert!(err.downcast_ref::<neardup_batch::UsageError>().is_some(), "{err:#}");
    assert!(err.to_string().contains("--memory-limit"), "{err}");
    assert!(!dir.path().join("bad.kept.jsonl").exists(), "an output was created before the check");
}
