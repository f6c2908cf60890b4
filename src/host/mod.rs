//! Host facts: everything halobox reads about a machine, as plain data.
//!
//! One file per fact source (GPU, RDMA, network, limits, memlock,
//! processes, users, kernel, tools, …). [`snapshot`] records them into an
//! archive that `--sysroot` reads back the same way; [`redact`] redacts one.
//! [`thunderbolt`] reads a USB4 host-to-host link under a thunderbolt-net
//! interface; [`jumbo`] is the one reader that sends something: a DF-bit
//! ping proving the MTU towards each peer (live hosts only).
//!
//! Readers only read and decode; decisions live in [`crate::doctor`] and the
//! commands. [`gather`] reads the live host or a snapshot tree alike.
//!
//! The JSON form of [`HostFacts`] is halobox's stable `detect --json` schema
//! (`schema_version` 1); `docs/host-facts.schema.json` is generated from these
//! types and checked by the test suite.

pub mod boot;
pub mod containers_conf;
pub mod cpu;
pub mod devnodes;
pub mod env;
pub mod ethtool;
pub mod firewall;
pub mod firmware;
pub mod gpu;
pub mod jumbo;
pub mod kernel;
pub mod limits;
pub mod memlock;
pub mod net;
pub mod netfilter;
pub mod netplugin;
pub mod os;
pub mod pam_limits;
pub mod paths;
pub mod pci;
pub mod procs;
pub mod rdma;
pub mod reader;
pub mod redact;
pub mod routes;
pub mod snapshot;
pub mod sockets;
pub mod thunderbolt;
pub mod tools;
pub mod unit_limits;
pub mod users;

use schemars::JsonSchema;
use serde::Serialize;

pub use reader::{Accessed, HostRoot, ReadIssue, Reader, RootError};

/// The version of the JSON schema of [`HostFacts`].
pub const SCHEMA_VERSION: u32 = 1;

/// Everything halobox knows about one host.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HostFacts {
    /// Schema version of this document (1).
    pub schema_version: u32,
    /// The snapshot directory read, or `null` for the live host.
    pub sysroot: Option<String>,
    /// KFD topology and GPU device nodes.
    pub gpu: gpu::GpuFacts,
    /// RDMA devices, ports, GIDs and `/dev/infiniband`.
    pub rdma: rdma::RdmaFacts,
    /// Network interfaces.
    pub network: net::NetworkFacts,
    /// Memlock of this process and of podman API services.
    pub limits: memlock::LimitsFacts,
    /// The invoking user and device groups.
    pub user: users::UserFacts,
    /// Kernel boot parameters and memory.
    pub kernel: kernel::KernelFacts,
    /// The kernel command line configured for the next boot.
    pub boot: boot::BootConfig,
    /// The distribution (`/etc/os-release`).
    pub os: os::OsFacts,
    /// The installed GPU firmware package.
    pub firmware: firmware::FirmwareFacts,
    /// The IPv4 routing table.
    pub routes: routes::RouteFacts,
    /// Online CPUs (`/sys/devices/system/cpu/online`).
    pub cpus_online: Option<u32>,
    /// Hazardous environment variables that are set.
    pub env_hazards: Vec<env::EnvVar>,
    /// Container, SSH and benchmark tools.
    pub tools: Vec<tools::Tool>,
    /// `ethtool -i` for each RDMA netdev.
    pub nic_drivers: Vec<ethtool::DriverInfo>,
    /// firewalld, ufw, nftables and iptables.
    pub firewall: firewall::FirewallFacts,
    /// The OCI runtime podman is configured with (`[engine] runtime` in
    /// containers.conf); `null` means podman's default, crun.
    pub podman_runtime: Option<String>,
    /// Host paths toolbx binds when present (`/run/dbus/system_bus_socket`, `/media`, …).
    pub toolbox_paths: Vec<String>,
    /// RCCL/NCCL net plugins on the loader's path and USB4 providers' device nodes.
    #[serde(skip_serializing_if = "netplugin::NetPluginFacts::is_empty")]
    pub net_plugins: netplugin::NetPluginFacts,
    /// Files that exist but could not be read or understood.
    pub read_issues: Vec<ReadIssue>,
    /// `captured/` files a snapshot lacks (empty for the live host); the
    /// facts they would give are unknown, not defaulted.
    pub captures_missing: Vec<String>,
}

impl HostFacts {
    /// The tool called `name`, when installed.
    pub fn tool(&self, name: &str) -> Option<&tools::Tool> {
        self.tools
            .iter()
            .find(|t| t.name == name && t.path.is_some())
    }
}

/// What to read beyond files.
#[derive(Debug, Clone, Copy, Default)]
pub struct GatherOptions {
    /// Run each found tool for its version (slower: one process per tool).
    pub tool_versions: bool,
}

/// Reads every fact of the host behind `root`.
pub fn gather(root: HostRoot, opts: GatherOptions) -> HostFacts {
    gather_with(&Reader::new(root), opts)
}

/// The two facts `serve` with llama.cpp needs on the head, read without the
/// processes the rest of [`gather`] starts: its addresses and its memory.
pub fn gather_addresses_and_memory(root: HostRoot) -> (net::NetworkFacts, kernel::KernelFacts) {
    let r = Reader::new(root);
    let rdma = rdma::read(&r, &devnodes::StatTable::load(&r));
    (net::read(&r, &rdma), kernel::read(&r))
}

/// Reads every fact of the live host, recording every path it looks at and
/// the command output it uses, for `halobox snapshot`.
pub fn gather_recorded(opts: GatherOptions) -> (HostFacts, Accessed) {
    let r = Reader::recording();
    // A snapshot always says who had which device nodes and addresses,
    // even when there are none.
    r.write(devnodes::DEV_STAT, b"");
    let facts = gather_with(&r, opts);
    (facts, r.take_accessed())
}

fn gather_with(r: &Reader, opts: GatherOptions) -> HostFacts {
    let stats = devnodes::StatTable::load(r);
    let processes = procs::find(r, &["podman", "dockerd", "firewalld"]);
    let rdma = rdma::read(r, &stats);
    let tools = tools::read(r, opts.tool_versions);
    let rdma_netdevs: Vec<String> = rdma
        .devices
        .iter()
        .flat_map(|d| d.netdevs.iter().cloned())
        .collect();
    let ethtool_path = tools
        .iter()
        .find(|t| t.name == "ethtool")
        .and_then(|t| t.path.clone());
    let user = users::read(r);
    let podman_runtime = containers_conf::read(r, user.home.as_deref());
    let captures_missing = if r.root().is_live() {
        Vec::new()
    } else {
        [net::IP_ADDR_JSON, devnodes::DEV_STAT]
            .into_iter()
            .filter(|p| !r.exists(p))
            .map(|p| p.trim_start_matches('/').to_string())
            .collect()
    };
    HostFacts {
        schema_version: SCHEMA_VERSION,
        sysroot: r.root().sysroot_dir().map(|p| p.display().to_string()),
        gpu: gpu::read(r, &stats),
        nic_drivers: ethtool::read(r, &rdma_netdevs, ethtool_path.as_deref()),
        network: net::read(r, &rdma),
        rdma,
        limits: memlock::read(r, &processes, &user),
        user,
        kernel: kernel::read(r),
        boot: boot::read(r),
        os: os::read(r),
        firmware: firmware::read(r),
        routes: routes::read(r),
        cpus_online: cpu::online(r),
        env_hazards: env::read(r),
        tools,
        firewall: firewall::read(r, &processes),
        toolbox_paths: paths::read(r),
        net_plugins: netplugin::read(r),
        podman_runtime,
        read_issues: r.take_issues(),
        captures_missing,
    }
}
