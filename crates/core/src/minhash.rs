//! MinHash signatures over canonical feature sets.
//!
//! Two schemes, each a frozen, versioned algorithm (the version is stored with
//! every signature and a stored signature is never compared with one of another
//! version):
//!
//! * `minhash-mulshift-v1` — classic MinHash with `n` independent hash
//!   functions `h_i(x) = (a_i·x + b_i) >> 32` (multiply-add-shift over 64-bit
//!   words, `a_i` odd; `a_i`, `b_i` drawn from SplitMix64(seed)). Each value is
//!   the minimum of `h_i` over the set. The kernel is written so that LLVM
//!   vectorises it and is compiled three times (AVX-512, AVX2, baseline) and
//!   picked at run time; all three give bit-identical output.
//! * `oph-dens-v1` — one-permutation hashing with optimal densification
//!   (Shrivastava, ICML 2017): each feature is mixed once, its high bits pick
//!   one of `n` bins, its low 32 bits compete for that bin's minimum; empty bins
//!   borrow from a non-empty bin chosen by a seeded probe sequence. O(1) per
//!   feature instead of O(n); unbiased, with higher variance than classic
//!   MinHash on sets smaller than `n`.
//!
//! For both, `P[sig_a[i] == sig_b[i]] ≈ J(a, b)`. The empty set has the empty
//! signature (it has no minimum); callers handle it by exact hash.
//!
//! A third scheme is not MinHash, and is never mixed with it (its version is
//! part of every fingerprint version):
//!
//! * `simhash-v1` — SimHash bits (Charikar 2002): value `i` is bit `i mod 64`
//!   of the `⌊i / 64⌋`-th 64-bit SimHash of the feature set, every feature
//!   weighted 1 ([`crate::simhash::simhash_set`], block `k` under its own
//!   seed). Two values agree with probability `1 − θ/π`, `θ` the angle
//!   between the sets' indicator vectors, whose cosine is `2J / (1 + J)` for
//!   two sets of one size ([`SignatureScheme::agreement`]). Banded into
//!   `k + 1` disjoint blocks, a band match is exactly the pigeonhole test of
//!   a Hamming distance ≤ `k` (Manku et al., WWW 2007).

use crate::error::{Error, Result};
use crate::hash::{fmix64, hash_bytes, SplitMix64};
use std::sync::{Arc, OnceLock};

/// Which MinHash algorithm computes a signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum SignatureScheme {
    /// Classic MinHash, `n` hash functions (`minhash-mulshift-v1`).
    #[serde(rename = "minhash-mulshift-v1")]
    MinHash,
    /// One-permutation hashing with optimal densification (`oph-dens-v1`).
    #[serde(rename = "oph-dens-v1")]
    OnePermutation,
    /// SimHash bits, 64 per block (`simhash-v1`).
    #[serde(rename = "simhash-v1")]
    SimHash,
}

impl SignatureScheme {
    /// The stable version string.
    pub fn version(self) -> &'static str {
        match self {
            SignatureScheme::MinHash => "minhash-mulshift-v1",
            SignatureScheme::OnePermutation => "oph-dens-v1",
            SignatureScheme::SimHash => "simhash-v1",
        }
    }

    /// Parses `minhash`, `oph`, `simhash` or a full version string.
    pub fn from_name(name: &str) -> Result<SignatureScheme> {
        match name {
            "minhash" | "minhash-mulshift-v1" => Ok(SignatureScheme::MinHash),
            "oph" | "oph-dens-v1" => Ok(SignatureScheme::OnePermutation),
            "simhash" | "simhash-v1" => Ok(SignatureScheme::SimHash),
            other => Err(Error::unknown_version("signature", other)),
        }
    }

    /// The signature length a configuration gets when it names none: one
    /// 64-bit SimHash, or 128 MinHash values. The one place this default
    /// is written; the CLI, the service and the Python package ask here.
    pub fn default_num_perm(self) -> u32 {
        match self {
            SignatureScheme::SimHash => 64,
            _ => crate::Config::default().num_perm,
        }
    }

    /// True for SimHash, whose values are bits compared by Hamming distance.
    pub fn is_simhash(self) -> bool {
        self == SignatureScheme::SimHash
    }

    /// The probability that one signature value agrees between two sets of
    /// Jaccard similarity `j`: `j` for MinHash; for SimHash `1 − θ/π` with
    /// `cos θ = 2j / (1 + j)`, exact for two sets of one size (a pair of
    /// different sizes has a lower cosine for the same Jaccard).
    pub fn agreement(self, j: f64) -> f64 {
        let j = j.clamp(0.0, 1.0);
        match self {
            SignatureScheme::MinHash | SignatureScheme::OnePermutation => j,
            SignatureScheme::SimHash => {
                let cos = (2.0 * j / (1.0 + j)).clamp(-1.0, 1.0);
                1.0 - cos.acos() / std::f64::consts::PI
            }
        }
    }

    /// The Jaccard similarity whose expected agreement is `a` (the inverse
    /// of [`SignatureScheme::agreement`]; 0 at or below SimHash's chance
    /// agreement of one half).
    pub fn jaccard_from_agreement(self, a: f64) -> f64 {
        let a = a.clamp(0.0, 1.0);
        match self {
            SignatureScheme::MinHash | SignatureScheme::OnePermutation => a,
            SignatureScheme::SimHash => {
                let cos = (std::f64::consts::PI * (1.0 - a)).cos();
                if cos <= 0.0 {
                    0.0
                } else {
                    (cos / (2.0 - cos)).clamp(0.0, 1.0)
                }
            }
        }
    }
}

/// Computes signatures of one scheme, length and seed.
#[derive(Debug, Clone)]
pub struct MinHasher {
    scheme: SignatureScheme,
    seed: u64,
    mul: Vec<u64>,
    add: Vec<u64>,
    /// `oph-dens-v1`'s probe sequences, found once when a signature first
    /// has an empty bin, shared by clones.
    probes: Arc<OnceLock<ProbeOrders>>,
}

/// Largest supported signature length.
pub const MAX_NUM_PERM: usize = 1024;

impl MinHasher {
    /// A hasher producing `num_perm` values. `num_perm` must be in 1..=1024.
    pub fn new(scheme: SignatureScheme, num_perm: usize, seed: u64) -> Result<MinHasher> {
        if num_perm == 0 || num_perm > MAX_NUM_PERM {
            return Err(Error::config("num_perm", format!("must be in 1..={MAX_NUM_PERM}, got {num_perm}")));
        }
        let mut rng = SplitMix64::new(seed);
        let (mut mul, mut add) = (Vec::with_capacity(num_perm), Vec::with_capacity(num_perm));
        for _ in 0..num_perm {
            mul.push(rng.next() | 1);
            add.push(rng.next());
        }
        Ok(MinHasher { scheme, seed, mul, add, probes: Arc::default() })
    }

    /// Signature length.
    pub fn num_perm(&self) -> usize {
        self.mul.len()
    }

    /// The scheme.
    pub fn scheme(&self) -> SignatureScheme {
        self.scheme
    }

    /// Signature of a feature set (any order; duplicates are harmless for
    /// MinHash, while SimHash weighs a repeated feature once per copy —
    /// callers pass canonical, unique sets).
    pub fn signature(&self, features: &[u64]) -> Vec<u32> {
        let mut sig = Vec::new();
        self.signature_into(features, &mut sig);
        sig
    }

    /// Writes the signature into `sig` (cleared first). Empty set → empty signature.
    pub fn signature_into(&self, features: &[u64], sig: &mut Vec<u32>) {
        sig.clear();
        if features.is_empty() {
            return;
        }
        sig.resize(self.num_perm(), u32::MAX);
        match self.scheme {
            SignatureScheme::MinHash => classic(&self.mul, &self.add, features, sig),
            SignatureScheme::OnePermutation => self.one_permutation(features, sig),
            SignatureScheme::SimHash => self.simhash_bits(features, sig),
        }
    }

    fn simhash_bits(&self, features: &[u64], sig: &mut [u32]) {
        for (block, values) in sig.chunks_mut(64).enumerate() {
            let seed = fmix64(self.seed ^ 0x7369_6d68_6173_6800 ^ block as u64);
            let bits = crate::simhash::simhash_set(features, seed);
            for (i, v) in values.iter_mut().enumerate() {
                *v = (bits >> i & 1) as u32;
            }
        }
    }

    fn one_permutation(&self, features: &[u64], sig: &mut [u32]) {
        let n = sig.len();
        // Bin minimums kept without a branch (a comparison per feature
        // mispredicts often on hashes): `min` against the initial u32::MAX.
        let key = self.seed ^ 0x6f70_6864_656e_7331;
        let mut saw_max = false;
        for &f in features {
            let x = fmix64(f ^ key);
            let bin = bin_of(x, n);
            sig[bin] = sig[bin].min(x as u32);
            saw_max |= x as u32 == u32::MAX;
        }
        // Which bins a feature filled, as bits (num_perm <= 1024): those
        // below u32::MAX, unless a feature's value was u32::MAX itself (one
        // chance in 2^32 a feature), when the features say it again.
        let mut filled = [0u64; MAX_NUM_PERM / 64];
        if saw_max {
            for &f in features {
                let bin = bin_of(fmix64(f ^ key), n);
                filled[bin / 64] |= 1 << (bin % 64);
            }
        } else {
            for (bin, &v) in sig.iter().enumerate() {
                filled[bin / 64] |= u64::from(v != u32::MAX) << (bin % 64);
            }
        }
        let is_filled = |k: usize| filled[k / 64] >> (k % 64) & 1 == 1;
        // Optimal densification: an empty bin j takes the value of the first
        // filled bin of its probe sequence h(j, 1), h(j, 2), ... (never a
        // borrowed value: only empty bins are written, only filled ones
        // read). The sequences do not depend on the set, so they are known
        // once (ProbeOrders) and no probe is hashed here: hashing them cost
        // about (n - f)·n/f probes for a set filling f of n bins, 16,256 for
        // a one-feature text at n = 128. With few bins filled, an empty bin
        // compares the filled bins' ranks in its sequence (f each); with
        // many, it reads its sequence until a filled bin (about n/f each).
        let mut filled_bins = [0u16; MAX_NUM_PERM];
        let mut f = 0;
        for k in (0..n).filter(|&k| is_filled(k)) {
            filled_bins[f] = k as u16;
            f += 1;
        }
        if f == n {
            return;
        }
        let filled_bins = &filled_bins[..f];
        let orders = self.probes.get_or_init(|| ProbeOrders::new(n, self.seed));
        for j in (0..n).filter(|&j| !is_filled(j)) {
            let first = if f * f <= n {
                let nearest = filled_bins.iter().map(|&k| (orders.rank(j, k), k)).min();
                nearest.filter(|&(rank, _)| rank != UNREACHED).map(|(_, k)| k)
            } else {
                orders.reached(j).iter().copied().find(|&k| is_filled(usize::from(k)))
            };
            match first {
                Some(k) => sig[j] = sig[usize::from(k)],
                None => {
                    // Only when bin j's known sequence misses every filled
                    // bin (ProbeOrders stops a sequence after a bound): go
                    // on hashing where it stopped.
                    let mut attempt = u64::from(orders.attempts[j]) + 1;
                    loop {
                        let k = probe(j, attempt, self.seed, n);
                        if is_filled(k) {
                            sig[j] = sig[k];
                            break;
                        }
                        attempt += 1;
                    }
                }
            }
        }
    }
}

/// Bin `j`'s `attempt`-th probe, of `n` bins: `oph-dens-v1`'s frozen rule.
fn probe(j: usize, attempt: u64, seed: u64, n: usize) -> usize {
    let mut bytes = [0u8; 24];
    bytes[..8].copy_from_slice(&(j as u64).to_le_bytes());
    bytes[8..16].copy_from_slice(&attempt.to_le_bytes());
    bytes[16..].copy_from_slice(&seed.to_le_bytes());
    bin_of(hash_bytes(&bytes, 0x6465_6e73), n)
}

/// The bin of `n` that hash `h` picks: its high 32 bits scaled to `n`.
fn bin_of(h: u64, n: usize) -> usize {
    (((h >> 32) * n as u64) >> 32) as usize
}

/// The rank of a bin that a sequence's known part never reaches.
const UNREACHED: u16 = u16::MAX;

/// Every bin's probe sequence as the distinct bins it reaches, in the order
/// it first reaches them, and each bin's rank in that order: the first
/// filled bin of the list is the first filled bin of the sequence. A list
/// is complete (all `n` bins) after about n·ln n probes; one still
/// incomplete after `n·32 + 64` probes (probability below 10⁻¹⁰ a bin)
/// keeps what it found, and densifying hashes on from there when none of
/// it is filled. 4·n² bytes (64 KiB at n = 128, 4 MiB at 1,024), found in
/// about n²·ln n hashes (~90,000 at n = 128), once per hasher and its clones.
struct ProbeOrders {
    n: usize,
    /// Row `j` (`n` slots): the bins bin `j` reaches, first `len[j]` valid.
    order: Vec<u16>,
    /// Row `j`, slot `k`: where bin `k` is in row `j` of `order`, or
    /// `UNREACHED`.
    ranks: Vec<u16>,
    len: Vec<u16>,
    /// Probes bin `j`'s row took.
    attempts: Vec<u32>,
}

impl ProbeOrders {
    fn new(n: usize, seed: u64) -> ProbeOrders {
        ProbeOrders::with_bound(n, seed, (n * 32 + 64) as u64)
    }

    fn with_bound(n: usize, seed: u64, bound: u64) -> ProbeOrders {
        debug_assert!((1..=MAX_NUM_PERM).contains(&n));
        let (mut order, mut ranks) = (vec![0u16; n * n], vec![UNREACHED; n * n]);
        let (mut len, mut attempts) = (vec![0u16; n], vec![0u32; n]);
        let mut seen = [0u64; MAX_NUM_PERM / 64];
        for j in 0..n {
            seen.fill(0);
            let row = &mut order[j * n..(j + 1) * n];
            let rank = &mut ranks[j * n..(j + 1) * n];
            let (mut found, mut attempt) = (0usize, 0u64);
            while found < n && attempt < bound {
                attempt += 1;
                let k = probe(j, attempt, seed, n);
                if seen[k / 64] >> (k % 64) & 1 == 0 {
                    seen[k / 64] |= 1 << (k % 64);
                    row[found] = k as u16;
                    rank[k] = found as u16;
                    found += 1;
                }
            }
            len[j] = found as u16;
            attempts[j] = attempt as u32;
        }
        ProbeOrders { n, order, ranks, len, attempts }
    }

    fn reached(&self, j: usize) -> &[u16] {
        &self.order[j * self.n..j * self.n + usize::from(self.len[j])]
    }

    fn rank(&self, j: usize, k: u16) -> u16 {
        self.ranks[j * self.n + usize::from(k)]
    }
}

impl std::fmt::Debug for ProbeOrders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeOrders").field("n", &self.n).finish_non_exhaustive()
    }
}

/// Fraction of equal positions: the MinHash estimate of Jaccard similarity.
/// Errors when the signatures have different lengths.
pub fn estimate_jaccard(a: &[u32], b: &[u32]) -> Result<f64> {
    if a.len() != b.len() {
        return Err(Error::incompatible(format!("signature lengths {} and {}", a.len(), b.len())));
    }
    if a.is_empty() {
        return Ok(1.0);
    }
    let eq = a.iter().zip(b).filter(|(x, y)| x == y).count();
    Ok(eq as f64 / a.len() as f64)
}

const LANES: usize = 16;

#[inline(always)]
fn classic_kernel(mul: &[u64], add: &[u64], features: &[u64], sig: &mut [u32]) {
    let mut m_chunks = mul.chunks_exact(LANES);
    let mut a_chunks = add.chunks_exact(LANES);
    let mut s_chunks = sig.chunks_exact_mut(LANES);
    // Blocks of 16 hash functions stay in registers while every feature streams by.
    for ((m, a), s) in (&mut m_chunks).zip(&mut a_chunks).zip(&mut s_chunks) {
        let m: &[u64; LANES] = m.try_into().expect("chunk of LANES");
        let a: &[u64; LANES] = a.try_into().expect("chunk of LANES");
        let mut acc = [u32::MAX; LANES];
        acc.copy_from_slice(s);
        for &x in features {
            for l in 0..LANES {
                let v = (m[l].wrapping_mul(x).wrapping_add(a[l]) >> 32) as u32;
                acc[l] = acc[l].min(v);
            }
        }
        s.copy_from_slice(&acc);
    }
    let (m, a, s) = (m_chunks.remainder(), a_chunks.remainder(), s_chunks.into_remainder());
    for &x in features {
        for l in 0..s.len() {
            let v = (m[l].wrapping_mul(x).wrapping_add(a[l]) >> 32) as u32;
            s[l] = s[l].min(v);
        }
    }
}

fn classic(mul: &[u64], add: &[u64], features: &[u64], sig: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx2")
        {
            // SAFETY: the CPU supports every feature the function is compiled
            // for (the list matches its `target_feature` attribute).
            return unsafe { classic_avx512(mul, add, features, sig) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { classic_avx2(mul, add, features, sig) };
        }
    }
    classic_kernel(mul, add, features, sig)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2")]
unsafe fn classic_avx512(mul: &[u64], add: &[u64], features: &[u64], sig: &mut [u32]) {
    classic_kernel(mul, add, features, sig)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn classic_avx2(mul: &[u64], add: &[u64], features: &[u64], sig: &mut [u32]) {
    classic_kernel(mul, add, features, sig)
}

/// The baseline kernel, for tests that check the dispatched paths agree.
#[cfg(test)]
pub(crate) fn classic_baseline(mul_seed: u64, num_perm: usize, features: &[u64]) -> Vec<u32> {
    let h = MinHasher::new(SignatureScheme::MinHash, num_perm, mul_seed).expect("valid");
    let mut sig = vec![u32::MAX; num_perm];
    classic_kernel(&h.mul, &h.add, features, &mut sig);
    sig
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_matches_baseline() {
        let features: Vec<u64> = (0..1000u64).map(fmix64).collect();
        for n in [1, 15, 16, 17, 128, 200] {
            let h = MinHasher::new(SignatureScheme::MinHash, n, 42).unwrap();
            assert_eq!(h.signature(&features), classic_baseline(42, n, &features), "n={n}");
        }
    }

    #[test]
    fn empty_set_has_empty_signature() {
        for s in [SignatureScheme::MinHash, SignatureScheme::OnePermutation, SignatureScheme::SimHash] {
            assert!(MinHasher::new(s, 64, 1).unwrap().signature(&[]).is_empty());
        }
    }

    #[test]
    fn rejects_bad_lengths() {
        assert!(MinHasher::new(SignatureScheme::MinHash, 0, 1).is_err());
        assert!(MinHasher::new(SignatureScheme::MinHash, 1025, 1).is_err());
        assert!(estimate_jaccard(&[1, 2], &[1]).is_err());
    }

    #[test]
    fn simhash_values_are_bits_that_agree_as_the_angle_says() {
        let h = MinHasher::new(SignatureScheme::SimHash, 1024, 7).unwrap();
        let a: Vec<u64> = (0..600u64).map(fmix64).collect();
        // b shares 500 of a's 600 features and has 100 of its own: J = 500/700.
        let b: Vec<u64> = (100..700u64).map(fmix64).collect();
        let (sa, sb) = (h.signature(&a), h.signature(&b));
        assert!(sa.iter().all(|&v| v <= 1) && sa.len() == 1024);
        let agree = sa.iter().zip(&sb).filter(|(x, y)| x == y).count() as f64 / 1024.0;
        let j = 500.0 / 700.0;
        let expected = SignatureScheme::SimHash.agreement(j);
        // Binomial sd at 1024 values is about 0.012.
        assert!((agree - expected).abs() < 0.05, "agreement {agree}, expected {expected}");
        let back = SignatureScheme::SimHash.jaccard_from_agreement(expected);
        assert!((back - j).abs() < 1e-9, "{back}");
        assert_eq!(SignatureScheme::SimHash.jaccard_from_agreement(0.4), 0.0);
        assert_eq!(SignatureScheme::from_name("simhash").unwrap().version(), "simhash-v1");
    }

    /// `oph-dens-v1` as first written: every empty bin hashes its probes.
    fn densified_by_hashing(h: &MinHasher, features: &[u64]) -> Vec<u32> {
        let n = h.num_perm();
        let key = h.seed ^ 0x6f70_6864_656e_7331;
        let mut sig = vec![u32::MAX; n];
        let mut filled = vec![false; n];
        for &f in features {
            let x = fmix64(f ^ key);
            let bin = bin_of(x, n);
            sig[bin] = sig[bin].min(x as u32);
            filled[bin] = true;
        }
        for j in (0..n).filter(|&j| !filled[j]) {
            let mut attempt = 1;
            loop {
                let k = probe(j, attempt, h.seed, n);
                if filled[k] {
                    sig[j] = sig[k];
                    break;
                }
                attempt += 1;
            }
        }
        sig
    }

    #[test]
    fn densifying_by_probe_orders_equals_hashing_every_probe() {
        let mut rng = SplitMix64::new(11);
        for n in [1, 2, 3, 7, 64, 128, 200, 1024] {
            for seed in [0, 1, 0xdead_beef] {
                let h = MinHasher::new(SignatureScheme::OnePermutation, n, seed).unwrap();
                for size in [1, 2, 3, 5, 17, n / 2 + 1, n, 3 * n] {
                    let features: Vec<u64> = (0..size).map(|_| rng.next()).collect();
                    assert_eq!(
                        h.signature(&features),
                        densified_by_hashing(&h, &features),
                        "n {n} seed {seed} size {size}"
                    );
                }
            }
        }
        // Probe orders cut short (a bin's list incomplete): densifying
        // hashes on from where the list stopped, to the same values.
        for bound in [1, 2, 5, 40] {
            let h = MinHasher::new(SignatureScheme::OnePermutation, 128, 5).unwrap();
            h.probes.set(ProbeOrders::with_bound(128, 5, bound)).unwrap();
            assert!(h.probes.get().unwrap().len.iter().any(|&l| l < 128));
            for size in [1, 2, 9, 100] {
                let features: Vec<u64> = (0..size).map(|_| rng.next()).collect();
                assert_eq!(h.signature(&features), densified_by_hashing(&h, &features), "bound {bound} size {size}");
            }
        }
    }

    #[test]
    fn one_permutation_fills_every_bin() {
        let h = MinHasher::new(SignatureScheme::OnePermutation, 128, 3).unwrap();
        let sig = h.signature(&[5, 6, 7]);
        assert_eq!(sig.len(), 128);
        let distinct: std::collections::BTreeSet<_> = sig.iter().collect();
        assert!(distinct.len() <= 3);
    }
}
