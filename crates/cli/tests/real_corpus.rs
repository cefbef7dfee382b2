//! Accuracy on real text: Debian's licences, copyright files, documentation
//! and man pages (built by bench/corpus/real.py from files every Debian
//! machine has), measured against the exact all-pairs oracle with the
//! default parameters.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The real corpus, built once for the tests of this file.
fn corpus() -> &'static Path {
    static CORPUS: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &CORPUS
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let corpus = dir.path().join("real.jsonl");
            let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
            let built = Command::new("python3")
                .arg(format!("{root}/bench/corpus/real.py"))
                .arg(&corpus)
                .status()
                .expect("python3 runs the corpus builder");
            assert!(built.success());
            let docs = std::fs::read_to_string(&corpus).unwrap().lines().count();
            assert!(docs >= 3000, "only {docs} documents found under /usr/share: the corpus is too small to measure");
            (dir, corpus)
        })
        .1
}

#[test]
fn default_parameters_meet_the_recall_contract_on_real_documents() {
    let corpus = corpus();

    let out = Command::new(env!("CARGO_BIN_EXE_neardup")).arg("eval").arg(corpus).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("{}", serde_json::to_string_pretty(&r).unwrap());

    let (mut truth, mut found) = (0, 0);
    for bin in r["candidate_recall_by_bin"].as_array().unwrap() {
        if bin["lo"].as_f64().unwrap() >= 0.85 {
            truth += bin["truth"].as_u64().unwrap();
            found += bin["found"].as_u64().unwrap();
        }
    }
    assert!(truth >= 100, "expected real near-duplicates at J >= 0.85, found {truth}");
    let recall = found as f64 / truth as f64;
    assert!(recall >= 0.995, "candidate recall at J >= 0.85 is {recall} ({found}/{truth})");
    for d in r["decisions"].as_array().unwrap() {
        assert_eq!(d["precision"].as_f64().unwrap(), 1.0, "{d}");
    }
    assert!(r["candidates_per_query"]["p99"].as_u64().unwrap() <= 100);
}

/// One `neardup dedup` run writing every output into `dir` under `tag`;
/// returns its JSON summary.
fn dedup(inputs: &[&Path], dir: &Path, tag: &str, extra: &[&str]) -> serde_json::Value {
    let out = |name: &str| dir.join(format!("{tag}.{name}"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    cmd.arg("dedup").args(inputs).arg("--json").arg("-q");
    cmd.arg("-o").arg(out("jsonl")).arg("--pairs").arg(out("pairs")).arg("--clusters").arg(out("clusters"));
    cmd.arg("--dropped").arg(out("dropped")).args(extra);
    let run = cmd.output().unwrap();
    assert!(matches!(run.status.code(), Some(0 | 3)), "{}", String::from_utf8_lossy(&run.stderr));
    let mut v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    for k in ["seconds", "mb_per_s", "timings", "memory"] {
        v.as_object_mut().unwrap().remove(k);
    }
    v
}

/// The run under a memory limit keeps its state on disk and must give the
/// in-memory run's results byte for byte. A 256 KB limit makes every sort
/// spill many runs (and merge them in passes) and the verification go in
/// many blocks; a cap of 5 candidates makes queries capped and cut close,
/// so the search further among kept items runs, and reading 4 entries a
/// bucket makes buckets hot, read from their rotation point; a second input adds a
/// repeated id, a record that does not parse and records named by place.
#[test]
fn a_run_under_a_tiny_memory_limit_gives_the_in_memory_results() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus();
    let first = std::fs::read_to_string(corpus).unwrap();
    let first: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    let extra = dir.path().join("extra.jsonl");
    let text = first["text"].as_str().unwrap();
    let lines = [
        serde_json::json!({"id": first["id"], "text": "a repeated id is rejected"}).to_string(),
        // Rejected too, though `--keep longest` ranks it before the first.
        serde_json::json!({"id": first["id"], "text": text.repeat(3)}).to_string(),
        "{not json".to_owned(),
        serde_json::json!({"text": text}).to_string(),
        serde_json::json!({"text": format!("{text} with a tail")}).to_string(),
    ];
    std::fs::write(&extra, lines.join("\n") + "\n").unwrap();
    let capped = ["--max-candidates", "5", "--max-bucket-read", "4"];
    for (tag, args) in [
        ("default", &[][..]),
        ("capped", &capped[..]),
        // Under a keeper policy items are numbered in its order (a first
        // read sorts the keys externally) and the store is written so.
        ("longest", &[&["--keep", "longest"], &capped[..]].concat()[..]),
    ] {
        let memory = dedup(
            &[corpus, &extra],
            dir.path(),
            &format!("{tag}-memory"),
            &[&["--memory-limit", "none"], args].concat(),
        );
        let bounded = dedup(
            &[corpus, &extra],
            dir.path(),
            &format!("{tag}-bounded"),
            &[&["--memory-limit", "256K"], args].concat(),
        );
        assert_eq!(memory, bounded, "{tag}: the summaries differ");
        assert_eq!(memory["rejected"].as_array().unwrap().len(), 3, "{tag}: {}", memory["rejected"]);
        assert!(memory["verified_pairs"].as_u64().unwrap() > 100, "{tag}: too few pairs to compare");
        if tag == "capped" {
            assert!(memory["capped_queries"].as_u64().unwrap() > 100, "{}", memory["capped_queries"]);
            assert!(memory["saturated_queries"].as_u64().unwrap() > 0);
            assert!(!memory["kept_unresolved"].as_array().unwrap().is_empty(), "hot buckets leave items unresolved");
        }
        for name in ["jsonl", "pairs", "clusters", "dropped"] {
            let read = |side: &str| std::fs::read(dir.path().join(format!("{tag}-{side}.{name}"))).unwrap();
            assert!(read("memory") == read("bounded"), "{tag}: --{name} differs");
        }
    }
    // --annotate: every record with its cluster and kept item.
    for keep in ["first", "longest"] {
        let run = |side: &str, limit: &str| {
            let tag = format!("annotate-{keep}-{side}");
            let summary = dedup(&[corpus], dir.path(), &tag, &["--memory-limit", limit, "--annotate", "--keep", keep]);
            (summary, std::fs::read(dir.path().join(format!("{tag}.jsonl"))).unwrap())
        };
        let (memory, bounded) = (run("memory", "none"), run("bounded", "256K"));
        assert_eq!(memory.0, bounded.0, "--keep {keep}");
        assert!(memory.1 == bounded.1, "--annotate --keep {keep} differs");
    }
}

/// A run under a memory limit killed (SIGKILL) in each phase continues,
/// when the same command runs again, from its last completed phase, and
/// gives the in-memory results. Each kill waits for what shows the phase
/// has begun (the store's first bytes; the manifest of the phase before),
/// so the phases reached do not depend on the machine's speed.
#[test]
fn a_killed_bounded_run_continues_from_its_last_phase() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let corpus = corpus();
    let memory = dedup(&[corpus], dir.path(), "memory", &["--memory-limit", "none"]);
    let bounded_args = ["--memory-limit", "256K", "--work-dir", work.to_str().unwrap()];
    let folder = || {
        std::fs::read_dir(&work)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("neardup-dedup-")))
    };
    let phase = |f: &Path| -> Option<u64> {
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(f.join("manifest.json")).ok()?).ok()?;
        m["phase"].as_u64()
    };
    // Waits for `ready`, then kills the run; returns its standard error.
    let kill_when = |ready: &dyn Fn() -> bool| -> String {
        let out = |name: &str| dir.path().join(format!("bounded.{name}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .arg("dedup")
            .arg(corpus)
            .args(bounded_args)
            .arg("-o")
            .arg(out("jsonl"))
            .arg("--pairs")
            .arg(out("pairs"))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A guard against a hang only: the corpus takes seconds.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while !ready() {
            assert!(child.try_wait().unwrap().is_none(), "the run ended before the point to kill it at");
            assert!(std::time::Instant::now() < deadline, "the run did not reach the point to kill it at");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        child.kill().unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // In phase 1: the store has its first bytes.
    kill_when(&|| folder().is_some_and(|f| std::fs::metadata(f.join("items.bin")).is_ok_and(|m| m.len() > 0)));
    assert_eq!(folder().and_then(|f| phase(&f)), None, "killed before phase 1 completed");
    // In phase 2: phase 1 is recorded (the run started over, then got past it).
    let log = kill_when(&|| folder().and_then(|f| phase(&f)).is_some_and(|p| p >= 1));
    assert!(!log.contains("continuing"), "nothing was completed to continue from: {log}");
    // In phase 3: phase 2 is recorded; the run continued after phase 1.
    let log = kill_when(&|| folder().and_then(|f| phase(&f)).is_some_and(|p| p >= 2));
    assert!(log.contains("after its 1 completed phase"), "{log}");
    // To the end: continues after phase 2, same results, folder removed.
    let bounded = dedup(&[corpus], dir.path(), "bounded", &bounded_args);
    assert_eq!(memory, bounded);
    for name in ["jsonl", "pairs"] {
        let read = |side: &str| std::fs::read(dir.path().join(format!("{side}.{name}"))).unwrap();
        assert!(read("memory") == read("bounded"), "--{name} differs after the kills");
    }
    assert!(folder().is_none(), "the work folder is removed once the outputs are written");
}

/// Exact Jaccard of two sorted, unique feature sets.
fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut both) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => (i, j, both) = (i + 1, j + 1, both + 1),
        }
    }
    let union = a.len() + b.len() - both;
    if union == 0 {
        1.0
    } else {
        both as f64 / union as f64
    }
}

/// Each keeper policy against the exact oracle (#48): on the real corpus,
/// with a score and a date (some records without either) added to each
/// record, every dropped item verifies at or above the threshold — by
/// features computed here, not the run's score — against a kept item that
/// the policy prefers or ranks equal and that comes earlier in the input;
/// the kept rows are every item not dropped, in input order. Each policy
/// must also change some decision from `first`, so a policy that is
/// ignored fails.
#[test]
fn each_keeper_policy_keeps_the_copy_it_prefers() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("scored.jsonl");
    let mut records = Vec::new();
    let mut text = String::new();
    for (n, line) in std::fs::read_to_string(corpus()).unwrap().lines().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let h = neardup_core::fmix64(n as u64 + 1);
        if n % 11 != 3 {
            v["quality"] = serde_json::json!((h % 1000) as f64 / 1000.0);
        }
        if n % 13 != 5 {
            let day = 1 + (h >> 20) % 28;
            v["meta"] = serde_json::json!({ "crawled": format!("20{:02}-{:02}-{day:02}T08:00:00Z", 10 + (h >> 10) % 15, 1 + (h >> 30) % 12) });
        }
        text.push_str(&v.to_string());
        text.push('\n');
        records.push(v);
    }
    std::fs::write(&input, text).unwrap();

    let params = neardup_core::Config::default().resolve().unwrap();
    let threshold = params.threshold();
    let mut fpr = neardup_core::Fingerprinter::new(params).unwrap();
    let id_of = |v: &serde_json::Value| v["id"].as_str().unwrap().to_owned();
    let position: std::collections::HashMap<String, usize> =
        records.iter().enumerate().map(|(i, v)| (id_of(v), i)).collect();
    let features: Vec<Vec<u64>> =
        records.iter().map(|v| fpr.fingerprint(v["text"].as_str().unwrap()).features).collect();
    let seconds = |s: &str| -> f64 {
        // Every date here is 20YY-MM-DDT08:00:00Z: ordered as text.
        let (y, m, d): (f64, f64, f64) =
            (s[0..4].parse().unwrap(), s[5..7].parse().unwrap(), s[8..10].parse().unwrap());
        (y * 12.0 + m) * 31.0 + d
    };
    // The policy's preference: larger is kept first; None is no value.
    type Pref = fn(&serde_json::Value, &dyn Fn(&str) -> f64) -> Option<f64>;
    let policies: [(&str, Pref); 4] = [
        ("first", |_, _| Some(0.0)),
        ("longest", |v, _| Some(v["text"].as_str().unwrap().len() as f64)),
        ("max:quality", |v, _| v["quality"].as_f64()),
        ("min:meta.crawled", |v, s| v["meta"]["crawled"].as_str().map(|d| -s(d))),
    ];
    let mut firsts_keepers = None;
    for (policy, pref) in policies {
        let tag = policy.replace(':', "-");
        let summary = dedup(&[&input], dir.path(), &tag, &["--keep", policy, "--memory-limit", "none"]);
        assert_eq!(summary["keep"], policy, "{summary}");
        let dropped = std::fs::read_to_string(dir.path().join(format!("{tag}.dropped"))).unwrap();
        let kept: Vec<String> = std::fs::read_to_string(dir.path().join(format!("{tag}.jsonl")))
            .unwrap()
            .lines()
            .map(|l| id_of(&serde_json::from_str(l).unwrap()))
            .collect();
        let kept_set: std::collections::HashSet<&str> = kept.iter().map(String::as_str).collect();
        assert!(kept.windows(2).all(|w| position[&w[0]] < position[&w[1]]), "{policy}: kept rows out of input order");
        let rank = |i: usize| (pref(&records[i], &seconds).map(|p| -p).unwrap_or(f64::INFINITY), i);
        let mut keepers = Vec::new();
        let mut later_kept = 0;
        for line in dropped.lines() {
            let mut f = line.split('\t');
            let (item, keeper) = (f.next().unwrap(), f.next().unwrap());
            let (d, k) = (position[item], position[keeper]);
            assert!(kept_set.contains(keeper), "{policy}: {item} dropped for {keeper}, which is not kept");
            assert!(!kept_set.contains(item), "{policy}: {item} is both kept and dropped");
            let j = jaccard(&features[d], &features[k]);
            assert!(j >= threshold, "{policy}: {item} dropped for {keeper} at exact Jaccard {j} < {threshold}");
            assert!(rank(k) < rank(d), "{policy}: {keeper} {:?} kept over {item} {:?}", rank(k), rank(d));
            later_kept += usize::from(k > d);
            keepers.push((d, k));
        }
        assert!(keepers.len() >= 100, "{policy}: only {} dropped", keepers.len());
        assert_eq!(kept.len() + keepers.len(), records.len(), "{policy}: kept and dropped are not every record");
        match firsts_keepers.take() {
            None => {
                assert_eq!(later_kept, 0, "first keeps the earlier copy");
                firsts_keepers = Some(keepers);
            }
            Some(first) => {
                assert!(later_kept > 0, "{policy}: every keeper came first in the input, as under `first`");
                assert_ne!(first, keepers, "{policy}: the same decisions as `first`");
                firsts_keepers = Some(first);
            }
        }
        if policy.contains("quality") || policy.contains("crawled") {
            assert!(summary["keep_missing"].as_u64().unwrap() > 0, "{summary}");
        }
    }
}
