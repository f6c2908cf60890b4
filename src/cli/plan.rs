//! `halobox plan`.

use clap::Args;

use super::common::{ClusterFileArgs, OutputArgs};
use crate::model::memory_args::Flags;
use crate::model::placement::{self, Prefer};
use crate::model::speed::Link;
use crate::serve::decide::{PlanRequest, Query};

/// `halobox plan MODEL`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The model: a Hugging Face id in this machine's cache, a folder with safetensors and config.json, or a GGUF file (llama.cpp's arithmetic).
    pub model: String,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// Plan for N nodes of --gtt SIZE each instead of the cluster's (no cluster needed).
    #[arg(long, value_name = "N", requires = "gtt", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub nodes: Option<u32>,
    /// Each planned node's GTT (its GPU memory): 128G, 96GiB, 110000M.
    #[arg(long, value_name = "SIZE", requires = "nodes")]
    pub gtt: Option<String>,
    /// Only splits with this tensor-parallel size.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub tp: Option<u32>,
    /// The context to check (default: the model's own; also read after `--`).
    #[arg(long, value_name = "L")]
    pub max_model_len: Option<u64>,
    /// Fraction of each node's free GTT the engine may take (default 0.90, serve's).
    #[arg(long, value_name = "U")]
    pub gpu_memory_utilization: Option<f64>,
    /// What `chosen` favours: the fastest split that fits (estimated decode tokens/s), or the fewest nodes that fit.
    #[arg(long, value_enum, value_name = "RULE", default_value_t = Prefer::Fastest)]
    pub prefer: Prefer,
    /// The link to estimate for (default: cluster.toml's transport, RoCE without a cluster): roce, tcp, usb4 (TCP on thunderbolt-net, what `transport = "usb4"` sets up) or usb4-rdma (with a USB4 RDMA provider).
    #[arg(long, value_enum, value_name = "LINK")]
    pub transport: Option<Link>,
    /// Every node's memory bandwidth in GB/s (default: each node's `memory_bandwidth_gbs` in cluster.toml, else 215, Strix Halo's measured).
    #[arg(long, value_name = "N")]
    pub memory_bandwidth_gbs: Option<f64>,
    /// Sequences decoding at once for the tokens/s estimate.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: u32,
    /// Print the KV and speed arithmetic of every split, not only the chosen one's.
    #[arg(long)]
    pub verbose: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// The `vllm serve` arguments you would give serve after `--` (--kv-cache-dtype, --max-num-seqs, --max-num-batched-tokens, --pipeline-parallel-size, --revision…).
    #[arg(last = true)]
    pub extra: Vec<String>,
}

impl PlanArgs {
    /// The flags as the library's request; an error names a bad `--gtt`.
    pub fn request(&self) -> Result<PlanRequest, String> {
        let planned = match (self.nodes, &self.gtt) {
            (Some(n), Some(g)) => Some((n, placement::parse_size(g)?)),
            _ => None,
        };
        Ok(PlanRequest {
            query: Query {
                model: self.model.clone(),
                extra: self.extra.clone(),
                flags: Flags {
                    max_model_len: self.max_model_len,
                    tp: self.tp,
                    gpu_memory_utilization: self.gpu_memory_utilization,
                },
                link: self.transport,
                bandwidth_gbs: self.memory_bandwidth_gbs,
                concurrency: self.concurrency,
                prefer: self.prefer,
            },
            planned,
            cluster: self.file.cluster.clone(),
        })
    }
}
