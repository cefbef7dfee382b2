//! The work folder of a bounded run (its name, its manifest of completed
//! phases, the arrays written between phases) and the machine's resources
//! the run checks: resident memory and free disk.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{Phase, Setup};
use crate::jsonl::Reject;
use crate::pipeline::Timings;

/// The process's peak resident set, in bytes (0 where unknown).
pub fn peak_rss() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage writes the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } == 0 {
            return u.ru_maxrss as u64 * 1024;
        }
    }
    0
}

/// The process's resident set now, in bytes (0 where unknown).
pub(super) fn resident_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else { return 0 };
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    #[cfg(target_os = "linux")]
    // SAFETY: sysconf reads a constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    #[cfg(not(target_os = "linux"))]
    let page = 4096;
    pages * page
}

/// Memory available to a new process (`MemAvailable`), where known.
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Keeps the resident set under a ceiling while mapped files are read at
/// random, within a block as well as between blocks. A fault on a mapping
/// maps up to 64 KB around the page it reads (the kernel's fault-around),
/// so readers count their reads of mapped records ([`Relief::read`]); each
/// time those reads may have mapped another 64 MB, the resident set is
/// measured, and the mappings are given back ([`Relief::new`]'s `release`)
/// when it is over the ceiling. Between two measurements the set grows by
/// at most that much, whatever the block.
pub(super) struct Relief<'a> {
    ceiling: u64,
    since: AtomicU64,
    released: AtomicBool,
    release: &'a (dyn Fn() + Sync),
}

impl<'a> Relief<'a> {
    /// The bytes a fault may map, and how many of them between measurements.
    const FAULT: u64 = 64 << 10;
    const EVERY: u64 = 64 << 20;

    pub(super) fn new(ceiling: u64, release: &'a (dyn Fn() + Sync)) -> Relief<'a> {
        Relief { ceiling, since: AtomicU64::new(0), released: AtomicBool::new(false), release }
    }

    /// Counts `reads` reads of mapped records, each in a page of its own at
    /// worst; measures, and gives back, when they add up.
    pub(super) fn read(&self, reads: usize) {
        let add = reads as u64 * Self::FAULT;
        if self.since.fetch_add(add, Ordering::Relaxed) + add >= Self::EVERY {
            self.since.store(0, Ordering::Relaxed);
            self.check();
        }
    }

    /// Gives the mappings back if the resident set is over the ceiling;
    /// says whether it was.
    pub(super) fn check(&self) -> bool {
        let over = resident_bytes() > self.ceiling;
        if over {
            (self.release)();
            self.released.store(true, Ordering::Relaxed);
        }
        over
    }

    /// Whether the mappings were given back since the last call.
    pub(super) fn took_back(&self) -> bool {
        self.released.swap(false, Ordering::Relaxed)
    }
}

/// Free bytes on the file system of `dir` (None where unknown).
pub fn free_space(dir: &Path) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs writes the struct it is given; `c` is a C string.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } == 0 {
            return Some(s.f_bavail as u64 * s.f_frsize as u64);
        }
    }
    let _ = dir;
    None
}

/// The run's work folder: removed when the run has written its outputs
/// ([`Done::remove_work_folder`]), kept when it fails or is killed, for the
/// same command to continue from its last completed phase.
pub(super) struct WorkDir(pub(super) PathBuf, pub(super) bool);

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The work folder's format: a folder of another format is started over.
pub(super) const WORK_FORMAT: u32 = 1;

/// What a work folder holds of its run, written when a phase completes.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Manifest {
    pub(super) format: u32,
    /// Phases completed: 1 read and fingerprint, 2 merge.
    pub(super) phase: u8,
    /// Records rejected so far.
    pub(super) rejects: Vec<Reject>,
    /// Where each input begins (see [`crate::input::Sources`]).
    pub(super) sources: Vec<(u64, String)>,
    /// Phase 1's sorted runs: band keys, content hashes, ids.
    pub(super) bands: Vec<PathBuf>,
    pub(super) contents: Vec<PathBuf>,
    pub(super) ids: Vec<PathBuf>,
    /// Phase 2's sorted runs of references.
    pub(super) refs: Vec<PathBuf>,
    /// Under `--keep max:FIELD`/`min:FIELD`: records without a value.
    #[serde(default)]
    pub(super) keep_missing: u64,
    pub(super) timings: Timings,
    pub(super) phases: Vec<Phase>,
}

impl Manifest {
    pub(super) fn read(dir: &Path) -> Manifest {
        std::fs::read(dir.join("manifest.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            .filter(|m| m.format == WORK_FORMAT)
            .unwrap_or_default()
    }

    /// Writes the manifest in place of the last, atomically.
    pub(super) fn write(&mut self, dir: &Path) -> anyhow::Result<()> {
        self.format = WORK_FORMAT;
        let tmp = dir.join("manifest.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(self)?)?;
        std::fs::rename(&tmp, dir.join("manifest.json"))?;
        Ok(())
    }
}

/// The name of a run's work folder: a hash of what decides its results
/// (the pipeline's configuration, the fields, the inputs' names, sizes and
/// times), so that the same command finds the folder again.
pub(super) fn work_folder_name(setup: &Setup<'_>) -> anyhow::Result<String> {
    let inputs: Vec<(String, Option<u64>, Option<u128>)> = setup
        .inputs
        .iter()
        .map(|i| {
            let modified = std::fs::metadata(&i.name)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos());
            (i.name.clone(), i.size, modified)
        })
        .collect();
    let what = serde_json::json!({
        "format": WORK_FORMAT,
        "config": setup.params.config(),
        "text": setup.text_field,
        "id": setup.id_field,
        "max_line": setup.opts.max_line,
        "keep": setup.keep.to_string(),
        "inputs": inputs,
    });
    let key = neardup_core::hash_bytes(serde_json::to_string(&what)?.as_bytes(), 0);
    Ok(format!("neardup-dedup-{key:016x}"))
}

/// Writes `words` as little-endian bytes.
pub(super) fn write_words<T: Copy>(path: &Path, words: &[T], bytes: impl Fn(T) -> Vec<u8>) -> anyhow::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    for &x in words {
        w.write_all(&bytes(x))?;
    }
    w.into_inner().map_err(|e| e.into_error())?;
    Ok(())
}

/// Reads `n` little-endian words of `W` bytes.
pub(super) fn read_words<const W: usize, T>(
    path: &Path,
    n: usize,
    word: impl Fn([u8; W]) -> T,
) -> anyhow::Result<Vec<T>> {
    let bytes = std::fs::read(path)?;
    if bytes.len() != n * W {
        anyhow::bail!("{} has {} bytes, not {}", path.display(), bytes.len(), n * W);
    }
    Ok(bytes.chunks_exact(W).map(|c| word(c.try_into().expect("W bytes"))).collect())
}

/// Disk the work folder needs at most, from the inputs' text: the store
/// (features as 8-byte hashes, records) and the sorted runs take ~1.27
/// bytes per byte of English-like text (bench/results/datasets-scale.md);
/// 1.5 leaves room for other text. An estimate, checked before the run
/// starts.
pub fn disk_estimate(input_bytes: u64) -> u64 {
    input_bytes.saturating_mul(3) / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relief_measures_every_64_mb_of_reads_and_gives_back_over_the_ceiling() {
        let released = std::sync::atomic::AtomicUsize::new(0);
        let release = || {
            released.fetch_add(1, Ordering::Relaxed);
        };
        // A ceiling of 0: every measurement is over it.
        let relief = Relief::new(0, &release);
        relief.read(1023);
        assert_eq!(released.load(Ordering::Relaxed), 0, "1023 reads may map under 64 MB: no measurement");
        assert!(!relief.took_back());
        relief.read(1);
        assert_eq!(released.load(Ordering::Relaxed), 1);
        assert!(relief.took_back());
        assert!(!relief.took_back(), "said once");
        relief.read(1023);
        assert_eq!(released.load(Ordering::Relaxed), 1, "counted again from nothing");
        // A ceiling no process reaches: measured, not given back.
        let high = Relief::new(u64::MAX, &release);
        high.read(4096);
        assert!(!high.check());
        assert_eq!(released.load(Ordering::Relaxed), 1);
        assert!(!high.took_back());
    }
}
