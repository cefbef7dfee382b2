//! Embedding providers: turn texts into vectors for the embedding matcher.
//!
//! A model string names a provider and a model, and the provider prefix is
//! required (there is no silent default model):
//!
//! | model string      | provider                                                      |
//! |-------------------|---------------------------------------------------------------|
//! | `""`              | none: the embedding matcher is skipped                         |
//! | `ollama:MODEL`    | Ollama, `POST {base}/api/embed`                                |
//! | `openai:MODEL`    | any OpenAI-compatible server, `POST {base}/v1/embeddings`      |
//! | `local:DIR`       | a sentence-transformers BERT model run in-process from `DIR`   |
//!
//! Base URLs, API key, timeout and retries come from [`ProviderConfig`].
//! Documents longer than a model's input are split into word chunks of
//! near-equal size, at most [`DEFAULT_MAX_CHUNKS`] of them spread evenly over
//! a longer document ([`document_chunks`]), whose vectors are averaged,
//! weighted by their words ([`embed_documents`]). Chunks of many documents
//! are embedded together, longest first, in batches run on every core.

#[cfg(feature = "local-embed")]
mod bert;
mod http;
#[cfg(feature = "local-embed")]
mod local;
mod ollama;
mod openai;

use std::time::Duration;

use crate::error::Error;

#[cfg(feature = "local-embed")]
pub use local::LocalEmbedder;
pub use ollama::OllamaEmbedder;
pub use openai::OpenAiEmbedder;

/// Something that turns texts into fixed-length vectors.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// One vector per input text, in input order, all of the same length.
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error>;

    /// A stable identifier of the provider and model, e.g.
    /// `ollama:nomic-embed-text`; it goes into the fingerprint store's
    /// version stamp, so it must change when the vectors would.
    fn model_id(&self) -> String;

    /// Model input tokens embedded so far (padding excluded), when the
    /// provider counts them (the `local:` one does).
    fn tokens_embedded(&self) -> Option<u64> {
        None
    }
}

/// Settings shared by the embedding providers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderConfig {
    /// Ollama server (default `http://127.0.0.1:11434`).
    pub ollama_base_url: String,
    /// OpenAI-compatible server (default `https://api.openai.com`); a
    /// trailing `/v1` is accepted.
    pub openai_base_url: String,
    /// Bearer token for the OpenAI-compatible server, if it needs one.
    pub openai_api_key: Option<String>,
    /// Timeout for one HTTP request, connect to last byte (default 120 s).
    pub timeout: Duration,
    /// Retries after the first attempt on connection errors, HTTP 429 and
    /// 5xx (default 3).
    pub max_retries: u32,
    /// Delay before the first retry; doubled for each further one
    /// (default 500 ms).
    pub initial_backoff: Duration,
    /// Most texts sent in one request or model batch (default 32).
    pub batch_size: usize,
}

impl Default for ProviderConfig {
    fn default() -> ProviderConfig {
        ProviderConfig {
            ollama_base_url: "http://127.0.0.1:11434".to_owned(),
            openai_base_url: "https://api.openai.com".to_owned(),
            openai_api_key: None,
            timeout: Duration::from_secs(120),
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            batch_size: 32,
        }
    }
}

impl ProviderConfig {
    /// The defaults, overridden by environment variables:
    /// `NEARDUP_OLLAMA_BASE_URL` (or `OLLAMA_HOST`),
    /// `NEARDUP_OPENAI_BASE_URL` (or `OPENAI_BASE_URL`),
    /// `NEARDUP_OPENAI_API_KEY` (or `OPENAI_API_KEY`).
    pub fn from_env() -> ProviderConfig {
        let var = |names: &[&str]| names.iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()));
        let mut config = ProviderConfig::default();
        if let Some(url) = var(&["NEARDUP_OLLAMA_BASE_URL", "OLLAMA_HOST"]) {
            // OLLAMA_HOST is often a bare host:port.
            config.ollama_base_url = if url.contains("://") { url } else { format!("http://{url}") };
        }
        if let Some(url) = var(&["NEARDUP_OPENAI_BASE_URL", "OPENAI_BASE_URL"]) {
            config.openai_base_url = url;
        }
        config.openai_api_key = var(&["NEARDUP_OPENAI_API_KEY", "OPENAI_API_KEY"]);
        config
    }

    fn validate(&self) -> Result<(), Error> {
        if self.batch_size == 0 {
            return Err(Error::config("batch_size must be at least 1"));
        }
        if self.timeout.is_zero() {
            return Err(Error::config("timeout must be positive"));
        }
        Ok(())
    }
}

/// Builds the embedder a model string names; `Ok(None)` for an empty string.
///
/// ```
/// use neardup_docs::{embedder_from_model, ProviderConfig};
///
/// let config = ProviderConfig::default();
/// assert!(embedder_from_model("", &config)?.is_none());
/// let ollama = embedder_from_model("ollama:nomic-embed-text", &config)?.unwrap();
/// assert_eq!(ollama.model_id(), "ollama:nomic-embed-text");
/// let err = embedder_from_model("nomic-embed-text", &config).unwrap_err();
/// assert!(err.to_string().contains("provider prefix"));
/// # Ok::<(), neardup_docs::Error>(())
/// ```
pub fn embedder_from_model(model: &str, config: &ProviderConfig) -> Result<Option<Box<dyn Embedder>>, Error> {
    let model = model.trim();
    if model.is_empty() {
        return Ok(None);
    }
    config.validate()?;
    let Some((provider, name)) = model.split_once(':') else {
        return Err(Error::config(format!(
            "embedding model {model:?} has no provider prefix; use ollama:MODEL, openai:MODEL or local:DIR"
        )));
    };
    if name.trim().is_empty() {
        return Err(Error::config(format!("embedding model {model:?} names no model after {provider:?}")));
    }
    Ok(Some(match provider {
        "ollama" => Box::new(OllamaEmbedder::new(name, config)?),
        "openai" => Box::new(OpenAiEmbedder::new(name, config)?),
        #[cfg(feature = "local-embed")]
        "local" => Box::new(LocalEmbedder::load(name.as_ref(), config.batch_size)?),
        #[cfg(not(feature = "local-embed"))]
        "local" => {
            return Err(Error::config(format!(
                "embedding model {model:?}: this build of neardup has no local: provider (feature local-embed)"
            )))
        }
        other => {
            return Err(Error::config(format!(
                "unknown embedding provider {other:?} in {model:?}; known: ollama, openai, local"
            )))
        }
    }))
}

/// Default words per chunk in [`embed_document`]: about 260 word-piece
/// tokens of English, within a 256–512-token model input.
pub const DEFAULT_CHUNK_WORDS: usize = 200;

/// Default most chunks embedded per document: a 100-page PDF needs its
/// embedding, not 200 of them. Sixteen evenly spread chunks of a long
/// document average to within a cosine of 0.96 of all of its chunks on the
/// benchmark corpus (bench/results/scan-accuracy.md).
pub const DEFAULT_MAX_CHUNKS: usize = 16;

/// Splits `text` into chunks of at most `words_per_chunk` whitespace-
/// separated words (at least one word per chunk).
pub fn chunk_words(text: &str, words_per_chunk: usize) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words.chunks(words_per_chunk.max(1)).map(|c| c.join(" ")).collect()
}

/// The chunks a document is embedded as, with their word counts: the words
/// split into `ceil(words / words_per_chunk)` chunks of near-equal size (no
/// short tail chunk to weigh as much as a full one); when that is more than
/// `max_chunks`, `max_chunks` chunks of `words_per_chunk` words spread
/// evenly from the first word to the last.
///
/// ```
/// use neardup_docs::document_chunks;
/// let text = (0..10).map(|i| i.to_string()).collect::<Vec<_>>().join(" ");
/// let sizes: Vec<usize> = document_chunks(&text, 4, 16).iter().map(|c| c.1).collect();
/// assert_eq!(sizes, [3, 3, 4]);
/// let spread = document_chunks(&text, 2, 3);
/// assert_eq!(spread.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["0 1", "4 5", "8 9"]);
/// ```
pub fn document_chunks(text: &str, words_per_chunk: usize, max_chunks: usize) -> Vec<(String, usize)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let n = words.len();
    if n == 0 {
        return Vec::new();
    }
    let per = words_per_chunk.max(1);
    let max = max_chunks.max(1);
    let k = n.div_ceil(per);
    let ranges: Vec<(usize, usize)> = if k <= max {
        (0..k).map(|i| (i * n / k, (i + 1) * n / k)).collect()
    } else if max == 1 {
        vec![(0, per)]
    } else {
        (0..max).map(|i| (i * (n - per) / (max - 1), i * (n - per) / (max - 1) + per)).collect()
    };
    ranges.into_iter().map(|(a, b)| (words[a..b].join(" "), b - a)).collect()
}

/// Embeds a whole document as one vector (see [`embed_documents`]), with at
/// most [`DEFAULT_MAX_CHUNKS`] chunks.
pub fn embed_document(embedder: &dyn Embedder, text: &str, words_per_chunk: usize) -> Result<Vec<f32>, Error> {
    let mut v = embed_documents(embedder, &[text], words_per_chunk, DEFAULT_MAX_CHUNKS)?;
    v.pop().ok_or_else(|| Error::embedding("document has no words to embed"))
}

/// Embeds documents, one vector each: the L2-normalised mean of the
/// L2-normalised vectors of its [`document_chunks`], weighted by their
/// words. The chunks of all `texts` are embedded together, longest first
/// (so a batch pads little), in batches of `batch` chunks run in parallel
/// on the rayon pool. A text without words is an error.
pub fn embed_documents(
    embedder: &dyn Embedder,
    texts: &[&str],
    words_per_chunk: usize,
    max_chunks: usize,
) -> Result<Vec<Vec<f32>>, Error> {
    use rayon::prelude::*;

    // (document, words, text) of every chunk.
    let mut chunks: Vec<(usize, usize, String)> = Vec::new();
    for (d, text) in texts.iter().enumerate() {
        let before = chunks.len();
        chunks.extend(document_chunks(text, words_per_chunk, max_chunks).into_iter().map(|(c, w)| (d, w, c)));
        if chunks.len() == before {
            return Err(Error::embedding("document has no words to embed"));
        }
    }
    let mut order: Vec<usize> = (0..chunks.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(chunks[i].2.len()));
    const BATCH: usize = 32;
    let batches: Vec<&[usize]> = order.chunks(BATCH).collect();
    let vectors: Vec<Vec<Vec<f32>>> = batches
        .par_iter()
        .map(|batch| {
            let texts: Vec<String> = batch.iter().map(|&i| chunks[i].2.clone()).collect();
            let v = embedder.embed(&texts)?;
            check_vectors(&v, texts.len(), "the embedding provider")?;
            Ok(v)
        })
        .collect::<Result<_, Error>>()?;
    let mut per_doc: Vec<Vec<(Vec<f32>, f32)>> = vec![Vec::new(); texts.len()];
    for (batch, vs) in batches.iter().zip(vectors) {
        for (&i, v) in batch.iter().zip(vs) {
            per_doc[chunks[i].0].push((v, chunks[i].1 as f32));
        }
    }
    per_doc
        .into_iter()
        .map(|parts| {
            let (vs, ws): (Vec<Vec<f32>>, Vec<f32>) = parts.into_iter().unzip();
            mean_pool_weighted(&vs, &ws)
        })
        .collect()
}

/// L2-normalised mean of L2-normalised vectors; all must have one length.
pub fn mean_pool(vectors: &[Vec<f32>]) -> Result<Vec<f32>, Error> {
    mean_pool_weighted(vectors, &vec![1.0; vectors.len()])
}

/// L2-normalised weighted mean of L2-normalised vectors; all must have one
/// length, and there must be one weight per vector.
pub fn mean_pool_weighted(vectors: &[Vec<f32>], weights: &[f32]) -> Result<Vec<f32>, Error> {
    let Some(first) = vectors.first() else {
        return Err(Error::embedding("no vectors to pool"));
    };
    if weights.len() != vectors.len() {
        return Err(Error::embedding("one weight per vector is needed"));
    }
    let dim = first.len();
    let mut sum = vec![0f32; dim];
    for (v, w) in vectors.iter().zip(weights) {
        if v.len() != dim {
            return Err(Error::embedding(format!("vectors of different lengths ({} and {dim})", v.len())));
        }
        let n = norm(v);
        if n > 0.0 {
            sum.iter_mut().zip(v).for_each(|(s, x)| *s += w * x / n);
        }
    }
    normalize(&mut sum);
    Ok(sum)
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let n = norm(v);
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

/// Cosine similarity of two vectors; 0 when either is zero or their lengths
/// differ.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (na, nb) = (norm(a), norm(b));
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    (dot / (na * nb)).clamp(-1.0, 1.0)
}

/// Checks a provider's answer: one vector per text, all of one non-zero
/// length, all finite.
pub(crate) fn check_vectors(vectors: &[Vec<f32>], expected: usize, source: &str) -> Result<(), Error> {
    if vectors.len() != expected {
        return Err(Error::embedding(format!("{source} returned {} vectors for {expected} texts", vectors.len())));
    }
    let dim = vectors.first().map_or(0, Vec::len);
    if expected > 0 && dim == 0 {
        return Err(Error::embedding(format!("{source} returned empty vectors")));
    }
    for v in vectors {
        if v.len() != dim {
            return Err(Error::embedding(format!("{source} returned vectors of lengths {} and {dim}", v.len())));
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(Error::embedding(format!("{source} returned a non-finite value")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_cases() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 3.0]).abs() < 1e-6);
        assert!((cosine(&[1.0, 1.0], &[-1.0, -1.0]) + 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
    }

    #[test]
    fn chunks() {
        assert_eq!(chunk_words("a b  c\nd e", 2), ["a b", "c d", "e"]);
        assert!(chunk_words("  ", 2).is_empty());
        assert_eq!(chunk_words("a b", 0), ["a", "b"]);
    }

    #[test]
    fn chunks_are_balanced_and_bounded() {
        let text = (0..1000).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
        let c = document_chunks(&text, 200, 16);
        assert_eq!(c.iter().map(|c| c.1).collect::<Vec<_>>(), [200; 5]);
        let c = document_chunks(&text, 300, 16);
        assert_eq!(c.iter().map(|c| c.1).collect::<Vec<_>>(), [250; 4]);
        let c = document_chunks(&text, 10, 4);
        assert_eq!(c.len(), 4);
        assert!(c[0].0.starts_with("w0 ") && c[3].0.ends_with(" w999"), "{:?}", c[3]);
        assert_eq!(document_chunks(&text, 10, 1)[0].1, 10);
        assert!(document_chunks(" \n", 10, 4).is_empty());
    }

    #[test]
    fn weighted_pooling() {
        let pooled = mean_pool_weighted(&[vec![1.0, 0.0], vec![0.0, 1.0]], &[3.0, 1.0]).unwrap();
        assert!(pooled[0] > 0.9 && pooled[1] > 0.3, "{pooled:?}");
        assert!(mean_pool_weighted(&[vec![1.0]], &[]).is_err());
    }

    #[test]
    fn pooling_weights_chunks_equally() {
        let pooled = mean_pool(&[vec![10.0, 0.0], vec![0.0, 1.0]]).unwrap();
        let h = std::f32::consts::FRAC_1_SQRT_2;
        assert!((pooled[0] - h).abs() < 1e-6 && (pooled[1] - h).abs() < 1e-6, "{pooled:?}");
        assert!(mean_pool(&[vec![1.0], vec![1.0, 2.0]]).is_err());
        assert!(mean_pool(&[]).is_err());
    }

    #[test]
    fn model_strings() {
        let config = ProviderConfig::default();
        assert!(embedder_from_model("  ", &config).unwrap().is_none());
        let openai = embedder_from_model("openai:text-embedding-3-small", &config).unwrap().unwrap();
        assert_eq!(openai.model_id(), "openai:text-embedding-3-small");
        for (bad, needle) in [
            ("granite-embedding", "no provider prefix"),
            ("hf:bert", "unknown embedding provider \"hf\""),
            ("ollama:", "names no model"),
            ("local:/definitely/not/here", "/definitely/not/here"),
        ] {
            let err = embedder_from_model(bad, &config).unwrap_err();
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
    }
}
