//! RDMA facts from `/sys/class/infiniband/<dev>` and `/dev/infiniband`.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::devnodes::{self, DeviceNode, StatTable};
use super::reader::Reader;

const CLASS: &str = "/sys/class/infiniband";

/// How an RDMA device carries traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RdmaTransport {
    /// RDMA over Converged Ethernet (node type CA, link layer Ethernet).
    Roce,
    /// iWARP (node type RNIC): not what RCCL's RoCE path expects.
    Iwarp,
    /// Native InfiniBand (link layer InfiniBand).
    Infiniband,
}

/// PCIe link of the NIC's PCI function.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PcieLink {
    /// Negotiated speed per lane in GT/s (from `current_link_speed`, e.g. `16.0 GT/s PCIe`).
    pub current_speed_gts: Option<f64>,
    /// Negotiated lanes (`current_link_width`).
    pub current_width: Option<u32>,
    /// Speed the device supports (`max_link_speed`).
    pub max_speed_gts: Option<f64>,
    /// Lanes the device supports (`max_link_width`).
    pub max_width: Option<u32>,
}

/// One GID table entry that is in use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Gid {
    /// Index in the port's GID table (`NCCL_IB_GID_INDEX`, perftest `-x`).
    pub index: u32,
    /// The GID as sysfs prints it (eight groups of four hex digits).
    pub gid: String,
    /// `gid_attrs/types/<n>`: `RoCE v2` or `IB/RoCE v1`.
    pub gid_type: Option<String>,
    /// `gid_attrs/ndevs/<n>`: the netdev this GID belongs to.
    pub netdev: Option<String>,
    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub ipv4: Option<Ipv4Addr>,
}

impl Gid {
    /// True for a RoCE v2 entry.
    pub fn is_roce_v2(&self) -> bool {
        self.gid_type.as_deref() == Some("RoCE v2")
    }
}

/// One port of an RDMA device.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RdmaPort {
    /// Port number (1-based).
    pub number: u32,
    /// Logical state name from `state` (`ACTIVE`, `DOWN`, `INIT`, `ARMED`).
    pub state: Option<String>,
    /// Physical state name from `phys_state` (`LinkUp`, `Disabled`, `Polling`).
    pub phys_state: Option<String>,
    /// `Ethernet` or `InfiniBand`.
    pub link_layer: Option<String>,
    /// `rate` as printed (e.g. `100 Gb/sec (4X EDR)`).
    pub rate: Option<String>,
    /// The rate in Gb/s, from the leading number of `rate`.
    pub rate_gbps: Option<f64>,
    /// Every non-zero GID entry.
    pub gids: Vec<Gid>,
}

impl RdmaPort {
    /// ACTIVE and LinkUp.
    pub fn is_up(&self) -> bool {
        self.state.as_deref() == Some("ACTIVE") && self.phys_state.as_deref() == Some("LinkUp")
    }
}

/// One RDMA device (`/sys/class/infiniband/<name>`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RdmaDevice {
    /// Device name (`rocep194s0`, `mlx5_0`, `iwp194s0`).
    pub name: String,
    /// `node_type` as printed (`1: CA`, `4: RNIC`).
    pub node_type: Option<String>,
    /// RoCE, iWARP or InfiniBand, from node type and link layer.
    pub transport: Option<RdmaTransport>,
    /// Firmware version (`fw_ver`).
    pub fw_ver: Option<String>,
    /// `node_guid`.
    pub node_guid: Option<String>,
    /// `hca_type` where the driver has it (mlx5: `MT4119`).
    pub hca_type: Option<String>,
    /// PCI vendor id (`0x8086` Intel, `0x15b3` Mellanox).
    pub vendor_id: Option<String>,
    /// PCI device id (`0x1592` E810-C QSFP, `0x1017` ConnectX-5).
    pub device_id: Option<String>,
    /// The PCI function's driver (`ice`, `mlx5_core`).
    pub driver: Option<String>,
    /// The PCI function's address (`0000:c2:00.0`, from `device/uevent`).
    pub pci_address: Option<String>,
    /// PCIe link of the PCI function.
    pub pcie: Option<PcieLink>,
    /// Netdevs of the same PCI function (`device/net/*`).
    pub netdevs: Vec<String>,
    /// Every port.
    pub ports: Vec<RdmaPort>,
}

/// Everything halobox knows about RDMA on the host.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct RdmaFacts {
    /// Every RDMA device.
    pub devices: Vec<RdmaDevice>,
    /// `/dev/infiniband/*` (uverbs, rdma_cm).
    pub dev_nodes: Vec<DeviceNode>,
}

impl RdmaFacts {
    /// The `/dev/infiniband` nodes a program opens to use RDMA
    /// (`uverbs*`, `rdma_cm`): who may open them decides who may use it.
    pub fn user_nodes(&self) -> impl Iterator<Item = &DeviceNode> {
        self.dev_nodes
            .iter()
            .filter(|n| n.name().starts_with("uverbs") || n.name() == "rdma_cm")
    }
}

/// Reads every RDMA device and `/dev/infiniband`.
pub fn read(r: &Reader, stats: &StatTable) -> RdmaFacts {
    let devices = if r.exists(CLASS) {
        r.dir(CLASS)
            .unwrap_or_default()
            .into_iter()
            .map(|name| read_device(r, &name))
            .collect()
    } else {
        Vec::new()
    };
    RdmaFacts {
        devices,
        dev_nodes: devnodes::read_dir(r, stats, "/dev/infiniband", |_| true),
    }
}

fn read_device(r: &Reader, name: &str) -> RdmaDevice {
    let base = format!("{CLASS}/{name}");
    let node_type = r.line(&format!("{base}/node_type"));
    let ports: Vec<RdmaPort> = r
        .dir(&format!("{base}/ports"))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.parse::<u32>().ok())
        .map(|n| read_port(r, &format!("{base}/ports/{n}"), n))
        .collect();
    let link_layer = ports.first().and_then(|p| p.link_layer.as_deref());
    let dev = format!("{base}/device");
    let pcie = r
        .exists(&format!("{dev}/current_link_speed"))
        .then(|| PcieLink {
            current_speed_gts: r
                .line(&format!("{dev}/current_link_speed"))
                .and_then(|s| parse_link_speed(&s)),
            current_width: r
                .line(&format!("{dev}/current_link_width"))
                .and_then(|s| s.parse().ok()),
            max_speed_gts: r
                .line(&format!("{dev}/max_link_speed"))
                .and_then(|s| parse_link_speed(&s)),
            max_width: r
                .line(&format!("{dev}/max_link_width"))
                .and_then(|s| s.parse().ok()),
        });
    let netdevs = if r.exists(&format!("{dev}/net")) {
        r.dir(&format!("{dev}/net")).unwrap_or_default()
    } else {
        Vec::new()
    };
    RdmaDevice {
        name: name.to_string(),
        transport: transport(node_type.as_deref(), link_layer),
        node_type,
        fw_ver: r.line(&format!("{base}/fw_ver")),
        node_guid: r.line(&format!("{base}/node_guid")),
        hca_type: r
            .text_quiet(&format!("{base}/hca_type"))
            .map(|s| s.trim().to_string()),
        vendor_id: r.line(&format!("{dev}/vendor")),
        device_id: r.line(&format!("{dev}/device")),
        driver: r.link_name(&format!("{dev}/driver")),
        pci_address: super::pci::slot_name(r, &dev),
        pcie,
        netdevs,
        ports,
    }
}

fn read_port(r: &Reader, base: &str, number: u32) -> RdmaPort {
    let rate = r.line(&format!("{base}/rate"));
    let gid_dir = format!("{base}/gids");
    let mut gids = Vec::new();
    for idx in r.dir(&gid_dir).unwrap_or_default() {
        let Ok(index) = idx.parse::<u32>() else {
            continue;
        };
        let path = format!("{gid_dir}/{idx}");
        let Some(raw) = r.line(&path) else { continue };
        let Some(addr) = parse_gid(&raw) else {
            r.note(&path, format!("not a GID: {raw:?}"));
            continue;
        };
        if addr.is_unspecified() {
            continue;
        }
        let attr = |kind: &str| {
            r.text_quiet(&format!("{base}/gid_attrs/{kind}/{idx}"))
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        gids.push(Gid {
            index,
            gid: raw,
            gid_type: attr("types"),
            netdev: attr("ndevs"),
            ipv4: addr.to_ipv4_mapped(),
        });
    }
    RdmaPort {
        number,
        state: r.line(&format!("{base}/state")).map(|s| state_name(&s)),
        phys_state: r
            .line(&format!("{base}/phys_state"))
            .map(|s| state_name(&s)),
        link_layer: r.line(&format!("{base}/link_layer")),
        rate_gbps: rate.as_deref().and_then(parse_rate_gbps),
        rate,
        gids,
    }
}

/// A port's counters at one moment: `ports/<p>/counters/*` (IB port
/// counters), `ports/<p>/hw_counters/*` and the device's `hw_counters/*`
/// (driver-specific: mlx5 `out_of_sequence`, `np_cnp_sent`; irdma
/// `cnpSent`, `RxECNMrkd`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortCounters {
    /// Device name.
    pub device: String,
    /// Port number.
    pub port: u32,
    /// Values by `counters/<name>`, `hw_counters/<name>` (port) or
    /// `dev_hw_counters/<name>` (device).
    pub values: BTreeMap<String, u64>,
}

/// Reads a port's counters; `None` when the device has none of the folders
/// (no such device, or a driver without counters). Unreadable or
/// non-numeric files are left out; `hw_counters/lifespan` is a setting.
pub fn read_counters(r: &Reader, device: &str, port: u32) -> Option<PortCounters> {
    let base = format!("{CLASS}/{device}");
    let dirs = [
        ("counters", format!("{base}/ports/{port}/counters")),
        ("hw_counters", format!("{base}/ports/{port}/hw_counters")),
        ("dev_hw_counters", format!("{base}/hw_counters")),
    ];
    let mut values = BTreeMap::new();
    let mut found = false;
    for (prefix, dir) in &dirs {
        if !r.exists(dir) {
            continue;
        }
        found = true;
        for name in r.dir(dir).unwrap_or_default() {
            if name == "lifespan" {
                continue;
            }
            if let Some(v) = r
                .text_quiet(&format!("{dir}/{name}"))
                .and_then(|t| t.trim().parse::<u64>().ok())
            {
                values.insert(format!("{prefix}/{name}"), v);
            }
        }
    }
    found.then(|| PortCounters {
        device: device.to_string(),
        port,
        values,
    })
}

/// A port's state and rate, read without its GID table (cheap enough for
/// every scrape of `halobox metrics`).
#[derive(Debug, Clone, PartialEq)]
pub struct PortState {
    /// Device name.
    pub device: String,
    /// Port number.
    pub port: u32,
    /// Logical state name (`ACTIVE`, `DOWN`).
    pub state: Option<String>,
    /// Physical state name (`LinkUp`).
    pub phys_state: Option<String>,
    /// The rate in Gb/s, from `rate`.
    pub rate_gbps: Option<f64>,
}

/// Every port of every RDMA device, with its state and rate.
pub fn read_port_states(r: &Reader) -> Vec<PortState> {
    if !r.exists(CLASS) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for device in r.dir(CLASS).unwrap_or_default() {
        let ports = format!("{CLASS}/{device}/ports");
        for n in r
            .dir(&ports)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            let base = format!("{ports}/{n}");
            out.push(PortState {
                device: device.clone(),
                port: n,
                state: r.line(&format!("{base}/state")).map(|s| state_name(&s)),
                phys_state: r
                    .line(&format!("{base}/phys_state"))
                    .map(|s| state_name(&s)),
                rate_gbps: r
                    .line(&format!("{base}/rate"))
                    .as_deref()
                    .and_then(parse_rate_gbps),
            });
        }
    }
    out
}

fn transport(node_type: Option<&str>, link_layer: Option<&str>) -> Option<RdmaTransport> {
    let code = node_type?.split(':').next()?.trim();
    match (code, link_layer) {
        ("4", _) => Some(RdmaTransport::Iwarp),
        (_, Some("Ethernet")) => Some(RdmaTransport::Roce),
        (_, Some("InfiniBand")) => Some(RdmaTransport::Infiniband),
        _ => None,
    }
}

/// `4: ACTIVE` → `ACTIVE`; text without a code is kept as it is.
pub fn state_name(raw: &str) -> String {
    match raw.split_once(':') {
        Some((_, name)) => name.trim().to_string(),
        None => raw.trim().to_string(),
    }
}

/// Parses a sysfs GID (`fe80:0000:…:1a20`, eight groups) into an address.
pub fn parse_gid(raw: &str) -> Option<Ipv6Addr> {
    let raw = raw.trim();
    let groups: Vec<&str> = raw.split(':').collect();
    let hex4 = |g: &&str| !g.is_empty() && g.len() <= 4 && g.bytes().all(|b| b.is_ascii_hexdigit());
    if groups.len() != 8 || !groups.iter().all(hex4) {
        return None;
    }
    let mut segments = [0u16; 8];
    for (slot, g) in segments.iter_mut().zip(&groups) {
        *slot = u16::from_str_radix(g, 16).ok()?;
    }
    Some(Ipv6Addr::from(segments))
}

/// `100 Gb/sec (4X EDR)` → 100.0; `25 Gb/sec (1X EDR)` → 25.0.
pub fn parse_rate_gbps(raw: &str) -> Option<f64> {
    let mut parts = raw.split_whitespace();
    let n: f64 = parts.next()?.parse().ok()?;
    (parts.next()? == "Gb/sec" && n.is_finite() && n >= 0.0).then_some(n)
}

/// `16.0 GT/s PCIe` (or older `8 GT/s`, `5.0 GT/s`) → GT/s per lane.
pub fn parse_link_speed(raw: &str) -> Option<f64> {
    let mut parts = raw.split_whitespace();
    let n: f64 = parts.next()?.parse().ok()?;
    (parts.next()? == "GT/s" && n.is_finite() && n > 0.0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids() {
        let v4 = parse_gid("0000:0000:0000:0000:0000:ffff:c0a8:6401").unwrap();
        assert_eq!(v4.to_ipv4_mapped(), Some(Ipv4Addr::new(192, 168, 100, 1)));
        let ll = parse_gid("fe80:0000:0000:0000:b696:91ff:fe9e:1a20").unwrap();
        assert_eq!(ll.to_ipv4_mapped(), None);
        assert!(
            parse_gid("0000:0000:0000:0000:0000:0000:0000:0000")
                .unwrap()
                .is_unspecified()
        );
        assert_eq!(parse_gid("fe80::1"), None);
        assert_eq!(parse_gid("zzzz:0000:0000:0000:0000:0000:0000:0000"), None);
        assert_eq!(parse_gid("00000:0000:0000:0000:0000:0000:0000:000"), None);
        // Found by the gid fuzz target: from_str_radix accepts a sign.
        assert_eq!(parse_gid("5:+4:4:5:8:4:44:8"), None);
    }

    #[test]
    fn rates_and_states() {
        assert_eq!(parse_rate_gbps("100 Gb/sec (4X EDR)"), Some(100.0));
        assert_eq!(parse_rate_gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(parse_rate_gbps("fast"), None);
        assert_eq!(parse_link_speed("16.0 GT/s PCIe"), Some(16.0));
        assert_eq!(parse_link_speed("8 GT/s"), Some(8.0));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(state_name("4: ACTIVE"), "ACTIVE");
        assert_eq!(state_name("5: LinkUp"), "LinkUp");
    }

    #[test]
    fn transports() {
        assert_eq!(
            transport(Some("1: CA"), Some("Ethernet")),
            Some(RdmaTransport::Roce)
        );
        assert_eq!(
            transport(Some("4: RNIC"), Some("Ethernet")),
            Some(RdmaTransport::Iwarp)
        );
        assert_eq!(
            transport(Some("1: CA"), Some("InfiniBand")),
            Some(RdmaTransport::Infiniband)
        );
        assert_eq!(transport(None, Some("Ethernet")), None);
    }
}
