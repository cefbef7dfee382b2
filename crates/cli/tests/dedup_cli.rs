//! `neardup dedup`, `eval`, `tune` and `gen` through the real binary.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn neardup(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        // A run that rejects its configuration exits before reading: a closed pipe is fine.
        if let Err(e) = pipe.write_all(input) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const ABC: &str = r#"{"id": "A", "text": "red fox runs very fast"}
{"id": "B", "text": "red fox runs very fast today"}
{"id": "C", "text": "database backup completed nightly"}
"#;

const SEED: [&str; 6] = ["--normalizer", "seed", "--shingle-width", "2", "--threshold", "0.75"];

#[test]
fn seed_demonstration_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = dir.path().join("pairs.tsv");
    let kept = dir.path().join("kept.jsonl");
    let clusters = dir.path().join("clusters.jsonl");
    let mut args = vec!["dedup", "-", "--pairs", pairs.to_str().unwrap(), "-o", kept.to_str().unwrap()];
    args.extend(["--clusters", clusters.to_str().unwrap(), "--json"]);
    args.extend(SEED);
    let out = neardup(&args, Some(ABC.as_bytes()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&pairs).unwrap(), "A\tB\t0.8\n");
    let kept = std::fs::read_to_string(&kept).unwrap();
    assert!(kept.contains("\"A\"") && kept.contains("\"C\"") && !kept.contains("\"B\""), "{kept}");
    let clusters = std::fs::read_to_string(&clusters).unwrap();
    let row: serde_json::Value = serde_json::from_str(clusters.lines().next().unwrap()).unwrap();
    assert_eq!(row["members"], serde_json::json!(["A", "B"]));
    assert_eq!(row["kept"], serde_json::json!(["A"]));
    assert_eq!(clusters.lines().count(), 1);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["records"], 3);
    assert_eq!(summary["kept"], 2);
    assert_eq!(summary["verified_pairs"], 1);
}

#[test]
fn incompatible_band_layouts_are_rejected_with_status_2() {
    for extra in [&["--bands", "8", "--rows", "31"][..], &["--num-perm", "31", "--bands", "8"][..]] {
        let mut args = vec!["dedup", "-"];
        args.extend(SEED);
        args.extend(extra);
        let out = neardup(&args, Some(ABC.as_bytes()));
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let err = text(&out.stderr);
        assert!(err.contains("bands") && (err.contains("exceeds") || err.contains("divide evenly")), "{err}");
    }
    let out = neardup(&["dedup", "-", "--threshold", "1.5"], Some(ABC.as_bytes()));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("threshold"));
}

#[test]
fn duplicate_item_ids_are_rejected_with_their_line() {
    let input = format!("{ABC}{{\"id\": \"A\", \"text\": \"replacement\"}}\n");
    let mut args = vec!["dedup", "-", "--json"];
    args.extend(SEED);
    let out = neardup(&args, Some(input.as_bytes()));
    assert_eq!(out.status.code(), Some(3));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["rejected"][0]["line"], 4);
    assert!(summary["rejected"][0]["reason"].as_str().unwrap().contains("duplicate item id"));
    assert!(text(&out.stderr).contains("line 4"));
    assert_eq!(summary["records"], 3, "the first A is kept, the replacement is not");
}

#[test]
fn bad_input_is_reported_per_line_never_dropped_silently() {
    let mut input = Vec::new();
    input.extend_from_slice(b"{\"id\": \"ok1\", \"text\": \"a perfectly normal line of text here\"}\n");
    input.extend_from_slice(b"{\"id\": \"bad-json\", \"text\": \n");
    input.extend_from_slice(b"{\"id\": \"no-text\"}\n");
    input.extend_from_slice(b"{\"id\": \"utf8\", \"text\": \"\xff\xfe\"}\n");
    input.extend_from_slice(b"{\"id\": \"empty\", \"text\": \"\"}\n");
    input.extend_from_slice(b"\n");
    input.extend_from_slice(b"[1, 2, 3]\n");
    input.extend_from_slice(b"{\"id\": \"num\", \"text\": 42}\n");
    input.extend_from_slice(b"{\"id\": \"empty2\", \"text\": \"  ...  \"}\n");
    let out = neardup(&["dedup", "-", "--json"], Some(&input));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lines: Vec<u64> = s["rejected"].as_array().unwrap().iter().map(|r| r["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, vec![2, 3, 4, 7, 8]);
    assert_eq!(s["rejected"][2]["reason"], "invalid UTF-8 at byte 24");
    // ok1, empty, empty2 are records; the two empty texts are identical after normalization.
    assert_eq!(s["records"], 3);
    assert_eq!(s["kept"], 2);
}

#[test]
fn a_100_mb_single_line_is_handled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    f.write_all(b"{\"id\": \"small\", \"text\": \"just a small record\"}\n{\"id\": \"huge\", \"text\": \"").unwrap();
    let chunk = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(1000);
    let mut written = 0;
    while written < 100_000_000 {
        f.write_all(chunk.as_bytes()).unwrap();
        written += chunk.len();
    }
    f.write_all(b"\"}\n{\"id\": \"after\", \"text\": \"the record after the big one\"}\n").unwrap();
    drop(f);
    // Within the line limit: processed, but over --max-shingles, so exact-hash only (reported).
    let out = neardup(&["dedup", path.to_str().unwrap(), "--json"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["records"], 3);
    assert_eq!(s["degraded"], serde_json::json!(["huge"]));
    // Over the line limit: skipped with its line number, the rest still processed.
    let out = neardup(&["dedup", path.to_str().unwrap(), "--json", "--max-line-bytes", "10000000"], None);
    assert_eq!(out.status.code(), Some(3));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["records"], 2);
    assert_eq!(s["rejected"][0]["line"], 2);
    assert!(s["rejected"][0]["reason"].as_str().unwrap().contains("limit"));
}

#[test]
fn ids_default_to_line_numbers_and_integer_ids_work() {
    let input =
        b"{\"text\": \"one two three four five six\"}\n{\"id\": 7, \"text\": \"one two three four five six\"}\n";
    let dir = tempfile::tempdir().unwrap();
    let pairs = dir.path().join("p.tsv");
    let out = neardup(&["dedup", "-", "--pairs", pairs.to_str().unwrap(), "-q"], Some(input));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&pairs).unwrap(), "1\t7\t1\n");
}

#[test]
fn eval_demo_and_tune_work() {
    let out = neardup(&["eval", "--demo"], None);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("A (exact J = 0.8)") && stdout.contains("demonstration passed"), "{stdout}");

    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("s.svg");
    let out = neardup(
        &["tune", "--threshold", "0.85", "--recall-target", "0.999", "--json", "--svg", svg.to_str().unwrap()],
        None,
    );
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["recall_at_threshold"].as_f64().unwrap() >= 0.999);
    assert!(v["bands"].as_u64().unwrap() * v["rows"].as_u64().unwrap() <= 128);
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
}

fn gen_corpus(dir: &Path, bases: &str) -> (String, String) {
    let corpus = dir.join("c.jsonl");
    let truth = dir.join("t.jsonl");
    let out = neardup(
        &[
            "gen",
            "--out",
            corpus.to_str().unwrap(),
            "--truth",
            truth.to_str().unwrap(),
            "--bases",
            bases,
            "--words",
            "300",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    (corpus.to_str().unwrap().to_owned(), truth.to_str().unwrap().to_owned())
}

#[test]
fn eval_on_a_generated_corpus_meets_the_recall_contract() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, truth) = gen_corpus(dir.path(), "300");
    assert_eq!(std::fs::read_to_string(&truth).unwrap().lines().count(), 900);
    let out = neardup(&["eval", &corpus, "--json", "--max-candidates", "1000"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for bin in r["candidate_recall_by_bin"].as_array().unwrap() {
        if bin["lo"].as_f64().unwrap() >= 0.85 && bin["truth"].as_u64().unwrap() > 0 {
            assert!(bin["recall"].as_f64().unwrap() >= 0.995, "{bin}");
        }
    }
    for d in r["decisions"].as_array().unwrap() {
        assert_eq!(d["precision"].as_f64().unwrap(), 1.0, "{d}");
    }
}

#[test]
fn threads_do_not_change_results() {
    let dir = tempfile::tempdir().unwrap();
    // 4,400 records: six chunks (the first ones ramp up from 128 records),
    // each fingerprinted as several tasks that finish in any order.
    let (corpus, _) = gen_corpus(dir.path(), "1100");
    let run = |threads: &str| {
        let pairs = dir.path().join(format!("pairs{threads}.tsv"));
        let out = neardup(&["dedup", &corpus, "-q", "--threads", threads, "--pairs", pairs.to_str().unwrap()], None);
        assert!(out.status.success());
        std::fs::read_to_string(pairs).unwrap()
    };
    let one = run("1");
    assert!(!one.is_empty());
    assert_eq!(one, run("2"));
    assert_eq!(one, run("4"));
}

/// Issue 15 item 7: groups of identical texts used to write every pair of
/// each group (quadratic); same-content matches now count against
/// --max-candidates, so the pairs grow with the records times the cap.
#[test]
fn identical_groups_give_pairs_linear_in_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = String::new();
    for i in 0..2400 {
        let g = i % 8;
        input.push_str(&format!(
            "{{\"id\": {i}, \"text\": \"group {g} has the same words in every copy of this group, long enough to shingle\"}}\n"
        ));
    }
    let pairs = dir.path().join("pairs.tsv");
    let out = neardup(
        &["dedup", "-", "-q", "--json", "--max-candidates", "5", "--pairs", pairs.to_str().unwrap()],
        Some(input.as_bytes()),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["kept"], 8, "{summary}");
    let lines = std::fs::read_to_string(&pairs).unwrap().lines().count();
    // Quadratic would be 8 x 300 x 299 / 2 = 358,800 lines.
    assert!((2392..=2400 * 2 * 5).contains(&lines), "{lines} pair lines");
}

/// Issue 15's weaker spots: an id holding a tab or newline used to break the
/// TSV rows; a standard error whose reader is gone (EPIPE) used to make
/// `dedup` panic (exit 101) when it reported a rejected line.
#[test]
fn tsv_ids_are_escaped_and_a_broken_stderr_is_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let text = "the same words in both records so that they are near duplicates of each other";
    std::fs::write(
        &input,
        format!("{{\"id\": \"a\\tb\", \"text\": \"{text}\"}}\n{{\"id\": \"c\\nd\", \"text\": \"{text}\"}}\nnot json\n"),
    )
    .unwrap();
    let pairs = dir.path().join("pairs.tsv");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["dedup", input.to_str().unwrap(), "-q", "--pairs", pairs.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    // 3: finished with a rejected line (whose report had nowhere to go).
    assert_eq!(status.code(), Some(3));
    assert_eq!(std::fs::read_to_string(&pairs).unwrap(), "a\\tb\tc\\nd\t1\n");
}

/// Issue 13, first part: JSONL compressed with zstd or gzip is recognised by
/// its first bytes (whatever the file is called) and gives the same pairs as
/// the plain file; a truncated stream is an error naming the file, never a
/// panic or a silent short run.
#[test]
fn zstd_and_gzip_inputs_give_the_same_pairs() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let (corpus, _) = gen_corpus(dir.path(), "60");
    let plain = std::fs::read(&corpus).unwrap();
    let zst = dir.path().join("shard-1.data");
    std::fs::write(&zst, zstd::stream::encode_all(&plain[..], 3).unwrap()).unwrap();
    let gz = dir.path().join("shard-2");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&plain).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let pairs_of = |input: &Path| {
        let pairs = dir.path().join(format!("{}.pairs", input.file_name().unwrap().to_str().unwrap()));
        let out = neardup(&["dedup", input.to_str().unwrap(), "-q", "--pairs", pairs.to_str().unwrap()], None);
        assert!(out.status.success(), "{}", text(&out.stderr));
        std::fs::read_to_string(pairs).unwrap()
    };
    let want = pairs_of(Path::new(&corpus));
    assert!(!want.is_empty());
    assert_eq!(pairs_of(&zst), want);
    assert_eq!(pairs_of(&gz), want);
    // Standard input too.
    let compressed = std::fs::read(&zst).unwrap();
    let out = neardup(&["dedup", "-", "-q", "--json"], Some(&compressed));
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Truncated: an error that names the file.
    let cut = dir.path().join("cut.zst");
    std::fs::write(&cut, &compressed[..compressed.len() / 2]).unwrap();
    let out = neardup(&["dedup", cut.to_str().unwrap(), "-q"], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cut.zst"), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("after line"), "{}", text(&out.stderr));
}

/// A pipe or a FIFO given as a path is opened once, by its reader: looking
/// at its first bytes first lost them (the first record rejected), and a
/// FIFO whose writer had finished hung the second open. A plain file gives
/// the same pairs mapped and through a buffer (`--no-mmap`).
#[cfg(unix)]
#[test]
fn fifos_are_read_once_and_mapping_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, _) = gen_corpus(dir.path(), "40");
    let pairs_of = |input: &str, extra: &[&str]| {
        let pairs = dir.path().join("p.jsonl");
        let mut args = vec!["dedup", input, "-q", "--pairs", pairs.to_str().unwrap(), "--json"];
        args.extend_from_slice(extra);
        let out = neardup(&args, None);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["rejected"].as_array().map(Vec::len), Some(0), "{summary}");
        (summary["records"].as_u64().unwrap(), std::fs::read_to_string(pairs).unwrap())
    };
    let want = pairs_of(&corpus, &[]);
    assert!(want.0 > 100 && !want.1.is_empty(), "{want:?}");
    assert_eq!(pairs_of(&corpus, &["--no-mmap"]), want);
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    // Read twice, as --annotate does, it cannot be: refused before it is
    // opened (this FIFO has no writer yet, so an open would wait).
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["dedup", fifo.to_str().unwrap(), "-q", "--annotate", "-o", "/dev/null"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("--annotate opened a FIFO with no writer and waited");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("(not a regular file) can be read once"), "{}", text(&out.stderr));
    let body = std::fs::read(&corpus).unwrap();
    let writer = {
        let fifo = fifo.clone();
        // Opening a FIFO to write waits for its reader.
        std::thread::spawn(move || std::fs::OpenOptions::new().write(true).open(fifo).unwrap().write_all(&body))
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.to_str().unwrap().to_owned();
    std::thread::spawn(move || tx.send(pairs_of_fifo(&path)).unwrap());
    let got = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("a FIFO is read without hanging");
    writer.join().unwrap().unwrap();
    assert_eq!(got, want);
}

/// A mapped input cut short under the run ends it with an error that says
/// so and status 1, not a bus error. The run is held a few chunks into a
/// file far longer than that (this test stops reading the kept records it
/// writes, so it waits on a full pipe) while the file is cut; reading on
/// then touches pages past the file's new end (a SIGBUS, or, for a long
/// line written straight from the mapping, a write failing with EFAULT),
/// or, cut within its last page, finds the file shorter than its mapping.
#[cfg(target_os = "linux")]
#[test]
fn a_mapped_input_cut_short_ends_the_run_with_an_error() {
    // (words per record, records, bytes to cut from the end: 0 for all)
    for (words, records, cut) in [(150, 32_000, 0), (3_000, 2_000, 0), (150, 32_000, 60)] {
        let stderr = cut_under_a_run(words, records, cut);
        let said = if cut == 0 { "could not be read" } else { "shrank from" };
        assert!(stderr.contains(said) && stderr.contains("must not change"), "{words} {cut}: {stderr}");
    }
}

/// Runs `neardup dedup` on a file of `records` distinct records of
/// `words` words, cuts the file (to nothing, or by `cut` bytes within its
/// last page) once the run has written a kept record, and returns what
/// the run said, having checked that it failed with status 1 before the
/// end of its input.
#[cfg(target_os = "linux")]
fn cut_under_a_run(words: usize, records: usize, cut: u64) -> String {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.jsonl");
    let mut x = 7u64;
    let mut body = Vec::new();
    for i in 0..records {
        let words: Vec<String> = (0..words)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                format!("w{}", x >> 54)
            })
            .collect();
        writeln!(body, r#"{{"id":"{i}","text":"{}"}}"#, words.join(" ")).unwrap();
    }
    std::fs::write(&path, &body).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["dedup", path.to_str().unwrap(), "-q", "--threads", "1", "-o", "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // A kept record written: the file is mapped and being read.
    let mut first = [0u8; 1];
    if stdout.read_exact(&mut first).is_err() {
        panic!("nothing written: {}", text(&child.wait_with_output().unwrap().stderr));
    }
    let len = body.len() as u64;
    // Within the last page: no page of the file is lost.
    let to = if cut == 0 { 0 } else { len - cut.min((len - 1) % 4096) };
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(to).unwrap();
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{:?}: {stderr}", out.status);
    assert!(rest.len() + 1 < body.len() / 2, "{} of {} bytes written", rest.len() + 1, body.len());
    stderr
}

/// `neardup dedup FIFO --pairs … --json`: (records, pairs).
#[cfg(unix)]
fn pairs_of_fifo(path: &str) -> (u64, String) {
    let pairs = format!("{path}.pairs");
    let out = neardup(&["dedup", path, "-q", "--pairs", &pairs, "--json"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["rejected"].as_array().map(Vec::len), Some(0), "{summary}");
    (summary["records"].as_u64().unwrap(), std::fs::read_to_string(pairs).unwrap())
}

/// Issue 13: several inputs (or a folder) are one dataset read in order;
/// records without an id are named `FILE:LINE`, a file without a final
/// newline does not merge into the next, and a rejected line names its file.
#[test]
fn several_inputs_and_folders_are_one_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let shards = dir.path().join("shards");
    std::fs::create_dir_all(shards.join("part2")).unwrap();
    let same = "the quick brown fox jumps over the lazy dog and keeps running far away";
    let a = shards.join("a.jsonl");
    let b = shards.join("part2").join("b.jsonl");
    // No final newline in a: its last record must not merge with b's first.
    std::fs::write(&a, format!("{{\"text\": \"{same}\"}}\n{{\"text\": \"something else entirely, nothing alike\"}}"))
        .unwrap();
    std::fs::write(&b, format!("{{\"text\": \"{same}\"}}\nnot json\n")).unwrap();
    let (a, b) = (a.to_str().unwrap().to_owned(), b.to_str().unwrap().to_owned());
    let run = |inputs: &[&str]| {
        let pairs = dir.path().join("pairs.tsv");
        let mut args = vec!["dedup"];
        args.extend_from_slice(inputs);
        args.extend(["-q", "--json", "--pairs", pairs.to_str().unwrap()]);
        let out = neardup(&args, None);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (std::fs::read_to_string(pairs).unwrap(), summary, text(&out.stderr))
    };
    let (pairs, summary, stderr) = run(&[&a, &b]);
    assert_eq!(pairs, format!("{a}:1\t{b}:1\t1\n"));
    assert_eq!(summary["records"], 3, "{summary}");
    assert_eq!(summary["rejected"][0]["file"], b.as_str(), "{summary}");
    assert_eq!(summary["rejected"][0]["line"], 2, "{summary}");
    assert!(stderr.contains(&format!("{b}:2: malformed JSON")), "{stderr}");
    // Per input, in reading order.
    let per: Vec<_> = summary["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (i["file"].as_str().unwrap().to_owned(), i["records"].clone(), i["dropped"].clone(), i["rejected"].clone())
        })
        .collect();
    assert_eq!(
        per,
        [(a.clone(), 2.into(), 0.into(), 0.into()), (b.clone(), 1.into(), 1.into(), 1.into())],
        "{summary}"
    );
    // The folder stands for the same files in path order.
    let (by_folder, _, _) = run(&[shards.to_str().unwrap()]);
    assert_eq!(by_folder, pairs);
}

#[test]
fn bench_floor_reports_both_floors() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let lines: String = (0..300)
        .map(|i| {
            format!(
                "{{\"id\": \"d{i}\", \"text\": \"Document {i}: the red fox runs very fast over hill {}\"}}\n",
                i % 9
            )
        })
        .collect();
    std::fs::write(&input, lines).unwrap();
    let out = neardup(&["bench", "floor", input.to_str().unwrap(), "--repeat", "2", "--json"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["records"], 300, "{v}");
    let rate = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    for k in ["floor_mb_per_s", "normalizing_floor_mb_per_s", "dedup_mb_per_s"] {
        assert!(rate(k) > 0.0, "{k}: {v}");
    }
    assert_eq!(v["normalizing_floor_runs_s"].as_array().unwrap().len(), 2);
    // The CPUs the run could use, as the process sees them.
    let cpus = std::thread::available_parallelism().map_or(1, usize::from) as u64;
    assert_eq!(v["cpus"].as_u64(), Some(cpus), "{v}");
    let ratio = rate("dedup_mb_per_s") / rate("normalizing_floor_mb_per_s");
    assert!((rate("normalizing_ratio") - ratio).abs() < 1e-9 * ratio.max(1.0), "{v}");
    // Several inputs, or standard input, cannot be read again: refused.
    let out = neardup(&["bench", "floor", "-"], Some(b""));
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("give one file"), "{}", text(&out.stderr));
}

/// `eval` reports rejected lines in input order, as `dedup` does: a chunk's
/// over-long lines (found while reading) used to come before its malformed
/// ones (found while parsing).
#[test]
fn eval_reports_rejects_in_line_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rejects.jsonl");
    let input = format!(
        "{{\"text\": broken}}\n{{\"text\": \"{}\"}}\n{{\"text\": \"a fine record with words to shingle\"}}\n",
        "x".repeat(80)
    );
    std::fs::write(&path, input).unwrap();
    let out = neardup(&["eval", path.to_str().unwrap(), "--max-line-bytes", "60"], None);
    let err = text(&out.stderr);
    // 3: some lines were rejected.
    assert_eq!(out.status.code(), Some(3), "{err}");
    let lines: Vec<u64> = err
        .lines()
        .filter_map(|l| l.strip_prefix("neardup: line "))
        .map(|l| l.split(':').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(lines, [1, 2], "{err}");
}

/// Issue 39 item 1: the candidate cap holds for exact copies too. Two
/// groups of 1,100 identical texts under the default cap of 100 and the
/// default bucket read of 1,000: once a group's buckets are read partially,
/// the band candidates came from a rotated window and the earliest copies
/// were added on top of them, up to 200 candidates. Now no item verifies
/// more than 100, so no row has more than 100 pairs; every decision stays
/// right (one kept per group), and the cut is reported.
#[test]
fn the_candidate_cap_holds_for_exact_copies() {
    let texts = [
        "The committee will meet on Thursday to review the budget for the coming year and to hear reports.",
        "Rain is expected across the northern valleys tonight, clearing by the morning with light winds.",
    ];
    let mut input = String::new();
    for i in 0..2200 {
        input.push_str(&format!("{{\"id\": \"{i}\", \"text\": \"{}\"}}\n", texts[i % 2]));
    }
    let dir = tempfile::tempdir().unwrap();
    let pairs = dir.path().join("p.tsv");
    let out = neardup(&["dedup", "-", "--pairs", pairs.to_str().unwrap(), "--json", "-q"], Some(input.as_bytes()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["kept"], 2, "{s}");
    assert_eq!(s["dropped"], 2198, "{s}");
    assert_eq!(s["candidates_per_query"]["max"], 100, "{s}");
    assert!(s["capped_queries"].as_u64().unwrap() > 0, "{s}");
    assert!(s["saturated_queries"].as_u64().unwrap() > 0, "{s}");
    let mut per_row = std::collections::HashMap::<String, usize>::new();
    let lines = std::fs::read_to_string(&pairs).unwrap();
    for line in lines.lines() {
        *per_row.entry(line.split('\t').nth(1).unwrap().to_owned()).or_default() += 1;
    }
    assert_eq!(per_row.values().max(), Some(&100));
    // Each item pairs with min(earlier copies, 100) of its group.
    let want: usize = 2 * (0..1100).map(|k: usize| k.min(100)).sum::<usize>();
    assert_eq!(lines.lines().count(), want);
}
