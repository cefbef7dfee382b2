//! Policies: how exact scores become verdicts, with an explanation.

use crate::error::{Error, Result};

/// The three outcomes of the batch-mode spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Score ≥ `threshold_identical` (or the same content hash).
    Identical,
    /// Score ≥ `threshold_similar`.
    Similar,
    /// Below `threshold_similar`, or no candidate at all.
    Different,
}

impl Verdict {
    /// `identical`, `similar` or `different`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Identical => "identical",
            Verdict::Similar => "similar",
            Verdict::Different => "different",
        }
    }
}

/// A versioned mapping from exact scores to verdicts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Policy {
    /// Stable identifier, e.g. `default`.
    pub id: String,
    /// Bumped whenever thresholds change; recorded with every decision.
    pub version: u32,
    /// Score at or above which content is identical.
    pub threshold_identical: f64,
    /// Score at or above which content is similar.
    pub threshold_similar: f64,
}

impl Policy {
    /// A validated policy: `0 ≤ similar ≤ identical ≤ 1`.
    pub fn new(
        id: impl Into<String>,
        version: u32,
        threshold_identical: f64,
        threshold_similar: f64,
    ) -> Result<Policy> {
        let id = id.into();
        if id.is_empty() || id.len() > 128 {
            return Err(Error::config("policy id", "must be 1..=128 bytes"));
        }
        for (key, v) in [("threshold_identical", threshold_identical), ("threshold_similar", threshold_similar)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(Error::config(key, format!("must be in [0, 1], got {v}")));
            }
        }
        if threshold_similar > threshold_identical {
            return Err(Error::config(
                "threshold_similar",
                format!("{threshold_similar} is above threshold_identical {threshold_identical}"),
            ));
        }
        Ok(Policy { id, version, threshold_identical, threshold_similar })
    }

    /// The verdict for an exact score. `same_content` (equal content hashes)
    /// is identical whatever the thresholds.
    pub fn classify(&self, score: f64, same_content: bool) -> Verdict {
        if same_content || score >= self.threshold_identical {
            Verdict::Identical
        } else if score >= self.threshold_similar {
            Verdict::Similar
        } else {
            Verdict::Different
        }
    }

    /// A one-sentence, human-readable reason for `verdict`.
    pub fn explain(&self, verdict: Verdict, score: Option<f64>, closest: Option<&str>, method: &str) -> String {
        let pv = format!("policy {}@v{}", self.id, self.version);
        match (verdict, score, closest) {
            (_, Some(s), Some(c)) if verdict != Verdict::Different => format!(
                "{} to {c}: {method} score {s:.4} >= {} threshold {:.2} ({pv})",
                verdict.as_str(),
                verdict.as_str(),
                if verdict == Verdict::Identical { self.threshold_identical } else { self.threshold_similar },
            ),
            (_, Some(s), Some(c)) => format!(
                "different: closest is {c} with {method} score {s:.4} < similar threshold {:.2} ({pv})",
                self.threshold_similar
            ),
            _ => format!("different: no candidate reached verification ({pv})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_inclusive() {
        let p = Policy::new("default", 1, 0.95, 0.80).unwrap();
        assert_eq!(p.classify(0.95, false), Verdict::Identical);
        assert_eq!(p.classify(0.80, false), Verdict::Similar);
        assert_eq!(p.classify(0.7999, false), Verdict::Different);
        assert_eq!(p.classify(0.1, true), Verdict::Identical);
    }

    #[test]
    fn invalid_policies_rejected() {
        assert!(Policy::new("p", 1, 0.8, 0.9).is_err());
        assert!(Policy::new("p", 1, 1.2, 0.9).is_err());
        assert!(Policy::new("", 1, 0.9, 0.8).is_err());
    }

    #[test]
    fn explanations_name_the_evidence() {
        let p = Policy::new("default", 3, 0.95, 0.80).unwrap();
        let e = p.explain(Verdict::Similar, Some(0.83), Some("paper"), "minhash");
        assert!(e.contains("paper") && e.contains("0.83") && e.contains("default@v3"), "{e}");
    }
}
