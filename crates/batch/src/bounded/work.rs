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
/// random, within a block as well as between blocks. A read of a mapped
/// record can map more than its page: the kernel's fault-around (64 KB),
/// or the whole folio the page cache holds it in (up to 1 MB after large
/// writes; see [`super::store::MAPPED_WRITE_BUFFER`]). Readers count their
/// reads ([`Relief::read`]); every so many the resident set is measured,
/// and the mappings are given back ([`Relief::new`]'s `release`) when it is
/// over the ceiling. How many reads pass between measurements follows
/// what the last ones mapped each, so that about 64 MB can be mapped in
/// between: 64 reads at first (1 MB each at worst), up to 1,024 (64 KB).
pub(super) struct Relief<'a> {
    ceiling: u64,
    since: AtomicU64,
    every: AtomicU64,
    last: AtomicU64,
    released: AtomicBool,
    release: &'a (dyn Fn() + Sync),
    /// The resident set ([`resident_bytes`]; a test's own figure in tests).
    resident: fn() -> u64,
}

impl<'a> Relief<'a> {
    /// Bytes that may be mapped between two measurements.
    const BETWEEN: u64 = 64 << 20;
    /// The fewest bytes a read is taken to map (the fault-around), and the most.
    const LEAST: u64 = 64 << 10;
    const MOST: u64 = 4 << 20;

    pub(super) fn new(ceiling: u64, release: &'a (dyn Fn() + Sync)) -> Relief<'a> {
        Relief::measured_by(ceiling, release, resident_bytes)
    }

    fn measured_by(ceiling: u64, release: &'a (dyn Fn() + Sync), resident: fn() -> u64) -> Relief<'a> {
        Relief {
            ceiling,
            since: AtomicU64::new(0),
            every: AtomicU64::new(Self::BETWEEN / (1 << 20)),
            last: AtomicU64::new(resident()),
            released: AtomicBool::new(false),
            release,
            resident,
        }
    }

    /// Counts `reads` reads of mapped records; measures, and gives back,
    /// when enough have passed.
    pub(super) fn read(&self, reads: usize) {
        let reads = reads as u64;
        let since = self.since.fetch_add(reads, Ordering::Relaxed) + reads;
        if since >= self.every.load(Ordering::Relaxed) {
            self.since.store(0, Ordering::Relaxed);
            let before = self.last.load(Ordering::Relaxed);
            let now = (self.resident)();
            let each = (now.saturating_sub(before) / since.max(1)).clamp(Self::LEAST, Self::MOST);
            self.every.store((Self::BETWEEN / each).max(1), Ordering::Relaxed);
            self.check(now);
        }
    }

    /// Gives the mappings back if `resident`, the resident set measured
    /// now, is over the ceiling; says whether it was.
    pub(super) fn check(&self, resident: u64) -> bool {
        let over = resident > self.ceiling;
        if over {
            (self.release)();
            self.released.store(true, Ordering::Relaxed);
        }
        self.last.store(if over { (self.resident)() } else { resident }, Ordering::Relaxed);
        over
    }

    /// Whether the mappings were given back since the last call.
    pub(super) fn took_back(&self) -> bool {
        self.released.swap(false, Ordering::Relaxed)
    }

    /// Reads between measurements now.
    #[cfg(test)]
    fn every(&self) -> u64 {
        self.every.load(Ordering::Relaxed)
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
    RunKey {
        params: setup.params,
        text_field: setup.text_field,
        id_field: setup.id_field,
        max_line: setup.opts.max_line,
        keep: setup.keep,
        inputs: setup.inputs,
    }
    .folder_name()
}

/// What names a run's work folder: the same settings and inputs, the
/// same folder (so the same command continues a killed run).
pub struct RunKey<'a> {
    pub params: &'a neardup_core::Params,
    pub text_field: &'a str,
    pub id_field: &'a str,
    pub max_line: usize,
    pub keep: &'a neardup_core::Keep,
    pub inputs: &'a [crate::chunk::Input],
}

impl RunKey<'_> {
    /// Bytes already in this run's work folder under `work_dir` (0 when
    /// there is none): a run that continues needs that much less free space.
    pub fn bytes_in_place(&self, work_dir: &Path) -> u64 {
        let Ok(name) = self.folder_name() else { return 0 };
        let Ok(entries) = std::fs::read_dir(work_dir.join(name)) else { return 0 };
        entries.filter_map(|e| e.ok()?.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
    }

    fn folder_name(&self) -> anyhow::Result<String> {
        let RunKey { params, text_field, id_field, max_line, keep, inputs } = self;
        let inputs: Vec<(String, Option<u64>, Option<u128>)> = inputs
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
            "config": params.config(),
            "text": text_field,
            "id": id_field,
            "max_line": max_line,
            "keep": keep.to_string(),
            "inputs": inputs,
        });
        let key = neardup_core::hash_bytes(serde_json::to_string(&what)?.as_bytes(), 0);
        Ok(format!("neardup-dedup-{key:016x}"))
    }
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
    fn a_run_that_continues_counts_its_work_folder_as_space() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.jsonl");
        std::fs::write(&input, "{\"text\": \"a\"}\n").unwrap();
        let inputs = crate::input::expand(&[input.display().to_string()]).unwrap();
        let params = neardup_core::Config::default().resolve().unwrap();
        let keep = neardup_core::Keep::First;
        fn key<'a>(
            params: &'a neardup_core::Params,
            keep: &'a neardup_core::Keep,
            text_field: &'a str,
            inputs: &'a [crate::chunk::Input],
        ) -> RunKey<'a> {
            RunKey { params, text_field, id_field: "id", max_line: 1 << 20, keep, inputs }
        }
        let held = |inputs: &[crate::chunk::Input]| key(&params, &keep, "text", inputs).bytes_in_place(dir.path());
        assert_eq!(held(&inputs), 0, "no work folder yet");
        let name = key(&params, &keep, "text", &inputs).folder_name().unwrap();
        std::fs::create_dir(dir.path().join(&name)).unwrap();
        std::fs::write(dir.path().join(&name).join("features.bin"), [0u8; 10]).unwrap();
        std::fs::write(dir.path().join(&name).join("items.bin"), [0u8; 20]).unwrap();
        assert_eq!(held(&inputs), 30);
        // Another run's folder (other settings, a changed input) is not this one's.
        assert_eq!(key(&params, &keep, "body", &inputs).bytes_in_place(dir.path()), 0);
        std::fs::write(&input, "{\"text\": \"ab\"}\n").unwrap();
        let changed = crate::input::expand(&[input.display().to_string()]).unwrap();
        assert_eq!(held(&changed), 0);
    }

    #[test]
    fn relief_measures_as_often_as_reads_map_and_gives_back_over_the_ceiling() {
        // The resident set as this test sets it (tests share the process).
        static RESIDENT: AtomicU64 = AtomicU64::new(100 << 20);
        let resident = || RESIDENT.load(Ordering::Relaxed);
        let released = std::sync::atomic::AtomicUsize::new(0);
        let release = || {
            released.fetch_add(1, Ordering::Relaxed);
        };
        let relief = Relief::measured_by(200 << 20, &release, resident);
        assert_eq!(relief.every(), 64, "1 MB a read at first");
        relief.read(63);
        RESIDENT.store(356 << 20, Ordering::Relaxed);
        assert_eq!(released.load(Ordering::Relaxed), 0, "63 reads: no measurement");
        assert!(!relief.took_back());
        relief.read(1);
        assert_eq!(released.load(Ordering::Relaxed), 1, "over the ceiling: given back");
        assert!(relief.took_back());
        assert!(!relief.took_back(), "said once");
        // 256 MB in 64 reads: the most a read is taken to map, 4 MB.
        assert_eq!(relief.every(), 16);
        // Reads that mapped nothing: the fault-around is assumed, 64 KB a read.
        relief.read(16);
        assert_eq!(relief.every(), 1024);
        assert_eq!(released.load(Ordering::Relaxed), 2, "still over the ceiling");
        RESIDENT.store(150 << 20, Ordering::Relaxed);
        relief.read(1023);
        relief.read(1);
        assert_eq!(relief.every(), 1024);
        assert_eq!(released.load(Ordering::Relaxed), 2, "under the ceiling: kept");
        // 1 MB a read: every 64 reads again.
        RESIDENT.store((150 << 20) + (1024 << 20), Ordering::Relaxed);
        relief.read(1024);
        assert_eq!(relief.every(), 64);
        assert_eq!(released.load(Ordering::Relaxed), 3);
        RESIDENT.store(150 << 20, Ordering::Relaxed);
        assert!(!relief.check(resident()));
        assert!(relief.took_back(), "the last measurement gave back");
        assert!(!relief.took_back());
    }
}
