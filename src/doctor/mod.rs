//! Diagnosis: turns [`HostFacts`] into checks, each PASS / WARN / FAIL / SKIP
//! with one line of why and, for every non-pass, the exact fix.
//!
//! Everything here is pure: the same facts always give the same report.
//! One file per area (`usb4.rs`: a USB4/Thunderbolt link and the DF-bit
//! proof of the MTU); [`render`] is the report's text form and
//! [`facts_render`] `detect`'s text of the facts.

pub mod facts_render;
mod firewall;
mod gpu;
pub mod kernel;
mod memlock;
mod network;
mod platform;
mod rdma;
pub mod render;
mod system;
mod usb4;
pub mod versions;

use std::net::Ipv4Addr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataplane::{self, Selection};
use crate::host::HostFacts;

pub use memlock::RDMA_MIN_BYTES;
pub use network::{JUMBO_MTU, USB4_MTU};

/// The outcome of one check.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Fine.
    Pass,
    /// Works, but worse than it should, or cannot be confirmed.
    Warn,
    /// Will not work until fixed.
    Fail,
    /// Does not apply to this host.
    Skip,
    /// For information: something the user should know about, never a fault.
    Info,
}

impl Status {
    /// `PASS`, `WARN`, `FAIL`, `SKIP`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
            Status::Info => "INFO",
        }
    }
}

/// What a check that passes on configuration alone waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Pending {
    /// The user's next login (memlock limits).
    #[serde(rename = "re-login")]
    Relogin,
    /// A restart of the service (podman.service).
    #[serde(rename = "restart")]
    Restart,
    /// The next boot (kernel parameters).
    #[serde(rename = "reboot")]
    Reboot,
}

impl Pending {
    /// `after re-login`, `after restart`, `after reboot`.
    pub fn label(self) -> &'static str {
        match self {
            Pending::Relogin => "after re-login",
            Pending::Restart => "after restart",
            Pending::Reboot => "after reboot",
        }
    }
}

/// One diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Check {
    /// Stable identifier (`gpu.present`, `rdma.gid`, …).
    pub id: String,
    /// The outcome.
    pub status: Status,
    /// One line saying why.
    pub summary: String,
    /// The exact fix (commands or file contents) for a non-pass.
    pub fix: Option<String>,
    /// For a PASS that the files configure but the running system does not
    /// show yet: what it waits for. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
}

impl Check {
    fn new(id: &str, status: Status, summary: impl Into<String>) -> Self {
        Self {
            id: id.to_string(),
            status,
            summary: summary.into(),
            fix: None,
            pending: None,
        }
    }

    /// A pass that shows once `pending` happens.
    pub fn pending(id: &str, pending: Pending, summary: impl Into<String>) -> Self {
        Self {
            pending: Some(pending),
            ..Self::new(id, Status::Pass, summary)
        }
    }

    /// True when the check is WARN or FAIL.
    pub fn is_fault(&self) -> bool {
        matches!(self.status, Status::Warn | Status::Fail)
    }

    /// A passing check.
    pub fn pass(id: &str, summary: impl Into<String>) -> Self {
        Self::new(id, Status::Pass, summary)
    }

    /// A check that does not apply; the summary says why.
    pub fn skip(id: &str, summary: impl Into<String>) -> Self {
        Self::new(id, Status::Skip, summary)
    }

    /// Information only.
    pub fn info(id: &str, summary: impl Into<String>) -> Self {
        Self::new(id, Status::Info, summary)
    }

    /// A warning with its fix.
    pub fn warn(id: &str, summary: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(id, Status::Warn, summary).with_fix(fix)
    }

    /// A failure with its fix.
    pub fn fail(id: &str, summary: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(id, Status::Fail, summary).with_fix(fix)
    }

    fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// Counts per status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Summary {
    /// PASS checks.
    pub pass: usize,
    /// WARN checks.
    pub warn: usize,
    /// FAIL checks.
    pub fail: usize,
    /// SKIP checks.
    pub skip: usize,
    /// INFO checks.
    pub info: usize,
}

impl Summary {
    /// Counts the statuses of `checks`.
    pub fn of(checks: &[Check]) -> Self {
        let mut s = Summary::default();
        for c in checks {
            match c.status {
                Status::Pass => s.pass += 1,
                Status::Warn => s.warn += 1,
                Status::Fail => s.fail += 1,
                Status::Skip => s.skip += 1,
                Status::Info => s.info += 1,
            }
        }
        s
    }
}

/// The whole diagnosis of a host.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report {
    /// Schema version of this document (1).
    pub schema_version: u32,
    /// The snapshot read, or `null` for the live host.
    pub sysroot: Option<String>,
    /// How the data plane was resolved.
    pub data_plane: Selection,
    /// Every check, in a fixed order.
    pub checks: Vec<Check>,
    /// Counts per status.
    pub summary: Summary,
    /// What must match across the nodes of a cluster (`cluster doctor`).
    #[serde(default)]
    pub node: NodeIdentity,
}

/// What `cluster doctor` compares across nodes: versions and the GID type
/// that carries the data plane.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeIdentity {
    /// The running kernel's release.
    pub kernel: Option<String>,
    /// The GPU firmware package (`name version`).
    pub gpu_firmware: Option<String>,
    /// The MES firmware version loaded.
    pub mes_firmware: Option<String>,
    /// The type of the GID that carries the data-plane IPv4 (`RoCE v2`,
    /// `IB/RoCE v1`): a RoCE v2 one when the port has one.
    pub gid_type: Option<String>,
}

impl NodeIdentity {
    /// The identity of the host of `facts`, its data plane `plane`.
    pub fn of(facts: &HostFacts, plane: Option<&dataplane::DataPlane>) -> NodeIdentity {
        let gid_type = plane.and_then(|p| {
            let ep = p.rdma.as_ref()?;
            let port = facts
                .rdma
                .devices
                .iter()
                .find(|d| d.name == ep.device)?
                .ports
                .iter()
                .find(|pt| pt.number == ep.port)?;
            let held: Vec<_> = port.gids.iter().filter(|g| g.ipv4 == Some(p.ip)).collect();
            held.iter()
                .find(|g| g.is_roce_v2())
                .or(held.first())
                .and_then(|g| g.gid_type.clone())
        });
        NodeIdentity {
            kernel: facts.kernel.release.clone(),
            gpu_firmware: facts
                .firmware
                .gpu_package()
                .map(|p| format!("{} {}", p.name, p.version)),
            mes_firmware: facts.gpu.mes_fw_version().map(str::to_string),
            gid_type,
        }
    }
}

impl Report {
    /// True when any check failed.
    pub fn has_failures(&self) -> bool {
        self.summary.fail > 0
    }
}

/// A peer whose data-plane address this node must reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its data-plane address.
    pub ip: Ipv4Addr,
    /// Where it came from (`--peer`, `cluster.toml node n2`).
    pub from: String,
}

/// What the user told doctor.
#[derive(Debug, Clone, Default)]
pub struct DoctorOptions {
    /// The data-plane address (`--ip`).
    pub ip: Option<Ipv4Addr>,
    /// The peers (`--peer`, and the other nodes of cluster.toml).
    pub peers: Vec<Peer>,
    /// Why cluster.toml could not be used, when it exists but is broken.
    pub cluster_error: Option<String>,
    /// The DF-bit pings sent towards the peers ([`crate::host::jumbo::prove`]).
    pub jumbo: Vec<crate::host::jumbo::JumboProof>,
}

impl DoctorOptions {
    /// Adds the nodes of a cluster file: this node's own address becomes
    /// the data-plane address (unless `--ip` was given), the others become
    /// peers. Nodes already given are not repeated.
    pub fn with_cluster(mut self, facts: &HostFacts, nodes: &[(String, Ipv4Addr)]) -> Self {
        let own = nodes
            .iter()
            .find(|(_, ip)| facts.network.interface_with_ip(*ip).is_some())
            .map(|(_, ip)| *ip);
        if self.ip.is_none() {
            self.ip = own;
        }
        for (name, ip) in nodes {
            if Some(*ip) == self.ip || Some(*ip) == own || self.peers.iter().any(|p| p.ip == *ip) {
                continue;
            }
            self.peers.push(Peer {
                ip: *ip,
                from: format!("cluster.toml node {name}"),
            });
        }
        self
    }
}

/// Runs every check against `facts`.
pub fn diagnose(facts: &HostFacts, opts: DoctorOptions) -> Report {
    let peer_ips: Vec<Ipv4Addr> = opts.peers.iter().map(|p| p.ip).collect();
    let selection = dataplane::select_towards(facts, opts.ip, &peer_ips);
    let plane = match &selection {
        Selection::Chosen(p) => Some(p),
        _ => None,
    };
    let mut checks = Vec::new();
    checks.extend(gpu::checks(facts));
    checks.extend(memlock::checks(facts));
    checks.push(network::data_plane(facts, &selection));
    checks.extend(rdma::checks(facts, plane));
    checks.extend(network::checks(facts, plane, &opts));
    checks.extend(usb4::checks(facts, plane, &opts));
    checks.push(firewall::check(facts, plane));
    checks.extend(platform::checks(facts));
    checks.extend(kernel::checks(facts));
    checks.extend(system::checks(facts));
    Report {
        schema_version: crate::host::SCHEMA_VERSION,
        sysroot: facts.sysroot.clone(),
        node: NodeIdentity::of(facts, plane),
        data_plane: selection,
        summary: Summary::of(&checks),
        checks,
    }
}

/// True when the data plane is a USB4 link, or, with none resolved, the
/// host has a USB4 (thunderbolt-net) interface: RDMA advice does not fit.
fn chose_usb4(facts: &HostFacts, plane: Option<&dataplane::DataPlane>) -> bool {
    match plane {
        Some(p) => p.is_usb4(),
        None => facts.network.usb4().next().is_some(),
    }
}

/// True when the host has any RDMA device.
fn has_rdma(facts: &HostFacts) -> bool {
    !facts.rdma.devices.is_empty()
}

/// True when the host has an AMD GPU agent in the KFD topology.
fn has_gpu(facts: &HostFacts) -> bool {
    facts.gpu.nodes.iter().any(|n| n.is_gpu())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{GatherOptions, HostRoot, gather};

    #[test]
    fn cluster_nodes_give_the_data_plane_and_the_peers() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hosts/strix-e810");
        let facts = gather(HostRoot::sysroot(&dir).unwrap(), GatherOptions::default());
        let nodes = [
            ("n1".to_string(), Ipv4Addr::new(192, 168, 100, 1)),
            ("n2".to_string(), Ipv4Addr::new(192, 168, 100, 2)),
        ];
        let opts = DoctorOptions {
            peers: vec![Peer {
                ip: Ipv4Addr::new(192, 168, 100, 2),
                from: "--peer".into(),
            }],
            ..DoctorOptions::default()
        }
        .with_cluster(&facts, &nodes);
        assert_eq!(opts.ip, Some(Ipv4Addr::new(192, 168, 100, 1)));
        assert_eq!(opts.peers.len(), 1, "n2 is not repeated");
        let opts = DoctorOptions::default().with_cluster(&facts, &nodes);
        assert_eq!(opts.peers[0].from, "cluster.toml node n2");
        let report = diagnose(&facts, opts);
        assert!(
            report
                .checks
                .iter()
                .any(|c| c.id == "net.route" && c.status == Status::Pass)
        );
    }
}
