//! The saved index of `neardup dedup --index` and Python's `Index.load`:
//! any bytes are refused with an error, never a panic or an allocation
//! their header merely claims.
#![no_main]
use libfuzzer_sys::fuzz_target;
use neardup_core::Reader;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = Reader::open(data) {
        let sketch = r.header().sketch_bytes as usize;
        let _ = r.read_items(sketch, |_| Ok(()));
    }
});
