//! Recovery from a command log segment of any bytes: torn, corrupt or
//! hostile records are cut or refused with an error, never a panic or an
//! unbounded allocation, and an engine that opens answers.
#![no_main]
use libfuzzer_sys::fuzz_target;
use neardup_index::{Engine, EngineOptions};

#[path = "scratch.rs"]
mod scratch;

fuzz_target!(|data: &[u8]| {
    let dir = scratch::fresh("command_log");
    let wal = dir.join("wal");
    std::fs::create_dir_all(&wal).unwrap();
    std::fs::write(wal.join(format!("{:020}.log", 1)), data).unwrap();
    if let Ok(engine) = Engine::open(&dir, EngineOptions::default()) {
        for t in engine.tenants().unwrap_or_default() {
            let _ = engine.stats(&t);
        }
    }
});
