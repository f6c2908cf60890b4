//! Network checks: the data-plane address, its MTU and the firewall.

use super::{Check, has_rdma};
use crate::dataplane::{DataPlane, Selection};
use crate::host::HostFacts;
use crate::units::roce_path_mtu;

/// The MTU the guides verified for the data-plane link.
pub const JUMBO_MTU: u32 = 9000;

pub(super) fn data_plane(facts: &HostFacts, selection: &Selection) -> Check {
    let id = "net.data_plane";
    match selection {
        Selection::Chosen(p) => Check::pass(
            id,
            format!(
                "{} on {}{}",
                p.ip,
                p.interface,
                p.rdma
                    .as_ref()
                    .map(|r| format!(" (RDMA {} port {})", r.device, r.port))
                    .unwrap_or_else(|| " (no RDMA device behind it)".into())
            ),
        ),
        Selection::IpNotFound { ip } => {
            let have = facts.network.address_list();
            Check::fail(
                id,
                format!(
                    "no interface holds {ip} (addresses here: {})",
                    if have.is_empty() {
                        "none".into()
                    } else {
                        have.join(", ")
                    }
                ),
                format!(
                    "pass --ip with one of this node's own addresses, or add it: sudo ip addr add {ip}/<prefix> dev <interface>"
                ),
            )
        }
        Selection::Ambiguous { candidates } => Check::warn(
            id,
            format!(
                "several RDMA interfaces have addresses: {}",
                candidates
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "pass --ip to say which carries the cluster traffic, e.g. halobox doctor --ip {}",
                candidates[0]
            ),
        ),
        Selection::NoCandidate if has_rdma(facts) => Check::warn(
            id,
            "no RDMA interface has an IPv4 address",
            "give the RDMA netdev its data-plane address (e.g. sudo nmcli connection modify <conn> ipv4.method manual ipv4.addresses 192.168.100.1/30), or pass --ip",
        ),
        Selection::NoCandidate => Check::skip(
            id,
            "no RDMA interface; pass --ip ADDR to check the interface that carries cluster traffic",
        ),
    }
}

pub(super) fn checks(facts: &HostFacts, plane: Option<&DataPlane>) -> Vec<Check> {
    vec![mtu(plane), firewall(facts, plane)]
}

fn mtu(plane: Option<&DataPlane>) -> Check {
    let id = "net.mtu";
    let Some(p) = plane else {
        return Check::skip(id, "no data-plane interface resolved");
    };
    let Some(mtu) = p.mtu else {
        return Check::warn(
            id,
            format!("MTU of {} could not be read", p.interface),
            format!("ip link show {}", p.interface),
        );
    };
    let path = roce_path_mtu(mtu)
        .map(|m| format!("RoCE path MTU {m}"))
        .unwrap_or_else(|| "too small for RoCE".into());
    if mtu >= JUMBO_MTU {
        Check::pass(
            id,
            format!("{} MTU {mtu} ({path}, the RoCE maximum)", p.interface),
        )
    } else {
        Check::warn(
            id,
            format!(
                "{} MTU {mtu} ({path}): jumbo frames ({JUMBO_MTU}) give RoCE its 4096 path MTU and cut TCP overhead; set it on both ends",
                p.interface
            ),
            format!(
                "sudo ip link set {0} mtu {JUMBO_MTU}\n# persistent (NetworkManager): sudo nmcli connection modify \"$(nmcli -g GENERAL.CONNECTION device show {0})\" ethernet.mtu {JUMBO_MTU}",
                p.interface
            ),
        )
    }
}

fn firewall(facts: &HostFacts, plane: Option<&DataPlane>) -> Check {
    let id = "net.firewall";
    let fw = &facts.firewall;
    if !fw.firewalld_running {
        return Check::pass(id, "firewalld is not running");
    }
    if fw.default_zone.as_deref() == Some("trusted") {
        return Check::pass(id, "firewalld's default zone is trusted");
    }
    let Some(p) = plane else {
        return Check::skip(
            id,
            "firewalld runs, but no data-plane interface is resolved to check (pass --ip)",
        );
    };
    if fw.trusted_interfaces.iter().any(|i| i == &p.interface) {
        Check::pass(
            id,
            format!("{} is in firewalld's trusted zone", p.interface),
        )
    } else {
        Check::warn(
            id,
            format!(
                "firewalld runs and {} is not in its permanent trusted zone: Ray and NCCL use random high ports",
                p.interface
            ),
            format!(
                "sudo firewall-cmd --permanent --zone=trusted --add-interface={}\nsudo firewall-cmd --reload",
                p.interface
            ),
        )
    }
}
