//! The command log: every accepted command is appended here, and reaches the
//! kernel (and, per [`FsyncPolicy`], the disk) before it is acknowledged.
//!
//! The log is a directory of segments named `{first_lsn:020}.log`, each a
//! checksummed header and checksummed records `(length, CRC, LSN, payload)`;
//! the byte layout is in `docs/index-format.md` (format version 1).
//!
//! On open, a record that is incomplete, over-long, fails its CRC or does not
//! increase the LSN ends the log: the segment is truncated to the last valid
//! record, later segments are removed, and the cut is reported. A record is
//! acknowledged only after it was written whole, so nothing acknowledged
//! before the damage is lost.
//!
//! # Fsync policies (as Redis's `appendfsync`)
//!
//! | policy        | fsync                                 | loss window on power loss / OS crash |
//! |---------------|---------------------------------------|--------------------------------------|
//! | `Always`      | after every command (batch: once)     | none: acknowledged means on disk     |
//! | `EveryMs(n)`  | background thread every `n` ms        | up to `n` ms of acknowledged commands|
//! | `Os`          | when the OS flushes (and on rotation) | up to the OS's dirty-page delay (~30 s on Linux) |
//!
//! Under every policy a record is written with `write(2)` before the command
//! is acknowledged, so a killed process (SIGKILL, panic, OOM) loses nothing
//! that was acknowledged; only the machine going down can.
//!
//! # Group commit
//!
//! Appending never fsyncs. A writer that must wait for durability (`Always`)
//! calls [`Wal::make_durable`] with its LSN after releasing its own locks:
//! if no fsync is running it becomes the leader, fsyncs everything written
//! so far and wakes the others; otherwise it waits for the running fsync
//! and, if that did not cover its record, for the next. Concurrent writers,
//! of any tenant, so share fsyncs, and each is acknowledged only once an
//! fsync that started after its `write(2)` has returned. Readers may see a
//! write before it is durable (as in most write-ahead logs); an LSN is
//! durable only when every LSN before it is, since the log is one file
//! written in order.
//!
//! A writer that should not block — a round of the combiner, answering
//! callers that wait elsewhere — registers a callback instead
//! ([`Wal::on_durable`]): the log's syncer thread takes part in the same
//! group commit for every callback waiting at once and calls each once an
//! fsync covers its position (or with the error that stopped it).
//!
//! By concern: this file opens, appends to, rotates and trims the log;
//! `replay.rs` reads it back at open and cuts a damaged tail;
//! `durable.rs` holds the group-commit protocol and the syncer thread.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};

mod durable;
mod replay;

pub(crate) use durable::OnDurable;
use durable::{wait_durable, Durability, Syncer};
pub(crate) use replay::replay;

const MAGIC: &[u8; 8] = b"NDUPWAL\0";
const VERSION: u32 = 1;
const HEADER: usize = 24;
const RECORD_HEADER: usize = 16;
/// Largest payload accepted, so a corrupt length cannot drive an allocation.
pub const MAX_RECORD: u32 = 256 << 20;

/// When the command log is fsynced. See the module doc for loss windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// After every command (group commit for batches).
    Always,
    /// From a background thread every this many milliseconds (at least 1).
    EveryMs(u64),
    /// Leave it to the OS.
    Os,
}

/// What opening the log found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRepair {
    /// Human-readable reports of each cut (segment, offset, reason).
    pub cuts: Vec<String>,
    /// Bytes dropped from torn or corrupt tails.
    pub bytes_dropped: u64,
    /// Whole segments removed after a cut.
    pub segments_removed: usize,
}

fn crc(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}.log"))
}

/// Segments in `dir`, by first LSN.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(format!("reading {}", dir.display()), e)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("reading log directory", e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(first) = name.strip_suffix(".log").and_then(|n| n.parse::<u64>().ok()) {
            out.push((first, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<()> {
    neardup_fs::sync_dir(dir).map_err(|e| Error::io("command log", e))
}

struct Writer {
    file: File,
    first: u64,
    next_lsn: u64,
    dirty: bool,
    buf: Vec<u8>,
    /// Bytes of the current segment up to the end of its last whole record.
    len: u64,
    /// Why the log refuses writes until the process restarts (a failed
    /// fsync, a failed write that could not be cut back, a command that
    /// could not be applied).
    failed: Option<String>,
    /// An fsync failed: nothing written since the last good one may be
    /// acknowledged on a later fsync's word.
    fsync_failed: bool,
    /// Test hook: the next write stops after this many bytes and fails.
    #[cfg(test)]
    fail_after: Option<usize>,
    /// Test hook: the next fsync fails.
    #[cfg(test)]
    fail_fsync: bool,
    /// Fault injection: what every fsync waits for first (a slow disk).
    fsync_stall: FsyncStall,
}

/// Fault injection: what every fsync of the log waits for first — a delay,
/// and a [`crate::fault::Gate`] a test can keep closed. Nothing in a build
/// without fault injection.
#[derive(Debug, Clone, Default)]
pub(super) struct FsyncStall {
    #[cfg(any(test, feature = "fault-injection"))]
    delay: std::time::Duration,
    #[cfg(any(test, feature = "fault-injection"))]
    gate: crate::fault::Gate,
}

impl FsyncStall {
    pub(super) fn wait(&self) {
        #[cfg(any(test, feature = "fault-injection"))]
        {
            if !self.delay.is_zero() {
                std::thread::sleep(self.delay);
            }
            self.gate.pass();
        }
    }
}

impl Writer {
    fn new(file: File, first: u64) -> Writer {
        Writer {
            file,
            first,
            next_lsn: first,
            dirty: false,
            buf: Vec::new(),
            len: HEADER as u64,
            failed: None,
            fsync_failed: false,
            #[cfg(test)]
            fail_after: None,
            #[cfg(test)]
            fail_fsync: false,
            fsync_stall: FsyncStall::default(),
        }
    }

    /// Records a failed fsync: the log refuses writes, and waits for
    /// durability fail, until a restart.
    fn fail_fsync_for_good(&mut self, e: &std::io::Error) {
        self.failed = Some(format!("an fsync failed ({e})"));
        self.fsync_failed = true;
    }

    fn check(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(Error::state(format!("the command log refuses writes until a restart: {why}"))),
            None => Ok(()),
        }
    }

    fn write_buf(&mut self) -> std::io::Result<()> {
        #[cfg(test)]
        if let Some(k) = self.fail_after.take() {
            let k = k.min(self.buf.len());
            self.file.write_all(&self.buf[..k])?;
            return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left (test)"));
        }
        self.file.write_all(&self.buf)
    }

    /// Appends `buf` as whole records, or leaves the segment as it was: a
    /// failed write (a full disk) is cut back to the last whole record, so
    /// later records never land behind a torn one (where recovery would cut
    /// them off). If even that fails, the log refuses writes until restart.
    fn append_buf(&mut self) -> Result<()> {
        match self.write_buf() {
            Ok(()) => {
                self.len += self.buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                use std::io::Seek;
                let len = self.len;
                let cut = self.file.set_len(len).and_then(|_| self.file.seek(std::io::SeekFrom::Start(len)));
                if let Err(c) = cut {
                    self.failed = Some(format!("a failed append ({e}) could not be cut back ({c})"));
                }
                Err(Error::io("appending to the command log", e))
            }
        }
    }
}

/// The open command log, appending to its newest segment.
pub(crate) struct Wal {
    dir: PathBuf,
    policy: FsyncPolicy,
    writer: Arc<Mutex<Writer>>,
    durability: Arc<(Mutex<Durability>, std::sync::Condvar)>,
    stop: Arc<AtomicBool>,
    flusher: Option<JoinHandle<()>>,
    /// `Always`: the thread that answers [`Wal::on_durable`] callbacks.
    syncer: Option<Syncer>,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal").field("dir", &self.dir).field("policy", &self.policy).finish_non_exhaustive()
    }
}

fn poisoned() -> Error {
    Error::state("command log lock poisoned by a panic")
}

fn create_segment(dir: &Path, first: u64) -> Result<File> {
    let path = segment_path(dir, first);
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    let mut h = Vec::with_capacity(HEADER);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&first.to_le_bytes());
    let c = crc(&[&h]);
    h.extend_from_slice(&c.to_le_bytes());
    file.write_all(&h).and_then(|_| file.sync_all()).map_err(|e| Error::io("writing segment header", e))?;
    sync_dir(dir)?;
    Ok(file)
}

impl Wal {
    /// Starts a fresh segment at `next_lsn` (call after [`replay()`]).
    pub(crate) fn open(dir: &Path, next_lsn: u64, policy: FsyncPolicy) -> Result<Wal> {
        fs::create_dir_all(dir).map_err(|e| Error::io("creating log directory", e))?;
        if let FsyncPolicy::EveryMs(0) = policy {
            return Err(Error::config("fsync", "EveryMs needs at least 1 ms"));
        }
        let file = create_segment(dir, next_lsn)?;
        let writer = Arc::new(Mutex::new(Writer::new(file, next_lsn)));
        let durability = Arc::new((
            Mutex::new(Durability { synced: next_lsn.saturating_sub(1), ..Durability::default() }),
            std::sync::Condvar::new(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let flusher = match policy {
            FsyncPolicy::EveryMs(ms) => {
                let (w, d, s) = (Arc::clone(&writer), Arc::clone(&durability), Arc::clone(&stop));
                Some(std::thread::spawn(move || {
                    let every = Duration::from_millis(ms);
                    loop {
                        // Parked, not asleep: dropping the log unparks this
                        // thread, so a drop does not wait out the interval.
                        let due = std::time::Instant::now() + every;
                        while !s.load(Ordering::Relaxed) {
                            let now = std::time::Instant::now();
                            if now >= due {
                                break;
                            }
                            std::thread::park_timeout(due - now);
                        }
                        // One more flush when stopping too: `Wal::sync` in
                        // `Drop` does nothing for a log that refuses writes,
                        // whose last records the next start must replay.
                        let stopping = s.load(Ordering::Relaxed);
                        let handle = match w.lock() {
                            Ok(mut g) if g.dirty => {
                                g.dirty = false;
                                g.file.try_clone().ok().map(|f| (f, g.next_lsn - 1))
                            }
                            _ => None,
                        };
                        // fsync outside the lock so appends are not blocked.
                        if let Some((h, upto)) = handle {
                            if h.sync_data().is_ok() {
                                if let Ok(mut st) = d.0.lock() {
                                    st.synced = st.synced.max(upto);
                                    st.fsyncs += 1;
                                }
                            }
                        }
                        if stopping {
                            break;
                        }
                    }
                }))
            }
            _ => None,
        };
        let syncer = match policy {
            FsyncPolicy::Always => Some(Syncer::start(Arc::clone(&writer), Arc::clone(&durability))?),
            _ => None,
        };
        Ok(Wal { dir: dir.to_path_buf(), policy, writer, durability, stop, flusher, syncer })
    }

    /// The LSN the next record will get.
    pub(crate) fn next_lsn(&self) -> Result<u64> {
        Ok(self.writer.lock().map_err(|_| poisoned())?.next_lsn)
    }

    /// Skips an LSN (used by `restore`, whose snapshot file carries it).
    pub(crate) fn reserve_lsn(&self) -> Result<u64> {
        let mut w = self.writer.lock().map_err(|_| poisoned())?;
        let lsn = w.next_lsn;
        w.next_lsn += 1;
        Ok(lsn)
    }

    /// Appends payloads as consecutive records with one `write(2)` and
    /// returns their LSNs. Never fsyncs: call [`Wal::make_durable`] with the
    /// last LSN before acknowledging.
    pub(crate) fn append(&self, payloads: &[Vec<u8>]) -> Result<Vec<u64>> {
        self.append_inner(payloads)
    }

    /// Fault injection: every later fsync first sleeps `delay`.
    #[cfg(any(test, feature = "fault-injection"))]
    pub(crate) fn delay_fsyncs(&self, delay: std::time::Duration) {
        if let Ok(mut w) = self.writer.lock() {
            w.fsync_stall.delay = delay;
        }
    }

    /// Fault injection: the gate every later fsync first passes.
    #[cfg(any(test, feature = "fault-injection"))]
    pub(crate) fn fsync_gate(&self) -> crate::fault::Gate {
        self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).fsync_stall.gate.clone()
    }

    /// Test hook: the next fsync fails.
    #[cfg(test)]
    pub(crate) fn fail_next_fsync(&self) {
        if let Ok(mut w) = self.writer.lock() {
            w.fail_fsync = true;
        }
    }

    /// Returns once `lsn` is durable as the policy promises: under `Always`,
    /// after an fsync that started after it was written (group commit, see
    /// the module doc); under the other policies at once (the record was
    /// written with `write(2)`, the background flush or the OS does the rest).
    pub(crate) fn make_durable(&self, lsn: u64) -> Result<()> {
        if self.policy != FsyncPolicy::Always {
            return Ok(());
        }
        wait_durable(&self.writer, &self.durability, lsn)
    }

    /// Calls `f` once `lsn` is durable as the policy promises — under
    /// `Always` from the log's syncer thread, after an fsync that started
    /// after `lsn` was written (sharing fsyncs with every other writer
    /// waiting then), with the error if that fsync failed; at once
    /// otherwise, or when `lsn` is durable already. `f` must be quick: it
    /// runs while later callbacks wait.
    pub(crate) fn on_durable(&self, lsn: u64, f: OnDurable) {
        match &self.syncer {
            Some(syncer) if self.durable_lsn() < lsn => syncer.wait_for(lsn, f),
            _ => f(Ok(())),
        }
    }

    /// The highest LSN known to be on disk (every LSN below it is too).
    pub(crate) fn durable_lsn(&self) -> u64 {
        self.durability.0.lock().map(|s| s.synced).unwrap_or(0)
    }

    /// Fsyncs done since open.
    pub(crate) fn fsyncs(&self) -> u64 {
        self.durability.0.lock().map(|s| s.fsyncs).unwrap_or(0)
    }

    fn append_inner(&self, payloads: &[Vec<u8>]) -> Result<Vec<u64>> {
        let mut w = self.writer.lock().map_err(|_| poisoned())?;
        let w = &mut *w;
        w.check()?;
        w.buf.clear();
        let mut lsns = Vec::with_capacity(payloads.len());
        let mut lsn = w.next_lsn;
        for p in payloads {
            let n = u32::try_from(p.len()).ok().filter(|&n| n <= MAX_RECORD).ok_or_else(|| {
                Error::new(crate::error::ErrorKind::TooLarge {
                    limit: "log record bytes",
                    max: u64::from(MAX_RECORD),
                    actual: p.len() as u64,
                })
            })?;
            let lsn_bytes = lsn.to_le_bytes();
            w.buf.extend_from_slice(&n.to_le_bytes());
            w.buf.extend_from_slice(&crc(&[&lsn_bytes, p]).to_le_bytes());
            w.buf.extend_from_slice(&lsn_bytes);
            w.buf.extend_from_slice(p);
            lsns.push(lsn);
            lsn += 1;
        }
        w.append_buf()?;
        w.next_lsn = lsn;
        if w.buf.capacity() > 16 << 20 {
            w.buf = Vec::new();
        }
        w.dirty = true;
        Ok(lsns)
    }

    /// Why the log refuses writes until a restart, if it does.
    pub(crate) fn refusal(&self) -> Option<String> {
        self.writer.lock().map_or_else(|_| Some("the command log's lock is poisoned".into()), |w| w.failed.clone())
    }

    /// Makes the log refuse every later write until the process restarts:
    /// a command it holds could not be applied, so the state in memory no
    /// longer follows it (the next start replays it).
    pub(crate) fn refuse_writes(&self, why: String) {
        if let Ok(mut w) = self.writer.lock() {
            w.failed.get_or_insert(why);
        }
    }

    /// Closes the current segment and starts a new one at the next LSN.
    pub(crate) fn rotate(&self) -> Result<u64> {
        let mut w = self.writer.lock().map_err(|_| poisoned())?;
        w.check()?;
        if let Err(e) = w.file.sync_data() {
            w.fail_fsync_for_good(&e);
            return Err(Error::io("fsyncing the command log", e));
        }
        self.mark_synced(w.next_lsn - 1);
        let first = w.next_lsn;
        if first != w.first {
            w.file = create_segment(&self.dir, first)?;
            w.first = first;
            w.len = HEADER as u64;
        }
        w.dirty = false;
        Ok(first)
    }

    /// Removes segments all of whose records have LSN `<= covered`.
    pub(crate) fn remove_covered(&self, covered: u64) -> Result<usize> {
        let current = self.writer.lock().map_err(|_| poisoned())?.first;
        let segs = segments(&self.dir)?;
        let mut removed = 0;
        for pair in segs.windows(2) {
            let ((_, path), (next_first, _)) = (&pair[0], &pair[1]);
            if *next_first <= covered.saturating_add(1) && *next_first <= current {
                fs::remove_file(path).map_err(|e| Error::io("removing covered segment", e))?;
                removed += 1;
            }
        }
        if removed > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(removed)
    }

    /// The first LSN of the oldest segment left: every record from there
    /// on is still in the log.
    pub(crate) fn first_lsn(&self) -> Result<u64> {
        let current = self.writer.lock().map_err(|_| poisoned())?.first;
        Ok(segments(&self.dir)?.first().map_or(current, |(first, _)| *first).min(current))
    }

    /// Bytes in all segments.
    pub(crate) fn disk_bytes(&self) -> u64 {
        segments(&self.dir).unwrap_or_default().iter().map(|(_, p)| fs::metadata(p).map(|m| m.len()).unwrap_or(0)).sum()
    }

    /// Fsyncs now, whatever the policy.
    pub(crate) fn sync(&self) -> Result<()> {
        let mut w = self.writer.lock().map_err(|_| poisoned())?;
        w.check()?;
        w.dirty = false;
        if let Err(e) = w.file.sync_data() {
            w.fail_fsync_for_good(&e);
            return Err(Error::io("fsyncing the command log", e));
        }
        self.mark_synced(w.next_lsn - 1);
        Ok(())
    }

    fn mark_synced(&self, upto: u64) {
        if let Ok(mut st) = self.durability.0.lock() {
            st.synced = st.synced.max(upto);
            st.fsyncs += 1;
        }
        self.durability.1.notify_all();
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.flusher.take() {
            h.thread().unpark();
            let _ = h.join();
        }
        // The syncer answers every callback still waiting before it stops.
        drop(self.syncer.take());
        let _ = self.sync();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(dir: &Path) -> (Vec<(u64, Vec<u8>)>, LogRepair) {
        let mut out = Vec::new();
        let (_, rep) = replay(dir, |lsn, p| {
            out.push((lsn, p.to_vec()));
            Ok(())
        })
        .unwrap();
        (out, rep)
    }

    /// A full disk mid-record: the torn bytes are cut back, later appends
    /// land whole right after the last good record, and replay loses none of
    /// the acknowledged records (it used to cut everything after the tear).
    #[test]
    fn a_failed_append_leaves_no_torn_record_behind() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 1, FsyncPolicy::Always).unwrap();
        assert_eq!(wal.append(&[b"first".to_vec()]).unwrap(), [1]);
        wal.writer.lock().unwrap().fail_after = Some(9);
        assert_eq!(wal.append(&[b"torn-by-a-full-disk".to_vec()]).unwrap_err().code(), "io");
        assert_eq!(wal.append(&[b"after".to_vec(), b"space came back".to_vec()]).unwrap(), [2, 3]);
        wal.make_durable(3).unwrap();
        drop(wal);
        let (recs, rep) = collect(d.path());
        assert!(rep.cuts.is_empty(), "{rep:?}");
        let payloads: Vec<&[u8]> = recs.iter().map(|(_, p)| &p[..]).collect();
        assert_eq!(payloads, [&b"first"[..], b"after", b"space came back"]);
    }

    #[test]
    fn a_refusing_log_takes_no_write_and_says_why() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 1, FsyncPolicy::Always).unwrap();
        assert_eq!(wal.append(&[b"first".to_vec()]).unwrap(), [1]);
        assert!(wal.refusal().is_none());
        wal.refuse_writes("command 1 is logged but could not be applied".into());
        assert!(wal.refusal().unwrap().contains("could not be applied"));
        let e = wal.append(&[b"second".to_vec()]).unwrap_err().to_string();
        assert!(e.contains("refuses writes until a restart"), "{e}");
        assert!(wal.sync().is_err());
    }

    #[test]
    fn append_replay_rotate() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 1, FsyncPolicy::Always).unwrap();
        assert_eq!(wal.append(&[b"a".to_vec(), b"bb".to_vec()]).unwrap(), [1, 2]);
        wal.rotate().unwrap();
        assert_eq!(wal.reserve_lsn().unwrap(), 3);
        assert_eq!(wal.append(&[b"c".to_vec()]).unwrap(), [4]);
        drop(wal);
        let (recs, rep) = collect(d.path());
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2, 4]);
        assert_eq!(recs[1].1, b"bb");
        assert!(rep.cuts.is_empty());
    }

    #[test]
    fn torn_and_flipped_tails_are_cut() {
        for damage in ["flip", "truncate", "garbage"] {
            let d = tempfile::tempdir().unwrap();
            let wal = Wal::open(d.path(), 1, FsyncPolicy::Os).unwrap();
            wal.append(&[vec![1; 100], vec![2; 100], vec![3; 100]]).unwrap();
            drop(wal);
            let path = segment_path(d.path(), 1);
            let mut bytes = fs::read(&path).unwrap();
            match damage {
                "flip" => {
                    let n = bytes.len();
                    bytes[n - 10] ^= 0x40;
                }
                "truncate" => bytes.truncate(bytes.len() - 7),
                _ => bytes.extend_from_slice(&[0xff; 9]),
            }
            fs::write(&path, &bytes).unwrap();
            let (recs, rep) = collect(d.path());
            let want = if damage == "garbage" { 3 } else { 2 };
            assert_eq!(recs.len(), want, "{damage}");
            assert_eq!(rep.cuts.len(), 1, "{damage}: {rep:?}");
            // The repair is durable: a second open finds a clean log.
            let (recs2, rep2) = collect(d.path());
            assert_eq!(recs2.len(), want);
            assert!(rep2.cuts.is_empty(), "{rep2:?}");
        }
    }

    /// Dropping a log under a long `EveryMs` interval does not wait out the
    /// interval (the flusher is woken), and what was appended is on disk.
    /// The interval is an hour; the guard of 60 s only stops a hang, so a
    /// slow machine cannot make this fail while the flusher is woken.
    #[test]
    fn drop_wakes_the_flusher() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 1, FsyncPolicy::EveryMs(3_600_000)).unwrap();
        wal.append(&[vec![7]]).unwrap();
        let durability = Arc::clone(&wal.durability);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(wal);
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(60)).expect("dropping the log waited for the flusher's interval");
        assert_eq!(durability.0.lock().unwrap().synced, 1, "the appended record was not fsynced");
        let (recs, _) = collect(d.path());
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), [1]);
    }

    /// A log that refuses writes (after a failed apply) is still fsynced
    /// when dropped: its last records are what the next start replays.
    #[test]
    fn a_refusing_log_is_fsynced_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 1, FsyncPolicy::EveryMs(3_600_000)).unwrap();
        wal.append(&[vec![7]]).unwrap();
        wal.refuse_writes("an apply failed".into());
        let durability = Arc::clone(&wal.durability);
        drop(wal);
        assert_eq!(durability.0.lock().unwrap().synced, 1, "the refusing log's record was not fsynced");
    }

    #[test]
    fn covered_segments_removed() {
        let d = tempfile::tempdir().unwrap();
        let wal = Wal::open(d.path(), 1, FsyncPolicy::EveryMs(5)).unwrap();
        wal.append(&[vec![1]]).unwrap();
        wal.rotate().unwrap();
        wal.append(&[vec![2]]).unwrap();
        wal.rotate().unwrap();
        assert_eq!(wal.remove_covered(1).unwrap(), 1);
        drop(wal);
        let (recs, _) = collect(d.path());
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), [2]);
    }
}
