//! The compact membership screen: a split-block Bloom filter in front of a
//! posting table, answering "definitely no bucket under this key" without
//! reading the table.
//!
//! Each key sets eight bits, one in each 32-bit word of one 256-bit block
//! (the split-block layout of Parquet's Bloom filters: one cache line per
//! lookup, the block chosen by the high half of a mixed key, each word's bit
//! by the low half times an odd salt). With `b` bits per key the
//! false-positive rate is about `(1 − e^(−8/b))^8`: 1.3 % at 8 bits, 0.3 % at
//! 12, 0.05 % at 16 (a little more from the blocks' uneven filling).
//!
//! The contract is one-sided: `false` means the table has no bucket under
//! the key, `true` means only "possibly" — the table is then read as it
//! would be without a screen, so a screen can never hide a candidate, only
//! fail to save a read. Removing a bucket leaves its bits set (a stale
//! "possibly"); the screen is rebuilt from the table's keys whenever it
//! fills, at twice the table's size, which also drops stale bits.

use crate::hash::fmix64;

/// Salts of the eight words (odd, from Parquet's split-block filter).
const SALT: [u32; 8] =
    [0x47b6_137b, 0x4497_4d91, 0x8824_ad5b, 0xa2b7_289d, 0x7054_95c7, 0x2df1_424b, 0x9efc_4947, 0x5c6b_fb31];

/// Keys below which a screen is never sized: small tables rebuild rarely.
const MIN_CAPACITY: usize = 1024;

/// A split-block Bloom filter over `u32` keys.
#[derive(Clone)]
pub(crate) struct Screen {
    blocks: Vec<[u32; 8]>,
    /// Keys inserted since the last rebuild (stale ones included).
    keys: usize,
    /// Keys it was sized for.
    capacity: usize,
}

impl Screen {
    /// An empty screen for `capacity` keys at `bits_per_key` bits each.
    pub(crate) fn new(capacity: usize, bits_per_key: u32) -> Screen {
        let capacity = capacity.max(MIN_CAPACITY);
        let blocks = (capacity * bits_per_key as usize).div_ceil(256).max(1);
        Screen { blocks: vec![[0; 8]; blocks], keys: 0, capacity }
    }

    #[inline]
    fn locate(&self, key: u32) -> (usize, u32) {
        let h = fmix64(u64::from(key) ^ 0x7363_7265_656e_0001);
        let block = (((h >> 32) * self.blocks.len() as u64) >> 32) as usize;
        (block, h as u32)
    }

    /// Adds `key`.
    pub(crate) fn insert(&mut self, key: u32) {
        let (b, x) = self.locate(key);
        let block = &mut self.blocks[b];
        for (word, salt) in block.iter_mut().zip(SALT) {
            *word |= 1 << (x.wrapping_mul(salt) >> 27);
        }
        self.keys += 1;
    }

    /// False when `key` was certainly never inserted.
    #[inline]
    pub(crate) fn may_contain(&self, key: u32) -> bool {
        let (b, x) = self.locate(key);
        let block = &self.blocks[b];
        block.iter().zip(SALT).all(|(word, salt)| word & (1 << (x.wrapping_mul(salt) >> 27)) != 0)
    }

    /// More keys went in than it was sized for: time to rebuild.
    pub(crate) fn is_full(&self) -> bool {
        self.keys > self.capacity
    }

    /// A fresh screen holding `keys`, sized for twice as many.
    pub(crate) fn rebuilt(keys: impl ExactSizeIterator<Item = u32>, bits_per_key: u32) -> Screen {
        let mut s = Screen::new(2 * keys.len(), bits_per_key);
        for k in keys {
            s.insert(k);
        }
        s
    }

    /// Bytes of filter held.
    pub(crate) fn heap_bytes(&self) -> u64 {
        (self.blocks.capacity() * 32) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_a_false_negative_and_false_positives_as_the_formula_says() {
        let mut last = 1.0;
        for bits in [8u32, 12, 16] {
            let n = 50_000u32;
            let mut s = Screen::new(n as usize, bits);
            for k in 0..n {
                s.insert(k.wrapping_mul(2_654_435_761));
            }
            assert!(!s.is_full());
            assert!((0..n).all(|k| s.may_contain(k.wrapping_mul(2_654_435_761))), "a false negative at {bits} bits");
            let trials = 200_000u32;
            let fp = (0..trials).filter(|&k| s.may_contain(k.wrapping_mul(2_654_435_761) ^ 0x5555_5555)).count();
            let rate = fp as f64 / f64::from(trials);
            let expected = (1.0 - (-8.0 / f64::from(bits)).exp()).powi(8);
            // Split blocks fill unevenly: allow up to 2.5x the formula, and
            // require the rate to fall with more bits.
            assert!(rate < expected * 2.5 + 1e-4, "{bits} bits: rate {rate}, formula {expected}");
            assert!(rate < last, "{bits} bits: rate {rate} not below {last}");
            last = rate;
        }
    }

    #[test]
    fn fills_and_rebuilds() {
        let mut s = Screen::new(10, 8);
        assert_eq!(s.capacity, MIN_CAPACITY);
        for k in 0..=MIN_CAPACITY as u32 {
            s.insert(k);
        }
        assert!(s.is_full());
        let r = Screen::rebuilt(0..MIN_CAPACITY as u32 + 1, 8);
        assert!(!r.is_full() && (0..=MIN_CAPACITY as u32).all(|k| r.may_contain(k)));
        assert!(r.heap_bytes() >= s.heap_bytes());
    }
}
