//! The IPv4 routing table (`/proc/net/route`: the main table, as the kernel
//! prints it, addresses in little-endian hex). Policy-routing rules and
//! other tables are not in that file and are not considered.

use std::net::Ipv4Addr;

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

const PATH: &str = "/proc/net/route";
const RTF_UP: u32 = 0x1;
const RTF_GATEWAY: u32 = 0x2;
const RTF_REJECT: u32 = 0x200;

/// One route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Route {
    /// Outgoing interface.
    pub interface: String,
    /// Destination network.
    pub destination: Ipv4Addr,
    /// Prefix length of the destination.
    pub prefix_len: u8,
    /// Next hop, `None` for a connected (on-link) route.
    pub gateway: Option<Ipv4Addr>,
    /// Metric; lower wins between equal prefixes.
    pub metric: u32,
    /// An unreachable/prohibit route.
    pub reject: bool,
}

/// The routing table, `None` when `/proc/net/route` could not be read.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct RouteFacts {
    /// Routes that are up, in file order; `null` when the table is unreadable.
    pub routes: Option<Vec<Route>>,
}

impl RouteFacts {
    /// The route the kernel picks for `dest`: the longest matching prefix,
    /// then the lowest metric.
    pub fn lookup(&self, dest: Ipv4Addr) -> Option<&Route> {
        self.routes
            .as_deref()?
            .iter()
            .filter(|r| contains(r.destination, r.prefix_len, dest))
            .max_by_key(|r| (r.prefix_len, std::cmp::Reverse(r.metric)))
    }
}

/// True when `addr` lies in `net/prefix`.
pub fn contains(net: Ipv4Addr, prefix: u8, addr: Ipv4Addr) -> bool {
    let mask = u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0);
    u32::from(net) & mask == u32::from(addr) & mask
}

/// Reads `/proc/net/route`.
pub fn read(r: &Reader) -> RouteFacts {
    RouteFacts {
        routes: r.text(PATH).map(|t| parse(&t)),
    }
}

/// Parses `/proc/net/route`; lines that do not fit are skipped.
pub fn parse(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let hex = |s: &str| u32::from_str_radix(s, 16).ok();
            let addr = |s: &str| hex(s).map(|v| Ipv4Addr::from(v.swap_bytes()));
            let flags = hex(f[3])?;
            if flags & RTF_UP == 0 {
                return None;
            }
            let mask = hex(f[7])?.swap_bytes();
            if mask.leading_ones() != mask.count_ones() {
                return None;
            }
            let gateway = addr(f[2])?;
            Some(Route {
                interface: f[0].to_string(),
                destination: addr(f[1])?,
                prefix_len: mask.count_ones() as u8,
                gateway: (flags & RTF_GATEWAY != 0 && !gateway.is_unspecified()).then_some(gateway),
                metric: f[6].parse().ok()?,
                reject: flags & RTF_REJECT != 0,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT                                                       \n\
enp191s0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0                                                                               \n\
enp194s0np0\t0064A8C0\t00000000\t0001\t0\t0\t101\tFCFFFFFF\t0\t0\t0                                                                               \n\
enp191s0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0                                                                               \n";

    #[test]
    fn longest_prefix_wins() {
        let t = RouteFacts {
            routes: Some(parse(TABLE)),
        };
        let peer = t.lookup(Ipv4Addr::new(192, 168, 100, 2)).unwrap();
        assert_eq!(
            (peer.interface.as_str(), peer.prefix_len, peer.gateway),
            ("enp194s0np0", 30, None)
        );
        let far = t.lookup(Ipv4Addr::new(8, 8, 8, 8)).unwrap();
        assert_eq!(far.gateway, Some(Ipv4Addr::new(192, 168, 1, 1)));
        assert_eq!(far.prefix_len, 0);
        assert!(contains(
            Ipv4Addr::new(192, 168, 100, 0),
            30,
            Ipv4Addr::new(192, 168, 100, 3)
        ));
        assert!(!contains(
            Ipv4Addr::new(192, 168, 100, 0),
            30,
            Ipv4Addr::new(192, 168, 100, 4)
        ));
        assert!(contains(
            Ipv4Addr::UNSPECIFIED,
            0,
            Ipv4Addr::new(1, 2, 3, 4)
        ));
    }
}
