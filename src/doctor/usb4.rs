//! USB4/Thunderbolt checks: the thunderbolt-net link (`net.usb4`: up, its
//! negotiated rate) and whether the MTU holds end to end (`net.jumbo`: the
//! DF-bit pings [`crate::host::jumbo`] sent, for any data plane).

use super::{Check, DoctorOptions};
use crate::dataplane::DataPlane;
use crate::host::HostFacts;
use crate::host::net::Interface;
use crate::host::thunderbolt::Usb4Link;

/// USB4's full rate: two lanes of 20 Gb/s.
pub const USB4_FULL_GBPS: u32 = 40;

/// What the public two-node Strix Halo measurements saw on such a link.
const REFERENCE: &str =
    "public 2-node figures: ~22 µs ping-pong, 8–19 Gb/s bulk, a 24 KB all-reduce ~286 µs over TCP";

pub(super) fn checks(
    facts: &HostFacts,
    plane: Option<&DataPlane>,
    opts: &DoctorOptions,
) -> Vec<Check> {
    vec![link(facts, plane), jumbo(plane, opts)]
}

fn rate(link: &Usb4Link) -> String {
    match (link.rx_gbps, link.rx_lanes, link.total_gbps()) {
        (Some(speed), Some(lanes), Some(total)) => {
            format!("{lanes} × {speed} Gb/s = {total} Gb/s")
        }
        _ => "rate not exposed (the XDomain's rx_speed/rx_lanes need kernel 6.x)".into(),
    }
}

fn link(facts: &HostFacts, plane: Option<&DataPlane>) -> Check {
    let id = "net.usb4";
    let all: Vec<&Interface> = facts.network.usb4().collect();
    let Some(p) = plane.filter(|p| p.is_usb4()) else {
        return not_the_plane(id, &all, plane);
    };
    let link = p.usb4.as_ref().expect("is_usb4");
    let iface = facts.network.interface(&p.interface);
    let where_ = link
        .xdomain
        .as_ref()
        .map(|x| format!(", XDomain {x}"))
        .unwrap_or_default();
    if !iface.is_some_and(Interface::is_up) {
        return Check::fail(
            id,
            format!(
                "{} (thunderbolt-net{where_}) is {}: the USB4 cable is out or the peer's thunderbolt-net is not loaded",
                p.interface,
                iface
                    .and_then(|i| i.operstate.as_deref())
                    .unwrap_or("not up")
            ),
            format!(
                "plug a USB4/Thunderbolt 4 (40 Gb/s) cable between the two nodes' USB4 ports, then on both: sudo modprobe thunderbolt-net && ip link show {}\n# a peer that is not authorised shows in: boltctl list",
                p.interface
            ),
        );
    }
    let summary = format!(
        "{} is a USB4 host-to-host link (thunderbolt-net{where_}): {}; TCP sockets, no RDMA ({REFERENCE})",
        p.interface,
        rate(link)
    );
    match link.total_gbps() {
        Some(total) if total < USB4_FULL_GBPS => Check::warn(
            id,
            format!("{summary}: below USB4's {USB4_FULL_GBPS} Gb/s"),
            format!(
                "the port shares its bandwidth with the board's other ports, or the cable is not a 40 Gb/s one: use a USB4 40 Gb/s (Thunderbolt 4/5) cable on a port of the CPU's own USB4 controller\n# check: grep . /sys/bus/thunderbolt/devices/{}/{{rx,tx}}_{{speed,lanes}}",
                link.xdomain.as_deref().unwrap_or("*")
            ),
        ),
        _ => Check::pass(id, summary),
    }
}

/// `net.usb4` when the data plane is not a USB4 link: SKIP without one,
/// else what the USB4 interfaces are for.
fn not_the_plane(id: &str, all: &[&Interface], plane: Option<&DataPlane>) -> Check {
    if all.is_empty() {
        return Check::skip(id, "no USB4/Thunderbolt interface (thunderbolt-net)");
    }
    let names = all
        .iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    match plane {
        Some(p) => Check::info(
            id,
            format!(
                "USB4 link(s) {names} (thunderbolt-net) here; the data plane is {}",
                p.interface
            ),
        ),
        None if all.iter().all(|i| i.ipv4.is_empty()) => Check::warn(
            id,
            format!(
                "{names} is a USB4 link (thunderbolt-net) without an IPv4 address: it can carry the cluster traffic"
            ),
            format!(
                "give both ends an address in one small subnet: sudo halobox setup --usb4-address 10.0.0.1/30 (and 10.0.0.2/30 on the peer), then --ip 10.0.0.1; it needs {} up",
                all[0].name
            ),
        ),
        None => Check::info(
            id,
            format!(
                "USB4 link(s) {names} (thunderbolt-net); pass --ip with its address to check it as the data plane"
            ),
        ),
    }
}

/// The DF-bit pings towards the peers through the data-plane interface:
/// an MTU set but not carried (a host controller without jumbo frames, a
/// peer at a smaller MTU) fails here rather than stalling NCCL.
fn jumbo(plane: Option<&DataPlane>, opts: &DoctorOptions) -> Check {
    let id = "net.jumbo";
    let Some(p) = plane else {
        return Check::skip(id, "no data-plane interface resolved");
    };
    if opts.peers.is_empty() {
        return Check::skip(
            id,
            "no peer to ping: pass --peer IP, or keep a cluster.toml",
        );
    }
    let proofs: Vec<_> = opts
        .jumbo
        .iter()
        .filter(|j| j.interface == p.interface)
        .collect();
    if proofs.is_empty() {
        return Check::skip(
            id,
            format!(
                "no DF-bit ping through {} (a snapshot cannot ping, and a peer routed elsewhere is net.route's)",
                p.interface
            ),
        );
    }
    let failed: Vec<_> = proofs.iter().filter(|j| !j.held).collect();
    if let Some(first) = failed.first() {
        let what = failed
            .iter()
            .map(|j| format!("{} ({})", j.peer, j.detail))
            .collect::<Vec<_>>()
            .join("; ");
        return Check::fail(
            id,
            format!(
                "{}-byte frames with the don't-fragment bit do not reach {what}: MTU {} is set on {} but not carried end to end",
                first.mtu, first.mtu, p.interface
            ),
            format!(
                "set the same MTU on both ends (ip link show {0} on each); some Thunderbolt host controllers take no jumbo frames: then sudo ip link set {0} mtu 1500 on both\n# find what holds: ping -M do -s SIZE -I {0} {1}   (SIZE = MTU - 28)",
                p.interface, first.peer
            ),
        );
    }
    Check::pass(
        id,
        format!(
            "MTU {} holds to {} (ping -M do -s {} through {})",
            proofs[0].mtu,
            proofs
                .iter()
                .map(|j| j.peer.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            proofs[0].size,
            p.interface
        ),
    )
}
