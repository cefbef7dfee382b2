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
//! Documents longer than a model's input are split into word chunks whose
//! vectors are mean-pooled ([`embed_document`]).

mod bert;
mod http;
mod local;
mod ollama;
mod openai;

use std::time::Duration;

use crate::error::Error;

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
        "local" => Box::new(LocalEmbedder::load(name.as_ref(), config.batch_size)?),
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

/// Splits `text` into chunks of at most `words_per_chunk` whitespace-
/// separated words (at least one word per chunk).
pub fn chunk_words(text: &str, words_per_chunk: usize) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words.chunks(words_per_chunk.max(1)).map(|c| c.join(" ")).collect()
}

/// Embeds a whole document as one vector: the L2-normalised mean of the
/// L2-normalised vectors of its word chunks.
pub fn embed_document(embedder: &dyn Embedder, text: &str, words_per_chunk: usize) -> Result<Vec<f32>, Error> {
    let chunks = chunk_words(text, words_per_chunk);
    if chunks.is_empty() {
        return Err(Error::embedding("document has no words to embed"));
    }
    let vectors = embedder.embed(&chunks)?;
    mean_pool(&vectors)
}

/// L2-normalised mean of L2-normalised vectors; all must have one length.
pub fn mean_pool(vectors: &[Vec<f32>]) -> Result<Vec<f32>, Error> {
    let Some(first) = vectors.first() else {
        return Err(Error::embedding("no vectors to pool"));
    };
    let dim = first.len();
    let mut sum = vec![0f32; dim];
    for v in vectors {
        if v.len() != dim {
            return Err(Error::embedding(format!("vectors of different lengths ({} and {dim})", v.len())));
        }
        let n = norm(v);
        if n > 0.0 {
            sum.iter_mut().zip(v).for_each(|(s, x)| *s += x / n);
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
