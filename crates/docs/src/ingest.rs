//! Reading a document file through the parse cache.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::cache::ParseCache;
use crate::error::{Error, ErrorKind};
use crate::limits::Limits;
use crate::parse::{parse_with_sha, sha256_hex, ParsedDoc};

/// The result of [`parse_file`]: the document and whether it came from the
/// cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseOutcome {
    /// The parsed document.
    pub doc: ParsedDoc,
    /// True when the text was read from the cache and no parser ran.
    pub cache_hit: bool,
}

/// Reads `path`, hashes its bytes, and returns the cached text for that hash
/// or parses the bytes and caches the result.
///
/// The size limit is checked against the file's metadata before anything is
/// read, and again while reading (the file may grow). Errors carry the path;
/// [`Error::is_document_error`] tells a batch whether to skip and go on.
pub fn parse_file(path: &Path, limits: &Limits, cache: &ParseCache) -> Result<ParseOutcome, Error> {
    let bytes = read_limited(path, limits.max_file_bytes).map_err(|e| e.with_path(path))?;
    let sha = sha256_hex(&bytes);
    if let Some(doc) = cache.get(&sha).map_err(|e| e.with_path(path))? {
        return Ok(ParseOutcome { doc, cache_hit: true });
    }
    let doc = parse_with_sha(&bytes, Some(path), limits, sha).map_err(|e| e.with_path(path))?;
    cache.put(&doc.sha256, &doc).map_err(|e| e.with_path(path))?;
    Ok(ParseOutcome { doc, cache_hit: false })
}

fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, Error> {
    let file = File::open(path).map_err(|e| Error::io("reading document", e))?;
    let len = file.metadata().map_err(|e| Error::io("reading document", e))?.len();
    if len > limit {
        return Err(Error::new(ErrorKind::TooLarge { bytes: len, limit }));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(|e| Error::io("reading document", e))?;
    if bytes.len() as u64 > limit {
        return Err(Error::new(ErrorKind::TooLarge { bytes: bytes.len() as u64, limit }));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_parse_is_a_cache_hit() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::open(dir.path().join("cache")).unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "some words here").unwrap();
        let first = parse_file(&file, &Limits::default(), &cache).unwrap();
        assert!(!first.cache_hit);
        let second = parse_file(&file, &Limits::default(), &cache).unwrap();
        assert!(second.cache_hit);
        assert_eq!(first.doc, second.doc);
    }

    #[test]
    fn sparse_huge_file_rejected_from_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::open(dir.path().join("cache")).unwrap();
        let file = dir.path().join("huge.txt");
        // A sparse 1 GiB file costs no disk; the limit must fire before reading.
        File::create(&file).unwrap().set_len(1 << 30).unwrap();
        let err = parse_file(&file, &Limits::default(), &cache).unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::TooLarge { bytes: 1_073_741_824, .. }), "{err}");
        assert!(err.to_string().contains("huge.txt"), "{err}");
        assert!(err.is_document_error());
    }

    #[test]
    fn missing_file_is_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::open(dir.path()).unwrap();
        let err = parse_file(&dir.path().join("nope.pdf"), &Limits::default(), &cache).unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Io { .. }), "{err}");
    }
}
