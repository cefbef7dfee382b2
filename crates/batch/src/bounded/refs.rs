//! Buckets and references, and the reads of the verify phase: a bucket
//! (or content class) of more than one item is written once, each member
//! after the first gets a reference to the prefix it would have seen in
//! memory, and an item's references give back its in-memory bucket reads.

use std::io::{BufWriter, Write};
use std::path::Path;

use neardup_core::{
    best_first, fmix64, verify_pair, verify_pair_by_sizes, Candidate, CandidateIndex, CandidateSet, ContentHash,
    Lookup, Match, PairScore, QueryLimits, SketchReads,
};

use super::sort::{self, Sorter};
use super::store::{Mapped, Store, MAPPED_WRITE_BUFFER};
use super::work::Relief;
use super::{Bits, CONTENT};

/// A reference from an item to the bucket (or content class) it shares:
/// `p` members before it, the bucket's members from entry `at` of its file.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ref {
    pub(super) table: u16,
    pub(super) key: u32,
    pub(super) at: u64,
    pub(super) p: u32,
}

pub(super) fn ref_rec(q: u32, r: Ref) -> [u8; 22] {
    let mut b = [0u8; 22];
    b[0..4].copy_from_slice(&q.to_be_bytes());
    b[4..6].copy_from_slice(&r.table.to_be_bytes());
    b[6..10].copy_from_slice(&r.key.to_be_bytes());
    b[10..18].copy_from_slice(&r.at.to_be_bytes());
    b[18..22].copy_from_slice(&r.p.to_be_bytes());
    b
}

pub(super) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

pub(super) fn ref_of(b: &[u8; 22]) -> (u32, Ref) {
    let at = u64::from_be_bytes(b[10..18].try_into().expect("8 bytes"));
    (be32(&b[0..4]), Ref { table: u16::from_be_bytes([b[4], b[5]]), key: be32(&b[6..10]), at, p: be32(&b[18..22]) })
}

/// Writes buckets of more than one member to a file of `u32` entries, and
/// a reference for each member after the first.
pub(super) struct Buckets {
    out: BufWriter<std::fs::File>,
    written: u64,
    /// The current bucket: its first member (not yet written), where it
    /// starts once written, and members so far.
    first: u32,
    at: Option<u64>,
    members: u32,
}

impl Buckets {
    pub(super) fn create(path: &Path) -> anyhow::Result<Buckets> {
        let out = BufWriter::with_capacity(MAPPED_WRITE_BUFFER, std::fs::File::create(path)?);
        Ok(Buckets { out, written: 0, first: 0, at: None, members: 0 })
    }

    pub(super) fn start(&mut self, first: u32) {
        (self.first, self.at, self.members) = (first, None, 1);
    }

    /// Adds the next member; returns the reference it gets.
    pub(super) fn member(&mut self, item: u32, table: u16, key: u32) -> anyhow::Result<Ref> {
        let at = match self.at {
            Some(at) => at,
            None => {
                self.out.write_all(&self.first.to_le_bytes())?;
                self.at = Some(self.written);
                self.written += 1;
                self.written - 1
            }
        };
        self.out.write_all(&item.to_le_bytes())?;
        self.written += 1;
        let r = Ref { table, key, at, p: self.members };
        self.members += 1;
        Ok(r)
    }

    pub(super) fn finish(self) -> anyhow::Result<u64> {
        self.out.into_inner().map_err(|e| e.into_error())?;
        Ok(self.written * 4)
    }
}

/// Streams sorted records of a key and an item (the item in the last four
/// bytes, big-endian), rejected items left out: each run of equal keys is
/// a bucket, written to `path` when it has more than one member, and each
/// member after the first gets a reference in `refs` under the table and
/// key `table_of` reads from the record's key. `each(item, first)` sees
/// every member with its bucket's first. Returns the bytes written.
pub(super) fn write_buckets<const N: usize>(
    records: sort::Merged<N>,
    path: &Path,
    rejected: &Bits,
    refs: &mut Sorter<22>,
    table_of: impl Fn(&[u8]) -> (u16, u32),
    mut each: impl FnMut(u32, u32),
) -> anyhow::Result<u64> {
    let mut out = Buckets::create(path)?;
    let mut key: Option<[u8; N]> = None;
    for rec in records {
        let rec = rec?;
        let item = be32(&rec[N - 4..]);
        if rejected.get(item) {
            continue;
        }
        let same = key.is_some_and(|k| k[..N - 4] == rec[..N - 4]);
        if same {
            let (table, k) = table_of(&rec[..N - 4]);
            refs.push(ref_rec(item, out.member(item, table, k)?))?;
        } else {
            key = Some(rec);
            out.start(item);
        }
        each(item, out.first);
    }
    out.finish()
}

/// Entry `i` of a bucket file.
pub(super) fn entry(bytes: &[u8], i: u64) -> u32 {
    let at = i as usize * 4;
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// What the verify and decide phases read.
pub(super) struct Reader<'a> {
    pub(super) store: &'a Store,
    pub(super) buckets: &'a Mapped,
    pub(super) classes: &'a Mapped,
    pub(super) class: &'a [u32],
    pub(super) scale: &'a CandidateIndex,
    pub(super) limits: QueryLimits,
    pub(super) threshold: f64,
    /// Set when an item's features lay outside the work folder's file.
    pub(super) corrupt: &'a std::sync::atomic::AtomicBool,
    /// Told of every read of the mapped records and buckets.
    pub(super) relief: &'a Relief<'a>,
    /// Whether candidates' features are asked for ahead of their reads
    /// ([`Reader::prefetch`]): when they are mostly on disk.
    pub(super) prefetch: bool,
}

impl Reader<'_> {
    /// The bucket reads of item `q` (as the in-memory query reads its
    /// buckets), counted per item: the band candidates with the bands they
    /// share, and the read counters.
    pub(super) fn gather(&self, refs: &[Ref]) -> (Vec<(u32, u16)>, CandidateSet) {
        let mut out = CandidateSet::default();
        let mut ids: Vec<u32> = Vec::new();
        let bytes = self.buckets.bytes();
        let mbr = self.limits.max_bucket_read;
        for r in refs.iter().filter(|r| r.table != CONTENT) {
            let n = r.p as usize;
            let mut read = |from: usize, to: usize| ids.extend((from..to).map(|i| entry(bytes, r.at + i as u64)));
            if n > mbr {
                out.hot_buckets += 1;
                let start = (fmix64(u64::from(r.key) ^ (u64::from(r.table) << 40) ^ n as u64) % n as u64) as usize;
                let end = (start + mbr).min(n);
                read(start, end);
                read(0, mbr - (end - start));
                out.entries_read += mbr;
            } else {
                read(0, n);
                out.entries_read += n;
            }
        }
        ids.sort_unstable();
        let mut ranked: Vec<(u32, u16)> = Vec::new();
        for id in ids {
            match ranked.last_mut() {
                Some((last, count)) if *last == id => *count += 1,
                _ => ranked.push((id, 1)),
            }
        }
        (ranked, out)
    }

    /// Item `q`'s candidates among the items before it that `keep` accepts,
    /// by [`CandidateIndex::select`].
    pub(super) fn candidates(&self, q: u32, refs: &[Ref], keep: &dyn Fn(u32) -> bool) -> CandidateSet {
        let (ranked, out) = self.gather(refs);
        let copies = refs.iter().find(|r| r.table == CONTENT).copied();
        let classes = self.classes.bytes();
        let copies = copies.into_iter().flat_map(|r| (0..u64::from(r.p)).map(move |i| entry(classes, r.at + i)));
        // Reads of mapped pages: a bucket or class run each, and a record
        // per candidate ranked (or the item itself).
        self.relief.read(refs.len() + ranked.len() + 1);
        let sketch = self.store.rec(q).sketch();
        let q_class = self.class[q as usize];
        let reads = SketchReads {
            same_content: |c: u32| self.class[c as usize] == q_class,
            within_hamming: |c: u32| self.scale.within_hamming_of(sketch, self.store.rec(c).sketch()),
            rank_keys: |ranked: &[(u32, u16)]| {
                let mut sketches = Vec::with_capacity(ranked.len() * sketch.len());
                for &(c, _) in ranked {
                    sketches.extend_from_slice(self.store.rec(c).sketch());
                }
                self.scale.rank_keys_by(sketch, ranked, &sketches)
            },
        };
        self.scale.select(out, ranked, copies, reads, self.limits, keep)
    }

    /// Asks for the features of `q`'s candidates that [`Reader::verify`]
    /// will read (those sizes do not settle), so that their reads from
    /// disk run at once, not one after another: a no-op unless
    /// [`Reader::prefetch`] is set.
    pub(super) fn prefetch(&self, q: u32, candidates: &[Candidate]) {
        if !self.prefetch {
            return;
        }
        let sizes = self.sizes(q);
        for c in candidates {
            if self.settled(sizes, self.sizes(c.id)).is_none() {
                self.store.prefetch(c.id, c.id + 1);
            }
        }
    }

    /// An item's content hash and feature count, from its record.
    fn sizes(&self, item: u32) -> (ContentHash, usize) {
        (self.store.rec(item).hash(), self.store.features_len(item))
    }

    /// What [`verify_pair_by_sizes`] answers for a query and a candidate
    /// of these [`Reader::sizes`]: `None` when their features must be read.
    fn settled(&self, (hq, nq): (ContentHash, usize), (hc, nc): (ContentHash, usize)) -> Option<Option<PairScore>> {
        verify_pair_by_sizes(nq, &hq, nc, &hc, self.threshold)
    }

    /// Item `q`'s candidates verified exactly, best first. A candidate's
    /// features are read from disk only when its content hash and feature
    /// count do not settle the pair ([`verify_pair_by_sizes`]), and `q`'s
    /// only when one does not.
    pub(super) fn verify(&self, q: u32, candidates: &[Candidate]) -> Vec<Match> {
        let features = |item: u32| {
            let f = self.store.features(item);
            if f.is_none() {
                self.corrupt.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            f
        };
        self.relief.read(candidates.len() + 1);
        let sizes = self.sizes(q);
        let mut fq: Option<Vec<u64>> = None;
        let mut out = Vec::new();
        for c in candidates {
            let c_sizes = self.sizes(c.id);
            let s = match self.settled(sizes, c_sizes) {
                Some(answer) => answer,
                None => {
                    if fq.is_none() {
                        fq = features(q);
                        if fq.is_none() {
                            return Vec::new();
                        }
                    }
                    let (Some(a), Some(b)) = (fq.as_deref(), features(c.id)) else { continue };
                    verify_pair(a, &sizes.0, &b, &c_sizes.0, self.threshold)
                }
            };
            if let Some(s) = s {
                out.push(Match { id: c.id, score: s.score, same_content: s.same_content, bands: c.bands });
            }
        }
        best_first(&mut out);
        out
    }
}

/// The decision rule's view of one item's references.
pub(super) struct ItemLookup<'a, 'r> {
    pub(super) reader: &'a Reader<'r>,
    pub(super) refs: &'a [Ref],
}

impl Lookup for ItemLookup<'_, '_> {
    fn verify_item(&self, item: u32, candidates: &[Candidate]) -> Vec<Match> {
        self.reader.prefetch(item, candidates);
        self.reader.verify(item, candidates)
    }
    fn candidates_before_where(&self, item: u32, keep: &dyn Fn(u32) -> bool) -> CandidateSet {
        self.reader.candidates(item, self.refs, keep)
    }
}
