//! Units: byte sizes and link bandwidth ceilings.

/// Formats bytes with binary units: 8388608 → `8 MiB`.
pub fn format_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = b as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Usable data rate of one PCIe lane in Gb/s (10^9 bit/s) after line coding:
/// 2.5 and 5 GT/s use 8b/10b, 8 GT/s and above 128b/130b.
pub fn pcie_lane_gbps(speed_gts: f64) -> f64 {
    if speed_gts < 8.0 {
        speed_gts * 8.0 / 10.0
    } else {
        speed_gts * 128.0 / 130.0
    }
}

/// Raw PCIe link ceiling in Gb/s for `width` lanes at `speed_gts`
/// (PCIe 4.0 x4: 63.0 Gb/s). Protocol overhead takes a further ~10-15 %.
pub fn pcie_link_gbps(speed_gts: f64, width: u32) -> f64 {
    pcie_lane_gbps(speed_gts) * f64::from(width)
}

/// The PCIe generation of a lane speed (16 GT/s → 4).
pub fn pcie_generation(speed_gts: f64) -> Option<u32> {
    [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
    ]
    .iter()
    .find(|(s, _)| (speed_gts - s).abs() < 0.01)
    .map(|&(_, g)| g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes() {
        assert_eq!(format_bytes(8 << 20), "8 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(12), "12 B");
    }

    #[test]
    fn pcie_ceilings_match_hand_computed_values() {
        // 16 GT/s * 128/130 * 4 lanes = 63.015 Gb/s
        assert!((pcie_link_gbps(16.0, 4) - 63.015).abs() < 0.01);
        // 8 GT/s * 128/130 * 4 = 31.508
        assert!((pcie_link_gbps(8.0, 4) - 31.508).abs() < 0.01);
        // 16 GT/s x16 = 252.06
        assert!((pcie_link_gbps(16.0, 16) - 252.06).abs() < 0.01);
        // 5 GT/s * 0.8 * 1 = 4
        assert!((pcie_link_gbps(5.0, 1) - 4.0).abs() < 1e-9);
        assert_eq!(pcie_generation(16.0), Some(4));
        assert_eq!(pcie_generation(7.0), None);
    }
}

/// Bytes of RoCE v2 headers the kernel subtracts from the netdev MTU before
/// picking the IB MTU (`iboe_get_mtu`: GRH 40 + UDP 8 + BTH 12 + XRC 4 +
/// AtomicETH 28 + ICRC 4).
pub const ROCE_HEADER_BYTES: u32 = 96;

/// The RoCE path MTU a netdev MTU allows: the largest of 256..4096 that fits
/// (1500 → 1024, 9000 → 4096).
pub fn roce_path_mtu(netdev_mtu: u32) -> Option<u32> {
    let room = netdev_mtu.checked_sub(ROCE_HEADER_BYTES)?;
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|m| *m <= room)
}

#[cfg(test)]
mod mtu_tests {
    use super::*;

    #[test]
    fn path_mtu() {
        assert_eq!(roce_path_mtu(9000), Some(4096));
        assert_eq!(roce_path_mtu(1500), Some(1024));
        assert_eq!(roce_path_mtu(4200), Some(4096));
        assert_eq!(roce_path_mtu(4150), Some(2048));
        assert_eq!(roce_path_mtu(300), None);
    }
}
