//! A cluster node applying entries of the replicated log of any bytes,
//! filed under any tenant: an entry that is not a command of its tenant is
//! skipped, a failure to apply is an error (the node stops applying),
//! never a panic.
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use neardup_index::{Engine, EngineOptions, Error, Proposer};

#[path = "scratch.rs"]
mod scratch;

struct NoLog;

impl Proposer for NoLog {
    fn propose(&self, _tenant: &str, _after: u64, _payload: &[u8]) -> neardup_index::Result<u64> {
        Err(Error::unavailable("fuzzing: no log"))
    }
}

fuzz_target!(|data: &[u8]| {
    // A fresh replica per input: an applied entry changes its state.
    let dir = scratch::fresh("replica_entry");
    let engine = Engine::open_replica(&dir, EngineOptions::default(), Arc::new(NoLog)).unwrap();
    // Several entries in order, as the stream delivers them: each is the
    // tenant its subject names (a 1-byte length, at most 16, and its
    // bytes), a 2-byte little-endian length and that many bytes.
    let (mut rest, mut seq) = (data, 1u64);
    while let Some((&n, tail)) = rest.split_first() {
        let (tenant, tail) = tail.split_at(usize::from(n % 17).min(tail.len()));
        let tenant = String::from_utf8_lossy(tenant);
        let Some((len, tail)) = tail.split_first_chunk::<2>() else { break };
        let len = usize::from(u16::from_le_bytes(*len)).min(tail.len());
        let (entry, tail) = tail.split_at(len);
        if engine.apply_replicated(seq, &tenant, entry).is_err() {
            break;
        }
        (rest, seq) = (tail, seq + 1);
    }
    for t in engine.tenants().unwrap_or_default() {
        let _ = engine.stats(&t);
    }
});
