//! What the file system says about usage: bytes under a folder, and the
//! process's own memory and CPU time from Linux's `/proc/self` (`None`
//! elsewhere). One reader for the service's `/metrics` and the benchmarks.

use std::path::Path;

/// A `kB` field of `/proc/self/status` (`"VmRSS:"`, `"VmHWM:"`), in bytes.
pub fn process_status_bytes(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// The process's resident memory in bytes.
pub fn process_resident_bytes() -> Option<u64> {
    process_status_bytes("VmRSS:")
}

/// CPU seconds the process has used (user + system).
pub fn process_cpu_seconds() -> Option<f64> {
    // Fields 14 and 15 (utime, stime) in USER_HZ ticks, which Linux fixes
    // at 100 a second for user space; the command name (field 2) may hold
    // spaces, so count from its closing parenthesis.
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let f: Vec<&str> = s[s.rfind(')')? + 1..].split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Bytes of every file under `dir` (links not followed, 16 levels at most);
/// files that vanish meanwhile count 0.
pub fn tree_bytes(dir: &Path) -> u64 {
    fn walk(dir: &Path, depth: u32) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
        let mut total = 0;
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() && depth < 16 => total += walk(&e.path(), depth + 1),
                Ok(t) if t.is_file() => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                _ => {}
            }
        }
        total
    }
    walk(dir, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_bytes_counts_nested_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("x"), [0u8; 10]).unwrap();
        std::fs::write(d.path().join("a/b/y"), [0u8; 32]).unwrap();
        assert_eq!(tree_bytes(d.path()), 42);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn proc_self_is_read_on_linux() {
        assert!(process_resident_bytes().is_some_and(|b| b > 0));
        assert!(process_cpu_seconds().is_some());
    }
}
