//! The data plane: the interface, RDMA port and RoCE v2 GID that carry a
//! node's NCCL/RCCL traffic, resolved from host facts (never guessed: no /24,
//! no fixed GID index, no `eth0` fallback). A USB4 cable (a thunderbolt-net
//! interface) is a data plane too: TCP, with no RDMA port behind it.

use std::net::Ipv4Addr;

use schemars::JsonSchema;
use serde::Serialize;

use crate::host::HostFacts;
use crate::host::net::Interface;
use crate::host::rdma::{RdmaDevice, RdmaPort, RdmaTransport};
use crate::host::thunderbolt::Usb4Link;

/// The RDMA side of a data-plane interface.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RdmaEndpoint {
    /// RDMA device name (`NCCL_IB_HCA`).
    pub device: String,
    /// Port number.
    pub port: u32,
    /// RoCE, iWARP or InfiniBand.
    pub transport: Option<RdmaTransport>,
    /// The port is ACTIVE and LinkUp.
    pub port_up: bool,
    /// Index of the RoCE v2 GID that carries the data-plane IPv4 (`NCCL_IB_GID_INDEX`).
    pub gid_index: Option<u32>,
}

/// A resolved data plane.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct DataPlane {
    /// The node's data-plane address.
    pub ip: Ipv4Addr,
    /// The interface that holds exactly that address.
    pub interface: String,
    /// Its MTU.
    pub mtu: Option<u32>,
    /// The RDMA port behind the interface, when there is one.
    pub rdma: Option<RdmaEndpoint>,
    /// The USB4 link, when the interface is thunderbolt-net's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usb4: Option<Usb4Link>,
}

impl DataPlane {
    /// True when the interface is a USB4/Thunderbolt link (thunderbolt-net).
    pub fn is_usb4(&self) -> bool {
        self.usb4.is_some()
    }
}

/// The outcome of looking for the data plane.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Selection {
    /// Found.
    Chosen(DataPlane),
    /// `--ip` was given but no interface holds it.
    IpNotFound {
        /// The address asked for.
        ip: Ipv4Addr,
    },
    /// No `--ip`, and several RDMA interfaces have addresses.
    Ambiguous {
        /// The addresses to choose from.
        candidates: Vec<Ipv4Addr>,
    },
    /// No `--ip`, and no RDMA or USB4 interface has an IPv4 address.
    NoCandidate,
}

/// Resolves the data plane for `ip`, or for the only IPv4 address on an
/// RDMA-capable interface (else on a USB4 one) when `ip` is `None`.
pub fn select(facts: &HostFacts, ip: Option<Ipv4Addr>) -> Selection {
    let ip = match ip {
        Some(ip) => ip,
        None => {
            let candidates = candidates(facts);
            match candidates.as_slice() {
                [] => return Selection::NoCandidate,
                [one] => *one,
                _ => return Selection::Ambiguous { candidates },
            }
        }
    };
    match facts.network.interface_with_ip(ip) {
        None => Selection::IpNotFound { ip },
        Some(iface) => Selection::Chosen(resolve(facts, ip, iface)),
    }
}

/// Like [`select`], but when several RDMA interfaces have addresses and no
/// `ip` is given, the one whose subnet holds a peer's address is chosen
/// (when exactly one does): the peers say which link is the data plane.
pub fn select_towards(facts: &HostFacts, ip: Option<Ipv4Addr>, peers: &[Ipv4Addr]) -> Selection {
    let selection = select(facts, ip);
    let Selection::Ambiguous { candidates } = &selection else {
        return selection;
    };
    let facing: Vec<Ipv4Addr> = candidates
        .iter()
        .copied()
        .filter(|c| {
            facts.network.interfaces.iter().any(|i| {
                i.ipv4.iter().any(|a| {
                    a.address == *c
                        && peers
                            .iter()
                            .any(|p| crate::host::routes::contains(a.address, a.prefix_len, *p))
                })
            })
        })
        .collect();
    match facing.as_slice() {
        [one] => select(facts, Some(*one)),
        _ => selection,
    }
}

/// IPv4 addresses of interfaces that have an RDMA device, up ports first;
/// without any, those of up USB4 (thunderbolt-net) interfaces.
pub fn candidates(facts: &HostFacts) -> Vec<Ipv4Addr> {
    let rdma = rdma_candidates(facts);
    if !rdma.is_empty() {
        return rdma;
    }
    let usb4: Vec<&Interface> = facts.network.usb4().collect();
    let up: Vec<&Interface> = usb4.iter().copied().filter(|i| i.is_up()).collect();
    let pick = if up.is_empty() { usb4 } else { up };
    pick.iter()
        .flat_map(|i| i.ipv4.iter().map(|a| a.address))
        .collect()
}

fn rdma_candidates(facts: &HostFacts) -> Vec<Ipv4Addr> {
    let mut with_state: Vec<(bool, Ipv4Addr)> = Vec::new();
    for iface in &facts.network.interfaces {
        if let Some((dev, port)) = rdma_port_for_netdev(facts, &iface.name) {
            let up = dev
                .ports
                .iter()
                .any(|p| p.number == port.number && p.is_up());
            with_state.extend(iface.ipv4.iter().map(|a| (up, a.address)));
            with_state.extend(iface.gid_ipv4.iter().map(|a| (up, *a)));
        }
    }
    if with_state.iter().any(|(up, _)| *up) {
        with_state.retain(|(up, _)| *up);
    }
    with_state.into_iter().map(|(_, ip)| ip).collect()
}

fn resolve(facts: &HostFacts, ip: Ipv4Addr, iface: &Interface) -> DataPlane {
    let rdma = rdma_port_for_netdev(facts, &iface.name).map(|(dev, port)| RdmaEndpoint {
        device: dev.name.clone(),
        port: port.number,
        transport: dev.transport,
        port_up: port.is_up(),
        gid_index: roce_v2_gid_index(port, ip, &iface.name),
    });
    DataPlane {
        ip,
        interface: iface.name.clone(),
        mtu: iface.mtu,
        rdma,
        usb4: iface.usb4.clone(),
    }
}

/// The RDMA device and port behind a netdev: the port whose GIDs name the
/// netdev, else the first port of the device whose PCI function owns it.
pub fn rdma_port_for_netdev<'a>(
    facts: &'a HostFacts,
    netdev: &str,
) -> Option<(&'a RdmaDevice, &'a RdmaPort)> {
    let devices = &facts.rdma.devices;
    let by_gid = devices.iter().find_map(|d| {
        d.ports
            .iter()
            .find(|p| p.gids.iter().any(|g| g.netdev.as_deref() == Some(netdev)))
            .map(|p| (d, p))
    });
    by_gid.or_else(|| {
        devices
            .iter()
            .find(|d| d.netdevs.iter().any(|n| n == netdev))
            .and_then(|d| d.ports.first().map(|p| (d, p)))
    })
}

/// The index of the RoCE v2 GID `::ffff:<ip>` on `port` that belongs to `netdev`.
pub fn roce_v2_gid_index(port: &RdmaPort, ip: Ipv4Addr, netdev: &str) -> Option<u32> {
    port.gids
        .iter()
        .find(|g| {
            g.is_roce_v2() && g.ipv4 == Some(ip) && g.netdev.as_deref().is_none_or(|n| n == netdev)
        })
        .map(|g| g.index)
}
