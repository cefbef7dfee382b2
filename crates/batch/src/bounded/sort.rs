//! External sort of fixed-size records: sorted runs on disk, merged.
//!
//! Records are byte arrays compared as bytes, so a record written with its
//! fields big-endian sorts by those fields in order. Records are kept in a
//! buffer of at most the budget's size; a full buffer is sorted and written
//! as a run. [`Sorter::finish`] merges the runs (in passes of at most
//! [`FAN_IN`] runs, so that a tiny budget does not open thousands of files)
//! and hands the records back in order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rayon::slice::ParallelSliceMut;

/// Runs merged at once: each holds a read buffer of [`READ_BUFFER`].
const FAN_IN: usize = 64;
const READ_BUFFER: usize = 64 << 10;

/// Records of `N` bytes, sorted in at most `budget` bytes of memory.
pub struct Sorter<const N: usize> {
    buf: Vec<[u8; N]>,
    cap: usize,
    runs: Vec<PathBuf>,
    dir: PathBuf,
    name: String,
    made: usize,
    /// Bytes written to runs (merge passes included).
    pub disk_bytes: u64,
}

impl<const N: usize> Sorter<N> {
    /// A sorter writing its runs to `dir` as `NAME-K.run`.
    pub fn new(dir: &Path, name: &str, budget: usize) -> Sorter<N> {
        let cap = (budget / N).max(64);
        Sorter {
            buf: Vec::new(),
            cap,
            runs: Vec::new(),
            dir: dir.to_owned(),
            name: name.to_owned(),
            made: 0,
            disk_bytes: 0,
        }
    }

    /// Adds a record.
    pub fn push(&mut self, rec: [u8; N]) -> io::Result<()> {
        if self.buf.len() >= self.cap {
            self.spill()?;
        }
        if self.buf.capacity() == self.buf.len() {
            // Grow by doubling, never past the budget.
            let want = (self.buf.capacity() * 2).max(1024).min(self.cap);
            self.buf.reserve_exact(want - self.buf.len());
        }
        self.buf.push(rec);
        Ok(())
    }

    fn next_path(&mut self) -> PathBuf {
        self.made += 1;
        self.dir.join(format!("{}-{}.run", self.name, self.made))
    }

    /// Sorts the buffer and writes it as a run.
    fn spill(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.buf.par_sort_unstable();
        let path = self.next_path();
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
        for r in &self.buf {
            w.write_all(r)?;
        }
        w.into_inner().map_err(|e| e.into_error())?;
        self.disk_bytes += (self.buf.len() * N) as u64;
        self.buf.clear();
        self.runs.push(path);
        Ok(())
    }

    /// Every record pushed, in order.
    pub fn finish(mut self) -> io::Result<Merged<N>> {
        if self.runs.is_empty() {
            self.buf.par_sort_unstable();
            let buf = std::mem::take(&mut self.buf);
            let mut m = Merged::empty();
            m.memory = Some(buf.into_iter());
            return Ok(m);
        }
        self.spill()?;
        self.buf = Vec::new();
        let runs = std::mem::take(&mut self.runs);
        self.merge(runs, true)
    }

    /// Writes what is buffered as a run and hands over every run, to be
    /// merged later by [`Sorter::resume`]; they stay on disk meanwhile.
    pub fn into_runs(mut self) -> io::Result<Vec<PathBuf>> {
        self.spill()?;
        Ok(std::mem::take(&mut self.runs))
    }

    /// The records of runs written by [`Sorter::into_runs`], in order. The
    /// runs stay on disk (their owner removes them); merge passes write
    /// runs of their own, `NAME-K.run` in `dir`, removed when read.
    pub fn resume(dir: &Path, name: &str, runs: Vec<PathBuf>) -> io::Result<Merged<N>> {
        let mut s = Sorter::<N>::new(dir, name, 0);
        s.merge(runs, false)
    }

    /// Merges `runs` in passes until one pass can take every run; a
    /// pass's own runs are removed once read, `runs` only when `owned`.
    fn merge(&mut self, runs: Vec<PathBuf>, owned: bool) -> io::Result<Merged<N>> {
        let mut runs: Vec<(PathBuf, bool)> = runs.into_iter().map(|p| (p, owned)).collect();
        while runs.len() > FAN_IN {
            let group: Vec<(PathBuf, bool)> = runs.drain(..FAN_IN).collect();
            let path = self.next_path();
            let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
            let mut n = 0u64;
            for rec in Merged::<N>::open(group.iter().map(|g| g.0.clone()).collect())? {
                w.write_all(&rec?)?;
                n += 1;
            }
            w.into_inner().map_err(|e| e.into_error())?;
            self.disk_bytes += n * N as u64;
            for (p, own) in group {
                if own {
                    let _ = std::fs::remove_file(p);
                }
            }
            runs.push((path, true));
        }
        let mut m = Merged::<N>::open(runs.iter().map(|r| r.0.clone()).collect())?;
        m.paths = runs.into_iter().filter(|r| r.1).map(|r| r.0).collect();
        Ok(m)
    }
}

impl<const N: usize> Drop for Sorter<N> {
    fn drop(&mut self) {
        for p in &self.runs {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The records of a [`Sorter`], in order; the runs it owns are removed
/// when it is dropped.
pub struct Merged<const N: usize> {
    memory: Option<std::vec::IntoIter<[u8; N]>>,
    readers: Vec<BufReader<File>>,
    heap: BinaryHeap<Reverse<([u8; N], usize)>>,
    /// Runs removed when the merge is dropped.
    paths: Vec<PathBuf>,
}

impl<const N: usize> Merged<N> {
    fn empty() -> Merged<N> {
        Merged { memory: None, readers: Vec::new(), heap: BinaryHeap::new(), paths: Vec::new() }
    }

    /// A merge of the runs at `paths` (not removed when done).
    fn open(paths: Vec<PathBuf>) -> io::Result<Merged<N>> {
        let mut m = Merged::empty();
        for (i, p) in paths.iter().enumerate() {
            let mut r = BufReader::with_capacity(READ_BUFFER, File::open(p)?);
            if let Some(rec) = read_rec::<N>(&mut r)? {
                m.heap.push(Reverse((rec, i)));
            }
            m.readers.push(r);
        }
        Ok(m)
    }
}

fn read_rec<const N: usize>(r: &mut impl Read) -> io::Result<Option<[u8; N]>> {
    let mut rec = [0u8; N];
    let mut at = 0;
    while at < N {
        match r.read(&mut rec[at..])? {
            0 if at == 0 => return Ok(None),
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a sorted run ends inside a record")),
            n => at += n,
        }
    }
    Ok(Some(rec))
}

impl<const N: usize> Iterator for Merged<N> {
    type Item = io::Result<[u8; N]>;

    fn next(&mut self) -> Option<io::Result<[u8; N]>> {
        if let Some(m) = self.memory.as_mut() {
            return m.next().map(Ok);
        }
        let Reverse((rec, i)) = self.heap.pop()?;
        match read_rec::<N>(&mut self.readers[i]) {
            Ok(Some(next)) => self.heap.push(Reverse((next, i))),
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
        Some(Ok(rec))
    }
}

impl<const N: usize> Drop for Merged<N> {
    fn drop(&mut self) {
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_budget_sorts_through_many_runs_and_passes() {
        let dir = std::env::temp_dir().join(format!("neardup-sort-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // 64 records a run, 20,000 records: 313 runs, two merge passes.
        let mut s = Sorter::<8>::new(&dir, "t", 8 * 64);
        let mut x = 7u64;
        let mut want = Vec::new();
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let rec = (x >> 20).to_be_bytes();
            want.push(rec);
            s.push(rec).unwrap();
        }
        want.sort_unstable();
        let got: Vec<[u8; 8]> = s.finish().unwrap().map(Result::unwrap).collect();
        assert_eq!(got, want);
        // Runs handed over survive their merge, which reads them in order.
        let mut s = Sorter::<8>::new(&dir, "r", 8 * 64);
        for rec in &want {
            s.push(*rec).unwrap();
        }
        let runs = s.into_runs().unwrap();
        assert!(runs.len() > 64);
        let again: Vec<[u8; 8]> = Sorter::<8>::resume(&dir, "p", runs.clone()).unwrap().map(Result::unwrap).collect();
        assert_eq!(again, want);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), runs.len(), "only the handed-over runs are left");
        for r in runs {
            std::fs::remove_file(r).unwrap();
        }
        // Every run was removed.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }
}
