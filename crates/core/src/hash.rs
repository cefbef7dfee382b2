//! Seeded, platform-independent hashing.
//!
//! Every hash that can reach disk or the network goes through this module, so
//! that it is identical on every machine, every run and every build: xxh3-64
//! with an explicit seed over explicit bytes (never `usize`, never a
//! per-process random hasher). Parameter streams (MinHash permutations) come
//! from SplitMix64, which is fully specified by its seed.
//!
//! | use                  | function                | version tag |
//! |----------------------|-------------------------|-------------|
//! | shingle → feature    | [`hash_bytes`] (xxh3-64) | `xxh3-64`   |
//! | LSH band key         | [`hash_u32s`] (xxh3-64)  | `xxh3-64`   |
//! | exact content hash   | [`content_hash`] (BLAKE3, 128-bit prefix) | `blake3-128` |

use xxhash_rust::xxh3::xxh3_64_with_seed;

mod many;

pub use many::content_hashes;

/// Version tag of the feature / band-key hash, recorded in configs and snapshots.
pub const FEATURE_HASH_VERSION: &str = "xxh3-64";
/// Version tag of the exact content hash.
pub const CONTENT_HASH_VERSION: &str = "blake3-128";

/// Hashes bytes to a seeded 64-bit value.
#[inline]
pub fn hash_bytes(bytes: &[u8], seed: u64) -> u64 {
    xxh3_64_with_seed(bytes, seed)
}

/// Hashes a slice of u32 values by their little-endian bytes.
#[inline]
pub fn hash_u32s(values: &[u32], seed: u64) -> u64 {
    let mut buf = [0u8; 256];
    if values.len() * 4 <= buf.len() {
        for (chunk, v) in buf.chunks_exact_mut(4).zip(values) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        xxh3_64_with_seed(&buf[..values.len() * 4], seed)
    } else {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        xxh3_64_with_seed(&bytes, seed)
    }
}

/// A 128-bit content hash (BLAKE3, truncated), collision-resistant even against
/// an adversary: identical hashes are treated as identical content.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ContentHash(pub [u8; 16]);

impl ContentHash {
    /// Lower-case hex.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses [`ContentHash::to_hex`]'s 32 hex digits (either case).
    pub fn from_hex(hex: &str) -> Option<ContentHash> {
        if hex.len() != 32 || !hex.is_ascii() {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(ContentHash(out))
    }
}

impl std::fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ContentHash({})", self.to_hex())
    }
}

/// BLAKE3 of `bytes`, first 16 bytes.
pub fn content_hash(bytes: &[u8]) -> ContentHash {
    let full = blake3::hash(bytes);
    let mut out = [0u8; 16];
    out.copy_from_slice(&full.as_bytes()[..16]);
    ContentHash(out)
}

/// SplitMix64: a tiny, fully specified generator for deriving parameters from a seed.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose whole output is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64-bit value.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Slots a std `HashMap` of this `capacity()` has: hashbrown keeps a power
/// of two, fillable to `slots - 1` below eight slots and to `slots / 8 * 7`
/// from eight up (0 for an unallocated map). For memory accounting and for
/// ordering work by slot; a map with removals may report a smaller
/// capacity, and so fewer slots.
pub fn map_slots(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        1..8 => (capacity + 1).next_power_of_two(),
        _ => (capacity * 8 / 7).next_power_of_two(),
    }
}

/// The 64-bit finaliser of MurmurHash3: a bijective avalanche mix.
#[inline]
pub fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_slots_are_the_counts_std_maps_report_capacities_for() {
        for n in 0..5000 {
            let capacity = std::collections::HashMap::<u32, u32>::with_capacity(n).capacity();
            let slots = map_slots(capacity);
            if capacity == 0 {
                assert_eq!(slots, 0);
                continue;
            }
            assert!(slots.is_power_of_two(), "{n}: {capacity} -> {slots}");
            let fillable = if slots < 8 { slots - 1 } else { slots / 8 * 7 };
            assert_eq!(fillable, capacity, "{n}: {capacity} -> {slots}");
        }
    }

    #[test]
    fn content_hash_hex_round_trip() {
        let h = content_hash(b"text");
        assert_eq!(ContentHash::from_hex(&h.to_hex()), Some(h));
        assert_eq!(ContentHash::from_hex(&h.to_hex().to_uppercase()), Some(h));
        assert_eq!(ContentHash::from_hex("00"), None);
        assert_eq!(ContentHash::from_hex(&"g".repeat(32)), None);
        assert_eq!(ContentHash::from_hex(&"é".repeat(16)), None);
    }

    const FROZEN_RED_FOX_17: u64 = 771_495_596_568_530_176;

    // Frozen values: if any of these change, every stored index is invalid.
    #[test]
    fn hashes_are_frozen() {
        assert_eq!(hash_bytes(b"red fox", 0), xxh3_64_with_seed(b"red fox", 0));
        assert_eq!(hash_bytes(b"red fox", 17), FROZEN_RED_FOX_17);
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(content_hash(b"abc").to_hex(), "6437b3ac38465133ffb63b75273a8db5");
    }

    #[test]
    fn u32_hash_matches_bytes() {
        let v = [1u32, 2, 3];
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(hash_u32s(&v, 9), hash_bytes(&bytes, 9));
        let long: Vec<u32> = (0..100).collect();
        let bytes: Vec<u8> = long.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(hash_u32s(&long, 9), hash_bytes(&bytes, 9));
    }
}
