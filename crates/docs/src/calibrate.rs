//! Calibration: every matcher's raw score onto the one scale the thresholds
//! are set on.
//!
//! A raw cosine of sentence embeddings and a raw Jaccard of word 5-gram
//! shingles do not mean the same thing: on the labelled benchmark
//! (bench/results/scan-accuracy.md) different pages of one manual reach a
//! MiniLM cosine of 0.87 while sharing almost no shingles, and a revision
//! with 10 % of its words changed keeps a Jaccard of 0.58–0.90. The thresholds
//! (`threshold_identical` 0.95, `threshold_similar` 0.80) are read on one
//! **common scale**, defined by what a reader calls the pair:
//!
//! * ≥ 0.95 — the same document: another format of it, or trivial edits;
//! * ≥ 0.80 — a revision of it (up to about 10 % of the words changed);
//! * below — a different document (another page of the same manual included).
//!
//! Each matcher's raw score is mapped onto that scale by a monotone,
//! piecewise-linear [`Calibration`] through knots `raw:calibrated`, with
//! `(0, 0)` and `(1, 1)` implied (negative cosines map to 0). The knots are
//! fitted on the labelled benchmark ([`fit_knot`]): the `similar` knot at
//! the raw score that best separates the pairs a reader calls duplicates
//! (format copies, revisions up to 10 %) from the pages of one manual, the
//! `identical` knot no lower than any pair that is not the same document.
//! Maps are shipped for MinHash on word 5-grams and for the models we have
//! measured ([`known_embedding_map`]); for another model, fit one with
//! `neardup scan CORPUS --model M --labels pairs.tsv` and set
//! `embedding_calibration` (docs/scan.md). Both the raw and the calibrated
//! scores are stored; verdicts use the calibrated ones.

use std::fmt;

/// The shipped map for the MinHash matcher on word 5-gram shingles (the
/// default `shingle_width`), set on the labelled benchmark: sibling pages
/// reached a Jaccard of 0.271 (one navigation-only pair 0.552) and every
/// revision with up to 10 % of its words changed at least 0.575, so
/// `similar` starts at 0.45, inside that gap; `identical` keeps the seed's
/// 0.95 (the export skips identical documents, so that end is not loosened).
pub const MINHASH_WORD5: &str = "0.45:0.80,0.95:0.95";

/// Embedding maps shipped for known models: (model-id suffix, name, knots).
/// A `local:` model is known by the hash of its weights (the `#…` suffix of
/// its id), whatever its folder is called. all-MiniLM-L6-v2 on the labelled
/// benchmark: sibling pages reached a cosine of 0.865 (one navigation-only
/// pair 0.958) while 10 %-edit revisions went down to 0.733, so no cut
/// separates them; `similar` is put at 0.925, above the siblings, leaving
/// revisions to MinHash, and `identical` at 0.995, above all but one
/// revision with 5 % of its words changed.
const KNOWN_EMBEDDING: &[(&str, &str, &str)] =
    &[("#53aa51172d142c89", "all-MiniLM-L6-v2 (local)", "0.925:0.80,0.995:0.95")];

/// The shipped map for the embedding model `model_id`, if it is known:
/// `(model name, calibration)`.
///
/// ```
/// let (name, map) = neardup_docs::known_embedding_map("local:minilm#53aa51172d142c89").unwrap();
/// assert!(name.contains("MiniLM"));
/// assert!(map.apply(0.90) < 0.80 && map.apply(0.999) > 0.95);
/// assert!(neardup_docs::known_embedding_map("ollama:some-model").is_none());
/// ```
pub fn known_embedding_map(model_id: &str) -> Option<(&'static str, Calibration)> {
    KNOWN_EMBEDDING
        .iter()
        .find(|(suffix, _, _)| model_id.ends_with(suffix))
        .map(|(_, name, knots)| (*name, Calibration::parse(knots).unwrap_or_else(|_| Calibration::identity())))
}

/// A monotone piecewise-linear map from a raw score onto the common scale.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Interior knots `(raw, calibrated)`, raw strictly increasing in (0, 1),
    /// calibrated non-decreasing in [0, 1]; `(0, 0)` and `(1, 1)` implied.
    knots: Vec<(f64, f64)>,
}

impl Calibration {
    /// The identity: the raw score is used as it is.
    pub fn identity() -> Calibration {
        Calibration { knots: Vec::new() }
    }

    /// True for the identity map.
    pub fn is_identity(&self) -> bool {
        self.knots.iter().all(|(r, c)| r == c)
    }

    /// Parses `none` (the identity) or knots `RAW:CAL,RAW:CAL,…`.
    ///
    /// ```
    /// use neardup_docs::Calibration;
    /// let c = Calibration::parse("0.5:0.8, 0.9:0.95")?;
    /// assert_eq!(c.apply(0.5), 0.8);
    /// assert!((c.apply(0.7) - 0.875).abs() < 1e-12);
    /// assert_eq!(c.apply(-0.3), 0.0);
    /// assert_eq!(c.to_string(), "0.5:0.8,0.9:0.95");
    /// assert!(Calibration::parse("0.9:0.8,0.5:0.9").is_err());
    /// # Ok::<(), String>(())
    /// ```
    pub fn parse(text: &str) -> Result<Calibration, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("none") || text.eq_ignore_ascii_case("identity") {
            return Ok(Calibration::identity());
        }
        let mut knots = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (raw, cal) = part.split_once(':').ok_or_else(|| format!("knot {part:?} is not RAW:CALIBRATED"))?;
            let num = |s: &str| s.trim().parse::<f64>().map_err(|_| format!("{s:?} in knot {part:?} is not a number"));
            knots.push((num(raw)?, num(cal)?));
        }
        if knots.is_empty() {
            return Err("no knots; use \"none\" or RAW:CALIBRATED,…".to_owned());
        }
        let mut last = (0.0, 0.0);
        for &(r, c) in &knots {
            if !(r > 0.0 && r < 1.0 && (0.0..=1.0).contains(&c)) {
                return Err(format!("knot {r}:{c}: raw must be in (0, 1) and calibrated in [0, 1]"));
            }
            if r <= last.0 || c < last.1 {
                return Err(format!("knot {r}:{c}: knots must rise (raw strictly, calibrated not falling)"));
            }
            last = (r, c);
        }
        Ok(Calibration { knots })
    }

    fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        std::iter::once((0.0, 0.0)).chain(self.knots.iter().copied()).chain(std::iter::once((1.0, 1.0)))
    }

    /// The calibrated score of `raw` (clamped to [0, 1] first).
    pub fn apply(&self, raw: f64) -> f64 {
        let x = if raw.is_nan() { 0.0 } else { raw.clamp(0.0, 1.0) };
        let mut prev = (0.0, 0.0);
        for (r, c) in self.points() {
            if x <= r {
                if r == prev.0 {
                    return c;
                }
                return prev.1 + (c - prev.1) * (x - prev.0) / (r - prev.0);
            }
            prev = (r, c);
        }
        1.0
    }

    /// The smallest raw score whose calibrated score reaches `calibrated`
    /// (1 when none does).
    pub fn raw_for(&self, calibrated: f64) -> f64 {
        let mut prev = (0.0, 0.0);
        for (r, c) in self.points() {
            if c >= calibrated {
                if c == prev.1 {
                    return prev.0;
                }
                return prev.0 + (r - prev.0) * (calibrated - prev.1) / (c - prev.1);
            }
            prev = (r, c);
        }
        1.0
    }
}

impl fmt::Display for Calibration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_identity() {
            return f.write_str("none");
        }
        let parts: Vec<String> = self.knots.iter().map(|(r, c)| format!("{r}:{c}")).collect();
        f.write_str(&parts.join(","))
    }
}

/// The raw score that best separates `positives` (pairs that should reach
/// the knot) from `negatives` (that should not): the threshold minimising
/// the share of positives below it plus the share of negatives at or above
/// it; among equally good thresholds, the middle of the best interval.
/// `None` when either side is empty.
///
/// ```
/// let t = neardup_docs::fit_knot(&[0.7, 0.8, 0.9], &[0.1, 0.3]).unwrap();
/// assert!((t - 0.5).abs() < 1e-9);
/// ```
pub fn fit_knot(positives: &[f64], negatives: &[f64]) -> Option<f64> {
    if positives.is_empty() || negatives.is_empty() {
        return None;
    }
    let mut cuts: Vec<f64> = positives.iter().chain(negatives).copied().filter(|x| x.is_finite()).collect();
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    // Candidate thresholds: each observed score, and just above the largest.
    let above = cuts.last().map_or(1.0, |m| m + 1e-9);
    let error = |t: f64| {
        let missed = positives.iter().filter(|&&p| p < t).count() as f64 / positives.len() as f64;
        let false_hits = negatives.iter().filter(|&&n| n >= t).count() as f64 / negatives.len() as f64;
        missed + false_hits
    };
    let mut best: Option<(f64, usize, usize)> = None; // (error, first index, last index)
    let all: Vec<f64> = cuts.iter().copied().chain(std::iter::once(above)).collect();
    for (i, &t) in all.iter().enumerate() {
        let e = error(t);
        match best {
            Some((b, _, _)) if e > b + 1e-12 => {}
            Some((b, first, last)) if (e - b).abs() <= 1e-12 && last + 1 == i => best = Some((b, first, i)),
            Some((b, _, _)) if (e - b).abs() <= 1e-12 => {}
            _ => best = Some((e, i, i)),
        }
    }
    let (_, first, last) = best?;
    // The threshold can sit anywhere in (all[first - 1], all[last]]: take the
    // middle of that gap.
    let low = if first == 0 { all[first] } else { all[first - 1] };
    Some((low + all[last]) / 2.0)
}

/// The lowest raw score that none of `negatives` reaches: the `identical`
/// knot, so that no pair that is not the same document scores identical.
pub fn fit_ceiling(negatives: &[f64]) -> Option<f64> {
    negatives.iter().copied().filter(|x| x.is_finite()).max_by(f64::total_cmp).map(|m| (m + 0.0005).min(0.9995))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotone_and_inverse() {
        let c = Calibration::parse(MINHASH_WORD5).unwrap();
        let mut last = -1.0;
        for i in 0..=1000 {
            let x = f64::from(i) / 1000.0;
            let y = c.apply(x);
            assert!(y >= last && (0.0..=1.0).contains(&y), "{x}: {y}");
            last = y;
        }
        assert!((c.apply(0.45) - 0.80).abs() < 1e-12);
        assert!((c.apply(0.95) - 0.95).abs() < 1e-12);
        assert!((c.raw_for(0.80) - 0.45).abs() < 1e-12);
        assert!((c.raw_for(0.90) - c.knots[0].0 - (0.90 - 0.80) / 0.15 * 0.5).abs() < 1e-9);
        assert_eq!(Calibration::identity().raw_for(0.8), 0.8);
        assert_eq!(Calibration::identity().apply(f64::NAN), 0.0);
        assert_eq!(Calibration::identity().to_string(), "none");
    }

    #[test]
    fn bad_knots_are_refused() {
        for bad in ["", "0.5", "0.5:x", "1.2:0.9", "0:0.5", "0.5:0.9,0.6:0.8", "0.6:0.8,0.6:0.9"] {
            assert!(Calibration::parse(bad).is_err(), "{bad}");
        }
        assert!(Calibration::parse("none").unwrap().is_identity());
    }

    #[test]
    fn knots_fit_the_gap() {
        // Overlap: the threshold minimising both error shares.
        let t = fit_knot(&[0.6, 0.7, 0.8, 0.9], &[0.1, 0.2, 0.65]).unwrap();
        assert!(t > 0.6 && t <= 0.7, "{t}");
        assert!(fit_knot(&[], &[0.1]).is_none());
        assert_eq!(fit_ceiling(&[0.2, 0.93]), Some(0.9305));
    }
}
