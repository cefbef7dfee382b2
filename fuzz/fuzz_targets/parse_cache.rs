//! An entry of `neardup scan`'s parse cache of any bytes: a miss or an
//! error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use neardup_docs::ParseCache;

#[path = "scratch.rs"]
mod scratch;

const KEY: &str = "ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd";

fuzz_target!(|data: &[u8]| {
    let root = scratch::fresh("parse_cache");
    let cache = ParseCache::open(&root).unwrap();
    std::fs::create_dir_all(root.join("ab")).unwrap();
    std::fs::write(root.join("ab").join(format!("{KEY}.json")), data).unwrap();
    let _ = cache.get(KEY);
});
