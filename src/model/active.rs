//! The weights one decoded token reads (pure), from a `config.json`: the
//! parameters of every layer counted from its shapes (attention, MLA,
//! linear attention, dense MLP, MoE experts, shared experts, router) and
//! of the embeddings, once all together and once for what one token
//! touches (`num_experts_per_tok` of the experts, one embedding row, the
//! whole LM head). The bytes per parameter are the weights on disk over
//! all parameters, so a quantized checkpoint counts as it is stored.

use serde::Serialize;
use serde_json::Value;

use super::kv::{self, Layer};

/// What one token reads of a model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Active {
    /// Every parameter of the model.
    pub total_params: u64,
    /// The parameters one decoded token reads.
    pub active_params: u64,
    /// Decoder layers.
    pub layers: u64,
    /// The hidden size (what an all-reduce carries per token, in elements).
    pub hidden: u64,
    /// Routed experts and how many each token uses (`None`: dense).
    pub experts: Option<(u64, u64)>,
}

impl Active {
    /// Bytes one token reads when the whole model is `weights_bytes` on disk.
    pub fn active_bytes(&self, weights_bytes: u64) -> u64 {
        if self.total_params == 0 {
            return weights_bytes;
        }
        (weights_bytes as f64 * self.active_params as f64 / self.total_params as f64) as u64
    }

    /// A model whose shapes are not known (a GGUF): every weight is read.
    pub fn dense(weights_bytes: u64, layers: u64, hidden: u64) -> Active {
        Active {
            total_params: weights_bytes,
            active_params: weights_bytes,
            layers,
            hidden,
            experts: None,
        }
    }
}

/// Parameters of one attention layer of the kind `layer`.
fn attention(c: &Value, layer: &Layer, hidden: u64, heads: u64, head_dim: u64) -> u64 {
    let num = |k: &str| c.get(k).and_then(Value::as_u64);
    match *layer {
        Layer::Mla { latent } => {
            let nope = num("qk_nope_head_dim").unwrap_or(128);
            let rope = num("qk_rope_head_dim").unwrap_or(64);
            let v = num("v_head_dim").unwrap_or(128);
            let q = match num("q_lora_rank") {
                Some(r) => hidden * r + r * heads * (nope + rope),
                None => hidden * heads * (nope + rope),
            };
            let lora = latent.saturating_sub(rope);
            q + hidden * latent + lora * heads * (nope + v) + heads * v * hidden
        }
        Layer::State {
            conv_dim,
            heads: nv,
            ..
        } => {
            // in_proj_qkvz (the conv channels and z), in_proj_ba, out_proj.
            let dv = num("linear_value_head_dim").unwrap_or(0);
            hidden * (conv_dim + nv * dv) + hidden * 2 * nv + nv * dv * hidden
        }
        Layer::Full { kv_heads, .. } | Layer::Sliding { kv_heads, .. } => {
            hidden * head_dim * (heads + 2 * kv_heads) + heads * head_dim * hidden
        }
    }
}

/// The model's parameters from its `config.json`; an error says what is
/// missing.
pub fn from_config(config: &Value) -> Result<Active, String> {
    let c = match config.get("text_config") {
        Some(t) if t.is_object() => t,
        _ => config,
    };
    let num = |k: &str| c.get(k).and_then(Value::as_u64);
    let kv = kv::hf::from_config(config)?;
    let hidden = num("hidden_size").ok_or("config.json gives no hidden_size")?;
    let heads = kv.attention_heads.unwrap_or(1);
    let head_dim = num("head_dim").unwrap_or(hidden / heads.max(1));
    let vocab = num("vocab_size").ok_or("config.json gives no vocab_size")?;
    let dense_ffn = num("intermediate_size");
    let experts = num("num_local_experts")
        .or_else(|| num("n_routed_experts"))
        .or_else(|| num("num_experts"))
        .filter(|n| *n > 1);
    let per_tok = num("num_experts_per_tok")
        .or_else(|| num("experts_per_token"))
        .or_else(|| num("num_experts_per_token"))
        .or_else(|| num("moe_topk"));
    let expert_ffn = num("moe_intermediate_size")
        .or(dense_ffn)
        .ok_or("config.json gives no intermediate_size")?;
    let shared = num("shared_expert_intermediate_size")
        .unwrap_or_else(|| num("n_shared_experts").unwrap_or(0) * expert_ffn);
    let first_dense = num("first_k_dense_replace").unwrap_or(0);
    let mlp = |ffn: u64| 3 * hidden * ffn;
    let (mut total, mut active) = (0u64, 0u64);
    for (i, layer) in kv.layers.iter().enumerate() {
        let a = attention(c, layer, hidden, heads, head_dim);
        total += a;
        active += a;
        match (experts, per_tok) {
            (Some(e), Some(k)) if i as u64 >= first_dense => {
                let fixed = hidden * e + mlp(shared);
                total += fixed + e * mlp(expert_ffn);
                active += fixed + k.min(e) * mlp(expert_ffn);
            }
            _ => {
                let ffn = dense_ffn.ok_or("config.json gives no intermediate_size")?;
                total += mlp(ffn);
                active += mlp(ffn);
            }
        }
    }
    let embed = vocab * hidden;
    let tied = c
        .get("tie_word_embeddings")
        .or_else(|| config.get("tie_word_embeddings"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    total += if tied { embed } else { 2 * embed };
    // One embedding row and the whole LM head.
    active += embed + hidden;
    Ok(Active {
        total_params: total,
        active_params: active,
        layers: kv.layers.len() as u64,
        hidden,
        experts: experts.zip(per_tok),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::fixture_config as cfg;

    fn billions(n: u64) -> f64 {
        n as f64 / 1e9
    }

    /// The published counts: gpt-oss-120b 116.8B total, 5.1B active (its
    /// model card); DeepSeek-V3 671B, 37B active (its paper; 685B with the
    /// MTP module, which is not counted here); Qwen3-Next-80B-A3B 80B, 3B
    /// active; Qwen3-32B 32.8B, dense.
    #[test]
    fn the_published_parameter_counts() {
        let g = from_config(&cfg("openai--gpt-oss-120b.json")).unwrap();
        assert!((116.0..118.0).contains(&billions(g.total_params)), "{g:?}");
        assert!((5.0..5.3).contains(&billions(g.active_params)), "{g:?}");
        assert_eq!(g.experts, Some((128, 4)));
        assert_eq!((g.layers, g.hidden), (36, 2880));
        let d = from_config(&cfg("deepseek-ai--DeepSeek-V3.json")).unwrap();
        assert!((665.0..680.0).contains(&billions(d.total_params)), "{d:?}");
        assert!((36.0..39.0).contains(&billions(d.active_params)), "{d:?}");
        let q = from_config(&cfg("Qwen--Qwen3-Next-80B-A3B-Instruct.json")).unwrap();
        assert!((77.0..83.0).contains(&billions(q.total_params)), "{q:?}");
        assert!((2.7..4.0).contains(&billions(q.active_params)), "{q:?}");
        let dense = from_config(&cfg("Qwen--Qwen3-32B.json")).unwrap();
        assert!(
            (32.0..33.5).contains(&billions(dense.total_params)),
            "{dense:?}"
        );
        assert_eq!(
            dense.total_params,
            dense.active_params + 151936 * 5120 - 5120
        );
        assert_eq!(dense.experts, None);
    }

    #[test]
    fn active_bytes_scale_the_weights_on_disk() {
        let g = from_config(&cfg("openai--gpt-oss-120b.json")).unwrap();
        let on_disk = 65_000_000_000;
        let b = g.active_bytes(on_disk);
        assert!((2.7e9..3.0e9).contains(&(b as f64)), "{b}");
        assert_eq!(Active::dense(100, 2, 8).active_bytes(100), 100);
    }

    #[test]
    fn a_config_without_sizes_says_which() {
        let e = from_config(&serde_json::json!({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}))
            .unwrap_err();
        assert!(e.contains("vocab_size"), "{e}");
    }
}
