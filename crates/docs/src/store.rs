//! The fingerprint store: `.neardup/dedup/fingerprints.json`, one entry per
//! scanned document with its verdict and fingerprints.
//!
//! # Format (version 2)
//!
//! One JSON object, written compactly:
//!
//! | field              | type       | meaning                                                        |
//! |--------------------|------------|----------------------------------------------------------------|
//! | `format_version`   | integer    | [`STORE_FORMAT_VERSION`]; version 1 is read too, others refused |
//! | `stamp`            | hex string | SHA-256 of `stamp_inputs`: the fingerprint configuration        |
//! | `stamp_inputs`     | string     | every config value that changes fingerprints or verdicts        |
//! | `documents_sha256` | hex string | SHA-256 of the bytes of `documents` as written: the checksum    |
//! | `documents`        | array      | entries in ingest order (below)                                |
//!
//! Each entry has the seed's six fields first, then neardup's:
//!
//! | field             | type               | meaning                                                      |
//! |-------------------|--------------------|--------------------------------------------------------------|
//! | `verdict`         | string             | `identical`, `similar` or `different`                        |
//! | `closest_match`   | string / null      | slug of the best-scoring other document, earlier or later    |
//! | `closest_score`   | float / null       | combined calibrated score = max(embedding, minhash) against it |
//! | `closest_method`  | string / null      | `embedding` or `minhash`: which calibrated score won         |
//! | `embedding_score` | float / null       | raw cosine of the document embeddings against the closest match |
//! | `minhash_score`   | float / null       | raw exact Jaccard of shingle sets against the closest match  |
//! | `embedding_calibrated` | float / null  | `embedding_score` on the common scale (`crate::calibrate`)   |
//! | `minhash_calibrated` | float / null    | `minhash_score` on the common scale                          |
//! | `duplicate_of`    | string / null      | for an identical document: the earlier document it copies    |
//! | `similar_to`      | string / null      | for a kept similar document: the closest *kept* document that is not one of its own copies (the export's callout names it) |
//! | `similar_score`   | float / null       | the combined calibrated score against `similar_to`           |
//! | `slug`            | string             | unique name, from the title or the file name                 |
//! | `path`            | string             | absolute path of the source file                             |
//! | `sha256`          | hex string         | SHA-256 of the file's bytes (the parse-cache key)            |
//! | `format`          | string             | `pdf`, `html`, `docx`, `markdown` or `text`                  |
//! | `title`           | string / null      | title from the document, if any                              |
//! | `bytes`           | integer            | size of the file                                             |
//! | `content_hash`    | hex string         | BLAKE3-128 of the normalized text (equal ⇒ identical)        |
//! | `tokens`          | integer            | tokens in the normalized text                                |
//! | `features`        | array of u64       | sorted shingle hashes (empty when MinHash is off or degraded) |
//! | `embedding`       | array of f32 / null| the document vector, when the embedding matcher ran          |
//! | `embedding_model` | string / null      | provider id of the model that made `embedding`               |
//! | `embedding_key`   | string (optional)  | what `embedding` is of when not the whole text: `strip:` and the SHA-256 of the text embedded (boilerplate left out) |
//!
//! Version 1 had neither the two calibrated scores nor `duplicate_of`; it
//! is still read (they are null), and its stamp, which names `store=v1`,
//! differs from any running configuration's, so the next scan rebuilds it
//! from the parse cache. `kept_original` follows `duplicate_of`, or
//! `closest_match` in a version-1 entry.
//!
//! MinHash signatures and LSH band keys are not stored: they are recomputed
//! from `features` when the store is loaded, which is cheaper than reading
//! them.
//!
//! The file is replaced atomically (temporary file in the same folder,
//! fsync, rename, fsync of the folder): a crash leaves the old store or the
//! new one. A store whose checksum fails, whose JSON is malformed or whose
//! entries contradict each other is refused with the reason, never silently
//! dropped.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use neardup_core::Verdict;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::cache::write_atomic;
use crate::error::{Error, ErrorKind};
use crate::format::Format;
use crate::parse::sha256_hex;

/// Version of the store layout described in the module docs.
pub const STORE_FORMAT_VERSION: u32 = 2;

/// Store versions this build reads.
const READABLE_VERSIONS: [u32; 2] = [1, 2];

/// File name of the store inside `ROOT/dedup/`.
pub const STORE_FILE: &str = "fingerprints.json";

/// Which matcher produced a score.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Cosine of document embeddings.
    Embedding,
    /// Exact Jaccard of shingle sets (MinHash LSH found the candidate).
    Minhash,
}

impl Method {
    /// `embedding` or `minhash`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Embedding => "embedding",
            Method::Minhash => "minhash",
        }
    }
}

/// One document in the store. Field order is the on-disk order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredDoc {
    /// The verdict the export step acts on.
    pub verdict: Verdict,
    /// Slug of the best-scoring other document.
    pub closest_match: Option<String>,
    /// Combined score against `closest_match`.
    pub closest_score: Option<f64>,
    /// Which matcher gave the combined score.
    pub closest_method: Option<Method>,
    /// Embedding cosine against `closest_match`.
    pub embedding_score: Option<f64>,
    /// Exact Jaccard against `closest_match`.
    pub minhash_score: Option<f64>,
    /// `embedding_score` on the common scale.
    #[serde(default)]
    pub embedding_calibrated: Option<f64>,
    /// `minhash_score` on the common scale.
    #[serde(default)]
    pub minhash_calibrated: Option<f64>,
    /// For an identical document, the earlier document it is a copy of (the
    /// chain of these leads to the kept original).
    #[serde(default)]
    pub duplicate_of: Option<String>,
    /// For a kept document that is similar: the closest kept document that
    /// is not one of its own identical copies.
    #[serde(default)]
    pub similar_to: Option<String>,
    /// Combined calibrated score against `similar_to`.
    #[serde(default)]
    pub similar_score: Option<f64>,
    /// Unique name of this document.
    pub slug: String,
    /// Absolute source path.
    pub path: String,
    /// SHA-256 of the source bytes.
    pub sha256: String,
    /// Parsed format.
    pub format: Format,
    /// Title, if the document has one.
    pub title: Option<String>,
    /// Source size in bytes.
    pub bytes: u64,
    /// BLAKE3-128 of the normalized text, hex.
    pub content_hash: String,
    /// Tokens in the normalized text.
    pub tokens: u32,
    /// Sorted shingle hashes.
    pub features: Vec<u64>,
    /// Document embedding.
    pub embedding: Option<Vec<f32>>,
    /// Model id of `embedding`.
    pub embedding_model: Option<String>,
    /// What `embedding` is of when it is not the whole text: `strip:` and
    /// the SHA-256 of the text embedded, its boilerplate left out. Absent
    /// for the whole text (and in stores written before boilerplate was
    /// left out). Earlier builds refuse a store that has it (unknown
    /// field): going back to one means deleting the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_key: Option<String>,
}

/// The whole store in memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Store {
    /// Hex SHA-256 of `stamp_inputs`.
    pub stamp: String,
    /// The configuration the fingerprints were made under.
    pub stamp_inputs: String,
    /// Entries in ingest order.
    pub documents: Vec<StoredDoc>,
}

#[derive(Serialize)]
struct StoreFile<'a> {
    format_version: u32,
    stamp: &'a str,
    stamp_inputs: &'a str,
    documents_sha256: String,
    documents: &'a RawValue,
}

/// The file as read: `documents` kept as raw bytes, so the checksum is over
/// exactly what is on disk.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFileIn<'a> {
    format_version: u32,
    stamp: String,
    stamp_inputs: String,
    documents_sha256: String,
    #[serde(borrow)]
    documents: &'a RawValue,
}

impl Store {
    /// The store file under a state root: `ROOT/dedup/fingerprints.json`.
    pub fn path_in(root: &Path) -> PathBuf {
        root.join("dedup").join(STORE_FILE)
    }

    /// Loads the store at `path`; `Ok(None)` when there is none yet.
    pub fn load(path: &Path) -> Result<Option<Store>, Error> {
        let raw = match std::fs::read(path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("reading fingerprint store", e).with_path(path)),
        };
        Store::from_json(&raw).map(Some).map_err(|e| e.with_path(path))
    }

    /// Decodes and validates a store file's bytes.
    pub fn from_json(raw: &[u8]) -> Result<Store, Error> {
        let bad = |reason: String| {
            Error::new(ErrorKind::Store {
                reason: format!("{reason}; move the store away (or delete it) and scan again"),
            })
        };
        let file: StoreFileIn<'_> = serde_json::from_slice(raw).map_err(|e| bad(format!("malformed JSON: {e}")))?;
        if !READABLE_VERSIONS.contains(&file.format_version) {
            return Err(bad(format!(
                "format version {} is not supported (this build reads {READABLE_VERSIONS:?})",
                file.format_version
            )));
        }
        if sha256_hex(file.documents.get().as_bytes()) != file.documents_sha256 {
            return Err(bad("checksum mismatch: documents were modified or truncated".to_owned()));
        }
        let documents: Vec<StoredDoc> =
            serde_json::from_str(file.documents.get()).map_err(|e| bad(format!("malformed entry: {e}")))?;
        let store = Store { stamp: file.stamp, stamp_inputs: file.stamp_inputs, documents };
        store.validate().map_err(bad)?;
        Ok(store)
    }

    /// Encodes the store (see the module docs for the layout).
    pub fn to_json(&self) -> Result<Vec<u8>, Error> {
        let docs = serde_json::to_string(&self.documents).map_err(|e| Error::store(format!("encoding: {e}")))?;
        let raw = RawValue::from_string(docs).map_err(|e| Error::store(format!("encoding: {e}")))?;
        let file = StoreFile {
            format_version: STORE_FORMAT_VERSION,
            stamp: &self.stamp,
            stamp_inputs: &self.stamp_inputs,
            documents_sha256: sha256_hex(raw.get().as_bytes()),
            documents: &raw,
        };
        serde_json::to_vec(&file).map_err(|e| Error::store(format!("encoding: {e}")))
    }

    /// Writes the store to `path` atomically, creating its folder.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        self.validate().map_err(Error::store)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("creating store directory", e).with_path(dir))?;
        }
        write_atomic(path, &self.to_json()?)
    }

    /// The entry with slug `slug`.
    pub fn get(&self, slug: &str) -> Option<&StoredDoc> {
        self.documents.iter().find(|d| d.slug == slug)
    }

    /// Follows `duplicate_of` (in a version-1 entry, `closest_match`) from
    /// an identical document to the document that is kept in its place (the
    /// first non-identical one). `None` for a document that is itself kept,
    /// or when the chain is broken.
    pub fn kept_original<'a>(&'a self, doc: &'a StoredDoc) -> Option<&'a StoredDoc> {
        let mut seen = HashSet::new();
        let mut current = doc;
        while current.verdict == Verdict::Identical {
            if !seen.insert(current.slug.as_str()) {
                return None;
            }
            let next = current.duplicate_of.as_deref().or(current.closest_match.as_deref());
            current = self.get(next?)?;
        }
        (current.slug != doc.slug).then_some(current)
    }

    /// Loaded state is input: check what the rest of the code relies on.
    fn validate(&self) -> Result<(), String> {
        let mut slugs = HashSet::new();
        for d in &self.documents {
            if d.slug.is_empty() || !slugs.insert(d.slug.as_str()) {
                return Err(format!("slug {:?} is empty or not unique", d.slug));
            }
        }
        let is_hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
        let mut dim = None;
        for d in &self.documents {
            let name = &d.slug;
            if !is_hex(&d.sha256, 64) || !is_hex(&d.content_hash, 32) {
                return Err(format!("{name}: malformed sha256 or content_hash"));
            }
            let links =
                [("closest_match", &d.closest_match), ("duplicate_of", &d.duplicate_of), ("similar_to", &d.similar_to)];
            for (field, m) in links {
                if let Some(m) = m {
                    if !slugs.contains(m.as_str()) || m == name {
                        return Err(format!("{name}: {field} {m:?} is not another document in the store"));
                    }
                }
            }
            let scores = [
                d.closest_score,
                d.embedding_score,
                d.minhash_score,
                d.embedding_calibrated,
                d.minhash_calibrated,
                d.similar_score,
            ];
            for s in scores.into_iter().flatten() {
                if !(-1.0..=1.0).contains(&s) {
                    return Err(format!("{name}: score {s} out of range"));
                }
            }
            if d.features.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!("{name}: features are not sorted and unique"));
            }
            if let Some(e) = &d.embedding {
                if *dim.get_or_insert(e.len()) != e.len() || e.iter().any(|x| !x.is_finite()) {
                    return Err(format!("{name}: embedding of inconsistent length or with non-finite values"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn entry(slug: &str, verdict: Verdict, closest: Option<&str>) -> StoredDoc {
        StoredDoc {
            verdict,
            closest_match: closest.map(str::to_owned),
            closest_score: closest.map(|_| 0.97),
            closest_method: closest.map(|_| Method::Minhash),
            embedding_score: None,
            minhash_score: closest.map(|_| 0.97),
            embedding_calibrated: None,
            minhash_calibrated: closest.map(|_| 0.97),
            duplicate_of: closest.filter(|_| verdict == Verdict::Identical).map(str::to_owned),
            similar_to: None,
            similar_score: None,
            slug: slug.to_owned(),
            path: format!("/docs/{slug}.txt"),
            sha256: sha256_hex(slug.as_bytes()),
            format: Format::Text,
            title: None,
            bytes: 10,
            content_hash: "0".repeat(32),
            tokens: 3,
            features: vec![1, 5, 9],
            embedding: Some(vec![0.6, 0.8]),
            embedding_model: Some("local:m#0".into()),
            embedding_key: None,
        }
    }

    fn store() -> Store {
        Store {
            stamp: "ab".into(),
            stamp_inputs: "x".into(),
            documents: vec![
                entry("a", Verdict::Different, None),
                entry("b", Verdict::Identical, Some("a")),
                entry("c", Verdict::Identical, Some("b")),
            ],
        }
    }

    #[test]
    fn roundtrip_atomic_save() {
        let dir = tempfile::tempdir().unwrap();
        let path = Store::path_in(dir.path());
        assert_eq!(Store::load(&path).unwrap(), None);
        store().save(&path).unwrap();
        assert_eq!(Store::load(&path).unwrap(), Some(store()));
        let names: Vec<_> =
            std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [STORE_FILE], "no temp files left");
    }

    #[test]
    fn seed_fields_come_first() {
        let json = String::from_utf8(store().to_json().unwrap()).unwrap();
        let i = json.find("{\"verdict\":\"different\",\"closest_match\":null,\"closest_score\":null,").unwrap();
        assert!(json[i..].contains(
            "\"closest_method\":null,\"embedding_score\":null,\"minhash_score\":null,\"embedding_calibrated\":null"
        ));
    }

    #[test]
    fn kept_original_follows_the_chain() {
        let s = store();
        assert_eq!(s.kept_original(&s.documents[2]).unwrap().slug, "a");
        assert_eq!(s.kept_original(&s.documents[1]).unwrap().slug, "a");
        assert!(s.kept_original(&s.documents[0]).is_none());
    }

    #[test]
    fn damage_is_refused_with_a_reason() {
        let good = String::from_utf8(store().to_json().unwrap()).unwrap();
        let cases = [
            (good.replace("\"tokens\":3", "\"tokens\":4"), "checksum"),
            (good[..good.len() / 2].to_owned(), "malformed JSON"),
            (good.replace("\"format_version\":2", "\"format_version\":9"), "format version 9"),
        ];
        for (bad, needle) in cases {
            let err = Store::from_json(bad.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains("scan again"), "{needle}: {err}");
        }
        // A consistent checksum over inconsistent entries is refused too.
        let mut s = store();
        s.documents[2].closest_match = Some("zzz".into());
        let raw = s.to_json().unwrap();
        let err = Store::from_json(&raw).unwrap_err().to_string();
        assert!(err.contains("zzz"), "{err}");
    }
}
