//! Document ingest for neardup: turn files of many formats into plain text,
//! cache that text by content hash, find the files to scan, and embed texts
//! with a pluggable embedding provider.
//!
//! ```
//! use neardup_docs::{discover, parse_file, Format, Limits, ParseCache};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("paper.md"), "# Shingles\n\nFive words in a row.")?;
//! std::fs::write(dir.path().join("copy.txt"), "Shingles\nFive words in a row.")?;
//!
//! let cache = ParseCache::open(dir.path().join(".neardup/cache"))?;
//! let limits = Limits::default();
//! let found = discover(&[dir.path()], &Default::default());
//! assert_eq!(found.files.len(), 2);
//! for path in &found.files {
//!     let outcome = parse_file(path, &limits, &cache)?;
//!     assert!(!outcome.cache_hit);
//!     assert_eq!(outcome.doc.text, "Shingles\nFive words in a row.");
//! }
//! // A second pass reads every text back from the cache.
//! let again = parse_file(&found.files[1], &limits, &cache)?;
//! assert!(again.cache_hit);
//! assert_eq!(again.doc.format, Format::Markdown);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! On top of ingest sits the batch pipeline of `neardup scan`
//! ([`scan`]): configuration ([`ConfigLayer`] → [`ScanSettings`]), the
//! comparison pass, the fingerprint [`Store`], and its consumers
//! [`report_rows`] and [`export`].
//!
//! Modules, lowest first: [`format`](Format) detection and
//! [`Limits`]; parsers under `parse/` (one per format, plus the pure
//! [`pdf_cleanup`]); the [`ParseCache`]; [`parse_file`] joining the two;
//! [`discover`]; and the embedding providers behind [`Embedder`].

#![deny(missing_docs)]

mod accuracy;
mod boilerplate;
mod cache;
mod calibrate;
mod compare;
mod config;
mod embed;
mod error;
mod export;
mod format;
mod ingest;
mod limits;
mod parse;
mod progress;
mod report;
mod scan;
mod slug;
mod store;
mod walk;

pub use cache::{ParseCache, CACHE_FORMAT_VERSION};
#[cfg(feature = "local-embed")]
pub use embed::LocalEmbedder;
pub use embed::{
    chunk_words, cosine, document_chunks, embed_document, embed_documents, embedder_from_model, mean_pool,
    mean_pool_weighted, normalize, Embedder, OllamaEmbedder, OpenAiEmbedder, ProviderConfig, DEFAULT_CHUNK_WORDS,
    DEFAULT_MAX_CHUNKS,
};
pub use error::{Error, ErrorKind};
pub use format::Format;
pub use ingest::{parse_file, ParseOutcome};
pub use limits::Limits;
pub use parse::{parse_bytes, pdf_cleanup, sha256_hex, ParsedDoc, PARSER_VERSION};
pub use walk::{discover, DiscoverOptions, Discovery};

pub use accuracy::{evaluate_labels, read_labels, Accuracy, ClassCounts, FittedCalibration, Label, PairScores};
pub use calibrate::{fit_ceiling, fit_knot, known_embedding_map, Calibration, MINHASH_WORD5};
pub use compare::all_pairs_total;
pub use config::{ConfigLayer, ScanSettings, CONFIG_KEYS};
pub use export::{duplicate_callout, export, ExportSummary, SkippedExport};
/// The verdicts stored for each document (from `neardup-core`).
pub use neardup_core::Verdict;
pub use progress::{NoProgress, Phase, Progress};
pub use report::{render_table, report_rows, ReportRow};
pub use scan::{scan, stamp, ScanOptions, ScanSummary, Skipped, Timings, VerdictCounts};
pub use slug::{slugify, MAX_SLUG_LEN};
pub use store::{Method, Store, StoredDoc, STORE_FILE, STORE_FORMAT_VERSION};
