//! Accuracy on real text: Debian's licences, copyright files, documentation
//! and man pages (built by bench/corpus/real.py from files every Debian
//! machine has), measured against the exact all-pairs oracle with the
//! default parameters.

use std::process::Command;

#[test]
fn default_parameters_meet_the_recall_contract_on_real_documents() {
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

    let out = Command::new(env!("CARGO_BIN_EXE_neardup")).arg("eval").arg(&corpus).arg("--json").output().unwrap();
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
