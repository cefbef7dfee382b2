//! # neardup-core
//!
//! The algorithms of neardup, with no I/O, no threads and no async: versioned
//! normalization, shingling, exact content hashes, MinHash, LSH banding and
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

mod batch;
mod candidates;
mod config;
mod error;
mod eval;
mod fingerprint;
mod hash;
mod highlight;
mod index;
mod keep;
mod lsh;
mod minhash;
mod normalize;
mod oracle;
mod pages;
mod policy;
mod saved_index;
mod shingle;
mod simhash;
mod unionfind;
mod verify;

pub use batch::{Decided, Greedy, Lookup};
pub use candidates::{
    content_key, fold_key, Candidate, CandidateIndex, CandidateSet, Filing, ImageRow, IndexView, ItemKeys, RowLoader,
    SketchReads, MAX_ITEM_ID,
};
pub use config::{Config, Params, CONFIG_FORMAT_VERSION, DEFAULT_RECALL_TARGET, DEFAULT_SEED};
pub use error::{Error, ErrorKind, Result};
pub use eval::{
    accuracy, decision_accuracy, greedy_drops, percentiles, recall_by_bin, recall_by_density, wilson_interval,
    Accuracy, BinRecall, DecisionAccuracy, DensityRecall,
};
pub use fingerprint::{Degraded, Fingerprint, Fingerprinter, StoredFingerprint};
pub use hash::{
    content_hash, content_hashes, fmix64, hash_bytes, hash_u32s, map_slots, ContentHash, SplitMix64,
    CONTENT_HASH_VERSION, FEATURE_HASH_VERSION,
};
pub use highlight::{segments_where, shared_segments};
pub use index::{best_first, Loader, Match, MemoryIndex};
pub use keep::Keep;
pub use lsh::params::{candidate_probability, choose as choose_lsh_params, optimal_weighted, s_curve_svg};
pub use lsh::{band_keys_into, LshParams, QueryLimits};
pub use minhash::{estimate_jaccard, MinHasher, SignatureScheme};
pub use normalize::{unicode_v1_reference, Normalizer};
pub use oracle::{all_pairs, all_pairs_brute_force};
pub use pages::Pages;
pub use policy::{Policy, Verdict};
pub use saved_index::{write as write_saved_index, FormatError, Header, Reader, SavedItem, SAVED_INDEX_FORMAT_VERSION};
pub use shingle::{features_into, ShingleKind, Shingler};
pub use simhash::{hamming, simhash, simhash_set, SIMHASH_VERSION};
pub use unionfind::UnionFind;
pub use verify::{
    containment, intersection_size, is_canonical, jaccard, jaccard_at_least, verify_pair, verify_pair_by_sizes,
    PairScore,
};
