//! Progress of a scan, by phase: the library reports, the caller draws.

/// A phase of a scan, for progress reporting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Reading and parsing files.
    Parse,
    /// MinHash fingerprints and embeddings.
    Fingerprint,
    /// The comparison pass.
    Compare,
}

impl Phase {
    /// The bar label: `parse`, `fingerprint` or `dedup` (the seed's name for
    /// the comparison bar).
    pub fn label(self) -> &'static str {
        match self {
            Phase::Parse => "parse",
            Phase::Fingerprint => "fingerprint",
            Phase::Compare => "dedup",
        }
    }
}

/// Receives progress; the library draws nothing itself. Calls for the parse
/// and fingerprint phases may come from several threads.
pub trait Progress: Sync {
    /// A phase begins with `total` units of work.
    fn start(&self, phase: Phase, total: u64) {
        let _ = (phase, total);
    }
    /// `n` more units are done.
    fn advance(&self, phase: Phase, n: u64) {
        let _ = (phase, n);
    }
    /// The phase is over.
    fn finish(&self, phase: Phase) {
        let _ = phase;
    }
}

/// A [`Progress`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
