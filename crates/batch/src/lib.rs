//! neardup's batch engines: datasets of JSONL (plain, zstd, gzip) and
//! Parquet files, local or in an S3-compatible store, deduplicated as one
//! dataset.
//!
//! [`dedup::run`] is a whole `neardup dedup` run: read the inputs in order,
//! fingerprint them, find each item's candidates among the earlier items
//! sharing a band, verify every candidate with exact Jaccard, decide by the
//! keeper rule ([`neardup_core::Greedy`]) and write kept rows, pairs,
//! drops, clusters and the saved index. Two engines give the same results
//! byte for byte:
//!
//! - in memory ([`pipeline`]): decided while reading, the fastest;
//! - under a memory limit (`bounded`): fingerprints, band keys and features
//!   in a work folder on disk, about 9 bytes per record resident, decided
//!   after reading by the same rule over the same candidates.
//!
//! The readers ([`input`], [`jsonl`], `parquet_io`, [`remote`]) and writers
//! ([`output`]) are the ones the CLI's other subcommands use too.

/// `eprintln!` that cannot panic: a closed or broken standard error (a
/// caller that closed fd 2) loses the message instead of aborting the run.
/// Every module of this crate and of the `neardup` binary prints with it.
#[doc(hidden)]
#[macro_export]
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod bounded;
pub mod chunk;
pub mod dedup;
pub mod input;
pub mod jsonl;
pub mod output;
mod parquet_io;
pub mod pipeline;
pub mod progress;
pub mod remote;
pub mod report;
mod saved;

pub use bounded::Phase;
pub use dedup::{Options, ReportFormat, Summary};

/// An error that comes from how a run was asked for (a flag, a path, a
/// limit), not from its data or the machine: the CLI exits with status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
