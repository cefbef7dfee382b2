//! Single upserts of one tenant written together (flat combining).
//!
//! Every upsert needs the tenant's write lock, and with many concurrent
//! writers most of their time went to handing that lock from thread to
//! thread — one acquisition, one log append and one wake-up per item. Here
//! a writer queues its item; the first writer to find no round running
//! leads one: it takes up to [`MAX_ROUND`] queued items (its own first),
//! plans, logs and applies them in queue order under one acquisition of
//! the lock — in groups of items that do not bear on each other, one log
//! record and one store write a group, each decided exactly as if alone
//! after the ones before it, as a batch is — then hands the lead to the
//! next queued writer, so the next round applies while this one's log is
//! made durable, and answers
//! each writer of its round once an fsync covers the round. Nothing is
//! acknowledged before its fsync (as before: the wait is the log's own
//! group commit); the lock is held at most one round of items at a time.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, RwLock};

use neardup_core::Fingerprint;

use super::{poisoned, Engine};
use crate::decision::UpsertOutcome;
use crate::error::{Error, Result};
use crate::item::Item;
use crate::tenant::{Prefingerprinter, Tenant};

/// Most items one round writes under one acquisition of the tenant's lock
/// (what a query may wait behind: ~64 × 150 µs).
pub(super) const MAX_ROUND: usize = 64;

/// Each tenant's combiner, with the tenant object it serves.
pub(super) type Combiners = std::collections::HashMap<String, (std::sync::Weak<RwLock<Tenant>>, Arc<Combiner>)>;

/// One tenant's queue of single upserts, and its writers' copy of what
/// fingerprinting needs.
#[derive(Default)]
pub(crate) struct Combiner {
    state: Mutex<Queue>,
    /// Refreshed under the tenant's write lock whenever it is stale.
    pre: Mutex<Option<Arc<Prefingerprinter>>>,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Arc<Waiter>>,
    /// A round is running (or its leader is about to start it).
    leading: bool,
}

/// An upsert waiting in the queue.
struct Waiter {
    slot: Mutex<Slot>,
    cv: Condvar,
}

struct Slot {
    /// Taken by the round that writes it.
    job: Option<(Item, Option<(String, Fingerprint)>)>,
    state: State,
}

enum State {
    Waiting,
    /// Leads the next round.
    Lead,
    Done(Box<Result<UpsertOutcome>>),
}

impl Waiter {
    fn set(&self, state: State) {
        if let Ok(mut s) = self.slot.lock() {
            s.state = state;
        }
        self.cv.notify_one();
    }
}

impl Combiner {
    /// The writers' copy of what fingerprinting needs, made from the
    /// tenant (under its read lock) the first time.
    pub(super) fn prefingerprinter(&self, t: &RwLock<Tenant>) -> Result<Arc<Prefingerprinter>> {
        if let Some(p) = self.pre.lock().map_err(|_| poisoned())?.clone() {
            return Ok(p);
        }
        let p = Arc::new(t.read().map_err(|_| poisoned())?.prefingerprinter());
        *self.pre.lock().map_err(|_| poisoned())? = Some(Arc::clone(&p));
        Ok(p)
    }

    /// Under the tenant's write lock: renews the copy if the tenant's
    /// parameters or limit changed since it was made.
    pub(super) fn refresh(&self, t: &Tenant) {
        if let Ok(mut pre) = self.pre.lock() {
            if !pre.as_ref().is_some_and(|p| p.is_current(t)) {
                *pre = Some(Arc::new(t.prefingerprinter()));
            }
        }
    }
}

impl Engine {
    /// The combiner of tenant `t` (named `tenant`). A combiner serves one
    /// tenant object: should the name come to stand for another (a
    /// creation undone and made again), the other gets a combiner of its
    /// own, so no round ever writes an item into a tenant its writer did
    /// not find.
    pub(super) fn combiner(&self, tenant: &str, t: &Arc<RwLock<Tenant>>) -> Result<Arc<Combiner>> {
        let mut map = self.combiners.lock().map_err(|_| poisoned())?;
        let entry = map.entry(tenant.to_string()).or_insert_with(|| (Arc::downgrade(t), Arc::default()));
        if !std::ptr::eq(entry.0.as_ptr(), Arc::as_ptr(t)) {
            *entry = (Arc::downgrade(t), Arc::default());
        }
        Ok(Arc::clone(&entry.1))
    }

    /// Upserts `item` through its tenant's queue (single node): returns
    /// once its round is durable.
    pub(super) fn upsert_combined(
        &self,
        combiner: &Combiner,
        t: &Arc<RwLock<Tenant>>,
        item: Item,
        pre: Option<(String, Fingerprint)>,
    ) -> Result<UpsertOutcome> {
        let me = Arc::new(Waiter {
            slot: Mutex::new(Slot { job: Some((item, pre)), state: State::Waiting }),
            cv: Condvar::new(),
        });
        let lead = {
            let mut q = combiner.state.lock().map_err(|_| poisoned())?;
            q.pending.push_back(Arc::clone(&me));
            !std::mem::replace(&mut q.leading, true)
        };
        if !lead {
            let mut s = me.slot.lock().map_err(|_| poisoned())?;
            loop {
                match std::mem::replace(&mut s.state, State::Waiting) {
                    State::Waiting => s = me.cv.wait(s).map_err(|_| poisoned())?,
                    State::Lead => break,
                    State::Done(r) => return *r,
                }
            }
        }
        // Leading: the front of the queue is this writer's item.
        self.round(t, combiner);
        let mut s = me.slot.lock().map_err(|_| poisoned())?;
        match std::mem::replace(&mut s.state, State::Waiting) {
            State::Done(r) => *r,
            _ => Err(Error::state("a write's round ended without its answer")),
        }
    }

    /// Writes one round: the queue's first [`MAX_ROUND`] items.
    fn round(&self, t: &Arc<RwLock<Tenant>>, combiner: &Combiner) {
        let batch: Vec<Arc<Waiter>> = match combiner.state.lock() {
            Ok(mut q) => {
                let n = q.pending.len().min(MAX_ROUND);
                q.pending.drain(..n).collect()
            }
            Err(_) => return,
        };
        // A panic below must not leave writers waiting for ever: every one
        // of the round still waiting gets an error, and the lead moves on
        // (once).
        let passed = std::cell::Cell::new(false);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut results: Vec<Result<UpsertOutcome>> = Vec::with_capacity(batch.len());
            let mut last = 0u64;
            match t.write() {
                Ok(mut g) => {
                    combiner.refresh(&g);
                    // The round's items, written in groups (one log record
                    // and one store write a group, as a batch is).
                    let jobs: Vec<_> =
                        batch.iter().map(|w| w.slot.lock().ok().and_then(|mut s| s.job.take())).collect();
                    let taken: Vec<bool> = jobs.iter().map(Option::is_some).collect();
                    let (items, pre): (Vec<Item>, Vec<_>) = jobs.into_iter().flatten().unzip();
                    let (written, lsn) = self.upsert_all_locked(&mut g, &items, &pre);
                    last = lsn;
                    let mut written = written.into_iter();
                    for taken in taken {
                        results.push(match taken {
                            true => written.next().unwrap_or_else(|| Err(Error::state("a round lost an answer"))),
                            false => Err(Error::state("a queued write was taken twice")),
                        });
                    }
                }
                Err(_) => results.extend(batch.iter().map(|_| Err(poisoned()))),
            }
            self.pass_the_lead(combiner);
            passed.set(true);
            // Acknowledged only once durable; the next round applies meanwhile.
            let durable = self.make_durable(last);
            for (w, r) in batch.iter().zip(results) {
                w.set(State::Done(Box::new(match (&durable, r) {
                    (Err(e), Ok(_)) => Err(e.clone()),
                    (_, r) => r,
                })));
            }
        }));
        if let Err(panic) = outcome {
            for w in &batch {
                if let Ok(mut s) = w.slot.lock() {
                    if matches!(s.state, State::Waiting) {
                        s.state = State::Done(Box::new(Err(Error::state("the write failed: its round panicked"))));
                    }
                }
                w.cv.notify_one();
            }
            if !passed.get() {
                self.pass_the_lead(combiner);
            }
            std::panic::resume_unwind(panic);
        }
    }

    /// Hands the lead to the first queued writer, or ends leading.
    fn pass_the_lead(&self, combiner: &Combiner) {
        if let Ok(mut q) = combiner.state.lock() {
            match q.pending.front() {
                Some(next) => next.set(State::Lead),
                None => q.leading = false,
            }
        }
    }
}
