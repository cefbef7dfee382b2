//! The batch dedup pipeline over a stream of records, shared by `dedup` and `eval`.
//!
//! Records arrive in chunks. Per chunk: parse and fingerprint in parallel →
//! candidates and insertion, in input order (each item is compared with
//! every earlier item) → exact verification in parallel → decisions in input
//! order. Up to three chunks are fingerprinted at once, as small tasks of
//! the thread pool (a few hundred KB of input each, handed to it a few at a
//! time), while earlier ones are inserted, verified and decided.
//! One pass, bounded chunk memory; the index holds features of every item
//! seen.
//!
//! Decision rule ("greedy leaders", with the look further among kept items
//! when the cap cut close): [`neardup_core::Greedy`], the one
//! implementation the Python package calls too. Clusters (connected
//! components of verified pairs) are reported, with the kept items of each.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use neardup_core::{CandidateSet, Fingerprinter, Match, MemoryIndex, Params};
use neardup_core::{Decided, Greedy};
use rayon::prelude::*;

use crate::chunk::{Chunk, Input, ReadOptions};
use crate::input::for_each_chunk;
use crate::jsonl::{Line, Reject};
use neardup_core::Keep;
use neardup_core::UnionFind;

/// Where the time went, per phase (wall clock; phases overlap).
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct Timings {
    pub read_s: f64,
    /// The fingerprinting tasks' seconds, summed, over the pool's threads:
    /// the wall time they would take with every thread busy.
    pub fingerprint_s: f64,
    pub index_s: f64,
    pub verify_s: f64,
    pub output_s: f64,
}

/// What happened to one accepted record.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub id: u32,
    pub line: u64,
    /// The input it came from.
    pub input: u32,
    /// What the decision rule decided.
    pub decided: Decided,
    pub degraded: bool,
}

/// Batch dedup state.
pub struct Batch {
    pub fingerprinter: Fingerprinter,
    pub index: MemoryIndex,
    pub ids: Vec<String>,
    id_to_item: HashMap<String, u32>,
    /// The decision rule, and which items it kept.
    pub rule: Greedy,
    pub uf: UnionFind,
    text_field: String,
    id_field: String,
    pub timings: Timings,
    pub bytes: u64,
    pub candidate_counts: Vec<usize>,
    /// Every LSH candidate pair (earlier, later), collected only for `eval`.
    pub candidate_pairs: Option<Vec<(u32, u32)>>,
    /// Where each input begins, when the run reads several: records
    /// without an id are then named `FILE:LINE`.
    pub sources: Option<std::sync::Arc<crate::input::Sources>>,
    /// The keeper policy: items are decided in the order it induces.
    pub keep: Keep,
    /// Records without a value for the keeper policy's field.
    pub keep_missing: u64,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch").field("items", &self.ids.len()).field("bytes", &self.bytes).finish_non_exhaustive()
    }
}

/// A record parsed and fingerprinted: its id field, fingerprint and order
/// key under the keeper policy ([`Keep::order`]).
pub(crate) struct Fingerprinted {
    pub id: Option<String>,
    pub fp: neardup_core::Fingerprint,
    pub order: u64,
}

/// An accepted record waiting to be inserted and decided.
struct Pending {
    external: String,
    fp: neardup_core::Fingerprint,
    line: u64,
    input: u32,
    order: u64,
}

/// Each line parsed and fingerprinted, in input order.
pub(crate) type Parsed = Vec<Result<Fingerprinted, String>>;

/// Chunks being parsed and fingerprinted at once (each up to 4,096 records
/// or 8 MB): enough that idle cores take up the next chunk while one
/// finishes its longest record, few enough to bound memory.
const CHUNKS_IN_FLIGHT: u64 = 3;

/// Items inserted and decided together under a keeper policy (as a chunk
/// of input is otherwise).
const ORDERED_BLOCK: usize = 4096;

/// A chunk is fingerprinted as tasks of about this many bytes of input (or
/// [`TASK_LINES`] lines), each a task of the pool of its own.
const TASK_BYTES: usize = 256 << 10;
const TASK_LINES: usize = 256;

/// A chunk in the first stage, held by the pipeline until its turn.
struct InFlight {
    chunk: Arc<Chunk>,
    rejects: Vec<Reject>,
    tasks: Arc<Tasks>,
}

/// The results of a chunk's tasks, each in its slot, and how many tasks
/// are still running: the chunk is ready when none is.
struct Tasks {
    slots: Vec<Mutex<(Parsed, f64)>>,
    left: AtomicUsize,
}

impl Tasks {
    fn done(&self) -> bool {
        self.left.load(Ordering::Acquire) == 0
    }

    /// The chunk's results in line order, and the seconds its tasks took,
    /// summed; once every task is done.
    fn take(&self) -> (Parsed, f64) {
        let mut parsed = Vec::new();
        let mut seconds = 0.0;
        for slot in &self.slots {
            let (part, s) = std::mem::take(&mut *slot.lock().unwrap_or_else(PoisonError::into_inner));
            parsed.extend(part);
            seconds += s;
        }
        (parsed, seconds)
    }
}

/// The parallel first stage: parse and fingerprint lines.
struct Fingerprinting {
    /// One per thread of the pool, so that no task clones one.
    fingerprinters: Vec<Mutex<Fingerprinter>>,
    text_field: String,
    id_field: String,
    keep: Keep,
}

impl Fingerprinting {
    /// The lines parsed and fingerprinted on this thread, and the seconds
    /// it took.
    fn run(&self, lines: &[Line]) -> (Parsed, f64) {
        let t = Instant::now();
        // Tasks run on the pool; a caller from another pool shares the last.
        let last = self.fingerprinters.len() - 1;
        let at = rayon::current_thread_index().map_or(last, |i| i.min(last));
        let mut fpr = self.fingerprinters[at].lock().unwrap_or_else(PoisonError::into_inner);
        let (tf, idf) = (self.text_field.as_str(), self.id_field.as_str());
        // Parsed first, then fingerprinted together (content hashes of
        // several texts are computed side by side).
        let key_field = self.keep.field();
        let records: Vec<_> = lines.iter().map(|line| line.record_keyed(tf, idf, key_field)).collect();
        let mut fingerprints = Vec::with_capacity(records.len());
        fpr.fingerprint_many(records.iter().filter_map(|r| r.as_ref().ok()).map(|r| &*r.text), &mut fingerprints);
        let mut fingerprints = fingerprints.into_iter();
        let parsed = records
            .into_iter()
            .map(|record| {
                let rec = record?;
                let fp = fingerprints.next().expect("a fingerprint per parsed record");
                let order = self.keep.order(rec.text.len(), rec.key);
                Ok(Fingerprinted { id: rec.id.map(|c| c.into_owned()), fp, order })
            })
            .collect();
        (parsed, t.elapsed().as_secs_f64())
    }

    /// Fingerprints `chunk` as tasks of ~[`TASK_BYTES`] handed to the pool
    /// in order through `feeder`; none waits for another, so chunks finish
    /// in about the order they were started in. (A chunk that was one task
    /// splitting its lines across the pool finished behind later chunks: a
    /// thread waiting inside the split for its partner took up the next
    /// chunk's task, and had to finish it before returning.) The last task
    /// to finish wakes the pipeline through `done`.
    fn start(
        self: &Arc<Self>,
        feeder: &Arc<Feeder>,
        chunk: Arc<Chunk>,
        done: &std::sync::mpsc::Sender<()>,
    ) -> Arc<Tasks> {
        let mut ranges = Vec::new();
        let (mut from, mut bytes) = (0, 0);
        for (i, line) in chunk.lines.iter().enumerate() {
            bytes += line.len();
            if bytes >= TASK_BYTES || i + 1 - from >= TASK_LINES {
                ranges.push(from..i + 1);
                (from, bytes) = (i + 1, 0);
            }
        }
        if from < chunk.lines.len() || ranges.is_empty() {
            ranges.push(from..chunk.lines.len());
        }
        let tasks = Arc::new(Tasks {
            slots: ranges.iter().map(|_| Mutex::new((Vec::new(), 0.0))).collect(),
            left: AtomicUsize::new(ranges.len()),
        });
        let jobs = ranges
            .into_iter()
            .enumerate()
            .map(|(slot, range)| {
                let (stage, chunk, tasks, done) =
                    (Arc::clone(self), Arc::clone(&chunk), Arc::clone(&tasks), done.clone());
                Box::new(move || {
                    let result = stage.run(&chunk.lines[range]);
                    *tasks.slots[slot].lock().unwrap_or_else(PoisonError::into_inner) = result;
                    if tasks.left.fetch_sub(1, Ordering::AcqRel) == 1 {
                        // The receiver is gone only when the run already failed.
                        let _ = done.send(());
                    }
                }) as Job
            })
            .collect();
        feeder.push(jobs);
        tasks
    }
}

/// A task of the first stage.
type Job = Box<dyn FnOnce() + Send>;

/// Hands the first stage's tasks to the pool a few at a time, from a
/// thread of its own. What the pool is given from outside waits in one
/// first-in, first-out queue: with every task of the chunks in flight in
/// it, a chunk's filing and verification (pool work too, given from the
/// pipeline's thread) waited behind all of them. So the pool holds at most
/// `limit` of these tasks at once, and a task's end wakes the feeder to hand
/// it the next — from outside the pool: handed over from a pool thread, it
/// would go to that thread's own queue, which the thread serves before
/// anything given from outside.
struct Feeder {
    state: Mutex<Feed>,
    wake: std::sync::Condvar,
    limit: usize,
}

/// The feeder's queue, and how many of its tasks the pool holds.
#[derive(Default)]
struct Feed {
    queue: std::collections::VecDeque<Job>,
    out: usize,
    closed: bool,
}

impl Feeder {
    fn lock(&self) -> std::sync::MutexGuard<'_, Feed> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, jobs: Vec<Job>) {
        self.lock().queue.extend(jobs);
        self.wake.notify_one();
    }

    /// Stops the feeder thread; tasks not yet handed over are dropped.
    fn close(&self) {
        let mut feed = self.lock();
        feed.closed = true;
        feed.queue.clear();
        drop(feed);
        self.wake.notify_one();
    }

    /// The feeder thread: hands the pool queued tasks while it holds fewer
    /// than `limit`, until closed.
    fn run(self: &Arc<Self>) {
        let mut feed = self.lock();
        while !feed.closed {
            while feed.out < self.limit {
                let Some(job) = feed.queue.pop_front() else { break };
                feed.out += 1;
                let feeder = Arc::clone(self);
                rayon::spawn_fifo(move || {
                    job();
                    feeder.lock().out -= 1;
                    feeder.wake.notify_one();
                });
            }
            feed = self.wake.wait(feed).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Closes the feeder when the run ends, however it ends.
struct CloseOnDrop(Arc<Feeder>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Parses and fingerprints the inputs, and hands `sink` each chunk with its
/// results, strictly in input order (the chunk's rejects are moved to
/// `rejects` first). Each chunk is parsed and fingerprinted as tasks of the
/// thread pool as soon as it is read, up to [`CHUNKS_IN_FLIGHT`] chunks at
/// once, so a long record at the end of one chunk does not leave the other
/// cores idle: they take up the next chunk's tasks meanwhile. Returns the
/// time spent reading, and the fingerprinting tasks' seconds over the
/// pool's threads. The in-memory batch and the batch on disk both read
/// through this.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fingerprint_all<F>(
    fingerprinter: &Fingerprinter,
    text_field: &str,
    id_field: &str,
    keep: &Keep,
    inputs: &[Input],
    opts: &ReadOptions,
    sources: Option<&crate::input::Sources>,
    rejects: &mut Vec<Reject>,
    sink: F,
) -> anyhow::Result<(f64, f64)>
where
    F: FnMut(&Chunk, Parsed, &mut Vec<Reject>) -> anyhow::Result<()>,
{
    let threads = rayon::current_num_threads();
    let stage = Arc::new(Fingerprinting {
        fingerprinters: (0..threads).map(|_| Mutex::new(fingerprinter.clone())).collect(),
        text_field: text_field.to_owned(),
        id_field: id_field.to_owned(),
        keep: keep.clone(),
    });
    // One task more than threads: a thread done with one finds the next
    // already given while the feeder wakes.
    let feeder = Arc::new(Feeder { state: Mutex::default(), wake: std::sync::Condvar::new(), limit: threads + 1 });
    let mut ordered = Ordered { sink, next: 0, fingerprint_s: 0.0, in_flight: std::collections::BTreeMap::new() };
    let read_s = std::thread::scope(|scope| {
        let feeding = Arc::clone(&feeder);
        scope.spawn(move || feeding.run());
        let _close = CloseOnDrop(Arc::clone(&feeder));
        ordered.run(&stage, &feeder, inputs, opts, sources, rejects)
    })?;
    Ok((read_s, ordered.fingerprint_s))
}

/// A record's id: its id field, else where it is (`FILE:LINE` when the run
/// reads several inputs, its record number otherwise).
pub(crate) fn external_id(id: Option<String>, line: u64, sources: Option<&crate::input::Sources>) -> String {
    id.unwrap_or_else(|| match sources.and_then(|s| s.locate(line)) {
        Some((file, n)) => format!("{file}:{n}"),
        None => line.to_string(),
    })
}

/// The chunks being fingerprinted, handed to the sink in input order.
struct Ordered<F> {
    sink: F,
    /// The next chunk the sink is owed.
    next: u64,
    fingerprint_s: f64,
    in_flight: std::collections::BTreeMap<u64, InFlight>,
}

impl<F> Ordered<F>
where
    F: FnMut(&Chunk, Parsed, &mut Vec<Reject>) -> anyhow::Result<()>,
{
    fn run(
        &mut self,
        stage: &Arc<Fingerprinting>,
        feeder: &Arc<Feeder>,
        inputs: &[Input],
        opts: &ReadOptions,
        sources: Option<&crate::input::Sources>,
        rejects: &mut Vec<Reject>,
    ) -> anyhow::Result<f64> {
        // A finished chunk's wake-up; which chunks are done, their tasks say.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let mut sent = 0u64;
        let read_s = for_each_chunk(inputs, opts, sources, |mut chunk| {
            let chunk_rejects = std::mem::take(&mut chunk.rejects);
            let chunk = Arc::new(chunk);
            let tasks = stage.start(feeder, Arc::clone(&chunk), &tx);
            self.in_flight.insert(sent, InFlight { chunk, rejects: chunk_rejects, tasks });
            sent += 1;
            // Take every finished chunk; wait for one while too many are
            // not yet applied (chunks done out of order count: memory).
            loop {
                let woken = if sent - self.next >= CHUNKS_IN_FLIGHT { rx.recv().ok() } else { rx.try_recv().ok() };
                if woken.is_none() {
                    break;
                }
                self.apply_ready(rejects)?;
            }
            Ok(())
        })?;
        drop(tx);
        // The chunk at `next` was not done when last looked at, so its
        // wake-up is still to come (one left behind by a chunk applied
        // before its wake-up was read only makes a round find nothing new).
        while self.next < sent {
            rx.recv().map_err(|_| anyhow::anyhow!("a fingerprinting task ended without its result"))?;
            self.apply_ready(rejects)?;
        }
        Ok(read_s)
    }

    /// Hands the sink the chunks that are next in input order and done.
    fn apply_ready(&mut self, rejects: &mut Vec<Reject>) -> anyhow::Result<()> {
        loop {
            let InFlight { chunk, rejects: mut chunk_rejects, tasks } = match self.in_flight.entry(self.next) {
                std::collections::btree_map::Entry::Occupied(c) if c.get().tasks.done() => c.remove(),
                _ => break,
            };
            self.next += 1;
            let (parsed, seconds) = tasks.take();
            // Tasks' seconds, summed, over the threads that ran them.
            self.fingerprint_s += seconds / rayon::current_num_threads() as f64;
            rejects.append(&mut chunk_rejects);
            (self.sink)(&chunk, parsed, rejects)?;
        }
        Ok(())
    }
}

impl Batch {
    pub fn new(params: Params, text_field: &str, id_field: &str) -> anyhow::Result<Batch> {
        Ok(Batch {
            fingerprinter: Fingerprinter::new(params.clone())?,
            index: MemoryIndex::new(params),
            ids: Vec::new(),
            id_to_item: HashMap::new(),
            rule: Greedy::new(),
            uf: UnionFind::default(),
            text_field: text_field.to_owned(),
            id_field: id_field.to_owned(),
            timings: Timings::default(),
            bytes: 0,
            candidate_counts: Vec::new(),
            candidate_pairs: None,
            sources: None,
            keep: Keep::First,
            keep_missing: 0,
        })
    }

    /// Adds an item from a saved index, before any input is read: its id,
    /// whether it was kept, its image row and features. Returns its number.
    pub fn push_saved(
        &mut self,
        id: String,
        kept: bool,
        row: neardup_core::ImageRow<'_>,
        features: Vec<u64>,
    ) -> anyhow::Result<u32> {
        if self.id_to_item.contains_key(&id) {
            anyhow::bail!("the id {id:?} is in the index twice");
        }
        let item = self.index.insert_row(row, features)?;
        self.id_to_item.insert(id.clone(), item);
        self.ids.push(id);
        self.rule.set_kept(item, kept);
        self.uf.push();
        Ok(item)
    }

    /// Runs the inputs through the pipeline: `f` sees each chunk with its
    /// outcomes, in input order. Chunks are fingerprinted by
    /// [`fingerprint_all`], then inserted, verified and decided strictly in
    /// input order, so the results do not depend on the thread count.
    /// The chunk's rejects are moved to `rejects` before `f` sees it.
    /// Returns the time spent reading.
    ///
    /// Under a keeper policy other than `first` ([`Batch::run_ordered`])
    /// use that instead: items are decided only once every one is read.
    pub fn run<F>(
        &mut self,
        inputs: &[Input],
        opts: &ReadOptions,
        rejects: &mut Vec<Reject>,
        mut f: F,
    ) -> anyhow::Result<f64>
    where
        F: FnMut(&Batch, &Chunk, &[Outcome]) -> anyhow::Result<()>,
    {
        debug_assert!(self.keep.is_first());
        self.read(inputs, opts, rejects, |batch, chunk, pending| {
            let outcomes = batch.insert_and_decide(pending)?;
            f(batch, chunk, &outcomes)
        })
    }

    /// Runs the inputs under the keeper policy: every record is read and
    /// fingerprinted first, then items are inserted and decided in the
    /// policy's order (ties in input order), in blocks; `f` sees each
    /// block's outcomes in that order, `read` each chunk once it is read.
    /// Returns the time spent reading.
    pub fn run_ordered<F>(
        &mut self,
        inputs: &[Input],
        opts: &ReadOptions,
        rejects: &mut Vec<Reject>,
        mut read: impl FnMut(&Chunk),
        mut f: F,
    ) -> anyhow::Result<f64>
    where
        F: FnMut(&Batch, &[Outcome]) -> anyhow::Result<()>,
    {
        let mut all: Vec<Pending> = Vec::new();
        let read_s = self.read(inputs, opts, rejects, |_, chunk, pending| {
            all.extend(pending);
            read(chunk);
            Ok(())
        })?;
        // Stable: equal keys keep input order.
        all.sort_by_key(|p| p.order);
        self.keep_missing = all.iter().filter(|p| p.order == u64::MAX).count() as u64;
        let mut all = all.into_iter();
        loop {
            let block: Vec<Pending> = all.by_ref().take(ORDERED_BLOCK).collect();
            if block.is_empty() {
                break;
            }
            let outcomes = self.insert_and_decide(block)?;
            f(self, &outcomes)?;
        }
        Ok(read_s)
    }

    /// Reads and fingerprints the inputs; `f` sees each chunk's accepted
    /// records, in input order.
    fn read<F>(
        &mut self,
        inputs: &[Input],
        opts: &ReadOptions,
        rejects: &mut Vec<Reject>,
        mut f: F,
    ) -> anyhow::Result<f64>
    where
        F: FnMut(&mut Batch, &Chunk, Vec<Pending>) -> anyhow::Result<()>,
    {
        let fingerprinter = self.fingerprinter.clone();
        let (text_field, id_field) = (self.text_field.clone(), self.id_field.clone());
        let sources = self.sources.clone();
        let keep = self.keep.clone();
        let (read_s, fingerprint_s) = fingerprint_all(
            &fingerprinter,
            &text_field,
            &id_field,
            &keep,
            inputs,
            opts,
            sources.as_deref(),
            rejects,
            |chunk, parsed, rejects| {
                let pending = self.accept(chunk, parsed, rejects);
                f(self, chunk, pending)
            },
        )?;
        self.timings.fingerprint_s += fingerprint_s;
        Ok(read_s)
    }

    /// The chunk's records that are items: lines that failed to parse, and
    /// repeated ids, go to `rejects`.
    fn accept(&mut self, chunk: &Chunk, parsed: Parsed, rejects: &mut Vec<Reject>) -> Vec<Pending> {
        let mut staged = Vec::with_capacity(chunk.lines.len());
        for (line, result) in chunk.lines.iter().zip(parsed) {
            let Fingerprinted { id, fp, order } = match result {
                Ok(x) => x,
                Err(reason) => {
                    rejects.push(Reject::at(line.number, reason));
                    continue;
                }
            };
            let external = external_id(id, line.number, self.sources.as_deref());
            // The item is numbered when it is inserted; until then its id
            // is held by a placeholder, so a repeat is found either way.
            if self.id_to_item.contains_key(&external) {
                rejects.push(Reject::at(
                    line.number,
                    format!("duplicate item id {external:?} (first seen as item {external:?}); ids must be unique"),
                ));
                continue;
            }
            self.id_to_item.insert(external.clone(), u32::MAX);
            self.bytes += line.len() as u64;
            staged.push(Pending { external, fp, line: line.number, input: chunk.input as u32, order });
        }
        staged
    }

    /// Inserts, verifies and decides accepted records, in the order given.
    fn insert_and_decide(&mut self, staged: Vec<Pending>) -> anyhow::Result<Vec<Outcome>> {
        // Insert in order: ids grow with it, so `candidates_before` can
        // then ask, for every item at once, what an item-by-item pass
        // would have seen.
        let t1 = Instant::now();
        let mut items: Vec<(u32, u64, u32, bool)> = Vec::with_capacity(staged.len());
        let mut loader = self.index.loader();
        for Pending { external, fp, line, input, .. } in staged {
            let degraded = fp.degraded.is_some();
            let item = loader.insert(fp)?;
            // The placeholder `accept` left takes the item's number.
            if let Some(placeholder) = self.id_to_item.get_mut(&external) {
                *placeholder = item;
            }
            self.ids.push(external);
            self.uf.push();
            items.push((item, line, input, degraded));
        }
        // The postings, a table per job: on the pool when it has more than
        // one thread (the tables share nothing, and each is filed in id
        // order, so the buckets are the same either way), else here,
        // beside the pool's fingerprinting of the chunks ahead.
        loader.file_with(|jobs| {
            if rayon::current_num_threads() > 1 {
                jobs.into_par_iter().for_each(neardup_core::Filing::run);
            } else {
                jobs.into_iter().for_each(neardup_core::Filing::run);
            }
        });
        drop(loader);
        self.timings.index_s += t1.elapsed().as_secs_f64();

        let t2 = Instant::now();
        let index = &self.index;
        let looks: Vec<(CandidateSet, Vec<Match>)> =
            items.par_iter().map(|&(item, ..)| Greedy::look(index, item)).collect();
        self.timings.verify_s += t2.elapsed().as_secs_f64();

        let t3 = Instant::now();
        let mut out = Vec::with_capacity(items.len());
        for ((item, line, input, degraded), look) in items.into_iter().zip(looks) {
            self.candidate_counts.push(look.0.ids.len());
            let pairs = &mut self.candidate_pairs;
            if let Some(pairs) = pairs.as_mut() {
                pairs.extend(look.0.ids.iter().map(|c| (c.id, item)));
            }
            let d = self.rule.decide(&self.index, item, look, &mut |tried| {
                if let Some(pairs) = pairs.as_mut() {
                    pairs.extend(tried.iter().map(|c| (c.id, item)));
                }
            });
            for m in &d.matches {
                self.uf.union(item, m.id);
            }
            out.push(Outcome { id: item, line, input, decided: d, degraded });
        }
        self.timings.index_s += t3.elapsed().as_secs_f64();
        Ok(out)
    }

    /// The cluster of each item, as the number of its first item (in input
    /// order): what `--annotate` names and the saved index records.
    pub fn cluster_firsts(&mut self) -> Vec<u32> {
        let n = self.ids.len() as u32;
        let mut first_of_root = vec![u32::MAX; n as usize];
        (0..n)
            .map(|i| {
                let r = self.uf.find(i) as usize;
                if first_of_root[r] == u32::MAX {
                    first_of_root[r] = i;
                }
                first_of_root[r]
            })
            .collect()
    }

    /// Connected components of verified pairs with more than one member:
    /// (members in input order, kept members).
    pub fn clusters(&mut self) -> Vec<(Vec<u32>, Vec<u32>)> {
        let mut by_root: HashMap<u32, Vec<u32>> = HashMap::new();
        for id in 0..self.uf.len() as u32 {
            let r = self.uf.find(id);
            by_root.entry(r).or_default().push(id);
        }
        let mut clusters: Vec<(Vec<u32>, Vec<u32>)> = by_root
            .into_values()
            .filter(|m| m.len() > 1)
            .map(|m| {
                let kept = m.iter().copied().filter(|&i| self.rule.is_kept(i)).collect();
                (m, kept)
            })
            .collect();
        clusters.sort_unstable_by_key(|(m, _)| m[0]);
        clusters
    }
}
