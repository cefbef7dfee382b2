//! The parse cache: extracted text keyed by the SHA-256 of a document's bytes.
//!
//! A document is parsed once; a later scan of the same bytes (under any file
//! name) reads the text back instead. Entries are plain JSON so they can be
//! inspected by hand.
//!
//! # Layout and entry format
//!
//! `ROOT/ab/abcdef….json` — the first two hex digits of the key fan entries
//! out over 256 folders. Each file is one JSON object:
//!
//! | field            | type          | meaning                                          |
//! |------------------|---------------|--------------------------------------------------|
//! | `format_version` | integer       | [`CACHE_FORMAT_VERSION`], the layout of this object |
//! | `parser_version` | integer       | [`PARSER_VERSION`] of the parsers that made `text` |
//! | `sha256`         | hex string    | SHA-256 of the original document bytes (the key) |
//! | `format`         | string        | `pdf`, `html`, `docx`, `markdown` or `text`      |
//! | `bytes`          | integer       | length of the original document                  |
//! | `title`          | string / null | title, if the format had one                     |
//! | `text_sha256`    | hex string    | SHA-256 of `text`: the entry's checksum          |
//! | `text`           | string        | the extracted text                               |
//!
//! An entry whose format or parser version differs from the running code, whose
//! key does not match its name, or whose checksum fails is treated as a miss
//! (and overwritten by the next `put`): the cache is only ever an
//! optimisation, so a bad entry costs a re-parse, never a wrong text.
//!
//! Writes are atomic: a temporary file in the same folder is written, synced
//! and renamed over the entry, so a crash leaves either the old entry, the new
//! one, or a stray `*.tmp` file that is never read.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::format::Format;
use crate::parse::{sha256_hex, ParsedDoc, PARSER_VERSION};

/// Version of the cache entry layout described in the module docs.
pub const CACHE_FORMAT_VERSION: u32 = 1;

/// A directory of parsed documents keyed by content hash.
#[derive(Debug)]
pub struct ParseCache {
    root: PathBuf,
    parser_version: u32,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    format_version: u32,
    parser_version: u32,
    sha256: String,
    format: Format,
    bytes: u64,
    title: Option<String>,
    text_sha256: String,
    text: String,
}

impl ParseCache {
    /// Opens (creating if needed) a cache rooted at `root`, e.g.
    /// `.neardup/cache/`.
    pub fn open(root: impl Into<PathBuf>) -> Result<ParseCache, Error> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(|e| Error::io("creating cache directory", e).with_path(&root))?;
        Ok(ParseCache { root, parser_version: PARSER_VERSION })
    }

    /// The cache's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Pretends the running parsers have version `version`, so tests can show
    /// that a version bump invalidates entries.
    #[doc(hidden)]
    pub fn with_parser_version(mut self, version: u32) -> ParseCache {
        self.parser_version = version;
        self
    }

    fn entry_path(&self, sha256: &str) -> Result<PathBuf, Error> {
        let valid = sha256.len() == 64 && sha256.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !valid {
            return Err(Error::cache(format!("invalid key {sha256:?}: want 64 lowercase hex digits")));
        }
        Ok(self.root.join(&sha256[..2]).join(format!("{sha256}.json")))
    }

    /// The cached document with content hash `sha256`, or `None` on a miss
    /// (absent, stale parser version, or failing its checksum).
    pub fn get(&self, sha256: &str) -> Result<Option<ParsedDoc>, Error> {
        let path = self.entry_path(sha256)?;
        let raw = match fs::read(&path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("reading cache entry", e).with_path(&path)),
        };
        let Ok(entry) = serde_json::from_slice::<Entry>(&raw) else {
            return Ok(None);
        };
        let valid = entry.format_version == CACHE_FORMAT_VERSION
            && entry.parser_version == self.parser_version
            && entry.sha256 == sha256
            && entry.text_sha256 == sha256_hex(entry.text.as_bytes());
        Ok(valid.then_some(ParsedDoc {
            text: entry.text,
            format: entry.format,
            title: entry.title,
            sha256: entry.sha256,
            bytes: entry.bytes,
        }))
    }

    /// Stores `doc` under `sha256` atomically, replacing any entry.
    pub fn put(&self, sha256: &str, doc: &ParsedDoc) -> Result<(), Error> {
        let path = self.entry_path(sha256)?;
        let dir = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|e| Error::io("creating cache directory", e).with_path(dir))?;
        let entry = Entry {
            format_version: CACHE_FORMAT_VERSION,
            parser_version: self.parser_version,
            sha256: sha256.to_owned(),
            format: doc.format,
            bytes: doc.bytes,
            title: doc.title.clone(),
            text_sha256: sha256_hex(doc.text.as_bytes()),
            text: doc.text.clone(),
        };
        let json = serde_json::to_vec(&entry).map_err(|e| Error::cache(format!("serialising entry: {e}")))?;
        write_atomic(&path, &json)
    }
}

/// Writes `data` to `path` atomically and durably ([`neardup_fs::write_atomic`]).
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> Result<(), Error> {
    neardup_fs::write_atomic(path, data).map_err(|e| Error::io("writing", e).with_path(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> ParsedDoc {
        ParsedDoc {
            text: text.to_owned(),
            format: Format::Markdown,
            title: Some("T".into()),
            sha256: sha256_hex(b"source"),
            bytes: 6,
        }
    }

    #[test]
    fn roundtrip_and_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::open(dir.path().join("cache")).unwrap();
        let key = sha256_hex(b"source");
        assert_eq!(cache.get(&key).unwrap(), None);
        cache.put(&key, &doc("hello")).unwrap();
        assert_eq!(cache.get(&key).unwrap(), Some(doc("hello")));
        // Overwrite.
        cache.put(&key, &doc("hello again")).unwrap();
        assert_eq!(cache.get(&key).unwrap().unwrap().text, "hello again");
        // No temp files left behind.
        let names: Vec<_> =
            fs::read_dir(dir.path().join("cache").join(&key[..2])).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn parser_version_bump_invalidates() {
        let dir = tempfile::tempdir().unwrap();
        let key = sha256_hex(b"source");
        ParseCache::open(dir.path()).unwrap().put(&key, &doc("x")).unwrap();
        let bumped = ParseCache::open(dir.path()).unwrap().with_parser_version(PARSER_VERSION + 1);
        assert_eq!(bumped.get(&key).unwrap(), None);
    }

    #[test]
    fn checksum_mismatch_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::open(dir.path()).unwrap();
        let key = sha256_hex(b"source");
        cache.put(&key, &doc("original")).unwrap();
        let path = cache.entry_path(&key).unwrap();
        let tampered = fs::read_to_string(&path).unwrap().replace("original", "tampered");
        fs::write(&path, tampered).unwrap();
        assert_eq!(cache.get(&key).unwrap(), None);
        fs::write(&path, b"{not json").unwrap();
        assert_eq!(cache.get(&key).unwrap(), None);
    }

    #[test]
    fn keys_validated() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::open(dir.path()).unwrap();
        for bad in ["", "../../etc/passwd", &"A".repeat(64), &"a".repeat(63)] {
            assert!(cache.get(bad).is_err(), "{bad}");
        }
    }
}
