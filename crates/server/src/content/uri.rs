//! `content_uri`: `s3://BUCKET/KEY`, taken apart without any network call,
//! and matched against the stores a tenant may read.
//!
//! Nothing here resolves a host, follows a link or decodes an escape: the
//! URI names a bucket and a key, and the only endpoint that is ever
//! contacted is the one the operator configured for the store that owns
//! that bucket. Anything else — another scheme, a host, a bucket of no
//! store of the tenant's, a key outside the store's prefix, a key with
//! `.`/`..` or empty segments — is refused here.

use super::error::{ContentError, ContentErrorKind};

/// The longest `content_uri` accepted (S3 keys are at most 1024 bytes).
pub const MAX_URI_BYTES: usize = 1100;

/// A parsed `s3://BUCKET/KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentUri {
    /// The bucket, as written.
    pub bucket: String,
    /// The object key, as written (never empty).
    pub key: String,
}

impl ContentUri {
    /// Parses `uri`, refusing anything but `s3://BUCKET/KEY`.
    pub fn parse(uri: &str) -> Result<ContentUri, ContentError> {
        let bad = |reason: &str| {
            ContentError::new(ContentErrorKind::InvalidUri { uri: shorten(uri), reason: reason.to_string() })
        };
        if uri.len() > MAX_URI_BYTES {
            return Err(bad("longer than 1100 bytes"));
        }
        let Some(rest) = uri.strip_prefix("s3://") else {
            return Err(bad("only s3://BUCKET/KEY is accepted (no other scheme)"));
        };
        let (bucket, key) = rest.split_once('/').ok_or_else(|| bad("no key after the bucket"))?;
        if !valid_bucket(bucket) {
            return Err(bad("the bucket must be 3 to 63 characters of a-z, 0-9, '.' and '-'"));
        }
        if key.is_empty() {
            return Err(bad("the key is empty"));
        }
        if key.chars().any(|c| c.is_control()) || key.contains('\\') {
            return Err(bad("the key holds a control character or a backslash"));
        }
        // Keys are taken literally: '%' is not decoded, '?' and '#' are
        // part of no URL here and are refused rather than guessed at.
        if key.contains(['?', '#', '%']) {
            return Err(bad("the key holds '?', '#' or '%'"));
        }
        if key.split('/').any(|seg| seg.is_empty() || seg == "." || seg == "..") {
            return Err(bad("the key has an empty, '.' or '..' segment"));
        }
        Ok(ContentUri { bucket: bucket.to_string(), key: key.to_string() })
    }
}

/// S3's bucket naming rules, the part that matters here: no '/', ':', '@'
/// or uppercase, so a bucket can never be read as a host and port.
fn valid_bucket(b: &str) -> bool {
    (3..=63).contains(&b.len())
        && b.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
        && !b.starts_with(['.', '-'])
}

/// A URI for an error message or an audit event: at most 200 characters.
pub fn shorten(uri: &str) -> String {
    match uri.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &uri[..i]),
        None => uri.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_bucket_and_key() {
        let u = ContentUri::parse("s3://docs/incoming/2026/a b.txt").unwrap();
        assert_eq!((u.bucket.as_str(), u.key.as_str()), ("docs", "incoming/2026/a b.txt"));
    }

    /// Each refused before any store is looked at, let alone contacted.
    #[test]
    fn refuses_everything_else() {
        for uri in [
            "http://169.254.169.254/latest/meta-data/",
            "https://docs.s3.amazonaws.com/a.txt",
            "http://127.0.0.1:8333/docs/a.txt",
            "file:///etc/passwd",
            "S3://docs/a.txt",
            "s3:/docs/a.txt",
            "s3://docs",
            "s3://docs/",
            "s3://127.0.0.1:8333/a.txt",
            "s3://user@docs/a.txt",
            "s3://Docs/a.txt",
            "s3://docs/../other/a.txt",
            "s3://docs/a/./b.txt",
            "s3://docs/a//b.txt",
            "s3://docs/a.txt?versionId=1",
            "s3://docs/a%2F..%2Fb",
            "s3://docs/a\nb",
            "s3://d/a.txt",
        ] {
            let e = ContentUri::parse(uri).unwrap_err();
            assert!(matches!(e.kind(), ContentErrorKind::InvalidUri { .. }), "{uri}: {e}");
        }
        assert!(ContentUri::parse(&format!("s3://docs/{}", "k".repeat(2000))).is_err());
    }
}
