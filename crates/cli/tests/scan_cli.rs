//! `neardup scan`, `report` and `export` through the real binary, on temp
//! copies of the committed fixtures (tests/fixtures/docs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/docs")
}

/// A scratch folder with a copy of the named fixtures under `docs/`.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn with(names: &[&str]) -> Scratch {
        let s = Scratch { dir: tempfile::tempdir().unwrap() };
        std::fs::create_dir_all(s.docs()).unwrap();
        for name in names {
            s.add(name);
        }
        s
    }

    fn all() -> Scratch {
        let names: Vec<String> = std::fs::read_dir(fixtures())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        Scratch::with(&names.iter().map(String::as_str).collect::<Vec<_>>())
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn docs(&self) -> PathBuf {
        self.dir.path().join("docs")
    }

    fn add(&self, name: &str) {
        std::fs::copy(fixtures().join(name), self.docs().join(name)).unwrap();
    }

    /// Runs neardup in the scratch folder with a clean dedup environment plus `env`.
    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
        cmd.args(args).current_dir(self.root());
        for (k, _) in std::env::vars() {
            if k.starts_with("NEARDUP_DEDUP_") || k.starts_with("KOMP_DEDUP_") {
                cmd.env_remove(k);
            }
        }
        cmd.envs(env.iter().copied());
        cmd.output().expect("binary runs")
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    /// `scan docs --json ARGS`, asserting exit status `code`.
    fn scan(&self, args: &[&str], code: i32) -> Value {
        let mut all = vec!["scan", "docs", "--json"];
        all.extend(args);
        json(&self.run(&all), code)
    }

    /// Report rows keyed by file name.
    fn report(&self) -> Vec<Value> {
        let v = json(&self.run(&["report", "--json"]), 0);
        v.as_array().unwrap().clone()
    }

    fn store(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.root().join(".neardup/dedup/fingerprints.json")).unwrap())
            .expect("the store is valid JSON")
    }
}

fn json(out: &Output, code: i32) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}\nstdout: {}", String::from_utf8_lossy(&out.stdout));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn row<'a>(rows: &'a [Value], file: &str) -> &'a Value {
    rows.iter().find(|r| r["path"].as_str().unwrap().ends_with(&format!("/{file}"))).unwrap_or_else(|| panic!("{file}"))
}

fn slug(rows: &[Value], file: &str) -> String {
    row(rows, file)["slug"].as_str().unwrap().to_owned()
}

const PAPER: [&str; 5] = ["paper.docx", "paper.html", "paper.md", "paper.pdf", "paper.txt"];
const UNRELATED: [&str; 3] = ["unrelated-beekeeping.docx", "unrelated-harbour.html", "unrelated-orchestra.txt"];

#[test]
fn formats_identical_revision_similar_unrelated_different() {
    let s = Scratch::all();
    let summary = s.scan(&[], 0);
    assert_eq!(summary["discovered"], 10);
    assert_eq!(summary["parsed"], 10);
    assert_eq!(summary["comparison_rule"], "lsh-verified");
    let rows = s.report();

    // Ingest order is path order: paper.docx is the first copy of the paper,
    // so it is kept and the four other formats are identical to it.
    let kept = slug(&rows, "paper.docx");
    assert_ne!(row(&rows, "paper.docx")["verdict"], "identical");
    for file in &PAPER[1..] {
        let r = row(&rows, file);
        assert_eq!(r["verdict"], "identical", "{file}: {r}");
        assert_eq!(r["kept_original"], kept.as_str(), "{file}: {r}");
        assert!(r["closest_score"].as_f64().unwrap() >= 0.95, "{r}");
    }
    // The revision (md and pdf) is similar to the paper: its two formats are
    // identical to each other, and the pair scores in the similar band on
    // the common scale (raw Jaccard 0.855, calibrated between 0.80 and 0.95).
    let revised = row(&rows, "paper-revised.md");
    assert_eq!(revised["verdict"], "similar", "{revised}");
    assert_eq!(revised["similar_to"], kept.as_str(), "{revised}");
    let score = revised["similar_score"].as_f64().unwrap();
    assert!((0.80..0.95).contains(&score), "{revised}");
    // Its closest match is its own PDF copy, which names it back, with the
    // same score; a copy does not make it a duplicate.
    let revised_pdf = row(&rows, "paper-revised.pdf");
    assert_eq!(revised_pdf["verdict"], "identical");
    assert_eq!(revised["closest_match"], revised_pdf["slug"], "{revised}");
    assert_eq!(revised_pdf["closest_match"], revised["slug"], "{revised_pdf}");
    assert_eq!(revised["closest_score"], revised_pdf["closest_score"]);
    assert_eq!(revised["closest_is_copy"], true);
    let docx = row(&rows, "paper.docx");
    assert_eq!(docx["verdict"], "similar");
    assert_eq!(docx["similar_to"], revised["slug"]);
    assert_eq!(docx["similar_score"], revised["similar_score"]);
    for file in UNRELATED {
        let r = row(&rows, file);
        assert_eq!(r["verdict"], "different", "{file}: {r}");
    }

    // The store holds exactly the seed's fields plus ours.
    let store = s.store();
    let entry = store["documents"][0].as_object().unwrap();
    for key in ["verdict", "closest_match", "closest_score", "closest_method", "embedding_score", "minhash_score"] {
        assert!(entry.contains_key(key), "{key}");
    }
    for key in ["slug", "path", "sha256", "format", "content_hash", "features", "embedding"] {
        assert!(entry.contains_key(key), "{key}");
    }
    assert_eq!(store["format_version"], 2);
}

#[test]
fn human_report_and_no_progress_bar_off_a_terminal() {
    let s = Scratch::with(&["paper.md", "paper.txt", "unrelated-orchestra.txt"]);
    let out = s.run(&["scan", "docs"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("scanned 3 files: 3 parsed"), "{stdout}");
    assert!(stdout.contains("1 identical, 0 similar, 2 different"), "{stdout}");
    assert!(!stderr.contains("dedup ") && !stderr.contains("parse "), "a bar was drawn off a terminal: {stderr}");
    let report = s.run(&["report"]);
    let table = String::from_utf8_lossy(&report.stdout);
    assert!(table.starts_with("SLUG") && table.contains("identical") && table.contains("minhash"), "{table}");
}

#[test]
fn incremental_scan_parses_only_new_files_and_back_updates() {
    let s = Scratch::with(&["paper.md", "unrelated-orchestra.txt", "unrelated-harbour.html"]);
    let first = s.scan(&[], 0);
    assert_eq!(first["parsed"], 3);
    let rows = s.report();
    assert_eq!(row(&rows, "paper.md")["verdict"], "different");
    let paper = slug(&rows, "paper.md");

    s.add("paper-revised.md");
    s.add("paper.html");
    let second = s.scan(&[], 0);
    assert_eq!(second["parsed"], 2, "{second}");
    assert_eq!(second["cache_hits"], 3);
    assert_eq!(second["unchanged"], 3);
    assert_eq!(second["new_documents"], 2);
    assert_eq!(second["stored_documents"], 3);
    assert_eq!(second["rebuilt"], Value::Null);

    let rows = s.report();
    let revised = row(&rows, "paper-revised.md");
    assert_eq!(revised["verdict"], "similar");
    assert_eq!(row(&rows, "paper.html")["verdict"], "identical");
    assert_eq!(row(&rows, "paper.html")["closest_match"], paper.as_str());
    // The back-update: the stored paper now names its new copy as its
    // closest match (both name each other with the same score) and the
    // revision as what it is similar to.
    let stored = row(&rows, "paper.md");
    let html = row(&rows, "paper.html");
    assert_eq!(stored["closest_match"], html["slug"], "{stored}");
    assert_eq!(stored["closest_score"], html["closest_score"]);
    assert_eq!(stored["verdict"], "similar");
    assert_eq!(stored["similar_to"], revised["slug"], "{stored}");
    assert_eq!(stored["similar_score"], revised["closest_score"]);
    assert_eq!(second["back_updated"], serde_json::json!([paper]));

    // A third scan with nothing new compares nothing.
    let third = s.scan(&[], 0);
    assert_eq!((third["parsed"].as_u64(), third["new_documents"].as_u64()), (Some(0), Some(0)));
    assert_eq!(third["comparisons"], 0);
}

#[test]
fn config_change_rebuilds_from_the_parse_cache_without_parsing() {
    let s = Scratch::all();
    s.scan(&[], 0);
    let before = s.store();

    // Only one file is named now, and the others are gone from disk: their
    // texts can only come from the parse cache.
    for name in std::fs::read_dir(s.docs()).unwrap() {
        let path = name.unwrap().path();
        if !path.ends_with("paper.md") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let out = s.run(&["scan", "docs/paper.md", "--json", "--minhash-lsh-threshold", "0.6"]);
    let summary = json(&out, 0);
    assert!(summary["rebuilt"].as_str().unwrap().contains("configuration changed"), "{summary}");
    assert_eq!(summary["parsed"], 0, "{summary}");
    assert_eq!(summary["cache_hits"], 1);
    assert_eq!(summary["rebuilt_from_cache"], 10);
    assert_eq!(summary["reparsed_for_rebuild"], 0);
    assert_eq!(summary["new_documents"], 10);
    let after = s.store();
    assert_ne!(before["stamp"], after["stamp"]);
    assert!(after["stamp_inputs"].as_str().unwrap().contains("minhash_lsh_threshold=0.6"));
    // Slugs survive a rebuild, and so do the verdicts on this data.
    let slugs = |v: &Value| -> Vec<(String, String)> {
        v["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["slug"].as_str().unwrap().to_owned(), d["verdict"].as_str().unwrap().to_owned()))
            .collect()
    };
    assert_eq!(slugs(&before), slugs(&after));

    // Same configuration again: not stale any more.
    let again = json(&s.run(&["scan", "docs/paper.md", "--json", "--minhash-lsh-threshold", "0.6"]), 0);
    assert_eq!(again["rebuilt"], Value::Null);
    assert_eq!(again["unchanged"], 1);
}

#[test]
fn bad_inputs_are_reported_and_the_batch_finishes() {
    let s = Scratch::with(&["paper.md", "unrelated-orchestra.txt"]);
    let mut pdf = std::fs::read(fixtures().join("paper.pdf")).unwrap();
    pdf.truncate(pdf.len() / 3);
    std::fs::write(s.docs().join("broken.pdf"), pdf).unwrap();
    std::fs::write(s.docs().join("binary.txt"), [0u8, 159, 146, 150, 0, 1, 2, 3, 0, 0, 255, 254].repeat(50)).unwrap();
    std::fs::write(s.docs().join("empty.md"), b"").unwrap();
    std::fs::write(s.docs().join("image.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    std::fs::write(s.docs().join("huge.txt"), "word ".repeat(30_000)).unwrap();

    let out = s.run(&["scan", "docs", "--json", "--max-file-bytes", "100000"]);
    let summary = json(&out, 3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let skipped = summary["skipped"].as_array().unwrap();
    let reason = |file: &str| -> String {
        let s =
            skipped.iter().find(|s| s["path"].as_str().unwrap().ends_with(file)).unwrap_or_else(|| panic!("{file}"));
        s["reason"].as_str().unwrap().to_owned()
    };
    assert!(reason("broken.pdf").contains("corrupt or unreadable PDF"), "{}", reason("broken.pdf"));
    assert!(reason("binary.txt").contains("binary"), "{}", reason("binary.txt"));
    assert!(reason("empty.md").contains("empty"), "{}", reason("empty.md"));
    assert!(reason("image.png").contains("unsupported"), "{}", reason("image.png"));
    assert!(reason("huge.txt").contains("over the limit of 100000 bytes"), "{}", reason("huge.txt"));
    assert_eq!(skipped.len(), 5);
    for file in ["broken.pdf", "binary.txt", "empty.md", "image.png", "huge.txt"] {
        assert!(stderr.contains(&format!("skipped docs/{file}: ")), "{file} not reported: {stderr}");
    }
    // The good files went through and the store is valid.
    assert_eq!(summary["new_documents"], 2);
    assert_eq!(s.store()["documents"].as_array().unwrap().len(), 2);
    let rows = s.report();
    assert_eq!(rows.len(), 2);
}

#[test]
fn config_precedence_toml_then_env_then_flags() {
    let s = Scratch::with(&["paper.md"]);
    std::fs::write(s.root().join("neardup.toml"), "[dedup]\nthreshold_similar = 0.5\nmatchers = \"minhash\"\n")
        .unwrap();
    let similar_in_stamp = |env: &[(&str, &str)], flags: &[&str]| -> String {
        let mut args = vec!["scan", "docs", "--json"];
        args.extend(flags);
        json(&s.run_env(&args, env), 0);
        let inputs = s.store()["stamp_inputs"].as_str().unwrap().to_owned();
        inputs.split(';').find(|kv| kv.starts_with("threshold_similar=")).unwrap().to_owned()
    };
    assert_eq!(similar_in_stamp(&[], &[]), "threshold_similar=0.5");
    let komp = [("KOMP_DEDUP_THRESHOLD_SIMILAR", "0.6")];
    assert_eq!(similar_in_stamp(&komp, &[]), "threshold_similar=0.6");
    let both = [("KOMP_DEDUP_THRESHOLD_SIMILAR", "0.6"), ("NEARDUP_DEDUP_THRESHOLD_SIMILAR", "0.65")];
    assert_eq!(similar_in_stamp(&both, &[]), "threshold_similar=0.65");
    assert_eq!(similar_in_stamp(&both, &["--threshold-similar", "0.7"]), "threshold_similar=0.7");
    // --config names another file.
    std::fs::write(s.root().join("other.toml"), "[dedup]\nthreshold_similar = 0.55\n").unwrap();
    assert_eq!(similar_in_stamp(&[], &["--config", "other.toml"]), "threshold_similar=0.55");
}

#[test]
fn bad_configuration_exits_2_with_a_clear_message() {
    let s = Scratch::with(&["paper.md"]);
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case<'_>] = &[
        (&["--threshold-identical", "1.2"], &[], "threshold_identical: must be between 0 and 1"),
        (&["--threshold-similar", "0.97"], &[], "above threshold_identical"),
        (&["--matchers", "minhash,simhash"], &[], "unknown matcher \"simhash\""),
        (&["--model", "granite-embedding:278m"], &[], "unknown provider \"granite-embedding\""),
        (&["--model", "all-MiniLM"], &[], "no provider prefix"),
        (&["--matchers", "embedding"], &[], "dedup.model is empty"),
        (&[], &[("KOMP_DEDUP_ENABLED", "maybe")], "KOMP_DEDUP_ENABLED=\"maybe\""),
        (&[], &[("NEARDUP_DEDUP_MINHASH_LSH_THRESHOLD", "high")], "NEARDUP_DEDUP_MINHASH_LSH_THRESHOLD"),
        (&["--config", "missing.toml"], &[], "cannot read config file"),
    ];
    for (flags, env, needle) in cases {
        let mut args = vec!["scan", "docs"];
        args.extend(*flags);
        let out = s.run_env(&args, env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?} {env:?}: {stderr}");
        assert!(stderr.contains(needle), "{flags:?} {env:?}: {stderr}");
    }
    std::fs::write(s.root().join("neardup.toml"), "[dedup]\nthreshold = 0.5\n").unwrap();
    let out = s.run(&["scan", "docs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("threshold"), "{}", String::from_utf8_lossy(&out.stderr));
    // No store yet: report is an error, not a crash.
    std::fs::remove_file(s.root().join("neardup.toml")).unwrap();
    let out = s.run(&["report"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run `neardup scan` first"));
}

/// Issue 15's weaker spots: the PDF parser's panics are caught (the file is
/// skipped as corrupt) but used to print "thread panicked at ..." on stderr
/// for each; now the skip report is the only line.
#[test]
fn caught_pdf_parser_panics_print_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let pdf = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/docs/paper.pdf")).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..60 {
        let mut b = pdf.clone();
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x % b.len() as u64) as usize;
            b[at] = (x >> 40) as u8;
        }
        std::fs::write(docs.join(format!("f{i}.pdf")), b).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["scan", docs.to_str().unwrap(), "--store", dir.path().join("store").to_str().unwrap()])
        .args(["--matchers", "minhash", "-q"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("parser failed"), "no corrupted copy made the parser panic:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Issue 45 item 9: a FIFO named on the command line (`neardup scan dir/*`)
/// used to be opened for reading, which blocks until a writer appears, so
/// the scan hung forever. Now a named path that is neither a regular file
/// nor a folder is skipped and reported, as a missing one is, and the rest
/// is scanned; inside a walked folder such an entry is left out, as before.
#[cfg(unix)]
#[test]
fn a_fifo_named_on_the_command_line_is_skipped_not_waited_on() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let s = Scratch::with(&["paper.md", "unrelated-orchestra.txt"]);
    let fifo = s.docs().join("pipe.txt");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo failed");

    // Runs neardup with a guard: a hang is a failure, not a blocked test.
    let run = |args: &[&str]| -> Output {
        let out_path = s.root().join("stdout");
        let err_path = s.root().join("stderr");
        let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(args)
            .current_dir(s.root())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .spawn()
            .expect("binary runs");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(60) {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("`neardup {}` still running after 60 s (blocked on the FIFO)", args.join(" "));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Output { status, stdout: std::fs::read(out_path).unwrap(), stderr: std::fs::read(err_path).unwrap() }
    };

    let out = run(&[
        "scan",
        "docs/paper.md",
        "docs/pipe.txt",
        "docs/unrelated-orchestra.txt",
        "--json",
        "--matchers",
        "minhash",
    ]);
    let summary = json(&out, 3);
    let skipped = summary["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0]["path"].as_str().unwrap().ends_with("pipe.txt"), "{skipped:?}");
    let reason = skipped[0]["reason"].as_str().unwrap();
    assert!(reason.contains("not a regular file") && reason.contains("FIFO"), "{reason}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("skipped docs/pipe.txt: "), "{stderr}");
    assert_eq!(summary["new_documents"], 2);

    // Walking the folder leaves the FIFO out without a word, as before.
    let out = run(&["scan", "docs", "--json", "--matchers", "minhash"]);
    let summary = json(&out, 0);
    assert_eq!(summary["discovered"], 2);
}

/// Issue 15 item 6: links planted in the export folder used to be followed,
/// overwriting files outside it; now they are replaced, never followed.
#[cfg(unix)]
#[test]
fn export_never_writes_through_links_in_its_folder() {
    let s = Scratch::all();
    s.scan(&[], 0);
    let rows = s.report();
    let out_dir = s.root().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let outside = s.root().join("outside.txt");
    std::fs::write(&outside, "precious").unwrap();
    let page = out_dir.join(format!("{}.md", slug(&rows, "unrelated-orchestra.txt")));
    std::os::unix::fs::symlink(&outside, &page).unwrap();
    std::os::unix::fs::symlink(&outside, out_dir.join("_index.md")).unwrap();
    let out = s.run(&["export", "out", "--json"]);
    json(&out, 0);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious");
    for f in [page, out_dir.join("_index.md")] {
        let meta = std::fs::symlink_metadata(&f).unwrap();
        assert!(meta.file_type().is_file(), "{} is not a plain file", f.display());
    }
}

#[test]
fn export_skips_identical_and_flags_similar_with_the_seed_callout() {
    let s = Scratch::all();
    s.scan(&[], 0);
    let rows = s.report();
    let out = s.run(&["export", "out", "--json"]);
    let summary = json(&out, 0);
    let out_dir = s.root().join("out");

    // One page per kept document: the paper, the revision, three unrelated.
    let written = summary["written"].as_array().unwrap();
    assert_eq!(written.len(), 5, "{summary}");
    for r in &rows {
        let page = out_dir.join(format!("{}.md", r["slug"].as_str().unwrap()));
        assert_eq!(page.exists(), r["verdict"] != "identical", "{r}");
    }
    // The revision's page starts with the callout, exactly, naming the kept
    // paper (not its own skipped PDF copy, its closest match).
    let revised = row(&rows, "paper-revised.md");
    let page = std::fs::read_to_string(out_dir.join(format!("{}.md", revised["slug"].as_str().unwrap()))).unwrap();
    let expected = format!(
        "> [!warning] Possible duplicate\n> This document is similar to **{}** (score={:.2}).\n\n",
        revised["similar_to"].as_str().unwrap(),
        revised["similar_score"].as_f64().unwrap()
    );
    assert!(page.starts_with(&expected), "{expected}\n---\n{}", &page[..300]);
    assert!(page.contains("MinHash"), "the text follows the callout");
    // Unrelated pages carry no callout.
    let orchestra =
        std::fs::read_to_string(out_dir.join(format!("{}.md", slug(&rows, "unrelated-orchestra.txt")))).unwrap();
    assert!(!orchestra.contains("[!warning]"));
    // The index names each skipped copy's kept original.
    let index = std::fs::read_to_string(out_dir.join("_index.md")).unwrap();
    let kept = slug(&rows, "paper.docx");
    for file in &PAPER[1..] {
        assert!(
            index.contains(&format!("| {} | identical | identical to {kept}, skipped |", slug(&rows, file))),
            "{index}"
        );
    }
    let human = String::from_utf8_lossy(&s.run(&["export", "out2"]).stdout).into_owned();
    assert!(human.contains(&format!("identical to {kept}, skipped")), "{human}");
}

/// The all-MiniLM-L6-v2 weights: `NEARDUP_TEST_MINILM_DIR`, or fetched into
/// target/minilm by scripts/fetch-minilm.sh. Fails (never skips) without them.
fn minilm() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("NEARDUP_TEST_MINILM_DIR") {
            return PathBuf::from(dir);
        }
        let dir = repo_root().join("target/minilm");
        let status = Command::new("bash").arg(repo_root().join("scripts/fetch-minilm.sh")).arg(&dir).status();
        assert!(
            matches!(status, Ok(s) if s.success()),
            "needs MiniLM weights: set NEARDUP_TEST_MINILM_DIR or let scripts/fetch-minilm.sh fetch them ({status:?})"
        );
        dir
    })
}

#[test]
fn local_embeddings_and_the_combined_matcher_store_both_scores() {
    let s = Scratch::all();
    let model = format!("local:{}", minilm().display());
    let summary = s.scan(&["--model", &model], 0);
    assert_eq!(summary["matchers"], "embedding,minhash");
    assert_eq!(summary["comparison_rule"], "all-pairs");
    assert_eq!(summary["comparisons"], 45, "N×(N−1)÷2 for 10 new documents");
    // One embedding per normalized text: the paper's five formats share one,
    // the revision's two another.
    assert_eq!((summary["embedded"].as_u64(), summary["embeddings_reused"].as_u64()), (Some(5), Some(5)));
    assert!(summary["embedded_tokens"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["embedding_tokens_per_s"].as_f64().unwrap() > 0.0, "{summary}");
    let rows = s.report();
    for r in &rows {
        let (e, m) = (r["embedding_score"].as_f64(), r["minhash_score"].as_f64());
        assert!(e.is_some() && m.is_some(), "both raw scores stored: {r}");
        let (ec, mc) = (r["embedding_calibrated"].as_f64().unwrap(), r["minhash_calibrated"].as_f64().unwrap());
        let c = r["closest_score"].as_f64().unwrap();
        assert!(c == ec.max(mc) || c == 1.0, "{r}");
        if c < 1.0 {
            let method = if mc >= ec { "minhash" } else { "embedding" };
            assert_eq!(r["closest_method"], method, "{r}");
        }
    }
    for file in PAPER {
        let r = row(&rows, file);
        assert_eq!(r["verdict"], if file == "paper.docx" { "similar" } else { "identical" }, "{file}");
    }
    for file in UNRELATED {
        let r = row(&rows, file);
        assert_eq!(r["verdict"], "different", "{r}");
        assert!(r["embedding_score"].as_f64().unwrap() < 0.5, "{r}");
    }
    // The seed's blind spot, calibrated away: the light revision's raw
    // embedding cosine is ~0.99, which the seed's max() of raw scores called
    // identical at 0.95; on the common scale the pair is similar, and the
    // paper is kept with a callout naming the revision.
    let docx = row(&rows, "paper.docx");
    assert_eq!(docx["similar_to"], row(&rows, "paper-revised.md")["slug"], "{docx}");
    let similar = docx["similar_score"].as_f64().unwrap();
    assert!((0.80..0.95).contains(&similar), "{docx}");
    let store = s.store();
    let dim = store["documents"][0]["embedding"].as_array().unwrap().len();
    assert_eq!(dim, 384);

    // A new file: only it is embedded; M×N + N×(N−1)÷2 = 10 comparisons.
    std::fs::write(s.docs().join("note.txt"), "A short note about orchestras and harbours, unrelated to hashing.")
        .unwrap();
    let second = s.scan(&["--model", &model], 0);
    assert_eq!((second["embedded"].as_u64(), second["comparisons"].as_u64()), (Some(1), Some(10)));
    // A threshold change rebuilds the store but reuses every embedding.
    let third = s.scan(&["--model", &model, "--threshold-identical", "0.99"], 0);
    assert!(third["rebuilt"].is_string());
    assert_eq!((third["embedded"].as_u64(), third["embeddings_reused"].as_u64()), (Some(0), Some(11)));
    assert_eq!(third["parsed"], 0);
    let rows = s.report();
    assert_eq!(row(&rows, "paper.docx")["verdict"], "similar");
    for file in &PAPER[1..] {
        assert_eq!(row(&rows, file)["kept_original"], slug(&rows, "paper.docx").as_str(), "{file}");
    }
}
