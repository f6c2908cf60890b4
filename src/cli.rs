//! The command-line interface definition (also used for completions and the
//! man page).

use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// halobox: one tool for Strix Halo (gfx1151) vLLM clusters over RoCE v2.
#[derive(Debug, Parser)]
#[command(
    name = "halobox",
    version,
    about = "Inspect, containerise and cluster AMD Strix Halo (gfx1151) nodes for vLLM over RoCE v2",
    after_help = "Examples:\n  halobox doctor                      check this node and print the fixes\n  halobox doctor --ip 192.168.100.1   check the data plane that carries that address\n  halobox detect --json               every host fact as JSON\n  halobox completions bash > ~/.local/share/bash-completion/completions/halobox"
)]
pub struct Cli {
    /// When to colour output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Colour policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when writing to a terminal and NO_COLOR is unset.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

/// halobox's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read the host's GPU, RDMA, network, limits, groups and kernel facts.
    #[command(
        after_help = "Examples:\n  halobox detect\n  halobox detect --json | jq '.rdma.devices[].ports[].gids'\n  halobox detect --sysroot tests/fixtures/hosts/strix-e810\n\nThe JSON schema is docs/host-facts.schema.json (schema_version 1)."
    )]
    Detect(DetectArgs),
    /// Check that this node is ready for the cluster and say how to fix what is not.
    #[command(
        after_help = "Examples:\n  halobox doctor\n  halobox doctor --ip 192.168.100.1\n  halobox doctor --json --sysroot tests/fixtures/hosts/broken-e810\n\nExit status: 0 when nothing FAILs, 1 when a check FAILs, 2 on a usage error."
    )]
    Doctor(DoctorArgs),
    /// Pull the image and (re)create this node's container with GPU, RDMA and memlock set up.
    #[command(
        after_help = "Examples:\n  halobox refresh                         latest image, default backend, memlock unlimited\n  halobox refresh dev --backend podman\n  halobox refresh --image 127.0.0.1:5000/halobox/test --name vllm --memlock 8M\n  halobox refresh --dry-run               print the plan and the equivalent podman command\n  halobox refresh --rollback              back to the previous pinned image\n\nThe old container is replaced only after the new one runs; any failure before that leaves it as it was."
    )]
    Refresh(RefreshArgs),
    /// Open a shell in a halobox container, or run a command there.
    #[command(
        after_help = "Examples:\n  halobox enter\n  halobox enter vllm -- rocminfo\n  halobox enter -- ulimit -l\n\nThe command's exit code is halobox's exit code."
    )]
    Enter(EnterArgs),
    /// List the containers halobox made.
    #[command(after_help = "Examples:\n  halobox list\n  halobox list --json")]
    List(ListArgs),
    /// Remove a container halobox made.
    #[command(after_help = "Examples:\n  halobox rm vllm\n  halobox rm vllm --yes")]
    Rm(RmArgs),
    /// Run one Ray cluster over the nodes of cluster.toml (first node = head).
    #[command(
        subcommand,
        after_help = "Examples:\n  halobox cluster init --node root@node1,192.168.100.1 --node root@node2,192.168.100.2\n  halobox cluster up --dry-run\n  halobox cluster up\n  halobox cluster status --json\n  halobox cluster down\n\nThe file is ~/.config/halobox/cluster.toml unless --cluster FILE is given.\nssh runs with BatchMode=yes: key authentication and a known host key are required."
    )]
    Cluster(ClusterCommand),
    /// Start `vllm serve` on the cluster's head, tensor-parallel over Ray (run it on the head).
    #[command(
        after_help = "Examples:\n  halobox serve Qwen/Qwen3-30B-A3B --dry-run\n  HF_TOKEN=hf_... halobox serve meta-llama/Llama-3.1-70B-Instruct --max-model-len 32768\n  halobox serve MODEL --tp 2 --nccl-debug -- --max-num-seqs 8\n\nHF_TOKEN is read from this environment and handed to vLLM on stdin: it never appears in a command line, a log or --dry-run."
    )]
    Serve(ServeArgs),
    /// Build an image from images/<name>.toml through the engine's build API (classic builder).
    #[command(
        after_help = "Examples:\n  halobox build                                   vllm-therock-gfx1151, tagged localhost/vllm-therock-gfx1151:latest\n  halobox build rccl-gfx1151 --tag localhost/rccl-gfx1151:ci\n  halobox build --build-arg VLLM_COMMIT=<40 hex> --dry-run\n\nThe definition pins every input; --build-arg overrides are checked the same way."
    )]
    Build(BuildArgs),
    /// Change an image without rebuilding it.
    #[command(
        subcommand,
        after_help = "Examples:\n  halobox image add-layer localhost/vllm-therock-gfx1151:latest --add build/librccl.so.1:/opt/rocm/lib/librccl.so.1:0755 --tag localhost/vllm:rccl-fix --load"
    )]
    Image(ImageCommand),
    /// Tag an image with its channel, date and commit, set its OCI labels, and push every tag.
    #[command(
        after_help = "Examples:\n  halobox publish localhost/vllm-therock-gfx1151:latest --channel dev --to docker.io/me/vllm-therock-gfx1151\n  halobox publish IMAGE --channel latest --dry-run\n  halobox publish --promote dev latest --to docker.io/me/vllm-therock-gfx1151\n\nCredentials: HALOBOX_REGISTRY_USER/HALOBOX_REGISTRY_PASSWORD, else the engines' auth files; never printed."
    )]
    Publish(PublishArgs),
    /// Measure Ethernet (TCP) against RDMA between this node and a peer.
    #[command(
        subcommand,
        after_help = "Examples:\n  halobox bench run                        (the peer from ~/.config/halobox/cluster.toml)\n  halobox bench run --peer-node node2 --dry-run\n  halobox bench run --peer node2 --peer-ip 192.168.100.2\n  halobox bench run --peer node2 --peer-ip 192.168.100.2 --dry-run\n  halobox bench report ~/.local/state/halobox/bench/20250101T120000Z\n  halobox bench compare RUN_A RUN_B"
    )]
    Bench(BenchCommand),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  halobox completions bash > ~/.local/share/bash-completion/completions/halobox\n  halobox completions zsh > ~/.zfunc/_halobox\n  halobox completions fish > ~/.config/fish/completions/halobox.fish"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into a directory.
    #[command(
        after_help = "Examples:\n  halobox man | man -l -\n  halobox man --out-dir /usr/local/share/man/man1"
    )]
    Man {
        /// Write halobox.1 and halobox-<command>.1 here instead of printing halobox.1.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

/// Where host facts come from.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Read a snapshot tree (sys/, proc/, dev/, etc/, captured/) instead of this host.
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `halobox detect`.
#[derive(Debug, Args)]
pub struct DetectArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Do not run each tool for its version (faster).
    #[arg(long)]
    pub no_versions: bool,
}

/// `halobox doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The node's data-plane IPv4 address (default: the only address on an RDMA interface).
    #[arg(long, value_name = "ADDR")]
    pub ip: Option<Ipv4Addr>,
    /// A peer's data-plane IPv4 address whose route to check (repeatable; default: the other nodes of cluster.toml).
    #[arg(long, value_name = "IP")]
    pub peer: Vec<Ipv4Addr>,
}

/// The engine to talk to.
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Engine API address (unix:///run/podman/podman.sock, tcp://host:2375); default: discovered.
    #[arg(long, value_name = "URL")]
    pub engine: Option<String>,
}

/// Image channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Channel {
    /// The released image.
    Latest,
    /// The development image.
    Dev,
}

impl Channel {
    /// The tag the channel pulls.
    pub fn tag(self) -> &'static str {
        match self {
            Channel::Latest => "latest",
            Channel::Dev => "dev",
        }
    }
}

/// `halobox refresh`.
#[derive(Debug, Args)]
pub struct RefreshArgs {
    /// Channel: the tag pulled when the image names a repository without a tag.
    #[arg(value_enum, default_value_t = Channel::Latest)]
    pub channel: Channel,
    /// Image repository or reference (default: config `image`, HALOBOX_IMAGE, or the community image).
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,
    /// Container name (default: config `name`, or `vllm`).
    #[arg(long)]
    pub name: Option<String>,
    /// How to make the container (default: config, or toolbox when installed with podman, else the engine).
    #[arg(long, value_enum)]
    pub backend: Option<crate::container::backend::Backend>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Memlock limit for the container: `unlimited` or a size (64M, 1G).
    #[arg(long, value_name = "SIZE", default_value = "unlimited")]
    pub memlock: crate::container::memlock::MemlockRequest,
    /// When the engine cannot grant the memlock asked for, use its limit (with a warning) instead of failing.
    #[arg(long)]
    pub memlock_clamp: bool,
    /// Pinned images of the repository to keep.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub keep: usize,
    /// Re-create the container from the previous pinned image.
    #[arg(long, conflicts_with = "image")]
    pub rollback: bool,
    /// Replace a container of that name that halobox did not make.
    #[arg(long)]
    pub adopt: bool,
    /// Print the plan and the equivalent commands; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Do not ask before replacing a container.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `halobox enter`.
#[derive(Debug, Args)]
pub struct EnterArgs {
    /// Container name (default: config `name`, or `vllm`).
    pub name: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Command to run instead of a shell.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// `halobox list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `halobox rm`.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// Container name.
    pub name: String,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Do not ask.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// Which cluster file.
#[derive(Debug, Args)]
pub struct ClusterFileArgs {
    /// The cluster file (default: ~/.config/halobox/cluster.toml).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
}

/// `halobox cluster` subcommands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Write cluster.toml from flags (or prompts on a terminal).
    #[command(
        after_help = "Examples:\n  halobox cluster init --node root@node1,192.168.100.1 --node root@node2,192.168.100.2\n  halobox cluster init --node n1,10.0.0.1 --node n2,10.0.0.2 --backend podman --container vllm --transport roce --print"
    )]
    Init(ClusterInitArgs),
    /// Preflight every node, start the Ray head, then every worker, and wait until Ray lists them all.
    #[command(
        after_help = "Examples:\n  halobox cluster up\n  halobox cluster up --dry-run\n  halobox cluster up --cluster ./cluster.toml --timeout 120"
    )]
    Up(ClusterUpArgs),
    /// Start Ray on this node with the env computed from its own facts (what `up` runs on each node).
    #[command(
        after_help = "Examples:\n  halobox cluster join --head 192.168.100.1 --ip 192.168.100.2 --dry-run\n  halobox cluster join --head 192.168.100.1 --ip 192.168.100.1 --sysroot tests/fixtures/hosts/strix-e810 --dry-run"
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
    /// An interactive menu over init, up, status, down and serve.
    #[command(after_help = "Examples:\n  halobox cluster tui")]
    Tui(ClusterFileArgs),
}

/// `halobox cluster init`.
#[derive(Debug, Args)]
pub struct ClusterInitArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// A node as SSH_TARGET,IP (repeat; the first is the head).
    #[arg(long, value_name = "SSH_TARGET,IP")]
    pub node: Vec<String>,
    /// Container name on every node.
    #[arg(long, default_value = "vllm")]
    pub container: String,
    /// Where Ray runs on every node.
    #[arg(long, value_enum, default_value_t = crate::cluster::config::NodeBackend::Toolbox)]
    pub backend: crate::cluster::config::NodeBackend,
    /// NCCL transport.
    #[arg(long, value_enum, default_value_t = crate::cluster::config::Transport::Auto)]
    pub transport: crate::cluster::config::Transport,
    /// The head's Ray port.
    #[arg(long, value_name = "P", default_value_t = crate::cluster::config::DEFAULT_RAY_PORT)]
    pub port: u16,
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
    /// Run the preflight and print every node's env and command; start nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds to wait for every node to register with Ray (default: cluster.toml's timeout_s).
    #[arg(long, value_name = "S")]
    pub timeout: Option<u64>,
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
    /// The head's Ray port.
    #[arg(long, value_name = "P", default_value_t = crate::cluster::config::DEFAULT_RAY_PORT)]
    pub port: u16,
    /// NCCL transport.
    #[arg(long, value_enum, default_value_t = crate::cluster::config::Transport::Auto)]
    pub transport: crate::cluster::config::Transport,
    /// Where Ray runs.
    #[arg(long, value_enum, default_value_t = crate::cluster::config::NodeBackend::Toolbox)]
    pub backend: crate::cluster::config::NodeBackend,
    /// Container name.
    #[arg(long, default_value = "vllm")]
    pub container: String,
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
    /// Read a snapshot tree instead of this host (implies nothing is started: use --dry-run).
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Print the env (NAME=value lines) and the exact `ray start` command; start nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: print the node's report as JSON (what `up` reads).
    #[arg(long)]
    pub json: bool,
}

/// `halobox cluster status`.
#[derive(Debug, Args)]
pub struct ClusterStatusArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `halobox cluster down`.
#[derive(Debug, Args)]
pub struct ClusterDownArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// Print the commands; stop nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `halobox serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The model (Hugging Face id or a path on every node).
    pub model: String,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    /// Tensor-parallel size (default: the number of nodes).
    #[arg(long, value_name = "N")]
    pub tp: Option<u32>,
    /// `--max-model-len`.
    #[arg(long, value_name = "L")]
    pub max_model_len: Option<u32>,
    /// Fraction of GPU memory vLLM may take (above 0.90 unified-memory hosts may swap).
    #[arg(long, value_name = "U", default_value_t = 0.90)]
    pub gpu_memory_utilization: f64,
    /// `--enforce-eager` (the default: CUDA-graph capture can deadlock on these APUs).
    #[arg(long, overrides_with = "no_eager")]
    pub eager: bool,
    /// Allow CUDA-graph capture.
    #[arg(long, overrides_with = "eager")]
    pub no_eager: bool,
    /// The API port.
    #[arg(long, value_name = "P", default_value_t = 8000)]
    pub port: u16,
    /// Set NCCL_DEBUG=INFO and report which transport NCCL really used.
    #[arg(long)]
    pub nccl_debug: bool,
    /// Read a snapshot tree instead of this host (only with --dry-run).
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
    /// Print the command and env (secrets masked); run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Extra `vllm serve` arguments.
    #[arg(last = true)]
    pub extra: Vec<String>,
}

/// `halobox build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Image name (images/<name>.toml) or a definition file.
    #[arg(default_value = "vllm-therock-gfx1151")]
    pub image: String,
    /// Stage to build (default: the definition's target).
    #[arg(long, value_name = "STAGE")]
    pub target: Option<String>,
    /// Override a build arg (KEY=VALUE; pins are checked like the definition's).
    #[arg(long, value_name = "KEY=VALUE")]
    pub build_arg: Vec<String>,
    /// Tag of the result (repeatable; default: localhost/<name>:latest).
    #[arg(long, value_name = "REF")]
    pub tag: Vec<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Print the resolved build (file, args, labels, tags); build nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `halobox image` subcommands.
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Add one reproducible layer of local files to an image, without a rebuild.
    #[command(
        after_help = "Examples:\n  halobox image add-layer localhost/vllm-therock-gfx1151:latest --add ./librccl.so.1:/opt/rocm/lib/librccl.so.1:0644 --tag localhost/vllm-therock-gfx1151:rccl --load\n  halobox image add-layer base.tar --add ./tool:/usr/local/bin/tool --output image.tar\n\nSame inputs, same digests: entries sorted, uid/gid 0, mtime SOURCE_DATE_EPOCH (or 0), modes 0644/0755 unless given.\nThe archive holds an OCI layout and docker's manifest.json: `podman load` and `docker load` both take it."
    )]
    AddLayer(AddLayerArgs),
}

/// `halobox image add-layer`.
#[derive(Debug, Args)]
pub struct AddLayerArgs {
    /// Base image: a reference in the engine, or an image archive file (OCI or docker).
    pub base: String,
    /// SRC:DEST[:MODE] — a local file or folder, its absolute path in the image, an octal mode.
    #[arg(long, value_name = "SRC:DEST[:MODE]", required = true)]
    pub add: Vec<crate::image::layer::AddSpec>,
    /// Name of the new image (required with --load).
    #[arg(long, value_name = "REF")]
    pub tag: Option<String>,
    /// Label to set (KEY=VALUE, repeatable; KEY= removes it).
    #[arg(long, value_name = "KEY=VALUE")]
    pub label: Vec<String>,
    /// Write the image archive here.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Load the result into the engine.
    #[arg(long)]
    pub load: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Print what would be added; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `halobox publish`.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The local image to publish.
    #[arg(required_unless_present = "promote", conflicts_with = "promote")]
    pub reference: Option<String>,
    /// Channel tag to move to this image.
    #[arg(long, value_enum, required_unless_present = "promote")]
    pub channel: Option<Channel>,
    /// Repository to push to (default: config `image`, HALOBOX_IMAGE, or the community image).
    #[arg(long, value_name = "REPO")]
    pub to: Option<String>,
    /// Re-tag the image of one channel as another (pull FROM, push as TO), without a rebuild.
    #[arg(long, num_args = 2, value_names = ["FROM", "TO"], value_enum, conflicts_with = "channel")]
    pub promote: Vec<Channel>,
    /// Git commit for `sha-<7 hex>` and the revision label (default: `git rev-parse HEAD`).
    #[arg(long, value_name = "SHA")]
    pub revision: Option<String>,
    /// Source URL label (default: the `origin` remote, or the image's label).
    #[arg(long, value_name = "URL")]
    pub source: Option<String>,
    /// Version label (default: the image's, else the date tag).
    #[arg(long, value_name = "V")]
    pub version: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Print the tags, labels and credential source; push nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `halobox bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Run the benchmark against a peer (servers started there over ssh).
    #[command(
        after_help = "Examples:\n  halobox bench run                        (the peer from ~/.config/halobox/cluster.toml)\n  halobox bench run --peer-node node2 --dry-run\n  halobox bench run --peer node2 --peer-ip 192.168.100.2\n  halobox bench run --peer root@node2 --peer-ip 192.168.100.2 --peer-ip 10.0.0.2 --json\n  halobox bench run --peer node2 --peer-ip 192.168.100.2 --no-rdma --duration 5 --streams 8\n\nThe peer needs halobox (--peer-halobox), and for the cross-checks iperf3 and perftest.\nssh runs with BatchMode=yes: key authentication and a known host key are required."
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
    /// Re-render a saved run from its raw logs.
    #[command(
        after_help = "Examples:\n  halobox bench report ~/.local/state/halobox/bench/20260101T120000Z\n  halobox bench report RUN_DIR --json"
    )]
    Report(BenchReportArgs),
    /// Show the differences between two saved runs.
    #[command(after_help = "Examples:\n  halobox bench compare RUN_BEFORE RUN_AFTER")]
    Compare(BenchCompareArgs),
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
    /// The cluster file the peer comes from when --peer/--peer-ip do not name it (default: ~/.config/halobox/cluster.toml).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
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
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print the plan (every remote and local command) and run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run the RDMA leg even when no RDMA endpoint was found (its failure is diagnosed).
    #[arg(long, conflicts_with = "no_rdma")]
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
    /// halobox server port on the peer.
    #[arg(long, value_name = "P", default_value_t = 5301)]
    pub port: u16,
    /// Also run `ib_write_bw -a` (one QP, every message size from 2 B to 8 MiB): a row per size.
    #[arg(long, conflicts_with = "no_rdma")]
    pub sweep: bool,
    /// Latency samples (TCP round trips and ib_write_lat iterations).
    #[arg(long, value_name = "N", default_value_t = 20000, value_parser = clap::value_parser!(u32).range(100..=10_000_000))]
    pub samples: u32,
}

/// `halobox bench serve`.
#[derive(Debug, Args)]
pub struct BenchServeArgs {
    /// Port to listen on.
    #[arg(long, value_name = "P", default_value_t = 5301)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0")]
    pub bind: std::net::IpAddr,
    /// Exit after this many seconds without a connection.
    #[arg(long, value_name = "S", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub idle_timeout: u64,
}

/// `halobox bench probe`.
#[derive(Debug, Args)]
pub struct BenchProbeArgs {
    /// This node's address on the path.
    #[arg(long, value_name = "IP")]
    pub ip: Ipv4Addr,
    /// Read host files under DIR instead of / (a snapshot of another machine).
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
}

/// `halobox bench report`.
#[derive(Debug, Args)]
pub struct BenchReportArgs {
    /// A folder saved by `halobox bench run`.
    pub dir: PathBuf,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `halobox bench compare`.
#[derive(Debug, Args)]
pub struct BenchCompareArgs {
    /// The earlier run's folder.
    pub a: PathBuf,
    /// The later run's folder.
    pub b: PathBuf,
}
