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
}
