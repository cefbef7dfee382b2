//! Commands: what the command log records, one per accepted write.
//!
//! Each command carries everything needed to apply it without recomputing a
//! decision (an upsert carries its record and its decision), so replay is
//! deterministic by construction: the same log gives the same state and the
//! same snapshots, byte for byte. Tenant configuration travels as JSON so
//! that field names, not enum positions, reach the disk.

use serde::{Deserialize, Serialize};

use crate::decision::UpsertOutcome;
use crate::error::{Error, Result};
use crate::feedback::LabelEvent;
use crate::item::ItemRecord;

/// A remembered idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IdemEntry {
    pub key: String,
    pub digest: [u8; 16],
    pub outcome: UpsertOutcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Command {
    CreateTenant {
        tenant: String,
        config_json: String,
    },
    Upsert {
        tenant: String,
        record: Box<ItemRecord>,
        idem: Option<Box<IdemEntry>>,
    },
    Tombstone {
        tenant: String,
        item_id: String,
        epoch: u64,
    },
    Label {
        tenant: String,
        event: LabelEvent,
    },
    /// Recompute every record under `config_json`; `previous_json` is what a
    /// rollback returns to.
    Rebuild {
        tenant: String,
        config_json: String,
        previous_json: Option<String>,
    },
    /// Drop tombstoned records.
    Compact {
        tenant: String,
    },
}

impl Command {
    pub(crate) fn tenant(&self) -> &str {
        match self {
            Command::CreateTenant { tenant, .. }
            | Command::Upsert { tenant, .. }
            | Command::Tombstone { tenant, .. }
            | Command::Label { tenant, .. }
            | Command::Rebuild { tenant, .. }
            | Command::Compact { tenant } => tenant,
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).unwrap_or_default()
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Command> {
        postcard::from_bytes(bytes).map_err(|e| Error::corrupt("log", e.to_string()))
    }
}
