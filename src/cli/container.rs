//! `refresh`, `enter`, `check`, `list` and `rm`: this node's containers.

use clap::Args;

use super::common::{Channel, EngineArgs, OutputArgs, PlanOutputArgs, YesArgs};

/// `halobox refresh`.
#[derive(Debug, Args)]
pub struct RefreshArgs {
    /// Channel: the tag pulled when the image names a repository without a tag.
    #[arg(value_enum, default_value_t = Channel::Latest)]
    pub channel: Channel,
    /// Image repository or reference (default: config `image`, HALOBOX_IMAGE, or this project's ghcr.io/halobox/vllm-therock-gfx1151).
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,
    /// Container name (default: config `name`, or `vllm`).
    #[arg(long)]
    pub name: Option<String>,
    /// How to make the container (default: config, or toolbox when installed with podman, else the engine).
    #[arg(long, value_enum)]
    pub backend: Option<crate::backend::Backend>,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// When to pull the image: always (the default for a registry image), missing (only when the engine lacks it; the default for a localhost/ image), never (refuse when it is absent).
    #[arg(long, value_enum, value_name = "WHEN", conflicts_with = "rollback")]
    pub pull: Option<crate::refresh::pull::PullPolicy>,
    /// Memlock limit for the container: `unlimited` or a size (64M, 1G).
    #[arg(long, value_name = "SIZE", default_value = "unlimited")]
    pub memlock: crate::container::memlock::MemlockRequest,
    /// When the engine cannot grant the memlock asked for, use its limit (with a warning) instead of failing.
    #[arg(long)]
    pub memlock_clamp: bool,
    /// Pinned images of the repository to keep.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub keep: usize,
    /// Bring back NAME-prev, the container the last refresh replaced (with its files; the current one becomes NAME-prev, so a second rollback swaps back); with none kept, re-create from the previous pinned image.
    #[arg(long, conflicts_with = "image")]
    pub rollback: bool,
    /// Bind a host folder or file into the container: SRC:DEST[:ro|rw] (repeatable; added to
    /// the config file's `volumes`, replacing one with the same DEST). For a model store on
    /// NFS, a venv, a data folder. SRC must exist.
    #[arg(long, value_name = "SRC:DEST[:ro|rw]")]
    pub volume: Vec<String>,
    /// Seconds the new container must keep running (same start, no restart) before it replaces the old one.
    #[arg(long, value_name = "SECONDS", default_value = "3", value_parser = parse_settle)]
    pub settle: std::time::Duration,
    /// When another halobox run is changing this container, wait for it instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// Replace a container of that name that halobox did not make.
    #[arg(long)]
    pub adopt: bool,
    /// After the swap, run `halobox check` on the new container (exit 1 when a check FAILs; the container stays). With --stage: before the swap, on the staged container and the current one, the staged line naming the FAILs the current one does not have.
    #[arg(long)]
    pub check: bool,
    /// For `cluster refresh`: stop before the swap with the checked new container under its temporary name, print it, then wait for a line on stdin: `commit` swaps it in, anything else removes it (the end of stdin: SIGTERM).
    #[arg(long, hide = true, conflicts_with_all = ["rollback", "discard_staged"])]
    pub stage: bool,
    /// For `cluster refresh`: remove the container --stage left.
    #[arg(long, hide = true, conflicts_with = "rollback")]
    pub discard_staged: bool,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
    #[command(flatten)]
    pub confirm: YesArgs,
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

/// `halobox check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Container name (default: config `name`, or `vllm`).
    pub name: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `halobox list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `halobox rm`.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// Container name.
    pub name: String,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub confirm: YesArgs,
}

/// `--settle`: seconds, 0 to 600.
fn parse_settle(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.0..=600.0).contains(&secs) {
        return Err(format!("{s} is outside 0..600 seconds"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}
