//! # neardup-index
//!
//! The durable, multi-tenant near-duplicate index under the neardup service:
//! tenants with their own parameters, policy, limits and band postings; a
//! checksummed command log written before every acknowledgement; item
//! records behind a [`Store`] trait (RAM or fjall); versioned, optionally
//! encrypted snapshots; tombstones with epochs, compaction, rebuild, a
//! shadow index with promotion and rollback; reviewer feedback as immutable
//! events.
//!
//! ```
//! use neardup_core::Config;
//! use neardup_index::{DecisionState, Engine, EngineOptions, Item, TenantConfig};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let engine = Engine::open(dir.path(), EngineOptions::default())?;
//! // The seed's service example: word bigrams, 32 values in 8 bands, seed 19.
//! engine.create_tenant("acme", TenantConfig::new(Config::seed_example()))?;
//!
//! engine.upsert("acme", Item::text("A", "red fox runs very fast"))?;
//! let b = engine.upsert("acme", Item::text("B", "red fox runs very fast today"))?;
//! let closest = b.decision.closest().unwrap();
//! assert_eq!((closest.item_id.as_str(), closest.score), ("A", 0.8)); // 4/5 bigrams
//! assert_eq!(b.decision.state, DecisionState::NearDuplicate);
//!
//! let c = engine.decide("acme", "database backup completed nightly")?;
//! assert_eq!(c.state, DecisionState::Distinct);
//! # Ok::<(), neardup_index::Error>(())
//! ```
//!
//! Layers, lowest first: [`wal`](crate::FsyncPolicy) and `store` →
//! `tenant` (core's candidate index, decisions, upsert plans, command
//! application) and `shadow` → `snapshot` → [`Engine`]. The byte formats of
//! the log, snapshots and store are in `docs/index-format.md`.

mod command;
mod decision;
mod engine;
mod error;
mod event;
#[cfg(any(test, feature = "fault-injection"))]
mod fault;
mod feedback;
mod item;
mod seal;
mod shadow;
mod snapshot;
mod store;
mod tenant;
mod tenant_config;
mod wal;

pub use decision::{
    Decision, DecisionState, MatchVerdict, PolicyRef, ScoredCandidate, UpsertOutcome, UpsertStatus, Verification,
};
pub use engine::{
    seed_replica, Answer, CheckpointReport, Comparison, Edge, Engine, EngineOptions, Estimate, LabelEvaluation, Lead,
    Member, Neighbourhood, Proposer, Query, QueuedItem, RecoveryReport, ReplicatedEntry, ReviewQueue, Side, Spawn,
    StoreKind, TenantStats, TextRun, MAX_EVALUATED_PAIRS, MAX_NEIGHBOURHOOD,
};
pub use error::{Error, ErrorKind, Result};
pub use event::{EventPage, EVENT_SCHEMA_VERSION, RING_EVENTS};
#[cfg(any(test, feature = "fault-injection"))]
pub use fault::Gate;
pub use feedback::{Label, LabelEvent, NewLabel};
pub use item::{FeaturesAt, Item, ItemInfo, ItemRecord};
pub use shadow::{is_destructive, ShadowReport};
pub use snapshot::{SnapshotHeader, SNAPSHOT_VERSION};
#[cfg(any(test, feature = "fault-injection"))]
pub use store::{Faults, FaultyStore};
pub use store::{FjallStore, MemStore, Store, StoreBatch, StoreView};
pub use tenant::TenantCounters;
pub use tenant_config::{PolicyConfig, TenantConfig, TenantLimits, MAX_EPOCH, MAX_ITEM_ID, MAX_TENANT_ID};
pub use wal::{FsyncPolicy, LogRepair, MAX_RECORD};
