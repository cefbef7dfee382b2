//! The writes of one tenant written together (flat combining), on a
//! single node and in cluster mode alike.
//!
//! Every upsert needs the tenant's write lock, and with many concurrent
//! writers most of their time went to handing that lock from thread to
//! thread — one acquisition, one log append and one wake-up per item; in
//! cluster mode, worse, concurrent writers of a tenant planned against the
//! same log position, and all but one were refused and planned again, so a
//! tenant advanced one command per round trip. Here a writer queues its
//! item, or its batch's items; the first writer to find no round running
//! leads: it takes the queued writes (its own first) up to a round's size,
//! and writes their items in queue order — in groups of items that do not
//! bear on each other, one log entry and one store write a group, each
//! decided exactly as if alone after the ones before it. A tenant's
//! throughput then grows with its load (bigger entries), not with lock
//! hand-offs or round trips.
//!
//! On a single node a round is planned, logged and applied under one
//! acquisition of the lock ([`MAX_ROUND`] items) and handed to the log,
//! whose syncer thread answers each of its writers once an fsync covers
//! it ([`crate::wal::Wal::on_durable`]). Nothing is acknowledged before its
//! fsync, and the leader never waits for one: it goes on to the next round
//! while the log makes the last one durable. In cluster mode a round
//! ([`MAX_REPLICATED_ROUND`] items) proposes its groups to the replicated
//! log one after another, each planned once the one before it is applied
//! (see `replica.rs`), and its writers are answered when it ends; writes
//! that arrive meanwhile make the next round.
//!
//! Two kinds of writer queue: a thread that parks until its answer comes
//! ([`Engine::upsert`]), and a callback ([`Engine::upsert_queued`], for
//! callers that must not block, such as the service's async handlers),
//! which brings a [`Spawn`] that runs a [`Lead`] on a thread that may
//! block. After each round the lead passes to the queue's first writer: a
//! parked thread is woken to lead; for a callback, a parked leader hands
//! the lead to its `Spawn` (so no parked writer leads for long for
//! others), while a leader that was spawned keeps leading — one thread
//! serves a stream of callbacks, not one thread a write.

use super::lock::TenantLock;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use super::{poisoned, Engine};
use crate::decision::UpsertOutcome;
use crate::error::{Error, Result};
use crate::item::Item;
use crate::tenant::{Prefingerprinter, Prepared, Tenant};

/// Most items one round writes under one acquisition of the tenant's lock
/// (what a query may wait behind: ~64 × 150 µs). A round takes whole
/// writes: a batch larger than this is a round of its own.
pub(super) const MAX_ROUND: usize = 64;

/// Most items of one round in cluster mode, where a round costs a round
/// trip to the log's quorum per group rather than lock time: a larger
/// round spreads that trip over more writers (the log's entry size limit
/// still cuts groups).
pub(super) const MAX_REPLICATED_ROUND: usize = 256;

/// Each tenant's combiner, with the tenant object it serves.
pub(super) type Combiners = std::collections::HashMap<String, (std::sync::Weak<TenantLock<Tenant>>, Arc<Combiner>)>;

/// Called once with a queued upsert's answer (see [`Engine::upsert_queued`]),
/// from the thread that wrote or synced it, while later answers wait: it
/// must be quick, must not block or call the engine, and must not hold the
/// engine's last reference. A panic in it is caught and ignored.
pub type Answer = Box<dyn FnOnce(Result<UpsertOutcome>) + Send>;

/// Runs a [`Lead`] by passing it to [`Engine::lead`] on a thread that may
/// block (locks, log appends), such as a blocking-task pool's.
pub type Spawn = Arc<dyn Fn(Lead) + Send + Sync>;

/// One tenant's queue of writes, and its writers' copy of what
/// fingerprinting needs.
#[derive(Default)]
pub(crate) struct Combiner {
    state: Mutex<Queue>,
    /// Refreshed under the tenant's write lock whenever it is stale.
    pre: Mutex<Option<Arc<Prefingerprinter>>>,
    /// Writes are not packed (cluster mode: the replicated log carries
    /// the text, and each node's applier stores it).
    no_packing: bool,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Arc<Waiter>>,
    /// A writer leads (or has been handed a [`Lead`] to run).
    leading: bool,
}

/// A queued write: its items, taken by the round that writes them, and
/// who waits for their answers.
struct Waiter {
    job: Mutex<Option<Job>>,
    /// How many items the job holds.
    items: usize,
    reply: Reply,
}

/// A queued write's items, each with its fingerprint when made before
/// queuing: a single upsert's one, or a batch's, in order.
struct Job {
    items: Vec<Item>,
    pre: Vec<Option<Prepared>>,
}

/// What a queued write is answered: an answer per item, or an error for
/// the whole write (its round could not be made durable).
pub(super) type Answers = Result<Vec<Result<UpsertOutcome>>>;

enum Reply {
    /// A thread parked until its answer, or the lead, comes.
    Thread { state: Mutex<State>, cv: Condvar },
    /// Called once with the answer; leads through `spawn`.
    Call { answer: Mutex<Option<Answer>>, spawn: Spawn },
}

enum State {
    Waiting,
    /// Leads the next round.
    Lead,
    Done(Box<Answers>),
}

impl Waiter {
    fn new(job: Job, reply: Reply) -> Arc<Waiter> {
        Arc::new(Waiter { items: job.items.len(), job: Mutex::new(Some(job)), reply })
    }

    /// Gives the answer (once: a second is ignored).
    fn answer(&self, r: Answers) {
        match &self.reply {
            Reply::Thread { state, cv } => {
                if let Ok(mut s) = state.lock() {
                    if !matches!(*s, State::Done(_)) {
                        *s = State::Done(Box::new(r));
                    }
                }
                cv.notify_one();
            }
            Reply::Call { answer, .. } => {
                if let Some(f) = answer.lock().ok().and_then(|mut f| f.take()) {
                    let r = only_answer(r);
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(r)));
                }
            }
        }
    }

    /// Wakes this (queued, parked) writer to lead; `false` for a callback.
    fn wake_to_lead(&self) -> bool {
        let Reply::Thread { state, cv } = &self.reply else { return false };
        match state.lock() {
            Ok(mut s) => *s = State::Lead,
            Err(_) => return false,
        }
        cv.notify_one();
        true
    }
}

/// The lead of a tenant's queue of single upserts, handed to a caller of
/// [`Engine::upsert_queued`] that found no writer leading: pass it to
/// [`Engine::lead`] of the same engine on a thread that may block (locks,
/// log appends). Until then no round of the tenant runs; dropped unused,
/// it answers every queued write with an error and leaves the queue
/// without a leader, so the next write leads.
#[must_use = "a tenant's queued writes wait until its lead is passed to Engine::lead"]
pub struct Lead {
    engine: u64,
    job: Option<(Arc<TenantLock<Tenant>>, Arc<Combiner>)>,
}

impl std::fmt::Debug for Lead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lead").field("engine", &self.engine).finish_non_exhaustive()
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        if let Some((_, combiner)) = self.job.take() {
            combiner.abandon("the lead of its queue was dropped unused");
        }
    }
}

impl Combiner {
    /// The writers' copy of what fingerprinting needs, made from the
    /// tenant (under its read lock) the first time.
    pub(super) fn prefingerprinter(&self, t: &TenantLock<Tenant>) -> Result<Arc<Prefingerprinter>> {
        if let Some(p) = self.pre.lock().map_err(|_| poisoned())?.clone() {
            return Ok(p);
        }
        let p = Arc::new(t.read().map_err(|_| poisoned())?.prefingerprinter(!self.no_packing));
        *self.pre.lock().map_err(|_| poisoned())? = Some(Arc::clone(&p));
        Ok(p)
    }

    /// Under the tenant's write lock: renews the copy if the tenant's
    /// parameters or limit changed since it was made.
    pub(super) fn refresh(&self, t: &Tenant) {
        if let Ok(mut pre) = self.pre.lock() {
            if !pre.as_ref().is_some_and(|p| p.is_current(t)) {
                *pre = Some(Arc::new(t.prefingerprinter(!self.no_packing)));
            }
        }
    }

    /// Ends leading without a leader: every queued write is answered with
    /// an error (`why`).
    fn abandon(&self, why: &str) {
        let waiting = match self.state.lock() {
            Ok(mut q) => {
                q.leading = false;
                std::mem::take(&mut q.pending)
            }
            Err(_) => return,
        };
        for w in waiting {
            w.answer(Err(Error::state(format!("the write was not made: {why}"))));
        }
    }

    /// Queues `w`; `true` when no writer leads, so the caller now does.
    fn enqueue(&self, w: Arc<Waiter>) -> Result<bool> {
        let mut q = self.state.lock().map_err(|_| poisoned())?;
        q.pending.push_back(w);
        Ok(!std::mem::replace(&mut q.leading, true))
    }
}

impl Engine {
    /// The combiner of tenant `t` (named `tenant`). A combiner serves one
    /// tenant object: should the name come to stand for another (a
    /// creation undone and made again), the other gets a combiner of its
    /// own, so no round ever writes an item into a tenant its writer did
    /// not find.
    pub(super) fn combiner(&self, tenant: &str, t: &Arc<TenantLock<Tenant>>) -> Result<Arc<Combiner>> {
        let mut map = self.combiners.lock().map_err(|_| poisoned())?;
        let fresh = || Arc::new(Combiner { no_packing: self.replica.is_some(), ..Combiner::default() });
        let entry = map.entry(tenant.to_string()).or_insert_with(|| (Arc::downgrade(t), fresh()));
        if !std::ptr::eq(entry.0.as_ptr(), Arc::as_ptr(t)) {
            *entry = (Arc::downgrade(t), fresh());
        }
        Ok(Arc::clone(&entry.1))
    }

    /// Upserts `item` without waiting for the log or for other writes:
    /// makes it ready on this thread (fingerprint, and on a single node the
    /// text compressed), queues it, and returns. `answer` is called once
    /// with what [`Engine::upsert`] would return, once the write is durable
    /// (cluster mode: stored by the log's quorum and applied here).
    /// Whenever this write's queue needs a leader on its behalf — now,
    /// when no writer leads, or later, when the lead reaches it — `spawn`
    /// is given the [`Lead`], to pass to [`Engine::lead`] of this engine on
    /// a thread that may block; no round of the tenant runs until then.
    ///
    /// Only brief locks are taken here: the tenant map's, the queue's, and
    /// on a tenant's first write its read lock.
    pub fn upsert_queued(&self, tenant: &str, item: Item, answer: Answer, spawn: Spawn) -> Result<()> {
        let t = self.tenant(tenant)?;
        let combiner = self.combiner(tenant, &t)?;
        let pre = combiner.prefingerprinter(&t)?.prepare(&item);
        let job = Job { items: vec![item], pre: vec![pre] };
        let me = Waiter::new(job, Reply::Call { answer: Mutex::new(Some(answer)), spawn: Arc::clone(&spawn) });
        if combiner.enqueue(me)? {
            spawn(Lead { engine: self.id, job: Some((t, combiner)) });
        }
        Ok(())
    }

    /// Runs the rounds of a queue whose lead [`Engine::upsert_queued`]
    /// handed over, until the queue is empty or a parked writer takes the
    /// lead.
    pub fn lead(&self, mut lead: Lead) {
        if lead.engine != self.id {
            return; // dropped: its queue's writes are answered with an error
        }
        if let Some((t, combiner)) = lead.job.take() {
            self.lead_rounds(&t, &combiner, false);
        }
    }

    /// Writes `items` (fingerprinted as `pre`) through their tenant's
    /// queue, parking this thread: returns their answers once their round
    /// is durable.
    pub(super) fn write_combined(
        &self,
        combiner: &Arc<Combiner>,
        t: &Arc<TenantLock<Tenant>>,
        items: Vec<Item>,
        pre: Vec<Option<Prepared>>,
    ) -> Answers {
        let me =
            Waiter::new(Job { items, pre }, Reply::Thread { state: Mutex::new(State::Waiting), cv: Condvar::new() });
        if combiner.enqueue(Arc::clone(&me))? {
            self.lead_rounds(t, combiner, true);
        }
        let Reply::Thread { state, cv } = &me.reply else {
            return Err(Error::state("a parked writer lost its slot"));
        };
        let mut s = state.lock().map_err(|_| poisoned())?;
        loop {
            match std::mem::replace(&mut *s, State::Waiting) {
                State::Waiting => s = cv.wait(s).map_err(|_| poisoned())?,
                State::Lead => {
                    drop(s);
                    self.lead_rounds(t, combiner, true);
                    s = state.lock().map_err(|_| poisoned())?;
                }
                State::Done(r) => return *r,
            }
        }
    }

    /// Leads: writes rounds until the queue is empty (leading ends) or the
    /// lead passes to its front — a parked writer, woken; or a callback's
    /// `Spawn`, when this leader is a `parked` writer (a spawned leader
    /// keeps leading for callbacks).
    fn lead_rounds(&self, t: &Arc<TenantLock<Tenant>>, combiner: &Arc<Combiner>, parked: bool) {
        loop {
            self.round(t, combiner);
            let Ok(mut q) = combiner.state.lock() else { return };
            let spawn = match q.pending.front() {
                None => {
                    q.leading = false;
                    return;
                }
                Some(next) if next.wake_to_lead() => return,
                Some(next) => match (&next.reply, parked) {
                    (Reply::Call { spawn, .. }, true) => Arc::clone(spawn),
                    _ => continue,
                },
            };
            drop(q);
            spawn(Lead { engine: self.id, job: Some((Arc::clone(t), Arc::clone(combiner))) });
            return;
        }
    }

    /// Writes one round: the queue's first writes, whole, up to a round's
    /// items (at least one write). On a single node their answers go out
    /// once the log has made the round durable; in cluster mode once the
    /// round's entries are applied here.
    fn round(&self, t: &Arc<TenantLock<Tenant>>, combiner: &Combiner) {
        let most = if self.replica.is_some() { MAX_REPLICATED_ROUND } else { MAX_ROUND };
        let batch: Vec<Arc<Waiter>> = match combiner.state.lock() {
            Ok(mut q) => {
                let (mut n, mut items) = (0, 0);
                while let Some(w) = q.pending.get(n) {
                    if n > 0 && items + w.items > most {
                        break;
                    }
                    items += w.items;
                    n += 1;
                }
                q.pending.drain(..n).collect()
            }
            Err(_) => return,
        };
        // A panic below answers the round with an error and the lead goes
        // on: a queue must never be left without a leader.
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let jobs: Vec<Option<Job>> = batch.iter().map(|w| w.job.lock().ok().and_then(|mut j| j.take())).collect();
            let counts: Vec<Option<usize>> = jobs.iter().map(|j| j.as_ref().map(|j| j.items.len())).collect();
            let (mut items, mut pre) = (Vec::new(), Vec::new());
            for job in jobs.into_iter().flatten() {
                items.extend(job.items);
                pre.extend(job.pre);
            }
            let (written, lsn) = match &self.replica {
                None => {
                    let mut g = t.write().map_err(|_| poisoned())?;
                    combiner.refresh(&g);
                    self.upsert_all_locked(&mut g, &items, &pre)
                }
                Some(r) => (self.upsert_replicated(t, combiner, &items, &pre, r.max_entry_bytes())?, 0),
            };
            let mut written = written.into_iter();
            let results = counts
                .into_iter()
                .map(|count| match count {
                    Some(n) => {
                        let answers: Vec<_> = written.by_ref().take(n).collect();
                        match answers.len() == n {
                            true => Ok(answers),
                            false => Err(Error::state("a round lost an answer")),
                        }
                    }
                    None => Err(Error::state("a queued write was taken twice")),
                })
                .collect::<Vec<_>>();
            Ok::<_, Error>((results, lsn))
        }));
        let (results, last) = match written {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => (batch.iter().map(|_| Err(e.clone())).collect(), 0),
            Err(_) => (batch.iter().map(|_| Err(Error::state("the write failed: its round panicked"))).collect(), 0),
        };
        // Acknowledged only once durable; the next round applies meanwhile.
        let answer = move |durable: Result<()>| {
            for (w, r) in batch.iter().zip(results) {
                w.answer(match (&durable, r) {
                    (Err(e), Ok(answers)) if answers.iter().any(Result::is_ok) => Err(e.clone()),
                    (_, r) => r,
                });
            }
        };
        // Cluster mode: stored by the log's quorum and applied here already.
        self.when_durable(last, Box::new(answer));
    }
}

/// A single upsert's answer out of its write's answers.
pub(super) fn only_answer(r: Answers) -> Result<UpsertOutcome> {
    r?.pop().unwrap_or_else(|| Err(Error::state("a round lost an answer")))
}
