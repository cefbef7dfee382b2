//! # neardup-core
//!
//! The algorithms of neardup, with no I/O, no threads and no async: versioned
//! normalization, shingling, exact content hashes, MinHash, LSH banding and a
//! the one candidate index ([`CandidateIndex`]), SimHash, exact Jaccard
//! verification, policies, and the exact all-pairs oracle that the fast path
//! is tested against.
//!
//! ```
//! use neardup_core::{Config, Fingerprinter, MemoryIndex};
//!
//! // The seed document's example: word bigrams, threshold 0.75.
//! let params = Config::seed_example().resolve()?;
//! let mut fp = Fingerprinter::new(params.clone())?;
//! let mut index = MemoryIndex::new(params);
//!
//! let a = index.insert(fp.fingerprint("red fox runs very fast"))?;
//! let b = fp.fingerprint("red fox runs very fast today");
//! let candidates = index.candidates(&b, None)?;
//! let matches = index.verify(&b, &candidates.ids, 0.75);
//! assert_eq!(matches[0].id, a);
//! assert_eq!(matches[0].score, 0.8); // 4 shared bigrams of 5
//! # Ok::<(), neardup_core::Error>(())
//! ```

pub mod batch;
mod candidates;
mod config;
mod error;
pub mod eval;
mod fingerprint;
pub mod hash;
pub mod highlight;
mod index;
pub mod lsh;
pub mod minhash;
pub mod normalize;
pub mod oracle;
pub mod pages;
mod policy;
pub mod saved_index;
pub mod shingle;
pub mod simhash;
pub mod unionfind;
pub mod verify;

pub use candidates::{
    fold_key, Candidate, CandidateIndex, CandidateSet, Filing, ImageRow, IndexView, ItemKeys, RowLoader, MAX_ITEM_ID,
};
pub use config::{Config, Params, DEFAULT_RECALL_TARGET, DEFAULT_SEED, FORMAT_VERSION};
pub use error::{Error, ErrorKind, Result};
pub use fingerprint::{Degraded, Fingerprint, Fingerprinter, StoredFingerprint};
pub use hash::ContentHash;
pub use index::{Loader, Match, MemoryIndex};
pub use lsh::{LshParams, QueryLimits};
pub use minhash::{MinHasher, SignatureScheme};
pub use normalize::Normalizer;
pub use policy::{Policy, Verdict};
pub use shingle::ShingleKind;
pub use verify::{jaccard, verify_pair, PairScore};
