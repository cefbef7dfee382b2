//! The Ollama provider: `POST {base}/api/embed` with
//! `{"model": M, "input": [texts]}`, answered by
//! `{"model": M, "embeddings": [[f32; D], ...]}`.
//!
//! Ollama's `/api/embed` returns L2-normalised vectors already; they are
//! normalised again here so every provider gives unit vectors.

use serde::{Deserialize, Serialize};

use super::http::{join_url, JsonClient};
use super::{check_vectors, normalize, Embedder, ProviderConfig};
use crate::error::Error;

/// Embeds texts with a model served by Ollama.
#[derive(Debug)]
pub struct OllamaEmbedder {
    model: String,
    url: String,
    client: JsonClient,
    batch_size: usize,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    input: &'a [String],
}

#[derive(Deserialize)]
struct Response {
    embeddings: Vec<Vec<f32>>,
}

impl OllamaEmbedder {
    /// An embedder for Ollama model `model` at `config.ollama_base_url`. No
    /// request is made until [`Embedder::embed`].
    pub fn new(model: &str, config: &ProviderConfig) -> Result<OllamaEmbedder, Error> {
        Ok(OllamaEmbedder {
            model: model.trim().to_owned(),
            url: join_url(&config.ollama_base_url, "api/embed"),
            client: JsonClient::new(config, None),
            batch_size: config.batch_size.max(1),
        })
    }
}

impl Embedder for OllamaEmbedder {
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            let response: Response = self.client.post(&self.url, &Request { model: &self.model, input: batch })?;
            check_vectors(&response.embeddings, batch.len(), "ollama")?;
            out.extend(response.embeddings);
        }
        out.iter_mut().for_each(|v| normalize(v));
        Ok(out)
    }

    fn model_id(&self) -> String {
        format!("ollama:{}", self.model)
    }
}
