//! A `config.json`'s layers as vLLM caches them: the text model of a
//! multimodal config (`text_config`), MLA when `kv_lora_rank` is set
//! (`vllm/model_executor/models/deepseek_v2.py`), each layer's kind from
//! `layer_types`, `full_attention_interval` (`qwen3_next.py`),
//! `sliding_window_pattern` or a `sliding_window` for every layer, KV heads
//! and head size as `vllm/config/model.py` reads them
//! (`get_total_num_kv_heads`, `get_head_size`).

use serde_json::Value;

use super::{KvModel, Layer, Rules};

/// The model's cache from its `config.json`; an error says what is missing
/// or not understood.
pub fn from_config(config: &Value) -> Result<KvModel, String> {
    let c = text_config(config);
    let shape = Shape::read(c)?;
    let kinds = Kinds::read(c, &shape);
    let layers = layer_list(c, shape.layers, &kinds)?;
    // vLLM's `--dtype auto` runs a float32 checkpoint in the platform's
    // 16-bit type (`_resolve_auto_dtype` in vllm/config/model.py), a 16-bit
    // one as it is; `--dtype float32` is [`super::KvOptions::model_dtype_bytes`].
    let dtype_bytes = 2;
    Ok(KvModel {
        layers,
        dtype_bytes,
        max_positions: num(c, "max_position_embeddings")
            .or_else(|| num(c, "max_sequence_length"))
            .or_else(|| num(c, "seq_length")),
        attention_heads: Some(shape.heads),
        rules: Rules::Vllm,
    })
}

/// The text model's config: a multimodal config's `text_config`, else the
/// config itself.
fn text_config(config: &Value) -> &Value {
    match config.get("text_config") {
        Some(t) if t.is_object() => t,
        _ => config,
    }
}

/// A whole number the config gives under `k`.
fn num(c: &Value, k: &str) -> Option<u64> {
    c.get(k).and_then(Value::as_u64)
}

/// The attention's size: layers, heads, KV heads and head size.
struct Shape {
    /// Hidden layers.
    layers: u64,
    /// Attention (query) heads.
    heads: u64,
    /// KV heads (1 for multi-query attention).
    kv_heads: u64,
    /// Each head's size.
    head_dim: u64,
}

impl Shape {
    /// The shape under the names the model families use for it.
    fn read(c: &Value) -> Result<Shape, String> {
        let num = |k: &str| num(c, k);
        let layers = num("num_hidden_layers")
            .or_else(|| num("n_layer"))
            .or_else(|| num("num_layers"))
            .ok_or("config.json gives no num_hidden_layers")?;
        let heads = num("num_attention_heads")
            .or_else(|| num("n_head"))
            .ok_or("config.json gives no num_attention_heads")?;
        let kv_heads = if c.get("multi_query").and_then(Value::as_bool) == Some(true) {
            1
        } else {
            num("num_key_value_heads")
                .or_else(|| num("multi_query_group_num"))
                .or_else(|| num("n_head_kv"))
                .unwrap_or(heads)
        };
        let head_dim = match num("head_dim") {
            Some(h) => h,
            None => {
                num("hidden_size").ok_or("config.json gives no head_dim or hidden_size")?
                    / heads.max(1)
            }
        };
        Ok(Shape {
            layers,
            heads,
            kv_heads,
            head_dim,
        })
    }
}

/// The kinds of layer the config can have, before knowing which layer is
/// which.
struct Kinds<'a> {
    /// The config, for the linear-attention state (read only when a layer
    /// needs it).
    c: &'a Value,
    /// Full attention (no latent).
    full: Layer,
    /// Sliding-window attention, when the config gives a window.
    sliding: Option<Layer>,
    /// Latent attention, when `kv_lora_rank` is set.
    mla: Option<Layer>,
}

impl<'a> Kinds<'a> {
    /// Each kind of layer sized by the config's shape.
    fn read(c: &'a Value, shape: &Shape) -> Kinds<'a> {
        let (kv_heads, head_dim) = (shape.kv_heads, shape.head_dim);
        Kinds {
            c,
            full: Layer::Full {
                kv_heads,
                head_dim,
                head_dim_v: head_dim,
            },
            sliding: num(c, "sliding_window").map(|window| Layer::Sliding {
                kv_heads,
                head_dim,
                head_dim_v: head_dim,
                window,
            }),
            mla: num(c, "kv_lora_rank").map(|r| Layer::Mla {
                latent: r + num(c, "qk_rope_head_dim").unwrap_or(64),
            }),
        }
    }

    /// A global layer: latent attention when the model has it, else full.
    fn global(&self) -> Layer {
        self.mla.unwrap_or(self.full)
    }

    /// A linear-attention layer's fixed state; an error names the size the
    /// config leaves out.
    fn linear(&self) -> Result<Layer, String> {
        let need = |k: &str| {
            num(self.c, k).ok_or(format!(
                "config.json gives linear-attention layers but no {k}"
            ))
        };
        let (nk, nv, dk, dv, kernel) = (
            need("linear_num_key_heads")?,
            need("linear_num_value_heads")?,
            need("linear_key_head_dim")?,
            need("linear_value_head_dim")?,
            need("linear_conv_kernel_dim")?,
        );
        Ok(Layer::State {
            conv_dim: dk * nk * 2 + dv * nv,
            conv_len: kernel.saturating_sub(1),
            heads: nv,
            rows: dv,
            cols: dk,
        })
    }

    /// The layer a `layer_types` entry names.
    fn named(&self, t: &str) -> Result<Layer, String> {
        match t {
            "full_attention" | "attention" | "global" => Ok(self.global()),
            "sliding_attention" | "sliding_window" | "local" => self.sliding.ok_or_else(|| {
                "config.json names sliding_attention layers but gives no sliding_window".into()
            }),
            "linear_attention" => self.linear(),
            other => Err(format!(
                "config.json names a layer type the fit check does not know: {other}"
            )),
        }
    }
}

/// Each of the `layers` layers' kind: from `layer_types`, a
/// `full_attention_interval`, a sliding pattern, one window for all, or
/// all global.
fn layer_list(c: &Value, layers: u64, kinds: &Kinds) -> Result<Vec<Layer>, String> {
    let types: Option<Vec<String>> = c.get("layer_types").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    });
    let use_sliding = c.get("use_sliding_window").and_then(Value::as_bool) != Some(false);
    let mut out = Vec::with_capacity(layers as usize);
    if let Some(types) = types.filter(|t| !t.is_empty()) {
        for t in types.iter().take(layers as usize) {
            out.push(kinds.named(t)?);
        }
    } else if let Some(every) = num(c, "full_attention_interval").filter(|n| *n > 0) {
        // Qwen3NextConfig: a layer is full attention when (i + 1) % interval == 0.
        for i in 0..layers {
            out.push(if (i + 1) % every == 0 {
                kinds.global()
            } else {
                kinds.linear()?
            });
        }
    } else if let (Some(p), Some(s)) = (
        num(c, "sliding_window_pattern")
            .filter(|p| *p > 0)
            .or_else(|| default_pattern(c)),
        kinds.sliding,
    ) {
        // Gemma 2/3, gpt-oss, Command R7B: every p-th layer is global, the
        // others slide (transformers' default `layer_types` for these).
        for i in 0..layers {
            out.push(if (i + 1) % p == 0 { kinds.global() } else { s });
        }
    } else if let (Some(s), true, None) = (kinds.sliding, use_sliding, kinds.mla) {
        // Mistral-style: one window for every layer.
        out.extend(std::iter::repeat_n(s, layers as usize));
    } else {
        out.extend(std::iter::repeat_n(kinds.global(), layers as usize));
    }
    Ok(out)
}

/// The sliding pattern transformers gives a model type whose config.json
/// leaves it out (`layer_types` built as `(i + 1) % p != 0` → sliding).
fn default_pattern(c: &Value) -> Option<u64> {
    match c.get("model_type").and_then(Value::as_str)? {
        "gemma2" | "gpt_oss" => Some(2),
        "cohere2" => Some(4),
        "gemma3" | "gemma3_text" => Some(6),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv::{CacheDtype, KvOptions};

    use crate::model::fixture_config as cfg;

    fn per_token(name: &str) -> u64 {
        from_config(&cfg(name))
            .unwrap()
            .bytes_per_token(&KvOptions::default())
    }

    #[test]
    fn deepseek_v3_is_one_latent_per_layer() {
        // 61 layers × (512 + 64) × 2 B: vLLM's MLAAttentionSpec, not 2 × 128 heads × 56.
        assert_eq!(per_token("deepseek-ai--DeepSeek-V3.json"), 61 * 576 * 2);
        let m = from_config(&cfg("deepseek-ai--DeepSeek-V3.json")).unwrap();
        let tp4 = KvOptions {
            tp: 4,
            ..KvOptions::default()
        };
        assert_eq!(m.bytes_per_token(&tp4), 61 * 576 * 2);
        let fp8 = KvOptions {
            dtype: CacheDtype::Bytes(1),
            ..tp4
        };
        assert_eq!(m.bytes_per_token(&fp8), 61 * 576);
    }

    #[test]
    fn qwen3_next_counts_a_quarter_and_the_linear_state() {
        let m = from_config(&cfg("Qwen--Qwen3-Next-80B-A3B-Instruct.json")).unwrap();
        // 12 of 48 layers are full attention: 2 KV heads × (256 + 256) × 2 B.
        assert_eq!(m.bytes_per_token(&KvOptions::default()), 12 * 2 * 512 * 2);
        let states = m
            .layers
            .iter()
            .filter(|l| matches!(l, Layer::State { .. }))
            .count();
        assert_eq!(states, 36);
        // Each linear layer: (8192 × 3 + 32 × 128 × 128) × 2 B = 1097728 B a
        // sequence, which vLLM pads to one attention page: a block of
        // 16 × ⌈1097728 / (16 × 2048)⌉ = 544 tokens × 2048 B = 1114112 B,
        // two pages a sequence with prefix caching.
        let o = KvOptions::default();
        assert_eq!(m.vllm_hybrid_page(&o), Some((544, 544 * 2048)));
        assert_eq!(m.bytes(0..1, &o, 1), 2 * 544 * 2048);
        assert_eq!(m.vllm_block(&o), 544);
        let llama = KvModel {
            rules: super::super::Rules::LlamaCpp,
            ..m.clone()
        };
        assert_eq!(llama.bytes(0..1, &o, 1), (8192 * 3 + 32 * 128 * 128) * 2);
    }

    #[test]
    fn gpt_oss_slides_half_its_layers() {
        let m = from_config(&cfg("openai--gpt-oss-120b.json")).unwrap();
        // 18 full layers × 8 KV heads × (64 + 64) × 2 B.
        assert_eq!(m.bytes_per_token(&KvOptions::default()), 18 * 8 * 128 * 2);
        let sliding = m
            .layers
            .iter()
            .filter(|l| matches!(l, Layer::Sliding { window: 128, .. }))
            .count();
        assert_eq!(sliding, 18);
    }

    #[test]
    fn a_float32_checkpoint_runs_in_16_bits_unless_dtype_says_float32() {
        let c = serde_json::json!({"num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "hidden_size": 256, "torch_dtype": "float32"});
        let m = from_config(&c).unwrap();
        // vLLM 0.32.0 CPU, measured by tests/kv_engines.rs: 1024 B/token.
        assert_eq!(m.bytes_per_token(&KvOptions::default()), 2 * 2 * 128 * 2);
        let f32 = KvOptions {
            model_dtype_bytes: Some(4),
            ..KvOptions::default()
        };
        assert_eq!(m.bytes_per_token(&f32), 2 * 2 * 128 * 4);
    }

    #[test]
    fn plain_gqa_and_multimodal_text_config() {
        assert_eq!(per_token("Qwen--Qwen3-32B.json"), 64 * 8 * 256 * 2);
        // Gemma 3: text_config, 5 of 6 layers slide over 1024 tokens.
        let m = from_config(&cfg("google--gemma-3-27b-it.json")).unwrap();
        assert_eq!(m.layers.len(), 62);
        assert_eq!(m.bytes_per_token(&KvOptions::default()), 10 * 16 * 256 * 2);
    }
}
