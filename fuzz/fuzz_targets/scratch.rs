//! A scratch folder of this fuzzing process, emptied for each input.

use std::path::PathBuf;

/// `neardup-fuzz-<target>-<pid>` under the temp dir, empty.
pub fn fresh(target: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("neardup-fuzz-{target}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}
