//! `neardup serve --config FILE`: any TOML text is refused with an error
//! naming the option, or validated, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use neardup_server::{FileConfig, RawConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(file) = FileConfig::parse(text) {
        let raw = RawConfig { admin_token: Some("fuzz-operator-token-0123456789".into()), ..RawConfig::default() };
        let _ = raw.or_file(file).validate();
    }
});
