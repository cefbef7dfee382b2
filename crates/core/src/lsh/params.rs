//! Choosing (bands, rows): the S-curve and the parameter calculator.
//!
//! With `b` bands of `r` rows, two items of Jaccard similarity `s` become
//! candidates with probability `P(s) = 1 - (1 - s^r)^b`. [`choose`] picks, among
//! all `(b, r)` with `b·r ≤ num_perm`, those that reach a **recall target** at
//! the threshold (`P(t) ≥ target`, hence at least that for every pair above
//! `t`) and, of those, the one with the smallest false-candidate area
//! `∫₀ᵗ P(s) ds` — the expected candidate load from pairs below the threshold.
//! Ties go to fewer bands (less memory). [`optimal_weighted`] reproduces
//! datasketch's criterion (weighted false-positive + false-negative areas) for
//! comparison.

use crate::error::{Error, Result};

/// Bands × rows of an LSH index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LshParams {
    /// Number of bands (hash tables).
    pub bands: u32,
    /// Signature values per band.
    pub rows: u32,
}

impl LshParams {
    /// Validated parameters: both at least 1, at most 1024 signature values in all.
    pub fn new(bands: u32, rows: u32) -> Result<LshParams> {
        if bands == 0 || rows == 0 {
            return Err(Error::config("bands/rows", "bands and rows must both be at least 1"));
        }
        if u64::from(bands) * u64::from(rows) > crate::minhash::MAX_NUM_PERM as u64 {
            return Err(Error::config("bands/rows", format!("bands x rows = {} exceeds 1024", bands * rows)));
        }
        Ok(LshParams { bands, rows })
    }

    /// Signature values used: `bands · rows`.
    pub fn width(self) -> u32 {
        self.bands * self.rows
    }

    /// `P(s)` for these parameters.
    pub fn probability(self, s: f64) -> f64 {
        candidate_probability(s, self.bands, self.rows)
    }

    /// Expected candidate load from pairs below `t`: `∫₀ᵗ P(s) ds`.
    pub fn false_positive_area(self, t: f64) -> f64 {
        integrate(|s| self.probability(s), 0.0, t)
    }

    /// Expected missed mass above `t`: `∫ₜ¹ (1 - P(s)) ds`.
    pub fn false_negative_area(self, t: f64) -> f64 {
        integrate(|s| 1.0 - self.probability(s), t, 1.0)
    }

    /// The threshold-like point where `P(s) = 1/2`... approximately `(1/b)^(1/r)`.
    pub fn inflection(self) -> f64 {
        (1.0 / f64::from(self.bands)).powf(1.0 / f64::from(self.rows))
    }
}

/// `1 - (1 - s^rows)^bands`.
pub fn candidate_probability(s: f64, bands: u32, rows: u32) -> f64 {
    let s = s.clamp(0.0, 1.0);
    1.0 - (1.0 - s.powi(rows as i32)).powi(bands as i32)
}

fn integrate(f: impl Fn(f64) -> f64, a: f64, b: f64) -> f64 {
    if b <= a {
        return 0.0;
    }
    // Composite Simpson, 200 intervals: far finer than any decision depends on.
    let n = 200;
    let h = (b - a) / n as f64;
    let mut sum = f(a) + f(b);
    for i in 1..n {
        let x = a + h * i as f64;
        sum += if i % 2 == 1 { 4.0 } else { 2.0 } * f(x);
    }
    sum * h / 3.0
}

/// What [`choose`] decided, and how well it meets the target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    /// The chosen parameters.
    pub params: LshParams,
    /// `P(threshold)`.
    pub recall_at_threshold: f64,
    /// False-candidate area below the threshold.
    pub false_positive_area: f64,
    /// Whether `recall_at_threshold ≥ target`. When false, the parameters are
    /// the best recall available within `num_perm`.
    pub meets_target: bool,
}

/// Picks (bands, rows) with `bands·rows ≤ num_perm` reaching `recall_target`
/// at `threshold` with the least false-candidate area.
pub fn choose(threshold: f64, recall_target: f64, num_perm: u32) -> Result<Choice> {
    check_unit("threshold", threshold)?;
    check_unit("recall_target", recall_target)?;
    if threshold <= 0.0 {
        return Err(Error::config("threshold", "must be above 0 for LSH"));
    }
    if num_perm == 0 || num_perm as usize > crate::minhash::MAX_NUM_PERM {
        return Err(Error::config("num_perm", format!("must be in 1..=1024, got {num_perm}")));
    }
    let mut best: Option<Choice> = None;
    let mut fallback: Option<Choice> = None;
    for rows in 1..=num_perm {
        for bands in 1..=num_perm / rows {
            let params = LshParams { bands, rows };
            let recall = params.probability(threshold);
            let meets = recall >= recall_target;
            if meets {
                let fp = params.false_positive_area(threshold);
                let better = match best {
                    None => true,
                    Some(b) => {
                        fp < b.false_positive_area - 1e-12
                            || ((fp - b.false_positive_area).abs() <= 1e-12 && bands < b.params.bands)
                    }
                };
                if better {
                    best = Some(Choice {
                        params,
                        recall_at_threshold: recall,
                        false_positive_area: fp,
                        meets_target: true,
                    });
                }
                // More bands at this width only add false candidates.
                break;
            }
            if fallback.is_none_or(|f| recall > f.recall_at_threshold) {
                let fp = params.false_positive_area(threshold);
                fallback =
                    Some(Choice { params, recall_at_threshold: recall, false_positive_area: fp, meets_target: false });
            }
        }
    }
    Ok(best.or(fallback).expect("num_perm >= 1 gives at least one candidate"))
}

/// datasketch's criterion: minimise `fp_weight·FP area + fn_weight·FN area`.
pub fn optimal_weighted(threshold: f64, num_perm: u32, fp_weight: f64, fn_weight: f64) -> Result<LshParams> {
    check_unit("threshold", threshold)?;
    if num_perm == 0 || num_perm as usize > crate::minhash::MAX_NUM_PERM {
        return Err(Error::config("num_perm", format!("must be in 1..=1024, got {num_perm}")));
    }
    let mut best = (f64::INFINITY, LshParams { bands: 1, rows: 1 });
    for bands in 1..=num_perm {
        for rows in 1..=num_perm / bands {
            let p = LshParams { bands, rows };
            let err = fp_weight * p.false_positive_area(threshold) + fn_weight * p.false_negative_area(threshold);
            if err < best.0 {
                best = (err, p);
            }
        }
    }
    Ok(best.1)
}

fn check_unit(key: &'static str, v: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&v) || v.is_nan() {
        return Err(Error::config(key, format!("must be in [0, 1], got {v}")));
    }
    Ok(())
}

/// The S-curve as a standalone SVG document (600×400), with the threshold marked.
pub fn s_curve_svg(params: LshParams, threshold: f64) -> String {
    let (w, h, m) = (600.0, 400.0, 50.0);
    let x = |s: f64| m + s * (w - 2.0 * m);
    let y = |p: f64| h - m - p * (h - 2.0 * m);
    let mut points = String::new();
    for i in 0..=200 {
        let s = f64::from(i) / 200.0;
        points.push_str(&format!("{:.1},{:.1} ", x(s), y(params.probability(s))));
    }
    let mut ticks = String::new();
    for i in 0..=10 {
        let v = f64::from(i) / 10.0;
        ticks.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{v:.1}</text>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{v:.1}</text>",
            x(v),
            h - m + 16.0,
            m - 6.0,
            y(v) + 4.0
        ));
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\
         <text x=\"{cx}\" y=\"24\" font-size=\"14\" text-anchor=\"middle\">P(candidate) = 1-(1-s^{r})^{b}  (b={b}, r={r}, threshold={t})</text>\
         <line x1=\"{m}\" y1=\"{yb}\" x2=\"{xr}\" y2=\"{yb}\" stroke=\"black\"/>\
         <line x1=\"{m}\" y1=\"{m}\" x2=\"{m}\" y2=\"{yb}\" stroke=\"black\"/>\
         {ticks}\
         <line x1=\"{tx:.1}\" y1=\"{m}\" x2=\"{tx:.1}\" y2=\"{yb}\" stroke=\"#C6284D\" stroke-dasharray=\"4 3\"/>\
         <polyline fill=\"none\" stroke=\"#147D84\" stroke-width=\"2\" points=\"{points}\"/>\
         <text x=\"{cx}\" y=\"{xl}\" font-size=\"12\" text-anchor=\"middle\">Jaccard similarity s</text>\
         </svg>\n",
        cx = w / 2.0,
        r = params.rows,
        b = params.bands,
        t = threshold,
        yb = h - m,
        xr = w - m,
        tx = x(threshold),
        xl = h - 12.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probability_matches_formula() {
        let p = LshParams::new(32, 4).unwrap();
        let s: f64 = 0.8;
        assert!((p.probability(s) - (1.0 - (1.0 - s.powi(4)).powi(32))).abs() < 1e-15);
        assert_eq!(p.probability(0.0), 0.0);
        assert_eq!(p.probability(1.0), 1.0);
    }

    #[test]
    fn choose_meets_target_and_fits() {
        for &(t, target) in &[(0.5, 0.99), (0.8, 0.995), (0.85, 0.999), (0.9, 0.999), (0.75, 0.999)] {
            let c = choose(t, target, 128).unwrap();
            assert!(c.meets_target, "t={t}");
            assert!(c.recall_at_threshold >= target);
            assert!(c.params.width() <= 128);
        }
    }

    #[test]
    fn choose_is_no_worse_than_any_feasible_pair() {
        let (t, target) = (0.8, 0.995);
        let c = choose(t, target, 128).unwrap();
        for b in 1..=128u32 {
            for r in 1..=128 / b {
                let p = LshParams { bands: b, rows: r };
                if p.probability(t) >= target {
                    assert!(p.false_positive_area(t) >= c.false_positive_area - 1e-9, "{p:?} beats {c:?}");
                }
            }
        }
    }

    #[test]
    fn unreachable_target_says_so() {
        let c = choose(0.5, 0.9999, 2).unwrap();
        assert!(!c.meets_target);
        assert_eq!(c.params, LshParams { bands: 2, rows: 1 });
    }

    #[test]
    fn bad_inputs_rejected() {
        assert!(choose(1.5, 0.9, 128).is_err());
        assert!(choose(0.8, 0.9, 0).is_err());
        assert!(LshParams::new(0, 4).is_err());
        assert!(LshParams::new(64, 32).is_err());
    }

    #[test]
    fn weighted_optimum_is_sane() {
        let p = optimal_weighted(0.8, 128, 0.5, 0.5).unwrap();
        assert!(p.width() <= 128 && p.bands > 1 && p.rows > 1);
    }

    #[test]
    fn svg_is_well_formed_enough() {
        let svg = s_curve_svg(LshParams::new(16, 8).unwrap(), 0.85);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("polyline"));
    }
}
