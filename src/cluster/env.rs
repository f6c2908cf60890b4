//! A node's NCCL/RCCL, Gloo, vLLM and Ray settings, computed from that node's
//! own host facts: the interface that holds exactly its data-plane address,
//! the RDMA port behind it and the RoCE v2 GID index of that address. Pure;
//! a fact that is missing is an error that says what to fix.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::config::Transport;
pub use super::vars::{PER_NODE, check_name, check_user_var};
use crate::dataplane::{self, DataPlane, RdmaEndpoint, Selection};
use crate::host::HostFacts;
use crate::host::netplugin::{NetPluginFacts, NetPluginLib, USB4_PROVIDERS};
use crate::host::rdma::RdmaTransport;

/// The transport a node actually uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resolved {
    /// RoCE v2 through `NCCL_IB_HCA`.
    Roce,
    /// InfiniBand through `NCCL_IB_HCA`.
    Ib,
    /// TCP sockets.
    Ethernet,
    /// TCP sockets over a USB4/Thunderbolt link (thunderbolt-net).
    Usb4,
}

impl Resolved {
    /// True when NCCL/RCCL move tensors over RDMA verbs (RoCE, InfiniBand).
    pub fn is_rdma(self) -> bool {
        matches!(self, Resolved::Roce | Resolved::Ib)
    }
}

impl std::fmt::Display for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Resolved::Roce => "roce",
            Resolved::Ib => "ib",
            Resolved::Ethernet => "ethernet",
            Resolved::Usb4 => "usb4",
        })
    }
}

/// What a node's environment is computed from (besides its facts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvRequest {
    /// This node's data-plane address.
    pub ip: Ipv4Addr,
    /// The head's data-plane address (this node is the head when equal).
    pub head: Ipv4Addr,
    /// The head's Ray port.
    pub port: u16,
    /// Transport asked for.
    pub transport: Transport,
    /// CPUs for Ray.
    pub cpus: u32,
    /// The `ray` command.
    pub ray: String,
    /// Extra `ray start` arguments (every node).
    pub ray_args: Vec<String>,
    /// Extra `ray start` arguments (head only).
    pub ray_head_args: Vec<String>,
    /// Variables for every node (`[env]` of cluster.toml).
    #[serde(default)]
    pub env: Vec<EnvVar>,
    /// Variables for this node only (its `env` in cluster.toml).
    #[serde(default)]
    pub node_env: Vec<EnvVar>,
    /// The names any node of the cluster sets for itself (the union of
    /// every node's `env` in cluster.toml): they differ between nodes, so
    /// they go on vLLM's list here too, whatever this node sets.
    #[serde(default)]
    pub cluster_node_env: Vec<String>,
}

/// Ray ≥ 2.45 masks AMD GPUs through `HIP_VISIBLE_DEVICES` and reads only
/// this switch (ray-project/ray#51104; 2.60.0 of the image and of the
/// venv); older Ray used `ROCR_VISIBLE_DEVICES` and the other one. Both
/// are set.
pub const RAY_NOSET: [&str; 2] = [
    "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES",
];

/// A cluster.toml env table as variables (in name order).
pub fn vars(table: &std::collections::BTreeMap<String, String>) -> Vec<EnvVar> {
    table.iter().map(|(k, v)| var(k, v.clone())).collect()
}

/// `NAME=VALUE` as `--env`/`--node-env` take it, checked (`not_secret`:
/// the names `--not-secret` clears).
pub fn parse_assignment(s: &str, not_secret: &[String]) -> Result<EnvVar, String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    check_user_var(name, value, not_secret)?;
    Ok(var(name, value.to_string()))
}

/// One environment variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvVar {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// A node's resolved settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeEnv {
    /// Data-plane address.
    pub ip: Ipv4Addr,
    /// True for the Ray head.
    pub is_head: bool,
    /// The interface that holds exactly `ip`.
    pub interface: String,
    /// Its MTU.
    pub mtu: Option<u32>,
    /// The transport in use.
    pub transport: Resolved,
    /// Why that transport.
    pub reason: String,
    /// RDMA device and port (RoCE/IB).
    pub rdma_device: Option<String>,
    /// RDMA port number.
    pub rdma_port: Option<u32>,
    /// RoCE v2 GID index (RoCE).
    pub gid_index: Option<u32>,
    /// The USB4 net plugin RCCL loads (`NCCL_NET_PLUGIN`'s value), when
    /// the transport is usb4 and the plugin and its devices are here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_plugin: Option<String>,
    /// The variables, in the order they are printed.
    pub vars: Vec<EnvVar>,
    /// Names of the variables that differ between nodes (every per-node
    /// data-plane one, this node's `env` and every other node's `env`
    /// names): vLLM must not copy the head's values of these to the
    /// workers. The same on every node of a cluster, as vLLM reads the
    /// list where its driver runs (the head).
    #[serde(default)]
    pub per_node: Vec<String>,
    /// `ray start …` (argv).
    pub ray_start: Vec<String>,
}

impl NodeEnv {
    /// The variables as `NAME=value` words.
    pub fn assignments(&self) -> Vec<String> {
        self.vars
            .iter()
            .map(|v| format!("{}={}", v.name, v.value))
            .collect()
    }
}

/// Why a node's environment cannot be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvError {
    /// No interface holds the address.
    #[error(
        "no interface on this node holds {ip} (it has: {have})\n  hint: put the node's data-plane address on its RDMA interface (e.g. `nmcli con mod … ipv4.addresses {ip}/NN`), or fix `ip` for this node in cluster.toml"
    )]
    IpNotFound {
        /// The address.
        ip: Ipv4Addr,
        /// What the node has, for the message.
        have: String,
    },
    /// RoCE/IB asked for, but no usable RDMA port serves the address.
    #[error("transport {asked} asked for, but {why}\n  hint: {fix}")]
    NoRdma {
        /// `roce` or `ib`.
        asked: Transport,
        /// What is missing.
        why: String,
        /// How to fix it.
        fix: String,
    },
    /// USB4 asked for, but the address is not on a thunderbolt-net interface.
    #[error(
        "transport usb4 asked for, but {interface} (which holds {ip}) is not a USB4/Thunderbolt interface (its driver is {driver}, not thunderbolt-net)\n  hint: put the node's address on its thunderbolt-net interface (`halobox setup --usb4-address {ip}/30`), or pick the transport that matches the link"
    )]
    NotUsb4 {
        /// The address.
        ip: Ipv4Addr,
        /// The interface that holds it.
        interface: String,
        /// Its driver, for the message.
        driver: String,
    },
}

/// Computes a node's environment from its facts.
pub fn plan(facts: &HostFacts, req: &EnvRequest) -> Result<NodeEnv, EnvError> {
    let dp = match dataplane::select(facts, Some(req.ip)) {
        Selection::Chosen(dp) => dp,
        _ => {
            let have = facts.network.address_list();
            return Err(EnvError::IpNotFound {
                ip: req.ip,
                have: if have.is_empty() {
                    "no IPv4 address".into()
                } else {
                    have.join(", ")
                },
            });
        }
    };
    let (transport, reason) = match req.transport {
        Transport::Usb4 => usb4(facts, &dp)?,
        Transport::Auto if dp.is_usb4() && dp.rdma.is_none() => (
            Resolved::Usb4,
            format!(
                "auto: {} is a USB4 link (thunderbolt-net): TCP sockets",
                dp.interface
            ),
        ),
        asked => choose(&dp, asked)?,
    };
    let (net_plugin, reason) = match (transport, usb4_plugin(&facts.net_plugins)) {
        (Resolved::Usb4, Ok(lib)) => (
            Some(lib.nccl_net_plugin()),
            format!(
                "{reason}; RCCL loads the USB4 net plugin {} ({}) for tensors",
                lib.path,
                lib.usb4_provider.as_deref().unwrap_or("USB4")
            ),
        ),
        (Resolved::Usb4, Err(Some(why))) => (None, format!("{reason}; {why}")),
        _ => (None, reason),
    };
    let rdma = dp.rdma.as_ref().filter(|_| transport.is_rdma());
    let mut vars = vec![
        var("NCCL_SOCKET_IFNAME", format!("={}", dp.interface)),
        var("GLOO_SOCKET_IFNAME", dp.interface.clone()),
    ];
    match rdma {
        Some(r) => {
            vars.push(var("NCCL_IB_HCA", format!("={}:{}", r.device, r.port)));
            if let (Resolved::Roce, Some(g)) = (transport, r.gid_index) {
                vars.push(var("NCCL_IB_GID_INDEX", g.to_string()));
            }
        }
        None => vars.push(var("NCCL_IB_DISABLE", "1".into())),
    }
    if let Some(p) = &net_plugin {
        vars.push(var("NCCL_NET_PLUGIN", p.clone()));
    }
    vars.push(var("NCCL_NET_GDR_LEVEL", "0".into()));
    vars.push(var("VLLM_HOST_IP", req.ip.to_string()));
    for name in RAY_NOSET {
        vars.push(var(name, "1".into()));
    }
    for user in req.env.iter().chain(&req.node_env) {
        match vars.iter_mut().find(|v| v.name == user.name) {
            Some(v) => v.value = user.value.clone(),
            None => vars.push(user.clone()),
        }
    }
    // A value of cluster.toml's own (`none`) is no plugin of halobox's.
    let net_plugin = net_plugin.filter(|p| {
        vars.iter()
            .any(|v| v.name == "NCCL_NET_PLUGIN" && v.value == *p)
    });
    let per_node = per_node_names(req);
    let is_head = req.ip == req.head;
    Ok(NodeEnv {
        ip: req.ip,
        is_head,
        interface: dp.interface.clone(),
        mtu: dp.mtu,
        transport,
        reason,
        rdma_device: rdma.map(|r| r.device.clone()),
        rdma_port: rdma.map(|r| r.port),
        gid_index: rdma.and_then(|r| r.gid_index),
        net_plugin,
        vars,
        per_node,
        ray_start: ray_start(req, is_head),
    })
}

/// The names vLLM must not copy from the head to the workers: every
/// per-node data-plane variable (whether this node has it or not: the
/// head's list decides for all), then the names this node or any other
/// sets for itself (`env` of a node in cluster.toml), sorted; each once.
pub fn per_node_names(req: &EnvRequest) -> Vec<String> {
    let own: std::collections::BTreeSet<&str> = req
        .node_env
        .iter()
        .map(|v| v.name.as_str())
        .chain(req.cluster_node_env.iter().map(String::as_str))
        .filter(|n| !PER_NODE.contains(n))
        .collect();
    PER_NODE
        .iter()
        .copied()
        .chain(own)
        .map(str::to_string)
        .collect()
}

fn var(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value,
    }
}

/// `ray start` for the head or a worker.
pub fn ray_start(req: &EnvRequest, is_head: bool) -> Vec<String> {
    let mut a = vec![req.ray.clone(), "start".into()];
    if is_head {
        a.push("--head".into());
        a.push(format!("--port={}", req.port));
    } else {
        a.push(format!("--address={}:{}", req.head, req.port));
    }
    a.push(format!("--node-ip-address={}", req.ip));
    a.push("--num-gpus=1".into());
    a.push(format!("--num-cpus={}", req.cpus));
    a.push("--disable-usage-stats".into());
    a.extend(req.ray_args.iter().cloned());
    if is_head {
        a.extend(req.ray_head_args.iter().cloned());
    }
    a
}

/// Why the RDMA path cannot be used, or `None` when it can.
fn rdma_problem(dp: &DataPlane, want: RdmaTransport) -> Option<(String, String)> {
    let Some(r) = &dp.rdma else {
        return Some((
            format!(
                "no RDMA device is behind {} (which holds {})",
                dp.interface, dp.ip
            ),
            "use the address of the RDMA NIC's interface, or transport = \"ethernet\"".into(),
        ));
    };
    let RdmaEndpoint {
        device,
        port,
        transport,
        port_up,
        gid_index,
    } = r;
    if *transport != Some(want) {
        let what = match transport {
            Some(RdmaTransport::Iwarp) => "iWARP".to_string(),
            Some(t) => format!("{t:?}"),
            None => "of unknown type".into(),
        };
        return Some((
            format!("{device} (behind {}) is {what}", dp.interface),
            match transport {
                Some(RdmaTransport::Iwarp) => "switch the E810 to RoCE (`devlink dev param set pci/… name enable_roce value true cmode runtime` and `enable_iwarp false`), then reload irdma".into(),
                _ => "pick the transport that matches the NIC in cluster.toml".into(),
            },
        ));
    }
    if !port_up {
        return Some((
            format!(
                "{device} port {port} (behind {}) is not ACTIVE/LinkUp",
                dp.interface
            ),
            "check the cable and the switch port (`ibv_devinfo -d DEV`, `ip link show`)".into(),
        ));
    }
    if want == RdmaTransport::Roce && gid_index.is_none() {
        return Some((
            format!(
                "{device} port {port} has no RoCE v2 GID for {} on {}",
                dp.ip, dp.interface
            ),
            "the GID appears once the address is on the interface and the port is up; check `ip addr` and /sys/class/infiniband/DEV/ports/N/gid_attrs/types".into(),
        ));
    }
    None
}

/// The USB4 net plugin RCCL can use here: a known provider's library on
/// the loader's path and its device nodes. `Err(Some(why))` when one is
/// there without the other (said in the reason, TCP is used), `Err(None)`
/// when neither is.
pub fn usb4_plugin(found: &NetPluginFacts) -> Result<&NetPluginLib, Option<String>> {
    let provider = |lib: &NetPluginLib| {
        USB4_PROVIDERS
            .iter()
            .find(|p| Some(p.project) == lib.usb4_provider.as_deref())
    };
    match (found.usb4_library(), found.usb4_devices.is_empty()) {
        (Some(lib), false) => Ok(lib),
        (Some(lib), true) => {
            let (prefix, module) = provider(lib).map_or(("", ""), |p| (p.device_prefix, p.module));
            Err(Some(format!(
                "the USB4 net plugin {} is here but no /dev/{prefix}* device is (load the {module} kernel module on the host; a podman or docker container gets the device when it is made after that): RCCL stays on TCP sockets",
                lib.path
            )))
        }
        (None, false) => Err(Some(format!(
            "{} is here but no USB4 net plugin is on the loader's path (librccl-net-NAME.so): RCCL stays on TCP sockets",
            found.usb4_devices.join(", ")
        ))),
        (None, true) => Err(None),
    }
}

/// `transport = "usb4"`: the address must be on a thunderbolt-net interface.
fn usb4(facts: &HostFacts, dp: &DataPlane) -> Result<(Resolved, String), EnvError> {
    let Some(link) = &dp.usb4 else {
        return Err(EnvError::NotUsb4 {
            ip: dp.ip,
            interface: dp.interface.clone(),
            driver: facts
                .network
                .interface(&dp.interface)
                .and_then(|i| i.driver.clone())
                .unwrap_or_else(|| "unknown".into()),
        });
    };
    let rate = link
        .total_gbps()
        .map(|g| format!(" at {g} Gb/s"))
        .unwrap_or_default();
    Ok((
        Resolved::Usb4,
        format!(
            "transport usb4 asked for: TCP sockets over the USB4 link {}{rate}",
            dp.interface
        ),
    ))
}

fn choose(dp: &DataPlane, asked: Transport) -> Result<(Resolved, String), EnvError> {
    let endpoint = |r: &RdmaEndpoint| format!("{}:{} behind {}", r.device, r.port, dp.interface);
    match asked {
        Transport::Ethernet | Transport::Usb4 => Ok((
            Resolved::Ethernet,
            format!("transport {asked} asked for: TCP over {}", dp.interface),
        )),
        Transport::Roce | Transport::Ib => {
            let want = if asked == Transport::Roce {
                RdmaTransport::Roce
            } else {
                RdmaTransport::Infiniband
            };
            match rdma_problem(dp, want) {
                Some((why, fix)) => Err(EnvError::NoRdma { asked, why, fix }),
                None => {
                    let r = dp.rdma.as_ref().expect("checked");
                    Ok(if asked == Transport::Roce {
                        (
                            Resolved::Roce,
                            format!(
                                "transport roce asked for: {} is ACTIVE with RoCE v2 GID index {}",
                                endpoint(r),
                                r.gid_index.expect("checked")
                            ),
                        )
                    } else {
                        (
                            Resolved::Ib,
                            format!("transport ib asked for: {} is ACTIVE", endpoint(r)),
                        )
                    })
                }
            }
        }
        Transport::Auto => match rdma_problem(dp, RdmaTransport::Roce) {
            None => {
                let r = dp.rdma.as_ref().expect("checked");
                Ok((
                    Resolved::Roce,
                    format!(
                        "auto: {} is an ACTIVE RoCE v2 port for {} (GID index {})",
                        endpoint(r),
                        dp.ip,
                        r.gid_index.expect("checked")
                    ),
                ))
            }
            Some((why, _)) => Ok((
                Resolved::Ethernet,
                format!("auto: Ethernet (TCP over {}) because {why}", dp.interface),
            )),
        },
    }
}
