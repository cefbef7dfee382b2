//! Group commit: what is known durable, the fsync leader's protocol
//! ([`wait_durable`]), and the syncer thread that answers callbacks
//! waiting for durability ([`Syncer`]). See the parent module's doc.

use std::fs::File;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::{poisoned, Writer};
use crate::error::{Error, Result};

/// Group-commit state: what is known durable and whether an fsync runs.
#[derive(Debug, Default)]
pub(super) struct Durability {
    /// Every LSN at or below it is on disk.
    pub(super) synced: u64,
    /// An fsync is running (its leader will wake the others).
    pub(super) leader: bool,
    /// Fsyncs done (for tests and metrics).
    pub(super) fsyncs: u64,
}

/// Called once with whether a log position became durable.
pub(crate) type OnDurable = Box<dyn FnOnce(Result<()>) + Send>;

/// The syncer thread and the callbacks it is to answer.
pub(super) struct Syncer {
    shared: Arc<SyncQueue>,
    thread: Option<JoinHandle<()>>,
}

/// The callbacks waiting for an fsync, and the syncer's stop flag.
#[derive(Default)]
struct SyncQueue {
    queue: Mutex<(Vec<(u64, OnDurable)>, bool)>,
    cv: Condvar,
}

impl Syncer {
    /// Starts the syncer thread of the log whose `writer` and
    /// `durability` these are.
    pub(super) fn start(writer: Arc<Mutex<Writer>>, durability: Arc<(Mutex<Durability>, Condvar)>) -> Result<Syncer> {
        let shared = Arc::new(SyncQueue::default());
        let q = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("neardup-log-sync".into())
            .spawn(move || q.run(&writer, &durability))
            .map_err(|e| Error::io("starting the command log's syncer thread", e))?;
        Ok(Syncer { shared, thread: Some(thread) })
    }

    /// Calls `f` once an fsync covers `lsn` (or with the error that
    /// stopped it).
    pub(super) fn wait_for(&self, lsn: u64, f: OnDurable) {
        match self.shared.queue.lock() {
            Ok(mut q) => q.0.push((lsn, f)),
            Err(_) => return f(Err(poisoned())),
        }
        self.shared.cv.notify_one();
    }
}

impl Drop for Syncer {
    /// Stops the thread once it has answered every callback waiting.
    fn drop(&mut self) {
        if let Ok(mut q) = self.shared.queue.lock() {
            q.1 = true;
        }
        self.shared.cv.notify_one();
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

impl SyncQueue {
    /// The syncer thread: fsyncs (as a group-commit writer, sharing fsyncs
    /// with threads in [`super::Wal::make_durable`]) up to the highest position
    /// waited for, then calls every callback it covered. Callbacks that
    /// come meanwhile wait for the next fsync. On stop, drains the queue.
    fn run(&self, writer: &Mutex<Writer>, durability: &(Mutex<Durability>, Condvar)) {
        loop {
            let waiting = {
                let Ok(mut q) = self.queue.lock() else { return };
                while q.0.is_empty() && !q.1 {
                    q = match self.cv.wait(q) {
                        Ok(q) => q,
                        Err(_) => return,
                    };
                }
                if q.0.is_empty() {
                    return;
                }
                std::mem::take(&mut q.0)
            };
            let upto = waiting.iter().map(|w| w.0).max().unwrap_or(0);
            let result = wait_durable(writer, durability, upto);
            // On a failure, a position an earlier fsync covered is durable
            // all the same.
            let synced = durability.0.lock().map(|d| d.synced).unwrap_or(0);
            for (lsn, f) in waiting {
                let r = if lsn <= synced { Ok(()) } else { result.clone() };
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(r)));
            }
        }
    }
}

/// Group commit under `Always`: returns once an fsync that started after
/// `lsn` was written has returned (see the module doc).
pub(super) fn wait_durable(writer: &Mutex<Writer>, durability: &(Mutex<Durability>, Condvar), lsn: u64) -> Result<()> {
    let (state, cv) = durability;
    let mut st = state.lock().map_err(|_| poisoned())?;
    loop {
        if st.synced >= lsn {
            return Ok(());
        }
        if st.leader {
            st = cv.wait(st).map_err(|_| poisoned())?;
            continue;
        }
        st.leader = true;
        drop(st);
        // Everything written so far: this writer's record and every
        // record of the writers that queued behind the last fsync.
        let target = {
            let w = writer.lock().map_err(|_| poisoned());
            w.and_then(|mut w| {
                // After a failed fsync nothing written since the last good
                // one can be trusted: a writer that was waiting behind it
                // is not acknowledged on a later fsync's word.
                if w.fsync_failed {
                    w.check()?;
                }
                w.dirty = false;
                let upto = w.next_lsn - 1;
                #[cfg(test)]
                let fail = std::mem::take(&mut w.fail_fsync);
                #[cfg(not(test))]
                let fail = false;
                let stall = w.fsync_stall.clone();
                w.file
                    .try_clone()
                    .map(|f| (f, upto, (fail, stall)))
                    .map_err(|e| Error::io("fsyncing the command log", e))
            })
        };
        let sync = |f: File, (fail, stall): (bool, super::FsyncStall)| {
            stall.wait();
            if fail {
                return Err(std::io::Error::other("fsync failed (test)"));
            }
            f.sync_data()
        };
        let result = target.and_then(|(f, upto, fail)| match sync(f, fail) {
            Ok(()) => Ok(upto),
            Err(e) => {
                // After a failed fsync the kernel may have dropped the
                // dirty pages: nothing since the last good fsync can be
                // trusted, so no later write may be acknowledged either.
                if let Ok(mut w) = writer.lock() {
                    w.fail_fsync_for_good(&e);
                }
                Err(Error::io("fsyncing the command log", e))
            }
        });
        st = state.lock().map_err(|_| poisoned())?;
        st.leader = false;
        cv.notify_all();
        match result {
            Ok(upto) => {
                st.synced = st.synced.max(upto);
                st.fsyncs += 1;
            }
            Err(e) => return Err(e),
        }
    }
}
