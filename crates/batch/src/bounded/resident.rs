//! What a bounded run keeps in memory per item (see the module doc of
//! [`super`]): bits and union-find parents.

/// A bit per item.
pub(super) struct Bits(pub(super) Vec<u64>);

impl Bits {
    pub(super) fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    pub(super) fn get(&self, i: u32) -> bool {
        self.0[i as usize / 64] >> (i % 64) & 1 != 0
    }
    pub(super) fn set(&mut self, i: u32) {
        self.0[i as usize / 64] |= 1 << (i % 64);
    }
    pub(super) fn count(&self) -> u64 {
        self.0.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

/// Union-find whose root is the set's first item: a parent per item, no
/// sizes (4 bytes per item), path halving.
pub(super) struct Parents(pub(super) Vec<u32>);

impl Parents {
    pub(super) fn find(&mut self, mut x: u32) -> u32 {
        while self.0[x as usize] != x {
            let p = self.0[x as usize];
            self.0[x as usize] = self.0[p as usize];
            x = self.0[x as usize];
        }
        x
    }
    pub(super) fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            let (lo, hi) = (ra.min(rb), ra.max(rb));
            self.0[hi as usize] = lo;
        }
    }
}
