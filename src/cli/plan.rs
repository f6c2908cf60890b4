//! `halobox plan`.

use clap::Args;

use super::common::{ClusterFileArgs, OutputArgs};

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
    /// Print the KV arithmetic of every split, not only the chosen one's.
    #[arg(long)]
    pub verbose: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// The `vllm serve` arguments you would give serve after `--` (--kv-cache-dtype, --max-num-seqs, --max-num-batched-tokens, --pipeline-parallel-size, --revision…).
    #[arg(last = true)]
    pub extra: Vec<String>,
}
