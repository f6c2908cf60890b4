//! One scrape: the host readers' figures turned into metric families, each
//! in the unit its name says.
//!
//! Units, from the kernel's documentation and drivers:
//! - amdgpu `mem_info_*` are bytes, `gpu_busy_percent` 0-100, hwmon
//!   `temp*_input` millidegrees Celsius, `power*_average`/`_input`
//!   microwatts (`Documentation/hwmon/sysfs-interface.rst`);
//! - IB port counters `port_xmit_data`/`port_rcv_data` count 4-octet words
//!   (`Documentation/ABI/stable/sysfs-class-infiniband`; mlx5 exposes them
//!   for RoCE ports too), `port_*_packets` packets;
//! - irdma has no `counters/` folder: its `hw_counters` `ip4InOctets` etc.
//!   are octets (`drivers/infiniband/hw/irdma/verbs.c`);
//! - netdev `statistics/*` are bytes and packets
//!   (`Documentation/ABI/testing/sysfs-class-net-statistics`).

use crate::host::Reader;
use crate::host::{gpu, net, rdma};

use super::exposition::{Family, Kind, Sample};

/// What one scrape describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The `node` label.
    pub node: String,
    /// The data-plane interface whose netdev counters are exported.
    pub interface: Option<String>,
}

/// A RoCE counter and the sysfs files that hold it, by driver: each file is
/// `hw_counters/<name>` of the port or `dev_hw_counters/<name>` of the device
/// (see [`rdma::read_counters`]); present files are summed.
struct HwCounter {
    name: &'static str,
    help: &'static str,
    /// mlx5 (`drivers/infiniband/hw/mlx5/counters.c`) then irdma
    /// (`drivers/infiniband/hw/irdma/verbs.c`) names.
    files: &'static [&'static str],
}

const HW_COUNTERS: &[HwCounter] = &[
    HwCounter {
        name: "halobox_rdma_cnp_sent_total",
        help: "Congestion notification packets this port sent (mlx5 np_cnp_sent, irdma cnpSent).",
        files: &["np_cnp_sent", "cnpSent"],
    },
    HwCounter {
        name: "halobox_rdma_cnp_handled_total",
        help: "Congestion notification packets this port received and acted on (mlx5 rp_cnp_handled, irdma cnpHandled).",
        files: &["rp_cnp_handled", "cnpHandled"],
    },
    HwCounter {
        name: "halobox_rdma_ecn_marked_packets_total",
        help: "RoCE packets received with an ECN mark (mlx5 np_ecn_marked_roce_packets, irdma RxECNMrkd).",
        files: &["np_ecn_marked_roce_packets", "RxECNMrkd"],
    },
    HwCounter {
        name: "halobox_rdma_out_of_sequence_packets_total",
        help: "Packets received out of sequence (mlx5 out_of_sequence, irdma \"Rcvd Out of order packets\").",
        files: &["out_of_sequence", "Rcvd Out of order packets"],
    },
    HwCounter {
        name: "halobox_rdma_retransmits_total",
        help: "Retransmission events: ACK timeouts (mlx5 local_ack_timeout_err, irdma RTO) and retransmitted segments (irdma RetransSegs).",
        files: &["local_ack_timeout_err", "RTO", "RetransSegs"],
    },
];

/// A port traffic counter: the IB `counters/` file (with its unit factor),
/// else irdma's octet/packet `hw_counters` summed over IPv4 and IPv6.
struct Traffic {
    name: &'static str,
    help: &'static str,
    ib: &'static str,
    factor: f64,
    irdma: [&'static str; 2],
}

const TRAFFIC: &[Traffic] = &[
    Traffic {
        name: "halobox_rdma_port_transmit_bytes_total",
        help: "Bytes this RDMA port sent (IB port_xmit_data x 4, irdma ip4/ip6OutOctets).",
        ib: "port_xmit_data",
        factor: 4.0,
        irdma: ["ip4OutOctets", "ip6OutOctets"],
    },
    Traffic {
        name: "halobox_rdma_port_receive_bytes_total",
        help: "Bytes this RDMA port received (IB port_rcv_data x 4, irdma ip4/ip6InOctets).",
        ib: "port_rcv_data",
        factor: 4.0,
        irdma: ["ip4InOctets", "ip6InOctets"],
    },
    Traffic {
        name: "halobox_rdma_port_transmit_packets_total",
        help: "Packets this RDMA port sent (IB port_xmit_packets, irdma ip4/ip6OutPkts).",
        ib: "port_xmit_packets",
        factor: 1.0,
        irdma: ["ip4OutPkts", "ip6OutPkts"],
    },
    Traffic {
        name: "halobox_rdma_port_receive_packets_total",
        help: "Packets this RDMA port received (IB port_rcv_packets, irdma ip4/ip6InPkts).",
        ib: "port_rcv_packets",
        factor: 1.0,
        irdma: ["ip4InPkts", "ip6InPkts"],
    },
];

/// Netdev `statistics/` files exported for the data-plane interface.
const NETDEV: &[(&str, &str, &str)] = &[
    (
        "halobox_netdev_receive_bytes_total",
        "Bytes the data-plane interface received (statistics/rx_bytes).",
        "rx_bytes",
    ),
    (
        "halobox_netdev_transmit_bytes_total",
        "Bytes the data-plane interface sent (statistics/tx_bytes).",
        "tx_bytes",
    ),
    (
        "halobox_netdev_receive_packets_total",
        "Packets the data-plane interface received (statistics/rx_packets).",
        "rx_packets",
    ),
    (
        "halobox_netdev_transmit_packets_total",
        "Packets the data-plane interface sent (statistics/tx_packets).",
        "tx_packets",
    ),
    (
        "halobox_netdev_receive_drops_total",
        "Received packets the data-plane interface dropped (statistics/rx_dropped).",
        "rx_dropped",
    ),
    (
        "halobox_netdev_transmit_drops_total",
        "Packets to send the data-plane interface dropped (statistics/tx_dropped).",
        "tx_dropped",
    ),
];

fn family(name: &'static str, help: &'static str, kind: Kind) -> Family {
    Family {
        name,
        help,
        kind,
        samples: Vec::new(),
    }
}

fn push(f: &mut Family, labels: Vec<(&'static str, String)>, value: Option<f64>) {
    if let Some(value) = value {
        f.samples.push(Sample { labels, value });
    }
}

/// Reads one scrape's figures. Missing or malformed files leave their
/// sample out; the number of files that could not be read is itself a
/// gauge (`halobox_metrics_read_issues`).
pub fn collect(r: &Reader, target: &Target) -> Vec<Family> {
    let mut out = gpu_families(&gpu::read_load(r));
    out.extend(rdma_families(r));
    if let Some(iface) = &target.interface {
        let stats = net::read_statistics(r, iface).unwrap_or_default();
        for (name, help, file) in NETDEV {
            let mut f = family(name, help, Kind::Counter);
            push(
                &mut f,
                vec![("interface", iface.clone())],
                stats.get(*file).map(|v| *v as f64),
            );
            out.push(f);
        }
    }
    let mut issues = family(
        "halobox_metrics_read_issues",
        "Host files this scrape found but could not read.",
        Kind::Gauge,
    );
    push(&mut issues, vec![], Some(r.take_issues().len() as f64));
    out.push(issues);
    out
}

fn gpu_families(cards: &[gpu::CardLoad]) -> Vec<Family> {
    let mut gtt_total = family(
        "halobox_gpu_gtt_total_bytes",
        "System memory the GPU may map (amdgpu mem_info_gtt_total).",
        Kind::Gauge,
    );
    let mut gtt_used = family(
        "halobox_gpu_gtt_used_bytes",
        "GTT memory in use (amdgpu mem_info_gtt_used).",
        Kind::Gauge,
    );
    let mut vram_total = family(
        "halobox_gpu_vram_total_bytes",
        "VRAM; on an APU the BIOS carve-out (amdgpu mem_info_vram_total).",
        Kind::Gauge,
    );
    let mut vram_used = family(
        "halobox_gpu_vram_used_bytes",
        "VRAM in use (amdgpu mem_info_vram_used).",
        Kind::Gauge,
    );
    let mut busy = family(
        "halobox_gpu_busy_ratio",
        "Share of time the GPU was busy, 0 to 1 (amdgpu gpu_busy_percent / 100).",
        Kind::Gauge,
    );
    let mut temp = family(
        "halobox_gpu_temperature_celsius",
        "GPU temperature by hwmon sensor (temp*_input / 1000).",
        Kind::Gauge,
    );
    let mut power = family(
        "halobox_gpu_power_watts",
        "GPU power by hwmon channel (power*_average or power*_input / 1e6).",
        Kind::Gauge,
    );
    for c in cards {
        let card = || vec![("card", c.card.clone())];
        let bytes = |v: Option<u64>| v.map(|v| v as f64);
        push(&mut gtt_total, card(), bytes(c.gtt_total_bytes));
        push(&mut gtt_used, card(), bytes(c.gtt_used_bytes));
        push(&mut vram_total, card(), bytes(c.vram_total_bytes));
        push(&mut vram_used, card(), bytes(c.vram_used_bytes));
        push(
            &mut busy,
            card(),
            c.busy_percent
                .filter(|p| *p <= 100)
                .map(|p| p as f64 / 100.0),
        );
        let mut seen = std::collections::BTreeSet::new();
        for h in c.hwmon.iter().filter(|h| h.raw.is_some()) {
            if !seen.insert((h.kind, h.label.clone())) {
                continue;
            }
            let labels = vec![("card", c.card.clone()), ("sensor", h.label.clone())];
            match h.kind {
                "temp" => push(&mut temp, labels, h.raw.map(|v| v as f64 / 1000.0)),
                _ => push(&mut power, labels, h.raw.map(|v| v as f64 / 1e6)),
            }
        }
    }
    vec![
        gtt_total, gtt_used, vram_total, vram_used, busy, temp, power,
    ]
}

fn rdma_families(r: &Reader) -> Vec<Family> {
    let mut active = family(
        "halobox_rdma_port_active",
        "1 when the RDMA port is ACTIVE and LinkUp, else 0.",
        Kind::Gauge,
    );
    let mut rate = family(
        "halobox_rdma_port_rate_bytes_per_second",
        "The RDMA port's link rate (sysfs rate, Gb/s x 1e9 / 8).",
        Kind::Gauge,
    );
    let mut traffic: Vec<Family> = TRAFFIC
        .iter()
        .map(|t| family(t.name, t.help, Kind::Counter))
        .collect();
    let mut hw: Vec<Family> = HW_COUNTERS
        .iter()
        .map(|h| family(h.name, h.help, Kind::Counter))
        .collect();
    for p in rdma::read_port_states(r) {
        let labels = || vec![("device", p.device.clone()), ("port", p.port.to_string())];
        let up = p.state.as_deref() == Some("ACTIVE") && p.phys_state.as_deref() == Some("LinkUp");
        push(&mut active, labels(), Some(if up { 1.0 } else { 0.0 }));
        push(&mut rate, labels(), p.rate_gbps.map(|g| g * 1e9 / 8.0));
        let Some(c) = rdma::read_counters(r, &p.device, p.port) else {
            continue;
        };
        let hw_value = |file: &str| {
            let port = c.values.get(&format!("hw_counters/{file}"));
            let dev = c.values.get(&format!("dev_hw_counters/{file}"));
            port.or(dev).copied()
        };
        let sum = |files: &[&str]| {
            let found: Vec<u64> = files.iter().filter_map(|f| hw_value(f)).collect();
            (!found.is_empty()).then(|| found.iter().map(|v| *v as f64).sum::<f64>())
        };
        for (t, f) in TRAFFIC.iter().zip(&mut traffic) {
            let ib = c
                .values
                .get(&format!("counters/{}", t.ib))
                .map(|v| *v as f64 * t.factor);
            push(f, labels(), ib.or_else(|| sum(&t.irdma)));
        }
        for (h, f) in HW_COUNTERS.iter().zip(&mut hw) {
            push(f, labels(), sum(h.files));
        }
    }
    let mut out = vec![active, rate];
    out.extend(traffic);
    out.extend(hw);
    out
}

/// The `node` label: `/proc/sys/kernel/hostname`, else `/etc/hostname`.
pub fn hostname(r: &Reader) -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| r.text_quiet(p).map(|t| t.trim().to_string()))
        .filter(|h| !h.is_empty())
}
