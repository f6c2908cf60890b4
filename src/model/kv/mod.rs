//! The KV cache an engine reserves, layer by layer (pure): each layer kind
//! has its own rule ([`Layer`]), read from a model's `config.json`
//! ([`hf`], vLLM's rules) or its GGUF header ([`gguf`], llama.cpp's).
//! [`KvModel::bytes`] is what one request of a context length holds on one
//! GPU; [`KvModel::explain`] says how, one line per layer kind.

pub mod gguf;
pub mod hf;

use serde::{Deserialize, Serialize};

/// vLLM's default KV block (tokens per page): a sliding-window layer may
/// hold one block more than its window.
pub const VLLM_BLOCK: u64 = 16;

/// Pages of state a sequence holds in a vLLM hybrid model: with prefix
/// caching (on by default) its Mamba cache runs in `align` mode, two pages a
/// request (`MambaSpec.max_memory_usage_bytes`, vLLM 0.32).
pub const VLLM_STATE_PAGES: u64 = 2;

/// llama.cpp's default micro-batch (`-ub`), which an SWA cache holds beside
/// the window.
pub const LLAMA_UBATCH: u64 = 512;

/// The engine whose rules count the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rules {
    /// vLLM (`vllm/v1/kv_cache_interface.py`).
    Vllm,
    /// llama.cpp (`src/llama-kv-cache.cpp`, `src/llama-kv-cache-iswa.cpp`).
    LlamaCpp,
}

/// One layer's cache kind and shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Layer {
    /// Full attention: a key and a value per KV head per token.
    Full {
        /// KV heads of the whole model (split by tensor parallelism).
        kv_heads: u64,
        /// Key head size.
        head_dim: u64,
        /// Value head size (0: no value cache, llama.cpp's MLA).
        head_dim_v: u64,
    },
    /// Sliding-window attention: as full attention, for the window only.
    Sliding {
        /// KV heads of the whole model.
        kv_heads: u64,
        /// Key head size.
        head_dim: u64,
        /// Value head size.
        head_dim_v: u64,
        /// The window in tokens.
        window: u64,
    },
    /// Multi-head latent attention (DeepSeek): one latent per token, whole
    /// on every tensor-parallel rank.
    Mla {
        /// `kv_lora_rank + qk_rope_head_dim`.
        latent: u64,
    },
    /// Linear attention or Mamba: a fixed state per sequence, whatever the
    /// context (a convolution window and a recurrent state).
    State {
        /// Channels of the convolution state (split by tensor parallelism).
        conv_dim: u64,
        /// Its length (the kernel minus one).
        conv_len: u64,
        /// Heads of the recurrent state (split by tensor parallelism).
        heads: u64,
        /// Each head's state rows.
        rows: u64,
        /// Each head's state columns.
        cols: u64,
    },
}

impl Layer {
    /// The name of its kind in messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Layer::Full { .. } => "full-attention",
            Layer::Sliding { .. } => "sliding-window",
            Layer::Mla { .. } => "MLA",
            Layer::State { .. } => "linear-attention/Mamba",
        }
    }
}

/// The cache's element type, from `--kv-cache-dtype` (llama.cpp: `-ctk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheDtype {
    /// `auto`: the model's own dtype.
    Auto,
    /// This many bytes per value (`fp8*`, `int8*`: 1; `float16`/`bfloat16`: 2).
    Bytes(u64),
    /// `fp8_ds_mla`: 656 bytes per token per MLA layer (FlashMLA sparse).
    Fp8DsMla,
}

impl CacheDtype {
    /// `--kv-cache-dtype VALUE` as vLLM reads it; an error names the values known.
    pub fn parse(v: &str) -> Result<Self, String> {
        Ok(match v {
            "auto" => CacheDtype::Auto,
            "fp8_ds_mla" => CacheDtype::Fp8DsMla,
            "bfloat16" | "float16" | "half" | "f16" | "bf16" => CacheDtype::Bytes(2),
            "float32" | "f32" => CacheDtype::Bytes(4),
            v if v.starts_with("fp8") || v.starts_with("int8") || v == "q8_0" => {
                CacheDtype::Bytes(1)
            }
            _ => {
                return Err(format!(
                    "--kv-cache-dtype {v}: not a KV cache dtype the fit check knows (auto, bfloat16, float16, float32, fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla, int8_per_token_head)"
                ));
            }
        })
    }
}

/// What the count depends on besides the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KvOptions {
    /// Tensor-parallel size (1 for llama.cpp).
    pub tp: u64,
    /// `--kv-cache-dtype`.
    pub dtype: CacheDtype,
    /// Tokens in flight (`--max-num-batched-tokens` × the batches vLLM
    /// runs at once): what a sliding-window layer holds beside its window.
    pub max_num_batched_tokens: u64,
    /// Sequences whose fixed state is counted (`--max-num-seqs` when given, else one).
    pub seqs: u64,
    /// `--dtype` when given (`None`: auto, the model's own, 16-bit for vLLM).
    pub model_dtype_bytes: Option<u64>,
    /// Tokens per KV block (`--block-size`; [`VLLM_BLOCK`] unless given;
    /// vLLM's CPU build defaults to 128).
    pub block: u64,
}

/// vLLM's `max_num_batched_tokens` for the API server on a GPU of 70 GiB
/// or more, which a Strix Halo's GTT is (`EngineArgs.get_batch_defaults`).
pub const VLLM_DEFAULT_BATCHED_TOKENS: u64 = 8192;

impl Default for KvOptions {
    fn default() -> Self {
        KvOptions {
            tp: 1,
            dtype: CacheDtype::Auto,
            max_num_batched_tokens: VLLM_DEFAULT_BATCHED_TOKENS,
            seqs: 1,
            model_dtype_bytes: None,
            block: VLLM_BLOCK,
        }
    }
}

/// A model's cache: its layers in order, the engine's rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvModel {
    /// Every layer with a cache, in order.
    pub layers: Vec<Layer>,
    /// Bytes of the dtype the engine runs the model in by default (the
    /// cache's with `auto`, and the state's): 2, since vLLM's `--dtype auto`
    /// runs a float32 checkpoint in 16 bits; llama.cpp's cache is f16.
    pub dtype_bytes: u64,
    /// The model's own context length (the engine's default).
    pub max_positions: Option<u64>,
    /// Query heads (tensor parallelism must divide them); `None`: not known.
    pub attention_heads: Option<u64>,
    /// The engine's rules.
    pub rules: Rules,
}

/// KV heads on one rank: vLLM's `ModelConfig.get_num_kv_heads`
/// (`max(1, total // tp)`: replicated when fewer than the ranks).
pub fn heads_per_rank(kv_heads: u64, tp: u64) -> u64 {
    (kv_heads / tp.max(1)).max(1)
}

impl KvModel {
    /// Bytes of the dtype the engine runs the model in.
    fn model_bytes(&self, o: &KvOptions) -> u64 {
        o.model_dtype_bytes.unwrap_or(self.dtype_bytes)
    }

    fn value_bytes(&self, o: &KvOptions) -> u64 {
        match o.dtype {
            CacheDtype::Auto => self.model_bytes(o),
            CacheDtype::Bytes(b) => b,
            CacheDtype::Fp8DsMla => 1,
        }
    }

    /// Bytes one token adds to `layer` on one rank (0 for a fixed state).
    pub fn token_bytes(&self, layer: &Layer, o: &KvOptions) -> u64 {
        let b = self.value_bytes(o);
        match *layer {
            Layer::Full {
                kv_heads,
                head_dim,
                head_dim_v,
            }
            | Layer::Sliding {
                kv_heads,
                head_dim,
                head_dim_v,
                ..
            } => heads_per_rank(kv_heads, o.tp) * (head_dim + head_dim_v) * b,
            Layer::Mla { .. } if o.dtype == CacheDtype::Fp8DsMla => 656,
            Layer::Mla { latent } => latent * b,
            Layer::State { .. } => 0,
        }
    }

    /// Tokens a layer holds for one request of `context` tokens.
    fn tokens_held(&self, layer: &Layer, o: &KvOptions, context: u64) -> u64 {
        match (*layer, self.rules) {
            (Layer::Sliding { window, .. }, Rules::Vllm) => {
                // SlidingWindowSpec.max_admission_blocks_per_request: the
                // window − 1 plus the tokens in flight, capped at the
                // context, plus one block (the window need not start a block).
                let block = o.block.max(1);
                (window.saturating_sub(1) + o.max_num_batched_tokens)
                    .min(context)
                    .div_ceil(block)
                    * block
                    + block
            }
            (Layer::Sliding { window, .. }, Rules::LlamaCpp) => {
                // llama_kv_cache_iswa: min(n_ctx, n_swa × n_seq + n_ubatch), padded to 256.
                context.min(window + LLAMA_UBATCH).div_ceil(256) * 256
            }
            (Layer::State { .. }, _) => 0,
            _ => context,
        }
    }

    /// vLLM's page of a hybrid model (attention beside linear/Mamba
    /// layers): the block raised until one attention page (block × an
    /// attention layer's bytes per token) holds a layer's state, and that
    /// page's bytes (`Platform._align_hybrid_block_size`: the state is
    /// padded to the page). `None`: not vLLM, or not hybrid.
    pub fn vllm_hybrid_page(&self, o: &KvOptions) -> Option<(u64, u64)> {
        if self.rules != Rules::Vllm {
            return None;
        }
        let attn = self
            .layers
            .iter()
            .find(|l| matches!(l, Layer::Full { .. } | Layer::Mla { .. }))?;
        let state = self
            .layers
            .iter()
            .find(|l| matches!(l, Layer::State { .. }))?;
        let (per_token, bytes) = (self.token_bytes(attn, o), self.one_state(state, o));
        if per_token == 0 || bytes == 0 {
            return None;
        }
        let block = o.block.max(1);
        let block = block * bytes.div_ceil(block * per_token);
        Some((block, block * per_token))
    }

    /// The block a request's attention pages are counted in: the hybrid
    /// page's, else `--block-size`'s.
    pub fn vllm_block(&self, o: &KvOptions) -> u64 {
        self.vllm_hybrid_page(o).map_or(o.block.max(1), |(b, _)| b)
    }

    /// Bytes of a layer's fixed state on one rank, for all counted
    /// sequences; under vLLM's rules for a hybrid model, each sequence holds
    /// [`VLLM_STATE_PAGES`] pages of [`Self::vllm_hybrid_page`].
    pub fn state_bytes(&self, layer: &Layer, o: &KvOptions) -> u64 {
        let one = self.one_state(layer, o);
        if one == 0 {
            return 0;
        }
        match self.vllm_hybrid_page(o) {
            Some((_, page)) => VLLM_STATE_PAGES * page * o.seqs.max(1),
            None => one * o.seqs.max(1),
        }
    }

    /// One sequence's state of `layer` on one rank, unpadded.
    fn one_state(&self, layer: &Layer, o: &KvOptions) -> u64 {
        match *layer {
            Layer::State {
                conv_dim,
                conv_len,
                heads,
                rows,
                cols,
            } => {
                let tp = o.tp.max(1);
                // MambaStateShapeCalculator.gated_delta_net_state_shape:
                // conv (conv_dim / tp, kernel − 1), temporal (heads / tp, rows, cols).
                ((conv_dim / tp) * conv_len + (heads / tp).max(1) * rows * cols)
                    * self.model_bytes(o)
            }
            _ => 0,
        }
    }

    /// Bytes the layers `range` hold on one rank for one request of
    /// `context` tokens (plus the fixed state of `o.seqs` sequences).
    pub fn bytes(&self, range: std::ops::Range<usize>, o: &KvOptions, context: u64) -> u64 {
        self.layers[range.clone()]
            .iter()
            .map(|l| {
                self.token_bytes(l, o) * self.tokens_held(l, o, context) + self.state_bytes(l, o)
            })
            .sum()
    }

    /// Bytes per token of the layers whose cache grows with the context
    /// (full attention and MLA), the whole model on one rank.
    pub fn bytes_per_token(&self, o: &KvOptions) -> u64 {
        self.layers
            .iter()
            .filter(|l| matches!(l, Layer::Full { .. } | Layer::Mla { .. }))
            .map(|l| self.token_bytes(l, o))
            .sum()
    }

    /// The layers of pipeline stage `stage` of `pp`: vLLM's `get_pp_indices`
    /// (an even share, the remainder to the stages before the last).
    pub fn stage(&self, stage: u64, pp: u64) -> std::ops::Range<usize> {
        let n = self.layers.len() as u64;
        let pp = pp.max(1);
        let mut parts = vec![n / pp; pp as usize];
        let rem = n % pp;
        for i in 2..rem + 2 {
            let idx = pp.saturating_sub(i) as usize;
            parts[idx] += 1;
        }
        let start: u64 = parts[..stage.min(pp - 1) as usize].iter().sum();
        let len = parts[stage.min(pp - 1) as usize];
        start as usize..(start + len) as usize
    }

    /// One line per layer kind in `range`: its count, its rule, its bytes
    /// per rank for `context` tokens.
    pub fn explain(
        &self,
        range: std::ops::Range<usize>,
        o: &KvOptions,
        context: u64,
    ) -> Vec<String> {
        let mut groups: Vec<(Layer, u64)> = Vec::new();
        for l in &self.layers[range] {
            match groups.iter_mut().find(|(g, _)| g == l) {
                Some((_, n)) => *n += 1,
                None => groups.push((*l, 1)),
            }
        }
        let b = self.value_bytes(o);
        let tp = o.tp.max(1);
        groups
            .iter()
            .map(|(l, n)| {
                let total = n * (self.token_bytes(l, o) * self.tokens_held(l, o, context)
                    + self.state_bytes(l, o));
                let heads = |h: u64| {
                    if tp > 1 {
                        format!("{} KV heads ({h} / tp {tp})", heads_per_rank(h, tp))
                    } else {
                        format!("{h} KV heads")
                    }
                };
                let what = match *l {
                    Layer::Full {
                        kv_heads,
                        head_dim,
                        head_dim_v,
                    } => format!(
                        "{} × ({head_dim} K + {head_dim_v} V) × {b} B = {} B/token × {context} tokens",
                        heads(kv_heads),
                        self.token_bytes(l, o)
                    ),
                    Layer::Sliding {
                        kv_heads,
                        head_dim,
                        head_dim_v,
                        window,
                    } => format!(
                        "window {window}: {} × ({head_dim} K + {head_dim_v} V) × {b} B = {} B/token × {} tokens held ({})",
                        heads(kv_heads),
                        self.token_bytes(l, o),
                        self.tokens_held(l, o, context),
                        match self.rules {
                            Rules::Vllm => format!(
                                "min(window − 1 + {} tokens in flight, context) + a block",
                                o.max_num_batched_tokens
                            ),
                            Rules::LlamaCpp => format!(
                                "min(context, window + {LLAMA_UBATCH} ubatch), padded to 256"
                            ),
                        }
                    ),
                    Layer::Mla { latent } => {
                        if o.dtype == CacheDtype::Fp8DsMla {
                            format!("one fp8_ds_mla latent, 656 B/token, on every rank × {context} tokens")
                        } else {
                            format!(
                                "one latent of {latent} × {b} B = {} B/token, whole on every rank × {context} tokens",
                                latent * b
                            )
                        }
                    }
                    Layer::State {
                        conv_dim,
                        conv_len,
                        heads,
                        rows,
                        cols,
                    } => match self.vllm_hybrid_page(o) {
                        Some((block, page)) => format!(
                            "fixed state (conv {}×{conv_len} + {} heads × {rows}×{cols}) × {} B = {} B, padded to one attention page ({block} tokens, {page} B), {VLLM_STATE_PAGES} pages × {} sequence(s) (prefix caching's align mode), whatever the context",
                            conv_dim / tp,
                            (heads / tp).max(1),
                            self.model_bytes(o),
                            self.one_state(l, o),
                            o.seqs.max(1)
                        ),
                        None => format!(
                            "fixed state (conv {}×{conv_len} + {} heads × {rows}×{cols}) × {} B × {} sequence(s), whatever the context",
                            conv_dim / tp,
                            (heads / tp).max(1),
                            self.model_bytes(o),
                            o.seqs.max(1)
                        ),
                    },
                };
                format!(
                    "{n} {} layer{}: {what} = {}",
                    l.kind(),
                    if *n == 1 { "" } else { "s" },
                    crate::units::format_bytes(total)
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(layers: Vec<Layer>) -> KvModel {
        KvModel {
            layers,
            dtype_bytes: 2,
            max_positions: Some(4096),
            attention_heads: Some(32),
            rules: Rules::Vllm,
        }
    }

    const FULL: Layer = Layer::Full {
        kv_heads: 8,
        head_dim: 128,
        head_dim_v: 128,
    };

    #[test]
    fn full_attention_splits_heads_and_replicates_below_one_per_rank() {
        let m = model(vec![FULL; 4]);
        let o = |tp| KvOptions {
            tp,
            ..KvOptions::default()
        };
        assert_eq!(m.bytes_per_token(&o(1)), 4 * 8 * 256 * 2);
        assert_eq!(m.bytes_per_token(&o(2)), 4 * 4 * 256 * 2);
        // 8 heads over 16 ranks: one head each, not half.
        assert_eq!(m.bytes_per_token(&o(16)), 4 * 256 * 2);
    }

    #[test]
    fn mla_is_whole_on_every_rank() {
        let m = model(vec![Layer::Mla { latent: 576 }; 2]);
        let o = KvOptions {
            tp: 4,
            ..KvOptions::default()
        };
        assert_eq!(m.bytes(0..2, &o, 10), 2 * 576 * 2 * 10);
        let fp8 = KvOptions {
            dtype: CacheDtype::Fp8DsMla,
            ..o
        };
        assert_eq!(m.bytes_per_token(&fp8), 2 * 656);
    }

    #[test]
    fn sliding_holds_window_plus_batch_capped_at_context() {
        let l = Layer::Sliding {
            kv_heads: 8,
            head_dim: 64,
            head_dim_v: 64,
            window: 128,
        };
        let m = model(vec![l]);
        let o = KvOptions::default();
        // min(127 + 8192, 131072) = 8319 → 520 blocks + 1 = 8336 tokens.
        assert_eq!(m.bytes(0..1, &o, 131072), 8336 * 8 * 128 * 2);
        // A short context: all of it (+ one block).
        assert_eq!(m.bytes(0..1, &o, 1000), (1008 + 16) * 8 * 128 * 2);
        assert_eq!(m.bytes_per_token(&o), 0);
    }

    #[test]
    fn state_is_per_sequence_and_split_by_tp() {
        // Qwen3-Next's gated delta net: 16 K heads, 32 V heads of 128, kernel 4.
        let l = Layer::State {
            conv_dim: 128 * 16 * 2 + 128 * 32,
            conv_len: 3,
            heads: 32,
            rows: 128,
            cols: 128,
        };
        let m = model(vec![l]);
        let o = KvOptions::default();
        assert_eq!(m.bytes(0..1, &o, 1), (8192 * 3 + 32 * 128 * 128) * 2);
        let o = KvOptions {
            tp: 2,
            seqs: 4,
            ..o
        };
        assert_eq!(
            m.bytes(0..1, &o, 99999),
            (4096 * 3 + 16 * 128 * 128) * 2 * 4
        );
    }

    #[test]
    fn pipeline_stages_follow_vllm() {
        // 61 layers over 4 stages: 15 each, the one left to the stage before the last.
        let m = model(vec![FULL; 61]);
        assert_eq!(m.stage(0, 4), 0..15);
        assert_eq!(m.stage(2, 4), 30..46);
        assert_eq!(m.stage(3, 4), 46..61);
    }

    #[test]
    fn cache_dtypes() {
        assert_eq!(CacheDtype::parse("fp8_e4m3").unwrap(), CacheDtype::Bytes(1));
        assert_eq!(CacheDtype::parse("auto").unwrap(), CacheDtype::Auto);
        let e = CacheDtype::parse("fp4x").unwrap_err();
        assert!(e.contains("--kv-cache-dtype fp4x"), "{e}");
    }
}
