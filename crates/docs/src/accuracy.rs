//! Verdict accuracy on labelled document pairs (`neardup scan --labels`).
//!
//! A labels file lists pairs of documents whose relation is known by
//! construction (bench/corpus/scan_pairs.py builds one from this machine's
//! files), one a line, tab-separated: `class`, `detail`, path `a`, path `b`,
//! paths relative to the labels file's folder; `#` starts a comment. After
//! a scan of those documents, every labelled pair is scored from the store
//! (stored shingle features and embeddings) by the same rules as the scan
//! — exact Jaccard through [`neardup_core::verify_pair`], the cosine of the
//! embeddings, each calibrated ([`crate::calibrate`]) — and classified by
//! the thresholds, once per matcher: MinHash alone (a pair LSH would not
//! propose counts as `different`, as in a MinHash-only scan), the embedding
//! alone, and the two combined.
//!
//! Classes with a target: `format` (another format of the same document)
//! and `revision` with at most 10 % of the words changed should be found
//! (identical or similar); `sibling` (another page of the same manual) and
//! `unrelated` should be `different`. Sibling pages are also counted per
//! page: a page is called a duplicate when any of its labelled siblings
//! is, which is what its verdict in a scan of the whole manual would show.
//! Other classes (`version`, `regenerated`, heavier revisions) are reported
//! without a target. The raw scores also fit a calibration
//! ([`crate::calibrate::fit_knot`]) for the model that made them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use neardup_core::ContentHash;
use neardup_core::{verify_pair, Fingerprint, Fingerprinter, MemoryIndex, StoredFingerprint, Verdict};
use serde::Serialize;

use crate::boilerplate::Boilerplate;
use crate::calibrate::{fit_ceiling, fit_knot, Calibration};
use crate::compare::{Calibrations, Pair};
use crate::config::ScanSettings;
use crate::embed::cosine;
use crate::error::Error;
use crate::store::{Store, StoredDoc};

/// One labelled pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Label {
    /// `format`, `revision`, `sibling`, `unrelated`, or another class.
    pub class: String,
    /// Free text; for a revision its first word is the edit rate.
    pub detail: String,
    /// First document (absolute).
    pub a: PathBuf,
    /// Second document (absolute).
    pub b: PathBuf,
}

/// Reads a labels file (see the module docs).
pub fn read_labels(path: &Path) -> Result<Vec<Label>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("reading labels", e).with_path(path))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut labels = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [class, detail, a, b] = fields[..] else {
            return Err(Error::config(format!(
                "{}:{}: expected 4 tab-separated fields (class, detail, a, b), got {}",
                path.display(),
                n + 1,
                fields.len()
            )));
        };
        let abs = |p: &str| {
            let p = dir.join(p);
            std::fs::canonicalize(&p).unwrap_or(p)
        };
        labels.push(Label { class: class.to_owned(), detail: detail.to_owned(), a: abs(a), b: abs(b) });
    }
    Ok(labels)
}

/// Verdicts of one class of pairs under one matcher.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClassCounts {
    /// The class (revisions by edit rate: `revision 0.10`).
    pub class: String,
    /// `found` (should be identical or similar), `different`, or `none`.
    pub target: &'static str,
    /// Pairs scored.
    pub pairs: usize,
    /// Called identical.
    pub identical: usize,
    /// Called similar.
    pub similar: usize,
    /// Called different.
    pub different: usize,
}

/// One matcher's results.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MatcherAccuracy {
    /// `minhash`, `embedding` or `combined`.
    pub matcher: &'static str,
    /// Per class.
    pub classes: Vec<ClassCounts>,
    /// Of the pairs called identical or similar in classes with a target,
    /// the share that should be.
    pub precision: f64,
    /// Of the pairs that should be found, the share called identical or
    /// similar.
    pub recall: f64,
    /// Sibling pages (documents in a labelled sibling pair).
    pub sibling_pages: usize,
    /// Sibling pages called identical or similar to one of their siblings.
    pub sibling_pages_called: usize,
}

/// A calibration fitted from the raw scores of the labelled pairs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FittedCalibration {
    /// `minhash` or `embedding`.
    pub matcher: &'static str,
    /// The raw score for `similar` (0.80): the best separation of the pairs
    /// to find from sibling pages (per page) and unrelated pairs.
    pub similar_knot: Option<f64>,
    /// The raw score for `identical` (0.95): above every pair that is not
    /// the same document (revisions of 5 % or more, siblings, unrelated).
    pub identical_knot: Option<f64>,
    /// The two as a calibration setting, when they rise.
    pub knots: Option<String>,
}

/// Everything `--labels` reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Accuracy {
    /// The embedding model of the stored documents, if any.
    pub model: Option<String>,
    /// Labelled pairs read.
    pub labels: usize,
    /// Pairs left out: a document not in the store (skipped, or not scanned).
    pub missing: usize,
    /// The calibrations the verdicts used.
    pub minhash_calibration: String,
    /// See `minhash_calibration`.
    pub embedding_calibration: Option<String>,
    /// Per matcher.
    pub matchers: Vec<MatcherAccuracy>,
    /// Calibrations fitted from these pairs' raw scores.
    pub fitted: Vec<FittedCalibration>,
    /// Every scored pair's raw scores, to fit another calibration from.
    pub pairs: Vec<PairScores>,
}

/// One labelled pair's raw scores.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PairScores {
    /// The reporting class (revisions by edit rate).
    pub class: String,
    /// The label's detail.
    pub detail: String,
    /// First document.
    pub a: PathBuf,
    /// Second document.
    pub b: PathBuf,
    /// Exact Jaccard of the shingle sets, when MinHash ran.
    pub minhash: Option<f64>,
    /// Cosine of the document embeddings, when both have one.
    pub embedding: Option<f64>,
    /// The same normalized text.
    pub same_content: bool,
    /// LSH would propose the pair (shares a band key).
    pub lsh: bool,
}

/// The edit rate of a revision label, from its detail.
fn revision_rate(label: &Label) -> Option<f64> {
    (label.class == "revision").then(|| label.detail.split_whitespace().next()?.parse().ok()).flatten()
}

/// The reporting class of a label and its target.
fn class_of(label: &Label) -> (String, &'static str) {
    match (label.class.as_str(), revision_rate(label)) {
        ("revision", Some(r)) => (format!("revision {r:.2}"), if r <= 0.10 + 1e-9 { "found" } else { "none" }),
        ("format", _) => ("format".to_owned(), "found"),
        ("sibling", _) => ("sibling".to_owned(), "different"),
        ("unrelated", _) => ("unrelated".to_owned(), "different"),
        (other, _) => (other.to_owned(), "none"),
    }
}

/// A labelled pair's raw scores, and whether LSH would propose it.
struct Scored<'a> {
    label: &'a Label,
    class: String,
    target: &'static str,
    raw: Pair,
    lsh: bool,
}

/// Scores every labelled pair found in `store` and classifies it per
/// matcher under `settings` (thresholds, calibrations, LSH parameters).
pub fn evaluate_labels(store: &Store, labels: &[Label], settings: &ScanSettings) -> Result<Accuracy, Error> {
    let by_path: HashMap<&Path, &StoredDoc> = store.documents.iter().map(|d| (Path::new(&d.path), d)).collect();
    let model = store.documents.iter().find_map(|d| d.embedding_model.clone());
    let embedding_cal = model.as_deref().map(|m| settings.embedding_calibration_for(m).0);
    let cal = Calibrations {
        minhash: settings.minhash_calibration.clone(),
        embedding: embedding_cal.clone().unwrap_or_else(Calibration::identity),
    };
    let fingerprinter = Fingerprinter::new(settings.params.clone())
        .map_err(|e| Error::config(format!("fingerprint parameters: {e}")))?;
    // Every stored document's fingerprint, rebuilt once from its features
    // (an unreadable content hash gets an empty one: it matches nothing).
    let mut fingerprinter = fingerprinter;
    let fps: Vec<Fingerprint> = store
        .documents
        .iter()
        .map(|d| {
            let rebuilt = ContentHash::from_hex(&d.content_hash).and_then(|content_hash| {
                let stored = StoredFingerprint {
                    content_hash,
                    tokens: d.tokens,
                    features: d.features.clone(),
                    signature: None,
                    degraded_shingles: None,
                };
                fingerprinter.rebuild(stored).ok()
            });
            rebuilt.unwrap_or_else(|| fingerprinter.fingerprint(""))
        })
        .collect();
    let position: HashMap<&str, usize> =
        store.documents.iter().enumerate().map(|(i, d)| (d.slug.as_str(), i)).collect();
    let band_keys = |d: &StoredDoc| -> &[u64] { &fps[position[d.slug.as_str()]].band_keys };
    // The same discount the scan applies, over the same documents.
    let boilerplate = if settings.minhash && settings.boilerplate_weighting {
        let mut index = MemoryIndex::new(settings.params.clone());
        for fp in &fps {
            index.insert(fp.clone()).map_err(|e| Error::store(format!("index: {e}")))?;
        }
        Some(Boilerplate::of_index(&index, fps.len()))
    } else {
        None
    };
    let mut scored = Vec::new();
    let mut missing = 0;
    for label in labels {
        let (Some(a), Some(b)) = (by_path.get(label.a.as_path()), by_path.get(label.b.as_path())) else {
            missing += 1;
            continue;
        };
        let hashes = (ContentHash::from_hex(&a.content_hash), ContentHash::from_hex(&b.content_hash));
        let (Some(ha), Some(hb)) = hashes else {
            missing += 1;
            continue;
        };
        let (pa, pb) = (position[a.slug.as_str()], position[b.slug.as_str()]);
        let jaccard =
            settings.minhash.then(|| verify_pair(&a.features, &ha, &b.features, &hb, 0.0)).flatten().map(|mut s| {
                if let Some(bp) = &boilerplate {
                    s.score = bp.score(pa, pb, &a.features, &b.features, s.score);
                }
                s
            });
        let embedding = match (&a.embedding, &b.embedding) {
            (Some(x), Some(y)) => Some(f64::from(cosine(x, y))),
            _ => None,
        };
        let same_content = ha == hb;
        let (ka, kb) = (band_keys(a), band_keys(b));
        let lsh = same_content || ka.iter().zip(kb).any(|(x, y)| x == y);
        let (class, target) = class_of(label);
        let raw = Pair { embedding, minhash: jaccard.map(|s| s.score), same_content };
        scored.push(Scored { label, class, target, raw, lsh });
    }

    if scored.is_empty() && !labels.is_empty() {
        return Err(Error::config(format!(
            "none of the {} labelled pairs has both documents in the store: label paths are relative to the \
             labels file's folder, and both documents must be scanned",
            labels.len()
        )));
    }
    let policy = &settings.policy;
    let mut matchers = Vec::new();
    type Pick = fn(&Scored<'_>, &Calibrations) -> Option<f64>;
    let picks: [(&'static str, Pick); 3] = [
        ("minhash", |s, c| {
            let m = c.minhash.apply(s.raw.minhash?);
            Some(if s.raw.same_content {
                1.0
            } else if s.lsh {
                m
            } else {
                0.0
            })
        }),
        ("embedding", |s, c| {
            let e = c.embedding.apply(s.raw.embedding?);
            Some(if s.raw.same_content { 1.0 } else { e })
        }),
        ("combined", |s, c| s.raw.scored(c).map(|x| x.combined)),
    ];
    let has_minhash = scored.iter().any(|s| s.raw.minhash.is_some());
    let has_embedding = scored.iter().any(|s| s.raw.embedding.is_some());
    for (name, pick) in picks {
        let ran = match name {
            "minhash" => has_minhash,
            "embedding" => has_embedding,
            _ => has_minhash && has_embedding,
        };
        if !ran {
            continue;
        }
        let mut classes: BTreeMap<String, ClassCounts> = BTreeMap::new();
        let (mut tp, mut fp, mut positives) = (0usize, 0usize, 0usize);
        let mut pages: HashMap<&Path, bool> = HashMap::new();
        for s in &scored {
            let verdict = pick(s, &cal).map_or(Verdict::Different, |x| policy.classify(x, s.raw.same_content));
            let c = classes.entry(s.class.clone()).or_insert_with(|| ClassCounts {
                class: s.class.clone(),
                target: s.target,
                ..ClassCounts::default()
            });
            c.pairs += 1;
            match verdict {
                Verdict::Identical => c.identical += 1,
                Verdict::Similar => c.similar += 1,
                Verdict::Different => c.different += 1,
            }
            let found = verdict != Verdict::Different;
            match s.target {
                "found" => {
                    positives += 1;
                    tp += usize::from(found);
                }
                "different" => fp += usize::from(found),
                _ => {}
            }
            if s.label.class == "sibling" {
                for p in [s.label.a.as_path(), s.label.b.as_path()] {
                    *pages.entry(p).or_default() |= found;
                }
            }
        }
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        matchers.push(MatcherAccuracy {
            matcher: name,
            classes: classes.into_values().collect(),
            precision: ratio(tp, tp + fp),
            recall: ratio(tp, positives),
            sibling_pages: pages.len(),
            sibling_pages_called: pages.values().filter(|&&c| c).count(),
        });
    }

    let fitted = [("minhash", 0usize), ("embedding", 1)]
        .into_iter()
        .filter_map(|(name, which)| {
            let raw = |s: &Scored<'_>| if which == 0 { s.raw.minhash } else { s.raw.embedding };
            fit(&scored, raw).map(|(similar, identical)| FittedCalibration {
                matcher: name,
                similar_knot: Some(similar),
                identical_knot: identical,
                knots: identical
                    .filter(|&i| i > similar && i < 1.0 && similar > 0.0)
                    .map(|i| format!("{similar:.3}:0.80,{i:.3}:0.95")),
            })
        })
        .collect();

    Ok(Accuracy {
        model,
        labels: labels.len(),
        missing,
        minhash_calibration: cal.minhash.to_string(),
        embedding_calibration: embedding_cal.map(|c| c.to_string()),
        matchers,
        fitted,
        pairs: scored
            .iter()
            .map(|s| PairScores {
                class: s.class.clone(),
                detail: s.label.detail.clone(),
                a: s.label.a.clone(),
                b: s.label.b.clone(),
                minhash: s.raw.minhash,
                embedding: s.raw.embedding,
                same_content: s.raw.same_content,
                lsh: s.lsh,
            })
            .collect(),
    })
}

/// The similar and identical knots for one matcher's raw scores.
fn fit(scored: &[Scored<'_>], raw: impl Fn(&Scored<'_>) -> Option<f64>) -> Option<(f64, Option<f64>)> {
    let mut positives = Vec::new();
    let mut negatives = Vec::new();
    let mut not_same = Vec::new();
    let mut pages: HashMap<&Path, f64> = HashMap::new();
    let mut seen = HashSet::new();
    for s in scored {
        let Some(x) = raw(s) else { continue };
        seen.insert(s.label.class.as_str());
        match s.target {
            "found" => positives.push(x),
            "different" if s.label.class == "sibling" => {
                for p in [s.label.a.as_path(), s.label.b.as_path()] {
                    let e = pages.entry(p).or_insert(f64::MIN);
                    *e = e.max(x);
                }
            }
            "different" => negatives.push(x),
            _ => {}
        }
        if s.target == "different" || revision_rate(s.label).is_some_and(|r| r >= 0.05 - 1e-9) {
            not_same.push(x);
        }
    }
    negatives.extend(pages.values());
    let similar = fit_knot(&positives, &negatives)?;
    Some((similar, fit_ceiling(&not_same)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_read_relative_to_their_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("docs")).unwrap();
        std::fs::write(dir.path().join("docs/a.txt"), "a").unwrap();
        let file = dir.path().join("pairs.tsv");
        std::fs::write(&file, "# comment\nrevision\t0.10 scattered\tdocs/a.txt\tdocs/b.txt\n\n").unwrap();
        let labels = read_labels(&file).unwrap();
        assert_eq!(labels.len(), 1);
        assert!(labels[0].a.is_absolute() && labels[0].a.ends_with("docs/a.txt"));
        assert_eq!(class_of(&labels[0]), ("revision 0.10".to_owned(), "found"));
        std::fs::write(&file, "format\tx\tdocs/a.txt\n").unwrap();
        let err = read_labels(&file).unwrap_err().to_string();
        assert!(err.contains("pairs.tsv:1") && err.contains("4 tab-separated"), "{err}");
    }

    #[test]
    fn classes_and_targets() {
        let l = |class: &str, detail: &str| Label {
            class: class.into(),
            detail: detail.into(),
            a: PathBuf::from("/a"),
            b: PathBuf::from("/b"),
        };
        assert_eq!(class_of(&l("revision", "0.40 block")).1, "none");
        assert_eq!(class_of(&l("sibling", "git")), ("sibling".to_owned(), "different"));
        assert_eq!(class_of(&l("version", "licence")).1, "none");
    }
}
