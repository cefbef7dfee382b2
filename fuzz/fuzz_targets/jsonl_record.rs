//! The JSONL record decoder of `neardup dedup` never panics on any line.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../crates/cli/src/jsonl.rs"]
mod jsonl;

fuzz_target!(|data: &[u8]| {
    let _ = jsonl::parse_record(data, "text", "id");
    let mut reader = std::io::BufReader::with_capacity(7, data);
    let (mut lines, mut rejects, mut n) = (Vec::new(), Vec::new(), 0u64);
    while jsonl::read_chunk(&mut reader, &mut n, 3, 1 << 16, 64, &mut lines, &mut rejects).unwrap() {
        lines.clear();
    }
});
