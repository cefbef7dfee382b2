//! The service's key file (`DATA_DIR/keys.json`) of any bytes: refused
//! with an error or loaded, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use neardup_server::KeyStore;

#[path = "scratch.rs"]
mod scratch;

fuzz_target!(|data: &[u8]| {
    let path = scratch::fresh("keys_file").join("keys.json");
    std::fs::write(&path, data).unwrap();
    let _ = KeyStore::open(Some(path), Some("fuzz-operator-token-0123456789"));
});
