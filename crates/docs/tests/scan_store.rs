//! The scan pipeline through the library: bad input in a batch (including a
//! zip bomb), rebuilds that run no parser, progress totals, and the frozen
//! version-1 store.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use neardup_docs::{scan, ConfigLayer, NoProgress, Phase, Progress, ScanOptions, ScanSummary, Store, Verdict};

mod common;
use common::fixture;

fn options(state: &Path, layer: ConfigLayer) -> ScanOptions {
    ScanOptions::new(layer.resolve().unwrap(), state)
}

fn minhash_only() -> ConfigLayer {
    ConfigLayer::from_toml("[dedup]\nmatchers = \"minhash\"\n").unwrap()
}

/// A DOCX-named zip whose document part is `size` bytes of spaces.
fn zip_bomb(size: usize) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("[Content_Types].xml", options).unwrap();
    zip.write_all(b"<Types/>").unwrap();
    zip.start_file("word/document.xml", options).unwrap();
    let block = vec![b' '; 1 << 20];
    for _ in 0..size >> 20 {
        zip.write_all(&block).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

#[test]
fn a_batch_with_bad_files_finishes_and_the_store_stays_valid() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for name in ["paper.md", "paper.html", "unrelated-orchestra.txt"] {
        std::fs::copy(fixture(name), docs.join(name)).unwrap();
    }
    std::fs::write(docs.join("bomb.docx"), zip_bomb(200 << 20)).unwrap();
    let mut pdf = std::fs::read(fixture("paper.pdf")).unwrap();
    pdf.truncate(pdf.len() / 3);
    std::fs::write(docs.join("broken.pdf"), pdf).unwrap();
    std::fs::write(docs.join("binary.txt"), [0u8, 1, 2, 3, 255, 254, 0, 0].repeat(100)).unwrap();
    std::fs::write(docs.join("empty.txt"), b"").unwrap();
    // A 1 GiB sparse file: refused from its size, never read.
    std::fs::File::create(docs.join("huge.txt")).unwrap().set_len(1 << 30).unwrap();

    let state = dir.path().join("state");
    let summary = scan(&[&docs], &options(&state, minhash_only()), &NoProgress).unwrap();
    let reasons: Vec<(String, String)> = summary
        .skipped
        .iter()
        .map(|s| (s.path.file_name().unwrap().to_string_lossy().into_owned(), s.reason.clone()))
        .collect();
    let reason = |f: &str| reasons.iter().find(|(n, _)| n == f).map(|(_, r)| r.as_str()).unwrap_or_default();
    assert!(reason("bomb.docx").contains("zip bomb"), "{reasons:?}");
    assert!(reason("broken.pdf").contains("corrupt"), "{reasons:?}");
    assert!(reason("binary.txt").contains("binary"), "{reasons:?}");
    assert!(reason("empty.txt").contains("empty"), "{reasons:?}");
    assert!(reason("huge.txt").contains("over the limit"), "{reasons:?}");
    assert_eq!(reasons.len(), 5);
    assert_eq!(summary.new_documents, 3);

    let store = Store::load(&Store::path_in(&state)).unwrap().unwrap();
    assert_eq!(store.documents.len(), 3);
    let html = store.documents.iter().find(|d| d.path.ends_with("paper.html")).unwrap();
    let md = store.documents.iter().find(|d| d.path.ends_with("paper.md")).unwrap();
    assert_eq!(html.verdict, Verdict::Different, "first copy is kept");
    assert_eq!(md.verdict, Verdict::Identical);
    assert_eq!(md.closest_match.as_deref(), Some(html.slug.as_str()));
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<(Phase, &'static str, u64)>>,
}

impl Progress for Recorder {
    fn start(&self, phase: Phase, total: u64) {
        self.events.lock().unwrap().push((phase, "start", total));
    }
    fn advance(&self, phase: Phase, n: u64) {
        self.events.lock().unwrap().push((phase, "advance", n));
    }
}

impl Recorder {
    fn total(&self, phase: Phase) -> u64 {
        self.events.lock().unwrap().iter().find(|e| e.0 == phase && e.1 == "start").unwrap().2
    }
    fn done(&self, phase: Phase) -> u64 {
        self.events.lock().unwrap().iter().filter(|e| e.0 == phase && e.1 == "advance").map(|e| e.2).sum()
    }
}

fn scan_fixtures(state: &Path, layer: ConfigLayer, progress: &dyn Progress) -> ScanSummary {
    scan(&[fixture("")], &options(state, layer), progress).unwrap()
}

#[test]
fn progress_counts_the_lsh_verified_comparisons() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Recorder::default();
    let summary = scan_fixtures(dir.path(), minhash_only(), &rec);
    assert_eq!((rec.total(Phase::Parse), rec.done(Phase::Parse)), (10, 10));
    assert_eq!((rec.total(Phase::Fingerprint), rec.done(Phase::Fingerprint)), (10, 10));
    // MinHash alone: the bar counts what LSH proposed, each verified once —
    // fewer than the 45 pairs of the all-pairs formula.
    assert_eq!(rec.total(Phase::Compare), summary.comparisons);
    assert_eq!(rec.done(Phase::Compare), summary.comparisons);
    assert!(summary.comparisons > 0 && summary.comparisons < neardup_docs::all_pairs_total(10, 0));
    assert_eq!(summary.comparison_rule, "lsh-verified");
}

#[test]
fn a_stale_store_is_rebuilt_without_running_a_parser() {
    let dir = tempfile::tempdir().unwrap();
    let first = scan_fixtures(dir.path(), minhash_only(), &NoProgress);
    assert_eq!(first.parsed, 10);
    let before = Store::load(&Store::path_in(dir.path())).unwrap().unwrap();

    // Each of these changes fingerprints or verdicts, so each one rebuilds.
    let changes = [
        "[dedup]\nmatchers = \"minhash\"\nshingle_width = 4\n",
        "[dedup]\nmatchers = \"minhash\"\nnormalizer = \"seed\"\n",
        "[dedup]\nmatchers = \"minhash\"\nminhash_lsh_threshold = 0.7\n",
        "[dedup]\nmatchers = \"minhash\"\nthreshold_similar = 0.7\n",
    ];
    let mut stamps = vec![before.stamp.clone()];
    for toml in changes {
        let layer = ConfigLayer::from_toml(toml).unwrap();
        let rec = Recorder::default();
        let summary = scan_fixtures(dir.path(), layer, &rec);
        assert!(summary.rebuilt.is_some(), "{toml}");
        // ParseOutcome.cache_hit for every file: no parser ran.
        assert_eq!((summary.parsed, summary.cache_hits), (0, 10), "{toml}");
        assert_eq!(summary.rebuilt_from_cache, 10);
        assert_eq!(summary.new_documents, 10);
        let store = Store::load(&Store::path_in(dir.path())).unwrap().unwrap();
        assert!(!stamps.contains(&store.stamp), "{toml}: stamp unchanged");
        stamps.push(store.stamp.clone());
        let slugs = |s: &Store| s.documents.iter().map(|d| d.slug.clone()).collect::<Vec<_>>();
        assert_eq!(slugs(&store), slugs(&before), "slugs survive a rebuild");
    }
}

/// Two copies scanned in one batch name each other as closest match, with
/// the same score, whichever comes first; a distractor scored in between
/// (a revision) does not keep the earlier copy from naming the later one.
#[test]
fn copies_name_each_other_in_either_order() {
    for (first, second) in [("paper.md", "paper.txt"), ("paper.txt", "paper.md")] {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        // Path order is ingest order: copy, revision, copy, unrelated.
        std::fs::copy(fixture(first), docs.join(format!("1-{first}"))).unwrap();
        std::fs::copy(fixture("paper-revised.md"), docs.join("2-paper-revised.md")).unwrap();
        std::fs::copy(fixture(second), docs.join(format!("3-{second}"))).unwrap();
        std::fs::copy(fixture("unrelated-orchestra.txt"), docs.join("4-unrelated-orchestra.txt")).unwrap();
        let state = dir.path().join("state");
        let summary = scan(&[&docs], &options(&state, minhash_only()), &NoProgress).unwrap();
        assert_eq!(summary.new_documents, 4);
        let store = Store::load(&Store::path_in(&state)).unwrap().unwrap();
        let doc = |prefix: &str| store.documents.iter().find(|d| d.path.contains(&format!("/{prefix}-"))).unwrap();
        let (a, revised, b) = (doc("1"), doc("2"), doc("3"));
        assert_eq!(a.closest_match.as_deref(), Some(b.slug.as_str()), "{first} first: {a:?}");
        assert_eq!(b.closest_match.as_deref(), Some(a.slug.as_str()), "{first} first: {b:?}");
        assert_eq!(a.closest_score, b.closest_score);
        assert_eq!(a.closest_score, Some(1.0));
        assert_eq!(a.closest_method, b.closest_method);
        assert_eq!((a.minhash_score, a.minhash_calibrated), (b.minhash_score, b.minhash_calibrated));
        // The later copy is identical and skipped; the earlier one is kept,
        // similar to the revision, not to its own copy.
        assert_eq!(b.verdict, Verdict::Identical);
        assert_eq!(b.duplicate_of.as_deref(), Some(a.slug.as_str()));
        assert_eq!(a.verdict, Verdict::Similar);
        assert_eq!(a.similar_to.as_deref(), Some(revised.slug.as_str()));
        assert_eq!(store.kept_original(b).unwrap().slug, a.slug);
        assert!(summary.back_updated.is_empty(), "nothing was stored before: {:?}", summary.back_updated);
    }
}

/// Issue 17: a near pair that is not the same text (a paper and its light
/// revision) scanned in one batch names itself both ways, with the same raw
/// and calibrated scores, in either order and with an unrelated document
/// scanned between them.
#[test]
fn issue_17_near_pair_names_each_other_in_either_order() {
    for (first, second) in [("paper.md", "paper-revised.md"), ("paper-revised.md", "paper.md")] {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::copy(fixture(first), docs.join(format!("1-{first}"))).unwrap();
        std::fs::copy(fixture("unrelated-orchestra.txt"), docs.join("2-unrelated-orchestra.txt")).unwrap();
        std::fs::copy(fixture(second), docs.join(format!("3-{second}"))).unwrap();
        let state = dir.path().join("state");
        scan(&[&docs], &options(&state, minhash_only()), &NoProgress).unwrap();
        let store = Store::load(&Store::path_in(&state)).unwrap().unwrap();
        let doc = |prefix: &str| store.documents.iter().find(|d| d.path.contains(&format!("/{prefix}-"))).unwrap();
        let (a, b) = (doc("1"), doc("3"));
        assert_eq!(a.closest_match.as_deref(), Some(b.slug.as_str()), "{first} first: {a:?}");
        assert_eq!(b.closest_match.as_deref(), Some(a.slug.as_str()), "{first} first: {b:?}");
        assert_eq!((a.closest_score, a.closest_method), (b.closest_score, b.closest_method));
        assert_eq!((a.minhash_score, a.minhash_calibrated), (b.minhash_score, b.minhash_calibrated));
        let raw = a.minhash_score.unwrap();
        assert!(raw > 0.5 && raw < 0.95, "a light revision, not a copy: {raw}");
        assert_eq!(a.closest_score, a.minhash_calibrated);
        // A revision: both kept, each similar to the other.
        assert_eq!((a.verdict, b.verdict), (Verdict::Similar, Verdict::Similar));
        assert_eq!(a.similar_to.as_deref(), Some(b.slug.as_str()));
        assert_eq!(b.similar_to.as_deref(), Some(a.slug.as_str()));
        assert_eq!(doc("2").verdict, Verdict::Different);
    }
}

/// A store written by the first version of this code: today's code must
/// still read it (the fields version 2 added are null), and writes it back
/// as version 2 with the same entries; its stamp names `store=v1`, so the
/// next scan rebuilds it.
#[test]
fn frozen_v1_store_still_reads() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/store-v1/fingerprints.json");
    let raw = std::fs::read(&path).unwrap();
    let store = Store::from_json(&raw).unwrap();
    let v1: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    let v2: serde_json::Value = serde_json::from_slice(&store.to_json().unwrap()).unwrap();
    assert_eq!((v1["format_version"].as_u64(), v2["format_version"].as_u64()), (Some(1), Some(2)));
    for (old, new) in v1["documents"].as_array().unwrap().iter().zip(v2["documents"].as_array().unwrap()) {
        for (key, value) in old.as_object().unwrap() {
            assert_eq!(&new[key], value, "{key}");
        }
        assert!(new["duplicate_of"].is_null() && new["similar_to"].is_null(), "{new}");
    }
    assert_eq!(Store::from_json(&store.to_json().unwrap()).unwrap(), store);
    assert!(store.stamp_inputs.contains("store=v1"), "{}", store.stamp_inputs);
    let verdicts: Vec<(&str, Verdict)> = store.documents.iter().map(|d| (d.slug.as_str(), d.verdict)).collect();
    assert_eq!(verdicts.len(), 4);
    let b = store.documents.iter().find(|d| d.path.ends_with("b.md")).unwrap();
    assert_eq!(b.verdict, Verdict::Identical, "{verdicts:?}");
    assert_eq!(store.kept_original(b).unwrap().slug, "a", "version 1: the closest_match chain");
    let c = store.documents.iter().find(|d| d.path.ends_with("c.txt")).unwrap();
    assert_eq!(c.verdict, Verdict::Similar);
    assert!(c.minhash_score.unwrap() > 0.5 && c.minhash_score.unwrap() < 0.95);
}

/// The version-2 layout, frozen (a MinHash scan of four short texts in
/// /tmp/frozen/docs: a, its copy b.md, a revision c, an unrelated d): read
/// back and written to the same bytes.
#[test]
fn frozen_v2_store_still_reads() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/store-v2/fingerprints.json");
    let raw = std::fs::read(&path).unwrap();
    let store = Store::from_json(&raw).unwrap();
    assert_eq!(store.to_json().unwrap(), raw, "re-encoding changed the bytes");
    assert!(store.stamp_inputs.contains("store=v2"), "{}", store.stamp_inputs);
    let b = store.documents.iter().find(|d| d.path.ends_with("b.md")).unwrap();
    assert_eq!(b.verdict, Verdict::Identical);
    let a = store.kept_original(b).unwrap();
    // The kept original names its later copy as closest match.
    assert_eq!(a.closest_match.as_deref(), Some(b.slug.as_str()));
    assert_eq!(b.duplicate_of.as_deref(), Some(a.slug.as_str()));
}

/// Issue 17: boilerplate weighs little. A templated site — every page the
/// same header and footer (real text, 170 words) around its own paragraph
/// (real text, 65–134 words) — and a one-word revision of one page. Plain
/// Jaccard calls every page similar to another for the template alone;
/// with the boilerplate discount (the default) the pages are different and
/// the revision is still found.
#[test]
fn a_shared_template_does_not_make_pages_similar() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let paragraphs = common::templated_site(&site);

    let verdicts = |weighting: &str| {
        let state = dir.path().join(format!("state-{weighting}"));
        let layer =
            ConfigLayer::from_toml(&format!("[dedup]\nmatchers = \"minhash\"\nboilerplate_weighting = {weighting}\n"))
                .unwrap();
        scan(&[&site], &options(&state, layer), &NoProgress).unwrap();
        let store = Store::load(&Store::path_in(&state)).unwrap().unwrap();
        store.documents.iter().map(|d| (d.slug.clone(), d.verdict)).collect::<std::collections::BTreeMap<_, _>>()
    };
    let is_page = |s: &str| !s.starts_with("page-00");
    let plain = verdicts("false");
    let flagged = plain.iter().filter(|(s, v)| is_page(s) && **v != Verdict::Different).count();
    assert!(flagged >= paragraphs.len() - 3, "the template alone should flag the pages: {plain:?}");
    let weighted = verdicts("true");
    let flagged: Vec<_> = weighted.iter().filter(|(s, v)| is_page(s) && **v != Verdict::Different).collect();
    assert!(flagged.is_empty(), "{weighted:?}");
    assert_ne!(weighted["page-00-revised"], Verdict::Different, "{weighted:?}");
    assert_ne!(weighted["page-00"], Verdict::Different, "{weighted:?}");
}
