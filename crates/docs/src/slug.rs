//! Slugs: the short, unique names documents are known by in the store, in
//! reports and as export file names (`slug.md`).
//!
//! A slug is made from the document's title, or its file name when it has
//! none: ASCII letters and digits, lower-cased, runs of anything else turned
//! into one `-`, at most [`MAX_SLUG_LEN`] bytes cut at a word boundary. A
//! slug already taken gets `-2`, `-3`, … appended. Slugs never start with
//! `_` or `.`, so `_index.md` in an export can never collide with one.

use std::collections::HashSet;
use std::path::Path;

use unicode_normalization::UnicodeNormalization;

/// Longest slug before a uniqueness suffix.
pub const MAX_SLUG_LEN: usize = 60;

/// `text` as a slug, or `None` when nothing usable is left.
///
/// ```
/// assert_eq!(neardup_docs::slugify("Near-Duplicate Détection: A Study").as_deref(), Some("near-duplicate-detection-a-study"));
/// assert_eq!(neardup_docs::slugify("  ***  "), None);
/// ```
pub fn slugify(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut dash = false;
    // NFKD splits accents off their letters, so "é" becomes "e".
    for c in text.nfkd() {
        if c.is_ascii_alphanumeric() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
        } else if !unicode_normalization::char::is_combining_mark(c) {
            dash = true;
        }
    }
    if out.len() > MAX_SLUG_LEN {
        let cut = out[..MAX_SLUG_LEN].rfind('-').filter(|&i| i > 0).unwrap_or(MAX_SLUG_LEN);
        out.truncate(cut);
    }
    (!out.is_empty()).then_some(out)
}

/// Hands out unique slugs.
#[derive(Debug, Default)]
pub(crate) struct Slugs {
    taken: HashSet<String>,
}

impl Slugs {
    pub(crate) fn new<'a>(taken: impl IntoIterator<Item = &'a str>) -> Slugs {
        Slugs { taken: taken.into_iter().map(str::to_owned).collect() }
    }

    pub(crate) fn reserve(&mut self, slug: &str) {
        self.taken.insert(slug.to_owned());
    }

    /// A fresh slug from the title, else the file stem, else `document`.
    pub(crate) fn assign(&mut self, title: Option<&str>, path: &Path) -> String {
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        let base = title
            .and_then(slugify)
            .or_else(|| stem.as_deref().and_then(slugify))
            .unwrap_or_else(|| "document".to_owned());
        let mut slug = base.clone();
        let mut n = 2;
        while self.taken.contains(&slug) {
            slug = format!("{base}-{n}");
            n += 1;
        }
        self.taken.insert(slug.clone());
        slug
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_unique_and_bounded() {
        let mut s = Slugs::new(["paper"]);
        assert_eq!(s.assign(Some("Paper"), Path::new("x.pdf")), "paper-2");
        assert_eq!(s.assign(None, Path::new("/a/paper.md")), "paper-3");
        assert_eq!(s.assign(Some("!!!"), Path::new("/a/Notes 1.txt")), "notes-1");
        assert_eq!(s.assign(None, Path::new("/a/---.txt")), "document");
        let long = "word ".repeat(40);
        let slug = slugify(&long).unwrap();
        assert!(slug.len() <= MAX_SLUG_LEN && !slug.ends_with('-'), "{slug}");
        assert_eq!(slugify("Ünïcödé—Straße").as_deref(), Some("unicode-stra-e"));
    }
}
