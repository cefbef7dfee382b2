//! A BERT encoder on candle, enough for sentence-transformers models such as
//! all-MiniLM-L6-v2: embeddings (word + position + token type, LayerNorm),
//! N encoder layers (multi-head self-attention and a GELU feed-forward
//! block, each with a residual LayerNorm), no pooler. Weight names follow
//! Hugging Face's `BertModel` (`embeddings.*`, `encoder.layer.N.*`), with or
//! without a leading `bert.`.
//!
//! Written here rather than taken from candle-transformers, whose hundreds of
//! other models would multiply the crate's compile time for one encoder.

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

/// The fields of a Hugging Face `config.json` the encoder needs.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct BertConfig {
    pub(crate) vocab_size: usize,
    pub(crate) hidden_size: usize,
    pub(crate) num_hidden_layers: usize,
    pub(crate) num_attention_heads: usize,
    pub(crate) intermediate_size: usize,
    pub(crate) max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub(crate) type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub(crate) layer_norm_eps: f64,
    #[serde(default = "default_act")]
    pub(crate) hidden_act: String,
    #[serde(default)]
    pub(crate) model_type: Option<String>,
}

fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_act() -> String {
    "gelu".to_owned()
}

impl BertConfig {
    /// Rejects configurations this encoder cannot run, before loading weights.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if let Some(t) = &self.model_type {
            if t != "bert" {
                return Err(format!("model_type {t:?} is not a BERT model"));
            }
        }
        if self.hidden_act != "gelu" {
            return Err(format!("hidden_act {:?} is not supported (only \"gelu\")", self.hidden_act));
        }
        if self.num_attention_heads == 0 || !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not divisible by num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if self.num_hidden_layers == 0 || self.vocab_size == 0 || self.max_position_embeddings == 0 {
            return Err("num_hidden_layers, vocab_size and max_position_embeddings must be positive".to_owned());
        }
        Ok(())
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
}

/// The encoder: token ids in, per-token hidden states out.
pub(crate) struct Bert {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
}

impl Bert {
    pub(crate) fn load(vb: VarBuilder, config: &BertConfig) -> candle_core::Result<Bert> {
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb };
        let h = config.hidden_size;
        let eps = config.layer_norm_eps;
        let e = vb.pp("embeddings");
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            layers.push(Layer {
                query: linear(h, h, l.pp("attention.self.query"))?,
                key: linear(h, h, l.pp("attention.self.key"))?,
                value: linear(h, h, l.pp("attention.self.value"))?,
                attn_out: linear(h, h, l.pp("attention.output.dense"))?,
                attn_norm: layer_norm(h, eps, l.pp("attention.output.LayerNorm"))?,
                intermediate: linear(h, config.intermediate_size, l.pp("intermediate.dense"))?,
                output: linear(config.intermediate_size, h, l.pp("output.dense"))?,
                out_norm: layer_norm(h, eps, l.pp("output.LayerNorm"))?,
            });
        }
        Ok(Bert {
            word: embedding(config.vocab_size, h, e.pp("word_embeddings"))?,
            position: embedding(config.max_position_embeddings, h, e.pp("position_embeddings"))?,
            token_type: embedding(config.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            embed_norm: layer_norm(h, eps, e.pp("LayerNorm"))?,
            layers,
            heads: config.num_attention_heads,
            head_dim: h / config.num_attention_heads,
        })
    }

    /// `ids`, `type_ids`, `mask`: `(batch, seq)` u32 tensors; returns
    /// `(batch, seq, hidden)` f32 hidden states.
    pub(crate) fn forward(&self, ids: &Tensor, type_ids: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (batch, seq) = ids.dims2()?;
        let positions = Tensor::arange(0u32, seq as u32, ids.device())?.unsqueeze(0)?;
        let x = self
            .word
            .forward(ids)?
            .broadcast_add(&self.position.forward(&positions)?)?
            .add(&self.token_type.forward(type_ids)?)?;
        let mut x = self.embed_norm.forward(&x)?;
        // Additive mask: 0 where attended, a large negative where padded.
        let bias = mask.to_dtype(DType::F32)?.affine(1e9, -1e9)?.reshape((batch, 1, 1, seq))?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        for layer in &self.layers {
            let split = |t: Tensor| -> candle_core::Result<Tensor> {
                t.reshape((batch, seq, self.heads, self.head_dim))?.transpose(1, 2)?.contiguous()
            };
            let q = split(layer.query.forward(&x)?)?;
            let k = split(layer.key.forward(&x)?)?;
            let v = split(layer.value.forward(&x)?)?;
            let scores = q.matmul(&k.t()?)?.affine(scale, 0.0)?.broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs.matmul(&v)?.transpose(1, 2)?.reshape((batch, seq, self.heads * self.head_dim))?;
            let attended = layer.attn_norm.forward(&(layer.attn_out.forward(&context)? + &x)?)?;
            let ff = layer.output.forward(&layer.intermediate.forward(&attended)?.gelu_erf()?)?;
            x = layer.out_norm.forward(&(ff + attended)?)?;
        }
        Ok(x)
    }
}

/// Mean of the token states where `mask` is 1, then L2-normalised:
/// `(batch, seq, hidden)` → `(batch, hidden)`.
pub(crate) fn mean_pool_normalize(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
    let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
    let mean = summed.broadcast_div(&counts)?;
    let norms = mean.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
    mean.broadcast_div(&norms)
}

/// The CPU device; kept in one place should a GPU backend be added.
pub(crate) fn device() -> Device {
    Device::Cpu
}
