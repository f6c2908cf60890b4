//! `detect` and `doctor`: the host's facts and checks.

use std::net::Ipv4Addr;

use clap::Args;

use super::common::{OutputArgs, SourceArgs};

/// `halobox detect`.
#[derive(Debug, Args)]
pub struct DetectArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Do not run each tool for its version (faster).
    #[arg(long)]
    pub no_versions: bool,
}

/// `halobox doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// The node's data-plane IPv4 address (default: the only address on an RDMA interface).
    #[arg(long, value_name = "ADDR")]
    pub ip: Option<Ipv4Addr>,
    /// A peer's data-plane IPv4 address whose route to check (repeatable; default: the other nodes of cluster.toml).
    #[arg(long, value_name = "IP")]
    pub peer: Vec<Ipv4Addr>,
}
