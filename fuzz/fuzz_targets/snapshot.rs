//! Snapshot decoding (header and full restore) rejects bad bytes with an
//! error, never a panic or an unbounded allocation.
#![no_main]
use libfuzzer_sys::fuzz_target;
use neardup_index::{Engine, EngineOptions, TenantConfig};
use std::sync::OnceLock;

fuzz_target!(|data: &[u8]| {
    let _ = Engine::snapshot_header(data);
    static ENGINE: OnceLock<(tempfile_dir::Dir, Engine)> = OnceLock::new();
    let (_, engine) = ENGINE.get_or_init(|| {
        let dir = tempfile_dir::Dir::new();
        let engine = Engine::open(&dir.0, EngineOptions::default()).unwrap();
        engine.create_tenant("t", TenantConfig::new(neardup_core::Config::seed_example())).unwrap();
        (dir, engine)
    });
    let _ = engine.restore("t", data);
});

mod tempfile_dir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            let p = std::env::temp_dir().join(format!("neardup-fuzz-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
}
