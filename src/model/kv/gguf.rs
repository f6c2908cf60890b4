//! A GGUF header's layers as llama.cpp caches them
//! (`src/llama-kv-cache.cpp`, `src/llama-hparams.cpp`): per layer
//! `head_count_kv` (a number, or one per layer, 0 for a layer without
//! attention), `key_length`/`value_length`, a key-only cache for MLA
//! (`key_length_mla` set: deepseek2), and sliding-window layers from
//! `attention.sliding_window` with the arch's pattern (`set_swa_pattern` in
//! `src/llama-model.cpp`).

use super::{KvModel, Layer, Rules};

/// The metadata the count reads: numbers and number arrays by key.
pub trait Metadata {
    /// A number (u8..u64, i8..i64, bool).
    fn num(&self, key: &str) -> Option<u64>;
    /// An array of numbers or bools.
    fn array(&self, key: &str) -> Option<&[u64]>;
}

/// llama.cpp's SWA pattern for an arch whose GGUF does not carry one:
/// `il % n < n − 1` slides.
fn default_pattern(arch: &str) -> Option<u64> {
    match arch {
        "gemma2" | "gpt-oss" => Some(2),
        "cohere2" => Some(4),
        "gemma3" => Some(6),
        _ => None,
    }
}

/// The model's cache (f16, llama.cpp's default) from a GGUF of `arch`;
/// `None` when the header gives no attention shape.
pub fn from_metadata(arch: &str, m: &dyn Metadata) -> Option<KvModel> {
    let key = |k: &str| format!("{arch}.{k}");
    let n = m.num(&key("block_count"))?;
    let heads = m.num(&key("attention.head_count"))?;
    let kv_of = |il: u64| -> u64 {
        match m.array(&key("attention.head_count_kv")) {
            Some(a) => a.get(il as usize).copied().unwrap_or(0),
            None => m.num(&key("attention.head_count_kv")).unwrap_or(heads),
        }
    };
    let k_len = m
        .num(&key("attention.key_length"))
        .or_else(|| Some(m.num(&key("embedding_length"))? / heads.max(1)))?;
    let v_len = m.num(&key("attention.value_length")).unwrap_or(k_len);
    let mla = m.num(&key("attention.key_length_mla")).is_some();
    let window = m.num(&key("attention.sliding_window")).filter(|w| *w > 0);
    let swa = |il: u64| -> bool {
        if window.is_none() {
            return false;
        }
        if let Some(a) = m.array(&key("attention.sliding_window_pattern")) {
            return a.get(il as usize).is_some_and(|v| *v != 0);
        }
        match m
            .num(&key("attention.sliding_window_pattern"))
            .or_else(|| default_pattern(arch))
        {
            Some(0) | None => true,
            Some(p) => il % p < p - 1,
        }
    };
    let layers = (0..n)
        .filter_map(|il| {
            let kv = kv_of(il);
            if kv == 0 {
                return None;
            }
            Some(match window {
                _ if mla => Layer::Mla { latent: kv * k_len },
                Some(window) if swa(il) => Layer::Sliding {
                    kv_heads: kv,
                    head_dim: k_len,
                    head_dim_v: v_len,
                    window,
                },
                _ => Layer::Full {
                    kv_heads: kv,
                    head_dim: k_len,
                    head_dim_v: v_len,
                },
            })
        })
        .collect();
    Some(KvModel {
        layers,
        dtype_bytes: 2,
        max_positions: m.num(&key("context_length")),
        attention_heads: Some(heads),
        rules: Rules::LlamaCpp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv::KvOptions;
    use std::collections::HashMap;

    struct Meta(HashMap<String, u64>, HashMap<String, Vec<u64>>);

    impl Metadata for Meta {
        fn num(&self, key: &str) -> Option<u64> {
            self.0.get(key).copied()
        }
        fn array(&self, key: &str) -> Option<&[u64]> {
            self.1.get(key).map(Vec::as_slice)
        }
    }

    fn meta(nums: &[(&str, u64)], arrays: &[(&str, Vec<u64>)]) -> Meta {
        Meta(
            nums.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            arrays
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn deepseek2_mla_caches_the_key_only() {
        // DeepSeek-V3 as convert_hf_to_gguf.py writes it since the MLA cache:
        // one KV head of 576 (512 latent + 64 rope), value 512, *_mla set.
        let m = meta(
            &[
                ("deepseek2.block_count", 61),
                ("deepseek2.attention.head_count", 128),
                ("deepseek2.attention.head_count_kv", 1),
                ("deepseek2.attention.key_length", 576),
                ("deepseek2.attention.value_length", 512),
                ("deepseek2.attention.key_length_mla", 192),
                ("deepseek2.attention.value_length_mla", 128),
                ("deepseek2.context_length", 163840),
            ],
            &[],
        );
        let kv = from_metadata("deepseek2", &m).unwrap();
        assert_eq!(kv.bytes_per_token(&KvOptions::default()), 61 * 576 * 2);
    }

    #[test]
    fn per_layer_heads_and_swa() {
        let m = meta(
            &[
                ("gemma3.block_count", 6),
                ("gemma3.attention.head_count", 8),
                ("gemma3.attention.key_length", 256),
                ("gemma3.attention.sliding_window", 1024),
            ],
            &[("gemma3.attention.head_count_kv", vec![4, 4, 4, 4, 4, 2])],
        );
        let kv = from_metadata("gemma3", &m).unwrap();
        // Layers 0–4 slide; layer 5 is global with 2 KV heads.
        assert_eq!(kv.bytes_per_token(&KvOptions::default()), 2 * 512 * 2);
        // A sliding layer holds min(ctx, 1024 + 512) padded to 256 = 1536 cells.
        let o = KvOptions::default();
        assert_eq!(kv.bytes(0..1, &o, 32768), 1536 * 4 * 512 * 2);
        assert_eq!(kv.bytes(0..1, &o, 1000), 1024 * 4 * 512 * 2);
    }

    #[test]
    fn layers_without_attention_hold_nothing() {
        let m = meta(
            &[
                ("x.block_count", 4),
                ("x.attention.head_count", 8),
                ("x.embedding_length", 1024),
            ],
            &[("x.attention.head_count_kv", vec![0, 0, 0, 2])],
        );
        let kv = from_metadata("x", &m).unwrap();
        assert_eq!(kv.layers.len(), 1);
        assert_eq!(kv.bytes_per_token(&KvOptions::default()), 2 * 256 * 2);
    }
}
