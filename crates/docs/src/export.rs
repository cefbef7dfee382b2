//! `neardup export`: the seed's compile step. Every kept document becomes
//! `OUT/slug.md`; identical documents are skipped (the kept original is
//! named in the summary and in `OUT/_index.md`); similar documents start
//! with the seed's callout:
//!
//! ```text
//! > [!warning] Possible duplicate
//! > This document is similar to **paper-title-slug** (score=0.83).
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use neardup_core::Verdict;
use serde::Serialize;

use crate::cache::ParseCache;
use crate::error::Error;
use crate::ingest::parse_file;
use crate::limits::Limits;
use crate::store::{Store, StoredDoc};

/// The callout placed at the top of a similar document's page.
///
/// ```
/// assert_eq!(
///     neardup_docs::duplicate_callout("paper-title-slug", 0.83),
///     "> [!warning] Possible duplicate\n> This document is similar to **paper-title-slug** (score=0.83).\n"
/// );
/// ```
pub fn duplicate_callout(slug: &str, score: f64) -> String {
    format!("> [!warning] Possible duplicate\n> This document is similar to **{slug}** (score={score:.2}).\n")
}

/// A document left out of the export.
#[derive(Clone, Debug, Serialize)]
pub struct SkippedExport {
    /// Its slug.
    pub slug: String,
    /// The kept document it duplicates, or why it could not be exported.
    pub reason: String,
    /// The kept original, for an identical document.
    pub kept_original: Option<String>,
}

/// What [`export`] wrote.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct ExportSummary {
    /// Pages written, as `(slug, file)`.
    pub written: Vec<(String, PathBuf)>,
    /// Pages that carry the duplicate callout.
    pub with_warning: Vec<String>,
    /// Identical documents skipped, and documents whose text was lost.
    pub skipped: Vec<SkippedExport>,
    /// The index file.
    pub index: PathBuf,
}

/// Writes the store's kept documents as Markdown under `out_dir`, reading
/// their text from the parse cache (or, if an entry was evicted, parsing the
/// source file again).
pub fn export(store: &Store, cache: &ParseCache, out_dir: &Path) -> Result<ExportSummary, Error> {
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io("creating export directory", e).with_path(out_dir))?;
    let mut summary = ExportSummary { index: out_dir.join("_index.md"), ..ExportSummary::default() };
    let mut index = String::from("# Exported documents\n\n| document | verdict | note |\n|---|---|---|\n");
    for d in &store.documents {
        if d.verdict == Verdict::Identical {
            let original = store.kept_original(d).map(|o| o.slug.clone());
            let note = match &original {
                Some(o) => format!("identical to {o}, skipped"),
                None => "identical, skipped (kept original not in the store)".to_owned(),
            };
            let _ = writeln!(index, "| {} | identical | {note} |", d.slug);
            summary.skipped.push(SkippedExport { slug: d.slug.clone(), reason: note, kept_original: original });
            continue;
        }
        let text = match text_of(d, cache) {
            Ok(t) => t,
            Err(e) => {
                let reason = format!("text unavailable: {e}");
                let _ = writeln!(index, "| {} | {} | {reason} |", d.slug, d.verdict.as_str());
                summary.skipped.push(SkippedExport { slug: d.slug.clone(), reason, kept_original: None });
                continue;
            }
        };
        let mut page = String::new();
        let mut note = String::new();
        if d.verdict == Verdict::Similar {
            if let Some((target, score)) = callout_target(store, d) {
                page.push_str(&duplicate_callout(target, score));
                page.push('\n');
                note = format!("similar to [{target}]({target}.md) (score={score:.2})");
                summary.with_warning.push(d.slug.clone());
            } else {
                note = "kept; its identical copies are skipped".to_owned();
            }
        }
        for para in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            page.push_str(para);
            page.push_str("\n\n");
        }
        let file = out_dir.join(format!("{}.md", d.slug));
        write_page(&file, (page.trim_end().to_owned() + "\n").as_bytes())
            .map_err(|e| Error::io("writing export", e).with_path(&file))?;
        let _ = writeln!(index, "| [{0}]({0}.md) | {1} | {note} |", d.slug, d.verdict.as_str());
        summary.written.push((d.slug.clone(), file));
    }
    write_page(&summary.index, index.as_bytes())
        .map_err(|e| Error::io("writing export", e).with_path(&summary.index))?;
    Ok(summary)
}

/// Writes a new file at `path`, never through a link: whatever is there (a
/// page of an earlier export, or a symbolic link someone left in the
/// folder) is removed first, and the file is created exclusively, so a link
/// that reappears meanwhile makes the write fail instead of being followed
/// out of the export folder.
fn write_page(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    match std::fs::symlink_metadata(path) {
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    f.write_all(bytes)
}

/// The page a similar document's callout names, and the score: the kept
/// document it is similar to (`similar_to`; in a version-1 entry the closest
/// match's kept original). `None` when the only close documents are its own
/// identical copies, which the export skips.
fn callout_target<'a>(store: &'a Store, d: &'a StoredDoc) -> Option<(&'a str, f64)> {
    if let (Some(t), Some(s)) = (&d.similar_to, d.similar_score) {
        return Some((t.as_str(), s));
    }
    let closest = d.closest_match.as_deref()?;
    // Point at the page that exists: an identical match is skipped, its
    // kept original stands in for it.
    let target = store.get(closest).and_then(|c| store.kept_original(c)).map_or(closest, |o| o.slug.as_str());
    (target != d.slug && d.duplicate_of.is_none() && d.embedding_calibrated.is_none() && d.minhash_calibrated.is_none())
        .then_some((target, d.closest_score?))
}

fn text_of(d: &StoredDoc, cache: &ParseCache) -> Result<String, Error> {
    if let Some(doc) = cache.get(&d.sha256)? {
        return Ok(doc.text);
    }
    let outcome = parse_file(Path::new(&d.path), &Limits::default(), cache)?;
    if outcome.doc.sha256 != d.sha256 {
        return Err(Error::store(format!("{} changed since it was scanned; scan again", d.path)));
    }
    Ok(outcome.doc.text)
}
