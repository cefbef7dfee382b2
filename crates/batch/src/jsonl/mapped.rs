//! A plain JSONL file mapped into memory, its lines slices of the
//! mapping, and its pages given back as each chunk is done.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;

use super::read::{content_len, over_limit, too_long, Head, Limits};
use super::{Body, Line, Reject};

/// A plain JSONL file mapped into memory, handed out a chunk at a time.
///
/// Each chunk's lines are slices of one [`ChunkPages`], which gives its
/// pages back to the kernel (`MADV_DONTNEED`) when the chunk's last line
/// is dropped: the run's memory holds the chunks in flight, not the file
/// read so far. Reading needs no copy of the text, and no memory of the
/// process's own to copy it into: that memory was ~35 % of the page
/// faults of a run on a corpus the size of `bench/work/real.jsonl`.
///
/// The file is read as long as it was when mapped. It must not shrink
/// while it is read: on Linux, reading a page past its new end raises
/// SIGBUS, as does a read error of the device under it (files on network
/// file systems are not mapped: [`on_network_fs`]); on Linux the run then
/// ends with an error and status 1 ([`exit_on_bus_error`]), not a crash,
/// but it cannot go on. A file cut short within its last page is caught
/// by its size, asked after every chunk. `--no-mmap` reads through a
/// buffer instead.
pub struct Mapped {
    map: Arc<memmap2::Mmap>,
    /// The file mapped: asked its size after each chunk.
    file: File,
    pos: usize,
    read: Arc<AtomicU64>,
}

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapped").field("len", &self.map.len()).field("pos", &self.pos).finish()
    }
}

/// Maps `file` (opened from `path`) when it is a non-empty regular file
/// that is neither compressed nor Parquet (those are read as streams);
/// `None` when it is not, or when the system will not map it.
pub(super) fn map_plain(file: &File, path: &str) -> anyhow::Result<Option<memmap2::Mmap>> {
    let meta = file.metadata().with_context(|| format!("cannot read {path}"))?;
    if !meta.is_file() || meta.len() == 0 || usize::try_from(meta.len()).is_err() || on_network_fs(file) {
        return Ok(None);
    }
    // Before the first page is read (`Head::of` below reads it).
    exit_on_bus_error();
    // SAFETY: the mapping is read only. A file changed while it is mapped
    // is the documented hazard of mapping (see `Mapped`); neardup reads
    // its inputs front to back and never writes them.
    let Ok(map) = (unsafe { memmap2::Mmap::map(file) }) else {
        return Ok(None);
    };
    if Head::of(&map) != Head::Plain {
        return Ok(None);
    }
    // The file is read front to back: more read-ahead, and the pages
    // behind the reader go first. A hint; its failure changes nothing.
    let _ = map.advise(memmap2::Advice::Sequential);
    Ok(Some(map))
}

/// What it means when a page of a mapped input cannot be read, in the
/// one place it is written: said by the SIGBUS handler, and by `main`
/// after an error a read of such a page caused in a system call
/// ([`is_unreadable_mapping`]).
macro_rules! unreadable {
    () => {
        "an input file mapped into memory could not be read (it shrank while the run read it, or the device \
         under it failed); the run stopped and its outputs are incomplete. Inputs must not change during a \
         run; --no-mmap reads them through a buffer, where a read error names its file"
    };
}

/// [`unreadable!`], for `main` to add to an error.
pub const UNREADABLE: &str = unreadable!();

/// Whether `e` is a system call's refusal of a mapped input's page that
/// cannot be read (EFAULT: a long line written out straight from the
/// mapping, after its file shrank), where a read in the process itself
/// raises SIGBUS.
pub fn is_unreadable_mapping(e: &anyhow::Error) -> bool {
    #[cfg(target_os = "linux")]
    {
        e.chain().filter_map(|c| c.downcast_ref::<std::io::Error>()).any(|io| io.raw_os_error() == Some(libc::EFAULT))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = e;
        false
    }
}

/// Installs, once, a handler for SIGBUS, the signal a page of a mapped
/// file that cannot be read raises (the file shrank under it, or the
/// device under it failed: `si_code` BUS_ADRERR), in whichever thread
/// touches it first. The run then ends with [`UNREADABLE`] on standard
/// error and status 1, as other errors do, instead of a bus error and a
/// core dump. Nothing can be recovered there (the thread is inside a
/// line), so the handler only writes and exits. Any other SIGBUS (a
/// machine-check error, one sent by `kill`) goes on to the handler that
/// was there before, as if this one were not installed.
#[cfg(target_os = "linux")]
fn exit_on_bus_error() {
    use std::sync::atomic::AtomicBool;
    use std::sync::OnceLock;
    const MESSAGE: &str = concat!("neardup: error: ", unreadable!(), "\n");
    static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
    static EXITING: AtomicBool = AtomicBool::new(false);
    extern "C" fn on_bus_error(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid `siginfo_t` to an SA_SIGINFO
        // handler. `write`, `_exit`, `pause`, `sigaction` and `raise` are
        // async-signal-safe; the message is static; `PREVIOUS` was set
        // before this handler was installed, and reading it is a load.
        unsafe {
            if (*info).si_code != libc::BUS_ADRERR {
                if let Some(previous) = PREVIOUS.get() {
                    libc::sigaction(signal, previous, std::ptr::null_mut());
                }
                // Pending until this handler returns (SIGBUS is blocked
                // in it), then delivered to the previous handler; a fault
                // also recurs when its instruction runs again.
                libc::raise(signal);
                return;
            }
            // One thread says it; another that faults meanwhile waits for
            // the exit.
            if EXITING.swap(true, Ordering::SeqCst) {
                loop {
                    libc::pause();
                }
            }
            libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
            libc::_exit(1);
        }
    }
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        // SAFETY: `sigaction` is plain data, for which all zeroes is a
        // value; SA_SIGINFO makes `sa_sigaction` the three-argument
        // handler `on_bus_error` is. The previous action is read before
        // the new one is installed, so the handler always finds it.
        unsafe {
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                return;
            }
            let _ = PREVIOUS.set(previous);
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_bus_error as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
}

#[cfg(not(target_os = "linux"))]
fn exit_on_bus_error() {}

/// Whether `file` is on a network or user-space file system (NFS, SMB,
/// FUSE, AFS, Ceph, 9P, cluster file systems): there a read error or a
/// server that goes away is more than a remote chance, and in a mapping
/// it would stop the run with SIGBUS instead of an error that names the
/// file, so such files are read through a buffer.
#[cfg(target_os = "linux")]
fn on_network_fs(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: `statfs` is plain data, for which all zeroes is a value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open for as long as `file` is borrowed,
    // and `st` is a `statfs` the call may write.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    // The type's width differs between targets; every magic fits 32 bits.
    is_network_fs(st.f_type as u32)
}

#[cfg(not(target_os = "linux"))]
fn on_network_fs(_: &File) -> bool {
    false
}

/// [`on_network_fs`] by a `statfs` type (the magic numbers of Linux's
/// `magic.h` and the file systems' own headers).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn is_network_fs(magic: u32) -> bool {
    const NETWORK: [u32; 13] = [
        0x0000_6969, // NFS
        0x0000_517B, // SMB
        0xFF53_4D42, // CIFS
        0xFE53_4D42, // SMB2
        0x6573_5546, // FUSE
        0x5346_414F, // AFS
        0x7375_7245, // Coda
        0x0102_1997, // 9P
        0x00C3_6400, // Ceph
        0x0116_1970, // GFS2
        0x7461_636F, // OCFS2
        0x0BD0_0BD0, // Lustre
        0x4750_4653, // GPFS
    ];
    NETWORK.contains(&magic)
}

impl Mapped {
    /// Hands out `map` from its start; `read` counts the bytes handed out.
    pub(super) fn new(map: memmap2::Mmap, file: File, read: Arc<AtomicU64>) -> Mapped {
        Mapped { map: Arc::new(map), file, pos: 0, read }
    }

    /// [`super::JsonlReader::read_chunk`] over the mapping.
    pub(super) fn read_chunk(
        &mut self,
        next_line: &mut u64,
        limits: Limits,
        out: &mut Vec<Line>,
        rejects: &mut Vec<Reject>,
    ) -> std::io::Result<bool> {
        let from = self.pos;
        let data: &[u8] = &self.map;
        // Lines as (line number, start, length) first: the chunk's pages
        // are one owner, made once its end is known.
        let mut spans: Vec<(u64, usize, usize)> = Vec::new();
        let mut bytes = 0usize;
        let mut more = true;
        while out.len() + spans.len() < limits.records && bytes < limits.bytes {
            let rest = &data[self.pos..];
            if rest.is_empty() {
                more = false;
                break;
            }
            let raw = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
            let start = self.pos;
            self.pos += raw;
            *next_line += 1;
            if over_limit(raw, limits.max_line) {
                rejects.push(Reject::at(*next_line, too_long(limits.max_line)));
                continue;
            }
            let Some(len) = content_len(&rest[..raw]) else { continue };
            bytes += len;
            spans.push((*next_line, start - from, len));
        }
        // A file cut short within its last page reads as zeros there, not
        // as a fault: its size, asked after every chunk, says so. (Cut by
        // a page or more, a read past its end raises SIGBUS first, or
        // fails a system call: see `exit_on_bus_error`.)
        let size = self.file.metadata()?.len();
        if size < self.map.len() as u64 {
            return Err(std::io::Error::other(format!(
                "the file shrank from {} to {size} bytes while it was read; inputs must not change during a run",
                self.map.len()
            )));
        }
        self.read.store(self.pos as u64, Ordering::Relaxed);
        let pages = Bytes::from_owner(ChunkPages { map: Arc::clone(&self.map), range: from..self.pos });
        out.extend(
            spans.into_iter().map(|(number, at, len)| Line { number, body: Body::Json(pages.slice(at..at + len)) }),
        );
        Ok(more)
    }
}

/// Pages are given back in whole blocks of this many bytes: a multiple of
/// every page size in use (4, 16 and 64 KiB), so the blocks start on a page.
const RELEASE_ALIGN: usize = 64 << 10;

/// One chunk's part of a mapped file; its whole pages go back to the
/// kernel when it is dropped (after the chunk's last line).
struct ChunkPages {
    map: Arc<memmap2::Mmap>,
    range: std::ops::Range<usize>,
}

impl AsRef<[u8]> for ChunkPages {
    fn as_ref(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

impl Drop for ChunkPages {
    fn drop(&mut self) {
        // From the block the range starts in to the block it ends in (to
        // the file's end for the last chunk): the block a chunk ends in is
        // given back by the next chunk, and a block given back while a
        // neighbour still reads it is mapped again on that read.
        #[cfg(unix)]
        {
            let start = self.range.start / RELEASE_ALIGN * RELEASE_ALIGN;
            let end = if self.range.end == self.map.len() {
                self.range.end
            } else {
                self.range.end / RELEASE_ALIGN * RELEASE_ALIGN
            };
            if end > start {
                // SAFETY: the mapping is a read-only shared mapping of a
                // file: giving pages back only drops them from this
                // process's page tables, and any later read of them —
                // by a line of this chunk (none is left) or of the one
                // beside it — maps the file's pages again, with the same
                // bytes.
                let _ =
                    unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonl::JsonlReader;

    #[test]
    fn network_file_systems_are_not_mapped() {
        for (magic, network) in [
            (0x6969, true),
            (0x6573_5546, true),
            (0xFE53_4D42, true),
            (0xEF53, false),
            (0x0102_1994, false),
            (0x9123_683E, false),
            (0x794C_7630, false),
        ] {
            assert_eq!(is_network_fs(magic), network, "{magic:x}");
        }
        // The file systems tests run on here are local: mapped.
        let file = tempfile::NamedTempFile::new().unwrap();
        assert!(!on_network_fs(file.as_file()));
    }

    /// EFAULT from a system call, however deep in an error's context, is
    /// a mapped page that could not be read; other errors are not.
    #[cfg(target_os = "linux")]
    #[test]
    fn efault_is_told_as_an_unreadable_mapping() {
        let fault =
            anyhow::Error::from(std::io::Error::from_raw_os_error(libc::EFAULT)).context("cannot write kept.jsonl");
        assert!(is_unreadable_mapping(&fault));
        let other =
            anyhow::Error::from(std::io::Error::from_raw_os_error(libc::EIO)).context("cannot write kept.jsonl");
        assert!(!is_unreadable_mapping(&other));
        assert!(!is_unreadable_mapping(&anyhow::anyhow!("Bad address")));
    }

    /// The resident bytes of the mapping that holds `at`, from its entry in
    /// /proc/self/smaps (tests running beside this one do not count).
    #[cfg(target_os = "linux")]
    fn resident_at(at: *const u8) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let at = at as usize;
        let mut lines = smaps.lines().skip_while(|l| {
            let Some((range, _)) = l.split_once(' ') else { return true };
            let Some((lo, hi)) = range.split_once('-') else { return true };
            match (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) {
                (Ok(lo), Ok(hi)) => !(lo..hi).contains(&at),
                _ => true,
            }
        });
        assert!(lines.next().is_some(), "{at:x} is mapped");
        let rss = lines.find(|l| l.starts_with("Rss:")).unwrap();
        rss.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() << 10
    }

    /// A file of `line` repeated to about `bytes`, opened mapped: (its
    /// text, the file, the reader, where the mapping starts).
    #[cfg(target_os = "linux")]
    fn mapped_lines(line: &str, bytes: usize) -> (String, tempfile::NamedTempFile, JsonlReader, *const u8) {
        let data = line.repeat(bytes / line.len());
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &data).unwrap();
        let reader = JsonlReader::open(file.path().to_str().unwrap(), true, Arc::new(AtomicU64::new(0))).unwrap();
        let JsonlReader::Mapped(m) = &reader else { panic!("{reader:?}") };
        let at = m.map.as_ptr();
        (data, file, reader, at)
    }

    /// Many small chunks whose ends fall anywhere in a block: once each is
    /// dropped, next to nothing of the file is resident.
    #[cfg(target_os = "linux")]
    #[test]
    fn small_chunks_give_back_the_blocks_they_share() {
        let line = format!("{{\"text\":\"{}\"}}\n", "v ".repeat(91));
        assert_ne!(line.len() % 64, 0, "lines that do not divide a block");
        let (data, _file, mut reader, at) = mapped_lines(&line, 24 << 20);
        let (mut n, mut rejects, mut lines) = (0, Vec::new(), 0);
        let limits = Limits { records: 97, bytes: usize::MAX, max_line: 1 << 20 };
        // Two chunks alive at a time, as in the pipeline: each is dropped
        // once the one after it is read.
        let mut held = None;
        let last = loop {
            let mut chunk = Vec::new();
            let more = reader.read_chunk(&mut n, limits, &mut chunk, &mut rejects).unwrap();
            lines += chunk.len();
            assert!(chunk
                .iter()
                .all(|l| matches!(&l.body, Body::Json(b) if b[..] == line.as_bytes()[..line.len() - 1])));
            if !more {
                break chunk;
            }
            held = Some(chunk);
        };
        drop(held);
        assert_eq!(lines, data.len() / line.len());
        let before = resident_at(at);
        drop(last);
        let after = resident_at(at);
        assert!(before > 0 && after <= 64 << 10, "resident {before} with the last chunk, {after} after");
    }

    /// A mapped chunk's pages leave the process's resident memory when its
    /// last line is dropped, and the chunks after it read as before.
    #[cfg(target_os = "linux")]
    #[test]
    fn mapped_chunks_give_their_pages_back() {
        let line = format!("{{\"text\":\"{}\"}}\n", "w ".repeat(500));
        let (data, _file, mut reader, at) = mapped_lines(&line, 48 << 20);
        let (mut n, mut rejects) = (0, Vec::new());
        let mut first = Vec::new();
        let limits = Limits { records: usize::MAX, bytes: 40 << 20, max_line: 1 << 20 };
        reader.read_chunk(&mut n, limits, &mut first, &mut rejects).unwrap();
        let touched: u64 = first.iter().map(|l| l.len() as u64).sum();
        let before = resident_at(at);
        drop(first);
        let after = resident_at(at);
        assert!(before > after + (32 << 20), "resident {before} -> {after} after {touched} bytes of lines dropped");
        let mut rest = Vec::new();
        assert!(!reader.read_chunk(&mut n, Limits { bytes: usize::MAX, ..limits }, &mut rest, &mut rejects).unwrap());
        assert!(rejects.is_empty());
        assert!(rest.iter().all(|l| l.len() == line.len() - 1
            && matches!(&l.body, Body::Json(b) if b[..] == line.as_bytes()[..line.len() - 1])));
        assert_eq!(rest.last().map(|l| l.number), Some((data.len() / line.len()) as u64));
    }
}
