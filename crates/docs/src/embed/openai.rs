//! The OpenAI-compatible provider: `POST {base}/v1/embeddings` with
//! `{"model": M, "input": [texts]}` and an optional bearer token, answered
//! by `{"data": [{"embedding": [f32; D], "index": i}, ...]}`. Entries are
//! put back in input order by `index`, since the API does not promise order.

use serde::{Deserialize, Serialize};

use super::http::{join_url, JsonClient};
use super::{check_vectors, normalize, Embedder, ProviderConfig};
use crate::error::Error;

/// Embeds texts with any server that speaks OpenAI's embeddings API.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    model: String,
    url: String,
    client: JsonClient,
    batch_size: usize,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    embedding: Vec<f32>,
    index: usize,
}

impl OpenAiEmbedder {
    /// An embedder for `model` at `config.openai_base_url` (with or without
    /// a trailing `/v1`), sending `config.openai_api_key` as a bearer token.
    pub fn new(model: &str, config: &ProviderConfig) -> Result<OpenAiEmbedder, Error> {
        let base = config.openai_base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        Ok(OpenAiEmbedder {
            model: model.trim().to_owned(),
            url: join_url(base, "v1/embeddings"),
            client: JsonClient::new(config, config.openai_api_key.clone()),
            batch_size: config.batch_size.max(1),
        })
    }
}

impl Embedder for OpenAiEmbedder {
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            let request = Request { model: &self.model, input: batch, encoding_format: "float" };
            let response: Response = self.client.post(&self.url, &request)?;
            let mut slots: Vec<Option<Vec<f32>>> = vec![None; batch.len()];
            for item in response.data {
                match slots.get_mut(item.index) {
                    Some(slot @ None) => *slot = Some(item.embedding),
                    _ => {
                        return Err(Error::embedding(format!(
                            "openai returned a duplicate or out-of-range index {} for {} texts",
                            item.index,
                            batch.len()
                        )))
                    }
                }
            }
            let vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
            check_vectors(&vectors, batch.len(), "openai")?;
            out.extend(vectors);
        }
        out.iter_mut().for_each(|v| normalize(v));
        Ok(out)
    }

    fn model_id(&self) -> String {
        format!("openai:{}", self.model)
    }
}
