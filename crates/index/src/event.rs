//! The event feed: what each command of the log did to its tenant, as
//! JSON lines an integrator can follow (`GET /v1/tenants/{t}/events`).
//!
//! An event is a pure function of a log entry and its position
//! ([`events_of`]): the entry alone says what happened, so replaying the
//! log gives the same events, byte for byte, and every node of a cluster
//! derives the same events at the same positions. What an upsert decided
//! beyond its state (the closest verified match and its score, the policy
//! and fingerprint versions it was judged under, inserted or replaced) is
//! not part of the record the store keeps, so the log's entry carries it
//! as an [`ItemNote`](crate::decision::ItemNote) (`Command::UpsertNoted`) — in this node's own log.
//! A cluster's replicated log keeps the forms older builds read (a node
//! that cannot decode an entry skips it), so there an upsert's event is
//! `item_upserted`, with its state but not its match, unless the operator
//! turns the noted forms on once every node reads them
//! (`EngineOptions::replicated_notes`, `--cluster-event-decisions`).
//!
//! Each tenant keeps its recent events in an [`EventRing`], filled where
//! commands are applied — live writes, a restart's replay of the log
//! (entries its snapshot covers included), a cluster node's applier — and
//! trimmed where the log is trimmed, so the feed reaches back as far as the
//! log does, at most [`RING_EVENTS`] events. Positions before that are
//! gone: a reader asking for them gets [`ErrorKind::EventsTrimmed`] with
//! the oldest position it can resume from.
//!
//! | field     | meaning                                                     |
//! |-----------|-------------------------------------------------------------|
//! | `v`       | event schema version (1; `schemas/events/v1/`)              |
//! | `lsn`     | log position of the entry                                   |
//! | `i`, `n`  | the event's index among the entry's `n` events (a batch)    |
//! | `tenant`  | the tenant                                                  |
//! | `type`    | `item_inserted`, `item_replaced`, `item_upserted` (no note: a log from before the feed, a cluster's), `item_tombstoned`, `label_added`, `rebuilt`, `rolled_back` |
//!
//! Writes that change nothing (`unchanged`, a replayed idempotency key) are
//! not logged and have no event; neither have compaction and unfencing,
//! which change no item's visible state.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::Serialize;

use crate::command::Command;
use crate::decision::{DecisionState, MatchVerdict, UpsertStatus};
use crate::error::{Error, ErrorKind, Result};
use crate::feedback::Label;
use crate::item::ItemRecord;
use crate::tenant_config::TenantConfig;

/// The events a tenant keeps in memory at most; older ones are trimmed a
/// whole entry at a time.
pub const RING_EVENTS: usize = 16_384;

/// The event schema version every line carries as `v`.
pub const EVENT_SCHEMA_VERSION: u32 = 1;

/// One line of the feed (see the module doc for the envelope).
#[derive(Serialize)]
struct Line<'a> {
    v: u32,
    lsn: u64,
    i: usize,
    n: usize,
    tenant: &'a str,
    #[serde(flatten)]
    body: &'a Body<'a>,
}

#[derive(Serialize)]
struct ClosestView<'a> {
    item_id: &'a str,
    score: f64,
    verdict: MatchVerdict,
    same_content: bool,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Body<'a> {
    ItemInserted(Decided<'a>),
    ItemReplaced(Decided<'a>),
    /// An upsert logged without a note (by a build before the feed, or on
    /// a cluster's replicated log).
    ItemUpserted {
        item_id: &'a str,
        epoch: u64,
        state: DecisionState,
        content_hash: String,
        content_bytes: u64,
    },
    ItemTombstoned {
        item_id: &'a str,
        epoch: u64,
    },
    LabelAdded {
        seq: u64,
        left: &'a str,
        right: &'a str,
        label: Label,
        actor: &'a str,
        rationale: &'a str,
        policy_id: &'a str,
        policy_version: u32,
        method_version: &'a str,
        recorded_at_ms: u64,
    },
    Rebuilt(Versions),
    RolledBack(Versions),
}

#[derive(Serialize)]
struct Decided<'a> {
    item_id: &'a str,
    epoch: u64,
    state: DecisionState,
    closest: Option<ClosestView<'a>>,
    policy_id: &'a str,
    policy_version: u32,
    method_version: &'a str,
    content_hash: String,
    content_bytes: u64,
}

/// The versions a rebuild or rollback put in force.
#[derive(Serialize)]
struct Versions {
    policy_id: String,
    policy_version: u32,
    method_version: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn upserted(r: &ItemRecord) -> Body<'_> {
    let Some(note) = &r.note else {
        return Body::ItemUpserted {
            item_id: &r.item_id,
            epoch: r.epoch,
            state: r.decision,
            content_hash: hex(&r.content_hash),
            content_bytes: r.content_bytes,
        };
    };
    let d = Decided {
        item_id: &r.item_id,
        epoch: r.epoch,
        state: r.decision,
        closest: note.closest.as_ref().map(|c| ClosestView {
            item_id: &c.item_id,
            score: c.score,
            verdict: c.verdict,
            same_content: c.same_content,
        }),
        policy_id: &note.policy_id,
        policy_version: note.policy_version,
        method_version: &note.method_version,
        content_hash: hex(&r.content_hash),
        content_bytes: r.content_bytes,
    };
    match note.status {
        UpsertStatus::Replaced => Body::ItemReplaced(d),
        _ => Body::ItemInserted(d),
    }
}

fn versions(config_json: &str) -> Option<Versions> {
    let (params, policy) = TenantConfig::from_json(config_json).ok()?.resolve().ok()?;
    Some(Versions {
        policy_id: policy.id,
        policy_version: policy.version,
        method_version: params.fingerprint_version(),
    })
}

/// The events of the command at log position `lsn`, one JSON line each
/// (without the newline), in the order the command applies them.
pub(crate) fn events_of(lsn: u64, cmd: &Command) -> Vec<Arc<str>> {
    let tenant = cmd.tenant();
    let bodies: Vec<Body<'_>> = match cmd {
        Command::Upsert { record, .. } | Command::UpsertLean { record, .. } => vec![upserted(record)],
        Command::Upserts { items, .. } | Command::UpsertsLean { items, .. } => {
            items.iter().map(|u| upserted(&u.record)).collect()
        }
        Command::UpsertNoted { record, .. } => vec![upserted(record)],
        Command::UpsertsNoted { items, .. } => items.iter().map(|u| upserted(&u.record)).collect(),
        Command::Tombstone { item_id, epoch, .. } => vec![Body::ItemTombstoned { item_id, epoch: *epoch }],
        Command::Label { event: e, .. } => vec![Body::LabelAdded {
            seq: e.seq,
            left: &e.left,
            right: &e.right,
            label: e.label,
            actor: &e.actor,
            rationale: &e.rationale,
            policy_id: &e.policy_id,
            policy_version: e.policy_version,
            method_version: &e.source_version,
            recorded_at_ms: e.recorded_at_ms,
        }],
        Command::Rebuild { config_json, previous_json, .. } => match versions(config_json) {
            // A rollback is the rebuild that keeps no configuration to
            // return to; a shadow's promotion is logged as a rebuild.
            Some(v) if previous_json.is_none() => vec![Body::RolledBack(v)],
            Some(v) => vec![Body::Rebuilt(v)],
            None => Vec::new(),
        },
        Command::CreateTenant { .. } | Command::Compact { .. } | Command::Unfence { .. } => Vec::new(),
    };
    let n = bodies.len();
    bodies
        .iter()
        .enumerate()
        .filter_map(|(i, body)| {
            let line = Line { v: EVENT_SCHEMA_VERSION, lsn, i, n, tenant, body };
            serde_json::to_string(&line).ok().map(Arc::from)
        })
        .collect()
}

/// A tenant's recent events, by log position (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct EventRing {
    /// `(lsn, the entry's events)`, positions increasing.
    entries: VecDeque<(u64, Vec<Arc<str>>)>,
    events: usize,
    /// Every event after this position is held; events at or before it
    /// may be gone.
    floor: u64,
    /// Where the tenant's history begins: its creation's or its restore's
    /// position (0: before anything the log holds). Entries at or before
    /// it are another history of the name (a restore replaced it).
    born: u64,
}

/// A page of the feed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventPage {
    /// JSON lines, without their newlines.
    pub lines: Vec<Arc<str>>,
    /// The position after which the next page starts: resume with
    /// `after = next_after.0` (and `after_i = next_after.1`, when set).
    pub next_after: (u64, Option<usize>),
}

impl EventRing {
    /// Every event after this position is held.
    pub(crate) fn floor(&self) -> u64 {
        self.floor
    }

    /// Records the position of the tenant's creation (or restore): no
    /// event of it comes before.
    pub(crate) fn created_at(&mut self, lsn: u64) {
        self.born = lsn;
    }

    /// Where the tenant's history begins (see [`EventRing::created_at`]).
    pub(crate) fn born(&self) -> u64 {
        self.born
    }

    /// The position of the tenant's last event at or before `covered`, or
    /// the floor when that is later: every event of the tenant up to
    /// `covered` is at or before it (a checkpoint records it, see
    /// `engine/events.rs`).
    pub(crate) fn last_at_or_before(&self, covered: u64) -> u64 {
        let held = self.entries.iter().rev().map(|(lsn, _)| *lsn).find(|&lsn| lsn <= covered).unwrap_or(0);
        held.max(self.floor)
    }

    /// Lowers or raises the floor (recovery: what the log still holds).
    pub(crate) fn set_floor(&mut self, floor: u64) {
        self.floor = floor;
    }

    /// Adds the events of the entry at `lsn`, trimming the oldest entries
    /// past [`RING_EVENTS`]. Entries come in log order; one at or before
    /// the newest held is ignored (a replay of what is held already).
    pub(crate) fn push(&mut self, lsn: u64, lines: Vec<Arc<str>>) {
        if lines.is_empty() || lsn <= self.born || self.entries.back().is_some_and(|(last, _)| *last >= lsn) {
            return;
        }
        self.events += lines.len();
        self.entries.push_back((lsn, lines));
        while self.events > RING_EVENTS && self.entries.len() > 1 {
            self.drop_front();
        }
    }

    fn drop_front(&mut self) {
        if let Some((lsn, lines)) = self.entries.pop_front() {
            self.events -= lines.len();
            self.floor = self.floor.max(lsn);
        }
    }

    /// Drops the entries before log position `first` (the log no longer
    /// holds them, so a restart could not derive them again).
    pub(crate) fn trim_before(&mut self, first: u64) {
        while self.entries.front().is_some_and(|(lsn, _)| *lsn < first) {
            self.drop_front();
        }
    }

    /// Up to `limit` events after position `after` (and, within the entry
    /// at `after`, after its event `after_i`), in log order.
    pub(crate) fn read(&self, after: u64, after_i: Option<usize>, limit: usize) -> Result<EventPage> {
        if after < self.floor || (after == self.floor && after_i.is_some() && self.floor > 0) {
            return Err(Error::new(ErrorKind::EventsTrimmed { after, oldest_after: self.floor }));
        }
        let start = self.entries.partition_point(|(lsn, _)| *lsn < after);
        let mut page = EventPage { lines: Vec::new(), next_after: (after, after_i) };
        for (lsn, lines) in self.entries.iter().skip(start) {
            let from = match (*lsn == after, after_i) {
                (true, None) => continue,
                (true, Some(i)) => i + 1,
                (false, _) => 0,
            };
            for (i, line) in lines.iter().enumerate().skip(from) {
                if page.lines.len() == limit {
                    return Ok(page);
                }
                page.lines.push(Arc::clone(line));
                page.next_after = if i + 1 == lines.len() { (*lsn, None) } else { (*lsn, Some(i)) };
            }
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(lsn: u64, n: usize) -> Vec<Arc<str>> {
        (0..n).map(|i| Arc::from(format!("{lsn}.{i}"))).collect()
    }

    fn texts(p: &EventPage) -> Vec<&str> {
        p.lines.iter().map(|l| &**l).collect()
    }

    /// (after, after_i, limit) → the events read, and the next page's start.
    type Case = (u64, Option<usize>, usize, &'static [&'static str], (u64, Option<usize>));

    /// Table: (after, after_i, limit) → the events read and where the next
    /// page starts; a batch entry can be left and resumed mid-way.
    #[test]
    fn pages_resume_exactly_where_they_stopped() {
        let mut r = EventRing::default();
        r.push(3, lines(3, 1));
        r.push(5, lines(5, 3));
        r.push(9, lines(9, 1));
        let cases: [Case; 6] = [
            (0, None, 10, &["3.0", "5.0", "5.1", "5.2", "9.0"], (9, None)),
            (0, None, 2, &["3.0", "5.0"], (5, Some(0))),
            (5, Some(0), 1, &["5.1"], (5, Some(1))),
            (5, Some(1), 5, &["5.2", "9.0"], (9, None)),
            (5, None, 5, &["9.0"], (9, None)),
            (9, None, 5, &[], (9, None)),
        ];
        for (after, i, limit, want, next) in cases {
            let p = r.read(after, i, limit).unwrap();
            assert_eq!(texts(&p), want, "after {after} {i:?}");
            assert_eq!(p.next_after, next, "after {after} {i:?}");
        }
    }

    /// Trimmed positions answer `events_trimmed` with the position to
    /// resume from; a replayed entry already held is not added twice.
    #[test]
    fn trimmed_positions_are_refused_with_the_oldest() {
        let mut r = EventRing::default();
        for lsn in 1..=RING_EVENTS as u64 + 2 {
            r.push(lsn, lines(lsn, 1));
        }
        r.push(2, lines(2, 1));
        assert_eq!(r.events, RING_EVENTS);
        let e = r.read(1, None, 1).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::EventsTrimmed { after: 1, oldest_after: 2 }), "{e}");
        assert_eq!(texts(&r.read(2, None, 1).unwrap()), ["3.0"]);
        r.trim_before(10);
        assert_eq!(r.floor(), 9);
        assert!(r.read(8, None, 1).is_err());
        assert_eq!(texts(&r.read(9, None, 1).unwrap()), ["10.0"]);
    }
}
