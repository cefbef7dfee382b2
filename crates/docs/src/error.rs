//! The crate's one error type.
//!
//! Errors fall into two families, told apart by [`Error::is_document_error`]:
//! problems with one input document (too large, corrupt, unsupported, a zip
//! bomb, ...), which a batch reports and skips, and problems with the
//! environment (the parse cache directory, an embedding provider), which
//! usually concern every document alike.

use std::fmt;
use std::path::PathBuf;

use crate::format::Format;

/// An error from parsing, caching, discovering or embedding documents.
///
/// Use [`Error::kind`] to inspect what went wrong; `Display` gives a
/// one-line reason fit for a report.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    path: Option<PathBuf>,
}

/// What went wrong. New kinds may be added in minor releases.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading or writing a file failed.
    Io {
        /// What was being done, e.g. "reading document".
        action: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The input has zero bytes (or only whitespace after extraction).
    Empty,
    /// The input is larger than [`Limits::max_file_bytes`](crate::Limits).
    TooLarge {
        /// Size of the input in bytes.
        bytes: u64,
        /// The configured limit.
        limit: u64,
    },
    /// The input's type is not one neardup parses.
    Unsupported {
        /// What was detected, e.g. "PNG image" or "file extension .xls".
        detected: String,
    },
    /// The input claims to be text (by its extension) but holds binary data.
    Binary {
        /// Why the content was judged binary.
        reason: String,
    },
    /// The input is of a supported format but could not be parsed.
    Corrupt {
        /// The format the input was detected as.
        format: Format,
        /// The parser's reason.
        reason: String,
    },
    /// An archive (DOCX), or the compressed streams of a PDF, would
    /// decompress past the configured limits.
    ZipBomb {
        /// Which limit was hit and by how much.
        reason: String,
    },
    /// Parsing one document took longer than
    /// [`Limits::parse_timeout`](crate::Limits); it was skipped.
    ParseTimeout {
        /// The limit that passed, in milliseconds.
        timeout_ms: u128,
    },
    /// The extracted text exceeds [`Limits::max_text_bytes`](crate::Limits).
    TextTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The document parsed but contains no extractable text (e.g. a scanned
    /// PDF with images only).
    NoText {
        /// The detected format.
        format: Format,
    },
    /// A parse-cache entry or the cache directory is unusable.
    Cache {
        /// What is wrong.
        reason: String,
    },
    /// A path given to [`discover`](crate::discover) does not exist or could
    /// not be walked.
    Walk {
        /// The walker's reason.
        reason: String,
    },
    /// An embedding model string or provider setting is invalid.
    Config {
        /// What is wrong and, where possible, what would be right.
        reason: String,
    },
    /// An HTTP embedding provider answered with an error status, or could not
    /// be reached after all retries.
    Http {
        /// The URL requested.
        url: String,
        /// The HTTP status, if a response arrived.
        status: Option<u16>,
        /// A snippet of the response body, or the transport error.
        detail: String,
    },
    /// An HTTP embedding provider did not answer within the timeout.
    Timeout {
        /// The URL requested.
        url: String,
        /// The timeout that elapsed, in milliseconds.
        timeout_ms: u128,
    },
    /// An embedding provider returned something unusable, or the local model
    /// failed to load or run.
    Embedding {
        /// What is wrong.
        reason: String,
    },
    /// The fingerprint store is unreadable or inconsistent.
    Store {
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    pub(crate) fn new(kind: ErrorKind) -> Error {
        Error { kind, path: None }
    }

    pub(crate) fn io(action: &'static str, source: std::io::Error) -> Error {
        Error::new(ErrorKind::Io { action, source })
    }

    pub(crate) fn corrupt(format: Format, reason: impl Into<String>) -> Error {
        Error::new(ErrorKind::Corrupt { format, reason: reason.into() })
    }

    pub(crate) fn config(reason: impl Into<String>) -> Error {
        Error::new(ErrorKind::Config { reason: reason.into() })
    }

    pub(crate) fn embedding(reason: impl Into<String>) -> Error {
        Error::new(ErrorKind::Embedding { reason: reason.into() })
    }

    pub(crate) fn store(reason: impl Into<String>) -> Error {
        Error::new(ErrorKind::Store { reason: reason.into() })
    }

    pub(crate) fn cache(reason: impl Into<String>) -> Error {
        Error::new(ErrorKind::Cache { reason: reason.into() })
    }

    /// Attaches the path of the file this error concerns (kept if already set).
    pub(crate) fn with_path(mut self, path: impl Into<PathBuf>) -> Error {
        if self.path.is_none() {
            self.path = Some(path.into());
        }
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The file this error concerns, when known.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// True when the error is about one input document (its size, type or
    /// content), so a batch should report it and go on with the next file.
    /// False for cache, configuration and provider errors.
    pub fn is_document_error(&self) -> bool {
        match self.kind {
            ErrorKind::Empty
            | ErrorKind::TooLarge { .. }
            | ErrorKind::Unsupported { .. }
            | ErrorKind::Binary { .. }
            | ErrorKind::Corrupt { .. }
            | ErrorKind::ZipBomb { .. }
            | ErrorKind::ParseTimeout { .. }
            | ErrorKind::TextTooLarge { .. }
            | ErrorKind::NoText { .. } => true,
            // Reading one input file can fail on its own (permissions, a file
            // removed mid-scan); writing the cache cannot be skipped past.
            ErrorKind::Io { action, .. } => action == "reading document",
            ErrorKind::Cache { .. }
            | ErrorKind::Walk { .. }
            | ErrorKind::Config { .. }
            | ErrorKind::Http { .. }
            | ErrorKind::Timeout { .. }
            | ErrorKind::Embedding { .. }
            | ErrorKind::Store { .. } => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}: ", path.display())?;
        }
        match &self.kind {
            ErrorKind::Io { action, source } => write!(f, "I/O error {action}: {source}"),
            ErrorKind::Empty => f.write_str("empty file"),
            ErrorKind::TooLarge { bytes, limit } => {
                write!(f, "file is {bytes} bytes, over the limit of {limit} bytes")
            }
            ErrorKind::Unsupported { detected } => {
                write!(f, "unsupported file type: {detected}")
            }
            ErrorKind::Binary { reason } => write!(f, "binary content, not text: {reason}"),
            ErrorKind::Corrupt { format, reason } => {
                write!(f, "corrupt or unreadable {format}: {reason}")
            }
            ErrorKind::ZipBomb { reason } => {
                write!(f, "rejected as a possible zip bomb (decompression bomb): {reason}")
            }
            ErrorKind::ParseTimeout { timeout_ms } => {
                write!(f, "parsing took longer than the limit of {timeout_ms} ms; skipped")
            }
            ErrorKind::TextTooLarge { limit } => {
                write!(f, "extracted text exceeds the limit of {limit} bytes")
            }
            ErrorKind::NoText { format } => {
                write!(f, "no extractable text in {format} (scanned or image-only?)")
            }
            ErrorKind::Cache { reason } => write!(f, "parse cache: {reason}"),
            ErrorKind::Walk { reason } => write!(f, "cannot walk: {reason}"),
            ErrorKind::Config { reason } => write!(f, "configuration: {reason}"),
            ErrorKind::Http { url, status: Some(status), detail } => {
                write!(f, "HTTP {status} from {url}: {detail}")
            }
            ErrorKind::Http { url, status: None, detail } => {
                write!(f, "request to {url} failed: {detail}")
            }
            ErrorKind::Timeout { url, timeout_ms } => {
                write!(f, "request to {url} timed out after {timeout_ms} ms")
            }
            ErrorKind::Embedding { reason } => write!(f, "embedding: {reason}"),
            ErrorKind::Store { reason } => write!(f, "fingerprint store: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_includes_path_and_reason() {
        let err = Error::new(ErrorKind::TooLarge { bytes: 10, limit: 5 }).with_path("a/b.pdf");
        assert_eq!(err.to_string(), "a/b.pdf: file is 10 bytes, over the limit of 5 bytes");
        assert!(err.is_document_error());
    }

    #[test]
    fn provider_errors_are_not_document_errors() {
        let err = Error::new(ErrorKind::Http { url: "http://x/api".into(), status: Some(500), detail: "boom".into() });
        assert!(!err.is_document_error());
        assert_eq!(err.to_string(), "HTTP 500 from http://x/api: boom");
    }
}
