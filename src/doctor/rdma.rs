//! RDMA checks for the data-plane port: present, up, RoCE, GID, PCIe, firmware.

use super::{Check, Status, chose_usb4, has_rdma};
use crate::dataplane::{DataPlane, RdmaEndpoint};
use crate::host::HostFacts;
use crate::host::rdma::{RdmaDevice, RdmaTransport};
use crate::units::{pcie_generation, pcie_link_gbps};

/// E810 firmware (NVM) version the guides verified.
pub const E810_VERIFIED_FW: (u32, u32) = (4, 91);

pub(super) fn checks(facts: &HostFacts, plane: Option<&DataPlane>) -> Vec<Check> {
    let mut out = device_checks(facts, plane);
    out.insert(1, access(facts));
    out
}

/// Whether the user can open the nodes user-space verbs use
/// (`/dev/infiniband/uverbs*`, `rdma_cm`); the fix joins the nodes' group
/// and `rdma` where the host has that group.
fn access(facts: &HostFacts) -> Check {
    let id = "rdma.access";
    if !has_rdma(facts) {
        return Check::skip(id, "no RDMA device");
    }
    let nodes: Vec<_> = facts.rdma.user_nodes().collect();
    if nodes.is_empty() {
        return Check::warn(
            id,
            "no /dev/infiniband/uverbs* or rdma_cm: programs cannot reach the RDMA device (ib_uverbs / rdma_ucm not loaded)",
            "sudo modprobe -a ib_uverbs rdma_ucm   # rdma-core's service loads them at boot",
        );
    }
    let companion = facts
        .user
        .device_groups
        .iter()
        .any(|g| g.name == "rdma" && g.gid.is_some())
        .then_some("rdma");
    let each: Vec<Check> = nodes
        .iter()
        .map(|n| super::gpu::access_check(id, facts, n, companion))
        .collect();
    if let Some(bad) = each.iter().find(|c| c.status != Status::Pass) {
        return bad.clone();
    }
    Check::pass(
        id,
        each.iter()
            .map(|c| c.summary.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    )
}

fn device_checks(facts: &HostFacts, plane: Option<&DataPlane>) -> Vec<Check> {
    let ids = [
        "rdma.port",
        "rdma.mode",
        "rdma.gid",
        "rdma.pcie",
        "rdma.firmware",
    ];
    let skip_rest = |why: &str| {
        ids.iter()
            .map(|id| Check::skip(id, why))
            .collect::<Vec<_>>()
    };
    if chose_usb4(facts, plane)
        && let Some(c) = usb4_instead(facts, plane)
    {
        let mut out = vec![c];
        out.extend(skip_rest("the data plane is a USB4 link (TCP sockets)"));
        return out;
    }
    if !has_rdma(facts) {
        let mut out = vec![Check::warn(
            "rdma.device",
            "no RDMA device: NCCL/RCCL will fall back to TCP sockets (the ethernet transport, ~70 µs instead of ~5 µs)",
            "install an RDMA NIC (Intel E810 or ConnectX) and its drivers (irdma / mlx5_ib, rdma-core); `rdma link` must list it",
        )];
        out.extend(skip_rest("no RDMA device"));
        return out;
    }
    let Some(p) = plane else {
        let mut out = vec![Check::pass(
            "rdma.device",
            format!("RDMA devices: {}", device_list(facts)),
        )];
        out.extend(skip_rest("no data-plane interface resolved (pass --ip)"));
        return out;
    };
    let Some(ep) = &p.rdma else {
        let mut out = vec![Check::warn(
            "rdma.device",
            format!(
                "{} has no RDMA device (RDMA devices here: {}): traffic over it uses TCP",
                p.interface,
                device_list(facts)
            ),
            "pass --ip with the address of the RDMA NIC's interface",
        )];
        out.extend(skip_rest("the data-plane interface has no RDMA device"));
        return out;
    };
    let dev = facts
        .rdma
        .devices
        .iter()
        .find(|d| d.name == ep.device)
        .expect("endpoint names a device from the facts");
    let mut out = vec![
        Check::pass(
            "rdma.device",
            format!(
                "{} ({}) serves {}",
                dev.name,
                dev.driver.as_deref().unwrap_or("driver unknown"),
                p.interface
            ),
        ),
        port(dev, ep, p),
        mode(facts, dev, p),
        gid(ep, p),
        pcie(dev, ep),
        firmware(facts, dev, p),
    ];
    out.extend(others(facts, ep));
    out
}

/// `rdma.device` when the user chose a USB4 link: information, never
/// "install an RDMA NIC". `None` when the data plane is an RDMA NIC's.
fn usb4_instead(facts: &HostFacts, plane: Option<&DataPlane>) -> Option<Check> {
    let iface = match plane {
        Some(p) if p.rdma.is_some() => return None,
        Some(p) => p.interface.clone(),
        None => facts.network.usb4().next()?.name.clone(),
    };
    let others = if has_rdma(facts) {
        format!(" (RDMA devices here, unused by it: {})", device_list(facts))
    } else {
        String::new()
    };
    let what = match plane {
        Some(_) => "the data plane is",
        None => "no data plane resolved; the USB4 link here is",
    };
    Some(Check::info(
        "rdma.device",
        format!("{what} {iface}: NCCL/RCCL use TCP sockets on it (NCCL_IB_DISABLE=1){others}"),
    ))
}

/// RDMA ports other than the data plane's: listed so their state is known,
/// never judged (a second port left down or a second NIC is not a fault).
fn others(facts: &HostFacts, ep: &RdmaEndpoint) -> Option<Check> {
    let list: Vec<String> = facts
        .rdma
        .devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(d, p)| !(d.name == ep.device && p.number == ep.port))
        .map(|(d, p)| {
            let netdev = p
                .gids
                .iter()
                .find_map(|g| g.netdev.clone())
                .or_else(|| d.netdevs.first().cloned())
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            format!(
                "{} port {}{netdev} {}",
                d.name,
                p.number,
                p.state.as_deref().unwrap_or("state unknown")
            )
        })
        .collect();
    (!list.is_empty()).then(|| {
        Check::info(
            "rdma.others",
            format!("not on the data plane, not checked: {}", list.join(", ")),
        )
    })
}

fn device_list(facts: &HostFacts) -> String {
    facts
        .rdma
        .devices
        .iter()
        .map(|d| match d.netdevs.as_slice() {
            [] => d.name.clone(),
            n => format!("{} ({})", d.name, n.join(", ")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn port(dev: &RdmaDevice, ep: &RdmaEndpoint, p: &DataPlane) -> Check {
    let id = "rdma.port";
    let port = dev.ports.iter().find(|x| x.number == ep.port);
    let state = port.and_then(|x| x.state.as_deref()).unwrap_or("unknown");
    let phys = port
        .and_then(|x| x.phys_state.as_deref())
        .unwrap_or("unknown");
    let rate = port
        .and_then(|x| x.rate.as_deref())
        .unwrap_or("rate unknown");
    if ep.port_up {
        Check::pass(
            id,
            format!("{} port {} {state}/{phys}, {rate}", dev.name, ep.port),
        )
    } else {
        Check::fail(
            id,
            format!("{} port {} is {state}/{phys}", dev.name, ep.port),
            format!(
                "sudo ip link set {} up; check the cable and that the peer is up; `rdma link` must show state ACTIVE physical_state LINK_UP",
                p.interface
            ),
        )
    }
}

/// The switch from iWARP to RoCE v2 for an E810 on the in-kernel ice/irdma
/// drivers: ice's devlink parameters (runtime only; iWARP must be off
/// before RoCE can be turned on, and ice re-plugs irdma itself), made
/// persistent with a oneshot unit. `options irdma roce_ena=1` exists only
/// in Intel's out-of-tree irdma.
pub fn e810_roce_fix(pci: &str) -> String {
    let set = |name: &str, value: &str| {
        format!("devlink dev param set pci/{pci} name {name} value {value} cmode runtime")
    };
    let (iwarp, roce) = (set("enable_iwarp", "false"), set("enable_roce", "true"));
    format!(
        "sudo {iwarp}\n\
         sudo {roce}   # irdma re-probes the device as roce*\n\
         # persistent (the parameters are runtime-only): a oneshot unit that sets them at boot\n\
         printf '[Unit]\\nDescription=E810 {pci} in RoCE v2 mode\\nAfter=systemd-modules-load.service\\n[Service]\\nType=oneshot\\nExecStart=/usr/sbin/{iwarp}\\nExecStart=/usr/sbin/{roce}\\n[Install]\\nWantedBy=multi-user.target\\n' | sudo tee /etc/systemd/system/halobox-e810-roce.service\n\
         sudo systemctl daemon-reload && sudo systemctl enable halobox-e810-roce.service"
    )
}

fn mode(facts: &HostFacts, dev: &RdmaDevice, p: &DataPlane) -> Check {
    let id = "rdma.mode";
    match dev.transport {
        Some(RdmaTransport::Roce) => Check::pass(id, format!("{} runs RoCE", dev.name)),
        Some(RdmaTransport::Iwarp) => {
            let why = format!(
                "{} runs iWARP (node type {}), not RoCE v2: RCCL's RoCE path and perftest's GID-based setup need RoCE",
                dev.name,
                dev.node_type.as_deref().unwrap_or("RNIC")
            );
            let pci = dev.pci_address.clone().or_else(|| {
                facts
                    .nic_drivers
                    .iter()
                    .find(|d| d.netdev == p.interface)
                    .and_then(|d| d.bus_info.clone())
            });
            let fix = match (dev.driver.as_deref(), pci) {
                (Some("ice"), Some(pci)) => e810_roce_fix(&pci),
                (Some("ice"), None) => format!(
                    "{}\n# <bdf> is the bus-info of `ethtool -i {}`",
                    e810_roce_fix("<bdf>"),
                    p.interface
                ),
                _ => format!(
                    "switch {} to RoCE v2 with its driver's tool (for the E810: `devlink dev param set pci/<bdf> name enable_roce value true cmode runtime`, after enable_iwarp false)",
                    dev.name
                ),
            };
            Check::fail(id, why, fix)
        }
        Some(RdmaTransport::Infiniband) => Check::warn(
            id,
            format!("{} is native InfiniBand, not RoCE", dev.name),
            format!("use the `ib` transport for the cluster on {}", p.interface),
        ),
        None => Check::warn(
            id,
            format!(
                "{}: transport unknown (node type or link layer unreadable)",
                dev.name
            ),
            format!("rdma link show {}", dev.name),
        ),
    }
}

fn gid(ep: &RdmaEndpoint, p: &DataPlane) -> Check {
    let id = "rdma.gid";
    match ep.gid_index {
        Some(i) => Check::pass(
            id,
            format!(
                "RoCE v2 GID index {i} carries {} on {} port {} (NCCL_IB_GID_INDEX={i})",
                p.ip, ep.device, ep.port
            ),
        ),
        None if ep.transport == Some(RdmaTransport::Iwarp) => {
            Check::skip(id, "iWARP has no RoCE v2 GIDs (see rdma.mode)")
        }
        None => Check::fail(
            id,
            format!(
                "no RoCE v2 GID for {} on {} port {}: RoCE traffic to this address cannot be set up",
                p.ip, ep.device, ep.port
            ),
            format!(
                "the GID table follows the netdev's addresses: check `ip -4 addr show {0}` lists {1}, that the port is up, then `grep . /sys/class/infiniband/{2}/ports/{3}/gid_attrs/types/*`",
                p.interface, p.ip, ep.device, ep.port
            ),
        ),
    }
}

/// Share of a PCIe link's coded rate that carries payload (TLP and DLLP
/// overhead): PCIe 4.0 x4 (63 Gb/s) gives about 55 Gb/s of data.
pub const PCIE_EFFICIENCY: f64 = 0.87;

fn pcie(dev: &RdmaDevice, ep: &RdmaEndpoint) -> Check {
    let id = "rdma.pcie";
    let Some(link) = &dev.pcie else {
        return Check::skip(id, format!("{}: no PCIe link information", dev.name));
    };
    let (Some(speed), Some(width)) = (link.current_speed_gts, link.current_width) else {
        return Check::skip(
            id,
            format!("{}: PCIe link speed or width unreadable", dev.name),
        );
    };
    let ceiling = pcie_link_gbps(speed, width);
    let usable = ceiling * PCIE_EFFICIENCY;
    let here = format!("{} x{width}", gen_name(speed));
    let capable = match (link.max_speed_gts, link.max_width) {
        (Some(s), Some(w)) if s > speed || w > width => {
            format!(" (the NIC supports {} x{w})", gen_name(s))
        }
        _ => String::new(),
    };
    let limit = format!("{ceiling:.1} Gb/s raw, about {usable:.0} Gb/s usable");
    // A port that is down reports a placeholder rate, not the link's.
    let port_rate = dev
        .ports
        .iter()
        .find(|x| x.number == ep.port && x.is_up())
        .and_then(|x| x.rate_gbps);
    match port_rate {
        Some(rate) if usable < rate => Check::warn(
            id,
            format!(
                "{}: PCIe {here}{capable}: {limit}, below the port's {rate:.0} Gb/s",
                dev.name
            ),
            "bandwidth is capped by the slot, not the network: use a slot with more lanes or a newer PCIe generation; on boards with only an x4 slot (Framework Desktop) this is expected and RoCE still gives ~5 µs latency",
        ),
        Some(rate) => Check::pass(
            id,
            format!(
                "{}: PCIe {here}{capable}: {limit}, above the port's {rate:.0} Gb/s (the port is the limit)",
                dev.name
            ),
        ),
        None => Check::pass(
            id,
            format!(
                "{}: PCIe {here}{capable}: {limit} (port rate unknown while the port is down)",
                dev.name
            ),
        ),
    }
}

fn gen_name(speed: f64) -> String {
    match pcie_generation(speed) {
        Some(g) => format!("{g}.0"),
        None => format!("{speed} GT/s"),
    }
}

fn firmware(facts: &HostFacts, dev: &RdmaDevice, p: &DataPlane) -> Check {
    let id = "rdma.firmware";
    let info = facts.nic_drivers.iter().find(|d| d.netdev == p.interface);
    let Some(info) = info else {
        return match facts.tool("ethtool") {
            None if facts.sysroot.is_none() => Check::skip(
                id,
                format!(
                    "ethtool is not installed, so the firmware of {} is unknown (sysfs fw_ver: {})",
                    p.interface,
                    dev.fw_ver.as_deref().unwrap_or("none")
                ),
            ),
            _ => Check::skip(id, format!("no `ethtool -i {}` output", p.interface)),
        };
    };
    let fw = info.firmware_version.as_deref().unwrap_or("unknown");
    let driver = info.driver.as_deref().unwrap_or("unknown");
    if driver != "ice" {
        return Check::skip(
            id,
            format!("{driver} firmware {fw}: the guides verified no version for this driver"),
        );
    }
    match parse_major_minor(fw) {
        Some(v) if v >= E810_VERIFIED_FW => Check::pass(
            id,
            format!(
                "E810 firmware {fw} (verified: {}.{} or newer)",
                E810_VERIFIED_FW.0, E810_VERIFIED_FW.1
            ),
        ),
        Some(_) => Check::warn(
            id,
            format!(
                "E810 firmware {fw} is older than the verified {}.{}: link and RDMA issues were fixed in newer NVM",
                E810_VERIFIED_FW.0, E810_VERIFIED_FW.1
            ),
            "update the NVM with Intel's Ethernet NVM Update Tool for E810 (nvmupdate64e), then power-cycle",
        ),
        None => Check::warn(
            id,
            format!("E810 firmware version {fw:?} not understood"),
            format!("ethtool -i {}", p.interface),
        ),
    }
}

/// `4.91 0x800214b5 1.3909.0` → (4, 91).
pub fn parse_major_minor(fw: &str) -> Option<(u32, u32)> {
    let first = fw.split_whitespace().next()?;
    let (major, minor) = first.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn firmware_versions() {
        assert_eq!(parse_major_minor("4.91 0x800214b5 1.3909.0"), Some((4, 91)));
        assert_eq!(parse_major_minor("4.40 0x8001c967 1.3534.0"), Some((4, 40)));
        assert!(parse_major_minor("4.40").unwrap() < E810_VERIFIED_FW);
        assert!(parse_major_minor("5.1").unwrap() > E810_VERIFIED_FW);
        assert_eq!(parse_major_minor("junk"), None);
    }
}
