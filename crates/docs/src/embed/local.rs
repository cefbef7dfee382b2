//! The `local:DIR` provider: a sentence-transformers BERT model (e.g.
//! all-MiniLM-L6-v2) run in-process on the CPU, with no server and no
//! network.
//!
//! `DIR` must hold `config.json`, `tokenizer.json` and `model.safetensors`.
//! Inputs are tokenised with the model's own tokenizer, truncated to
//! [`MAX_TOKENS`] (or the model's position limit, if smaller) and padded to
//! the longest text of each batch — the shipped `tokenizer.json` of
//! all-MiniLM-L6-v2 fixes both at 128, which would silently drop half of
//! every 200-word chunk, so both settings are replaced here. Vectors are the
//! attention-masked mean of the token states, L2-normalised, which is what
//! sentence-transformers computes for this model family.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::bert::{device, mean_pool_normalize, Bert, BertConfig};
use super::Embedder;
use crate::error::Error;
use crate::parse::sha256_hex;

/// Most tokens per input, matching sentence-transformers' `max_seq_length`
/// for all-MiniLM-L6-v2.
pub const MAX_TOKENS: usize = 256;

/// Embeds texts with a BERT model loaded from a folder.
pub struct LocalEmbedder {
    model: Bert,
    tokenizer: Tokenizer,
    device: Device,
    batch_size: usize,
    id: String,
    tokens: AtomicU64,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder").field("id", &self.id).field("batch_size", &self.batch_size).finish()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir`. Fails with a message naming the missing or
    /// broken file.
    pub fn load(dir: &Path, batch_size: usize) -> Result<LocalEmbedder, Error> {
        let file = |name: &str| -> PathBuf { dir.join(name) };
        let read = |name: &str| -> Result<Vec<u8>, Error> {
            fs::read(file(name)).map_err(|e| {
                Error::config(format!(
                    "local embedding model: cannot read {} ({e}); the folder needs config.json, tokenizer.json and model.safetensors",
                    file(name).display()
                ))
            })
        };
        let config: BertConfig = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| Error::config(format!("{}: {e}", file("config.json").display())))?;
        config.validate().map_err(|e| Error::config(format!("{}: {e}", file("config.json").display())))?;

        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| Error::config(format!("{}: {e}", file("tokenizer.json").display())))?;
        let max_len = MAX_TOKENS.min(config.max_position_embeddings);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: max_len, ..Default::default() }))
            .map_err(|e| Error::config(format!("tokenizer truncation: {e}")))?;
        let padding = match tokenizer.get_padding() {
            Some(p) => PaddingParams { strategy: PaddingStrategy::BatchLongest, ..p.clone() },
            None => PaddingParams::default(),
        };
        tokenizer.with_padding(Some(padding));

        let weights = read("model.safetensors")?;
        let dir_name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let id = format!("local:{dir_name}#{}", &sha256_hex(&weights)[..16]);
        let device = device();
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| Error::config(format!("{}: {e}", file("model.safetensors").display())))?;
        let model = Bert::load(vb, &config)
            .map_err(|e| Error::config(format!("{}: {e}", file("model.safetensors").display())))?;
        Ok(LocalEmbedder { model, tokenizer, device, batch_size: batch_size.max(1), id, tokens: AtomicU64::new(0) })
    }

    fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::embedding(format!("tokenizing: {e}")))?;
        let seq = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(texts.len() * seq);
        let mut types = Vec::with_capacity(texts.len() * seq);
        let mut mask = Vec::with_capacity(texts.len() * seq);
        for enc in &encodings {
            if enc.get_ids().len() != seq {
                return Err(Error::embedding("tokenizer returned unpadded batch"));
            }
            ids.extend_from_slice(enc.get_ids());
            types.extend_from_slice(enc.get_type_ids());
            mask.extend_from_slice(enc.get_attention_mask());
        }
        let real: u64 = mask.iter().map(|&m| u64::from(m)).sum();
        self.tokens.fetch_add(real, Ordering::Relaxed);
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let shape = (texts.len(), seq);
            let ids = Tensor::from_vec(ids, shape, &self.device)?;
            let types = Tensor::from_vec(types, shape, &self.device)?;
            let mask = Tensor::from_vec(mask, shape, &self.device)?;
            let hidden = self.model.forward(&ids, &types, &mask)?;
            mean_pool_normalize(&hidden, &mask)?.to_vec2::<f32>()
        };
        run().map_err(|e| Error::embedding(format!("running the model: {e}")))
    }
}

impl Embedder for LocalEmbedder {
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            out.extend(self.embed_batch(batch)?);
        }
        Ok(out)
    }

    fn model_id(&self) -> String {
        self.id.clone()
    }

    fn tokens_embedded(&self) -> Option<u64> {
        Some(self.tokens.load(Ordering::Relaxed))
    }
}
