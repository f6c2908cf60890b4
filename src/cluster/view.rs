//! What RCCL will see where Ray runs: the GPU and RDMA device nodes and
//! whether this user can open them, the groups, memlock, and the RDMA ports
//! in `/sys/class/infiniband`. `cluster join --backend host` reads it from
//! its own process; for a container, halobox runs that inside the
//! container, so the view is the container's, as its user has it. Pure:
//! made from [`HostFacts`].

use serde::{Deserialize, Serialize};

use crate::host::HostFacts;
use crate::host::devnodes::DeviceNode;
use crate::host::limits::LimitValue;

/// One device node and whether the user can open it for reading and writing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceAccess {
    /// Path (`/dev/kfd`, `/dev/infiniband/uverbs0`).
    pub path: String,
    /// Mode bits (`0666`).
    pub mode: Option<String>,
    /// Owning group id.
    pub gid: Option<u32>,
    /// Root, the owner, a member of its group, or open to all.
    pub usable: bool,
}

/// One RDMA port as `/sys/class/infiniband` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortView {
    /// Device.
    pub device: String,
    /// Port number.
    pub port: u32,
    /// `ACTIVE`, `DOWN`, …
    pub state: Option<String>,
    /// Its netdevs.
    pub netdevs: Vec<String>,
}

/// The environment Ray (and RCCL) would run in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeView {
    /// User name (or uid).
    pub user: String,
    /// Memlock soft limit (-1 unlimited).
    pub memlock: Option<i64>,
    /// Primary and supplementary group ids.
    pub groups: Vec<u32>,
    /// `/dev/kfd`.
    pub kfd: Option<DeviceAccess>,
    /// `/dev/dri/*` render nodes.
    pub render: Vec<DeviceAccess>,
    /// `/dev/infiniband/*`.
    pub infiniband: Vec<DeviceAccess>,
    /// Every RDMA port.
    pub rdma_ports: Vec<PortView>,
}

impl RuntimeView {
    /// One line per fact, for `--dry-run`.
    pub fn lines(&self) -> Vec<String> {
        let dev = |d: &DeviceAccess| {
            format!(
                "{} ({}{})",
                d.path,
                d.mode.as_deref().unwrap_or("?"),
                if d.usable { "" } else { ", cannot open" }
            )
        };
        let list = |v: &[DeviceAccess]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.iter().map(dev).collect::<Vec<_>>().join(", ")
            }
        };
        vec![
            format!(
                "user {} (groups {}), memlock {}",
                self.user,
                self.groups
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                match self.memlock {
                    Some(-1) => "unlimited".to_string(),
                    Some(b) => format!("{} KiB", b / 1024),
                    None => "unknown".to_string(),
                }
            ),
            format!(
                "GPU: {}; render: {}",
                self.kfd.as_ref().map_or("no /dev/kfd".into(), dev),
                list(&self.render)
            ),
            format!("RDMA: {}", list(&self.infiniband)),
            format!(
                "RDMA ports: {}",
                if self.rdma_ports.is_empty() {
                    "none in /sys/class/infiniband".to_string()
                } else {
                    self.rdma_ports
                        .iter()
                        .map(|p| {
                            format!(
                                "{}:{} {} ({})",
                                p.device,
                                p.port,
                                p.state.as_deref().unwrap_or("?"),
                                p.netdevs.join(",")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        ]
    }
}

/// The view from `facts` (read by the process whose view it is).
pub fn from_facts(facts: &HostFacts) -> RuntimeView {
    let user = &facts.user;
    let access = |n: &DeviceNode| {
        let bits = n.mode_bits().unwrap_or(0);
        let usable = user.is_root()
            || bits & 0o006 == 0o006
            || (bits & 0o600 == 0o600 && n.uid.is_some() && n.uid == user.uid)
            || (bits & 0o060 == 0o060 && n.gid.is_some_and(|g| user.has_gid(g)));
        DeviceAccess {
            path: n.path.clone(),
            mode: n.mode.clone(),
            gid: n.gid,
            usable,
        }
    };
    let mut groups: Vec<u32> = user.gid.into_iter().chain(user.groups.clone()).collect();
    groups.sort_unstable();
    groups.dedup();
    RuntimeView {
        user: user
            .name
            .clone()
            .or(user.uid.map(|u| format!("uid {u}")))
            .unwrap_or_else(|| "?".into()),
        memlock: facts.limits.memlock.map(|l| match l.soft {
            LimitValue::Unlimited => -1,
            LimitValue::Finite(v) => i64::try_from(v).unwrap_or(i64::MAX),
        }),
        groups,
        kfd: facts.gpu.kfd.as_ref().map(access),
        render: facts
            .gpu
            .dri
            .iter()
            .filter(|d| d.path.contains("renderD"))
            .map(access)
            .collect(),
        infiniband: facts.rdma.dev_nodes.iter().map(access).collect(),
        rdma_ports: facts
            .rdma
            .devices
            .iter()
            .flat_map(|d| {
                d.ports.iter().map(|p| PortView {
                    device: d.name.clone(),
                    port: p.number,
                    state: p.state.clone(),
                    netdevs: d.netdevs.clone(),
                })
            })
            .collect(),
    }
}
