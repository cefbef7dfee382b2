//! The one error type of `neardup-cluster`: what stops a node from
//! joining or serving a cluster (a bad option, NATS out of reach, a data
//! directory of another cluster, a snapshot set that cannot be written).
//!
//! [`ErrorKind`] is structured and every kind has a stable
//! [`ClusterError::code`], so callers branch on kinds, not on messages.
//! Errors while serving requests are the engine's own
//! ([`neardup_index::Error`]); this type is for start-up and the
//! snapshot sets.

use std::fmt;
use std::path::PathBuf;

/// An error of cluster mode (see [`ErrorKind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterError {
    kind: ErrorKind,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An option is invalid, or does not fit the call.
    InvalidOption {
        /// Which option (`--cluster`, `--node-id`, `--partitions`, ...).
        option: &'static str,
        /// The whole message, naming the option and what to use.
        reason: String,
    },
    /// Connecting to the NATS servers failed.
    Connect {
        /// The client's error.
        detail: String,
    },
    /// A JetStream stream or bucket could not be created, read or written.
    JetStream {
        /// What was being done (`creating the JetStream stream NEARDUP_LOG`).
        what: String,
        /// The client's error.
        detail: String,
    },
    /// The node's data directory could not be read or written.
    DataDir {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        detail: String,
    },
    /// Stored bytes are not what this node reads (the data directory's
    /// layout file, a snapshot manifest, a downloaded snapshot).
    Corrupt {
        /// Which artefact (`the snapshot of t`).
        what: String,
        /// What is wrong with it (`is damaged`).
        problem: String,
    },
    /// Bytes could not be encoded or decoded (a node entry, an object's
    /// metadata, a snapshot manifest).
    Encoding {
        /// Which bytes.
        what: String,
        /// The decoder's error.
        detail: String,
    },
    /// The data directory belongs to a cluster of another partition count.
    DataDirPartitions {
        /// The data directory.
        dir: PathBuf,
        /// The count it recorded.
        recorded: u64,
        /// The count this node is started with.
        count: u32,
    },
    /// A live node of the cluster runs with another partition count.
    NodePartitions {
        /// That node's id.
        node: String,
        /// Its count.
        theirs: u32,
        /// This node's.
        ours: u32,
    },
    /// The stream no longer holds commands this node needs (it was
    /// trimmed past the node's checkpoints).
    Trimmed {
        /// The stream.
        stream: String,
        /// Its first position.
        first: u64,
        /// Where this node's checkpoints end.
        checkpoint: u64,
    },
    /// Opening the replica engine failed.
    Engine {
        /// The engine's (or its thread's) error.
        detail: String,
    },
    /// Writing, reading or installing a snapshot set failed.
    Snapshot {
        /// What was being done (`uploading a snapshot`).
        what: String,
        /// The underlying error.
        detail: String,
    },
}

impl ClusterError {
    pub(crate) fn new(kind: ErrorKind) -> ClusterError {
        ClusterError { kind }
    }

    /// The structured kind.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// A stable, snake_case code per kind, for logs and metrics.
    pub fn code(&self) -> &'static str {
        match &self.kind {
            ErrorKind::InvalidOption { .. } => "invalid_option",
            ErrorKind::Connect { .. } => "connect",
            ErrorKind::JetStream { .. } => "jetstream",
            ErrorKind::DataDir { .. } => "data_dir",
            ErrorKind::Corrupt { .. } => "corrupt",
            ErrorKind::Encoding { .. } => "encoding",
            ErrorKind::DataDirPartitions { .. } => "data_dir_partitions",
            ErrorKind::NodePartitions { .. } => "node_partitions",
            ErrorKind::Trimmed { .. } => "trimmed",
            ErrorKind::Engine { .. } => "engine",
            ErrorKind::Snapshot { .. } => "snapshot",
        }
    }

    pub(crate) fn option(option: &'static str, reason: impl Into<String>) -> ClusterError {
        ClusterError::new(ErrorKind::InvalidOption { option, reason: reason.into() })
    }

    pub(crate) fn connect(detail: impl fmt::Display) -> ClusterError {
        ClusterError::new(ErrorKind::Connect { detail: detail.to_string() })
    }

    pub(crate) fn jetstream(what: impl Into<String>, detail: impl fmt::Display) -> ClusterError {
        ClusterError::new(ErrorKind::JetStream { what: what.into(), detail: detail.to_string() })
    }

    pub(crate) fn data_dir(path: impl Into<PathBuf>, detail: impl fmt::Display) -> ClusterError {
        ClusterError::new(ErrorKind::DataDir { path: path.into(), detail: detail.to_string() })
    }

    pub(crate) fn corrupt(what: impl Into<String>, problem: impl Into<String>) -> ClusterError {
        ClusterError::new(ErrorKind::Corrupt { what: what.into(), problem: problem.into() })
    }

    pub(crate) fn encoding(what: impl Into<String>, detail: impl fmt::Display) -> ClusterError {
        ClusterError::new(ErrorKind::Encoding { what: what.into(), detail: detail.to_string() })
    }

    pub(crate) fn engine(detail: impl fmt::Display) -> ClusterError {
        ClusterError::new(ErrorKind::Engine { detail: detail.to_string() })
    }

    pub(crate) fn snapshot(what: impl Into<String>, detail: impl fmt::Display) -> ClusterError {
        ClusterError::new(ErrorKind::Snapshot { what: what.into(), detail: detail.to_string() })
    }
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::InvalidOption { reason, .. } => f.write_str(reason),
            ErrorKind::Connect { detail } => write!(f, "connecting to NATS: {detail}"),
            ErrorKind::JetStream { what, detail }
            | ErrorKind::Encoding { what, detail }
            | ErrorKind::Snapshot { what, detail } => write!(f, "{what}: {detail}"),
            ErrorKind::DataDir { path, detail } => write!(f, "{}: {detail}", path.display()),
            ErrorKind::Corrupt { what, problem } => write!(f, "{what} {problem}"),
            ErrorKind::DataDirPartitions { dir, recorded, count } => write!(
                f,
                "{} holds a node of a cluster with {recorded} partition(s), and this node is started with \
                 --partitions {count}: use the same count, or an empty data directory",
                dir.display()
            ),
            ErrorKind::NodePartitions { node, theirs, ours } => write!(
                f,
                "node {node} runs with --partitions {theirs} and this node with {ours}: every node of a cluster \
                 needs the same count"
            ),
            ErrorKind::Trimmed { stream, first, checkpoint } => write!(
                f,
                "the stream {stream} starts at {first} but this node's checkpoints end at {checkpoint}: the \
                 commands between are gone; start this node with an empty data directory"
            ),
            ErrorKind::Engine { detail } => write!(f, "opening the engine: {detail}"),
        }
    }
}

impl std::error::Error for ClusterError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_before() {
        let e = ClusterError::new(ErrorKind::DataDirPartitions { dir: "/d".into(), recorded: 2, count: 3 });
        assert_eq!(
            e.to_string(),
            "/d holds a node of a cluster with 2 partition(s), and this node is started with --partitions 3: use \
             the same count, or an empty data directory"
        );
        let e = ClusterError::new(ErrorKind::NodePartitions { node: "n1".into(), theirs: 2, ours: 3 });
        assert_eq!(
            e.to_string(),
            "node n1 runs with --partitions 2 and this node with 3: every node of a cluster needs the same count"
        );
        let e = ClusterError::new(ErrorKind::Trimmed { stream: "S".into(), first: 9, checkpoint: 4 });
        assert_eq!(
            e.to_string(),
            "the stream S starts at 9 but this node's checkpoints end at 4: the commands between are gone; start \
             this node with an empty data directory"
        );
        assert_eq!(ClusterError::connect("refused").to_string(), "connecting to NATS: refused");
        assert_eq!(ClusterError::data_dir("/d/f", "denied").to_string(), "/d/f: denied");
        assert_eq!(ClusterError::corrupt("/d/f", "is damaged").to_string(), "/d/f is damaged");
        assert_eq!(ClusterError::engine("locked").to_string(), "opening the engine: locked");
        assert_eq!(ClusterError::snapshot("listing tenants", "x").code(), "snapshot");
        assert_eq!(ClusterError::option("--node-id", "--node-id \"\": use").to_string(), "--node-id \"\": use");
    }
}
