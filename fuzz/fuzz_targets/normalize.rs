//! Normalizers and the whole fingerprint path never panic, the fast paths
//! of `unicode-v1` (runs, 64-byte blocks) append exactly what its general
//! loop does, and the optimistic NFKC path always equals composing the
//! whole text first.
#![no_main]
use libfuzzer_sys::fuzz_target;
use neardup_core::{Config, Fingerprinter, Normalizer};
use std::sync::OnceLock;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let seed = Normalizer::Seed.normalize(text);
    assert!(seed.bytes().all(|b| b == b' ' || b.is_ascii_lowercase() || b.is_ascii_digit()));
    let uni = Normalizer::Unicode.normalize(text);
    assert!(!uni.starts_with(' ') && !uni.ends_with(' ') && !uni.contains("  "));
    assert_eq!(uni, neardup_core::normalize::unicode_v1_reference(text), "the fast paths left the general loop");
    static FP: OnceLock<Fingerprinter> = OnceLock::new();
    let mut fp = FP.get_or_init(|| Fingerprinter::new(Config::default().resolve().unwrap()).unwrap()).clone();
    let f = fp.fingerprint(text);
    assert!(neardup_core::verify::is_canonical(&f.features));
    assert_eq!(f.signature.is_empty(), f.features.is_empty());
});
