//! The preflight verdict of `cluster up` over every node's report: each
//! node alone (reached, same halobox, its container there, running and made
//! with halobox inside; what RCCL will see in it: GPU and RDMA devices it
//! can open, memlock; the head's Ray port free; its Ray has token
//! authentication), then the nodes together
//! (same image, MTU and transport). Pure; every finding names its node and
//! the fix.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::auth::Mode;
use super::config::{ClusterConfig, NodeConfig, Transport};
use super::env::Resolved;
use super::plan::{ContainerReport, JoinReport};
use super::view::{DeviceAccess, PortView, RuntimeView};

/// How bad a preflight finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Fine.
    Pass,
    /// Ray will start, vLLM may not.
    Warn,
    /// `up` stops here.
    Fail,
}

/// One preflight finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Verdict.
    pub level: Level,
    /// Check id (`reach`, `version`, `container`, `halobox`, `inside`,
    /// `image`, `memlock`, `devices`, `rdma`, `mtu`, `transport`,
    /// `net_plugin`, `port`, `ray-auth`).
    pub check: String,
    /// The node it is about, when one.
    pub node: Option<String>,
    /// What was found, with the fix.
    pub message: String,
}

fn finding(level: Level, check: &str, node: Option<&NodeConfig>, message: String) -> Finding {
    Finding {
        level,
        check: check.into(),
        node: node.map(|n| n.label().to_string()),
        message,
    }
}

/// The preflight verdict over every node's report (`Err` is why the node
/// could not report), against this halobox's `version`.
pub fn preflight(
    cfg: &ClusterConfig,
    reports: &[Result<JoinReport, String>],
    version: &str,
    mode: Mode,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut ok: Vec<(&NodeConfig, &JoinReport)> = Vec::new();
    for (node, r) in cfg.nodes.iter().zip(reports) {
        match r {
            Ok(r) => ok.push((node, r)),
            Err(e) => out.push(finding(Level::Fail, "reach", Some(node), e.clone())),
        }
    }
    let rdma = ok.iter().any(|(_, r)| r.env.transport.is_rdma());
    for (node, r) in &ok {
        let found = node_findings(cfg, node, r, version, rdma);
        let failed = found.iter().any(|f| f.level == Level::Fail);
        out.extend(found);
        // A stopped container was not looked into: `up` starts it first.
        if mode == Mode::Token && !failed && r.container.running() {
            out.extend(token_auth(node, r));
        }
    }
    if mode == Mode::Insecure {
        out.push(finding(
            Level::Warn,
            "ray-auth",
            None,
            super::auth::INSECURE_WARNING
                .trim_start_matches("warning: ")
                .to_string(),
        ));
    }
    out.extend(together(&ok));
    out.extend(topology(&ok));
    if !out.iter().any(|f| f.level == Level::Fail) {
        let t = ok
            .first()
            .map_or(Resolved::Ethernet, |(_, r)| r.env.transport);
        out.push(finding(
            Level::Pass,
            "preflight",
            None,
            format!(
                "{} node(s) ready: same halobox, same image (containers), same MTU, transport {t}",
                cfg.nodes.len()
            ),
        ));
    }
    out
}

/// Whether the node's Ray has token authentication (Ray 2.52 or later).
fn token_auth(node: &NodeConfig, r: &JoinReport) -> Option<Finding> {
    let place = where_(&r.container);
    let out = "or pass --insecure-ray to start it without authentication (anyone who reaches its ports can then run code there)";
    let message = match (&r.ray_version, &r.ray_error) {
        (Some(v), _) if super::auth::supports_token(v) => return None,
        (Some(v), _) => format!(
            "Ray {v} in {place} has no token authentication (Ray 2.52 or later has): install a newer Ray there (`pip install -U 'ray>=2.52'`, or an image with it), {out}"
        ),
        (None, Some(e)) => {
            format!("{e}: install Ray there, or set `ray` in cluster.toml to its path")
        }
        (None, None) => format!(
            "Ray's version in {place} is unknown, so token authentication cannot be checked: install the same halobox everywhere, {out}"
        ),
    };
    Some(finding(Level::Fail, "ray-auth", Some(node), message))
}

/// What one node's report says about that node alone. `rdma`: the cluster
/// uses RDMA, so memlock and the RDMA devices are needed.
fn node_findings(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    r: &JoinReport,
    version: &str,
    rdma: bool,
) -> Vec<Finding> {
    let mut found: Vec<Found> = Vec::new();
    if r.halobox_version != version {
        found.push((
            Level::Fail,
            "version",
            format!(
                "runs halobox {}, this machine {version}: install the same halobox on every node",
                r.halobox_version
            ),
        ));
    }
    if let Some(stop) = not_running(node, r) {
        found.push(stop);
    } else {
        if r.container.backend.is_container() {
            found.extend(inside(node, r));
        }
        let access = Access::of(node, &r.container, rdma);
        found.extend(access.memlock(r));
        found.extend(access.kfd(r));
        if let Some(v) = &r.view {
            found.extend(access.opened(cfg, r, v));
        }
        if r.env.is_head && r.port_free == Some(false) {
            found.push((
                Level::Fail,
                "port",
                format!(
                    "port {} on {} is already in use: stop what holds it (`ss -ltnp 'sport = :{}'`, `halobox cluster down`) or set ray_port in cluster.toml",
                    cfg.ray_port, r.env.ip, cfg.ray_port
                ),
            ));
        }
    }
    found
        .into_iter()
        .map(|(level, check, message)| finding(level, check, Some(node), message))
        .collect()
}

/// A finding about the node at hand: its level, check and message.
type Found = (Level, &'static str, String);

/// Why the node's container cannot be looked into (not inspected, not
/// there, not running), which ends the node's checks; `None` when it runs.
fn not_running(node: &NodeConfig, r: &JoinReport) -> Option<Found> {
    if let Some(why) = &r.not_inspected {
        return Some((Level::Fail, "container", why.clone()));
    }
    let c = &r.container;
    let name = &node.container;
    if !c.found {
        return Some((
            Level::Fail,
            "container",
            format!(
                "there is no container {name}: create it with `halobox refresh --name {name}` on that node"
            ),
        ));
    }
    if c.running() {
        return None;
    }
    let state = c.state.as_deref().unwrap_or("not running");
    Some(
        if c.halobox.is_some() && crate::container::enter::needs_start(name, state) == Ok(true) {
            (
                Level::Warn,
                "container",
                format!(
                    "container {name} is {state}: `halobox cluster up` starts it first (by hand: `halobox enter {name} -- true` on that node)"
                ),
            )
        } else {
            (
                Level::Fail,
                "container",
                format!(
                    "container {name} is {state}, not running: start it with `halobox enter {name} -- true` on that node"
                ),
            )
        },
    )
}

/// What is wrong with halobox inside a container halobox made: none
/// there, it cannot run, or it is not the node's version.
fn inside(node: &NodeConfig, r: &JoinReport) -> Option<Found> {
    let name = &node.container;
    match (&r.container.halobox, &r.inside_error, &r.inside_version) {
        (None, _, _) => Some((
            Level::Fail,
            "halobox",
            format!(
                "container {name} was made without halobox inside (by hand, or by an older halobox): re-create it with `halobox refresh --name {name}` on that node"
            ),
        )),
        (Some(_), Some(e), _) => Some((Level::Fail, "inside", e.clone())),
        (Some(path), None, Some(v)) if v != &r.halobox_version => Some((
            Level::Fail,
            "version",
            format!(
                "halobox in container {name} ({path}) is {v}, the node's is {}: the container sees the binary's folder of its last refresh; `halobox refresh --name {name}` on that node",
                r.halobox_version
            ),
        )),
        _ => None,
    }
}

/// How the checks of what RCCL will see where Ray runs (memlock, GPU and
/// RDMA devices) judge and word a miss. Outside a container halobox made
/// nothing: GPU access and memlock there are the host's business, so they
/// only warn. Memlock and the RDMA devices matter only when RCCL uses RDMA.
struct Access {
    /// Where Ray runs is a container halobox made.
    container: bool,
    /// The level of a GPU device missing or closed.
    gpu: Level,
    /// The level of memlock short or an RDMA device missing or closed.
    rdma: Level,
    /// Where Ray runs, in messages.
    place: String,
    /// The command that fixes it.
    fix: String,
}

impl Access {
    /// The judging for `node`'s container `c`; `rdma`: the cluster uses RDMA.
    fn of(node: &NodeConfig, c: &ContainerReport, rdma: bool) -> Access {
        let container = c.backend.is_container();
        let gpu = if container { Level::Fail } else { Level::Warn };
        Access {
            container,
            gpu,
            rdma: if rdma { gpu } else { Level::Warn },
            place: where_(c),
            fix: if container {
                format!("`halobox refresh --name {}` on that node", node.container)
            } else {
                "`halobox doctor` on that node".to_string()
            },
        }
    }

    /// Memlock not unlimited (as the runtime view reads it, else the
    /// container's report).
    fn memlock(&self, r: &JoinReport) -> Option<Found> {
        let other = match r.view.as_ref().map_or(r.container.memlock, |v| v.memlock) {
            Some(-1) => return None,
            other => other,
        };
        Some((
            self.rdma,
            "memlock",
            format!(
                "memlock is {} in {}: RDMA needs it unlimited ({})",
                other.map_or("unknown".into(), |v| format!("{v} bytes")),
                self.place,
                if self.container {
                    format!("{} sets it", self.fix)
                } else {
                    "limits.d memlock unlimited".to_string()
                }
            ),
        ))
    }

    /// `/dev/kfd` missing where Ray runs (or on the node itself).
    fn kfd(&self, r: &JoinReport) -> Option<Found> {
        let c = &r.container;
        if r.view.as_ref().map_or(c.kfd, |v| v.kfd.is_some()) {
            return None;
        }
        let why = if c.node_kfd || !self.container {
            format!(
                "/dev/kfd is not in {} (made without the GPU devices?): vLLM will not see the GPU; {}",
                self.place, self.fix
            )
        } else {
            "the node has no /dev/kfd: vLLM will not see a GPU there (`halobox doctor` on that node)"
                .to_string()
        };
        Some((self.gpu, "devices", why))
    }

    /// From the runtime view `v`: GPU devices it cannot open, the node's
    /// RDMA devices missing or closed there, and no ACTIVE port when RoCE
    /// or InfiniBand is asked for.
    fn opened(&self, cfg: &ClusterConfig, r: &JoinReport, v: &RuntimeView) -> Vec<Found> {
        let (place, fix) = (self.place.as_str(), self.fix.as_str());
        let mut out = Vec::new();
        let blocked: Vec<&DeviceAccess> = v
            .kfd
            .iter()
            .chain(&v.render)
            .filter(|d| !d.usable)
            .collect();
        if !blocked.is_empty() {
            out.push((self.gpu, "devices", cannot_open(v, &blocked, place, fix)));
        }
        let missing: Vec<&str> = r
            .container
            .node_infiniband
            .iter()
            .filter(|p| !v.infiniband.iter().any(|d| &d.path == *p))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            out.push((
                self.rdma,
                "rdma",
                format!(
                    "{} of the node not in {place}: RCCL cannot use RDMA there; {fix}",
                    missing.join(", ")
                ),
            ));
        }
        let blocked: Vec<&DeviceAccess> = v.infiniband.iter().filter(|d| !d.usable).collect();
        if !blocked.is_empty() {
            out.push((self.rdma, "rdma", cannot_open(v, &blocked, place, fix)));
        }
        if matches!(cfg.transport, Transport::Roce | Transport::Ib)
            && let Some(message) = no_active_port(cfg.transport, r, v, place, fix)
        {
            out.push((Level::Fail, "rdma", message));
        }
        out
    }
}

/// With RoCE or InfiniBand asked for: why RCCL would find no ACTIVE RDMA
/// port where Ray runs (the data plane's own, when the env names one), as
/// `/sys/class/infiniband` reads there; `None` when it has one.
fn no_active_port(
    transport: Transport,
    r: &JoinReport,
    v: &RuntimeView,
    place: &str,
    fix: &str,
) -> Option<String> {
    let active = |p: &&PortView| p.state.as_deref() == Some("ACTIVE");
    let wanted = r.env.rdma_device.as_deref().zip(r.env.rdma_port);
    let found = match wanted {
        Some((d, n)) => v
            .rdma_ports
            .iter()
            .filter(active)
            .any(|p| p.device == d && p.port == n),
        None => v.rdma_ports.iter().any(|p| active(&p)),
    };
    if found {
        return None;
    }
    let which = wanted.map_or("an ACTIVE RDMA port".to_string(), |(d, n)| {
        format!("{d} port {n} (the data plane's) ACTIVE")
    });
    Some(if v.rdma_ports.is_empty() {
        format!(
            "transport {transport} asked for, but {place} sees no RDMA port in /sys/class/infiniband (it needs {which}): RCCL cannot use RDMA there; {fix}, or transport = \"auto\" in cluster.toml for TCP"
        )
    } else {
        let seen: Vec<String> = v
            .rdma_ports
            .iter()
            .map(|p| {
                format!(
                    "{}:{} {}",
                    p.device,
                    p.port,
                    p.state.as_deref().unwrap_or("?")
                )
            })
            .collect();
        format!(
            "transport {transport} asked for, but {place} sees {} in /sys/class/infiniband, not {which}: RCCL cannot use RDMA there; check the cable and the switch port (`ibv_devinfo -d DEV`, `ip link show`), or transport = \"auto\" in cluster.toml for TCP",
            seen.join(", ")
        )
    })
}

fn cannot_open(v: &RuntimeView, blocked: &[&DeviceAccess], place: &str, fix: &str) -> String {
    let list: Vec<String> = blocked
        .iter()
        .map(|d| {
            format!(
                "{} (mode {}, group {})",
                d.path,
                d.mode.as_deref().unwrap_or("?"),
                d.gid.map_or("?".into(), |g| g.to_string())
            )
        })
        .collect();
    format!(
        "user {} in {place} cannot open {}: it is in groups {:?}; give it the device groups ({fix}; podman keeps them with crun, else halobox adds the numeric GIDs)",
        v.user,
        list.join(", "),
        v.groups
    )
}

/// What the nodes must share: image, MTU, transport and the USB4 net plugin.
fn together(ok: &[(&NodeConfig, &JoinReport)]) -> Vec<Finding> {
    let mut out = Vec::new();
    let digests: Vec<(&NodeConfig, Option<&String>)> = ok
        .iter()
        .filter(|(_, r)| r.container.backend.is_container() && r.container.found)
        .map(|(n, r)| (*n, r.container.image_digest.as_ref()))
        .collect();
    if let Some((first, Some(want))) = digests.first() {
        for (n, d) in &digests[1..] {
            if *d != Some(want) {
                out.push(finding(
                    Level::Fail,
                    "image",
                    Some(n),
                    format!(
                        "its container runs image {}, {} runs {want}: `halobox refresh` every node to the same image",
                        d.map_or("without a digest label", |s| s.as_str()),
                        first.label()
                    ),
                ));
            }
        }
    } else if let Some((first, None)) = digests.first() {
        out.push(finding(
            Level::Fail,
            "image",
            Some(first),
            "its container has no dev.halobox.image-digest label: re-create it with `halobox refresh`".into(),
        ));
    }
    if let Some((head, h)) = ok.iter().find(|(_, r)| r.env.is_head) {
        for (n, r) in ok.iter().filter(|(_, r)| !r.env.is_head) {
            if r.env.mtu != h.env.mtu {
                out.push(finding(
                    Level::Fail,
                    "mtu",
                    Some(n),
                    format!(
                        "MTU {} on {} ({}), but {} on {} of the head {}: set the same MTU on both ends (9000 for RoCE), e.g. `ip link set {} mtu {}`",
                        show(r.env.mtu),
                        r.env.interface,
                        r.env.ip,
                        show(h.env.mtu),
                        h.env.interface,
                        head.label(),
                        r.env.interface,
                        show(h.env.mtu)
                    ),
                ));
            }
            if r.env.transport != h.env.transport {
                out.push(finding(
                    Level::Fail,
                    "transport",
                    Some(n),
                    format!(
                        "resolved to {} ({}), the head to {}: every node must use the same transport; fix that node's RDMA port or set transport in cluster.toml",
                        r.env.transport, r.env.reason, h.env.transport
                    ),
                ));
            } else if r.env.net_plugin.is_some() != h.env.net_plugin.is_some() {
                let uses = |e: &super::env::NodeEnv| {
                    e.net_plugin
                        .as_deref()
                        .map_or("no net plugin (TCP sockets)".to_string(), |p| {
                            format!("the USB4 net plugin (NCCL_NET_PLUGIN={p})")
                        })
                };
                out.push(finding(
                    Level::Fail,
                    "net_plugin",
                    Some(n),
                    format!(
                        "RCCL would use {} there, {} on the head {}: ranks on different networks cannot connect; put the plugin and its device on every node, or set NCCL_NET_PLUGIN = \"none\" in cluster.toml's [env]",
                        uses(&r.env),
                        uses(&h.env),
                        head.label()
                    ),
                ));
            }
        }
    }
    out
}

/// What halobox supports: every node's data plane on one NIC, and all of
/// them in one subnet.
pub const SUPPORTED_TOPOLOGY: &str = "halobox supports one data-plane NIC per node, with every node in one subnet: through a switch, or exactly 2 nodes back to back";

/// Topologies NCCL would fail in, from the nodes' reports. Detected: a node
/// whose data-plane address is outside the head's subnet (the head's
/// address and prefix as its interface holds them): a switchless daisy
/// chain of 3+ nodes with each link its own /30–/31 (or /24), or nodes on
/// different routed subnets. Not detected here: one machine reached under
/// two ssh names (`cluster.toml` refuses the same host twice), a second NIC
/// that carries no node's address (information only), or a head whose
/// prefix is unknown (an address known only from a RoCE GID).
fn topology(ok: &[(&NodeConfig, &JoinReport)]) -> Vec<Finding> {
    let Some((head, h)) = ok.iter().find(|(_, r)| r.env.is_head) else {
        return vec![];
    };
    let Some(p) = h.prefix_len else {
        return vec![];
    };
    let net = Ipv4Addr::from(
        u32::from(h.env.ip) & u32::MAX.checked_shl(32 - u32::from(p.min(32))).unwrap_or(0),
    );
    ok.iter()
        .filter(|(_, r)| !r.env.is_head)
        .filter(|(_, r)| !crate::host::routes::contains(h.env.ip, p, r.env.ip))
        .map(|(n, r)| {
            finding(
                Level::Fail,
                "topology",
                Some(n),
                format!(
                    "its data-plane address {} ({}) is outside the head's subnet {net}/{p} ({} on {}): {}{}; put every node's data-plane NIC in one subnet (a switch), or use 2 nodes back to back",
                    r.env.ip,
                    r.env.interface,
                    h.env.interface,
                    head.label(),
                    if ok.len() > 2 {
                        "a switchless chain of 3+ nodes (one subnet per link) is not supported, NCCL does not route between links; "
                    } else {
                        ""
                    },
                    SUPPORTED_TOPOLOGY
                ),
            )
        })
        .collect()
}

fn where_(c: &ContainerReport) -> String {
    match &c.name {
        Some(n) if c.backend.is_container() => format!("container {n}"),
        _ => "the host environment".into(),
    }
}

fn show(mtu: Option<u32>) -> String {
    mtu.map_or("unknown".into(), |m| m.to_string())
}
