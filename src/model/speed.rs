//! How fast a split decodes (pure): each node reads its share of the
//! weights one token touches ([`super::active`]) at its memory bandwidth,
//! pays a fixed cost per layer it holds (kernel launches, synchronisation),
//! and the link adds its cost per token: two all-reduces per layer for
//! tensor parallel, one hop per stage boundary for pipeline or llama.cpp
//! RPC splits. Stages run one after another (one batch at a time);
//! `concurrency` sequences share each weight read. Prefill is
//! compute-bound. Every constant below names its source.

use clap::ValueEnum;
use serde::Serialize;

use super::active::Active;

/// Strix Halo's memory bandwidth as decode sees it, in GB/s: GPU streaming
/// reads measure about 210–240 GB/s of the 256 GB/s LPDDR5X-8000 peak
/// (rocm_bandwidth_test, memtest_vulkan, a HIP probe; FIELD-NOTES §9), and
/// dense-model decode tracks weights × tokens/s ≈ 200–235 GB/s.
pub const STRIX_HALO_BANDWIDTH_GBS: f64 = 215.0;

/// The fixed cost of one layer per decoded step, in seconds: calibrated
/// on one published figure, gpt-oss-120b (MXFP4, about 61 GiB, 5.1B
/// active parameters) decoding at 50–57 tokens/s on one Strix Halo with
/// llama.cpp (tg128): 2.9 GB / 215 GB/s = 13.3 ms of reads, and the
/// remaining ~5.5 ms over 36 layers is about 150–160 µs a layer.
pub const LAYER_COST_S: f64 = 160e-6;

/// The Radeon 8060S's peak FP16 throughput (40 CUs at 2.9 GHz, AMD's
/// published 59.4 TFLOPS with WMMA).
pub const PEAK_FLOPS: f64 = 59.4e12;

/// The share of [`PEAK_FLOPS`] prefill reaches: an assumption (not
/// calibrated), the usual 30–40% of peak for GEMMs of this shape on RDNA.
pub const PREFILL_EFFICIENCY: f64 = 0.35;

/// The prompt length time to first token is estimated for.
pub const TTFT_PROMPT_TOKENS: u64 = 2048;

/// The link between the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// RoCE v2 (RDMA over Ethernet).
    Roce,
    /// Plain TCP sockets over Ethernet.
    Tcp,
    /// A USB4/Thunderbolt cable with TCP sockets on thunderbolt-net (what
    /// halobox's `usb4` transport sets up).
    Usb4,
    /// A USB4/Thunderbolt cable with an RDMA provider (an RCCL net plugin
    /// over USB4, such as OdinLink's).
    #[serde(rename = "usb4-rdma")]
    Usb4Rdma,
}

/// What one link costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkCost {
    /// One small all-reduce (a token's activations), in seconds.
    pub allreduce_s: f64,
    /// One point-to-point hop between pipeline stages, in seconds.
    pub hop_s: f64,
    /// Bulk bandwidth in bytes per second.
    pub bytes_per_s: f64,
}

impl Link {
    /// The link's costs (public figures, FIELD-NOTES §9):
    /// - RoCE: a 20 KB RCCL all-reduce among 4 nodes on 25 GbE takes
    ///   85–105 µs; point to point about 5 µs (E810); 25 Gb/s.
    /// - TCP: a 24 KB RCCL all-reduce between two nodes over TCP on a
    ///   Thunderbolt bond takes about 286 µs; a kernel TCP round trip
    ///   about 50 µs; 10 Gb/s.
    /// - USB4 over TCP: the same 286 µs all-reduce (that bond was USB4);
    ///   ping-pong about 22 µs; bulk 8–19 Gb/s (16 taken).
    /// - USB4 with an RDMA provider: a 24 KB all-reduce about 100 µs; the
    ///   same ping-pong and bulk.
    pub fn cost(self) -> LinkCost {
        match self {
            Link::Roce => LinkCost {
                allreduce_s: 95e-6,
                hop_s: 5e-6,
                bytes_per_s: 25e9 / 8.0,
            },
            Link::Tcp => LinkCost {
                allreduce_s: 286e-6,
                hop_s: 50e-6,
                bytes_per_s: 10e9 / 8.0,
            },
            Link::Usb4 => LinkCost {
                allreduce_s: 286e-6,
                hop_s: 22e-6,
                bytes_per_s: 16e9 / 8.0,
            },
            Link::Usb4Rdma => LinkCost {
                allreduce_s: 100e-6,
                hop_s: 22e-6,
                bytes_per_s: 16e9 / 8.0,
            },
        }
    }
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Link::Roce => "roce",
            Link::Tcp => "tcp",
            Link::Usb4 => "usb4",
            Link::Usb4Rdma => "usb4-rdma",
        })
    }
}

/// What the estimate needs of the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpeedModel {
    /// Bytes one token reads of the whole model.
    pub active_bytes: u64,
    /// Parameters one token multiplies (`None`: not known, no prefill).
    pub active_params: Option<u64>,
    /// Decoder layers.
    pub layers: u64,
    /// Hidden size (0: not known, the link costs only its latency).
    pub hidden: u64,
}

impl SpeedModel {
    /// From a `config.json`'s count and the weights on disk.
    pub fn from_active(a: &Active, weights_bytes: u64) -> SpeedModel {
        SpeedModel {
            active_bytes: a.active_bytes(weights_bytes),
            active_params: Some(a.active_params),
            layers: a.layers,
            hidden: a.hidden,
        }
    }
}

/// How the split runs, as the estimate sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// `tp` ranks per stage, `pp` stages of equal layers.
    Tensor {
        /// Tensor-parallel size.
        tp: u32,
        /// Pipeline stages.
        pp: u32,
    },
    /// llama.cpp: whole layers per node in these shares.
    Layers(Vec<f64>),
}

/// A link's costs measured on the cluster (its saved `bench` and `bench
/// collective` runs), and where each figure came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredLink {
    /// The costs: measured where a saved run said, the link's defaults for the rest.
    pub cost: LinkCost,
    /// Which run gave which figure (one clause a figure).
    pub source: String,
}

/// The conditions: the link, each node's bandwidth, the load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conditions {
    /// The link between nodes.
    pub link: Link,
    /// Its costs as the cluster's saved runs measured them (`None`: the
    /// link's defaults, [`Link::cost`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredLink>,
    /// Each node's memory bandwidth in GB/s (head first; a node past the
    /// list takes the last figure).
    pub bandwidth_gbs: Vec<f64>,
    /// Sequences decoding at once.
    pub concurrency: u32,
}

/// The estimate for one split, with its terms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// Tokens/s over all sequences at the concurrency asked.
    pub decode_tokens_per_s: f64,
    /// Tokens/s of one of those sequences.
    pub per_sequence_tokens_per_s: f64,
    /// Prompt tokens/s (`None`: the model's parameters are not known).
    pub prefill_tokens_per_s: Option<f64>,
    /// Seconds to the first token of a [`TTFT_PROMPT_TOKENS`] prompt.
    pub ttft_s: Option<f64>,
    /// One decode step: reading the weights, in seconds.
    pub read_s: f64,
    /// One decode step: the layers' fixed cost.
    pub layers_s: f64,
    /// One decode step: the link.
    pub link_s: f64,
    /// The arithmetic, one line a term.
    pub terms: Vec<String>,
}

fn bandwidth(c: &Conditions, node: usize) -> f64 {
    let gbs = c
        .bandwidth_gbs
        .get(node)
        .or(c.bandwidth_gbs.last())
        .copied()
        .unwrap_or(STRIX_HALO_BANDWIDTH_GBS);
    gbs.max(0.001) * 1e9
}

/// The estimate of `m` split as `shape` under `c`.
pub fn estimate(m: &SpeedModel, shape: &Shape, c: &Conditions) -> Estimate {
    let conc = f64::from(c.concurrency.max(1));
    let cost = c.measured.as_ref().map_or(c.link.cost(), |m| m.cost);
    let msg = (m.hidden * 2) as f64 * conc;
    let layers = m.layers as f64;
    let mut terms = Vec::new();
    // (share of the layers, the node) per stage, and the ranks per stage.
    let (stages, tp): (Vec<(f64, usize)>, u32) = match shape {
        Shape::Tensor { tp, pp } => {
            let pp = (*pp).max(1);
            let tp = (*tp).max(1);
            (
                (0..pp)
                    .map(|s| (1.0 / f64::from(pp), (s * tp) as usize))
                    .collect(),
                tp,
            )
        }
        Shape::Layers(shares) => (shares.iter().enumerate().map(|(i, s)| (*s, i)).collect(), 1),
    };
    let (mut read_s, mut layers_s) = (0.0, 0.0);
    for (share, node) in &stages {
        // Tensor-parallel ranks read in parallel: the slowest rank's share.
        let slowest = (0..tp as usize)
            .map(|r| bandwidth(c, node + r))
            .fold(f64::INFINITY, f64::min);
        let bytes = m.active_bytes as f64 * share / f64::from(tp);
        read_s += bytes / slowest;
        layers_s += layers * share * LAYER_COST_S;
        terms.push(format!(
            "node {}: reads {:.2} GB a step at {:.0} GB/s = {:.2} ms, {:.0} layers × {:.0} µs = {:.2} ms",
            node + 1,
            bytes / 1e9,
            slowest / 1e9,
            bytes / slowest * 1e3,
            layers * share,
            LAYER_COST_S * 1e6,
            layers * share * LAYER_COST_S * 1e3
        ));
    }
    let mut link_s = 0.0;
    if tp > 1 {
        let ring = 2.0 * f64::from(tp - 1) / f64::from(tp);
        let one = cost.allreduce_s + msg * ring / cost.bytes_per_s;
        link_s += 2.0 * layers * one;
        terms.push(format!(
            "{}: 2 all-reduces × {:.0} layers × {:.0} µs = {:.2} ms",
            c.link,
            layers,
            one * 1e6,
            2.0 * layers * one * 1e3
        ));
    }
    let hops = stages.len().saturating_sub(1) as f64;
    if hops > 0.0 {
        let one = cost.hop_s + msg / cost.bytes_per_s;
        link_s += hops * one;
        terms.push(format!(
            "{}: {hops:.0} stage hop(s) × {:.0} µs = {:.3} ms",
            c.link,
            one * 1e6,
            hops * one * 1e3
        ));
    }
    let compute_s = m.active_params.map_or(0.0, |p| {
        2.0 * p as f64 * conc / (PEAK_FLOPS * PREFILL_EFFICIENCY * f64::from(tp))
    });
    if compute_s > read_s + layers_s {
        terms.push(format!(
            "compute-bound: {conc:.0} tokens × 2 × active parameters at {:.1} TFLOPS = {:.2} ms",
            PEAK_FLOPS * PREFILL_EFFICIENCY * f64::from(tp) / 1e12,
            compute_s * 1e3
        ));
    }
    let step = (read_s + layers_s).max(compute_s) + link_s;
    let per_sequence = 1.0 / step;
    terms.push(format!(
        "step {:.2} ms for {conc:.0} sequence(s): {:.1} tokens/s each, {:.1} in all",
        step * 1e3,
        per_sequence,
        per_sequence * conc
    ));
    let prefill = m.active_params.filter(|p| *p > 0).map(|p| {
        let tokens = TTFT_PROMPT_TOKENS as f64;
        let compute = 2.0 * p as f64 * tokens / (PEAK_FLOPS * PREFILL_EFFICIENCY * f64::from(tp));
        let bulk = (m.hidden * 2) as f64 * tokens;
        let tp_link = if tp > 1 {
            let ring = 2.0 * f64::from(tp - 1) / f64::from(tp);
            2.0 * layers * (cost.allreduce_s + bulk * ring / cost.bytes_per_s)
        } else {
            0.0
        };
        let t = compute + tp_link + hops * (cost.hop_s + bulk / cost.bytes_per_s);
        (tokens / t, t)
    });
    Estimate {
        decode_tokens_per_s: per_sequence * conc,
        per_sequence_tokens_per_s: per_sequence,
        prefill_tokens_per_s: prefill.map(|p| p.0),
        ttft_s: prefill.map(|p| p.1),
        read_s,
        layers_s,
        link_s,
        terms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(link: Link) -> Conditions {
        Conditions {
            link,
            measured: None,
            bandwidth_gbs: vec![STRIX_HALO_BANDWIDTH_GBS],
            concurrency: 1,
        }
    }

    fn gpt_oss() -> SpeedModel {
        let cfg = crate::model::fixture_config("openai--gpt-oss-120b.json");
        let a = super::super::active::from_config(&cfg).unwrap();
        // The MXFP4 checkpoint: 65.2 GB of safetensors.
        SpeedModel::from_active(&a, 65_200_000_000)
    }

    #[test]
    fn gpt_oss_on_one_node_lands_on_its_calibration() {
        let e = estimate(
            &gpt_oss(),
            &Shape::Tensor { tp: 1, pp: 1 },
            &conditions(Link::Roce),
        );
        assert!(
            (50.0..57.0).contains(&e.decode_tokens_per_s),
            "{:?}",
            e.terms
        );
        assert_eq!(e.link_s, 0.0);
        let pre = e.prefill_tokens_per_s.unwrap();
        assert!(pre > 500.0 && pre < 5000.0, "{pre}");
    }

    #[test]
    fn the_link_decides_whether_tensor_parallel_pays() {
        let m = gpt_oss();
        let one = estimate(&m, &Shape::Tensor { tp: 1, pp: 1 }, &conditions(Link::Roce));
        let roce = estimate(&m, &Shape::Tensor { tp: 2, pp: 1 }, &conditions(Link::Roce));
        let tcp = estimate(&m, &Shape::Tensor { tp: 2, pp: 1 }, &conditions(Link::Tcp));
        assert!(tcp.decode_tokens_per_s < roce.decode_tokens_per_s);
        // 72 all-reduces of 286 µs cost more than half the reads save.
        assert!(tcp.decode_tokens_per_s < one.decode_tokens_per_s);
        assert!(
            roce.terms
                .iter()
                .any(|t| t.contains("2 all-reduces × 36 layers"))
        );
        // A dense 64 GB model: halving the reads wins even over TCP.
        let dense = SpeedModel {
            active_bytes: 64_000_000_000,
            active_params: Some(32_000_000_000),
            layers: 64,
            hidden: 5120,
        };
        let d1 = estimate(
            &dense,
            &Shape::Tensor { tp: 1, pp: 1 },
            &conditions(Link::Tcp),
        );
        let d2 = estimate(
            &dense,
            &Shape::Tensor { tp: 2, pp: 1 },
            &conditions(Link::Tcp),
        );
        assert!(d2.decode_tokens_per_s > 1.5 * d1.decode_tokens_per_s);
    }

    #[test]
    fn usb4_over_tcp_is_costed_apart_from_usb4_with_rdma() {
        let m = gpt_oss();
        let tp2 = Shape::Tensor { tp: 2, pp: 1 };
        let tcp = estimate(&m, &tp2, &conditions(Link::Usb4));
        let rdma = estimate(&m, &tp2, &conditions(Link::Usb4Rdma));
        let roce = estimate(&m, &tp2, &conditions(Link::Roce));
        assert!(tcp.decode_tokens_per_s < rdma.decode_tokens_per_s);
        // An RDMA provider on the cable comes close to RoCE's all-reduce.
        assert!((rdma.decode_tokens_per_s / roce.decode_tokens_per_s - 1.0).abs() < 0.05);
        assert_eq!(Link::Usb4Rdma.to_string(), "usb4-rdma");
        assert_eq!(serde_json::to_value(Link::Usb4Rdma).unwrap(), "usb4-rdma");
    }

    #[test]
    fn pipeline_stages_add_up_and_concurrency_shares_the_reads() {
        let m = gpt_oss();
        let one = estimate(&m, &Shape::Tensor { tp: 1, pp: 1 }, &conditions(Link::Roce));
        let pp2 = estimate(&m, &Shape::Tensor { tp: 1, pp: 2 }, &conditions(Link::Roce));
        // Serial stages read the same bytes in all, plus one hop.
        assert!((pp2.read_s - one.read_s).abs() < 1e-9);
        assert!(pp2.decode_tokens_per_s < one.decode_tokens_per_s);
        let layers = estimate(&m, &Shape::Layers(vec![0.5, 0.5]), &conditions(Link::Tcp));
        assert!(layers.link_s > pp2.link_s);
        let mut busy = conditions(Link::Roce);
        busy.concurrency = 8;
        let eight = estimate(&m, &Shape::Tensor { tp: 1, pp: 1 }, &busy);
        assert!(eight.decode_tokens_per_s > 7.9 * one.decode_tokens_per_s);
        assert!((eight.per_sequence_tokens_per_s - one.per_sequence_tokens_per_s).abs() < 1e-9);
        // A slower node's bandwidth is the one a tensor-parallel step waits for.
        let mut slow = conditions(Link::Roce);
        slow.bandwidth_gbs = vec![215.0, 100.0];
        let s = estimate(&m, &Shape::Tensor { tp: 2, pp: 1 }, &slow);
        assert!(
            s.read_s
                > estimate(&m, &Shape::Tensor { tp: 2, pp: 1 }, &conditions(Link::Roce)).read_s
                    * 2.0
        );
    }
}
