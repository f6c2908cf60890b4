//! `bench run --link usb4`: the USB4 link alone (the setup guide's
//! `compare_eth_vs_rdma.sh -t`). Pure: which path that is (this node's
//! thunderbolt-net address and the peer's on the same subnet), and what the
//! figures measured on it mean against the public ones for two Strix Halo
//! nodes on one USB4 cable (ping-pong about 22 µs, bulk TCP about 8–19 Gb/s;
//! the link trains at 20 or 40 Gb/s, by what else the board's ports carry).

use std::net::Ipv4Addr;

use super::plan::PathSpec;
use super::probe::NodeContext;
use crate::host::net::{Interface, NetworkFacts};

/// Public round trip of a small message between two Strix Halo nodes on
/// one USB4 cable, µs.
pub const REF_ROUND_TRIP_US: f64 = 22.0;
/// Public bulk TCP bandwidth over such a link, Gb/s (low, high).
pub const REF_BULK_GBPS: (f64, f64) = (8.0, 19.0);
/// The rates a USB4 link between these boards trains at, Gb/s.
pub const REF_LINK_GBPS: [u32; 2] = [20, 40];

/// This node's address on a thunderbolt-net interface: an up one first.
fn local_addresses(net: &NetworkFacts) -> Vec<(&Interface, crate::host::net::Ipv4Net)> {
    let mut ifs: Vec<&Interface> = net.usb4().collect();
    ifs.sort_by_key(|i| !i.is_up());
    ifs.into_iter()
        .flat_map(|i| i.ipv4.iter().map(move |a| (i, *a)))
        .collect()
}

fn same_subnet(a: Ipv4Addr, b: Ipv4Addr, prefix: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    u32::from(a) & mask == u32::from(b) & mask
}

/// The other host address of a point-to-point subnet (/30, /31).
fn other_end(addr: Ipv4Addr, prefix: u8) -> Option<Ipv4Addr> {
    let a = u32::from(addr);
    match prefix {
        31 => Some(Ipv4Addr::from(a ^ 1)),
        30 => {
            let net = a & !3;
            let (one, two) = (net + 1, net + 2);
            (a == one || a == two).then(|| Ipv4Addr::from(if a == one { two } else { one }))
        }
        _ => None,
    }
}

/// The USB4 path: this node's thunderbolt-net address, and the first of
/// `candidates` (`--peer-ip`, else the peer node's `ip` in cluster.toml) on
/// its subnet, else the other end of a /30 or /31.
pub fn path(net: &NetworkFacts, candidates: &[Ipv4Addr]) -> Result<PathSpec, String> {
    let locals = local_addresses(net);
    if locals.is_empty() {
        let names: Vec<&str> = net.usb4().map(|i| i.name.as_str()).collect();
        return Err(if names.is_empty() {
            "--link usb4: this node has no thunderbolt-net interface (a USB4/Thunderbolt cable to the peer makes one; `halobox doctor` shows what it sees)".into()
        } else {
            format!(
                "--link usb4: the thunderbolt-net interface {} has no IPv4 address\n  hint: `halobox setup --usb4-address 10.0.0.1/30` (the peer .2), then run the bench again",
                names.join(", ")
            )
        });
    }
    for &(_, local) in &locals {
        if let Some(&peer) = candidates
            .iter()
            .find(|p| same_subnet(**p, local.address, local.prefix_len) && **p != local.address)
        {
            return Ok(PathSpec {
                local_ip: local.address,
                peer_ip: peer,
            });
        }
    }
    if let Some((_, local, peer)) = locals
        .iter()
        .find_map(|(i, a)| other_end(a.address, a.prefix_len).map(|p| (i, a, p)))
    {
        return Ok(PathSpec {
            local_ip: local.address,
            peer_ip: peer,
        });
    }
    let (iface, local) = locals[0];
    let asked: Vec<String> = candidates.iter().map(|c| c.to_string()).collect();
    Err(format!(
        "--link usb4: the peer's address ({}) is not on {}'s subnet {}/{}, and that subnet is not point to point\n  hint: pass the peer's thunderbolt-net address with --peer-ip",
        if asked.is_empty() {
            "none given".to_string()
        } else {
            asked.join(", ")
        },
        iface.name,
        local.address,
        local.prefix_len
    ))
}

/// Why an end of the path is not the USB4 link, when it is not.
pub fn not_usb4(end: &str, ctx: &NodeContext) -> Option<String> {
    if ctx.usb4.is_some() {
        return None;
    }
    Some(format!(
        "{end}'s {} is on {}, which is not a thunderbolt-net interface: this path is not the USB4 link",
        ctx.ip,
        ctx.interface.as_deref().unwrap_or("no interface")
    ))
}

/// The figures of one path `notes` judges: the median one-way latency of
/// its TCP latency leg and its best TCP bandwidth (halobox's or iperf3's).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    /// One-way latency, median, µs.
    pub median_us: Option<f64>,
    /// The best TCP bandwidth, Gb/s.
    pub best_gbps: Option<f64>,
}

/// What the path's figures mean against the public USB4 ones (one line
/// each); nothing when neither end is a USB4 link.
pub fn notes(path: &str, local: &NodeContext, peer: &NodeContext, m: Measured) -> Vec<String> {
    let Some(link) = local.usb4.as_ref().or(peer.usb4.as_ref()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    out.extend(not_usb4("this node", local));
    out.extend(not_usb4("the peer", peer));
    let rate = match link.gbps {
        Some(g) if g < REF_LINK_GBPS[1] => format!(
            "trained at {g} Gb/s, not {} (the board's other ports share the controller: unplug what else is on them, or use the other port)",
            REF_LINK_GBPS[1]
        ),
        Some(g) => format!("trained at {g} Gb/s"),
        None => "its rate is not in sysfs".to_string(),
    };
    out.push(format!(
        "{path} is a USB4 link (thunderbolt-net, TCP): {rate}; public figures for two Strix Halo nodes: about {REF_ROUND_TRIP_US} µs round trip, {}–{} Gb/s bulk",
        REF_BULK_GBPS.0, REF_BULK_GBPS.1
    ));
    if let Some(median) = m.median_us {
        let rtt = 2.0 * median;
        let verdict = if rtt <= 1.5 * REF_ROUND_TRIP_US {
            "as expected"
        } else {
            "slower than the public figure: interrupt moderation and CPU power states add to it (`ethtool -C IF rx-usecs 0`, the performance governor)"
        };
        out.push(format!(
            "{path} latency: {rtt:.1} µs round trip (median); {verdict}"
        ));
    }
    if let Some(bw) = m.best_gbps {
        let verdict = if bw < REF_BULK_GBPS.0 {
            "below the public range: check the trained rate above, MTU 9000 on both ends (`halobox doctor --peer IP` proves it with a DF-bit ping), and the cable (a certified USB4/TB4 one)"
        } else if bw > REF_BULK_GBPS.1 {
            "above the public range"
        } else {
            "within the public range"
        };
        out.push(format!(
            "{path} bandwidth: {bw:.2} Gb/s (the best TCP leg); {verdict}"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::probe::Usb4Side;
    use crate::host::net::Ipv4Net;

    fn iface(name: &str, addr: &str, usb4: bool) -> Interface {
        Interface {
            name: name.into(),
            mtu: Some(9000),
            operstate: Some("up".into()),
            ipv4: vec![addr.parse::<Ipv4Net>().unwrap()],
            gid_ipv4: vec![],
            driver: Some(if usb4 { "thunderbolt-net" } else { "igc" }.into()),
            usb4: usb4.then_some(crate::host::thunderbolt::Usb4Link {
                xdomain: None,
                rx_gbps: None,
                rx_lanes: None,
                tx_gbps: None,
                tx_lanes: None,
            }),
        }
    }

    fn net(ifs: Vec<Interface>) -> NetworkFacts {
        NetworkFacts {
            interfaces: ifs,
            ..Default::default()
        }
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn the_peer_on_the_usb4_subnet_or_the_other_end() {
        let n = net(vec![
            iface("enp1s0", "192.168.1.5/24", false),
            iface("thunderbolt0", "192.168.2.1/24", true),
        ]);
        // The cluster's peer on the LAN is not this link; --peer-ip on it is.
        let p = path(&n, &[ip("192.168.1.6"), ip("192.168.2.2")]).unwrap();
        assert_eq!(
            (p.local_ip, p.peer_ip),
            (ip("192.168.2.1"), ip("192.168.2.2"))
        );
        let err = path(&n, &[ip("192.168.1.6")]).unwrap_err();
        assert!(
            err.contains("not on thunderbolt0's subnet 192.168.2.1/24"),
            "{err}"
        );
        let n30 = net(vec![iface("thunderbolt0", "10.0.0.2/30", true)]);
        let p = path(&n30, &[]).unwrap();
        assert_eq!((p.local_ip, p.peer_ip), (ip("10.0.0.2"), ip("10.0.0.1")));
        let n31 = net(vec![iface("tb", "10.9.0.0/31", true)]);
        assert_eq!(path(&n31, &[]).unwrap().peer_ip, ip("10.9.0.1"));
        let none = net(vec![iface("enp1s0", "192.168.1.5/24", false)]);
        assert!(
            path(&none, &[])
                .unwrap_err()
                .contains("no thunderbolt-net interface")
        );
        let mut bare = iface("thunderbolt0", "10.0.0.1/30", true);
        bare.ipv4.clear();
        let err = path(&net(vec![bare]), &[]).unwrap_err();
        assert!(err.contains("halobox setup --usb4-address"), "{err}");
    }

    fn ctx(ip: &str, usb4: Option<u32>) -> NodeContext {
        let mut c: NodeContext = serde_json::from_value(serde_json::json!({
            "ip": ip, "interface": "thunderbolt0", "mtu": 9000, "roce_mtu": null,
            "link_gbps": null, "virtual_link": false, "pcie": null, "pcie_gbps": null,
            "rdma": null, "rdma_devices": 0, "iperf3": true, "perftest": false
        }))
        .unwrap();
        c.usb4 = usb4.map(|g| Usb4Side {
            xdomain: Some("0-1".into()),
            gbps: Some(g),
            lanes: Some("2 × 20 Gb/s".into()),
        });
        c
    }

    #[test]
    fn the_figures_against_the_public_ones() {
        let m = Measured {
            median_us: Some(10.0),
            best_gbps: Some(12.5),
        };
        let n = notes(
            "p0",
            &ctx("10.0.0.1", Some(40)),
            &ctx("10.0.0.2", Some(40)),
            m,
        );
        assert_eq!(n.len(), 3, "{n:#?}");
        assert!(
            n[0].starts_with(
                "p0 is a USB4 link (thunderbolt-net, TCP): trained at 40 Gb/s; public figures"
            ),
            "{}",
            n[0]
        );
        assert_eq!(n[1], "p0 latency: 20.0 µs round trip (median); as expected");
        assert!(
            n[2].starts_with(
                "p0 bandwidth: 12.50 Gb/s (the best TCP leg); within the public range"
            ),
            "{}",
            n[2]
        );
        let slow = Measured {
            median_us: Some(30.0),
            best_gbps: Some(3.0),
        };
        let n = notes(
            "p0",
            &ctx("10.0.0.1", Some(20)),
            &ctx("10.0.0.2", None),
            slow,
        );
        assert!(
            n.iter().any(|l| l.contains(
                "the peer's 10.0.0.2 is on thunderbolt0, which is not a thunderbolt-net interface"
            )),
            "{n:#?}"
        );
        assert!(
            n.iter().any(|l| l.contains("trained at 20 Gb/s, not 40")),
            "{n:#?}"
        );
        assert!(
            n.iter()
                .any(|l| l.contains("slower than the public figure")),
            "{n:#?}"
        );
        assert!(
            n.iter().any(|l| l.contains("below the public range")),
            "{n:#?}"
        );
        assert!(notes("p0", &ctx("10.0.0.1", None), &ctx("10.0.0.2", None), slow).is_empty());
    }
}
