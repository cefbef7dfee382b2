//! Normalizers and the whole fingerprint path never panic, the fast paths
//! of `unicode-v1` (runs, 64-byte blocks) append exactly what its general
//! loop does, and the optimistic NFKC path always equals composing the
//! whole text first; the features are the hashes of the text's word
//! windows, as `split(' ')` finds them; and texts fingerprinted together
//! (content hashes side by side) get what each gets alone.
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
    assert_eq!(uni, neardup_core::unicode_v1_reference(text), "the fast paths left the general loop");
    static FP: OnceLock<Fingerprinter> = OnceLock::new();
    let mut fp = FP.get_or_init(|| Fingerprinter::new(Config::default().resolve().unwrap()).unwrap()).clone();
    let f = fp.fingerprint(text);
    assert!(neardup_core::is_canonical(&f.features));
    // The token starts found a block at a time split the text as `split`
    // does: the features are the hashes of its word windows.
    let c = Config::default();
    let words: Vec<&str> = if uni.is_empty() { Vec::new() } else { uni.split(' ').collect() };
    assert_eq!(f.tokens as usize, words.len());
    let hash = |s: &str| neardup_core::hash_bytes(s.as_bytes(), c.seed);
    let mut want: Vec<u64> = match words.len() {
        0 => Vec::new(),
        n if n < c.shingle_width as usize => vec![hash(&uni)],
        _ => words.windows(c.shingle_width as usize).map(|w| hash(&w.join(" "))).collect(),
    };
    want.sort_unstable();
    want.dedup();
    assert_eq!(f.features, want, "features differ from the split reference");
    assert_eq!(f.signature.is_empty(), f.features.is_empty());
    // The text cut at its line breaks: each part's fingerprint alone and
    // in a batch, and the raw parts' content hashes side by side.
    let parts: Vec<&str> = text.split('\n').collect();
    let mut many = Vec::new();
    fp.fingerprint_many(parts.iter().copied(), &mut many);
    let one: Vec<_> = parts.iter().map(|p| fp.fingerprint(p)).collect();
    assert_eq!(many, one, "a batch differs from its texts one by one");
    let raw: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let mut hashes = Vec::new();
    neardup_core::content_hashes(&raw, &mut hashes);
    assert_eq!(hashes, raw.iter().map(|r| neardup_core::content_hash(r)).collect::<Vec<_>>());
});
