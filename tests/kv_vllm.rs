//! halobox's KV bytes per token against what vLLM itself allocates: small
//! random-weight models (vLLM's `load_format="dummy"`, no tokenizer) of a
//! plain GQA Llama and a DeepSeek-V3 (MLA) shape, loaded by vLLM's CPU build
//! (scripts/vllm-venv.sh, /opt/halobox-vllm) with a KV cache of
//! `VLLM_CPU_KVCACHE_SPACE` GiB; vLLM logs how many tokens that holds
//! (`KV cache size: N tokens`), so its bytes per token are the space over
//! the tokens. They must agree within 5%. Needs the venv: a missing one fails.

use std::path::Path;
use std::process::Command;

const PYTHON: &str = "/opt/halobox-vllm/bin/python";
const SPACE_GIB: u64 = 1;

const LOAD: &str = r#"
import sys
from vllm import LLM

if __name__ == "__main__":
    LLM(model=sys.argv[1], load_format="dummy", skip_tokenizer_init=True,
        max_model_len=int(sys.argv[2]), enforce_eager=True, dtype="auto",
        tensor_parallel_size=1)
    print("loaded", flush=True)
"#;

/// vLLM's KV cache size in tokens, from its log.
fn tokens(log: &str) -> Option<u64> {
    let at = log.find("KV cache size: ")? + "KV cache size: ".len();
    let digits: String = log[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    digits.parse().ok()
}

/// Loads the model folder `dir` in vLLM; its bytes per token.
fn vllm_bytes_per_token(dir: &Path) -> u64 {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run scripts/vllm-venv.sh (vLLM's CPU build)"
    );
    let script = dir.join("load.py");
    std::fs::write(&script, LOAD).unwrap();
    let o = Command::new(PYTHON)
        .arg(&script)
        .arg(dir)
        .arg("1024")
        .env("VLLM_CPU_KVCACHE_SPACE", SPACE_GIB.to_string())
        .env("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        .env("HF_HUB_OFFLINE", "1")
        .env("VLLM_NO_USAGE_STATS", "1")
        .env("VLLM_LOGGING_LEVEL", "INFO")
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success(),
        "vLLM did not load {}:\n{log}",
        dir.display()
    );
    let t = tokens(&log)
        .unwrap_or_else(|| panic!("no `KV cache size: N tokens` in vLLM's log:\n{log}"));
    (SPACE_GIB << 30) / t
}

fn halobox_bytes_per_token(config: &serde_json::Value) -> u64 {
    halobox::model::kv::hf::from_config(config)
        .unwrap()
        .bytes_per_token(&halobox::model::kv::KvOptions::default())
}

fn compare(name: &str, config: serde_json::Value) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("config.json"),
        serde_json::to_vec_pretty(&config).unwrap(),
    )
    .unwrap();
    let ours = halobox_bytes_per_token(&config);
    let theirs = vllm_bytes_per_token(d.path());
    eprintln!("{name}: halobox {ours} B/token, vLLM {theirs} B/token");
    let off = (ours as f64 - theirs as f64).abs() / theirs as f64;
    assert!(
        off <= 0.05,
        "{name}: halobox counts {ours} B/token, vLLM allocates {theirs} ({:.1}% apart)",
        off * 100.0
    );
}

#[test]
fn plain_gqa_matches_vllm() {
    // A float32 checkpoint: vLLM's `--dtype auto` runs it in 16 bits, so
    // 2 layers × 2 KV heads × (64 + 64) × 2 B = 1024 B/token (halobox
    // counted 4 B until this test ran it).
    compare(
        "llama (GQA)",
        serde_json::json!({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "float32"
        }),
    );
}

#[test]
fn mla_matches_vllm() {
    // DeepSeek-V3's architecture, small, in bfloat16 (vLLM CPU's MoE
    // kernels refuse float32): 2 layers × (64 latent + 32 rope) × 2 B = 384 B/token.
    compare(
        "deepseek_v3 (MLA)",
        serde_json::json!({
            "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
            "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512,
            "moe_intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 4,
            "n_shared_experts": 1, "n_routed_experts": 4, "num_experts_per_tok": 2,
            "first_k_dense_replace": 1, "moe_layer_freq": 1,
            "kv_lora_rank": 64, "q_lora_rank": null, "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 32, "v_head_dim": 32,
            "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
            "scoring_func": "sigmoid", "routed_scaling_factor": 1.0, "norm_topk_prob": true,
            "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
            "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "bfloat16"
        }),
    );
}
