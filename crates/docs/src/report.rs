//! `neardup report`: one row per stored document — verdict, closest match,
//! scores (raw and calibrated), method — as a text table or JSON.

use neardup_core::Verdict;
use serde::Serialize;

use crate::store::Store;

/// One document as the report shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportRow {
    /// The document's slug.
    pub slug: String,
    /// Source path.
    pub path: String,
    /// Parsed format.
    pub format: String,
    /// `identical`, `similar` or `different`.
    pub verdict: Verdict,
    /// Slug of the closest match.
    pub closest_match: Option<String>,
    /// Combined calibrated score against it.
    pub closest_score: Option<f64>,
    /// Winning method.
    pub closest_method: Option<String>,
    /// Embedding cosine against the closest match.
    pub embedding_score: Option<f64>,
    /// Exact Jaccard against the closest match.
    pub minhash_score: Option<f64>,
    /// The embedding score on the common scale.
    pub embedding_calibrated: Option<f64>,
    /// The MinHash score on the common scale.
    pub minhash_calibrated: Option<f64>,
    /// For a similar kept document: the kept document its export callout names.
    pub similar_to: Option<String>,
    /// The combined calibrated score against `similar_to`.
    pub similar_score: Option<f64>,
    /// The closest match is an identical copy of this document (skipped by
    /// the export, so it does not make this one a duplicate).
    pub closest_is_copy: bool,
    /// For an identical document: the document kept in its place.
    pub kept_original: Option<String>,
}

/// The rows of a store, in ingest order.
pub fn report_rows(store: &Store) -> Vec<ReportRow> {
    store
        .documents
        .iter()
        .map(|d| ReportRow {
            slug: d.slug.clone(),
            path: d.path.clone(),
            format: d.format.as_str().to_owned(),
            verdict: d.verdict,
            closest_match: d.closest_match.clone(),
            closest_score: d.closest_score,
            closest_method: d.closest_method.map(|m| m.as_str().to_owned()),
            embedding_score: d.embedding_score,
            minhash_score: d.minhash_score,
            embedding_calibrated: d.embedding_calibrated,
            minhash_calibrated: d.minhash_calibrated,
            similar_to: d.similar_to.clone(),
            similar_score: d.similar_score,
            closest_is_copy: d
                .closest_match
                .as_deref()
                .and_then(|c| store.get(c))
                .and_then(|c| store.kept_original(c))
                .is_some_and(|k| k.slug == d.slug),
            kept_original: store.kept_original(d).map(|o| o.slug.clone()),
        })
        .collect()
}

/// A plain-text table of `rows`, columns padded to their widest cell.
///
/// ```
/// let table = neardup_docs::render_table(&[]);
/// assert!(table.starts_with("SLUG"));
/// ```
pub fn render_table(rows: &[ReportRow]) -> String {
    let score = |s: Option<f64>| s.map_or("-".to_owned(), |s| format!("{s:.3}"));
    let mut cells = vec![[
        "SLUG".to_owned(),
        "VERDICT".to_owned(),
        "CLOSEST".to_owned(),
        "SCORE".to_owned(),
        "METHOD".to_owned(),
        "EMBEDDING".to_owned(),
        "EMB-CAL".to_owned(),
        "MINHASH".to_owned(),
        "MH-CAL".to_owned(),
        "FORMAT".to_owned(),
    ]];
    for r in rows {
        let closest = match (&r.closest_match, &r.kept_original) {
            (Some(c), Some(k)) if c != k => format!("{c} (kept: {k})"),
            (Some(c), _) if r.closest_is_copy => format!("{c} (its copy)"),
            (Some(c), _) => c.clone(),
            (None, _) => "-".to_owned(),
        };
        cells.push([
            r.slug.clone(),
            r.verdict.as_str().to_owned(),
            closest,
            score(r.closest_score),
            r.closest_method.clone().unwrap_or_else(|| "-".to_owned()),
            score(r.embedding_score),
            score(r.embedding_calibrated),
            score(r.minhash_score),
            score(r.minhash_calibrated),
            r.format.clone(),
        ]);
    }
    let widths: Vec<usize> =
        (0..10).map(|c| cells.iter().map(|row| row[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &cells {
        let line: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}
