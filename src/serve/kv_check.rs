//! The engine's own KV-cache accounting against plan's (pure): what the
//! engine logs when it sizes its cache ([`EngineKv::read`]), its bytes per
//! token from that, plan's bytes per token for the same serve
//! ([`PlanKv::of`], the count `plan` and the fit check make), and the
//! verdict ([`judge`]): both figures, how far apart, and a warning past
//! [`WARN_OFF`].
//!
//! The lines, as the engines the tests run write them:
//! - vLLM 0.32 (`vllm/v1/core/kv_cache_utils.py` `update_kv_cache_capacity`):
//!   `CPU KV cache size: 16,384 tokens, Maximum concurrency for 1,024 tokens
//!   per request: 16.00x` (`GPU KV cache size` on a GPU); the space it sized
//!   from: `Available KV cache memory: 88.5 GiB` (`vllm/v1/worker/gpu_worker.py`)
//!   or, on the CPU build, `Explicitly set (1.0/31.25) GiB for KV cache on node
//!   0.` / `Auto set (…/…) GiB for KV cache …` (`vllm/v1/worker/cpu_worker.py`),
//!   in GiB rounded to 2 decimals;
//! - llama.cpp (llama-server at `-lv 4`, which halobox passes):
//!   `llama_context: n_ctx = 1024` then one `llama_kv_cache: size = 22.50 MiB
//!   (  1024 cells,  30 layers,  4/1 seqs), K (f16): …` per cache (two for a
//!   model with sliding-window layers), in MiB rounded to 2 decimals.
//!
//! The engine's bytes per token is its KV space over the tokens it holds
//! (vLLM: the `KV cache size`; llama.cpp: `n_ctx`), for one rank. Plan's is
//! the cache of one request of the engine's context on the first stage's
//! rank, over that context: for full attention and MLA the plain per-token
//! figure, for sliding-window layers their window's share as well.

use serde::{Deserialize, Serialize};

use crate::model::kv::{KvModel, KvOptions, Layer, Rules};

/// How far apart (a fraction of the engine's figure) the two figures may be
/// before the serve's log warns.
pub const WARN_OFF: f64 = 0.10;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// What the engine's log said about its KV cache.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineKv {
    /// Bytes of its KV cache on one rank (as rounded in the log).
    pub space_bytes: Option<u64>,
    /// Tokens that space holds (vLLM's `KV cache size`, llama.cpp's `n_ctx`).
    pub tokens: Option<u64>,
    /// Requests of `context` tokens that fit at once (vLLM's `Maximum
    /// concurrency`; llama.cpp: its cells over `n_ctx`).
    pub max_concurrency: Option<f64>,
    /// The context one request may have (vLLM's `for N tokens per
    /// request`, llama.cpp's `n_ctx`).
    pub context: Option<u64>,
    /// A worker's space seen before its start's `KV cache size` line (Ray
    /// passes the workers' lines on in any order with the engine's).
    #[serde(skip)]
    pending: Option<u64>,
}

/// The first number in `s` (digits with `,` thousands separators and an
/// optional fraction).
fn number(s: &str) -> Option<f64> {
    let s = s.trim_start_matches(|c: char| !c.is_ascii_digit());
    let n: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .filter(|c| *c != ',')
        .collect();
    n.trim_end_matches('.').parse().ok()
}

/// The number right after `key` in `line`.
fn after(line: &str, key: &str) -> Option<f64> {
    number(&line[line.find(key)? + key.len()..])
}

impl EngineKv {
    /// Takes what `line` says, if it is one of the lines above.
    pub fn read(&mut self, line: &str) {
        if line.contains("KV cache size: ") {
            // A start's size line: the first worker space seen before it is
            // its own (else the first one after it).
            self.space_bytes = self.pending.take();
            self.tokens = after(line, "KV cache size: ").map(|t| t as u64);
            self.context = after(line, "Maximum concurrency for ").map(|t| t as u64);
            self.max_concurrency = after(line, "tokens per request: ");
        } else if let Some(gib) = after(line, "Available KV cache memory: ") {
            self.space((gib * GIB).round() as u64);
        } else if line.contains("GiB for KV cache")
            && (line.contains("Explicitly set (") || line.contains("Auto set ("))
        {
            let at = line.find(" set (").expect("checked") + " set (".len();
            if let Some(g) = number(&line[at..]) {
                self.space((g * GIB).round() as u64);
            }
        } else if line.contains("llama_context: n_ctx ") {
            // A new context: its caches follow (and a restart's log starts again).
            let n = after(line, "n_ctx ").map(|n| n as u64);
            *self = EngineKv {
                tokens: n,
                context: n,
                ..EngineKv::default()
            };
        } else if line.contains("llama_kv_cache: size = ") {
            let mib = after(line, "size = ").unwrap_or(0.0);
            let bytes = self.space_bytes.unwrap_or(0) + (mib * MIB).round() as u64;
            self.space_bytes = Some(bytes);
            if let (Some(cells), Some(ctx)) = (after(line, "MiB ("), self.context)
                && self.max_concurrency.is_none()
                && ctx > 0
            {
                // The first cache is the full one: its cells over the context.
                self.max_concurrency = Some(cells / ctx as f64);
            }
        }
    }

    /// A worker's KV space: the first worker's of a start counts (the
    /// head's, the first pipeline stage's). Ray passes the workers' lines
    /// on before or after the engine's `KV cache size`: one that comes
    /// after it belongs to that start while the start has none; any other
    /// is kept for the next size line.
    fn space(&mut self, bytes: u64) {
        if self.tokens.is_some() && self.space_bytes.is_none() {
            self.space_bytes = Some(bytes);
        } else if self.pending.is_none() {
            self.pending = Some(bytes);
        }
    }

    /// All of `log`'s lines read.
    pub fn from_log(log: &str) -> EngineKv {
        let mut e = EngineKv::default();
        for l in log.lines() {
            e.read(l);
        }
        e
    }

    /// Its bytes per token: the space over the tokens (`None`: the log did
    /// not say both).
    pub fn bytes_per_token(&self) -> Option<f64> {
        let (s, t) = (self.space_bytes?, self.tokens?);
        (t > 0).then(|| s as f64 / t as f64)
    }
}

/// Plan's count for the serve, recorded when it starts: the model's cache
/// layer by layer and the options that count it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanKv {
    /// The layers of the first pipeline stage (the head's worker).
    pub layers: KvModel,
    /// The options (tensor-parallel size, cache dtype, tokens in flight).
    pub options: KvOptions,
    /// The context asked (`--max-model-len`, `-c`; else the model's own).
    pub context: Option<u64>,
}

impl PlanKv {
    /// Plan's count of `kv` for a split of `pp` stages with `o`.
    pub fn of(kv: &KvModel, o: &KvOptions, pp: u64, context: Option<u64>) -> PlanKv {
        let stage = kv.stage(0, pp.max(1));
        PlanKv {
            layers: KvModel {
                layers: kv.layers[stage].to_vec(),
                ..kv.clone()
            },
            options: *o,
            context: context.or(kv.max_positions),
        }
    }

    /// Bytes per token of one request of `context` tokens: its whole cache
    /// over `context` (for full attention and MLA, the per-token figure).
    /// vLLM gives a request whole blocks: its cache is counted for the
    /// context rounded up to a block.
    pub fn bytes_per_token(&self, context: u64) -> f64 {
        let n = self.layers.layers.len();
        if context == 0 {
            return self.layers.bytes_per_token(&self.options) as f64;
        }
        let held = match self.layers.rules {
            Rules::Vllm => {
                let block = self.layers.vllm_block(&self.options);
                context.div_ceil(block) * block
            }
            Rules::LlamaCpp => context,
        };
        self.layers.bytes(0..n, &self.options, held) as f64 / context as f64
    }

    /// Whether the layers' bytes per token depend on the context (sliding
    /// windows and fixed states do).
    pub fn depends_on_context(&self) -> bool {
        self.layers
            .layers
            .iter()
            .any(|l| !matches!(l, Layer::Full { .. } | Layer::Mla { .. }))
    }
}

/// Both figures and how far apart they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvCheck {
    /// The engine's bytes per token on one rank (`None`: its log did not say).
    pub engine_bytes_per_token: Option<f64>,
    /// Plan's, for the engine's context (`None`: not counted).
    pub plan_bytes_per_token: Option<f64>,
    /// The engine's KV space on one rank.
    pub engine_space_bytes: Option<u64>,
    /// The tokens it holds.
    pub engine_tokens: Option<u64>,
    /// Requests of `context` tokens at once, as the engine says.
    pub max_concurrency: Option<f64>,
    /// The context the figures are for.
    pub context: Option<u64>,
    /// |engine − plan| / engine.
    pub off: Option<f64>,
    /// `agree`, `differ` (past [`WARN_OFF`]) or `unknown`.
    pub verdict: String,
    /// Why a figure is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The engine's figures against plan's (`plan`: `None` when the model's
/// cache could not be counted).
pub fn judge(plan: Option<&PlanKv>, engine: &EngineKv) -> KvCheck {
    let context = engine.context.or(plan.and_then(|p| p.context));
    let engine_bpt = engine.bytes_per_token();
    let plan_bpt = plan.and_then(|p| match context {
        Some(c) => Some(p.bytes_per_token(c)),
        None if !p.depends_on_context() => Some(p.bytes_per_token(0)),
        None => None,
    });
    let off = match (engine_bpt, plan_bpt) {
        (Some(e), Some(p)) if e > 0.0 => Some((e - p).abs() / e),
        _ => None,
    };
    let why = match (engine_bpt, plan_bpt) {
        (None, _) => Some("the engine's log has not said its KV cache size (yet)".to_string()),
        (_, None) if plan.is_none() => {
            Some("plan could not count this model's KV cache".to_string())
        }
        (_, None) => Some("the context is not known".to_string()),
        _ => None,
    };
    KvCheck {
        engine_bytes_per_token: engine_bpt,
        plan_bytes_per_token: plan_bpt,
        engine_space_bytes: engine.space_bytes,
        engine_tokens: engine.tokens,
        max_concurrency: engine.max_concurrency,
        context,
        off,
        verdict: match off {
            Some(o) if o > WARN_OFF => "differ",
            Some(_) => "agree",
            None => "unknown",
        }
        .into(),
        why,
    }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The check in one line (after `KV cache: `).
pub fn render(c: &KvCheck) -> String {
    let fig = |b: Option<f64>| b.map_or("?".to_string(), |b| format!("{b:.0} B/token"));
    let mut s = format!(
        "engine {}, plan {}",
        fig(c.engine_bytes_per_token),
        fig(c.plan_bytes_per_token)
    );
    match (c.off, &c.why) {
        (Some(o), _) => s.push_str(&format!(
            " ({:.1}% apart: {})",
            o * 100.0,
            if c.verdict == "differ" {
                "they differ"
            } else {
                "they agree"
            }
        )),
        (None, Some(w)) => s.push_str(&format!(" ({w})")),
        (None, None) => {}
    }
    if let (Some(space), Some(tokens)) = (c.engine_space_bytes, c.engine_tokens) {
        s.push_str(&format!(
            "; {:.2} GiB hold {} tokens",
            space as f64 / GIB,
            thousands(tokens)
        ));
    }
    if let (Some(m), Some(ctx)) = (c.max_concurrency, c.context) {
        s.push_str(&format!(
            ", {m:.2} requests of {} tokens at once",
            thousands(ctx)
        ));
    }
    s
}

/// The serve log's warning when the figures differ by more than
/// [`WARN_OFF`]: both figures and what to suspect.
pub fn warning(c: &KvCheck) -> Option<String> {
    (c.verdict == "differ").then(|| {
        format!(
            "the engine counts {:.0} B of KV cache per token, halobox's plan {:.0} ({:.1}% apart, more than {:.0}%): plan's fit and concurrency figures are off for this model\n  hint: check the cache arguments after `--` (--kv-cache-dtype, --block-size, --dtype) and report the model's config.json",
            c.engine_bytes_per_token.unwrap_or(0.0),
            c.plan_bytes_per_token.unwrap_or(0.0),
            c.off.unwrap_or(0.0) * 100.0,
            WARN_OFF * 100.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv::hf;

    /// Lines of vLLM 0.32's CPU build (/opt/halobox-vllm), loading the
    /// 2-layer GQA Llama of tests/kv_engines.rs with VLLM_CPU_KVCACHE_SPACE=1
    /// and max_model_len 1024.
    const VLLM_CPU: &str = "\
(Worker pid=10991) INFO 12-06 03:51:34 [cpu_worker.py:260] Explicitly set (1.0/23.59) GiB for KV cache on node 0.
(EngineCore pid=10764) INFO 12-06 03:51:34 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 1,024 tokens per request: 1024.00x";

    /// llama-server (llama.cpp of /opt/halobox-llama-cpp) at `-lv 4` with
    /// SmolLM2-135M Q4_1 and `-c 1024`.
    const LLAMA: &str = "\
0.00.204.419 I llama_context: n_ctx                 = 1024
0.00.204.539 I llama_kv_cache:        CPU KV buffer size =    22.50 MiB
0.00.216.760 I llama_kv_cache: size =   22.50 MiB (  1024 cells,  30 layers,  4/1 seqs), K (f16):   11.25 MiB, V (f16):   11.25 MiB";

    fn gqa() -> KvModel {
        hf::from_config(&serde_json::json!({
            "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 2048, "torch_dtype": "float32"
        }))
        .unwrap()
    }

    #[test]
    fn vllm_cpu_lines() {
        let e = EngineKv::from_log(VLLM_CPU);
        assert_eq!(e.space_bytes, Some(1 << 30));
        assert_eq!(e.tokens, Some(1_048_576));
        assert_eq!(e.context, Some(1024));
        assert_eq!(e.max_concurrency, Some(1024.0));
        assert_eq!(e.bytes_per_token(), Some(1024.0));
        let plan = PlanKv::of(&gqa(), &KvOptions::default(), 1, Some(1024));
        let c = judge(Some(&plan), &e);
        assert_eq!(c.plan_bytes_per_token, Some(1024.0));
        assert_eq!((c.off, c.verdict.as_str()), (Some(0.0), "agree"));
        assert!(warning(&c).is_none());
        let line = render(&c);
        assert!(
            line.starts_with("engine 1024 B/token, plan 1024 B/token (0.0% apart: they agree); 1.00 GiB hold 1,048,576 tokens, 1024.00 requests of 1,024 tokens at once"),
            "{line}"
        );
    }

    #[test]
    fn the_first_worker_of_the_last_start_counts() {
        let mut e = EngineKv::default();
        e.read("(RayWorkerProc pid=1) INFO Available KV cache memory: 10.0 GiB");
        e.read("(RayWorkerProc pid=2, ip=10.0.0.2) INFO Available KV cache memory: 12.0 GiB");
        e.read("INFO GPU KV cache size: 10,000 tokens, Maximum concurrency for 1,000 tokens per request: 10.00x");
        assert_eq!(e.space_bytes, Some(10 << 30));
        // A restart in the same log: the last complete start counts until
        // the new one's size line.
        e.read("(RayWorkerProc pid=3) INFO Available KV cache memory: 20.0 GiB");
        assert_eq!((e.space_bytes, e.tokens), (Some(10 << 30), Some(10_000)));
        e.read("INFO GPU KV cache size: 20,000 tokens, Maximum concurrency for 1,000 tokens per request: 20.00x");
        assert_eq!((e.space_bytes, e.tokens), (Some(20 << 30), Some(20_000)));
    }

    /// Ray passes a worker's lines on after the engine's size line too (seen
    /// on the CPU build over two nodes, in color).
    #[test]
    fn a_workers_space_after_the_size_line_is_its_starts() {
        let mut e = EngineKv::default();
        e.read("(EngineCore pid=622) INFO 12-06 05:19:00 [kv_cache_utils.py:2327] CPU KV cache size: 1,398,016 tokens, Maximum concurrency for 512 tokens per request: 2730.50x");
        e.read("\u{1b}[36m(RayWorkerProc pid=660)\u{1b}[0m (Worker_TP0 pid=660) INFO 12-06 05:19:00 [cpu_worker.py:260] Explicitly set (1.0/23.59) GiB for KV cache on node 0.");
        e.read("\u{1b}[36m(RayWorkerProc pid=213, ip=10.77.175.2)\u{1b}[0m (Worker_TP1 pid=213) INFO 12-06 05:19:00 [cpu_worker.py:260] Explicitly set (1.0/23.59) GiB for KV cache on node 0.");
        assert_eq!((e.space_bytes, e.tokens), (Some(1 << 30), Some(1_398_016)));
        assert_eq!(e.bytes_per_token().map(|b| b.round()), Some(768.0));
    }

    #[test]
    fn vllm_gpu_lines() {
        let mut e = EngineKv::default();
        e.read("(RayWorkerProc pid=51, ip=10.0.0.2) INFO 12-01 [gpu_worker.py:760] Available KV cache memory: 88.5 GiB");
        e.read("INFO [kv_cache_utils.py:2328] GPU KV cache size: 1,450,000 tokens, Maximum concurrency for 32,768 tokens per request: 44.25x");
        assert_eq!(e.space_bytes, Some((88.5 * GIB) as u64));
        assert_eq!((e.tokens, e.context), (Some(1_450_000), Some(32_768)));
        assert_eq!(e.max_concurrency, Some(44.25));
    }

    #[test]
    fn llama_lines() {
        let e = EngineKv::from_log(LLAMA);
        assert_eq!(e.space_bytes, Some((22.5 * MIB) as u64));
        assert_eq!((e.tokens, e.context), (Some(1024), Some(1024)));
        // 30 layers × 3 KV heads × (64 + 64) × 2 B.
        assert_eq!(e.bytes_per_token(), Some(23040.0));
        // A second start in the same log counts afresh.
        let twice = EngineKv::from_log(&format!("{LLAMA}\n{LLAMA}"));
        assert_eq!(twice, e);
    }

    #[test]
    fn llama_swa_caches_add_up() {
        let mut e = EngineKv::default();
        e.read("I llama_context: n_ctx = 4096");
        e.read("I llama_kv_cache: size =   32.00 MiB (  4096 cells,   1 layers,  1/1 seqs), K (f16):   16.00 MiB, V (f16):   16.00 MiB");
        e.read("I llama_kv_cache: size =   40.00 MiB (  1024 cells,   5 layers,  1/1 seqs), K (f16):   20.00 MiB, V (f16):   20.00 MiB");
        assert_eq!(e.space_bytes, Some(72 << 20));
        assert_eq!(e.max_concurrency, Some(1.0));
        assert_eq!(e.bytes_per_token(), Some((72u64 << 20) as f64 / 4096.0));
    }

    #[test]
    fn far_apart_warns_with_both_figures() {
        let e = EngineKv::from_log(VLLM_CPU);
        let o = KvOptions {
            model_dtype_bytes: Some(4),
            ..KvOptions::default()
        };
        let c = judge(Some(&PlanKv::of(&gqa(), &o, 1, Some(1024))), &e);
        assert_eq!(c.verdict, "differ");
        let w = warning(&c).unwrap();
        assert!(
            w.contains("1024 B") && w.contains("2048 (100.0% apart"),
            "{w}"
        );
    }

    #[test]
    fn sliding_window_counts_its_window_at_the_engines_context() {
        let mut kv = gqa();
        kv.layers = vec![
            Layer::Sliding {
                kv_heads: 2,
                head_dim: 64,
                head_dim_v: 64,
                window: 64,
            };
            2
        ];
        assert_eq!(kv.rules, Rules::Vllm);
        let o = KvOptions {
            max_num_batched_tokens: 256,
            ..KvOptions::default()
        };
        let p = PlanKv::of(&kv, &o, 1, Some(999));
        assert!(p.depends_on_context());
        // min(63 + 256, 2048) → 320 tokens + a block = 336 per layer.
        let c = judge(
            Some(&p),
            &EngineKv {
                context: Some(2048),
                ..EngineKv::default()
            },
        );
        assert_eq!(c.plan_bytes_per_token, Some(336.0 * 512.0 * 2.0 / 2048.0));
        assert_eq!(c.verdict, "unknown");
        assert!(c.why.unwrap().contains("has not said"));
    }

    #[test]
    fn vllm_counts_whole_blocks_of_the_context() {
        // 1000 tokens take 8 blocks of 128 on vLLM's CPU build: 1024 × 1024 B over 1000.
        let o = KvOptions {
            block: 128,
            ..KvOptions::default()
        };
        let p = PlanKv::of(&gqa(), &o, 1, Some(1000));
        assert_eq!(p.bytes_per_token(1000), 1024.0 * 1024.0 / 1000.0);
        assert_eq!(p.bytes_per_token(1024), 1024.0);
    }

    #[test]
    fn pipeline_stages_count_the_first_stage() {
        let p = PlanKv::of(&gqa(), &KvOptions::default(), 2, None);
        assert_eq!(p.layers.layers.len(), 1);
        assert_eq!(p.context, Some(2048));
        assert_eq!(p.bytes_per_token(2048), 512.0);
    }
}
