//! Network checks: the data-plane address, its MTU, and the route to each
//! peer (the firewall has its own module).

use super::{Check, DoctorOptions, has_rdma};
use crate::dataplane::{DataPlane, Selection};
use crate::host::HostFacts;
use crate::host::net::{AddressSource, IP_ADDR_JSON};
use crate::units::roce_path_mtu;

/// The MTU the guides verified for the data-plane link.
pub const JUMBO_MTU: u32 = 9000;
/// The largest MTU thunderbolt-net takes that halobox sets (its maximum is
/// 65522; 65520 keeps it a multiple of 4).
pub const USB4_MTU: u32 = 65520;

pub(super) fn data_plane(facts: &HostFacts, selection: &Selection) -> Check {
    let mut c = data_plane_check(facts, selection);
    if facts.network.addresses_from == AddressSource::GidTable {
        c.summary.push_str(&format!(
            " [the snapshot has no {}: addresses live in no sysfs file, so only those of RoCE v2 GIDs are known]",
            IP_ADDR_JSON.trim_start_matches('/')
        ));
    }
    c
}

fn data_plane_check(facts: &HostFacts, selection: &Selection) -> Check {
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
            match facts.network.usb4().next() {
                Some(i) => format!(
                    "no RDMA interface, and the USB4 link {} has no IPv4 address (net.usb4); pass --ip ADDR to check the interface that carries cluster traffic",
                    i.name
                ),
                None => "no RDMA interface; pass --ip ADDR to check the interface that carries cluster traffic".into(),
            },
        ),
    }
}

pub(super) fn checks(
    facts: &HostFacts,
    plane: Option<&DataPlane>,
    opts: &DoctorOptions,
) -> Vec<Check> {
    vec![mtu(plane), route(facts, plane, opts)]
}

/// Each peer's data-plane address must be reached through a connected
/// route on the data-plane interface: a route through the LAN port sends
/// NCCL and RoCE connection traffic the wrong way.
fn route(facts: &HostFacts, plane: Option<&DataPlane>, opts: &DoctorOptions) -> Check {
    let id = "net.route";
    if opts.peers.is_empty() {
        return Check::skip(
            id,
            match &opts.cluster_error {
                Some(e) => format!("no peer to check: cluster.toml could not be used ({e}); pass --peer IP"),
                None => "no peer to check: pass --peer IP (the other nodes' data-plane addresses), or keep a cluster.toml".into(),
            },
        );
    }
    let Some(p) = plane else {
        return Check::skip(id, "no data-plane interface resolved");
    };
    if facts.routes.routes.is_none() {
        return Check::skip(id, "/proc/net/route could not be read");
    }
    let mut bad = Vec::new();
    let mut indirect = Vec::new();
    let mut good = Vec::new();
    let mut to_fix = Vec::new();
    for peer in &opts.peers {
        let who = format!("{} ({})", peer.ip, peer.from);
        let route = facts.routes.lookup(peer.ip);
        if route.is_none_or(|r| r.reject || r.interface != p.interface) {
            to_fix.push(peer.ip);
        }
        match route {
            None => bad.push(format!("no route to {who}")),
            Some(r) if r.reject => bad.push(format!("{who} is unreachable by route")),
            Some(r) if r.interface != p.interface => bad.push(format!(
                "{who} is routed out of {}{} instead of {}",
                r.interface,
                r.gateway.map(|g| format!(" via {g}")).unwrap_or_default(),
                p.interface
            )),
            Some(r) if r.gateway.is_some() => indirect.push(format!(
                "{who} goes via the gateway {} on {}",
                r.gateway.expect("checked"),
                p.interface
            )),
            Some(r) => good.push(format!(
                "{who} on {}/{} dev {}",
                r.destination, r.prefix_len, r.interface
            )),
        }
    }
    // An address added without a prefix (`ip addr add A dev X`) is a /32:
    // no subnet, so no connected route to anybody.
    let host_only = facts
        .network
        .interface(&p.interface)
        .and_then(|i| i.ipv4.iter().find(|a| a.address == p.ip))
        .filter(|a| a.prefix_len == 32)
        .map(|a| {
            format!(
                "# {0}/32 on {1} was added without a prefix: give it the prefix both ends share, e.g. sudo ip addr del {0}/32 dev {1} && sudo ip addr add {0}/30 dev {1}",
                a.address, p.interface
            )
        });
    let fix = host_only
        .into_iter()
        .chain(
            to_fix
                .iter()
                .map(|ip| format!("sudo ip route replace {ip}/32 dev {}", p.interface)),
        )
        .chain([format!(
            "{}put both ends' data-plane addresses in one subnet on {} (e.g. 192.168.100.1/30 and .2/30, cabled directly): the kernel then adds the connected route itself",
            if to_fix.is_empty() { "" } else { "# better: " },
            p.interface
        )])
        .collect::<Vec<_>>()
        .join("\n");
    if !bad.is_empty() {
        Check::fail(
            id,
            format!(
                "{}: NCCL/Ray traffic to that peer leaves through the wrong port",
                bad.join("; ")
            ),
            fix,
        )
    } else if !indirect.is_empty() {
        Check::warn(
            id,
            format!(
                "{}: the peer is not on the data-plane link itself (the guides connect nodes directly)",
                indirect.join("; ")
            ),
            fix,
        )
    } else {
        Check::pass(id, format!("connected route to {}", good.join(", ")))
    }
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
    if p.is_usb4() {
        return usb4_mtu(p, mtu);
    }
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

/// `net.mtu` on a USB4 link: TCP only, so no RoCE path MTU; thunderbolt-net
/// takes up to [`USB4_MTU`].
fn usb4_mtu(p: &DataPlane, mtu: u32) -> Check {
    let id = "net.mtu";
    if mtu >= JUMBO_MTU {
        return Check::pass(
            id,
            format!(
                "{} MTU {mtu} (USB4 link: TCP only, jumbo frames)",
                p.interface
            ),
        );
    }
    Check::warn(
        id,
        format!(
            "{} MTU {mtu}: jumbo frames cut TCP's per-packet cost on the USB4 link (thunderbolt-net takes up to {USB4_MTU} where the host controller allows); set it on both ends",
            p.interface
        ),
        format!(
            "sudo ip link set {0} mtu {JUMBO_MTU}   # then net.jumbo proves it holds; up to {USB4_MTU}\n# persistent: sudo halobox setup --usb4-address ADDR/PREFIX (a NetworkManager connection for {0})",
            p.interface
        ),
    )
}
