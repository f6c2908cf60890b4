//! Where a model fits (pure): every split the nodes allow (vLLM's
//! tensor × pipeline parallel sizes, or llama.cpp's layers over the first
//! k nodes, shared by their memory), each judged by [`fit::judge`], the
//! longest context each fits, how many sequences of it fit at once, how
//! fast each decodes ([`super::speed`]), and the split to choose with the
//! reason: the fastest that fits, or the fewest nodes.

use clap::ValueEnum;
use serde::Serialize;

use super::fit::{self, Fit, FitRequest, ModelSize, NodeMemory, Split, Verdict};
use super::kv::Rules;
use super::speed::{self, Conditions, Estimate, Shape, SpeedModel};
use crate::units::format_bytes;

/// One split and its numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// `tp 2 × pp 1`, or `layers over 2 nodes`.
    pub split: String,
    /// Tensor-parallel size (1 for llama.cpp).
    pub tp: u32,
    /// Pipeline-parallel size (llama.cpp: the nodes holding layers).
    pub pp: u32,
    /// Nodes it uses.
    pub nodes: usize,
    /// llama.cpp's layer shares, one per node used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<Vec<f64>>,
    /// The largest share of the weights on one GPU.
    pub weights_bytes_per_gpu: u64,
    /// The largest KV cache on one GPU, for the context checked.
    pub kv_bytes_per_gpu: u64,
    /// KV bytes per token of the whole model before any split (the layers
    /// whose cache grows with the context).
    pub kv_bytes_per_token: u64,
    /// The longest context every node fits (`None`: no node's memory known).
    pub max_context_that_fits: Option<u64>,
    /// Every node used fits (perhaps closely).
    pub fits: bool,
    /// The worst node's verdict.
    pub verdict: Verdict,
    /// Sequences of the context checked whose KV cache fits at once on
    /// every node (`None`: memory unknown, or no cache that grows).
    pub max_concurrency: Option<u64>,
    /// Estimated decode tokens/s at the concurrency asked (`None`: no estimate).
    pub decode_tokens_per_s: Option<f64>,
    /// Estimated prompt tokens/s.
    pub prefill_tokens_per_s: Option<f64>,
    /// Estimated seconds to the first token of a 2048-token prompt.
    pub ttft_s: Option<f64>,
    /// The estimate's terms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<Estimate>,
    /// Each node's weights, KV cache, usable memory and verdict.
    pub per_node: Vec<super::fit::NodeFit>,
    /// The whole check (its text: [`fit::render`]).
    #[serde(skip)]
    pub fit: Fit,
}

/// Every split and the one chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    /// The splits, fewest nodes first.
    pub splits: Vec<Candidate>,
    /// Index of the chosen split in `splits`.
    pub chosen: Option<usize>,
    /// The next best split by the same rule.
    pub runner_up: Option<usize>,
    /// Why that one (or why none).
    pub why: String,
    /// The rule the choice followed.
    pub prefer: Prefer,
    /// The estimate's link, memory bandwidth and concurrency.
    pub conditions: Option<Conditions>,
    /// Splits left out and why (`tp 3: 64 attention heads do not divide by 3`).
    pub left_out: Vec<String>,
}

/// What the user fixed: the sizes given, the request template.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// `--tp` / `--tensor-parallel-size`.
    pub tp: Option<u32>,
    /// `--pipeline-parallel-size`.
    pub pp: Option<u32>,
    /// The context, utilization and cache options (its split is replaced).
    pub request: FitRequest,
    /// What the speed estimate needs (`None`: no estimate).
    pub speed: Option<(SpeedModel, Conditions)>,
    /// The rule to choose by.
    pub prefer: Prefer,
}

/// What `chosen` favours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Prefer {
    /// The highest estimated decode tokens/s among the splits that fit.
    #[default]
    Fastest,
    /// The fewest nodes that fit (tensor before pipeline parallel).
    FewestNodes,
}

/// How many sequences of `context` fit at once: each node's room after its
/// weights over one sequence's cache, the smallest.
fn concurrency(f: &Fit) -> Option<u64> {
    f.nodes
        .iter()
        .map(|n| {
            let room = n.usable_bytes?.checked_sub(n.weights_bytes)?;
            Some(room.checked_div(n.kv_bytes))
        })
        .collect::<Option<Vec<Option<u64>>>>()?
        .into_iter()
        .flatten()
        .min()
}

/// The longest context every used node (of known memory) fits, up to the
/// model's own length (or 16M tokens); `None` when no node's memory is known.
pub fn max_context(model: &ModelSize, req: &FitRequest, nodes: &[NodeMemory]) -> Option<u64> {
    let used = req.gpus(nodes.len()).min(nodes.len());
    let known: Vec<(usize, u64)> = nodes[..used]
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some((i, fit::usable(n.gtt, req.utilization)?)))
        .collect();
    if known.is_empty() {
        return None;
    }
    let fits = |c: u64| {
        known.iter().all(|&(i, u)| {
            let (w, k) = fit::node_share(model, req, i, Some(c));
            w + k <= u
        })
    };
    let cap = model
        .kv
        .as_ref()
        .and_then(|k| k.max_positions)
        .unwrap_or(1 << 24);
    if model.kv.is_none() {
        return Some(if fits(0) { cap } else { 0 });
    }
    if fits(cap) {
        return Some(cap);
    }
    if !fits(1) {
        return Some(0);
    }
    let (mut lo, mut hi) = (1, cap);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

fn candidate(
    model: &ModelSize,
    req: FitRequest,
    nodes: &[NodeMemory],
    used: usize,
    speed: Option<&(SpeedModel, Conditions)>,
) -> Candidate {
    let (split, tp, pp, shares) = match &req.split {
        Split::Tensor { tp, pp } => (format!("tp {tp} × pp {pp}"), *tp, *pp, None),
        Split::Layers { shares } => (
            format!(
                "layers over {used} node{}",
                if used == 1 { "" } else { "s" }
            ),
            1,
            used as u32,
            Some(shares.clone()),
        ),
    };
    let f = fit::judge(model, &req, &nodes[..used]);
    let per_token = model.kv.as_ref().map_or(0, |k| k.bytes_per_token(&req.kv));
    let verdict = f.verdict();
    let shape = match &req.split {
        Split::Tensor { tp, pp } => Shape::Tensor { tp: *tp, pp: *pp },
        Split::Layers { shares } => Shape::Layers(shares.clone()),
    };
    let est = speed.map(|(m, c)| speed::estimate(m, &shape, c));
    Candidate {
        split,
        tp,
        pp,
        nodes: used,
        shares,
        weights_bytes_per_gpu: f.nodes.iter().map(|n| n.weights_bytes).max().unwrap_or(0),
        kv_bytes_per_gpu: f.nodes.iter().map(|n| n.kv_bytes).max().unwrap_or(0),
        kv_bytes_per_token: per_token,
        max_context_that_fits: max_context(model, &req, &nodes[..used]),
        fits: matches!(verdict, Verdict::Fits | Verdict::Close),
        verdict,
        max_concurrency: concurrency(&f),
        decode_tokens_per_s: est.as_ref().map(|e| e.decode_tokens_per_s),
        prefill_tokens_per_s: est.as_ref().and_then(|e| e.prefill_tokens_per_s),
        ttft_s: est.as_ref().and_then(|e| e.ttft_s),
        speed: est,
        per_node: f.nodes.clone(),
        fit: f,
    }
}

/// llama.cpp's shares of the layers over `nodes`: by usable memory, equal
/// when a node's is unknown.
pub fn shares_by_memory(nodes: &[NodeMemory], utilization: f64) -> Vec<f64> {
    let mem: Option<Vec<u64>> = nodes
        .iter()
        .map(|n| fit::usable(n.gtt, utilization))
        .collect();
    match mem {
        Some(m) if m.iter().sum::<u64>() > 0 => {
            let total = m.iter().sum::<u64>() as f64;
            m.iter().map(|b| *b as f64 / total).collect()
        }
        _ => vec![1.0 / nodes.len().max(1) as f64; nodes.len()],
    }
}

/// Every split of `model` over `nodes` (head first), and the choice.
pub fn place(model: &ModelSize, ask: &Ask, nodes: &[NodeMemory]) -> Placement {
    let n = nodes.len();
    let rules = model.kv.as_ref().map_or(Rules::Vllm, |k| k.rules);
    let mut splits = Vec::new();
    let mut left_out = Vec::new();
    if rules == Rules::LlamaCpp {
        for used in 1..=n {
            let req = FitRequest {
                split: Split::Layers {
                    shares: shares_by_memory(&nodes[..used], ask.request.utilization),
                },
                ..ask.request.clone()
            };
            splits.push(candidate(model, req, nodes, used, ask.speed.as_ref()));
        }
    } else {
        let heads = model.kv.as_ref().and_then(|k| k.attention_heads);
        let layers = model.kv.as_ref().map(|k| k.layers.len() as u64);
        for tp in 1..=n as u32 {
            for pp in 1..=(n as u32 / tp) {
                if ask.tp.is_some_and(|t| t != tp) || ask.pp.is_some_and(|p| p != pp) {
                    continue;
                }
                if let Some(h) = heads.filter(|h| h % u64::from(tp) != 0) {
                    if pp == 1 {
                        left_out.push(format!(
                            "tp {tp}: the model's {h} attention heads do not divide by {tp} (vLLM refuses it)"
                        ));
                    }
                    continue;
                }
                if layers.is_some_and(|l| u64::from(pp) > l) {
                    continue;
                }
                let req = FitRequest {
                    split: Split::Tensor { tp, pp },
                    ..ask.request.clone()
                };
                splits.push(candidate(
                    model,
                    req,
                    nodes,
                    (tp * pp) as usize,
                    ask.speed.as_ref(),
                ));
            }
        }
        splits.sort_by_key(|c| (c.nodes, c.pp));
    }
    let (chosen, runner_up, why) = choose(&splits, ask.prefer);
    Placement {
        splits,
        chosen,
        runner_up,
        why,
        prefer: ask.prefer,
        conditions: ask.speed.as_ref().map(|s| s.1.clone()),
        left_out,
    }
}

/// `a` before `b` under `prefer`: the faster (when both are estimated),
/// else the fewer nodes, tensor- before pipeline-parallel at the same count
/// (vLLM's default; pipeline stages idle without many requests), then the
/// longer context.
fn order(a: &Candidate, b: &Candidate, prefer: Prefer) -> std::cmp::Ordering {
    use std::cmp::Reverse;
    let fewest = (a.nodes, a.pp, Reverse(a.max_context_that_fits)).cmp(&(
        b.nodes,
        b.pp,
        Reverse(b.max_context_that_fits),
    ));
    match (prefer, a.decode_tokens_per_s, b.decode_tokens_per_s) {
        (Prefer::Fastest, Some(x), Some(y)) => y.total_cmp(&x).then(fewest),
        _ => fewest,
    }
}

/// The split to use and the runner-up: among the splits that fit with
/// room, else those that fit closely, the first by [`order`].
fn choose(splits: &[Candidate], prefer: Prefer) -> (Option<usize>, Option<usize>, String) {
    let mut ranked: Vec<usize> = Vec::new();
    for want in [Verdict::Fits, Verdict::Close] {
        let mut these: Vec<usize> = (0..splits.len())
            .filter(|&i| splits[i].verdict == want)
            .collect();
        these.sort_by(|&a, &b| order(&splits[a], &splits[b], prefer));
        ranked.extend(these);
    }
    if let Some(&i) = ranked.first() {
        let c = &splits[i];
        let runner = ranked.get(1).copied();
        let room = if c.verdict == Verdict::Fits {
            "fits with room"
        } else {
            "fits, but with less than 10% to spare (no split fits with more)"
        };
        let why = match (prefer, c.decode_tokens_per_s) {
            (Prefer::Fastest, Some(x)) => format!(
                "{}: the fastest split that {room}, about {x:.1} tokens/s decode; {}",
                c.split,
                match runner.map(|r| &splits[r]) {
                    Some(r) => match r.decode_tokens_per_s {
                        Some(y) => format!(
                            "runner-up {} at {y:.1} tokens/s ({:.0}% slower)",
                            r.split,
                            (1.0 - y / x) * 100.0
                        ),
                        None => format!("runner-up {}", r.split),
                    },
                    None => "no other split fits".into(),
                }
            ),
            _ => format!(
                "{}: it {room} on the fewest nodes ({}); fewer nodes keep the network out of every step, and at the same count tensor parallel keeps every GPU busy where pipeline stages wait",
                c.split, c.nodes
            ),
        };
        return (Some(i), runner, why);
    }
    if splits.iter().all(|c| c.verdict == Verdict::Unknown) && !splits.is_empty() {
        return (
            None,
            None,
            "no node's GPU memory is known: nothing to choose by (give --nodes N --gtt SIZE, or run it on the head)".into(),
        );
    }
    let nearest = splits
        .iter()
        .filter_map(|c| {
            let short = c
                .fit
                .nodes
                .iter()
                .filter_map(|n| Some(n.need_bytes().saturating_sub(n.usable_bytes?)))
                .max()?;
            Some((short, c))
        })
        .min_by_key(|(s, _)| *s);
    (
        None,
        None,
        match nearest {
            Some((short, c)) => format!(
                "no split fits: the nearest is {}, {} short on its fullest node (a shorter --max-model-len, --kv-cache-dtype fp8, a quantized model or more nodes)",
                c.split,
                format_bytes(short)
            ),
            None => "no split is possible on these nodes".into(),
        },
    )
}

/// The placement as text: one block per split, node by node, then the choice.
pub fn render(p: &Placement, verbose: bool) -> String {
    let mut s = String::new();
    if let Some(c) = p.splits.first() {
        let f = &c.fit;
        s.push_str(&format!(
            "model: weights {} ({}); KV cache {} B/token for the whole model{}\n",
            format_bytes(f.model.weights_bytes),
            f.model.source,
            c.kv_bytes_per_token,
            match f.context {
                Some(ctx) => format!(", checked for {ctx} tokens"),
                None => String::new(),
            }
        ));
    }
    if let Some(c) = &p.conditions {
        let bw: Vec<String> = c.bandwidth_gbs.iter().map(|b| format!("{b:.0}")).collect();
        s.push_str(&format!(
            "speed estimate: link {}, memory bandwidth {} GB/s (node by node), {} sequence(s) decoding at once; chosen by: {}\n",
            match &c.measured {
                Some(m) => format!("{} as measured: {}", c.link, m.source),
                None => c.link.to_string(),
            },
            bw.join(" / "),
            c.concurrency,
            match p.prefer {
                Prefer::Fastest => "fastest",
                Prefer::FewestNodes => "fewest nodes",
            }
        ));
    }
    for (i, c) in p.splits.iter().enumerate() {
        let word = match c.verdict {
            Verdict::Fits => "fits",
            Verdict::Close => "close",
            Verdict::TooBig => "does not fit",
            Verdict::Unknown => "unknown",
        };
        s.push_str(&format!(
            "\n{}{}: {word}; longest context that fits: {}\n",
            if p.chosen == Some(i) { "* " } else { "  " },
            c.split,
            match c.max_context_that_fits {
                Some(0) => "none".to_string(),
                Some(n) => n.to_string(),
                None => "unknown".to_string(),
            }
        ));
        s.push_str(&speed_line(p, c));
        if let Some(sh) = &c.shares {
            s.push_str(&format!(
                "    llama.cpp --tensor-split: {}\n",
                sh.iter()
                    .map(|x| format!("{:.0}%", x * 100.0))
                    .collect::<Vec<_>>()
                    .join(" / ")
            ));
        }
        for n in &c.fit.nodes {
            let left = match n.usable_bytes {
                Some(u) if u >= n.need_bytes() => {
                    format!("{} left", format_bytes(u - n.need_bytes()))
                }
                Some(u) => format!("{} short", format_bytes(n.need_bytes() - u)),
                None => format!(
                    "usable unknown ({})",
                    n.unknown.as_deref().unwrap_or("no GTT figures")
                ),
            };
            s.push_str(&format!(
                "    node {}: weights {} + KV {} = {}{}; {left}\n",
                n.name,
                format_bytes(n.weights_bytes),
                format_bytes(n.kv_bytes),
                format_bytes(n.need_bytes()),
                n.usable_bytes
                    .map(|u| format!(" of {} usable", format_bytes(u)))
                    .unwrap_or_default(),
            ));
        }
        if verbose || p.chosen == Some(i) {
            for t in c.speed.iter().flat_map(|e| &e.terms) {
                s.push_str(&format!("    speed: {t}\n"));
            }
            for l in fit::render(&c.fit).lines().skip(1) {
                if l.starts_with("  KV") || l.starts_with("    ") {
                    s.push_str(&format!("  {l}\n"));
                }
            }
        }
    }
    if !p.left_out.is_empty() {
        s.push('\n');
    }
    for l in &p.left_out {
        s.push_str(&format!("  left out: {l}\n"));
    }
    s.push_str(&format!(
        "\n{}: {}\n",
        if p.chosen.is_some() {
            "chosen"
        } else {
            "none chosen"
        },
        p.why
    ));
    s
}

/// A split's estimate and its concurrency, as one line (empty without either).
fn speed_line(p: &Placement, c: &Candidate) -> String {
    let mut parts = Vec::new();
    if let (Some(d), Some(cond)) = (c.decode_tokens_per_s, &p.conditions) {
        parts.push(if cond.concurrency > 1 {
            format!(
                "est. decode {d:.1} tokens/s over {} sequences",
                cond.concurrency
            )
        } else {
            format!("est. decode {d:.1} tokens/s")
        });
    }
    if let (Some(pre), Some(t)) = (c.prefill_tokens_per_s, c.ttft_s) {
        parts.push(format!(
            "prefill {pre:.0} tokens/s (first token of a {}-token prompt in {t:.2} s)",
            speed::TTFT_PROMPT_TOKENS
        ));
    }
    if let (Some(n), Some(ctx)) = (c.max_concurrency, c.fit.context) {
        parts.push(format!("{n} sequence(s) of {ctx} tokens fit at once"));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!("    {}\n", parts.join("; "))
}

/// `n` nodes of `gtt` bytes each with nothing in use: hardware being
/// planned (`--nodes N --gtt SIZE`).
pub fn hypothetical(n: u32, gtt: u64) -> Vec<NodeMemory> {
    (1..=n)
        .map(|i| NodeMemory {
            name: format!("node{i}"),
            gtt: Some((gtt, 0)),
            unknown: None,
        })
        .collect()
}

/// A size such as `128G`, `96GiB`, `120000M` or a byte count: K/M/G/T are
/// powers of 1024 (GTT is reported in bytes of those).
pub fn parse_size(v: &str) -> Result<u64, String> {
    let t = v.trim();
    let digits = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{v}: not a size (e.g. 128G, 96GiB, 110000M)"))?;
    let mul: u64 = match unit.trim().trim_end_matches("iB").trim_end_matches('B') {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "T" | "t" => 1 << 40,
        _ => return Err(format!("{v}: not a size (e.g. 128G, 96GiB, 110000M)")),
    };
    Ok((n * mul as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv::{KvModel, KvOptions, Layer};

    const GIB: u64 = 1 << 30;

    fn model(weights: u64, kv: Option<KvModel>) -> ModelSize {
        ModelSize {
            weights_bytes: weights,
            source: "test".into(),
            kv,
            kv_unknown: None,
        }
    }

    fn gqa(layers: usize, heads: u64, max: u64) -> KvModel {
        KvModel {
            layers: vec![
                Layer::Full {
                    kv_heads: 8,
                    head_dim: 128,
                    head_dim_v: 128,
                };
                layers
            ],
            dtype_bytes: 2,
            max_positions: Some(max),
            attention_heads: Some(heads),
            rules: Rules::Vllm,
        }
    }

    fn nodes(n: usize, gib: u64) -> Vec<NodeMemory> {
        (0..n)
            .map(|i| NodeMemory {
                name: format!("n{i}"),
                gtt: Some((gib * GIB, 0)),
                unknown: None,
            })
            .collect()
    }

    fn ask(len: Option<u64>) -> Ask {
        Ask {
            tp: None,
            pp: None,
            request: FitRequest {
                split: Split::Tensor { tp: 1, pp: 1 },
                max_model_len: len,
                utilization: 1.0,
                kv: KvOptions::default(),
            },
            speed: None,
            prefer: Prefer::FewestNodes,
        }
    }

    #[test]
    fn the_fewest_nodes_that_fit_with_room_are_chosen() {
        // 48 layers × 8 × 256 × 2 B = 196608 B/token; 150 GiB of weights.
        let m = model(150 * GIB, Some(gqa(48, 64, 131072)));
        let p = place(&m, &ask(Some(32768)), &nodes(4, 100));
        let names: Vec<&str> = p.splits.iter().map(|c| c.split.as_str()).collect();
        assert_eq!(
            names,
            [
                "tp 1 × pp 1",
                "tp 2 × pp 1",
                "tp 1 × pp 2",
                "tp 1 × pp 3",
                "tp 4 × pp 1",
                "tp 2 × pp 2",
                "tp 1 × pp 4"
            ]
        );
        // Two nodes: 75 GiB + 3 GiB (tp 2) of 100: fits; tp before pp.
        let c = &p.splits[p.chosen.unwrap()];
        assert_eq!(c.split, "tp 2 × pp 1");
        assert_eq!(c.kv_bytes_per_token, 196608);
        assert_eq!(c.kv_bytes_per_gpu, 3 * GIB);
        // (100 − 75) GiB / 98304 B per token per GPU, capped at 131072.
        assert_eq!(c.max_context_that_fits, Some(131072));
        assert!(!p.splits[0].fits);
        assert_eq!(p.splits[0].max_context_that_fits, Some(0));
        assert!(p.why.contains("fewest nodes"), "{}", p.why);
        let text = render(&p, false);
        assert!(text.contains("* tp 2 × pp 1: fits"), "{text}");
        assert!(
            text.contains(
                "node n1: weights 75 GiB + KV 3 GiB = 78 GiB of 100 GiB usable; 22 GiB left"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_longest_context_is_where_the_kv_cache_meets_the_memory() {
        // 1 node of 64 GiB, 60 GiB of weights: 4 GiB / 196608 B = 21845 tokens.
        let m = model(60 * GIB, Some(gqa(48, 64, 1 << 20)));
        let p = place(&m, &ask(None), &nodes(1, 64));
        assert_eq!(p.splits[0].max_context_that_fits, Some(4 * GIB / 196608));
        assert!(p.chosen.is_none());
        assert!(
            p.why.contains("no split fits: the nearest is tp 1 × pp 1"),
            "{}",
            p.why
        );
    }

    #[test]
    fn tp_must_divide_the_heads() {
        let m = model(GIB, Some(gqa(4, 64, 4096)));
        let p = place(&m, &ask(None), &nodes(3, 100));
        assert!(p.splits.iter().all(|c| c.tp != 3));
        assert!(p.left_out[0].contains("64 attention heads do not divide by 3"));
    }

    #[test]
    fn the_fastest_split_is_chosen_with_its_runner_up_and_concurrency() {
        use crate::model::speed::{Conditions, Link, SpeedModel};
        // A dense 60 GiB model on two nodes of 100 GiB: one node fits, but
        // two halve the reads.
        let m = model(60 * GIB, Some(gqa(48, 64, 131072)));
        let speed = SpeedModel {
            active_bytes: 60 * GIB,
            active_params: Some(30_000_000_000),
            layers: 48,
            hidden: 8192,
        };
        let conditions = Conditions {
            link: Link::Roce,
            measured: None,
            bandwidth_gbs: vec![215.0, 215.0],
            concurrency: 1,
        };
        let mut a = ask(Some(32768));
        a.speed = Some((speed, conditions));
        a.prefer = Prefer::Fastest;
        let p = place(&m, &a, &nodes(2, 100));
        let c = &p.splits[p.chosen.unwrap()];
        assert_eq!(c.split, "tp 2 × pp 1");
        let r = &p.splits[p.runner_up.unwrap()];
        assert_eq!(r.split, "tp 1 × pp 1");
        assert!(c.decode_tokens_per_s.unwrap() > 1.5 * r.decode_tokens_per_s.unwrap());
        assert!(
            p.why.contains("the fastest split that fits with room"),
            "{}",
            p.why
        );
        assert!(p.why.contains("runner-up tp 1 × pp 1 at"), "{}", p.why);
        // One node: (100 − 60) GiB over 6 GiB for a sequence of 32768 tokens.
        assert_eq!(r.max_concurrency, Some(6));
        // tp 2: (100 − 30) GiB over 3 GiB.
        assert_eq!(c.max_concurrency, Some(23));
        a.prefer = Prefer::FewestNodes;
        let p = place(&m, &a, &nodes(2, 100));
        assert_eq!(p.splits[p.chosen.unwrap()].split, "tp 1 × pp 1");
        assert!(render(&p, false).contains("est. decode"));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("128G").unwrap(), 128 * GIB);
        assert_eq!(parse_size("96GiB").unwrap(), 96 * GIB);
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
    }
}
