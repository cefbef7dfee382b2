//! The event feed's reads (see `crate::event`), and the mark a checkpoint
//! leaves for it.
//!
//! A restart derives a tenant's events again from the log it replays, but
//! the log no longer holds what checkpoints trimmed: without more, the
//! restarted feed would have to start where the log does, and a consumer
//! of a quiet tenant, caught up long ago, would be told it fell behind.
//! So each checkpoint writes the position of the tenant's last event its
//! snapshot covers:
//!
//! ```text
//! DIR/events/{tenant}.json
//!   {"covered": C, "last_event": X, "from": S}
//! ```
//!
//! | field        | meaning                                                   |
//! |--------------|-----------------------------------------------------------|
//! | `covered`    | the snapshot's covered position it goes with              |
//! | `last_event` | every event of the tenant up to `covered` is at or before it |
//! | `from`       | the tenant's history begins after it (a restore's position; 0) |
//!
//! Replaced by a rename, without an fsync: read only when `covered` is the
//! position of the snapshot the restart loaded (otherwise the feed starts
//! where that snapshot or the log does, whichever is earlier), a lost,
//! torn or stale mark can only make the feed start later, never skip an
//! event.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{poisoned, Engine};
use crate::error::{Error, Result};
use crate::event::EventPage;

/// What a checkpoint records of a tenant's feed (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct FeedMark {
    pub covered: u64,
    pub last_event: u64,
    pub from: u64,
}

/// Where `tenant`'s mark is, under the data directory `dir`.
pub(super) fn mark_path(dir: &Path, tenant: &str) -> PathBuf {
    dir.join("events").join(format!("{tenant}.json"))
}

impl FeedMark {
    /// Writes the mark at `path` (see the module doc).
    pub(super) fn write(&self, path: &Path) -> Result<()> {
        let bytes = serde_json::to_vec(self).map_err(|e| Error::state(format!("encoding the feed's mark: {e}")))?;
        let io = |e| Error::io("writing the feed's mark", e);
        let folder = path.parent().ok_or_else(|| Error::state("a feed mark's path has no folder"))?;
        std::fs::create_dir_all(folder).map_err(io)?;
        let part = path.with_extension("json.part");
        std::fs::write(&part, &bytes).map_err(io)?;
        std::fs::rename(&part, path).map_err(io)
    }

    /// The mark at `path`, if there is one for the snapshot at `covered`.
    pub(super) fn read(path: &Path, covered: u64) -> Option<FeedMark> {
        let bytes = std::fs::read(path).ok()?;
        serde_json::from_slice::<FeedMark>(&bytes).ok().filter(|m| m.covered == covered && m.last_event <= covered)
    }
}

impl Engine {
    /// Up to `limit` of `tenant`'s events after log position `after` (and,
    /// within the entry at `after`, after its event `after_i`), in log
    /// order, as JSON lines. Positions the feed no longer holds answer
    /// [`crate::ErrorKind::EventsTrimmed`] with the oldest position to
    /// resume after.
    pub fn events(&self, tenant: &str, after: u64, after_i: Option<usize>, limit: usize) -> Result<EventPage> {
        let t = self.tenant(tenant)?;
        let t = t.read().map_err(|_| poisoned())?;
        t.events.read(after, after_i, limit)
    }

    /// Records `tenant`'s feed mark for its snapshot at `covered`.
    pub(super) fn mark_feed(&self, tenant: &str, covered: u64) -> Result<()> {
        let mark = {
            let t = self.tenant(tenant)?;
            let t = t.read().map_err(|_| poisoned())?;
            FeedMark { covered, last_event: t.events.last_at_or_before(covered), from: t.events.born() }
        };
        mark.write(&mark_path(self.dir(), tenant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mark is read back only for the snapshot it goes with, and a
    /// damaged one is no mark.
    #[test]
    fn a_mark_counts_only_for_its_own_snapshot() {
        let d = tempfile::tempdir().unwrap();
        let path = mark_path(d.path(), "t");
        let m = FeedMark { covered: 9, last_event: 4, from: 0 };
        m.write(&path).unwrap();
        assert_eq!(FeedMark::read(&path, 9), Some(m));
        assert_eq!(FeedMark::read(&path, 10), None);
        std::fs::write(&path, b"{\"covered\": 9, \"last_").unwrap();
        assert_eq!(FeedMark::read(&path, 9), None);
        std::fs::write(&path, b"{\"covered\":9,\"last_event\":12,\"from\":0}").unwrap();
        assert_eq!(FeedMark::read(&path, 9), None, "an event after the snapshot's position is no mark");
    }
}
