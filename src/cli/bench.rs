//! `bench run|serve|probe|report|compare`: Ethernet against RDMA between
//! two nodes.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::{ClusterFileArgs, EngineArgs, OutputArgs, PlanOutputArgs, SourceArgs};

/// `halobox bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Run the benchmark against a peer (servers started there over ssh).
    #[command(
        after_help = "Examples:\n  halobox bench run                        (the peer from ~/.config/halobox/cluster.toml)\n  halobox bench run --peer-node node2 --dry-run\n  halobox bench run --peer node2 --peer-ip 192.168.100.2\n  halobox bench run --peer root@node2 --peer-ip 192.168.100.2 --peer-ip 10.0.0.2 --json\n  halobox bench run --peer node2 --peer-ip 192.168.100.2 --no-rdma --duration 5 --streams 8\n  halobox bench run --link usb4 --on host\n\nThe peer needs halobox (--peer-halobox), and for the cross-checks iperf3 and perftest.\nssh runs with BatchMode=yes: key authentication and a known host key are required."
    )]
    Run(BenchRunArgs),
    /// Serve halobox's TCP latency echo and bandwidth sink (what `bench run` starts on the peer).
    #[command(
        after_help = "Examples:\n  halobox bench serve --port 18600   (normally started by `bench run` on the peer)"
    )]
    Serve(BenchServeArgs),
    /// Print, as JSON, this node's end of a path: interface, RDMA device, port, GID index, MTU, ceilings, RDMA counters.
    #[command(
        after_help = "Examples:\n  halobox bench probe --ip 192.168.100.2\n  halobox bench probe --ip 10.0.0.1 --sysroot tests/fixtures/hosts/strix-cx5"
    )]
    Probe(BenchProbeArgs),
    /// halobox's TCP client end (what `bench run` runs in this node's container): prints the raw log.
    #[command(
        after_help = "Examples:\n  halobox bench client --to 192.168.100.2:5301 --from 192.168.100.1 --latency 20000\n  halobox bench client --to 192.168.100.2:5301 --from 192.168.100.1 --streams 4 --duration 10"
    )]
    Client(BenchClientArgs),
    /// Run a command in this node's halobox container with stdin attached, stopped when stdin closes (what `bench run` runs on the peer); `halobox` as the command means halobox inside the container.
    #[command(
        after_help = "Examples:\n  halobox bench exec --container vllm -- iperf3 -s -1\n  halobox bench exec -- halobox bench probe --ip 192.168.100.2"
    )]
    Exec(BenchExecArgs),
    /// Load a running `serve` endpoint (vLLM, llama.cpp) with streamed completions: time to first token, inter-token latency, tokens/s.
    #[command(
        after_help = "Examples:\n  halobox bench serving                     (the serve recorded for ~/.config/halobox/cluster.toml)\n  halobox bench serving --dry-run\n  halobox bench serving --url http://10.0.0.1:8000 --concurrency 1,4,8 --requests 32\n  halobox bench serving --input-tokens 512 --output-tokens 128 --json\n  halobox bench serving --save /tmp/before; halobox bench compare /tmp/before RUN_AFTER\n  halobox bench serving --ab-transport --dry-run\n\nPrompts are random words cut to exactly --input-tokens by the server's /tokenize (about one token a word without it); outputs ignore the end of sequence so every one has --output-tokens.\nThe API key is VLLM_API_KEY or LLAMA_API_KEY from this environment, else the cluster's key file beside cluster.toml; it goes in a header only, never in an argument or the output.\nA serve that dies or freezes during the run stops it: the levels that ran are kept and marked partial, and the exit status is 1.\n--ab-transport restarts the cluster and the serve `serve --detach` recorded: on TCP sockets, then on cluster.toml's transport (where it ends); refused while anybody's requests run."
    )]
    Serving(super::bench_serving::BenchServingArgs),
    /// Hold a running `serve` under long-context load for a while: errors, time to first token, tokens/s and each node's GTT over time, then PASS or FAIL against explicit limits.
    #[command(after_help = super::bench_soak::EXAMPLES)]
    Soak(super::bench_soak::BenchSoakArgs),
    /// All-reduce and all-gather across every node of cluster.toml (torch.distributed in the containers): latency, bus bandwidth, the sums checked, the transport RCCL used.
    #[command(after_help = super::bench_collective::EXAMPLES)]
    Collective(super::BenchCollectiveArgs),
    /// Re-render a saved run from its raw logs.
    #[command(
        after_help = "Examples:\n  halobox bench report ~/.local/state/halobox/bench/20260101T120000Z\n  halobox bench report RUN_DIR --json\n  halobox bench report RUN_DIR --html bench.html\n  halobox bench report COLLECTIVE_RUN SERVING_RUN --html bench.html --line-rate 100\n\n--html writes one self-contained page of SVG charts (no script, no network) instead of the text report;\nit does not go with --json. Several runs are drawn on the same charts, named by their folders."
    )]
    Report(BenchReportArgs),
    /// Show the differences between two saved runs.
    #[command(
        after_help = "Examples:\n  halobox bench compare RUN_BEFORE RUN_AFTER\n  halobox bench compare RUN_BEFORE RUN_AFTER --html compare.html\n\n--html writes both runs on the same charts (before and after) to one self-contained HTML page instead of the text."
    )]
    Compare(BenchCompareArgs),
}

/// The port of halobox's bench server.
#[derive(Debug, Args)]
pub struct BenchPortArgs {
    /// The port halobox's bench server listens on (on the peer for `bench run`).
    #[arg(long, value_name = "P", default_value_t = 5301)]
    pub port: u16,
}

/// `halobox bench run`.
#[derive(Debug, Args)]
pub struct BenchRunArgs {
    /// The peer's ssh destination (`host`, `user@host`, or a Host from ~/.ssh/config); without --peer-ip, a node of the cluster file.
    #[arg(long, value_name = "SSH_TARGET")]
    pub peer: Option<String>,
    /// The peer's address on a path to measure (repeat for several paths; default: the peer node's data-plane IP).
    #[arg(long, value_name = "IP")]
    pub peer_ip: Vec<Ipv4Addr>,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// The peer node of the cluster file: its name, ssh target, IP or position (1 = first; default: the first node that is not this machine).
    #[arg(long, value_name = "NAME", conflicts_with = "peer")]
    pub peer_node: Option<String>,
    /// This node's address on each path, in --peer-ip order (default: this node's data-plane IP from the cluster file, else the routed source address).
    #[arg(long, value_name = "LOCAL_IP")]
    pub iface_ip: Vec<Ipv4Addr>,
    /// halobox on the peer (default: the cluster file's `halobox`, else `halobox`).
    #[arg(long, value_name = "PATH")]
    pub peer_halobox: Option<String>,
    /// Extra ssh option, passed as `-o OPT` (repeatable; host key checking cannot be turned off).
    #[arg(long, value_name = "OPT")]
    pub ssh_option: Vec<String>,
    /// Save raw outputs and results.json here (default: $XDG_STATE_HOME/halobox/bench/<UTC time>).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
    /// Run the RDMA leg even when no RDMA endpoint was found (its failure is diagnosed).
    #[arg(long, conflicts_with_all = ["no_rdma", "link"])]
    pub rdma: bool,
    /// Do not run the RDMA leg.
    #[arg(long)]
    pub no_rdma: bool,
    /// Seconds per bandwidth test.
    #[arg(long, value_name = "S", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub duration: u32,
    /// Streams (TCP) and queue pairs (RDMA) of the parallel bandwidth test.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub streams: u32,
    #[command(flatten)]
    pub server: BenchPortArgs,
    /// Also run `ib_write_bw -a` (one QP, every message size from 2 B to 8 MiB): a row per size.
    #[arg(long, conflicts_with_all = ["no_rdma", "link"])]
    pub sweep: bool,
    /// Measure this link alone: `usb4` is the thunderbolt-net interface (this node's address on it and the peer's on its subnet), TCP only, judged against the public USB4 figures.
    #[arg(long, value_enum, value_name = "LINK", conflicts_with = "iface_ip")]
    pub link: Option<BenchLink>,
    /// Latency samples (TCP round trips and ib_write_lat iterations).
    #[arg(long, value_name = "N", default_value_t = 20000, value_parser = clap::value_parser!(u32).range(100..=10_000_000))]
    pub samples: u32,
    /// Where both ends run: in each node's halobox container (the default when this node has one: what RCCL sees) or on the hosts.
    #[arg(long, value_enum, value_name = "WHERE")]
    pub on: Option<BenchOn>,
    /// The container (default: this node's `container` in the cluster file, else the config's `name`, else vllm; the peer's from the cluster file, else the same name).
    #[arg(long, value_name = "NAME")]
    pub container: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// The links `bench run --link` measures alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchLink {
    /// The USB4/Thunderbolt cable (thunderbolt-net).
    Usb4,
}

impl BenchOn {
    /// The library's placement.
    pub fn on(self) -> crate::bench::flow::On {
        match self {
            BenchOn::Container => crate::bench::flow::On::Container,
            BenchOn::Host => crate::bench::flow::On::Host,
        }
    }
}

impl BenchLink {
    /// The library's link.
    pub fn link(self) -> crate::bench::plan::Link {
        match self {
            BenchLink::Usb4 => crate::bench::plan::Link::Usb4,
        }
    }
}

/// Where `bench run`'s ends run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchOn {
    /// In the nodes' halobox containers.
    Container,
    /// On the hosts.
    Host,
}

/// `halobox bench client`.
#[derive(Debug, Args)]
pub struct BenchClientArgs {
    /// The server's address and port.
    #[arg(long, value_name = "IP:PORT")]
    pub to: std::net::SocketAddr,
    /// This node's address to send from.
    #[arg(long, value_name = "IP")]
    pub from: Option<Ipv4Addr>,
    /// Measure latency with this many round trips.
    #[arg(long, value_name = "SAMPLES", conflicts_with = "streams", value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub latency: Option<u32>,
    /// Measure bandwidth with this many streams.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub streams: Option<u32>,
    /// Seconds of the bandwidth test (the latency test's time bound).
    #[arg(long, value_name = "S", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub duration: u32,
}

/// `halobox bench exec`.
#[derive(Debug, Args)]
pub struct BenchExecArgs {
    /// The container (default: the config's `name`, else vllm).
    #[arg(long, value_name = "NAME")]
    pub container: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The command.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// `halobox bench serve`.
#[derive(Debug, Args)]
pub struct BenchServeArgs {
    #[command(flatten)]
    pub server: BenchPortArgs,
    /// Address to listen on (default: this machine's data-plane address; 0.0.0.0 is every interface).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// Exit after this many seconds without a connection.
    #[arg(long, value_name = "S", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub idle_timeout: u64,
    /// Seconds a connection may wait on one read or write (a client that stops reading is dropped after it).
    #[arg(long, value_name = "S", default_value_t = crate::bench::tcp::IO_TIMEOUT_S, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub io_timeout: u64,
}

/// `halobox bench probe`.
#[derive(Debug, Args)]
pub struct BenchProbeArgs {
    /// This node's address on the path.
    #[arg(long, value_name = "IP")]
    pub ip: Ipv4Addr,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `halobox bench report`.
#[derive(Debug, Args)]
pub struct BenchReportArgs {
    /// A folder saved by `halobox bench run`, `bench serving` or `bench collective`.
    pub dir: PathBuf,
    /// More saved runs, drawn on the same charts (with --html only).
    #[arg(value_name = "RUN", requires = "html")]
    pub more: Vec<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Write the charts to this HTML file instead of printing the report: one self-contained page of SVG charts (no script, no network).
    #[arg(long, value_name = "OUT.html", conflicts_with = "json")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub chart: ChartArgs,
}

/// `halobox bench compare`.
#[derive(Debug, Args)]
pub struct BenchCompareArgs {
    /// The earlier run's folder.
    pub a: PathBuf,
    /// The later run's folder.
    pub b: PathBuf,
    /// Write both runs' charts to this HTML file instead of printing the comparison: one self-contained page of SVG charts.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub chart: ChartArgs,
}

/// What the charts of `--html` are drawn with.
#[derive(Debug, Args)]
pub struct ChartArgs {
    /// The link's line rate in Gb/s, drawn on the collective bus bandwidth chart (default: the highest path ceiling of a `bench run` on the page).
    #[arg(long, value_name = "GBPS", requires = "html", value_parser = line_rate)]
    pub line_rate: Option<f64>,
}

fn line_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(g) if g.is_finite() && g > 0.0 && g <= 10_000.0 => Ok(g),
        _ => Err(format!("{s:?} is not a line rate in Gb/s (e.g. 100)")),
    }
}

impl BenchRunArgs {
    /// The run the flags ask for.
    pub fn options(&self) -> crate::bench::flow::Options {
        crate::bench::flow::Options {
            peer: self.peer.clone(),
            peer_ip: self.peer_ip.clone(),
            cluster: self.file.cluster.clone(),
            peer_node: self.peer_node.clone(),
            iface_ip: self.iface_ip.clone(),
            peer_halobox: self.peer_halobox.clone(),
            ssh_option: self.ssh_option.clone(),
            save: self.save.clone(),
            dry_run: self.mode.dry_run(),
            json: self.mode.json(),
            rdma: self.rdma,
            no_rdma: self.no_rdma,
            duration: self.duration,
            streams: self.streams,
            port: self.server.port,
            sweep: self.sweep,
            samples: self.samples,
            on: self.on.map(BenchOn::on),
            container: self.container.clone(),
            engine: self.engine.engine.clone(),
            link: self.link.map(BenchLink::link),
        }
    }
}
