//! Report types shared by the `dedup` and `eval` summaries.

#[derive(Debug, serde::Serialize)]
pub struct Percentiles {
    pub p50: usize,
    pub p99: usize,
    pub max: usize,
}

#[derive(Debug, serde::Serialize)]
pub struct ParamsOut {
    pub threshold: f64,
    pub bands: u32,
    pub rows: u32,
    pub num_perm: u32,
    pub fingerprint_version: String,
    pub recall_at_threshold: f64,
}

impl ParamsOut {
    pub fn of(p: &neardup_core::Params) -> ParamsOut {
        ParamsOut {
            threshold: p.threshold(),
            bands: p.lsh().bands,
            rows: p.lsh().rows,
            num_perm: p.config().num_perm,
            fingerprint_version: p.fingerprint_version(),
            recall_at_threshold: p.candidate_probability(p.threshold()),
        }
    }
}
