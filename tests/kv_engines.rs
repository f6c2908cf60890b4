//! halobox's KV bytes per token against what the engines themselves
//! allocate, read from their own logs by the parser `serve` uses
//! (`halobox::serve::kv_check`), counted by the code `plan` and `serve` use
//! (the memory arguments after `--`, `PlanKv`). Plan's figure must equal the
//! engine's within 2%.
//!
//! - vLLM's CPU build (scripts/vllm-venv.sh, /opt/halobox-vllm), started
//!   once per model, single node, no Ray: small random-weight models
//!   (`load_format="dummy"`, no tokenizer) of each attention kind it loads: a
//!   plain GQA Llama, DeepSeek-V3's MLA, Mistral's sliding window on every
//!   layer, Gemma 2's alternation of sliding and full layers, and
//!   Qwen3-Next's linear attention beside full attention, with a
//!   KV cache of `VLLM_CPU_KVCACHE_SPACE` GiB. The CPU build's blocks are 128
//!   tokens (`--block-size 128` given to both sides), which the sliding
//!   window's count depends on.
//! - llama.cpp (scripts/llama-cpp.sh, /opt/halobox-llama-cpp or
//!   `HALOBOX_LLAMA_CPP`): its
//!   `llama-completion` at `-lv 4` (the level halobox gives llama-server,
//!   whose cache lines are the same library's) on the real SmolLM2-135M GGUF
//!   and on a random-weight GGUF of another shape (scripts/serve/make-gguf.py).
//!
//! A missing engine fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use halobox::model::memory_args::{self, Flags};
use halobox::serve::kv_check::{EngineKv, PlanKv};

const PYTHON: &str = "/opt/halobox-vllm/bin/python";
const SPACE_GIB: u64 = 1;

/// llama.cpp's CPU build: `HALOBOX_LLAMA_CPP`, else /opt/halobox-llama-cpp
/// (as tests/common/serve.rs finds it).
fn llama_dir() -> PathBuf {
    std::env::var_os("HALOBOX_LLAMA_CPP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/halobox-llama-cpp"))
}

const LOAD: &str = r#"
import json, sys
from vllm import LLM

if __name__ == "__main__":
    LLM(model=sys.argv[1], load_format="dummy", skip_tokenizer_init=True,
        enforce_eager=True, dtype="auto", tensor_parallel_size=1,
        **json.loads(sys.argv[2]))
    print("loaded", flush=True)
"#;

/// Plan's and the engine's bytes per token must agree within 2%.
fn agree(name: &str, plan: f64, engine: &EngineKv) {
    let theirs = engine
        .bytes_per_token()
        .unwrap_or_else(|| panic!("{name}: the engine's log did not say its KV cache: {engine:?}"));
    eprintln!("{name}: plan {plan:.1} B/token, engine {theirs:.1} B/token ({engine:?})");
    let off = (plan - theirs).abs() / theirs;
    assert!(
        off <= 0.02,
        "{name}: plan counts {plan:.1} B/token, the engine allocates {theirs:.1} ({:.1}% apart)",
        off * 100.0
    );
}

/// Loads `config` in vLLM with the engine arguments `args` (`--name
/// value` pairs, as they would follow `serve … --`); the log as the engine
/// wrote it.
fn vllm_log(dir: &Path, args: &[(&str, u64)]) -> String {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run scripts/vllm-venv.sh (vLLM's CPU build)"
    );
    let script = dir.join("load.py");
    std::fs::write(&script, LOAD).unwrap();
    let kwargs: serde_json::Map<String, serde_json::Value> = args
        .iter()
        .map(|(k, v)| (k.trim_start_matches("--").replace('-', "_"), (*v).into()))
        .collect();
    let o = Command::new(PYTHON)
        .arg(&script)
        .arg(dir)
        .arg(serde_json::Value::Object(kwargs).to_string())
        .env("VLLM_CPU_KVCACHE_SPACE", SPACE_GIB.to_string())
        .env("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        .env("HF_HUB_OFFLINE", "1")
        .env("VLLM_NO_USAGE_STATS", "1")
        .env("VLLM_LOGGING_LEVEL", "INFO")
        // The engine core in this process: the same KV lines in the log,
        // without a second and third process importing torch and vLLM again
        // (12.7 CPU-seconds per model instead of 19.1).
        .env("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
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
    log
}

/// `config` loaded by vLLM with `args`, against plan's count with the same
/// arguments after `--`.
fn vllm(name: &str, config: serde_json::Value, args: &[(&str, u64)]) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("config.json"),
        serde_json::to_vec_pretty(&config).unwrap(),
    )
    .unwrap();
    let extra: Vec<String> = args
        .iter()
        .flat_map(|(k, v)| [k.to_string(), v.to_string()])
        .collect();
    let margs = memory_args::read(&Flags::default(), &extra).unwrap();
    let kv = halobox::model::weights::kv_from_config(&config).unwrap();
    let plan = PlanKv::of(&kv, &margs.kv_options().unwrap(), 1, margs.max_model_len);
    let engine = EngineKv::from_log(&vllm_log(d.path(), args));
    let context = engine.context.expect("vLLM names the context");
    assert_eq!(Some(context), margs.max_model_len);
    agree(name, plan.bytes_per_token(context), &engine);
    let verdict = halobox::serve::kv_check::judge(Some(&plan), &engine);
    assert_eq!(verdict.verdict, "agree", "{verdict:?}");
}

fn llama_shape(layers: u64, heads: u64, kv_heads: u64, window: Option<u64>) -> serde_json::Value {
    let mut c = serde_json::json!({
        "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": 64,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "bfloat16"
    });
    if let Some(w) = window {
        c["sliding_window"] = w.into();
    }
    c
}

#[test]
fn plain_gqa_matches_vllm() {
    // A float32 checkpoint: vLLM's `--dtype auto` runs it in 16 bits, so
    // 2 layers × 2 KV heads × (64 + 64) × 2 B = 1024 B/token; a context of
    // 1000 takes 8 whole blocks of 128: 1024 × 1024 B / 1000 per token.
    let mut c = llama_shape(2, 4, 2, None);
    c["architectures"] = serde_json::json!(["LlamaForCausalLM"]);
    c["model_type"] = "llama".into();
    c["torch_dtype"] = "float32".into();
    vllm(
        "llama (GQA)",
        c,
        &[("--max-model-len", 1000), ("--block-size", 128)],
    );
}

#[test]
fn mla_matches_vllm() {
    // DeepSeek-V3's architecture, small, in bfloat16 (vLLM CPU's MoE
    // kernels refuse float32): 2 layers × (64 latent + 32 rope) × 2 B = 384 B/token.
    vllm(
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
        &[("--max-model-len", 1024)],
    );
}

#[test]
fn sliding_window_matches_vllm() {
    // Mistral slides every layer: a request holds min(63 + 256 in flight,
    // 2048) = 319 tokens → 3 blocks of 128, + 1 = 512 tokens per layer, so
    // 2 × 512 B × 512 / 2048 = 256 B per token of context.
    let mut c = llama_shape(2, 4, 2, Some(64));
    c["architectures"] = serde_json::json!(["MistralForCausalLM"]);
    c["model_type"] = "mistral".into();
    vllm(
        "mistral (sliding window)",
        c,
        &[
            ("--max-model-len", 2048),
            ("--max-num-batched-tokens", 256),
            ("--block-size", 128),
        ],
    );
}

#[test]
fn sliding_and_full_layers_match_vllm() {
    // Gemma 2: layer 0 slides (512 tokens held, as above), layer 1 holds
    // all 2048: (512 + 2048) × 512 B / 2048 = 640 B per token of context.
    vllm(
        "gemma2 (sliding + full)",
        serde_json::json!({
            "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
            "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0, "sliding_window": 64, "query_pre_attn_scalar": 64,
            "attn_logit_softcapping": null, "final_logit_softcapping": null,
            "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true,
            "torch_dtype": "bfloat16"
        }),
        &[
            ("--max-model-len", 2048),
            ("--max-num-batched-tokens", 256),
            ("--block-size", 128),
        ],
    );
}

#[test]
fn linear_attention_matches_vllm() {
    // Qwen3-Next, small: 3 linear layers and 1 full one. Each linear
    // layer's state (conv 256 × 3 + 4 heads × 32 × 32, 9728 B in 16 bits;
    // the CPU build keeps it in float32) is padded to one attention page of
    // 128 tokens × 512 B, two pages a request (prefix caching's align
    // mode): (16 + 3 × 2) pages × 64 KiB / 2048 = 704 B per token of context.
    let mut c: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/model-configs/Qwen--Qwen3-Next-80B-A3B-Instruct.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let small = serde_json::json!({
        "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512,
        "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "num_experts": 4, "num_experts_per_tok": 2,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "linear_key_head_dim": 32, "linear_value_head_dim": 32,
        "linear_conv_kernel_dim": 4, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16", "full_attention_interval": 4
    });
    for (k, v) in small.as_object().unwrap() {
        c[k] = v.clone();
    }
    c.as_object_mut().unwrap().remove("layer_types");
    vllm(
        "qwen3_next (linear attention + full)",
        c,
        &[
            ("--max-model-len", 2048),
            ("--max-num-batched-tokens", 256),
            ("--block-size", 128),
        ],
    );
}

/// `gguf` loaded by llama.cpp with a context of `ctx`, against plan's
/// count of its header.
fn llama(name: &str, gguf: &Path, ctx: u64) {
    let bin = llama_dir().join("bin/llama-completion");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/llama-cpp.sh",
        bin.display()
    );
    let o = Command::new(&bin)
        .arg("-m")
        .arg(gguf)
        .args(["-c", &ctx.to_string(), "-n", "1", "-p", "hi", "-no-cnv"])
        .args(["-lv", "4", "-t", "1"])
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "llama.cpp did not load {name}:\n{log}");
    let kv = halobox::model::weights::read(gguf).unwrap().kv.unwrap();
    let plan = PlanKv::of(&kv, &Default::default(), 1, Some(ctx));
    let engine = EngineKv::from_log(&log);
    assert_eq!(engine.context, Some(ctx), "{log}");
    agree(name, plan.bytes_per_token(ctx), &engine);
}

#[test]
fn llama_cpp_gguf_matches() {
    // SmolLM2-135M: 30 layers × 3 KV heads × (64 + 64) × 2 B = 23040 B/token.
    llama(
        "SmolLM2-135M Q4_1 (llama.cpp)",
        &llama_dir().join("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        1024,
    );
    let d = tempfile::tempdir().unwrap();
    let gguf = d.path().join("random.gguf");
    let made = Command::new(llama_dir().join("venv/bin/python"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/serve/make-gguf.py"))
        .arg(&gguf)
        .args(["--layers", "3", "--hidden", "192", "--heads", "6"])
        .args(["--kv-heads", "2", "--ctx", "4096"])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "make-gguf.py: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    // 3 layers × 2 KV heads × (32 + 32) × 2 B = 768 B/token.
    llama("random Llama GGUF (llama.cpp)", &gguf, 2048);
}
