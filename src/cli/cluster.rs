//! `cluster init|up|join|status|down|tui` and `serve`: the Ray cluster and
//! vLLM on it.

use std::net::{IpAddr, Ipv4Addr};

use clap::{Args, Subcommand};

use super::common::{
    Channel, ClusterFileArgs, DryRunArgs, EngineArgs, OutputArgs, PlanOutputArgs, SourceArgs,
    YesArgs,
};
use crate::cluster::config::{DEFAULT_RAY_PORT, NodeBackend, Transport};

/// `halobox cluster` subcommands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Write cluster.toml from flags (or prompts on a terminal).
    #[command(
        after_help = "Examples:\n  halobox cluster init --node root@node1,192.168.100.1 --node root@node2,192.168.100.2\n  halobox cluster init --node n1,10.0.0.1 --node n2,10.0.0.2 --backend podman --container vllm --transport roce --print"
    )]
    Init(ClusterInitArgs),
    /// Preflight every node, start the Ray head, then every worker, and wait until Ray lists them all; then `halobox metrics` on every node.
    #[command(
        after_help = "Examples:\n  halobox cluster up\n  halobox cluster up --dry-run\n  halobox cluster up --cluster ./cluster.toml --timeout 120\n  halobox cluster up --no-metrics\n\nThen `halobox metrics` on every node's host (port 9837 on its data-plane address); `--no-metrics`: none."
    )]
    Up(ClusterUpArgs),
    /// Start Ray on this node with the env computed from its own facts (what `up` runs on each node).
    #[command(
        after_help = "Examples:\n  halobox cluster join --head 192.168.100.1 --ip 192.168.100.2 --dry-run\n  halobox cluster join --head 192.168.100.1 --ip 192.168.100.1 --sysroot tests/fixtures/hosts/strix-e810 --dry-run\n\n--dry-run prints the env (NAME=value lines), the variables vLLM must not copy from the head, what Ray will see (devices, groups, memlock, RDMA ports: inside the container for container backends) and the exact command; with --json, the node's report (what `up` reads). --sysroot and --json go with --dry-run."
    )]
    Join(ClusterJoinArgs),
    /// Nodes in Ray with their GPUs and CPUs, transport and env in force.
    #[command(after_help = "Examples:\n  halobox cluster status\n  halobox cluster status --json")]
    Status(ClusterStatusArgs),
    /// Stop Ray on every node (unreachable nodes are reported).
    #[command(
        after_help = "Examples:\n  halobox cluster down\n  halobox cluster down --cluster ./cluster.toml"
    )]
    Down(ClusterDownArgs),
    /// Refresh every node's container onto one image digest: stage everywhere, then swap everywhere (or nowhere).
    #[command(
        after_help = "Examples:\n  halobox cluster refresh --dry-run\n  halobox cluster refresh latest --yes\n  halobox cluster refresh --image registry:5000/team/vllm@sha256:... --restart --yes\n\nEvery node runs its own `halobox refresh` over ssh: first --stage on every node at once (pull, pin, create and check the new container beside the old one), and only when every node is staged on one digest, the swap. A node that fails leaves every node on its old container. With Ray running (asked on the head, else looked for in every node's processes), nothing is swapped unless --restart: it stops Ray for the swap (cluster down) and starts it again (cluster up); so does a Ray whose state cannot be told."
    )]
    Refresh(ClusterRefreshArgs),
    /// Copy this halobox binary to every node: staged, verified to run there, then swapped on every node or on none (`--rollback` goes back).
    #[command(
        after_help = "Examples:\n  halobox cluster install --dry-run\n  halobox cluster install\n  halobox cluster install --halobox /usr/local/bin/halobox\n  halobox cluster install --rollback"
    )]
    Install(ClusterInstallArgs),
    /// `halobox doctor` on every node at once, one table, plus what no single node can check (same MTU, data-plane reachability, GID type, kernel, firmware, image, halobox).
    #[command(
        after_help = "Examples:\n  halobox cluster doctor\n  halobox cluster doctor --json --cluster ./cluster.toml\n\nEach node runs its own `halobox doctor --json` over ssh, pings every other node's data-plane address and, with a container backend, reports its container's image. Exit 1 when any check FAILs on any node (an unreachable node is a FAIL)."
    )]
    Doctor(ClusterDoctorArgs),
    /// `bench run` between every pair of nodes, one pair at a time: latency and bandwidth matrices, slow links flagged with their likely cause.
    #[command(
        after_help = "Examples:\n  halobox cluster bench\n  halobox cluster bench --pairs head --duration 5\n  halobox cluster bench --save ./bench-today --json\n  halobox cluster bench --collective   (then `halobox bench collective` with its defaults)\n\nEach pair's first node runs `halobox bench run` against the second over ssh (so nodes must reach each other by ssh, with the same ssh_options); each pair's run is saved in DIR/FROM--TO for `halobox bench report` and `halobox bench compare`."
    )]
    Bench(ClusterBenchArgs),
    /// Where Prometheus finds every node's `halobox metrics` and the serve's engine metrics (`--prometheus-config`: as a scrape configuration).
    #[command(
        after_help = "Examples:\n  halobox cluster metrics\n  halobox cluster metrics --prometheus-config > /etc/prometheus/halobox.yml\n\n`cluster up` starts `halobox metrics` on every node's host (`--no-metrics`: it does not); `cluster down` stops it."
    )]
    Metrics(ClusterMetricsArgs),
    /// A live view of every node, refreshed every second, from the nodes' `halobox metrics` and the serve's engine metrics.
    #[command(
        after_help = "Examples:\n  halobox cluster top\n  halobox cluster top --cluster ./cluster.toml --serve-port 8080\n\nOne row per node: GTT used/total, GPU busy, temperature, RDMA in/out (Gb/s) and congestion events per second from counter deltas; the head's row adds the serve's tokens per second and running requests.\nA node that does not answer says why; the others go on. q or Ctrl-C ends it."
    )]
    Top(ClusterTopArgs),
    /// Start the cluster at every boot: systemd units for each node's container, `cluster up` on the head (retried for late nodes) and the recorded serve.
    #[command(
        after_help = "Examples:\n  halobox cluster enable --dry-run\n  halobox cluster enable\n  halobox cluster enable --cluster ./cluster.toml\n\nRun it on the head, as the user who runs `cluster up` and `serve`. Root's units go to /etc/systemd/system, a user's to ~/.config/systemd/user (then the user's manager must linger: `sudo loginctl enable-linger USER`). Nothing starts now: the units are enabled for the next boot. `halobox cluster disable` removes exactly what enable wrote."
    )]
    Enable(ClusterBootArgs),
    /// Stop starting the cluster at boot: disable and remove exactly the units `cluster enable` wrote, on every node.
    #[command(
        after_help = "Examples:\n  halobox cluster disable --dry-run\n  halobox cluster disable\n\nA file is removed only while it still carries the marker line enable wrote; what runs now keeps running (`halobox serve stop`, `halobox cluster down` stop it)."
    )]
    Disable(ClusterBootArgs),
    /// An interactive menu over init, up, status, down and serve.
    #[command(after_help = "Examples:\n  halobox cluster tui")]
    Tui(ClusterFileArgs),
}

/// Where and how Ray runs on a node.
#[derive(Debug, Args)]
pub struct RayNodeArgs {
    /// The container Ray runs in.
    #[arg(long, default_value = "vllm")]
    pub container: String,
    /// Where Ray runs.
    #[arg(long, value_enum, default_value_t = NodeBackend::Toolbox)]
    pub backend: NodeBackend,
    /// NCCL transport.
    #[arg(long, value_enum, default_value_t = Transport::Auto)]
    pub transport: Transport,
    /// The head's Ray port.
    #[arg(long, value_name = "P", default_value_t = DEFAULT_RAY_PORT)]
    pub port: u16,
}

/// `halobox cluster init`.
#[derive(Debug, Args)]
pub struct ClusterInitArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// A node as SSH_TARGET,IP (repeat; the first is the head).
    #[arg(long, value_name = "SSH_TARGET,IP")]
    pub node: Vec<String>,
    #[command(flatten)]
    pub ray_node: RayNodeArgs,
    /// CPUs Ray may use on each node (default: each node's CPU count).
    #[arg(long, value_name = "N")]
    pub cpus: Option<u32>,
    /// Print the file instead of writing it.
    #[arg(long)]
    pub print: bool,
    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
}

/// `halobox cluster up`.
#[derive(Debug, Args)]
pub struct ClusterUpArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub plan: DryRunArgs,
    /// Seconds to wait for every node to register with Ray, 1..86400 (default: cluster.toml's timeout_s).
    #[arg(long, value_name = "S", value_parser = crate::units::parse_timeout)]
    pub timeout: Option<u64>,
    /// Start Ray WITHOUT token authentication: anyone who reaches its ports can run code on every node (warned each time).
    #[arg(long)]
    pub insecure_ray: bool,
    /// Do not start `halobox metrics` on every node (by default it serves each node's figures on its data-plane address, port 9837).
    #[arg(long)]
    pub no_metrics: bool,
}

/// `halobox cluster join`.
#[derive(Debug, Args)]
pub struct ClusterJoinArgs {
    /// The head's data-plane address.
    #[arg(long, value_name = "IP")]
    pub head: Ipv4Addr,
    /// This node's data-plane address (the head's for the head).
    #[arg(long, value_name = "IP")]
    pub ip: Ipv4Addr,
    #[command(flatten)]
    pub ray_node: RayNodeArgs,
    /// The `ray` command (in the container).
    #[arg(long, value_name = "CMD", default_value = "ray")]
    pub ray: String,
    /// CPUs for Ray (default: this node's CPU count).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub num_cpus: Option<u32>,
    /// Extra `ray start` argument (repeat; use --ray-arg=--flag=value).
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub ray_arg: Vec<String>,
    /// Extra `ray start` argument used only when this node is the head.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub ray_head_arg: Vec<String>,
    /// A variable for Ray on every node, NAME=VALUE (cluster.toml's `[env]`; repeat).
    #[arg(long, value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// A variable for this node only, NAME=VALUE (its `env` in cluster.toml; repeat): vLLM does not copy the head's value to the workers.
    #[arg(long, value_name = "NAME=VALUE")]
    pub node_env: Vec<String>,
    /// A name --env or --node-env may set although it looks like a secret's (`*_KEY`, `*KEYS`, `*_PAT`, `*SECRET*`, `*TOKEN*`, `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`): it holds none (cluster.toml's `not_secret`; repeat).
    #[arg(long, value_name = "NAME")]
    pub not_secret: Vec<String>,
    /// Start Ray with token authentication, the token read from one line of stdin (as `cluster up` sends it).
    #[arg(long, conflicts_with = "insecure_ray")]
    pub ray_token_stdin: bool,
    /// Start Ray WITHOUT token authentication (`cluster up --insecure-ray`).
    #[arg(long)]
    pub insecure_ray: bool,
    /// A variable some node of the cluster sets for itself (any node's `env` in cluster.toml; repeat): listed in vLLM's file here too, as vLLM reads the head's list for every worker.
    #[arg(long, value_name = "NAME", value_parser = per_node_name)]
    pub per_node_name: Vec<String>,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
}

/// `halobox cluster status`.
#[derive(Debug, Args)]
pub struct ClusterStatusArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `halobox cluster refresh`.
#[derive(Debug, Args)]
pub struct ClusterRefreshArgs {
    /// Channel: the tag pulled when the image names a repository without a tag.
    #[arg(value_enum, default_value_t = Channel::Latest)]
    pub channel: Channel,
    /// Image repository or reference (default: HALOBOX_IMAGE, this machine's config `image`, or this project's image).
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,
    /// When Ray (or engine llama.cpp's RPC servers) runs, or whether it runs cannot be told: stop it for the swap (cluster down) and start it again (cluster up).
    #[arg(long)]
    pub restart: bool,
    /// When each node pulls the image (the nodes' `refresh --pull`, with --from-registry, which it implies): always (default for a registry image), missing, never; a localhost/ image is used from each node's engine and must have the same image id on every node.
    #[arg(long, value_enum, value_name = "WHEN")]
    pub pull: Option<crate::refresh::pull::PullPolicy>,
    /// Every node pulls the image from its registry on its own (the old way), instead of the head getting it once and every other node receiving the layers it lacks over the data plane (`halobox image sync`).
    #[arg(long)]
    pub from_registry: bool,
    /// Memlock limit for the containers (the nodes' `refresh --memlock`; default unlimited).
    #[arg(long, value_name = "SIZE")]
    pub memlock: Option<crate::container::memlock::MemlockRequest>,
    /// Prove the new containers with the recorded serve (the default while one is recorded): `halobox check` in each staged container, then after the swap the serve again, its golden tokens and a short soak; any failure puts every node back on its old container and the old serve.
    #[arg(long, conflicts_with = "no_verify")]
    pub verify: bool,
    /// Swap without the proof, even while a serve is recorded.
    #[arg(long)]
    pub no_verify: bool,
    /// With --verify: greedy tokens that differ on the new image (an engine that changed) are recorded as the new golden set instead of rolling back.
    #[arg(long, conflicts_with = "no_verify")]
    pub accept_tokens: bool,
    /// With --verify: how long the soak after the swap runs (90s, 10m).
    #[arg(long, value_name = "D", default_value = "30s", value_parser = crate::bench::soak::plan::parse_duration)]
    pub soak: u64,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
    #[command(flatten)]
    pub confirm: YesArgs,
}

/// `halobox cluster install`.
#[derive(Debug, Args)]
pub struct ClusterInstallArgs {
    /// Where halobox goes on the nodes (default: this binary's own path here).
    #[arg(long, value_name = "PATH")]
    pub halobox: Option<std::path::PathBuf>,
    /// Seconds the transfer to each node may take, 1..86400 (a node that stops reading is given up on then).
    #[arg(long, value_name = "S", default_value_t = crate::fleet::install::SEND_TIMEOUT_S, value_parser = crate::units::parse_timeout)]
    pub timeout: u64,
    /// Put every node back on the halobox the last install replaced (DEST.halobox-prev).
    #[arg(long)]
    pub rollback: bool,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub plan: DryRunArgs,
}

/// `halobox cluster down`.
#[derive(Debug, Args)]
pub struct ClusterDownArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub plan: DryRunArgs,
}

/// `halobox cluster enable` and `cluster disable`.
#[derive(Debug, Args)]
pub struct ClusterBootArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub plan: DryRunArgs,
}

/// `halobox cluster doctor`.
#[derive(Debug, Args)]
pub struct ClusterDoctorArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `halobox cluster bench`.
#[derive(Debug, Args)]
pub struct ClusterBenchArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// Which pairs: every pair, or the head with every other node.
    #[arg(long, value_enum, default_value_t = crate::fleet::bench::Pairs::All)]
    pub pairs: crate::fleet::bench::Pairs,
    /// Save every pair's run under DIR (default: $XDG_STATE_HOME/halobox/bench/<UTC time>-cluster).
    #[arg(long, value_name = "DIR")]
    pub save: Option<std::path::PathBuf>,
    /// Seconds per bandwidth test of each pair.
    #[arg(long, value_name = "S", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub duration: u32,
    /// Run the RDMA legs even where no RDMA endpoint was found (their failure is diagnosed).
    #[arg(long, conflicts_with = "no_rdma")]
    pub rdma: bool,
    /// Do not run the RDMA legs.
    #[arg(long)]
    pub no_rdma: bool,
    /// Then run `bench collective` across every node with its defaults (saved in DIR/collective).
    #[arg(long)]
    pub collective: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `halobox serve`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ServeArgs {
    /// What to do with a serve that runs (instead of starting one).
    #[command(subcommand)]
    pub action: Option<ServeAction>,
    /// The model: for vLLM a Hugging Face id, or a folder at the same path in every node's container; for llama.cpp a GGUF file in the head's container.
    #[arg(required_unless_present = "recorded")]
    pub model: Option<String>,
    /// Start the serve `cluster enable` kept for boot (every other flag comes from that record), in the foreground: what the boot unit runs.
    #[arg(long, conflicts_with_all = ["model", "detach", "tp", "max_model_len", "host", "no_api_key", "engine"])]
    pub recorded: bool,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// The engine; cluster.toml's `engine` names it (default vllm), as `cluster up` starts what it needs: given, it must agree. llama.cpp runs llama-server on the head and uses the RPC servers `cluster up` started on the other nodes (llama.cpp's MPI backend was removed upstream, PR #7395: RPC replaces it).
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<crate::cluster::config::Engine>,
    /// Tensor-parallel size (default: the split `halobox plan` chooses for this cluster; with `--pipeline-parallel-size` given after `--`, the nodes divided by it); tp × pp must fit one GPU per node.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub tp: Option<u32>,
    /// `--max-model-len`: tokens, or `auto` for the longest context `halobox plan` says the split fits (vLLM).
    #[arg(long, value_name = "L|auto")]
    pub max_model_len: Option<crate::serve::request::MaxLen>,
    /// Fraction of GPU memory vLLM may take (above 0.90 unified-memory hosts may swap).
    #[arg(long, value_name = "U", default_value_t = 0.90)]
    pub gpu_memory_utilization: f64,
    /// `--enforce-eager` (the default: CUDA-graph capture can deadlock on these APUs).
    #[arg(long, overrides_with = "no_eager")]
    pub eager: bool,
    /// Allow CUDA-graph capture.
    #[arg(long, overrides_with = "eager")]
    pub no_eager: bool,
    /// The API's bind address (default: the head's data-plane address; the LAN address or 0.0.0.0 only when you mean it).
    #[arg(long, value_name = "ADDR")]
    pub host: Option<IpAddr>,
    /// The API port.
    #[arg(long, value_name = "P", default_value_t = crate::serve::DEFAULT_PORT)]
    pub port: u16,
    /// Serve without an API key (by default one is required: VLLM_API_KEY from the environment, else the cluster's, made once and kept 0600 next to cluster.toml).
    #[arg(long)]
    pub no_api_key: bool,
    /// Remove vLLM's compile cache (${VLLM_CACHE_ROOT:-~/.cache/vllm}/torch_compile_cache) in the head's container first: after a crash.
    #[arg(long)]
    pub clear_cache: bool,
    /// Set NCCL_DEBUG=INFO and report which transport NCCL really used.
    #[arg(long)]
    pub nccl_debug: bool,
    /// Return once the API answers and leave vLLM running (then `serve status`, `serve logs`, `serve stop`).
    #[arg(long)]
    pub detach: bool,
    /// Run `bench collective` (an all-reduce at 64K and 1M across every node, in the containers) before vLLM starts, and refuse to serve when it fails: wrong sums, or RCCL on sockets in a RoCE cluster.
    #[arg(long)]
    pub preflight: bool,
    /// Start even when the fit check says the model does not fit (it warns loudly): for when you know better than its arithmetic (`halobox plan MODEL` shows it).
    #[arg(long)]
    pub no_fit_check: bool,
    /// Seconds vLLM may take until its API answers and lists the model.
    #[arg(long, value_name = "S", default_value_t = crate::serve::DEFAULT_TIMEOUT_S, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,
    /// Restart the serve after a failure, at most MAX times (default 5) in 10 minutes: `on-failure` or `on-failure:MAX`. A supervisor watches it (detached with --detach, else this process): the log, /health, llama.cpp's 1-token probe and RPC ports, and requests running with no token for --stall-timeout.
    #[arg(long, value_name = "on-failure[:MAX]")]
    pub restart: Option<crate::serve::restart_policy::Policy>,
    /// Under --restart: seconds requests may run without a new token before the engine counts as stalled.
    #[arg(long, value_name = "S", default_value_t = crate::serve::restart_policy::DEFAULT_STALL_S, value_parser = clap::value_parser!(u64).range(10..=86400), requires = "restart")]
    pub stall_timeout: u64,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub plan: DryRunArgs,
    /// Extra `vllm serve` arguments.
    #[arg(last = true)]
    pub extra: Vec<String>,
}

impl ServeArgs {
    /// The serve these flags ask for (the one conversion from flags to a
    /// [`Request`](crate::serve::request::Request)).
    pub fn request(&self) -> crate::serve::request::Request {
        use crate::serve::request::{Request, Spec};
        Request {
            spec: Spec {
                model: self.model.clone().unwrap_or_default(),
                tp: self.tp,
                max_model_len: match self.max_model_len {
                    Some(crate::serve::request::MaxLen::Tokens(n)) => Some(n),
                    _ => None,
                },
                max_model_len_auto: self.max_model_len == Some(crate::serve::request::MaxLen::Auto),
                gpu_memory_utilization: (self.gpu_memory_utilization
                    != crate::serve::plan::SAFE_GPU_MEMORY)
                    .then_some(self.gpu_memory_utilization),
                no_eager: self.no_eager,
                host: self.host,
                port: self.port,
                no_api_key: self.no_api_key,
                nccl_debug: self.nccl_debug,
                no_fit_check: self.no_fit_check,
                timeout: self.timeout,
                restart: self.restart,
                stall_timeout: (self.stall_timeout
                    != crate::serve::restart_policy::DEFAULT_STALL_S)
                    .then_some(self.stall_timeout),
                extra: self.extra.clone(),
            },
            engine: self.engine,
            clear_cache: self.clear_cache,
            preflight: self.preflight,
            detach: self.detach,
            dry_run: self.plan.dry_run,
            sysroot: self.source.sysroot.clone(),
            restarted: false,
        }
    }
}

/// `halobox serve status|logs|stop`.
#[derive(Debug, Subcommand)]
pub enum ServeAction {
    /// Model, endpoint, uptime, health and the nodes its workers run on.
    #[command(
        after_help = "Examples:\n  halobox serve status\n  halobox serve status --json | jq .state\n\nExit 0 while it serves, 3 otherwise."
    )]
    Status {
        #[command(flatten)]
        file: ClusterFileArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The engine's log (in the head's container).
    #[command(
        after_help = "Examples:\n  halobox serve logs\n  halobox serve logs -f\n  halobox serve logs -n 1000 | grep ERROR"
    )]
    Logs {
        /// Keep printing what it writes (until Ctrl-C).
        #[arg(short, long)]
        follow: bool,
        /// How many lines back to start.
        #[arg(short = 'n', long, value_name = "N", default_value_t = 100)]
        lines: usize,
        #[command(flatten)]
        file: ClusterFileArgs,
    },
    /// Stop vLLM on every node and remove the shared-memory segments it leaves.
    #[command(
        after_help = "Examples:\n  halobox serve stop\n  halobox serve stop --cluster ~/lab/cluster.toml"
    )]
    Stop {
        #[command(flatten)]
        file: ClusterFileArgs,
    },
    /// The greedy completions recorded when the serve first answered: asked again and compared (the first differing token named), or recorded anew.
    #[command(
        after_help = "Examples:\n  halobox serve golden\n  halobox serve golden --json\n  halobox serve golden --record     (after an engine upgrade whose new tokens you accept)\n\nExit 0 when the serve gives every recorded completion (or a new set was recorded), 1 when one differs."
    )]
    Golden {
        /// Record the serve's completions now as the golden set, replacing the one recorded.
        #[arg(long)]
        record: bool,
        #[command(flatten)]
        file: ClusterFileArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// The detached supervisor of a serve started with `--restart` (started by `serve --detach`, not by hand).
    #[command(hide = true)]
    Supervise {
        #[command(flatten)]
        file: ClusterFileArgs,
    },
}

/// `--per-node-name NAME`: a plain variable name.
fn per_node_name(s: &str) -> Result<String, String> {
    crate::cluster::env::check_name(s)?;
    Ok(s.to_string())
}

/// `halobox cluster top`.
#[derive(Debug, Args)]
pub struct ClusterTopArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// The port `halobox metrics` listens on on every node.
    #[arg(long, value_name = "P", default_value_t = crate::metrics::serve::DEFAULT_PORT)]
    pub metrics_port: u16,
    /// The port of the serve's API on the head (`halobox serve --port`).
    #[arg(long, value_name = "P", default_value_t = crate::serve::DEFAULT_PORT)]
    pub serve_port: u16,
}

/// `halobox cluster metrics`.
#[derive(Debug, Args)]
pub struct ClusterMetricsArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// Print a Prometheus `scrape_configs:` document instead of the list.
    #[arg(long)]
    pub prometheus_config: bool,
    /// The port `halobox metrics` listens on on every node.
    #[arg(long, value_name = "P", default_value_t = crate::metrics::serve::DEFAULT_PORT)]
    pub metrics_port: u16,
    /// The port of the serve's API on the head (`halobox serve --port`).
    #[arg(long, value_name = "P", default_value_t = crate::serve::DEFAULT_PORT)]
    pub serve_port: u16,
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use clap::Parser as _;

    use crate::cli::{Cli, Command};
    use crate::serve::request::Request;
    use crate::serve::state::ServeState;

    fn parse(argv: &[String]) -> crate::cli::ServeArgs {
        let cli =
            Cli::try_parse_from(std::iter::once("halobox".to_string()).chain(argv.iter().cloned()))
                .unwrap();
        let Some(Command::Serve(a)) = cli.command else {
            panic!("not a serve")
        };
        a
    }

    /// What `serve` records starts the same serve again, detached.
    #[test]
    fn the_recorded_arguments_start_the_same_serve() {
        let a = parse(
            &[
                "serve",
                "/models/m.gguf",
                "--tp",
                "2",
                "--max-model-len",
                "4096",
                "--gpu-memory-utilization",
                "0.8",
                "--no-eager",
                "--host",
                "10.0.0.1",
                "--port",
                "8011",
                "--no-api-key",
                "--nccl-debug",
                "--timeout",
                "60",
                "--restart",
                "on-failure:3",
                "--stall-timeout",
                "30",
                "--clear-cache",
                "--preflight",
                "--",
                "--seed",
                "1",
                "--flag=a b",
            ]
            .map(String::from),
        );
        let rec = a.request().spec;
        let again = parse(&rec.argv(Path::new("/c/cluster.toml")));
        assert_eq!(again.request(), Request::again(rec.clone()));
        assert!(again.detach);
        assert!(
            !again.clear_cache && !again.preflight,
            "one-off flags are not repeated"
        );
        assert_eq!(
            again.file.cluster.as_deref(),
            Some(Path::new("/c/cluster.toml"))
        );
        assert_eq!(again.request().spec, rec);
        let plain = parse(&["serve", "m"].map(String::from)).request().spec;
        assert_eq!(
            plain.argv(Path::new("/c.toml")),
            [
                "serve",
                "m",
                "--cluster=/c.toml",
                "--port=8000",
                "--timeout=1800",
                "--detach"
            ]
        );
    }

    /// A record of an older halobox (no arguments) still loads.
    #[test]
    fn an_old_record_loads_without_arguments() {
        let old = r#"{"cluster":"/c.toml","engine":"vllm","model":"m","endpoint":"http://10.0.0.1:8000","started":1,"pid":2,"container":"vllm","api_key":true,"detached":true}"#;
        let s: ServeState = serde_json::from_str(old).unwrap();
        assert_eq!(s.args, None);
    }
}
