//! What the benchmark needs to know about one end of a path: its data-plane
//! interface, RDMA endpoint (device, port, RoCE v2 GID index), MTUs, line
//! rate, PCIe ceiling, tools and the RDMA port's counters. `halobox bench
//! probe --ip IP` prints this as JSON; `bench run` reads it from the peer
//! over ssh.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::dataplane::{self, Selection};
use crate::host::rdma::{self, PortCounters};
use crate::host::{self, GatherOptions, HostFacts, HostRoot, Reader};
use crate::units::{pcie_generation, pcie_link_gbps, roce_path_mtu};

/// The RDMA side of a node's data plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RdmaSide {
    /// Device name (perftest `-d`).
    pub device: String,
    /// Port (perftest `-i`).
    pub port: u32,
    /// RoCE v2 GID index of the address (perftest `-x`), when there is one.
    pub gid_index: Option<u32>,
    /// The port is ACTIVE and LinkUp.
    pub port_up: bool,
    /// `roce`, `iwarp` or `infiniband`.
    pub transport: Option<String>,
}

/// The USB4 link behind a thunderbolt-net interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usb4Side {
    /// The XDomain device (`0-1`).
    pub xdomain: Option<String>,
    /// The trained rate in Gb/s (lanes × lane speed, the slower direction).
    pub gbps: Option<u32>,
    /// Lanes and lane speed (`2 × 20 Gb/s`), when sysfs says.
    pub lanes: Option<String>,
}

/// One end of a path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeContext {
    /// The address asked about.
    pub ip: Ipv4Addr,
    /// The interface that holds it (`None`: no interface has it).
    pub interface: Option<String>,
    /// The interface's MTU.
    pub mtu: Option<u32>,
    /// The RoCE path MTU that MTU allows (≤ 4096).
    pub roce_mtu: Option<u32>,
    /// Line rate in Gb/s: the RDMA port's rate, else the netdev's `speed`.
    pub link_gbps: Option<f64>,
    /// The interface has no hardware behind it (veth, bridge): no line rate.
    pub virtual_link: bool,
    /// PCIe link of the NIC, e.g. `PCIe 4.0 x4`.
    pub pcie: Option<String>,
    /// The PCIe link's ceiling in Gb/s.
    pub pcie_gbps: Option<f64>,
    /// RDMA endpoint behind the interface.
    pub rdma: Option<RdmaSide>,
    /// Number of RDMA devices on the node.
    pub rdma_devices: usize,
    /// iperf3 is installed.
    pub iperf3: bool,
    /// perftest (`ib_write_bw`) is installed.
    pub perftest: bool,
    /// The RDMA port's counters now (`None`: no RDMA endpoint, or a driver
    /// without counter files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<PortCounters>,
    /// The USB4 link, when the interface is thunderbolt-net's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usb4: Option<Usb4Side>,
}

/// Reads the context for `ip` of the host at `root` (live, or a `--sysroot`).
pub fn probe(root: HostRoot, ip: Ipv4Addr) -> NodeContext {
    let facts = host::gather(root.clone(), GatherOptions::default());
    context(&facts, &Reader::new(root), ip)
}

/// The counters of `ctx`'s RDMA port, read now.
pub fn counters(r: &Reader, ctx: &NodeContext) -> Option<PortCounters> {
    let ep = ctx.rdma.as_ref()?;
    rdma::read_counters(r, &ep.device, ep.port)
}

/// The context for `ip` from host facts; `r` reads netdev speeds, which host
/// facts do not carry.
pub fn context(facts: &HostFacts, r: &Reader, ip: Ipv4Addr) -> NodeContext {
    let mut ctx = NodeContext {
        ip,
        interface: None,
        mtu: None,
        roce_mtu: None,
        link_gbps: None,
        virtual_link: false,
        pcie: None,
        pcie_gbps: None,
        rdma: None,
        rdma_devices: facts.rdma.devices.len(),
        iperf3: facts.tool("iperf3").is_some(),
        perftest: facts.tool("ib_write_bw").is_some(),
        counters: None,
        usb4: None,
    };
    let Selection::Chosen(plane) = dataplane::select(facts, Some(ip)) else {
        return ctx;
    };
    let base = format!("/sys/class/net/{}", plane.interface);
    ctx.virtual_link = !r.exists(&format!("{base}/device"));
    ctx.mtu = plane.mtu;
    ctx.roce_mtu = plane.mtu.and_then(roce_path_mtu);
    if !ctx.virtual_link {
        ctx.link_gbps = r
            .text_quiet(&format!("{base}/speed"))
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|mbps| *mbps > 0.0)
            .map(|mbps| mbps / 1000.0);
    }
    if let Some(link) = &plane.usb4 {
        // thunderbolt-net has no `speed`: the link's trained rate is the line rate.
        ctx.link_gbps = link.total_gbps().map(f64::from);
        ctx.usb4 = Some(Usb4Side {
            xdomain: link.xdomain.clone(),
            gbps: link.total_gbps(),
            lanes: match (link.tx_lanes, link.tx_gbps) {
                (Some(n), Some(g)) => Some(format!("{n} × {g} Gb/s")),
                _ => None,
            },
        });
    }
    if let Some(ep) = &plane.rdma {
        let dev = facts.rdma.devices.iter().find(|d| d.name == ep.device);
        if let Some(rate) = dev
            .and_then(|d| d.ports.iter().find(|p| p.number == ep.port))
            .and_then(|p| p.rate_gbps)
        {
            ctx.link_gbps = Some(rate);
        }
        if let Some(link) = dev.and_then(|d| d.pcie.as_ref())
            && let (Some(speed), Some(width)) = (link.current_speed_gts, link.current_width)
        {
            ctx.pcie_gbps = Some(pcie_link_gbps(speed, width));
            ctx.pcie = Some(match pcie_generation(speed) {
                Some(g) => format!("PCIe {g}.0 x{width}"),
                None => format!("PCIe {speed} GT/s x{width}"),
            });
        }
        ctx.rdma = Some(RdmaSide {
            device: ep.device.clone(),
            port: ep.port,
            gid_index: ep.gid_index,
            port_up: ep.port_up,
            transport: ep.transport.and_then(|t| {
                serde_json::to_value(t)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
            }),
        });
    }
    ctx.interface = Some(plane.interface);
    ctx.counters = counters(r, &ctx);
    ctx
}
