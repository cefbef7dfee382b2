//! neardup's cluster mode: the engine's command log as a NATS JetStream
//! stream, every service node a replica that applies it.
//!
//! We do not build consensus: JetStream's RAFT-replicated stream orders and
//! stores the commands (R = 3 on a three-server cluster), and the engine is
//! already a deterministic state machine over its commands. A write is
//! planned by the node that takes the request, proposed to the stream with
//! the tenant's last position as JetStream's *expected last subject
//! sequence* (each tenant has its own subject), and acknowledged once a
//! quorum stored it and the node applied it. Another node's command of the
//! same tenant in between makes the proposal fail, and the engine plans
//! again once it has applied that command: two nodes racing on one item
//! give exactly one winner, and the loser the answer it would get on one
//! node. Every node consumes the stream in order and applies each command
//! with the same code as single-node replay (`Engine::apply_replicated`),
//! so replicas reach the same state at the same position.
//!
//! Tenants may be spread over [`partition`]s: each is its own stream,
//! snapshot bucket and engine, and a node replicates the partitions it is
//! configured for ([`Cluster`]); the [`registry`] tells which node serves
//! which, for redirects. One partition (the default) makes every node a
//! full replica.
//!
//! See `docs/cluster.md` for running it and what each failure does.
//!
//! The `test-kit` feature adds `testkit`, a NATS JetStream cluster of
//! `nats-server` child processes for tests and benchmarks; only the
//! crates' dev-dependencies enable it.

mod cluster;
mod error;
pub mod keys;
mod kv;
mod nats;
mod node;
mod options;
pub mod partition;
mod proposer;
pub mod registry;
pub mod secret;
pub mod snapshots;
mod stream;
#[cfg(feature = "test-kit")]
pub mod testkit;

pub use cluster::Cluster;
pub use error::{ClusterError, ErrorKind};
pub use node::Node;
pub use options::{ClusterOptions, NatsAuth, DEFAULT_SNAPSHOT_INTERVAL};
pub use partition::{tenant_subject, STREAM, SUBJECT_PREFIX};
pub use stream::ApplierState;
