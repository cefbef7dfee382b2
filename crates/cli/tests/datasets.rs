//! Issue 13: `neardup dedup` on dataset shards — the same records as JSONL,
//! zstd, gzip and Parquet give the same pairs; Parquet output keeps every
//! column and the row order; incremental runs against a saved index give
//! what one run over everything gives; damaged inputs and indexes are
//! reported, never a panic. The records are real text: Debian's licences,
//! copyright files, documentation and man pages (bench/corpus/real.py).

mod corpus;

use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, RecordBatch, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use corpus::*;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

#[test]
fn every_format_gives_the_same_pairs_and_parquet_output_keeps_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let shards = shards(dir.path(), 4000);
    let folders = write_formats(dir.path(), &shards);
    let mut want: Option<String> = None;
    for (format, folder) in &folders {
        let pairs = dir.path().join(format!("{format}.pairs"));
        let glob = format!("{}/part-*.data", s(folder));
        let mut args = vec!["dedup", &glob, "-q", "--pairs", s(&pairs)];
        if *format == "nested" {
            args.extend(["--text-field", "doc.body", "--id-field", "doc.key"]);
        }
        ok(&neardup(&args));
        let got = std::fs::read_to_string(&pairs).unwrap();
        match &want {
            None => {
                assert!(got.lines().count() >= 50, "too few pairs to compare: {got}");
                want = Some(got);
            }
            Some(w) => assert_eq!(&got, w, "{format} gives other pairs than jsonl"),
        }
    }

    // Kept rows: the JSONL run's kept lines name the ids in order; the
    // Parquet run writes the same rows, every column, in the same order.
    let kept_jsonl = dir.path().join("kept.jsonl");
    ok(&neardup(&["dedup", s(&dir.path().join("jsonl")), "-q", "-o", s(&kept_jsonl)]));
    let want_ids: Vec<String> = std::fs::read_to_string(&kept_jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_owned())
        .collect();
    let dropped = shards.iter().map(Vec::len).sum::<usize>() - want_ids.len();
    assert!(dropped >= 20, "only {dropped} dropped: nothing to see");
    // No extension: Parquet, as the inputs are.
    let kept_parquet = dir.path().join("kept");
    ok(&neardup(&["dedup", s(&dir.path().join("parquet")), "-q", "-o", s(&kept_parquet)]));
    let batches = read_parquet(&kept_parquet);
    assert_eq!(batches[0].schema().fields(), schema(false).fields());
    let all: Vec<Rec> = shards.concat();
    let mut got_ids = Vec::new();
    for b in &batches {
        let (ids, texts, ns) = (b.column(0).as_string::<i32>(), b.column(1).as_string::<i32>(), b.column(2));
        let ns = ns.as_primitive::<arrow_array::types::Int64Type>();
        let words = b.column(3).as_struct().column(0).as_primitive::<arrow_array::types::UInt32Type>().clone();
        for r in 0..b.num_rows() {
            let n = ns.value(r) as usize;
            assert_eq!(ids.value(r), all[n].id);
            assert_eq!(texts.value(r), all[n].text);
            assert_eq!(words.value(r) as usize, all[n].text.split_whitespace().count());
            got_ids.push(ids.value(r).to_owned());
        }
    }
    assert_eq!(got_ids, want_ids);
    // Parquet rows as JSONL: every column, as JSON.
    let as_json = dir.path().join("kept-rows.jsonl.zst");
    ok(&neardup(&["dedup", s(&dir.path().join("parquet")), "-q", "-o", s(&as_json)]));
    let text = zstd::stream::decode_all(&std::fs::read(&as_json).unwrap()[..]).unwrap();
    let rows: Vec<serde_json::Value> =
        text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
    assert_eq!(rows.len(), want_ids.len());
    assert_eq!(rows[0]["id"], want_ids[0].as_str());
    assert!(rows[0]["meta"]["words"].is_u64(), "{}", rows[0]);
    // JSONL inputs cannot become Parquet rows.
    let out = neardup(&["dedup", s(&dir.path().join("jsonl")), "-q", "-o", s(&dir.path().join("x.parquet"))]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A keeper policy reads its field from every format alike: a nested
/// integer (`meta.words`, a UInt32 in a struct column in Parquet) and a
/// top-level Int64 give the same dropped items and kept rows in JSONL,
/// compressed JSONL and flat and nested Parquet; a policy changes the
/// decisions from `first` (but `min:n`, n being the position); a column that is not there is a usage error
/// naming the columns.
#[test]
fn keeper_policies_read_their_field_from_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let shards = shards(dir.path(), 3000);
    let folders = write_formats(dir.path(), &shards);
    let mut first_dropped = None;
    for policy in ["first", "max:meta.words", "min:n", "max:n"] {
        let mut want: Option<(String, String)> = None;
        for (format, folder) in &folders {
            let tag = format!("{format}-{}", policy.replace(':', "-"));
            let (dropped, kept) = (dir.path().join(format!("{tag}.tsv")), dir.path().join(format!("{tag}.jsonl")));
            let glob = format!("{}/part-*.data", s(folder));
            let mut args = vec!["dedup", &glob, "-q", "--keep", policy, "--dropped", s(&dropped), "-o", s(&kept)];
            if *format == "nested" {
                args.extend(["--text-field", "doc.body", "--id-field", "doc.key"]);
            }
            ok(&neardup(&args));
            let ids: String = std::fs::read_to_string(&kept)
                .unwrap()
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    let id = if *format == "nested" { &v["doc"]["key"] } else { &v["id"] };
                    format!("{}\n", id.as_str().unwrap())
                })
                .collect();
            let got = (std::fs::read_to_string(&dropped).unwrap(), ids);
            match &want {
                None => want = Some(got),
                Some(w) => assert!(w == &got, "{policy}: {format} decides otherwise than jsonl"),
            }
        }
        let (dropped, _) = want.unwrap();
        assert!(dropped.lines().count() >= 20, "{policy}: only {} dropped", dropped.lines().count());
        // n is the input position: `min:n` is `first`, `max:n` its reverse.
        match &first_dropped {
            None => first_dropped = Some(dropped),
            Some(f) if policy == "min:n" => assert!(f == &dropped, "min:n decides otherwise than first"),
            Some(f) => assert!(f != &dropped, "{policy} decides as first"),
        }
    }
    // As for a missing --text-field column: the run stops naming the file.
    let out = neardup(&["dedup", s(&folders[3].1), "-q", "--keep", "max:score"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no column \"score\" (--keep)") && err.contains("columns: id, text, n, meta"), "{err}");
}

/// Pairs of a TSV file whose later item is in `ids`.
fn pairs_into(tsv: &str, ids: &std::collections::HashSet<String>) -> Vec<String> {
    let mut v: Vec<String> =
        tsv.lines().filter(|l| ids.contains(l.split('\t').nth(1).unwrap())).map(str::to_owned).collect();
    v.sort();
    v
}

#[test]
fn incremental_runs_against_a_saved_index_match_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let shards = shards(dir.path(), 4000);
    let folders = write_formats(dir.path(), &shards);
    let parts: Vec<String> = (0..4).map(|i| s(&folders[3].1.join(format!("part-{i}.data"))).to_owned()).collect();
    let p = |name: &str| dir.path().join(name);
    // One run over all four shards.
    ok(&neardup(&[
        "dedup",
        &parts[0],
        &parts[1],
        &parts[2],
        &parts[3],
        "-q",
        "--pairs",
        s(&p("all.tsv")),
        "--dropped",
        s(&p("all.dropped")),
    ]));
    // Shards 1-2, then 3-4, against the index.
    let index = p("index");
    let r1 = ok(&neardup(&[
        "dedup",
        &parts[0],
        &parts[1],
        "-q",
        "--json",
        "--index",
        s(&index),
        "--pairs",
        s(&p("r1.tsv")),
        "--dropped",
        s(&p("r1.dropped")),
    ]));
    let r1: serde_json::Value = serde_json::from_str(&r1).unwrap();
    assert_eq!(r1["index"]["items_before"], 0, "{r1}");
    assert_eq!(r1["index"]["runs"], 1, "{r1}");
    let before = std::fs::read(index.join("index.ndx")).unwrap();
    // --reference reads it and changes nothing.
    ok(&neardup(&["dedup", &parts[2], "-q", "--reference", s(&index), "--pairs", s(&p("ref.tsv"))]));
    assert_eq!(std::fs::read(index.join("index.ndx")).unwrap(), before);
    let r2 = ok(&neardup(&[
        "dedup",
        &parts[2],
        &parts[3],
        "-q",
        "--json",
        "--index",
        s(&index),
        "--pairs",
        s(&p("r2.tsv")),
        "--dropped",
        s(&p("r2.dropped")),
    ]));
    let r2: serde_json::Value = serde_json::from_str(&r2).unwrap();
    let n12 = (shards[0].len() + shards[1].len()) as u64;
    assert_eq!(r2["index"]["items_before"], n12, "{r2}");
    assert_eq!(r2["index"]["items_after"], shards.iter().map(Vec::len).sum::<usize>() as u64, "{r2}");
    assert_eq!(r2["index"]["runs"], 2, "{r2}");

    let read = |n: &str| std::fs::read_to_string(p(n)).unwrap();
    let later: std::collections::HashSet<String> = shards[2..].concat().into_iter().map(|r| r.id).collect();
    let earlier: std::collections::HashSet<String> = shards[..2].concat().into_iter().map(|r| r.id).collect();
    // The cross pairs (an item of shards 3-4 with one of shards 1-2), and
    // every pair into shards 3-4, are those of the one run.
    let want = pairs_into(&read("all.tsv"), &later);
    let cross = want.iter().filter(|l| earlier.contains(l.split('\t').next().unwrap())).count();
    assert!(cross >= 10, "only {cross} cross-run pairs: the test shows nothing");
    assert_eq!(pairs_into(&read("r2.tsv"), &later), want);
    // The same items are dropped, for the same kept items.
    let mut one: Vec<String> = read("all.dropped").lines().map(str::to_owned).collect();
    let mut two: Vec<String> =
        read("r1.dropped").lines().chain(read("r2.dropped").lines()).map(str::to_owned).collect();
    one.sort();
    two.sort();
    assert_eq!(two, one);
    // --reference found the same pairs for shard 3 as the second run did.
    let shard3: std::collections::HashSet<String> = shards[2].iter().map(|r| r.id.clone()).collect();
    assert_eq!(pairs_into(&read("ref.tsv"), &shard3), pairs_into(&read("r2.tsv"), &shard3));

    // An id already in the index is a duplicate id, as in one run.
    let out = neardup(&["dedup", &parts[0], "-q", "--reference", s(&index)]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("duplicate item id"));

    // Other settings are refused, naming what differs.
    let out = neardup(&["dedup", &parts[2], "-q", "--index", s(&index), "--threshold", "0.7"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("threshold: index 0.8, this run 0.7"), "{err}");
    // A damaged index is refused, never used.
    let file = index.join("index.ndx");
    let good = std::fs::read(&file).unwrap();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    std::fs::write(&file, &bad).unwrap();
    let out = neardup(&["dedup", &parts[2], "-q", "--reference", s(&index)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("damaged"), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&file, &good[..good.len() - 5]).unwrap();
    let out = neardup(&["dedup", &parts[2], "-q", "--reference", s(&index)]);
    assert_eq!(out.status.code(), Some(1));
    // Another format version is refused with the version.
    let mut other = good.clone();
    other[8..12].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&file, &other).unwrap();
    let out = neardup(&["dedup", &parts[2], "-q", "--reference", s(&index)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("index format 2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A run killed while it saves the index leaves the previous index whole.
#[test]
fn an_interrupted_save_leaves_the_old_index_usable() {
    let dir = tempfile::tempdir().unwrap();
    let shards = shards(dir.path(), 8000);
    let folders = write_formats(dir.path(), &shards);
    let part = |i: usize| s(&folders[0].1.join(format!("part-{i}.data"))).to_owned();
    let index = dir.path().join("index");
    ok(&neardup(&["dedup", &part(0), "-q", "--index", s(&index)]));
    let old = std::fs::read(index.join("index.ndx")).unwrap();
    let mut caught = 0;
    for _ in 0..10 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["dedup", &part(1), &part(2), &part(3), "-q", "--index", s(&index)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill it the moment its temporary file appears.
        let killed = loop {
            let saving =
                std::fs::read_dir(&index).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".tmp"));
            if saving {
                child.kill().unwrap();
                child.wait().unwrap();
                break true;
            }
            if child.try_wait().unwrap().is_some() {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        };
        let now = std::fs::read(index.join("index.ndx")).unwrap();
        if killed && now == old {
            caught += 1;
            // The old index loads and answers.
            ok(&neardup(&["dedup", &part(1), "-q", "--reference", s(&index)]));
        } else {
            // Finished first: start again from the old index.
            std::fs::write(index.join("index.ndx"), &old).unwrap();
        }
        for e in std::fs::read_dir(&index).unwrap() {
            let e = e.unwrap();
            if e.file_name().to_string_lossy().ends_with(".tmp") {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        if caught >= 2 {
            break;
        }
    }
    assert!(caught >= 1, "never caught a run while it saved");
}

#[test]
fn damaged_parquet_is_reported_with_the_file_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<Rec> = (0..2000)
        .map(|i| Rec { id: format!("r{i}"), text: format!("record number {i} says something about item {}", i % 7) })
        .collect();
    let good = parquet(&recs, 0, false);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", good[..good.len() / 2].to_vec()),
        ("no-footer", good[..good.len() - 8].to_vec()),
        ("flipped", {
            let mut b = good.clone();
            for i in (100..b.len() / 2).step_by(97) {
                b[i] ^= 0xA5;
            }
            b
        }),
        ("bad-footer-length", {
            let mut b = good.clone();
            let n = b.len();
            b[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
            b
        }),
    ];
    for (name, bytes) in cases {
        let path = dir.path().join(format!("{name}.parquet"));
        std::fs::write(&path, bytes).unwrap();
        let out = neardup(&["dedup", s(&path), "-q"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(&format!("{name}.parquet")), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    // A missing text column names the columns there are.
    let path = dir.path().join("ok.parquet");
    std::fs::write(&path, &good).unwrap();
    let out = neardup(&["dedup", s(&path), "-q", "--text-field", "body"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("columns: id, text, n, meta"));
}

#[test]
fn annotate_writes_every_row_with_its_cluster_and_kept_item() {
    let dir = tempfile::tempdir().unwrap();
    let shards = shards(dir.path(), 3000);
    let folders = write_formats(dir.path(), &shards);
    let total: usize = shards.iter().map(Vec::len).sum();
    let p = |n: &str| dir.path().join(n);
    ok(&neardup(&[
        "dedup",
        s(&folders[0].1),
        "-q",
        "--dropped",
        s(&p("dropped.parquet")),
        "--clusters",
        s(&p("clusters.jsonl")),
        "--annotate",
        "-o",
        s(&p("all.jsonl")),
    ]));
    // The dropped table as Parquet.
    let mut dropped = std::collections::HashMap::new();
    for b in read_parquet(&p("dropped.parquet")) {
        assert_eq!(b.schema().field(0).name(), "item");
        for r in 0..b.num_rows() {
            dropped.insert(
                b.column(0).as_string::<i32>().value(r).to_owned(),
                b.column(1).as_string::<i32>().value(r).to_owned(),
            );
        }
    }
    assert!(dropped.len() >= 10);
    // Every cluster's first member names it.
    let mut cluster_of = std::collections::HashMap::new();
    for l in std::fs::read_to_string(p("clusters.jsonl")).unwrap().lines() {
        let c: serde_json::Value = serde_json::from_str(l).unwrap();
        let members: Vec<String> =
            c["members"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_owned()).collect();
        for m in &members {
            cluster_of.insert(m.clone(), members[0].clone());
        }
    }
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(p("all.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), total);
    for l in &lines {
        let id = l["id"].as_str().unwrap();
        assert!(l["text"].is_string() && l["meta"]["words"].is_u64(), "{l}");
        assert_eq!(l["duplicate_of"].as_str(), dropped.get(id).map(String::as_str), "{id}");
        assert_eq!(l["cluster_id"].as_str().unwrap(), cluster_of.get(id).map_or(id, String::as_str), "{id}");
    }
    // The same as Parquet: every row, the input's columns and the two more.
    ok(&neardup(&["dedup", s(&folders[3].1), "-q", "--annotate", "-o", s(&p("all.parquet"))]));
    let batches = read_parquet(&p("all.parquet"));
    let names: Vec<String> = batches[0].schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["id", "text", "n", "meta", "cluster_id", "duplicate_of"]);
    let mut row = 0;
    for b in &batches {
        for r in 0..b.num_rows() {
            let l = &lines[row];
            assert_eq!(b.column(0).as_string::<i32>().value(r), l["id"].as_str().unwrap());
            assert_eq!(b.column(4).as_string::<i32>().value(r), l["cluster_id"].as_str().unwrap());
            let dup = b.column(5);
            let want = l["duplicate_of"].as_str();
            assert_eq!((!arrow_array::Array::is_null(dup, r)).then(|| dup.as_string::<i32>().value(r)), want);
            row += 1;
        }
    }
    assert_eq!(row, total);
}

/// `neardup` with its address space limited to `mib` MiB (`ulimit -v`): a
/// run that allocates past it aborts instead of eating the machine's memory.
fn neardup_limited(mib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", mib * 1024))
        .arg(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("sh runs the binary")
}

/// Status 1 with a message that names `file` and contains `why`, no panic.
fn refused(out: &Output, file: &str, why: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "status {:?}: {err}", out.status);
    assert!(err.contains(file) && err.contains(why), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A Parquet file whose `text` column is a string `depth` structs deep
/// (built on a thread with a large stack: Arrow and Parquet build and drop
/// nested types recursively).
fn deep_struct_parquet(depth: usize) -> Vec<u8> {
    use parquet::arrow::arrow_writer::ArrowWriterOptions;
    let build = move || {
        let mut field = Field::new("s", DataType::Utf8, true);
        let mut array: ArrayRef = Arc::new(arrow_array::StringArray::from(vec!["the text of the only row"]));
        for _ in 0..depth {
            let fields = Fields::from(vec![field]);
            array = Arc::new(StructArray::new(fields.clone(), vec![array], None));
            field = Field::new("s", DataType::Struct(fields), true);
        }
        let schema = Arc::new(Schema::new(vec![field.with_name("text")]));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![array]).unwrap();
        let mut out = Vec::new();
        let options = ArrowWriterOptions::new().with_skip_arrow_metadata(true);
        let mut w = ArrowWriter::try_new_with_options(&mut out, schema, options).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        out
    };
    std::thread::Builder::new().stack_size(1 << 30).spawn(build).unwrap().join().unwrap()
}

/// A Parquet file nested thousands of levels deep is refused before
/// anything walks its schema (it overflowed the reader's stack: status 134).
#[test]
fn a_deeply_nested_parquet_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.parquet");
    std::fs::write(&path, deep_struct_parquet(2000)).unwrap();
    refused(&neardup(&["dedup", s(&path), "-q"]), "deep.parquet", "levels deep");
    // Written out as Parquet, the input's schema is read first: refused too.
    let out = dir.path().join("out.parquet");
    refused(&neardup(&["dedup", s(&path), "-q", "-o", s(&out)]), "deep.parquet", "levels deep");
    // A few levels are fine: the text is reached by its dotted path.
    std::fs::write(&path, deep_struct_parquet(3)).unwrap();
    let out = neardup(&["dedup", s(&path), "-q", "--text-field", "text.s.s.s", "--json"]);
    let summary: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(summary["records"], 1, "{summary}");
}

/// A Parquet file of one non-null column, `text`, holding `values`,
/// written with `props` (with the Arrow schema in its footer or without).
fn text_file(values: ArrayRef, props: WriterProperties, arrow_schema: bool) -> Vec<u8> {
    use parquet::arrow::arrow_writer::ArrowWriterOptions;
    let schema = Arc::new(Schema::new(vec![Field::new("text", values.data_type().clone(), false)]));
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![values]).unwrap();
    let options = ArrowWriterOptions::new().with_properties(props).with_skip_arrow_metadata(!arrow_schema);
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new_with_options(&mut out, schema, options).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

/// A dictionary bomb: one text of `len` bytes in the dictionary, referenced
/// by `rows` rows (a file of about `len` bytes that decodes to `rows` ×
/// `len`).
fn dictionary_bomb(len: usize, rows: usize) -> Vec<u8> {
    use arrow_array::types::Int32Type;
    use parquet::file::properties::EnabledStatistics;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let text: String = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(6) {
                ' '
            } else {
                char::from(b'a' + (x % 26) as u8)
            }
        })
        .collect();
    let values = Arc::new(arrow_array::StringArray::from(vec![text]));
    let keys = arrow_array::Int32Array::from(vec![0; rows]);
    let dict = arrow_array::DictionaryArray::<Int32Type>::new(keys, values);
    let props = WriterProperties::builder()
        .set_dictionary_page_size_limit(len * 2)
        .set_statistics_enabled(EnabledStatistics::None)
        .build();
    // Without the Arrow schema in the footer, the column reads back as
    // plain strings: the reader expands the dictionary.
    text_file(Arc::new(dict), props, false)
}

/// Text as pyarrow writes it: one row group, dictionary-encoded, holding
/// `texts` (one long document among many short ones).
fn dictionary_encoded(texts: &[String]) -> Vec<u8> {
    let props = WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_dictionary_page_size_limit(16 << 20)
        .set_data_page_size_limit(64 << 10)
        .build();
    text_file(Arc::new(arrow_array::StringArray::from(texts.to_vec())), props, true)
}

/// Legitimate dictionary-encoded text is read, however long one entry is:
/// 700 documents, one of 2 MB, all referencing the dictionary, once counted
/// as 700 × 2 MB and refused (a pyarrow file of a real corpus was); what
/// the references reference is counted now.
#[test]
fn a_dictionary_with_one_long_entry_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pyarrow-like.parquet");
    let long: String =
        (0..2 << 20).map(|i| if i % 7 == 6 { ' ' } else { char::from(b'a' + (i * 31 % 26) as u8) }).collect();
    let mut texts: Vec<String> = (0..699).map(|i| format!("a short document, number {i} of the set")).collect();
    texts.insert(3, long);
    std::fs::write(&path, dictionary_encoded(&texts)).unwrap();
    let out = neardup_limited(2048, &["dedup", s(&path), "-q", "--json"]);
    let summary: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(summary["records"], 700, "{summary}");
}

/// A small file whose dictionary expands to gigabytes is refused before it
/// is decoded (a batch of it was one allocation of gigabytes: under a 2 GiB
/// address space, an abort).
#[test]
fn a_parquet_dictionary_bomb_is_refused_before_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.parquet");
    let bomb = dictionary_bomb(600_000, 3000);
    assert!(bomb.len() < 2 << 20, "{} bytes", bomb.len());
    std::fs::write(&path, bomb).unwrap();
    let out = neardup_limited(2048, &["dedup", s(&path), "-q"]);
    refused(&out, "bomb.parquet", "row group 0, column \"text\"");
    // The same text a few times is read as it is: 8 rows, one cluster.
    std::fs::write(&path, dictionary_bomb(600_000, 8)).unwrap();
    let out = neardup_limited(2048, &["dedup", s(&path), "-q", "--json"]);
    let summary: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(summary["records"], 8, "{summary}");
    assert_eq!(summary["kept"], 1, "{summary}");
}

/// A saved index whose header claims 2³² − 1 bands is refused before the
/// bands are allocated (16 GiB of them: under a 2 GiB address space, an
/// abort).
#[test]
fn a_saved_index_header_out_of_bounds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let recs: Vec<Rec> =
        (0..6).map(|i| Rec { id: format!("r{i}"), text: format!("record {i} of a tiny index") }).collect();
    std::fs::write(&input, jsonl(&recs, 0)).unwrap();
    let index = dir.path().join("index");
    ok(&neardup(&["dedup", s(&input), "-q", "--index", s(&index)]));
    let file = index.join("index.ndx");
    let good = std::fs::read(&file).unwrap();
    let len = u32::from_le_bytes(good[12..16].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&good[16..16 + len]).unwrap();
    let with = |field: &str, value: serde_json::Value| {
        let mut h = header.clone();
        h[field] = value;
        let h = serde_json::to_vec(&h).unwrap();
        let mut bytes = good[..12].to_vec();
        bytes.extend_from_slice(&(h.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&h);
        bytes.extend_from_slice(&good[16 + len..]);
        bytes
    };
    let cases = [
        ("bands", serde_json::json!(u32::MAX), "bands"),
        ("bands", serde_json::json!(header["bands"].as_u64().unwrap() + 1), "bands"),
        ("sketch_bytes", serde_json::json!(u32::MAX), "sketch"),
        ("kept", serde_json::json!(1000), "kept"),
        ("items", serde_json::json!(1u64 << 31), "items"),
        ("format_version", serde_json::json!(7), "format"),
    ];
    for (field, value, why) in cases {
        let bytes = with(field, value.clone());
        std::fs::write(&file, &bytes).unwrap();
        let out = neardup_limited(2048, &["dedup", s(&input), "-q", "--reference", s(&index)]);
        refused(&out, "index.ndx", why);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&value.to_string()), "{field}: {err}");
    }
    // The unedited index still loads under the same limit.
    std::fs::write(&file, &good).unwrap();
    let out = neardup_limited(2048, &["dedup", s(&input), "-q", "--reference", s(&index)]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
}
