//! # neardup-fs
//!
//! The one place neardup replaces a file durably. Every crate that writes
//! state to disk (the index's snapshots, the server's key file, the scan's
//! parse cache and fingerprint store) calls [`write_atomic`]; none keeps a
//! copy of its own.
//!
//! A crash at any instant leaves either the old file or the new one, whole:
//! the bytes go to a temporary file in the same folder, which is fsynced and
//! renamed over the target, and then the folder itself is fsynced so the
//! rename survives a power loss. Every step's failure is reported, the
//! folder's fsync included: a write that could not be made durable is an
//! error, never a silent success.
//!
//! [`usage`] reads what the file system says about usage (bytes under a
//! folder, the process's memory and CPU time), for metrics and benchmarks.

pub mod usage;

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn with_context(step: &str, path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{step} {}: {e}", path.display()))
}

/// Fsyncs a folder, making renames and new entries in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| with_context("fsyncing folder", dir, e))
}

/// Replaces `path` with what `write` writes, atomically and durably, without
/// holding it in memory: `write` streams into a buffered temporary file in
/// the same folder, which is then fsynced and renamed over `path`, and the
/// folder fsynced. If `write` fails, the temporary file is removed and
/// `path` is untouched.
pub fn write_atomic_with<E: From<io::Error>>(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    replace(path, |f, tmp| {
        let mut w = io::BufWriter::with_capacity(1 << 20, f);
        write(&mut w)?;
        Ok(w.into_inner().map_err(|e| with_context("writing", tmp, e.into_error()))?)
    })
}

/// Reads a small file whole, refusing one of more than `max` bytes
/// without reading past it (a path given as configuration may name
/// `/dev/zero` or a huge file).
pub fn read_small(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    std::fs::File::open(path)?.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("more than {max} bytes")));
    }
    Ok(out)
}

/// Replaces `path` with `bytes` atomically and durably (see the crate
/// docs). The temporary file is named `.{name}.{pid}.{n}.tmp` in the same
/// folder, so concurrent writers never share one, and is removed when a
/// step fails. Errors name the step and the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, |mut f, tmp| {
        f.write_all(bytes).map_err(|e| with_context("writing", tmp, e))?;
        Ok(f)
    })
}

/// The one replace-by-rename of the crate: creates the temporary file
/// beside `path`, lets `fill` write it (and hand the file back), fsyncs and
/// renames it over `path`, then fsyncs the folder; on any failure the
/// temporary file is removed and `path` is untouched.
fn replace<E: From<io::Error>>(path: &Path, fill: impl FnOnce(File, &Path) -> Result<File, E>) -> Result<(), E> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let result = (|| {
        let f = File::create(&tmp).map_err(|e| with_context("creating", &tmp, e))?;
        let f = fill(f, &tmp)?;
        f.sync_all().map_err(|e| with_context("fsyncing", &tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| with_context("renaming onto", path, e))?;
        Ok::<(), E>(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir).map_err(E::from)
}

#[cfg(test)]
mod tests {
    #[test]
    fn read_small_refuses_more_than_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(super::read_small(&p, 10).unwrap(), b"0123456789");
        assert!(super::read_small(&p, 9).is_err());
        if std::path::Path::new("/dev/zero").exists() {
            assert!(super::read_small(std::path::Path::new("/dev/zero"), 1 << 10).is_err());
        }
    }

    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second, longer").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second, longer");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["state.json"]);
    }

    #[test]
    fn a_failed_step_is_an_error_naming_the_path_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a non-empty folder: the rename must fail.
        let target = dir.path().join("busy");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("x"), b"x").unwrap();
        let e = write_atomic(&target, b"data").unwrap_err();
        assert!(e.to_string().contains("renaming onto"), "{e}");
        assert!(e.to_string().contains("busy"), "{e}");
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, ["busy"]);
        // A folder that does not exist: the first step fails.
        let e = write_atomic(&dir.path().join("missing/state"), b"data").unwrap_err();
        assert!(e.to_string().contains("creating"), "{e}");
    }

    #[test]
    fn streamed_writes_replace_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        write_atomic_with(&path, |w| {
            for i in 0..1000u32 {
                w.write_all(&i.to_le_bytes())?;
            }
            Ok::<(), io::Error>(())
        })
        .unwrap();
        assert_eq!(fs::read(&path).unwrap().len(), 4000);
        let e = write_atomic_with(&path, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("the writer failed"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("the writer failed"));
        assert_eq!(fs::read(&path).unwrap().len(), 4000, "the old file stays");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["big"]);
    }

    #[test]
    fn a_relative_path_in_the_current_folder_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rel");
        write_atomic(&path, b"ok").unwrap();
        assert!(sync_dir(dir.path()).is_ok());
        assert!(sync_dir(&dir.path().join("nope")).is_err());
    }
}
