//! The JSONL reader and record decoder of `neardup dedup` never panic on any
//! input, and the two readers agree: a file mapped into memory is read into
//! the same lines, numbers and rejects as the same bytes read through a
//! small buffer.
#![no_main]
use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;

#[allow(dead_code, unused_imports)]
#[path = "../../crates/batch/src/jsonl/mod.rs"]
mod jsonl;

use jsonl::{JsonlReader, Limits};

/// Every chunk of one read, each record of it decoded as well.
fn chunks(mut reader: JsonlReader, limits: Limits) -> Vec<jsonl::ChunkRead> {
    let chunks = jsonl::every_chunk(&mut reader, limits);
    for (_, lines, _) in &chunks {
        for (_, line) in lines {
            let _ = jsonl::parse_record(line, "text", "id");
        }
    }
    chunks
}

fuzz_target!(|data: &[u8]| {
    let _ = jsonl::parse_record(data, "text", "id");
    // With a keeper policy's field, at the top and nested.
    let _ = jsonl::parse_record_keyed(data, "text", "id", Some("q"));
    let _ = jsonl::parse_record_keyed(data, "text", "id", Some("meta.date"));
    // The limits come from the input's first byte, so chunk and line
    // boundaries fall everywhere.
    let (limits, data) = match data.split_first() {
        Some((&b, rest)) => {
            let limits = Limits {
                records: 1 + usize::from(b & 7),
                bytes: 1 + usize::from((b >> 3) & 3) * 9,
                max_line: [0, 1, 7, 64, 1 << 16, usize::MAX][usize::from(b >> 5) % 6],
            };
            (limits, rest)
        }
        None => (Limits { records: 3, bytes: 1 << 16, max_line: 64 }, data),
    };
    let stream = JsonlReader::Stream(Box::new(io::BufReader::with_capacity(7, io::Cursor::new(data.to_vec()))));
    let expected = chunks(stream, limits);
    // The same bytes as a file, mapped when they are plain JSONL: not
    // empty, compressed or Parquet. One file per process, made once,
    // without a name (nothing to collide with, nothing left behind),
    // opened again through /proc.
    static FILE: OnceLock<(std::fs::File, String)> = OnceLock::new();
    let (file, path) = FILE.get_or_init(|| {
        let file = tempfile::tempfile().unwrap();
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
        (file, path)
    });
    file.set_len(0).unwrap();
    std::os::unix::fs::FileExt::write_all_at(file, data, 0).unwrap();
    let reader = JsonlReader::open(path, true, Arc::new(AtomicU64::new(0)));
    match reader {
        Ok(reader @ JsonlReader::Mapped(_)) => {
            assert_eq!(chunks(reader, limits), expected, "the mapped reader disagrees with the stream reader");
        }
        // Not a vacuous pass: plain bytes are mapped, or the comparison
        // never runs (a temporary directory on a file system not mapped).
        other => {
            assert!(data.is_empty() || jsonl::Head::of(data) != jsonl::Head::Plain, "plain bytes not mapped: {other:?}")
        }
    }
});
