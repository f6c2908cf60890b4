//! `halobox bench soak`'s flags.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::common::{ClusterFileArgs, PlanOutputArgs};

/// Examples shown under `halobox bench soak --help`.
pub const EXAMPLES: &str = "Examples:\n  halobox bench soak                                  (the serve recorded for the cluster, 10 min)\n  halobox bench soak --duration 30m --context 16384 --concurrency 8\n  halobox bench soak --url http://127.0.0.1:8000 --metrics 127.0.0.1:9837 --duration 2m --dry-run\n\nPASS needs: no failed request, no request waiting --stall-timeout for a byte, and no node's GTT in use growing more than --max-gtt-growth-mib.\nExit status: 0 on PASS, 1 on FAIL, 2 on a usage error.";

/// `halobox bench soak`.
#[derive(Debug, Args)]
pub struct BenchSoakArgs {
    /// The OpenAI endpoint, http://HOST:PORT (default: the serve recorded for the cluster file).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// The model to ask for (default: the first one the endpoint lists).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// How long new requests start: 90s, 10m, 1h.
    #[arg(long, value_name = "D", default_value = "10m")]
    pub duration: String,
    /// Prompt tokens of a long request (exact through the server's tokenizer).
    #[arg(long, value_name = "N", default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub context: u32,
    /// Prompt tokens of a short request.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=131_072))]
    pub short_tokens: u32,
    /// One request in this many is long (1: every one).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub long_every: u32,
    /// Requests in flight at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,
    /// Output tokens per request (end of sequence ignored).
    #[arg(long, value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub output_tokens: u32,
    /// Seconds without a byte that make a request stalled: it FAILs the soak and ends the load.
    #[arg(long, value_name = "S", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub stall_timeout: u64,
    /// The most any node's GTT in use may grow from its first reading, MiB.
    #[arg(long, value_name = "MIB", default_value_t = 1024)]
    pub max_gtt_growth_mib: u64,
    /// Width of a window of the report over time, seconds (default: about a twelfth of the duration, at least 5).
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub window: Option<u64>,
    /// Seconds between GTT readings.
    #[arg(long, value_name = "S", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub sample: u64,
    /// A node's `halobox metrics` address to read GTT from (repeat; default: every node of the cluster file at --metrics-port).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Vec<SocketAddr>,
    /// The port of every node's `halobox metrics` (with the cluster file).
    #[arg(long, value_name = "PORT", default_value_t = 9837)]
    pub metrics_port: u16,
    /// Seed of the random prompts.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// Send no API key (for a serve started with --no-api-key).
    #[arg(long)]
    pub no_api_key: bool,
    /// Save soak.json here (default: $XDG_STATE_HOME/halobox/bench/<UTC time>).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
}
