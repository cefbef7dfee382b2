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
    /// Several upserts of one tenant as one entry of the replicated log,
    /// applied together (cluster mode's batches). They were planned against
    /// the same state and none bears on another's decision: distinct ids,
    /// no shared band or content hash, budgets that hold for all of them
    /// (see `Engine::upsert_batch`). Not recursive, so no input nests deep.
    Upserts {
        tenant: String,
        items: Vec<BatchedUpsert>,
    },
    /// An operator lifts the tombstone fence of an id that is not live, so
    /// it can be written again from any epoch.
    Unfence {
        tenant: String,
        item_id: String,
    },
}

/// One upsert of [`Command::Upserts`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BatchedUpsert {
    pub record: Box<ItemRecord>,
    pub idem: Option<Box<IdemEntry>>,
}

impl Command {
    pub(crate) fn tenant(&self) -> &str {
        match self {
            Command::CreateTenant { tenant, .. }
            | Command::Upsert { tenant, .. }
            | Command::Tombstone { tenant, .. }
            | Command::Label { tenant, .. }
            | Command::Rebuild { tenant, .. }
            | Command::Compact { tenant }
            | Command::Upserts { tenant, .. }
            | Command::Unfence { tenant, .. } => tenant,
        }
    }

    /// The command's log payload. Fails (and nothing is logged) rather than
    /// ever writing an empty record.
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        postcard::to_stdvec(self).map_err(|e| Error::state(format!("encoding a {} command: {e}", self.kind())))
    }

    fn kind(&self) -> &'static str {
        match self {
            Command::CreateTenant { .. } => "create-tenant",
            Command::Upsert { .. } => "upsert",
            Command::Tombstone { .. } => "tombstone",
            Command::Label { .. } => "label",
            Command::Rebuild { .. } => "rebuild",
            Command::Compact { .. } => "compact",
            Command::Upserts { .. } => "upserts",
            Command::Unfence { .. } => "unfence",
        }
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Command> {
        postcard::from_bytes(bytes).map_err(|e| Error::corrupt("log", e.to_string()))
    }

    /// The bytes a log holds for this command: [`Command::encode`], sealed
    /// under `key` when there is one (see `seal`).
    pub(crate) fn encode_for_log(&self, key: Option<&[u8; 32]>) -> Result<Vec<u8>> {
        let plain = self.encode()?;
        match key {
            Some(k) => crate::seal::seal(k, crate::seal::LOG, b"", &plain),
            None => Ok(plain),
        }
    }

    /// Decodes what [`Command::encode_for_log`] wrote (sealed or not).
    pub(crate) fn decode_from_log(bytes: &[u8], key: Option<&[u8; 32]>) -> Result<Command> {
        Command::decode(&crate::seal::open(key, "log record", b"", bytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frozen log (`tests/fixtures/seed-v1-log`, every command kind)
    /// decodes, and each command encodes back to exactly its logged bytes:
    /// a change to `Command`'s layout fails here before it reaches a disk.
    #[test]
    fn encoding_is_pinned_by_the_frozen_log() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seed-v1-log");
        let copy = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(&dir).unwrap().flatten() {
            std::fs::copy(f.path(), copy.path().join(f.file_name())).unwrap();
        }
        let mut kinds = std::collections::BTreeSet::new();
        let (last, repair) = crate::wal::replay(copy.path(), |_, payload| {
            let cmd = Command::decode(payload)?;
            assert_eq!(cmd.encode()?, payload, "{cmd:?}");
            kinds.insert(format!("{cmd:?}").split([' ', '{']).next().unwrap_or_default().to_string());
            Ok(())
        })
        .unwrap();
        assert!(repair.cuts.is_empty());
        assert_eq!(last, 8);
        let want = ["CreateTenant", "Label", "Rebuild", "Tombstone", "Upsert"];
        assert_eq!(kinds.into_iter().collect::<Vec<_>>(), want);
    }
}
