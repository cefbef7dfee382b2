//! The one error type of `neardup-core`.
//!
//! Every public fallible function returns [`Error`]. Its [`ErrorKind`] is
//! structured so callers (the CLI, the HTTP service) can map it to their own
//! codes without parsing messages.

use std::fmt;

/// An error from `neardup-core`: invalid configuration or input over a limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    kind: ErrorKind,
}

/// What went wrong. Marked non-exhaustive: new kinds may appear in minor versions.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A configuration value is out of its allowed range.
    InvalidConfig {
        /// Which key (e.g. `shingle_width`).
        key: &'static str,
        /// Why it was rejected, in words a user can act on.
        reason: String,
    },
    /// An input would exceed a resource limit; nothing was allocated for it.
    LimitExceeded {
        /// Which limit (e.g. `max_shingles`).
        limit: &'static str,
        /// The configured maximum.
        max: u64,
        /// The size the input needed (a lower bound when counting stopped early).
        actual: u64,
    },
    /// Two artefacts computed under different, incompatible parameters were
    /// combined (e.g. signatures of different lengths or seeds).
    Incompatible {
        /// What did not match.
        what: String,
    },
    /// A named version (normalizer, signature scheme, ...) is not known to this build.
    UnknownVersion {
        /// The family (`normalizer`, `signature`, ...).
        family: &'static str,
        /// The name that was given.
        name: String,
    },
}

impl Error {
    /// The structured kind of this error.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    pub(crate) fn config(key: &'static str, reason: impl Into<String>) -> Error {
        Error { kind: ErrorKind::InvalidConfig { key, reason: reason.into() } }
    }

    pub(crate) fn limit(limit: &'static str, max: u64, actual: u64) -> Error {
        Error { kind: ErrorKind::LimitExceeded { limit, max, actual } }
    }

    pub(crate) fn incompatible(what: impl Into<String>) -> Error {
        Error { kind: ErrorKind::Incompatible { what: what.into() } }
    }

    pub(crate) fn unknown_version(family: &'static str, name: impl Into<String>) -> Error {
        Error { kind: ErrorKind::UnknownVersion { family, name: name.into() } }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::InvalidConfig { key, reason } => write!(f, "invalid {key}: {reason}"),
            ErrorKind::LimitExceeded { limit, max, actual } => {
                write!(f, "{limit} exceeded: needs at least {actual}, limit is {max}")
            }
            ErrorKind::Incompatible { what } => write!(f, "incompatible parameters: {what}"),
            ErrorKind::UnknownVersion { family, name } => {
                write!(f, "unknown {family} version {name:?}")
            }
        }
    }
}

impl std::error::Error for Error {}

/// Shorthand used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
