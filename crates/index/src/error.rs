//! The one error type of `neardup-index`.
//!
//! [`ErrorKind`] is structured and every kind has a stable [`Error::code`]
//! string, so the HTTP layer can map kinds to statuses with one exhaustive
//! `match` and clients can branch on codes without parsing messages.

use std::fmt;

/// An error from the index engine.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
}

/// What went wrong.
#[derive(Debug, Clone)]
pub enum ErrorKind {
    /// A configuration value is invalid (from core validation or ours).
    InvalidConfig {
        /// Which key.
        key: String,
        /// Why, in words a user can act on.
        reason: String,
    },
    /// A request field is invalid.
    InvalidInput {
        /// Which field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// No tenant of that id.
    TenantNotFound {
        /// The tenant id.
        tenant: String,
    },
    /// `create_tenant` for an id that exists.
    TenantExists {
        /// The tenant id.
        tenant: String,
    },
    /// No live item of that id.
    ItemNotFound {
        /// The item id.
        item_id: String,
    },
    /// The item id exists with different content and the request is not a
    /// new version (higher epoch): overwrites must be explicit.
    ItemExists {
        /// The item id.
        item_id: String,
        /// Its current epoch; a replacement needs a higher one.
        epoch: u64,
    },
    /// An epoch at or below the item's current (or tombstone) epoch.
    StaleEpoch {
        /// The item id.
        item_id: String,
        /// The epoch the item is at.
        current: u64,
        /// The epoch the request carried.
        given: u64,
    },
    /// An idempotency key was reused with a different request.
    IdempotencyConflict {
        /// The key.
        key: String,
    },
    /// An input is over a size limit; refused before allocation.
    TooLarge {
        /// Which limit.
        limit: &'static str,
        /// The limit.
        max: u64,
        /// What the input needed.
        actual: u64,
    },
    /// The tenant's item or byte budget would be exceeded.
    BudgetExceeded {
        /// `max_items` or `max_bytes`.
        limit: &'static str,
        /// The budget.
        max: u64,
        /// What the tenant would hold.
        actual: u64,
    },
    /// A rebuild needs content that was not retained.
    RebuildNeedsContent {
        /// What changed that needs it.
        reason: String,
    },
    /// The operation does not apply in the tenant's current state (no shadow
    /// index to promote, nothing to roll back, ...).
    InvalidState {
        /// What is wrong.
        what: String,
    },
    /// Stored bytes failed a checksum or structural check.
    Corrupt {
        /// Which artefact (`snapshot`, `log`, `store record`).
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// An encrypted snapshot failed authentication (tampered or wrong key),
    /// or encryption is required/absent in a way that does not match.
    SnapshotAuth {
        /// What failed.
        detail: String,
    },
    /// A format version this build does not read.
    UnsupportedFormat {
        /// Which artefact.
        what: &'static str,
        /// The version found.
        version: u32,
    },
    /// A snapshot belongs to a different tenant than the one restored into.
    TenantMismatch {
        /// The tenant requested.
        expected: String,
        /// The tenant in the snapshot.
        found: String,
    },
    /// A file-system operation failed.
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        /// Shared, so that one failure can answer every write it fails.
        source: std::sync::Arc<std::io::Error>,
    },
    /// The item store failed.
    Store {
        /// The backend (`memory`, `fjall`, ...).
        backend: &'static str,
        /// What failed.
        detail: String,
    },
    /// Cluster mode: another node logged a command of this tenant first.
    /// The engine waits until it has applied that command and plans again,
    /// so callers see this only when that wait ran out.
    LogConflict {
        /// The tenant.
        tenant: String,
        /// The tenant's last command in the replicated log (its sequence).
        last: u64,
    },
    /// Cluster mode: the replicated log did not answer in time (no quorum,
    /// no connection) or this node has not applied the position asked for.
    /// A write that failed this way may still land: retry with the same
    /// idempotency key.
    Unavailable {
        /// What did not answer.
        detail: String,
    },
    /// The event feed no longer holds the events after this position: the
    /// log behind them was trimmed by a checkpoint, or the tenant's ring
    /// of recent events is full. The reader resumes from `oldest_after`.
    EventsTrimmed {
        /// The position asked for.
        after: u64,
        /// The oldest position the feed can resume after.
        oldest_after: u64,
    },
}

impl Error {
    pub(crate) fn new(kind: ErrorKind) -> Error {
        Error { kind }
    }

    /// The structured kind.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// A stable, snake_case code per kind, for wire formats and metrics.
    pub fn code(&self) -> &'static str {
        match &self.kind {
            ErrorKind::InvalidConfig { .. } => "invalid_config",
            ErrorKind::InvalidInput { .. } => "invalid_input",
            ErrorKind::TenantNotFound { .. } => "tenant_not_found",
            ErrorKind::TenantExists { .. } => "tenant_exists",
            ErrorKind::ItemNotFound { .. } => "item_not_found",
            ErrorKind::ItemExists { .. } => "item_exists",
            ErrorKind::StaleEpoch { .. } => "stale_epoch",
            ErrorKind::IdempotencyConflict { .. } => "idempotency_conflict",
            ErrorKind::TooLarge { .. } => "too_large",
            ErrorKind::BudgetExceeded { .. } => "budget_exceeded",
            ErrorKind::RebuildNeedsContent { .. } => "rebuild_needs_content",
            ErrorKind::InvalidState { .. } => "invalid_state",
            ErrorKind::Corrupt { .. } => "corrupt",
            ErrorKind::SnapshotAuth { .. } => "snapshot_auth",
            ErrorKind::UnsupportedFormat { .. } => "unsupported_format",
            ErrorKind::TenantMismatch { .. } => "tenant_mismatch",
            ErrorKind::Io { .. } => "io",
            ErrorKind::Store { .. } => "store",
            ErrorKind::LogConflict { .. } => "log_conflict",
            ErrorKind::Unavailable { .. } => "unavailable",
            ErrorKind::EventsTrimmed { .. } => "events_trimmed",
        }
    }

    /// The replicated log did not answer (cluster mode; see
    /// [`ErrorKind::Unavailable`]).
    pub fn unavailable(detail: impl Into<String>) -> Error {
        Error::new(ErrorKind::Unavailable { detail: detail.into() })
    }

    /// Another node logged a command of `tenant` first, at `last` (see
    /// [`ErrorKind::LogConflict`]).
    pub fn log_conflict(tenant: &str, last: u64) -> Error {
        Error::new(ErrorKind::LogConflict { tenant: tenant.into(), last })
    }

    /// Something is over a size limit.
    pub fn too_large(limit: &'static str, max: usize, actual: usize) -> Error {
        Error::new(ErrorKind::TooLarge { limit, max: max as u64, actual: actual as u64 })
    }

    pub fn input(field: &'static str, reason: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidInput { field, reason: reason.into() })
    }

    pub(crate) fn config(key: impl Into<String>, reason: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidConfig { key: key.into(), reason: reason.into() })
    }

    pub fn corrupt(what: &'static str, detail: impl Into<String>) -> Error {
        Error::new(ErrorKind::Corrupt { what, detail: detail.into() })
    }

    pub(crate) fn state(what: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidState { what: what.into() })
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::new(ErrorKind::Io { context: context.into(), source: std::sync::Arc::new(source) })
    }

    /// The item store `backend` failed (for [`crate::Store`] implementations
    /// outside this crate).
    pub fn store(backend: &'static str, detail: impl fmt::Display) -> Error {
        Error::new(ErrorKind::Store { backend, detail: detail.to_string() })
    }

    pub(crate) fn tenant_not_found(tenant: &str) -> Error {
        Error::new(ErrorKind::TenantNotFound { tenant: tenant.to_string() })
    }

    pub(crate) fn item_not_found(item_id: &str) -> Error {
        Error::new(ErrorKind::ItemNotFound { item_id: item_id.to_string() })
    }
}

impl From<std::io::Error> for Error {
    /// An I/O error of a file write (the message names the file and step).
    fn from(e: std::io::Error) -> Error {
        Error::io("file", e)
    }
}

impl From<neardup_core::Error> for Error {
    fn from(e: neardup_core::Error) -> Error {
        match e.kind() {
            neardup_core::ErrorKind::InvalidConfig { key, reason } => Error::config(*key, reason),
            neardup_core::ErrorKind::LimitExceeded { limit, max, actual } => {
                Error::new(ErrorKind::TooLarge { limit, max: *max, actual: *actual })
            }
            _ => Error::config("index", e.to_string()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::InvalidConfig { key, reason } => write!(f, "invalid {key}: {reason}"),
            ErrorKind::InvalidInput { field, reason } => write!(f, "invalid {field}: {reason}"),
            ErrorKind::TenantNotFound { tenant } => write!(f, "tenant {tenant:?} not found"),
            ErrorKind::TenantExists { tenant } => write!(f, "tenant {tenant:?} already exists"),
            ErrorKind::ItemNotFound { item_id } => write!(f, "item {item_id:?} not found"),
            ErrorKind::ItemExists { item_id, epoch } => write!(
                f,
                "item {item_id:?} exists at epoch {epoch} with different content; \
                 send a higher epoch to replace it"
            ),
            ErrorKind::StaleEpoch { item_id, current, given } => {
                write!(f, "stale epoch {given} for item {item_id:?}: it is at epoch {current}")
            }
            ErrorKind::IdempotencyConflict { key } => {
                write!(f, "idempotency key {key:?} was already used for a different request")
            }
            ErrorKind::TooLarge { limit, max, actual } => {
                write!(f, "{limit} exceeded: needs {actual}, limit is {max}")
            }
            ErrorKind::BudgetExceeded { limit, max, actual } => {
                write!(f, "tenant {limit} budget exceeded: would hold {actual}, budget is {max}")
            }
            ErrorKind::RebuildNeedsContent { reason } => {
                write!(f, "rebuild needs the original content, which this tenant does not retain: {reason}")
            }
            ErrorKind::InvalidState { what } => write!(f, "invalid state: {what}"),
            ErrorKind::Corrupt { what, detail } => write!(f, "corrupt {what}: {detail}"),
            ErrorKind::SnapshotAuth { detail } => {
                write!(f, "snapshot authentication failed: {detail}")
            }
            ErrorKind::UnsupportedFormat { what, version } => {
                write!(f, "unsupported {what} format version {version}")
            }
            ErrorKind::TenantMismatch { expected, found } => {
                write!(f, "snapshot is for tenant {found:?}, not {expected:?}")
            }
            ErrorKind::Io { context, source } => write!(f, "{context}: {source}"),
            ErrorKind::Store { backend, detail } => write!(f, "{backend} store: {detail}"),
            ErrorKind::LogConflict { tenant, last } => write!(
                f,
                "another node wrote tenant {tenant:?} at log position {last} and this node has not applied it yet; retry"
            ),
            ErrorKind::Unavailable { detail } => write!(f, "unavailable: {detail}"),
            ErrorKind::EventsTrimmed { after, oldest_after } => write!(
                f,
                "the events after position {after} are no longer kept; the oldest position the feed resumes \
                 after is {oldest_after}"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
