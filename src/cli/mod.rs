//! The command-line interface definition (also used for completions and the
//! man page): the top level here, one file per command group (`host`,
//! `container`, `cluster`, `image`, `bench`, ...), and the argument groups
//! several commands share in `common.rs` (`--engine`, `--json`,
//! `--dry-run`, `--yes`, `--sysroot`, `--cluster`). The flags become the
//! library's request here (as `ServeArgs::request`).
//!
//! Doc comments here are clap's help text, written for a terminal
//! (`SRC:DEST[:MODE]`, `<UTC time>`), not as rustdoc markup.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod bench;
mod bench_collective;
mod bench_serving;
mod bench_soak;
mod cluster;
mod common;
mod container;
mod host;
mod image;
mod model;
mod plan;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

pub use bench::{
    BenchClientArgs, BenchCommand, BenchCompareArgs, BenchExecArgs, BenchLink, BenchOn,
    BenchPortArgs, BenchProbeArgs, BenchReportArgs, BenchRunArgs, BenchServeArgs, ChartArgs,
};
pub use bench_collective::BenchCollectiveArgs;
pub use bench_serving::BenchServingArgs;
pub use bench_soak::BenchSoakArgs;
pub use cluster::{
    ClusterBenchArgs, ClusterBootArgs, ClusterCommand, ClusterDoctorArgs, ClusterDownArgs,
    ClusterInitArgs, ClusterInstallArgs, ClusterJoinArgs, ClusterMetricsArgs, ClusterRefreshArgs,
    ClusterStatusArgs, ClusterTopArgs, ClusterUpArgs, RayNodeArgs, ServeAction, ServeArgs,
};
pub use common::{
    Channel, ClusterFileArgs, DryRunArgs, EngineArgs, OutputArgs, PlanOutputArgs, SourceArgs,
    YesArgs,
};
pub use container::{CheckArgs, EnterArgs, ListArgs, RefreshArgs, RmArgs};
pub use host::{DetectArgs, DoctorArgs, MetricsArgs, SetupArgs, SnapshotArgs};
pub use image::{AddLayerArgs, BuildArgs, ImageCommand, ImageSyncArgs, PublishArgs};
pub use model::{ModelCommand, ModelLsArgs, ModelPullArgs, ModelRmArgs, ModelSyncArgs};
pub use plan::PlanArgs;

/// `--version`: the version, the git commit and the build date (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HALOBOX_GIT_COMMIT"),
    ", built ",
    env!("HALOBOX_BUILD_DATE"),
    ")"
);

/// halobox: one tool for Strix Halo (gfx1151) vLLM clusters over RoCE v2.
#[derive(Debug, Parser)]
#[command(
    name = "halobox",
    version = VERSION,
    about = "Inspect, containerise and cluster AMD Strix Halo (gfx1151) nodes for vLLM over RoCE v2",
    after_help = "Examples:\n  halobox doctor                      check this node and print the fixes\n  halobox doctor --ip 192.168.100.1   check the data plane that carries that address\n  halobox detect --json               every host fact as JSON\n  halobox completions bash > ~/.local/share/bash-completion/completions/halobox"
)]
pub struct Cli {
    /// When to colour output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,
    /// The command to run (none: where to start).
    #[command(subcommand)]
    pub command: Option<Command>,
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
    /// Pack what detect and doctor read on this host into a .tar.gz, to share or to run doctor --sysroot on.
    #[command(
        after_help = "Examples:\n  halobox snapshot node1.tar.gz\n  halobox snapshot --redact node1.tar.gz              MACs, hostnames and serial numbers replaced\n  halobox snapshot --redact --redact-addresses node1.tar.gz\n  halobox snapshot --dry-run node1.tar.gz             the files it would capture\n  tar xzf node1.tar.gz && halobox doctor --sysroot node1\n\nThe archive is written beside OUT under a temporary name and renamed when complete."
    )]
    Snapshot(SnapshotArgs),
    /// Serve this node's GPU, RDMA and data-plane figures to Prometheus (GET /metrics), or print one scrape.
    #[command(
        after_help = "Examples:\n  halobox metrics                                  serve on the data-plane address, port 9837\n  halobox metrics --listen 192.168.100.1:9837 --node node1\n  halobox metrics --print\n  halobox metrics --listen 192.168.100.1:9837 --node node1 --ray --container halobox --backend podman --serve-endpoint 192.168.100.1:8000\n  halobox metrics --sysroot tests/fixtures/metrics/strix-cx5 --print --node node1\n\nRead-only: it serves GET /metrics and nothing else, holds no secret, and never listens on every interface.\nThe engine's own /metrics (vLLM, llama-server) stays the engine's."
    )]
    Metrics(MetricsArgs),
    /// Apply the host fixes doctor prints (limits, podman units, groups, kernel parameters, MTU, firewall, RoCE mode).
    #[command(
        after_help = "Examples:\n  halobox setup --dry-run                 the plan: files as diffs, commands, grouped by when they take effect\n  sudo halobox setup                      apply it, asking once per group\n  sudo halobox setup --yes --only memlock,groups\n  halobox setup --sysroot /tmp/snapshot --yes   write into a snapshot copy (commands are not run)\n  sudo halobox setup --undo               put back what setup changed\n\nEvery file changed is backed up next to itself (FILE.halobox-bak.<date>) and recorded in /var/lib/halobox/setup-journal.json."
    )]
    Setup(SetupArgs),
    /// Pull the image and (re)create this node's container with GPU, RDMA and memlock set up.
    #[command(
        after_help = "Examples:\n  halobox refresh                         latest image, default backend, memlock unlimited\n  halobox refresh dev --backend podman\n  halobox refresh --image docker.io/kyuz0/vllm-therock-gfx1151   the community image instead\n  halobox refresh --image 127.0.0.1:5000/halobox/test --name vllm --memlock 8M\n  halobox refresh --dry-run               print the plan and the equivalent podman command\n  halobox refresh --rollback              back to the previous pinned image\n  halobox refresh --check                 then check the new container from inside (halobox check)\n\nThe old container is replaced only after the new one runs; any failure before that leaves it as it was."
    )]
    Refresh(RefreshArgs),
    /// Open a shell in a halobox container, or run a command there.
    #[command(
        after_help = "Examples:\n  halobox enter\n  halobox enter vllm -- rocminfo\n  halobox enter -- ulimit -l\n\nThe command's exit code is halobox's exit code."
    )]
    Enter(EnterArgs),
    /// Check a container from inside, as its user: memlock, devices, groups, GPU, RDMA, torch, amdsmi, vLLM, RCCL, Ray.
    #[command(
        after_help = "Examples:\n  halobox check\n  halobox check vllm --json\n\nThe probe runs in the container the way `halobox enter` gets in (toolbox run, distrobox enter, or an engine exec).\nThe patched RCCL is compared with the image label io.halobox.rccl.sha256, Ray with io.halobox.ray.version.\nExit status: 0 when nothing FAILs, 1 when a check FAILs, 2 on a usage error."
    )]
    Check(CheckArgs),
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
    /// Where a model fits before anything starts: every tensor × pipeline split (or llama.cpp layer shares) on the cluster's nodes or on --nodes N --gtt SIZE, each node's weights, KV cache and what is left, the longest context, and the split to choose.
    #[command(
        after_help = "Examples:\n  halobox plan Qwen/Qwen3-32B                          on the nodes of cluster.toml (each node's GTT, as serve reads it)\n  halobox plan /models/DeepSeek-V3 --nodes 4 --gtt 128G  hardware being planned\n  halobox plan MODEL --max-model-len 32768 -- --kv-cache-dtype fp8 --max-num-seqs 8\n  halobox plan /models/model-Q4_K_M.gguf --nodes 2 --gtt 120G   llama.cpp's arithmetic\n  halobox plan MODEL --nodes 2 --gtt 128G --json | jq '.splits[] | {split, fits, max_context_that_fits}'\n\nThe KV cache is counted per layer kind as the engine counts it (full attention, MLA, sliding window, linear attention): docs/commands/plan.md gives each rule and its source.\nExit 0 when a split fits, 1 when none does, 2 on a usage error."
    )]
    Plan(PlanArgs),
    /// Serve a model on the cluster from its head: vLLM tensor-parallel over Ray, or llama.cpp's llama-server over the other nodes' RPC servers (cluster.toml `engine`; run it on the head).
    #[command(
        after_help = "Examples:\n  halobox serve Qwen/Qwen3-30B-A3B --dry-run\n  HF_TOKEN=hf_... halobox serve meta-llama/Llama-3.1-70B-Instruct --max-model-len 32768\n  halobox serve MODEL --tp 2 --nccl-debug -- --max-num-seqs 8\n  halobox serve MODEL --clear-cache -- --pipeline-parallel-size 2\n  VLLM_API_KEY=... halobox serve MODEL --host 0.0.0.0\n  halobox serve /models/Qwen3-0.6B --detach; halobox serve status; halobox serve stop\n\nIt returns (--detach) or says it serves only once the API answers and lists the model; in the foreground Ctrl-C stops vLLM on every node, and a failed engine (vLLM exits 0 even then) ends serve non-zero, naming the worker node it lost.\nHF_TOKEN and VLLM_API_KEY are read from this environment and handed to vLLM on stdin: they never appear in a command line, a log or --dry-run.\nThe API binds the head's data-plane address (--host ADDR to choose another) and requires a key: VLLM_API_KEY when set, else the cluster's own, made once and kept 0600 next to cluster.toml (the printed curl line reads it); --no-api-key turns it off.\n--dry-run prints the plan from any machine (the head's env only on the head); --sysroot goes with --dry-run.\n--clear-cache removes ${VLLM_CACHE_ROOT:-~/.cache/vllm}/torch_compile_cache in the head's container before vLLM starts (after a crash).\n\nWith engine = \"llama.cpp\" in cluster.toml, MODEL is a GGUF file in the head's container: `halobox cluster up` starts an RPC server on every other node, bound to its data-plane address only, and serve runs llama-server with --rpc listing them, -ngl 99 and --tensor-split from each node's memory; LLAMA_API_KEY goes on stdin like VLLM_API_KEY. A node that dies or freezes (a 1-token completion must finish within 20 s) is named and serve ends non-zero.\nllama.cpp's MPI backend was removed upstream (ggml-org/llama.cpp PR #7395, 2024): its RPC backend replaces it, and is what halobox runs.\n  halobox cluster up; halobox serve /models/Qwen3-8B-Q4_K_M.gguf --detach"
    )]
    Serve(ServeArgs),
    /// Model weights in every node's Hugging Face cache: sync them over the data plane, list, remove.
    #[command(
        subcommand,
        after_help = "Examples:\n  halobox model sync Qwen/Qwen3-0.6B\n  halobox model ls\n  halobox model rm Qwen/Qwen3-0.6B"
    )]
    Model(ModelCommand),
    /// Build an image from images/<name>.toml through the engine's build API (classic builder).
    #[command(
        after_help = "Examples:\n  halobox build                                   vllm-therock-gfx1151, tagged localhost/vllm-therock-gfx1151:latest\n  halobox build rccl-gfx1151 --tag localhost/rccl-gfx1151:ci\n  halobox build --build-arg RCCL=patched --dry-run\n\nThe definition pins every input; --build-arg overrides are checked the same way."
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
        after_help = "Examples:\n  halobox publish localhost/vllm-therock-gfx1151:latest --channel dev --to docker.io/me/vllm-therock-gfx1151\n  halobox publish IMAGE --channel latest --dry-run\n  halobox publish --promote dev latest --to docker.io/me/vllm-therock-gfx1151\n  halobox publish IMAGE --candidate --to REPO --revision SHA\n  halobox publish --promote-digest sha256:… --channel latest --to REPO --revision SHA\n\nCredentials: HALOBOX_REGISTRY_USER/HALOBOX_REGISTRY_PASSWORD, else the engines' auth files; never printed."
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
