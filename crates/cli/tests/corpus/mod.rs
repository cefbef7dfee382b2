//! The dataset tests' helpers: the real corpus as records, written as
//! JSONL (plain, zstd, gzip) and flat or nested Parquet shards, and the
//! binary run on them. Shared by `datasets.rs` and `object_store.rs`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, StringBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

pub fn neardup(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_neardup")).args(args).stdin(Stdio::null()).output().expect("binary runs")
}

pub fn ok(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "exit {:?}: {err}", out.status.code());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// One record of the corpus.
#[derive(Clone)]
pub struct Rec {
    pub id: String,
    pub text: String,
}

/// The real corpus, dealt into four shards (record i to shard i mod 4, so
/// near duplicates — neighbours in the corpus — fall into different
/// shards), at most `limit` records in all.
pub fn shards(dir: &Path, limit: usize) -> Vec<Vec<Rec>> {
    let corpus = dir.join("real.jsonl");
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let built = Command::new("python3")
        .arg(format!("{root}/bench/corpus/real.py"))
        .arg(&corpus)
        .stdout(Stdio::null())
        .status()
        .expect("python3 runs the corpus builder");
    assert!(built.success());
    let recs: Vec<Rec> = std::fs::read_to_string(&corpus)
        .unwrap()
        .lines()
        .take(limit)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Rec { id: v["id"].as_str().unwrap().to_owned(), text: v["text"].as_str().unwrap().to_owned() }
        })
        .collect();
    assert!(recs.len() >= 2000, "only {} documents under /usr/share", recs.len());
    (0..4).map(|k| recs.iter().skip(k).step_by(4).cloned().collect()).collect()
}

pub fn jsonl(recs: &[Rec], first: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let line = serde_json::json!({"id": r.id, "text": r.text, "n": first + i, "meta": {"words": r.text.split_whitespace().count()}});
        serde_json::to_writer(&mut out, &line).unwrap();
        out.push(b'\n');
    }
    out
}

/// The schema of the test Parquet files: flat, or with the id and text in
/// a struct column `doc`.
pub fn schema(nested: bool) -> Arc<Schema> {
    let meta = DataType::Struct(Fields::from(vec![Field::new("words", DataType::UInt32, false)]));
    let mut fields = vec![Field::new("n", DataType::Int64, false), Field::new("meta", meta, false)];
    if nested {
        let doc = DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("body", DataType::Utf8, false),
        ]));
        fields.insert(0, Field::new("doc", doc, false));
    } else {
        fields.insert(0, Field::new("text", DataType::Utf8, false));
        fields.insert(0, Field::new("id", DataType::Utf8, false));
    }
    Arc::new(Schema::new(fields))
}

/// The records as Parquet, snappy-compressed in row groups of 300 rows.
pub fn parquet(recs: &[Rec], first: usize, nested: bool) -> Vec<u8> {
    let schema = schema(nested);
    let (mut ids, mut texts, mut ns, mut words) =
        (StringBuilder::new(), StringBuilder::new(), Int64Builder::new(), UInt32Builder::new());
    for (i, r) in recs.iter().enumerate() {
        ids.append_value(&r.id);
        texts.append_value(&r.text);
        ns.append_value((first + i) as i64);
        words.append_value(r.text.split_whitespace().count() as u32);
    }
    let meta = StructArray::new(
        Fields::from(vec![Field::new("words", DataType::UInt32, false)]),
        vec![Arc::new(words.finish()) as ArrayRef],
        None,
    );
    let (ids, texts): (ArrayRef, ArrayRef) = (Arc::new(ids.finish()), Arc::new(texts.finish()));
    let mut columns: Vec<ArrayRef> = vec![Arc::new(ns.finish()), Arc::new(meta)];
    if nested {
        let doc = StructArray::new(
            Fields::from(vec![Field::new("key", DataType::Utf8, false), Field::new("body", DataType::Utf8, false)]),
            vec![ids, texts],
            None,
        );
        columns.insert(0, Arc::new(doc));
    } else {
        columns.insert(0, texts);
        columns.insert(0, ids);
    }
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
    let props =
        WriterProperties::builder().set_compression(Compression::SNAPPY).set_max_row_group_row_count(Some(300)).build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

pub fn read_parquet(path: &Path) -> Vec<RecordBatch> {
    let f = std::fs::File::open(path).unwrap();
    ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap().map(Result::unwrap).collect()
}

/// Writes the shards in every format; returns the folder of each format.
pub fn write_formats(dir: &Path, shards: &[Vec<Rec>]) -> Vec<(&'static str, PathBuf)> {
    let formats = ["jsonl", "zst", "gz", "parquet", "nested"];
    let mut first = 0;
    for (i, shard) in shards.iter().enumerate() {
        let plain = jsonl(shard, first);
        for f in formats {
            let folder = dir.join(f);
            std::fs::create_dir_all(&folder).unwrap();
            // Names say nothing of the format: it is recognised by content.
            let path = folder.join(format!("part-{i}.data"));
            let bytes = match f {
                "jsonl" => plain.clone(),
                "zst" => zstd::stream::encode_all(&plain[..], 3).unwrap(),
                "gz" => {
                    use std::io::Write as _;
                    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    enc.write_all(&plain).unwrap();
                    enc.finish().unwrap()
                }
                "parquet" => parquet(shard, first, false),
                _ => parquet(shard, first, true),
            };
            std::fs::write(path, bytes).unwrap();
        }
        first += shard.len();
    }
    formats.iter().map(|f| (*f, dir.join(f))).collect()
}
