//! Network interfaces: MTU and state from `/sys/class/net`, IPv4 addresses
//! from the kernel (getifaddrs) or, in a snapshot, from
//! `captured/ip-addr.json` (the output of `ip -json addr show`). Addresses
//! live in no sysfs file, so a snapshot without that file only knows the
//! addresses its RoCE v2 GID table names (`::ffff:a.b.c.d` on netdev X).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rdma::RdmaFacts;
use super::reader::Reader;
use super::thunderbolt::{self, Usb4Link};

/// Where a snapshot keeps `ip -json addr show`.
pub const IP_ADDR_JSON: &str = "/captured/ip-addr.json";

/// An IPv4 address with its prefix length, exactly as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Ipv4Net {
    /// The address.
    pub address: Ipv4Addr,
    /// The prefix length (`/30`).
    pub prefix_len: u8,
}

impl std::str::FromStr for Ipv4Net {
    type Err = String;
    /// `a.b.c.d/prefix`, the prefix 1 to 32.
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not ADDR/PREFIX (e.g. 10.0.0.1/30)"))?;
        let address = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not an IPv4 address"))?;
        let prefix_len = prefix
            .parse()
            .ok()
            .filter(|p| (1..=32).contains(p))
            .ok_or_else(|| format!("{prefix:?} is not a prefix length from 1 to 32"))?;
        Ok(Ipv4Net {
            address,
            prefix_len,
        })
    }
}

/// One network interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Interface {
    /// Interface name (`enp194s0np0`).
    pub name: String,
    /// MTU in bytes.
    pub mtu: Option<u32>,
    /// `operstate` (`up`, `down`, `unknown` for loopback).
    pub operstate: Option<String>,
    /// IPv4 addresses.
    pub ipv4: Vec<Ipv4Net>,
    /// IPv4 addresses known only from a RoCE v2 GID of this netdev (a
    /// snapshot without `captured/ip-addr.json`); their prefix is unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gid_ipv4: Vec<Ipv4Addr>,
    /// The driver of its device (`device/driver`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The USB4 link, when the driver is thunderbolt-net.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usb4: Option<Usb4Link>,
}

impl Interface {
    /// True when the interface is up (`operstate` `up`).
    pub fn is_up(&self) -> bool {
        self.operstate.as_deref() == Some("up")
    }
}

/// Where the interfaces' addresses came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AddressSource {
    /// The running kernel (getifaddrs).
    #[default]
    Kernel,
    /// A snapshot's `captured/ip-addr.json`.
    IpAddrJson,
    /// A snapshot without `captured/ip-addr.json`: only the IPv4 addresses
    /// of RoCE v2 GIDs are known.
    GidTable,
}

/// Every interface of the host.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct NetworkFacts {
    /// Interfaces in name order.
    pub interfaces: Vec<Interface>,
    /// Where their addresses came from.
    pub addresses_from: AddressSource,
}

impl NetworkFacts {
    /// The interface that holds exactly `ip` (no subnet guessing).
    pub fn interface_with_ip(&self, ip: Ipv4Addr) -> Option<&Interface> {
        self.interfaces
            .iter()
            .find(|i| i.ipv4.iter().any(|a| a.address == ip) || i.gid_ipv4.contains(&ip))
    }

    /// Every IPv4 address as `a.b.c.d/prefix on <interface>`, for messages
    /// that say which addresses a host does have.
    pub fn address_list(&self) -> Vec<String> {
        self.interfaces
            .iter()
            .flat_map(|i| {
                i.ipv4
                    .iter()
                    .map(move |a| format!("{}/{} on {}", a.address, a.prefix_len, i.name))
                    .chain(
                        i.gid_ipv4
                            .iter()
                            .map(move |a| format!("{a} on {} (from its RoCE GID)", i.name)),
                    )
            })
            .collect()
    }

    /// The interface called `name`.
    pub fn interface(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// The thunderbolt-net interfaces (USB4 host-to-host links).
    pub fn usb4(&self) -> impl Iterator<Item = &Interface> {
        self.interfaces.iter().filter(|i| i.usb4.is_some())
    }
}

/// Reads every interface; `rdma` supplies GID addresses to a snapshot
/// that has no `captured/ip-addr.json`.
pub fn read(r: &Reader, rdma: &RdmaFacts) -> NetworkFacts {
    let (addrs, addresses_from) = if r.root().is_live() {
        let addrs = live_ipv4();
        if r.is_recording() {
            r.write(IP_ADDR_JSON, ip_addr_json(&addrs).as_bytes());
        }
        (addrs, AddressSource::Kernel)
    } else if r.exists(IP_ADDR_JSON) {
        (snapshot_ipv4(r), AddressSource::IpAddrJson)
    } else {
        (BTreeMap::new(), AddressSource::GidTable)
    };
    let gid_addrs = if addresses_from == AddressSource::GidTable {
        gid_ipv4(rdma)
    } else {
        BTreeMap::new()
    };
    let names = if r.exists("/sys/class/net") {
        r.dir("/sys/class/net").unwrap_or_default()
    } else {
        addrs.keys().chain(gid_addrs.keys()).cloned().collect()
    };
    let interfaces = names
        .into_iter()
        .map(|name| {
            let base = format!("/sys/class/net/{name}");
            let driver = r.link_name(&format!("{base}/device/driver"));
            let usb4 = thunderbolt::is_driver(driver.as_deref()).then(|| {
                thunderbolt::read_link(r, r.link_name(&format!("{base}/device")).as_deref())
            });
            Interface {
                driver,
                usb4,
                mtu: r.line(&format!("{base}/mtu")).and_then(|s| s.parse().ok()),
                operstate: r.line(&format!("{base}/operstate")),
                ipv4: addrs.get(&name).cloned().unwrap_or_default(),
                gid_ipv4: gid_addrs.get(&name).cloned().unwrap_or_default(),
                name,
            }
        })
        .collect();
    NetworkFacts {
        interfaces,
        addresses_from,
    }
}

/// The IPv4 address of every RoCE v2 GID, by the netdev it belongs to.
/// An interface's `statistics/*` counters (`rx_bytes`, `tx_dropped`, …)
/// by file name; files that are not an unsigned integer are left out.
/// `None` when the interface has no `statistics` folder.
pub fn read_statistics(r: &Reader, interface: &str) -> Option<BTreeMap<String, u64>> {
    let dir = format!("/sys/class/net/{interface}/statistics");
    if !r.exists(&dir) {
        return None;
    }
    let mut out = BTreeMap::new();
    for name in r.dir(&dir).unwrap_or_default() {
        if let Some(v) = r
            .text_quiet(&format!("{dir}/{name}"))
            .and_then(|t| t.trim().parse::<u64>().ok())
        {
            out.insert(name, v);
        }
    }
    Some(out)
}

fn gid_ipv4(rdma: &RdmaFacts) -> BTreeMap<String, Vec<Ipv4Addr>> {
    let mut map: BTreeMap<String, Vec<Ipv4Addr>> = BTreeMap::new();
    let gids = rdma
        .devices
        .iter()
        .flat_map(|d| &d.ports)
        .flat_map(|p| &p.gids);
    for g in gids.filter(|g| g.is_roce_v2()) {
        if let (Some(ip), Some(dev)) = (g.ipv4, &g.netdev) {
            let list = map.entry(dev.clone()).or_default();
            if !list.contains(&ip) {
                list.push(ip);
            }
        }
    }
    map
}

fn live_ipv4() -> BTreeMap<String, Vec<Ipv4Net>> {
    let mut map: BTreeMap<String, Vec<Ipv4Net>> = BTreeMap::new();
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return map;
    };
    for ifa in addrs {
        let Some(sin) = ifa.address.as_ref().and_then(|a| a.as_sockaddr_in()) else {
            continue;
        };
        let prefix_len = ifa
            .netmask
            .as_ref()
            .and_then(|m| m.as_sockaddr_in())
            .map(|m| u32::from(m.ip()).count_ones() as u8)
            .unwrap_or(32);
        map.entry(ifa.interface_name).or_default().push(Ipv4Net {
            address: sin.ip(),
            prefix_len,
        });
    }
    map
}

/// `ip -json addr show` as the snapshot's `captured/ip-addr.json`: the
/// command's own output, or (without iproute2) the kernel's IPv4 addresses
/// in its shape.
fn ip_addr_json(addrs: &BTreeMap<String, Vec<Ipv4Net>>) -> String {
    let out = crate::proc::command("ip")
        .args(["-json", "addr", "show"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(out) = out {
        return String::from_utf8_lossy(&out.stdout).into_owned();
    }
    let links: Vec<serde_json::Value> = addrs
        .iter()
        .map(|(name, nets)| {
            serde_json::json!({
                "ifname": name,
                "addr_info": nets.iter().map(|n| serde_json::json!({
                    "family": "inet",
                    "local": n.address.to_string(),
                    "prefixlen": n.prefix_len,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::Value::from(links).to_string() + "\n"
}

#[derive(Deserialize)]
struct IpLink {
    ifname: String,
    #[serde(default)]
    addr_info: Vec<IpAddrInfo>,
}

#[derive(Deserialize)]
struct IpAddrInfo {
    family: String,
    local: Option<String>,
    prefixlen: Option<u8>,
}

fn snapshot_ipv4(r: &Reader) -> BTreeMap<String, Vec<Ipv4Net>> {
    let Some(text) = r.text(IP_ADDR_JSON) else {
        return BTreeMap::new();
    };
    match parse_ip_json(&text) {
        Ok(map) => map,
        Err(e) => {
            r.note(
                IP_ADDR_JSON,
                format!("not `ip -json addr show` output: {e}"),
            );
            BTreeMap::new()
        }
    }
}

/// Parses `ip -json addr show` into IPv4 addresses per interface.
pub fn parse_ip_json(text: &str) -> Result<BTreeMap<String, Vec<Ipv4Net>>, String> {
    let links: Vec<IpLink> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut map = BTreeMap::new();
    for link in links {
        let v4 = link
            .addr_info
            .iter()
            .filter(|a| a.family == "inet")
            .filter_map(|a| {
                Some(Ipv4Net {
                    address: a.local.as_deref()?.parse().ok()?,
                    prefix_len: a.prefixlen.filter(|p| *p <= 32)?,
                })
            })
            .collect();
        map.insert(link.ifname, v4);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_json() {
        let m = parse_ip_json(
            r#"[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8},{"family":"inet6","local":"::1","prefixlen":128}]},
                {"ifindex":3,"ifname":"enp194s0np0","addr_info":[{"family":"inet","local":"192.168.100.1","prefixlen":30}]},
                {"ifindex":4,"ifname":"down0"}]"#,
        )
        .unwrap();
        assert_eq!(m["enp194s0np0"][0].address, Ipv4Addr::new(192, 168, 100, 1));
        assert_eq!(m["enp194s0np0"][0].prefix_len, 30);
        assert_eq!(m["lo"].len(), 1);
        assert!(m["down0"].is_empty());
        assert!(parse_ip_json("not json").is_err());
    }

    #[test]
    fn address_with_prefix() {
        let n: Ipv4Net = "10.0.0.1/30".parse().unwrap();
        assert_eq!((n.address, n.prefix_len), (Ipv4Addr::new(10, 0, 0, 1), 30));
        assert!("10.0.0.1".parse::<Ipv4Net>().is_err());
        assert!("10.0.0.1/33".parse::<Ipv4Net>().is_err());
        assert!("10.0.0/30".parse::<Ipv4Net>().is_err());
    }

    #[test]
    fn exact_ip_match_only() {
        let net = NetworkFacts {
            interfaces: vec![
                Interface {
                    name: "lan".into(),
                    mtu: Some(1500),
                    operstate: Some("up".into()),
                    ipv4: vec![Ipv4Net {
                        address: Ipv4Addr::new(192, 168, 1, 5),
                        prefix_len: 24,
                    }],
                    gid_ipv4: vec![],
                    driver: None,
                    usb4: None,
                },
                Interface {
                    name: "rdma".into(),
                    mtu: Some(9000),
                    operstate: Some("up".into()),
                    ipv4: vec![Ipv4Net {
                        address: Ipv4Addr::new(192, 168, 100, 1),
                        prefix_len: 30,
                    }],
                    gid_ipv4: vec![],
                    driver: None,
                    usb4: None,
                },
            ],
            addresses_from: AddressSource::IpAddrJson,
        };
        assert_eq!(
            net.interface_with_ip(Ipv4Addr::new(192, 168, 100, 1))
                .unwrap()
                .name,
            "rdma"
        );
        assert!(
            net.interface_with_ip(Ipv4Addr::new(192, 168, 1, 1))
                .is_none()
        );
    }
}
