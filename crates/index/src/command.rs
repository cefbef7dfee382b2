//! Commands: what the command log records, one per accepted write.
//!
//! Each command carries everything needed to apply it without recomputing a
//! decision (an upsert carries its record and its decision), so replay is
//! deterministic by construction: the same log gives the same state and the
//! same snapshots, byte for byte. Tenant configuration travels as JSON so
//! that field names, not enum positions, reach the disk.

use serde::{Deserialize, Serialize};

use crate::decision::ItemNote;
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
    /// How the log holds an [`Command::Upsert`] whose record keeps its
    /// content: without the record's features — 8 bytes a shingle of hash,
    /// more than the text itself — which are what the tenant's
    /// fingerprinter makes of the content, as the store already leaves
    /// them out. Never applied as such: [`Command::decode`] turns it back
    /// into an `Upsert` whose record's features are
    /// [`FeaturesAt::Elided`](crate::item::FeaturesAt). A build from before
    /// it refuses the record (an unknown variant) instead of reading a
    /// record without features.
    UpsertLean {
        tenant: String,
        record: Box<ItemRecord>,
        idem: Option<Box<IdemEntry>>,
    },
    /// [`Command::Upserts`] as the log holds it when any of its records
    /// keeps its content (see [`Command::UpsertLean`]).
    UpsertsLean {
        tenant: String,
        items: Vec<BatchedUpsert>,
    },
    /// How the log holds an [`Command::Upsert`] whose record carries its
    /// plan's [`ItemNote`] (what the event feed says of the decision; see
    /// `crate::event`): on this node's own log with its features left out
    /// where [`Command::UpsertLean`] would leave them out; on a cluster's
    /// replicated log, full, and only when the operator asks (see
    /// [`Command::encode_for_log`]). Never applied as such:
    /// [`Command::decode`] turns it back into an `Upsert` whose record
    /// carries the note. A build from before it refuses the entry (an
    /// unknown variant) on its own log, and skips it on a replicated one.
    UpsertNoted {
        tenant: String,
        record: Box<ItemRecord>,
        idem: Option<Box<IdemEntry>>,
        note: Box<ItemNote>,
    },
    /// [`Command::Upserts`] with its records' notes, in order (see
    /// [`Command::UpsertNoted`]).
    UpsertsNoted {
        tenant: String,
        items: Vec<BatchedUpsert>,
        notes: Vec<Option<ItemNote>>,
    },
}

/// Postcard variant indices of the lean and noted forms (one-byte varints).
const UPSERT_LEAN: u8 = 8;
const UPSERTS_LEAN: u8 = 9;
const UPSERT_NOTED: u8 = 10;
const UPSERTS_NOTED: u8 = 11;

/// A record the log may hold without its features: it keeps its content
/// and its signature (from which the index takes its band keys), and its
/// features are the ones the content makes.
fn leanable(r: &ItemRecord) -> bool {
    r.content.is_some() && !r.features.is_empty() && !r.signature.is_empty()
}

/// After decoding a lean form: the records it left without features.
fn mark_elided(r: &mut ItemRecord) {
    if r.content.is_some() && r.features.is_empty() && !r.signature.is_empty() {
        r.features_at = crate::item::FeaturesAt::Elided;
    }
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
            | Command::Unfence { tenant, .. }
            | Command::UpsertLean { tenant, .. }
            | Command::UpsertsLean { tenant, .. }
            | Command::UpsertNoted { tenant, .. }
            | Command::UpsertsNoted { tenant, .. } => tenant,
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
            Command::UpsertLean { .. } => "upsert (lean)",
            Command::UpsertsLean { .. } => "upserts (lean)",
            Command::UpsertNoted { .. } => "upsert (noted)",
            Command::UpsertsNoted { .. } => "upserts (noted)",
        }
    }

    /// Decodes a payload; the lean forms come back as the commands they
    /// hold, their records' features marked elided.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Command> {
        let cmd = postcard::from_bytes(bytes).map_err(|e| Error::corrupt("log", e.to_string()))?;
        Ok(match cmd {
            Command::UpsertLean { tenant, mut record, idem } => {
                mark_elided(&mut record);
                Command::Upsert { tenant, record, idem }
            }
            Command::UpsertsLean { tenant, mut items } => {
                items.iter_mut().for_each(|u| mark_elided(&mut u.record));
                Command::Upserts { tenant, items }
            }
            Command::UpsertNoted { tenant, mut record, idem, note } => {
                mark_elided(&mut record);
                record.note = Some(note);
                Command::Upsert { tenant, record, idem }
            }
            Command::UpsertsNoted { tenant, mut items, notes } => {
                if notes.len() != items.len() {
                    return Err(Error::corrupt(
                        "log",
                        format!("{} notes for {} upserts of one entry", notes.len(), items.len()),
                    ));
                }
                for (u, note) in items.iter_mut().zip(notes) {
                    mark_elided(&mut u.record);
                    u.record.note = note.map(Box::new);
                }
                Command::Upserts { tenant, items }
            }
            cmd => cmd,
        })
    }

    /// The payload the log holds: [`Command::encode`], except that upserts
    /// whose records keep their content take their lean forms (see
    /// [`Command::UpsertLean`]). The command is left as it was.
    pub(crate) fn encode_lean(&mut self) -> Result<Vec<u8>> {
        match self {
            Command::Upsert { tenant, record, idem } if leanable(record) => {
                let features = std::mem::take(&mut record.features);
                let out = encode_variant(UPSERT_LEAN, &(&*tenant, &**record, &*idem));
                record.features = features;
                out
            }
            Command::Upserts { tenant, items } if items.iter().any(|u| leanable(&u.record)) => {
                let taken: Vec<Vec<u64>> = items
                    .iter_mut()
                    .map(|u| if leanable(&u.record) { std::mem::take(&mut u.record.features) } else { Vec::new() })
                    .collect();
                let out = encode_variant(UPSERTS_LEAN, &(&*tenant, &*items));
                for (u, features) in items.iter_mut().zip(taken) {
                    if !features.is_empty() {
                        u.record.features = features;
                    }
                }
                out
            }
            _ => self.encode(),
        }
    }

    /// The bytes a log holds for this command, sealed under `key` when
    /// there is one (see `seal`): with `noted`, the noted form of an
    /// upsert whose records carry notes; otherwise [`Command::encode_lean`]
    /// when `lean` (both logs: every release reads the lean forms, v0.1.0
    /// included), [`Command::encode`] when not.
    pub(crate) fn encode_for_log(&mut self, key: Option<&[u8; 32]>, lean: bool, noted: bool) -> Result<Vec<u8>> {
        // A cluster's replicated log keeps the forms an older build reads
        // unless the operator says every node reads the noted ones: a node
        // that cannot decode an entry skips it, so a form it does not know
        // would leave it without the write during a rolling upgrade.
        let noted = if noted { self.encode_noted(lean)? } else { None };
        let plain = match noted {
            Some(noted) => noted,
            None if lean => self.encode_lean()?,
            None => self.encode()?,
        };
        match key {
            Some(k) => crate::seal::seal(k, crate::seal::LOG, b"", &plain),
            None => Ok(plain),
        }
    }

    /// The noted form of an upsert whose records carry notes (see
    /// [`Command::UpsertNoted`]), lean when `lean`; `None` for any other
    /// command. The command is left as it was.
    fn encode_noted(&mut self, lean: bool) -> Result<Option<Vec<u8>>> {
        let take = |r: &mut ItemRecord| {
            if lean && leanable(r) {
                std::mem::take(&mut r.features)
            } else {
                Vec::new()
            }
        };
        let out = match self {
            Command::Upsert { tenant, record, idem } if record.note.is_some() => {
                let features = take(record);
                let out = match record.note.as_deref() {
                    Some(note) => encode_variant(UPSERT_NOTED, &(&*tenant, &**record, &*idem, note)),
                    None => Err(Error::state("a noted upsert without its note")),
                };
                if !features.is_empty() {
                    record.features = features;
                }
                out
            }
            Command::Upserts { tenant, items } if items.iter().any(|u| u.record.note.is_some()) => {
                let taken: Vec<Vec<u64>> = items.iter_mut().map(|u| take(&mut u.record)).collect();
                let notes: Vec<Option<&ItemNote>> = items.iter().map(|u| u.record.note.as_deref()).collect();
                let out = encode_variant(UPSERTS_NOTED, &(&*tenant, &*items, &notes));
                for (u, features) in items.iter_mut().zip(taken) {
                    if !features.is_empty() {
                        u.record.features = features;
                    }
                }
                out
            }
            _ => return Ok(None),
        };
        out.map(Some)
    }

    /// Decodes what [`Command::encode_for_log`] wrote (sealed or not).
    pub(crate) fn decode_from_log(bytes: &[u8], key: Option<&[u8; 32]>) -> Result<Command> {
        Command::decode(&crate::seal::open(key, "log record", b"", bytes)?)
    }
}

/// A variant's fields encoded after its index: postcard writes an enum
/// variant as its index (a varint; one byte below 128) followed by its
/// fields in order, as it writes a tuple of them.
fn encode_variant<T: Serialize>(variant: u8, fields: &T) -> Result<Vec<u8>> {
    postcard::to_extend(fields, vec![variant]).map_err(|e| Error::state(format!("encoding a lean upsert: {e}")))
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

    /// Upserts whose records carry their plan's note take the noted forms,
    /// lean or full, and decode to the same commands with the notes back
    /// on their records (the note once went out with an option tag that
    /// the variant does not have, and nothing decoded).
    #[test]
    fn noted_forms_give_back_their_notes_lean_or_full() {
        use crate::decision::{Closest, ItemNote};
        use crate::decision::{MatchVerdict, UpsertStatus};
        use crate::store::tests::record;
        let noted = |id: &str, lsn: u64, closest: bool| {
            let mut r = record(id, lsn);
            r.note = Some(Box::new(ItemNote {
                status: UpsertStatus::Replaced,
                closest: closest.then(|| Closest {
                    item_id: "z".into(),
                    score: 0.8,
                    verdict: MatchVerdict::Similar,
                    same_content: false,
                }),
                policy_id: "default".into(),
                policy_version: 3,
                method_version: "f1/seed-v1".into(),
            }));
            Box::new(r)
        };
        let cases = [
            Command::Upsert { tenant: "t".into(), record: noted("a", 1, true), idem: None },
            Command::Upserts {
                tenant: "t".into(),
                items: vec![
                    BatchedUpsert { record: noted("a", 1, false), idem: None },
                    BatchedUpsert { record: Box::new(record("b", 2)), idem: None },
                ],
            },
        ];
        for (i, cmd) in cases.into_iter().enumerate() {
            // The replicated log's payload leaves the notes out unless asked.
            let plain = cmd.clone().encode_for_log(None, false, false).unwrap();
            assert_eq!(plain, cmd.encode().unwrap(), "case {i}");
            for lean in [true, false] {
                let mut logged = cmd.clone();
                let payload = match lean {
                    true => logged.encode_for_log(None, true, true).unwrap(),
                    // A cluster's replicated log, the notes asked for.
                    false => logged.encode_for_log(None, false, true).unwrap(),
                };
                assert_eq!(logged, cmd, "case {i}: encoding changed the command");
                assert!(payload[0] >= UPSERT_NOTED, "case {i}: not a noted form");
                let mut back = Command::decode(&payload).unwrap();
                if lean {
                    // The lean form left out the features the content makes.
                    let restore = |got: &mut ItemRecord, was: &ItemRecord| {
                        assert_eq!(got.features_at, crate::item::FeaturesAt::Elided, "case {i}");
                        got.features = was.features.clone();
                        got.features_at = crate::item::FeaturesAt::Here;
                    };
                    match (&mut back, &cmd) {
                        (Command::Upsert { record: got, .. }, Command::Upsert { record: was, .. }) => restore(got, was),
                        (Command::Upserts { items: got, .. }, Command::Upserts { items: was, .. }) => {
                            for (g, w) in got.iter_mut().zip(was) {
                                restore(&mut g.record, &w.record);
                            }
                        }
                        other => panic!("case {i}: {other:?}"),
                    }
                }
                assert_eq!(back, cmd, "case {i}, lean {lean}");
            }
        }
    }

    /// The noted forms' bytes are frozen (`tests/fixtures/noted-upserts.bin`:
    /// an `UpsertNoted` and an `UpsertsNoted`, lean, each a `u32` LE length
    /// and the payload): they decode to the commands that wrote them, and
    /// encode back to exactly the same bytes. `NEARDUP_WRITE_FIXTURES=1`
    /// writes the file again — only with a new format version.
    #[test]
    fn noted_forms_are_pinned_by_a_frozen_payload() {
        use crate::decision::{Closest, ItemNote};
        use crate::decision::{MatchVerdict, UpsertStatus};
        use crate::store::tests::record;
        let note = |closest: bool| ItemNote {
            status: if closest { UpsertStatus::Replaced } else { UpsertStatus::Inserted },
            closest: closest.then(|| Closest {
                item_id: "A".into(),
                score: 0.8,
                verdict: MatchVerdict::Similar,
                same_content: false,
            }),
            policy_id: "default".into(),
            policy_version: 1,
            method_version: "f1/seed-v1/word2/xxh3-64/oph-dens-v1x128/seed6e65617264757031/lsh19x4".into(),
        };
        let noted = |id: &str, lsn: u64, closest: bool| {
            let mut r = record(id, lsn);
            r.note = Some(Box::new(note(closest)));
            Box::new(r)
        };
        let cmds = [
            Command::Upsert { tenant: "t".into(), record: noted("B", 3, true), idem: None },
            Command::Upserts {
                tenant: "t".into(),
                items: vec![
                    BatchedUpsert { record: noted("C", 4, false), idem: None },
                    BatchedUpsert { record: noted("D", 4, false), idem: None },
                ],
            },
        ];
        let mut bytes = Vec::new();
        for cmd in &cmds {
            let payload = cmd.clone().encode_for_log(None, true, true).unwrap();
            bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&payload);
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/noted-upserts.bin");
        if std::env::var_os("NEARDUP_WRITE_FIXTURES").is_some() {
            std::fs::write(&path, &bytes).unwrap();
        }
        let frozen = std::fs::read(&path).expect("fixture present");
        assert_eq!(frozen, bytes, "the noted forms' encoding changed");
        let mut rest = &frozen[..];
        for (i, cmd) in cmds.iter().enumerate() {
            let n = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
            let back = Command::decode(&rest[4..4 + n]).unwrap();
            rest = &rest[4 + n..];
            let notes = |c: &Command| -> Vec<Option<ItemNote>> {
                match c {
                    Command::Upsert { record, .. } => vec![record.note.as_deref().cloned()],
                    Command::Upserts { items, .. } => items.iter().map(|u| u.record.note.as_deref().cloned()).collect(),
                    other => panic!("case {i}: {other:?}"),
                }
            };
            assert_eq!(notes(&back), notes(cmd), "case {i}");
        }
        assert!(rest.is_empty());
    }

    /// The log holds an upsert whose record keeps its content without its
    /// features, and gives the same command back with them marked elided;
    /// records without content keep theirs. The command encoded is left as
    /// it was, and the old form still decodes with its features.
    #[test]
    fn lean_forms_leave_out_derivable_features_and_only_those() {
        use crate::item::FeaturesAt;
        use crate::store::tests::record;
        let mut bare = record("b", 2);
        bare.content = None;
        let cases = [
            Command::Upsert { tenant: "t".into(), record: Box::new(record("a", 1)), idem: None },
            Command::Upserts {
                tenant: "t".into(),
                items: vec![
                    BatchedUpsert { record: Box::new(record("a", 1)), idem: None },
                    BatchedUpsert { record: Box::new(bare.clone()), idem: None },
                ],
            },
            Command::Upsert { tenant: "t".into(), record: Box::new(bare), idem: None },
        ];
        for (i, cmd) in cases.into_iter().enumerate() {
            let mut logged = cmd.clone();
            let payload = logged.encode_for_log(None, true, true).unwrap();
            assert_eq!(logged, cmd, "encoding changed the command");
            let full = cmd.encode().unwrap();
            assert_eq!(Command::decode(&full).unwrap(), cmd, "the full form still decodes");
            let back = Command::decode(&payload).unwrap();
            let records = |c: &Command| -> Vec<ItemRecord> {
                match c {
                    Command::Upsert { record, .. } => vec![(**record).clone()],
                    Command::Upserts { items, .. } => items.iter().map(|u| (*u.record).clone()).collect(),
                    _ => panic!("case {i}: {c:?}"),
                }
            };
            for (was, got) in records(&cmd).into_iter().zip(records(&back)) {
                if was.content.is_some() {
                    assert!(payload.len() < full.len(), "case {i}: nothing left out");
                    assert!(got.features.is_empty(), "case {i}");
                    assert_eq!(got.features_at, FeaturesAt::Elided, "case {i}");
                    let mut restored = got.clone();
                    restored.features = was.features.clone();
                    restored.features_at = FeaturesAt::Here;
                    assert_eq!(restored, was, "case {i}: only the features differ");
                } else {
                    assert_eq!(got, was, "case {i}: a record without content keeps its features");
                }
            }
        }
    }
}
