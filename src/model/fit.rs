//! The fit check (pure): a model's weights split over the nodes plus its KV
//! cache for the context length, against each node's usable GPU memory
//! (GTT total minus what is in use, times `--gpu-memory-utilization`).
//! [`judge`] gives a verdict per node with the numbers it came from;
//! [`render`] prints the arithmetic.

use serde::Serialize;

use super::kv::{KvModel, KvOptions};
use crate::units::format_bytes;

/// A node is "close" when it needs more than this share of its usable memory.
pub const CLOSE: f64 = 0.9;

/// What the model's files say about its size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelSize {
    /// Bytes of all tensors.
    pub weights_bytes: u64,
    /// Where that came from (`3 safetensors files`).
    pub source: String,
    /// The cache, layer by layer (`None`: unknown, see `kv_unknown`).
    pub kv: Option<KvModel>,
    /// Why the cache is not known.
    pub kv_unknown: Option<String>,
}

/// How the engine spreads the model over the GPUs (one per node).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Split {
    /// vLLM: every tensor cut in `tp` pieces, the layers in `pp` stages.
    Tensor {
        /// Tensor-parallel size.
        tp: u32,
        /// Pipeline-parallel size.
        pp: u32,
    },
    /// llama.cpp: whole layers per node, in these shares (one per node).
    Layers {
        /// Each node's share of the layers (summing to 1).
        shares: Vec<f64>,
    },
}

/// One node's GPU memory, as its facts say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeMemory {
    /// The node's name in messages.
    pub name: String,
    /// GTT total and in use, in bytes (`None`: not known, see `unknown`).
    pub gtt: Option<(u64, u64)>,
    /// Why `gtt` is not known.
    pub unknown: Option<String>,
}

/// What is checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitRequest {
    /// The split.
    pub split: Split,
    /// `--max-model-len` (`None`: the model's own context length).
    pub max_model_len: Option<u64>,
    /// `--gpu-memory-utilization`.
    pub utilization: f64,
    /// The cache's dtype, batched tokens and sequences (its `tp` is the split's).
    pub kv: KvOptions,
}

/// A node's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// It fits with room.
    Fits,
    /// Its memory is not known: not judged.
    Unknown,
    /// It fits, using more than 90% of what is usable.
    Close,
    /// It does not fit.
    TooBig,
}

/// One node's arithmetic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeFit {
    /// The node.
    pub name: String,
    /// Its share of the weights.
    pub weights_bytes: u64,
    /// Its KV cache.
    pub kv_bytes: u64,
    /// GTT total and in use.
    pub gtt: Option<(u64, u64)>,
    /// (total − used) × utilization.
    pub usable_bytes: Option<u64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why the memory is not known.
    pub unknown: Option<String>,
}

impl NodeFit {
    /// Weights plus KV cache.
    pub fn need_bytes(&self) -> u64 {
        self.weights_bytes + self.kv_bytes
    }
}

/// The whole check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    /// What was checked.
    pub request: FitRequest,
    /// The model's size.
    pub model: ModelSize,
    /// The context length the KV cache is counted for.
    pub context: Option<u64>,
    /// Per node.
    pub nodes: Vec<NodeFit>,
}

impl Fit {
    /// The worst node's verdict.
    pub fn verdict(&self) -> Verdict {
        self.nodes
            .iter()
            .map(|n| n.verdict)
            .max()
            .unwrap_or(Verdict::Unknown)
    }

    /// The nodes the plan does not fit on.
    pub fn too_big(&self) -> Vec<&NodeFit> {
        self.nodes
            .iter()
            .filter(|n| n.verdict == Verdict::TooBig)
            .collect()
    }
}

fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

impl FitRequest {
    /// The cache options with the split's tensor-parallel size.
    pub fn kv_options(&self) -> KvOptions {
        match self.split {
            // Ray's executor has no async scheduling: one batch in flight
            // per pipeline stage (`VllmConfig.max_concurrent_batches`).
            Split::Tensor { tp, pp } => KvOptions {
                tp: u64::from(tp).max(1),
                max_num_batched_tokens: self.kv.max_num_batched_tokens * u64::from(pp).max(1),
                ..self.kv
            },
            Split::Layers { .. } => KvOptions { tp: 1, ..self.kv },
        }
    }

    /// GPUs the split uses.
    pub fn gpus(&self, nodes: usize) -> usize {
        match &self.split {
            Split::Tensor { tp, pp } => (u64::from(*tp).max(1) * u64::from(*pp).max(1))
                .try_into()
                .unwrap_or(usize::MAX),
            Split::Layers { .. } => nodes,
        }
    }
}

/// Node `i`'s share of the weights and its KV cache for `context` tokens
/// (vLLM: rank `i` is stage `i / tp`; a node past tp × pp is judged by the
/// largest stage, since Ray may place a worker there).
pub fn node_share(
    model: &ModelSize,
    req: &FitRequest,
    i: usize,
    context: Option<u64>,
) -> (u64, u64) {
    let o = req.kv_options();
    match &req.split {
        Split::Tensor { tp, pp } => {
            let (tp, pp) = (u64::from(*tp).max(1), u64::from(*pp).max(1));
            let kv = match (&model.kv, context) {
                (Some(k), Some(c)) if (i as u64) < tp * pp => {
                    k.bytes(k.stage(i as u64 / tp, pp), &o, c)
                }
                // A node past tp × pp: Ray may place any stage's worker there.
                (Some(k), Some(c)) => (0..pp)
                    .map(|s| k.bytes(k.stage(s, pp), &o, c))
                    .max()
                    .unwrap_or(0),
                _ => 0,
            };
            (div_ceil(model.weights_bytes, tp * pp), kv)
        }
        Split::Layers { shares } => {
            let s = shares.get(i).copied().unwrap_or(0.0).clamp(0.0, 1.0);
            let kv = match (&model.kv, context) {
                (Some(k), Some(c)) => k.bytes(0..k.layers.len(), &o, c),
                _ => 0,
            };
            let part = |b: u64| (b as f64 * s).ceil() as u64;
            (part(model.weights_bytes), part(kv))
        }
    }
}

/// A node's usable bytes: (GTT total − in use) × utilization.
pub fn usable(gtt: Option<(u64, u64)>, utilization: f64) -> Option<u64> {
    gtt.map(|(total, used)| (total.saturating_sub(used) as f64 * utilization) as u64)
}

/// Each node's share of weights and KV cache, and its verdict.
pub fn judge(model: &ModelSize, req: &FitRequest, nodes: &[NodeMemory]) -> Fit {
    let context = req
        .max_model_len
        .or(model.kv.as_ref().and_then(|k| k.max_positions));
    let nodes = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let (weights_bytes, kv_bytes) = node_share(model, req, i, context);
            let usable_bytes = usable(n.gtt, req.utilization);
            let need = weights_bytes + kv_bytes;
            let verdict = match usable_bytes {
                None => Verdict::Unknown,
                Some(u) if need > u => Verdict::TooBig,
                Some(u) if need as f64 > u as f64 * CLOSE => Verdict::Close,
                Some(_) => Verdict::Fits,
            };
            NodeFit {
                name: n.name.clone(),
                weights_bytes,
                kv_bytes,
                gtt: n.gtt,
                usable_bytes,
                verdict,
                unknown: n.unknown.clone(),
            }
        })
        .collect();
    Fit {
        request: req.clone(),
        model: model.clone(),
        context,
        nodes,
    }
}

/// The arithmetic, one line per step and per node.
pub fn render(fit: &Fit) -> String {
    let req = &fit.request;
    let mut s = String::new();
    let (split, per) = match &req.split {
        Split::Tensor { tp, pp } => (
            format!("tensor-parallel {tp} × pipeline-parallel {pp}"),
            u64::from(*tp).max(1) * u64::from(*pp).max(1),
        ),
        Split::Layers { .. } => ("layers split over the nodes".to_string(), 1),
    };
    s.push_str(&format!(
        "fit check ({split}, --gpu-memory-utilization {:.2}):\n",
        req.utilization
    ));
    match &req.split {
        Split::Tensor { .. } => s.push_str(&format!(
            "  weights {} ({}) / {per} = {} per GPU\n",
            format_bytes(fit.model.weights_bytes),
            fit.model.source,
            format_bytes(div_ceil(fit.model.weights_bytes, per)),
        )),
        Split::Layers { shares } => s.push_str(&format!(
            "  weights {} ({}) split by layers: {}\n",
            format_bytes(fit.model.weights_bytes),
            fit.model.source,
            shares
                .iter()
                .map(|x| format!("{:.0}%", x * 100.0))
                .collect::<Vec<_>>()
                .join(" / ")
        )),
    }
    let o = req.kv_options();
    match (&fit.model.kv, fit.context, &req.split) {
        (Some(k), Some(c), Split::Tensor { tp, pp }) => {
            let pp = u64::from(*pp).max(1);
            for stage in 0..pp {
                let r = k.stage(stage, pp);
                s.push_str(&format!(
                    "  KV cache per GPU{}, one request of {c} tokens (the whole model's layers: {} B/token on each GPU of tp {tp}): {}\n",
                    if pp > 1 {
                        format!(" of pipeline stage {} (layers {}–{})", stage + 1, r.start, r.end.saturating_sub(1))
                    } else {
                        String::new()
                    },
                    k.bytes_per_token(&o),
                    format_bytes(k.bytes(r.clone(), &o, c)),
                ));
                for l in k.explain(r, &o, c) {
                    s.push_str(&format!("    {l}\n"));
                }
            }
        }
        (Some(k), Some(c), Split::Layers { .. }) => {
            s.push_str(&format!(
                "  KV cache {} for {c} tokens, split as the layers:\n",
                format_bytes(k.bytes(0..k.layers.len(), &o, c)),
            ));
            for l in k.explain(0..k.layers.len(), &o, c) {
                s.push_str(&format!("    {l}\n"));
            }
        }
        (None, _, _) => s.push_str(&format!(
            "  KV cache not counted: {} (only the weights are checked)\n",
            fit.model
                .kv_unknown
                .as_deref()
                .unwrap_or("the model's config gives no layers/heads")
        )),
        (Some(_), None, _) => s.push_str(
            "  KV cache not counted: no --max-model-len and the model's config gives no context length\n",
        ),
    }
    for n in &fit.nodes {
        let need = format!(
            "{} + {} = {}",
            format_bytes(n.weights_bytes),
            format_bytes(n.kv_bytes),
            format_bytes(n.need_bytes())
        );
        let (Some((total, used)), Some(usable)) = (n.gtt, n.usable_bytes) else {
            s.push_str(&format!(
                "  node {}: needs {need}; its GPU memory is unknown ({}): not checked\n",
                n.name,
                n.unknown.as_deref().unwrap_or("no GTT figures")
            ));
            continue;
        };
        let pct = if usable == 0 {
            f64::INFINITY
        } else {
            n.need_bytes() as f64 * 100.0 / usable as f64
        };
        let word = match n.verdict {
            Verdict::TooBig => format!(
                "DOES NOT FIT ({pct:.0}%, {} short)",
                format_bytes(n.need_bytes() - usable)
            ),
            Verdict::Close => format!("fits, but close ({pct:.0}% of usable)"),
            _ => format!("fits ({pct:.0}% of usable)"),
        };
        s.push_str(&format!(
            "  node {}: needs {need}; usable (GTT {} − {} in use) × {:.2} = {}: {word}\n",
            n.name,
            format_bytes(total),
            format_bytes(used),
            req.utilization,
            format_bytes(usable),
        ));
    }
    s
}

/// Why a plan that does not fit is refused, with the fixes (and the
/// arithmetic when `arithmetic`); `None` when it fits (or is not known).
pub fn refusal(fit: &Fit, arithmetic: bool) -> Option<String> {
    let bad = fit.too_big();
    if bad.is_empty() {
        return None;
    }
    let names: Vec<&str> = bad.iter().map(|n| n.name.as_str()).collect();
    let shorter = match (fit.context, &fit.model.kv) {
        (Some(c), Some(_)) if c > 1024 => format!(", a shorter --max-model-len (now {c})"),
        _ => String::new(),
    };
    Some(format!(
        "the model does not fit in the GPU memory of node {}{}\n{}  hint: serve over more nodes (--tp), a smaller or quantized model{shorter}, or free GPU memory there (another engine running? `halobox serve status`)",
        names.join(", "),
        if arithmetic {
            ":"
        } else {
            " (the arithmetic is above)"
        },
        if arithmetic {
            render(fit)
        } else {
            String::new()
        },
    ))
}

/// The loud warning `serve --no-fit-check` prints over the refusal `e`.
pub fn overridden(e: &str) -> String {
    format!(
        "WARNING: --no-fit-check: starting anyway, though {e}\nWARNING: unified memory that runs out swaps or freezes the whole host, and the OOM killer may take vLLM's workers on any node"
    )
}

/// The warning for nodes that fit with less than 10% to spare.
pub fn warning(fit: &Fit) -> Option<String> {
    let close: Vec<&str> = fit
        .nodes
        .iter()
        .filter(|n| n.verdict == Verdict::Close)
        .map(|n| n.name.as_str())
        .collect();
    (!close.is_empty()).then(|| {
        format!(
            "the model fits node {} with less than 10% of its usable GPU memory to spare: unified memory that runs short swaps the whole host (a shorter --max-model-len leaves room)",
            close.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv::{Layer, Rules};

    const GIB: u64 = 1 << 30;

    fn qwen_like() -> ModelSize {
        ModelSize {
            weights_bytes: 60 * GIB,
            source: "8 safetensors files".into(),
            kv: Some(KvModel {
                layers: vec![
                    Layer::Full {
                        kv_heads: 8,
                        head_dim: 128,
                        head_dim_v: 128,
                    };
                    48
                ],
                dtype_bytes: 2,
                max_positions: Some(40960),
                attention_heads: Some(64),
                rules: Rules::Vllm,
            }),
            kv_unknown: None,
        }
    }

    fn node(name: &str, total_gib: u64, used_gib: u64) -> NodeMemory {
        NodeMemory {
            name: name.into(),
            gtt: Some((total_gib * GIB, used_gib * GIB)),
            unknown: None,
        }
    }

    fn tensor(tp: u32, len: Option<u64>) -> FitRequest {
        FitRequest {
            split: Split::Tensor { tp, pp: 1 },
            max_model_len: len,
            utilization: 0.9,
            kv: KvOptions::default(),
        }
    }

    #[test]
    fn weights_and_kv_divide_by_tp() {
        let f = judge(
            &qwen_like(),
            &tensor(2, Some(32768)),
            &[node("a", 124, 1), node("b", 124, 1)],
        );
        // 2 × 48 × (8/2) × 128 × 2 B × 32768 = 3 GiB per GPU.
        assert_eq!(f.nodes[0].kv_bytes, 3 * GIB);
        assert_eq!(f.nodes[0].weights_bytes, 30 * GIB);
        assert_eq!(f.verdict(), Verdict::Fits);
        assert!(refusal(&f, true).is_none() && warning(&f).is_none());
        let text = render(&f);
        assert!(
            text.contains("weights 60 GiB (8 safetensors files) / 2 = 30 GiB per GPU"),
            "{text}"
        );
        assert!(text.contains("KV cache per GPU, one request of 32768 tokens (the whole model's layers: 98304 B/token on each GPU of tp 2): 3 GiB"), "{text}");
        assert!(
            text.contains("48 full-attention layers: 4 KV heads (8 / tp 2) × (128 K + 128 V) × 2 B = 2048 B/token × 32768 tokens = 3 GiB"),
            "{text}"
        );
        assert!(text.contains("node a: needs 30 GiB + 3 GiB = 33 GiB; usable (GTT 124 GiB − 1 GiB in use) × 0.90 = 110.7 GiB: fits (30% of usable)"), "{text}");
    }

    #[test]
    fn the_models_own_context_is_the_default() {
        let f = judge(&qwen_like(), &tensor(1, None), &[node("a", 124, 0)]);
        assert_eq!(f.context, Some(40960));
        assert_eq!(f.nodes[0].kv_bytes, 2 * 48 * 8 * 128 * 2 * 40960);
    }

    #[test]
    fn too_big_on_one_node_is_refused_with_its_arithmetic() {
        // One node with much in use: (64 − 40) × 0.9 = 21.6 GiB < 30 + 3.
        let f = judge(
            &qwen_like(),
            &tensor(2, Some(32768)),
            &[node("a", 124, 1), node("b", 64, 40)],
        );
        assert_eq!(f.nodes[0].verdict, Verdict::Fits);
        assert_eq!(f.nodes[1].verdict, Verdict::TooBig);
        assert_eq!(f.verdict(), Verdict::TooBig);
        let e = refusal(&f, true).unwrap();
        assert!(
            e.contains("does not fit in the GPU memory of node b"),
            "{e}"
        );
        assert!(
            e.contains("× 0.90 = 21.6 GiB: DOES NOT FIT (153%, 11.4 GiB short)"),
            "{e}"
        );
        assert!(
            e.contains("hint:") && e.contains("--max-model-len (now 32768)"),
            "{e}"
        );
    }

    #[test]
    fn within_ten_percent_warns() {
        // usable = 40 × 0.9 = 36 GiB; need 33 GiB = 92%.
        let f = judge(&qwen_like(), &tensor(2, Some(32768)), &[node("a", 40, 0)]);
        assert_eq!(f.verdict(), Verdict::Close);
        assert!(refusal(&f, true).is_none());
        assert!(warning(&f).unwrap().contains("node a"));
        assert!(render(&f).contains("fits, but close (92% of usable)"));
    }

    #[test]
    fn kv_heads_fewer_than_tp_are_replicated() {
        let mut m = qwen_like();
        for l in &mut m.kv.as_mut().unwrap().layers {
            *l = Layer::Full {
                kv_heads: 2,
                head_dim: 128,
                head_dim_v: 128,
            };
        }
        let f = judge(&m, &tensor(4, Some(1024)), &[node("a", 124, 0)]);
        assert_eq!(f.nodes[0].kv_bytes, 2 * 48 * 128 * 2 * 1024);
    }

    #[test]
    fn pipeline_stages_hold_their_layers_and_an_idle_node_the_largest() {
        let mut m = qwen_like();
        m.kv.as_mut().unwrap().layers.truncate(47);
        let req = FitRequest {
            split: Split::Tensor { tp: 1, pp: 2 },
            ..tensor(1, Some(1024))
        };
        let f = judge(
            &m,
            &req,
            &[node("a", 124, 0), node("b", 124, 0), node("c", 124, 0)],
        );
        // 47 layers over 2 stages: 24 on the first (the one left over goes
        // before the last), 23 on the second; c may get either.
        let per_layer = 8 * 256 * 2 * 1024;
        assert_eq!(f.nodes[0].kv_bytes, 24 * per_layer);
        assert_eq!(f.nodes[1].kv_bytes, 23 * per_layer);
        assert_eq!(f.nodes[2].kv_bytes, 24 * per_layer);
    }

    #[test]
    fn sliding_layers_hold_one_batch_in_flight_per_pipeline_stage() {
        let layer = Layer::Sliding {
            kv_heads: 8,
            head_dim: 64,
            head_dim_v: 64,
            window: 128,
        };
        let mut m = qwen_like();
        m.kv.as_mut().unwrap().layers = vec![layer; 2];
        let req = |pp| FitRequest {
            split: Split::Tensor { tp: 1, pp },
            ..tensor(1, Some(131072))
        };
        // pp 1: min(127 + 8192, context) → 520 blocks + 1 = 8336 tokens.
        let f = judge(&m, &req(1), &[node("a", 124, 0)]);
        assert_eq!(f.nodes[0].kv_bytes, 2 * 8336 * 8 * 128 * 2);
        // pp 2 (Ray: no async scheduling, one batch per stage): 127 + 16384
        // → 1032 blocks + 1 = 16528 tokens, one layer per stage.
        let f = judge(&m, &req(2), &[node("a", 124, 0), node("b", 124, 0)]);
        assert_eq!(f.nodes[0].kv_bytes, 16528 * 8 * 128 * 2);
    }

    #[test]
    fn unknown_memory_is_not_judged() {
        let f = judge(
            &qwen_like(),
            &tensor(1, Some(1024)),
            &[NodeMemory {
                name: "c".into(),
                gtt: None,
                unknown: Some("no AMD GPU".into()),
            }],
        );
        assert_eq!(f.verdict(), Verdict::Unknown);
        assert!(refusal(&f, true).is_none());
        assert!(render(&f).contains("node c: needs 60 GiB + 192 MiB = 60.2 GiB; its GPU memory is unknown (no AMD GPU): not checked"));
    }

    #[test]
    fn layers_split_by_shares() {
        let req = FitRequest {
            split: Split::Layers {
                shares: vec![0.75, 0.25],
            },
            max_model_len: Some(4096),
            utilization: 0.9,
            kv: KvOptions::default(),
        };
        let f = judge(&qwen_like(), &req, &[node("a", 124, 0), node("b", 17, 0)]);
        assert_eq!(f.nodes[0].weights_bytes, 45 * GIB);
        assert_eq!(f.nodes[1].weights_bytes, 15 * GIB);
        // 2 × 48 × 8 × 128 × 2 × 4096 = 768 MiB, a quarter on b.
        assert_eq!(f.nodes[1].kv_bytes, 192 << 20);
        assert_eq!(f.nodes[1].verdict, Verdict::Close);
        assert!(render(&f).contains("split by layers: 75% / 25%"));
    }

    #[test]
    fn no_kv_shape_checks_the_weights() {
        let mut m = qwen_like();
        m.kv = None;
        let f = judge(&m, &tensor(1, Some(4096)), &[node("a", 124, 0)]);
        assert_eq!(f.nodes[0].kv_bytes, 0);
        assert!(render(&f).contains("KV cache not counted"));
    }
}
