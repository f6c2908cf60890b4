//! `model sync|ls|rm`: model weights in the Hugging Face cache of every
//! node of cluster.toml (and the commands halobox runs on each node for
//! them, hidden).

use clap::{Args, Subcommand};

use super::common::{ClusterFileArgs, DryRunArgs, OutputArgs, YesArgs};
use crate::model::facts::HashMode;

/// `halobox model` subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Download a model into one node's Hugging Face cache (the head's by default) with `hf download` in its container.
    #[command(
        after_help = "Examples:\n  halobox model pull Qwen/Qwen3-0.6B\n  halobox model pull Qwen/Qwen3-30B-A3B@main --include '*.safetensors' --include '*.json'\n  HF_TOKEN=hf_... halobox model pull meta-llama/Llama-3.1-8B-Instruct --on node2\n  halobox model pull Qwen/Qwen3-0.6B --dry-run\n\nIt runs huggingface_hub's `hf download` (the `hf` beside cluster.toml's `vllm` first) in the node's container, over ssh, into the cache its containers share; an interrupted pull resumes where it stopped. HF_TOKEN is read from this environment and handed over on stdin: never in a command line, a log or --dry-run. HF_HUB_OFFLINE, HF_ENDPOINT and HF_HUB_ENABLE_HF_TRANSFER are passed on. Then `halobox model sync MODEL` puts it on every node."
    )]
    Pull(ModelPullArgs),
    /// Copy a model from one node's Hugging Face cache to every node's, over the data plane, verified by sha256.
    #[command(
        after_help = "Examples:\n  halobox model sync Qwen/Qwen3-0.6B --dry-run\n  halobox model sync Qwen/Qwen3-0.6B\n  halobox model sync Qwen/Qwen3-0.6B@main --from node2 --verify\n\nOnly files a node lacks (missing, another size, or content whose sha256 is not the hub's or the source's) are sent, along a chain: each node passes the stream on while it writes, so every node takes about the time of one.\nThe bytes go over halobox's own TCP stream between the data-plane addresses of cluster.toml, opened with a random token that travels only inside ssh; each file is written under a temporary name and renamed once its sha256 matches. A second sync of a complete model reads only file sizes and times, and moves nothing.\n--verify hashes every file on every node again (a file changed behind halobox's back keeps its size and time only if someone set them back)."
    )]
    Sync(ModelSyncArgs),
    /// Show which models and revisions each node holds, their size, whether complete and verified, and free disk.
    #[command(after_help = "Examples:\n  halobox model ls\n  halobox model ls --json")]
    Ls(ModelLsArgs),
    /// Remove a model (every revision, or ORG/NAME@REV one) from every node's Hugging Face cache, asking first.
    #[command(
        after_help = "Examples:\n  halobox model rm Qwen/Qwen3-0.6B --dry-run\n  halobox model rm Qwen/Qwen3-0.6B --yes\n  halobox model rm Qwen/Qwen3-0.6B@v1 --yes    (one revision: its snapshot, its refs, the files no other revision uses)"
    )]
    Rm(ModelRmArgs),
    /// (run by halobox on a node) This node's copy of a model as JSON.
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox model node-facts Qwen/Qwen3-0.6B@main --hash new    (what `model sync` runs on each node over ssh)"
    )]
    NodeFacts {
        /// ORG/NAME[@REVISION].
        model: String,
        /// Which files to hash.
        #[arg(long, value_enum, default_value_t = HashMode::None)]
        hash: HashMode,
    },
    /// (run by halobox on a node) Every model in this node's cache as JSON.
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox model node-list    (what `model ls` runs on each node over ssh)"
    )]
    NodeList,
    /// (run by halobox on a node) Removes a model from this node's cache.
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox model node-rm Qwen/Qwen3-0.6B    (what `model rm` runs on each node over ssh)"
    )]
    NodeRm {
        /// ORG/NAME, or ORG/NAME@REVISION for one revision.
        model: String,
    },
    /// (run by halobox on a node) Receives a sync stream (the job on stdin).
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox model node-receive < job.json    (what `model sync` runs on each receiving node over ssh)"
    )]
    NodeReceive,
    /// (run by halobox on a node) Sends a sync stream (the job on stdin).
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox model node-send < job.json    (what `model sync` runs on the source node over ssh)"
    )]
    NodeSend,
}

/// `halobox model pull`.
#[derive(Debug, Args)]
pub struct ModelPullArgs {
    /// The model: ORG/NAME[@REVISION] (a branch, tag or commit; default main).
    pub model: String,
    /// The node that downloads it (a name or ssh target of cluster.toml; default: the head).
    #[arg(long, value_name = "NODE")]
    pub on: Option<String>,
    /// Download only files matching this pattern (repeatable; as `hf download --include`).
    #[arg(long, value_name = "PATTERN")]
    pub include: Vec<String>,
    /// Skip files matching this pattern (repeatable; as `hf download --exclude`).
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub mode: DryRunArgs,
}

/// `halobox model sync`.
#[derive(Debug, Args)]
pub struct ModelSyncArgs {
    /// The model: ORG/NAME[@REVISION] (a branch, tag or commit; default main).
    pub model: String,
    /// The node that holds it (a name or ssh target of cluster.toml; default: the head).
    #[arg(long, value_name = "NODE")]
    pub from: Option<String>,
    /// Hash every file on every node again, not only new or changed ones.
    #[arg(long)]
    pub verify: bool,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub mode: DryRunArgs,
}

/// `halobox model ls`.
#[derive(Debug, Args)]
pub struct ModelLsArgs {
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `halobox model rm`.
#[derive(Debug, Args)]
pub struct ModelRmArgs {
    /// The model: ORG/NAME (every revision), or ORG/NAME@REVISION (that one).
    pub model: String,
    #[command(flatten)]
    pub file: ClusterFileArgs,
    #[command(flatten)]
    pub mode: DryRunArgs,
    #[command(flatten)]
    pub confirm: YesArgs,
}
