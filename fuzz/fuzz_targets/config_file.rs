//! `neardup serve --config FILE`: any TOML text is refused with an error
//! naming the option, or validated, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use neardup_server::ServeSettings;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(file) = ServeSettings::parse(text) {
        let env = ServeSettings { admin_token: Some("fuzz-operator-token-0123456789".into()), ..ServeSettings::default() };
        let _ = env.or(file).validate();
    }
});
