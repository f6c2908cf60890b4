//! Argument groups shared by several commands: each option is defined once,
//! with one meaning and one help text, and flattened where it is used.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// Where host facts come from.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Read a snapshot tree (sys/, proc/, dev/, etc/, captured/) instead of this host.
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
}

impl SourceArgs {
    /// The host root `--sysroot` names, or the live host.
    pub fn root(&self) -> Result<crate::host::HostRoot, crate::host::RootError> {
        match &self.sysroot {
            Some(dir) => crate::host::HostRoot::sysroot(dir),
            None => Ok(crate::host::HostRoot::live()),
        }
    }
}

/// Text or JSON.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Plan only.
#[derive(Debug, Args)]
pub struct DryRunArgs {
    /// Print what would be done, with the exact commands; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Plan only, and text or JSON (commands whose plan and result both have a
/// JSON form).
#[derive(Debug, Args)]
pub struct PlanOutputArgs {
    #[command(flatten)]
    pub plan: DryRunArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

impl PlanOutputArgs {
    /// `--dry-run`.
    pub fn dry_run(&self) -> bool {
        self.plan.dry_run
    }

    /// `--json`.
    pub fn json(&self) -> bool {
        self.output.json
    }
}

/// Skip the confirmation.
#[derive(Debug, Args)]
pub struct YesArgs {
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// The engine to talk to.
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Engine API address (unix:///run/podman/podman.sock, tcp://host:2375); default: discovered.
    #[arg(long, value_name = "URL")]
    pub engine: Option<String>,
}

/// Which cluster file.
#[derive(Debug, Args)]
pub struct ClusterFileArgs {
    /// The cluster file (default: ~/.config/halobox/cluster.toml).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
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
