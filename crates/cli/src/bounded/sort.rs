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
            return Ok(Merged {
                memory: Some(buf.into_iter()),
                readers: Vec::new(),
                heap: BinaryHeap::new(),
                paths: Vec::new(),
            });
        }
        self.spill()?;
        self.buf = Vec::new();
        // Merge passes until one pass can take every run.
        while self.runs.len() > FAN_IN {
            let group: Vec<PathBuf> = self.runs.drain(..FAN_IN).collect();
            let path = self.next_path();
            let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
            let mut n = 0u64;
            for rec in Merged::<N>::open(group)? {
                w.write_all(&rec?)?;
                n += 1;
            }
            w.into_inner().map_err(|e| e.into_error())?;
            self.disk_bytes += n * N as u64;
            self.runs.push(path);
        }
        Merged::open(std::mem::take(&mut self.runs))
    }
}

impl<const N: usize> Drop for Sorter<N> {
    fn drop(&mut self) {
        for p in &self.runs {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The records of a [`Sorter`], in order; its runs are removed when it is
/// dropped.
pub struct Merged<const N: usize> {
    memory: Option<std::vec::IntoIter<[u8; N]>>,
    readers: Vec<BufReader<File>>,
    heap: BinaryHeap<Reverse<([u8; N], usize)>>,
    paths: Vec<PathBuf>,
}

impl<const N: usize> Merged<N> {
    fn open(paths: Vec<PathBuf>) -> io::Result<Merged<N>> {
        let mut m = Merged { memory: None, readers: Vec::new(), heap: BinaryHeap::new(), paths };
        for (i, p) in m.paths.iter().enumerate() {
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
        // Every run was removed.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }
}
