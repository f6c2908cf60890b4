//! `detect` and `doctor`: the host's facts and checks.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::Args;

use super::common::{DryRunArgs, OutputArgs, PlanOutputArgs, SourceArgs, YesArgs};

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
    /// The node's data-plane IPv4 address (default: the only address on an RDMA interface, else on a USB4 one).
    #[arg(long, value_name = "ADDR")]
    pub ip: Option<Ipv4Addr>,
    /// A peer's data-plane IPv4 address whose route to check (repeatable; default: the other nodes of cluster.toml).
    #[arg(long, value_name = "IP")]
    pub peer: Vec<Ipv4Addr>,
}

/// `halobox metrics`.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Print one scrape on stdout and exit instead of serving.
    #[arg(long)]
    pub print: bool,
    /// Address and port to serve on (default: the data-plane address, port 9837; never every interface).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<std::net::SocketAddr>,
    /// The `node` label (default: the host name).
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// The node's halobox container: export whether it runs (`halobox_container_running`, asked of the container engine).
    #[arg(long, value_name = "NAME")]
    pub container: Option<String>,
    /// Where the node's Ray runs (cluster.toml `backend`); with `host` no container is asked about.
    #[arg(long, value_name = "BACKEND", requires = "container")]
    pub backend: Option<crate::cluster::config::NodeBackend>,
    /// Export whether Ray's daemons run here (`halobox_ray_running`).
    #[arg(long)]
    pub ray: bool,
    /// This node is the head: export the serve's state (`halobox_serve_state`) from its API's `GET /health` at ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT")]
    pub serve_endpoint: Option<std::net::SocketAddr>,
    /// With --serve-endpoint: the cluster file whose serve record on this host says a serve was started (its endpoint is then probed instead), and whose supervisor's restarts are counted (`halobox_serve_restarts_total`).
    #[arg(long, value_name = "FILE", requires = "serve_endpoint")]
    pub serve_record: Option<std::path::PathBuf>,
}

impl MetricsArgs {
    /// The library's request: the flags as `halobox metrics` asks them.
    pub fn request(&self) -> anyhow::Result<crate::fleet::exporter::Request> {
        Ok(crate::fleet::exporter::Request {
            root: self.source.root()?,
            print: self.print,
            listen: self.listen,
            node: self.node.clone(),
            container: self
                .container
                .clone()
                .map(|c| (c, self.backend.unwrap_or_default()))
                .filter(|(_, b)| b.is_container()),
            ray: self.ray,
            serve: self.serve_endpoint.map(|a| (a, self.serve_record.clone())),
        })
    }
}

/// `halobox snapshot`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// The archive to write (`.tar.gz`); it unpacks into a folder named like it.
    #[arg(value_name = "OUT.tar.gz")]
    pub out: PathBuf,
    /// Replace MAC addresses (and the GUIDs and GIDs made from them), hostnames and serial numbers, consistently.
    #[arg(long)]
    pub redact: bool,
    /// With --redact, also replace IP addresses (prefix-preserving: subnets and routes still agree).
    #[arg(long, requires = "redact")]
    pub redact_addresses: bool,
    /// Overwrite OUT when it exists.
    #[arg(long)]
    pub force: bool,
    /// `--dry-run`: list the files it would capture, write nothing.
    #[command(flatten)]
    pub plan: DryRunArgs,
}

/// `halobox setup`.
#[derive(Debug, Args)]
pub struct SetupArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub plan: PlanOutputArgs,
    #[command(flatten)]
    pub confirm: YesArgs,
    /// Only these fixes: check ids (memlock.user, kernel.gtt, …) or families (memlock, podman, groups, kernel, mtu, firewall, roce).
    #[arg(long, value_name = "CHECK,...", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Not these fixes (check ids or families).
    #[arg(long, value_name = "CHECK,...", value_delimiter = ',')]
    pub skip: Vec<String>,
    /// The node's data-plane IPv4 address (default: as doctor finds it).
    #[arg(long, value_name = "ADDR")]
    pub ip: Option<Ipv4Addr>,
    /// The user whose memlock, groups and rootless podman unit are fixed (default: SUDO_USER under sudo, else you).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Configure the USB4/Thunderbolt link (the thunderbolt-net interface) with this address: a NetworkManager connection with MTU 65520 in firewalld's trusted zone.
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub usb4_address: Option<crate::host::net::Ipv4Net>,
    /// Put back everything earlier runs of setup changed, from its journal.
    #[arg(long, conflicts_with_all = ["only", "skip", "ip", "user", "usb4_address"])]
    pub undo: bool,
}
