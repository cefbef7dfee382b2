//! Finding the documents to scan.
//!
//! [`discover`] expands files and folders into a sorted, de-duplicated list
//! of files. Folders are walked with the `ignore` crate, so `.gitignore`,
//! `.ignore` and `.neardupignore` files are honoured (also outside a git
//! repository) and hidden files are skipped; neardup's own `.neardup` state
//! folder and `.git` are never entered. A path named explicitly is always
//! included, ignored or not. Only regular files are returned: a FIFO,
//! socket or device inside a folder is left out, and one named explicitly
//! is reported in [`Discovery::errors`], both judged from metadata, never
//! opened (opening a FIFO blocks until something writes to it). The order
//! is byte-wise by path, the same on every run and platform, so batch
//! numbering is reproducible.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

use crate::error::{Error, ErrorKind};

/// Folders never descended into.
const ALWAYS_SKIPPED: &[&str] = &[".neardup", ".git"];

/// Options for [`discover`]. Construct with [`DiscoverOptions::default`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiscoverOptions {
    /// Honour `.gitignore`, `.ignore` and `.neardupignore` files (default true).
    pub respect_ignore_files: bool,
    /// Include hidden files and folders (default false).
    pub include_hidden: bool,
    /// Follow symbolic links (default false).
    pub follow_links: bool,
}

impl Default for DiscoverOptions {
    fn default() -> DiscoverOptions {
        DiscoverOptions { respect_ignore_files: true, include_hidden: false, follow_links: false }
    }
}

/// What [`discover`] found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Files to scan, sorted and without duplicates.
    pub files: Vec<PathBuf>,
    /// Paths that do not exist or could not be walked (e.g. a folder without
    /// read permission), and paths named explicitly that are neither a
    /// regular file nor a folder (a FIFO, socket or device: such entries
    /// inside a walked folder are left out silently). The rest of the walk
    /// still completes.
    pub errors: Vec<Error>,
}

/// Expands `paths` (files and folders) into the files to scan.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// std::fs::create_dir_all(dir.path().join("sub"))?;
/// std::fs::write(dir.path().join("sub/b.md"), "b")?;
/// std::fs::write(dir.path().join("a.txt"), "a")?;
/// std::fs::create_dir_all(dir.path().join(".neardup/cache"))?;
/// std::fs::write(dir.path().join(".neardup/cache/x.json"), "{}")?;
///
/// let found = neardup_docs::discover(&[dir.path()], &Default::default());
/// let names: Vec<_> = found.files.iter().map(|p| p.strip_prefix(dir.path()).unwrap()).collect();
/// assert_eq!(names, [std::path::Path::new("a.txt"), "sub/b.md".as_ref()]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn discover<P: AsRef<Path>>(paths: &[P], options: &DiscoverOptions) -> Discovery {
    let mut found = Discovery::default();
    for path in paths {
        let path = path.as_ref();
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) => {
                found.errors.push(walk_error(format!("{e}")).with_path(path));
                continue;
            }
        };
        if meta.is_file() {
            found.files.push(path.to_path_buf());
            continue;
        }
        if !meta.is_dir() {
            // A FIFO, socket or device: reading one may block for ever (a
            // FIFO without a writer) or never end. Inside a folder such an
            // entry is left out; a named one is reported, not opened.
            let detected = format!("{}, not a regular file or folder; not read", special_file_kind(&meta));
            found.errors.push(Error::new(ErrorKind::Unsupported { detected }).with_path(path));
            continue;
        }
        let walker = WalkBuilder::new(path)
            .standard_filters(options.respect_ignore_files)
            .hidden(!options.include_hidden)
            .git_global(false)
            .require_git(false)
            .follow_links(options.follow_links)
            .add_custom_ignore_filename(".neardupignore")
            .filter_entry(|entry| {
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                !(is_dir && entry.depth() > 0 && ALWAYS_SKIPPED.iter().any(|s| entry.file_name() == *s))
            })
            .build();
        for entry in walker {
            match entry {
                Ok(entry) if entry.file_type().is_some_and(|t| t.is_file()) => found.files.push(entry.into_path()),
                Ok(_) => {}
                Err(e) => found.errors.push(walk_error(e.to_string())),
            }
        }
    }
    found.files.sort();
    found.files.dedup();
    found
}

/// What a path that is neither a regular file nor a folder is, from its
/// metadata alone (never opened).
fn special_file_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    let _ = meta;
    "a special file"
}

fn walk_error(reason: String) -> Error {
    Error::new(ErrorKind::Walk { reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn names(dir: &Path, files: &[PathBuf]) -> Vec<String> {
        files.iter().map(|p| p.strip_prefix(dir).unwrap().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn ignores_and_skips() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in [
            "b.pdf",
            "a/z.md",
            "a/y.txt",
            "build/out.txt",
            ".hidden/x.txt",
            ".neardup/dedup/f.json",
            "skip.tmp",
            "n/keep.txt",
            "n/drop.txt",
        ] {
            fs::create_dir_all(d.join(f).parent().unwrap()).unwrap();
            fs::write(d.join(f), "x").unwrap();
        }
        fs::write(d.join(".gitignore"), "build/\n*.tmp\n").unwrap();
        fs::write(d.join("n/.neardupignore"), "drop.txt\n").unwrap();
        let found = discover(&[d], &DiscoverOptions::default());
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        assert_eq!(names(d, &found.files), ["a/y.txt", "a/z.md", "b.pdf", "n/keep.txt"]);

        let all = DiscoverOptions { respect_ignore_files: false, include_hidden: true, ..Default::default() };
        let found = discover(&[d], &all);
        let got = names(d, &found.files);
        assert!(got.contains(&"build/out.txt".to_owned()) && got.contains(&".hidden/x.txt".to_owned()), "{got:?}");
        assert!(!got.iter().any(|n| n.starts_with(".neardup")), "{got:?}");
    }

    #[test]
    fn explicit_files_deduplicated_and_missing_reported() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("x.tmp"), "x").unwrap();
        fs::write(d.join(".gitignore"), "*.tmp\n").unwrap();
        let found = discover(&[d.join("x.tmp"), d.join("x.tmp"), d.join("missing")], &DiscoverOptions::default());
        assert_eq!(found.files, [d.join("x.tmp")]);
        assert_eq!(found.errors.len(), 1);
        assert!(found.errors[0].to_string().contains("missing"), "{}", found.errors[0]);
    }

    /// Issue 45 item 9: a FIFO is never returned, so never opened; named
    /// explicitly it is reported, inside a folder it is left out.
    #[cfg(unix)]
    #[test]
    fn fifos_never_returned_and_reported_when_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("a.txt"), "a").unwrap();
        let made = std::process::Command::new("mkfifo").arg(d.join("pipe.txt")).status().unwrap();
        assert!(made.success());
        let found = discover(&[d.join("a.txt"), d.join("pipe.txt")], &DiscoverOptions::default());
        assert_eq!(found.files, [d.join("a.txt")]);
        assert_eq!(found.errors.len(), 1);
        let e = found.errors[0].to_string();
        assert!(e.contains("pipe.txt") && e.contains("FIFO") && e.contains("not a regular file"), "{e}");
        assert_eq!(found.errors[0].path(), Some(d.join("pipe.txt").as_path()));

        let found = discover(&[d], &DiscoverOptions::default());
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        assert_eq!(found.files, [d.join("a.txt")]);
    }
}
