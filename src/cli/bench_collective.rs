//! `bench collective`: all-reduce and all-gather across the cluster's nodes.

use std::path::PathBuf;

use clap::Args;

use super::common::{ClusterFileArgs, PlanOutputArgs};
use crate::bench::collective::plan::{self, Backend, Op};

/// The help's examples.
pub const EXAMPLES: &str = "Examples:\n  halobox bench collective                          (every node of ~/.config/halobox/cluster.toml)\n  halobox bench collective --dry-run\n  halobox bench collective --sizes 4K,64K,1M,16M --iters 200 --json\n  halobox bench collective --op all_reduce --save ~/runs/ar-roce\n  halobox bench compare ~/runs/ar-tcp ~/runs/ar-roce\n\nOne rank per node runs in the node's halobox container (torch.distributed; the Python next to `ray` in cluster.toml, or --python). Backend: RCCL where every rank's torch sees a GPU, else gloo over TCP. With RCCL it FAILs when the cluster's transport is roce/ib but RCCL used sockets.";

/// `halobox bench collective`.
#[derive(Debug, Args)]
pub struct BenchCollectiveArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// Message sizes: bytes, or with K, M, G (binary), from 1 KiB to 256 MiB.
    #[arg(long, value_name = "LIST", default_value = plan::DEFAULT_SIZES)]
    pub sizes: String,
    /// The operations (repeatable; default: both).
    #[arg(long = "op", value_enum, value_name = "OP")]
    pub ops: Vec<Op>,
    /// Timed iterations per size (p50/p99 are over them).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(5..=100_000))]
    pub iters: u32,
    /// Warm-up iterations per size (not timed).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub warmup: u32,
    /// The backend (default: auto, RCCL where every container's torch sees a GPU, else gloo).
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub backend: Option<Backend>,
    /// The Python in the containers (default: the one next to `ray` in cluster.toml, else python3).
    #[arg(long, value_name = "PATH")]
    pub python: Option<String>,
    /// The rendezvous port on the head's data-plane address.
    #[arg(long, value_name = "P", default_value_t = plan::DEFAULT_PORT)]
    pub port: u16,
    /// Seconds each rank may take.
    #[arg(long, value_name = "S", default_value_t = 180, value_parser = clap::value_parser!(u64).range(10..=86_400))]
    pub timeout: u64,
    /// Save the run here (default: $XDG_STATE_HOME/halobox/bench/<UTC time>-collective).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
}
