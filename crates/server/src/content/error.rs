//! Why content could not be read from a store. The one mapping to HTTP
//! statuses is in `crate::error` (`ApiError::parts`).

/// A content-store failure, with a structured kind.
#[derive(Debug)]
pub struct ContentError {
    kind: ContentErrorKind,
}

/// What went wrong.
#[derive(Debug)]
pub enum ContentErrorKind {
    /// Not `s3://BUCKET/KEY`, or a key that could name another object
    /// (`400`). Nothing was contacted.
    InvalidUri {
        /// The URI (shortened).
        uri: String,
        /// Why.
        reason: String,
    },
    /// A well-formed URI outside every store the tenant may read (`403`).
    /// Nothing was contacted.
    NotAllowed {
        /// The URI (shortened).
        uri: String,
    },
    /// The object is larger than the store's or the tenant's limit, as its
    /// HEAD said (nothing read) or as the read found (`413`).
    TooLarge {
        /// The object's size (or the bytes read when the read stopped).
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The object's media type is not one the store allows (`415`).
    MediaType {
        /// The object's Content-Type.
        found: String,
    },
    /// No such object (`422`).
    NotFound {
        /// The URI.
        uri: String,
    },
    /// The object is not UTF-8 text (`422`).
    NotText,
    /// The object changed between its HEAD and its read (`409`; a retry
    /// reads the new object).
    Changed,
    /// The store refused the service's credentials (`422`: the operator
    /// must fix the store's configuration; a retry will not help).
    Refused {
        /// The store.
        store: String,
    },
    /// The store did not answer, timed out or failed (`503`, retryable).
    /// Nothing was written.
    Unavailable {
        /// The store.
        store: String,
        /// For the log only.
        detail: String,
    },
}

impl ContentError {
    /// An error of `kind`.
    pub fn new(kind: ContentErrorKind) -> ContentError {
        ContentError { kind }
    }

    /// The structured kind.
    pub fn kind(&self) -> &ContentErrorKind {
        &self.kind
    }

    /// The failure cause as `/metrics` labels it.
    pub fn cause(&self) -> &'static str {
        match &self.kind {
            ContentErrorKind::InvalidUri { .. } => "invalid_uri",
            ContentErrorKind::NotAllowed { .. } => "not_allowed",
            ContentErrorKind::TooLarge { .. } => "too_large",
            ContentErrorKind::MediaType { .. } => "media_type",
            ContentErrorKind::NotFound { .. } => "not_found",
            ContentErrorKind::NotText => "not_text",
            ContentErrorKind::Changed => "changed",
            ContentErrorKind::Refused { .. } => "refused",
            ContentErrorKind::Unavailable { .. } => "unavailable",
        }
    }
}

impl std::fmt::Display for ContentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            ContentErrorKind::InvalidUri { uri, reason } => write!(f, "content_uri {uri:?}: {reason}"),
            ContentErrorKind::NotAllowed { uri } => {
                write!(f, "content_uri {uri:?} is in no content store this tenant may read")
            }
            ContentErrorKind::TooLarge { size, max } => {
                write!(f, "the object is {size} bytes, over the limit of {max}; it was not read")
            }
            ContentErrorKind::MediaType { found } => {
                write!(f, "the object's media type {found:?} is not one the store allows")
            }
            ContentErrorKind::NotFound { uri } => write!(f, "no object at {uri:?}"),
            ContentErrorKind::NotText => f.write_str("the object is not UTF-8 text"),
            ContentErrorKind::Changed => f.write_str("the object changed while it was read; retry"),
            ContentErrorKind::Refused { store } => {
                write!(f, "content store {store:?} refused the service's credentials")
            }
            ContentErrorKind::Unavailable { store, detail } => {
                write!(f, "content store {store:?} is unavailable: {detail}")
            }
        }
    }
}

impl std::error::Error for ContentError {}
