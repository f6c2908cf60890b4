//! Units: byte sizes, link bandwidth ceilings and timeouts.

use std::time::{Duration, Instant};

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

/// The sum of `sizes` in bytes, `None` when it does not fit in a `u64`:
/// sizes a node reports are added with this, never with wrapping `+`.
pub fn total_bytes(sizes: impl IntoIterator<Item = u64>) -> Option<u64> {
    sizes.into_iter().try_fold(0u64, u64::checked_add)
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

/// Shortest timeout halobox accepts from a flag or a file, in seconds.
pub const TIMEOUT_MIN_S: u64 = 1;
/// Longest timeout halobox accepts from a flag or a file: one day.
pub const TIMEOUT_MAX_S: u64 = 86_400;

/// Checks a timeout in seconds that came from a flag or a file (`what`
/// names it, e.g. `--timeout` or `timeout_s`): 1 s .. 1 day.
pub fn check_timeout(what: &str, secs: u64) -> Result<u64, String> {
    if (TIMEOUT_MIN_S..=TIMEOUT_MAX_S).contains(&secs) {
        Ok(secs)
    } else {
        Err(format!(
            "{what} {secs} is not a usable timeout: give {TIMEOUT_MIN_S}..{TIMEOUT_MAX_S} seconds (1 s to 1 day)"
        ))
    }
}

/// clap parser for a timeout flag in seconds (1 s .. 1 day).
pub fn parse_timeout(s: &str) -> Result<u64, String> {
    let secs = s
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("{s:?} is not a whole number of seconds (1..{TIMEOUT_MAX_S})"))?;
    check_timeout("timeout", secs)
}

/// `now + timeout`, saturating at a day past the longest timeout instead of
/// panicking on an `Instant` overflow.
pub fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    let cap = Duration::from_secs(2 * TIMEOUT_MAX_S);
    now.checked_add(timeout.min(cap)).unwrap_or(now)
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
    fn timeouts() {
        assert_eq!(check_timeout("--timeout", 1), Ok(1));
        assert_eq!(check_timeout("--timeout", 86_400), Ok(86_400));
        for bad in [0, 86_401, u64::MAX] {
            let e = check_timeout("timeout_s", bad).unwrap_err();
            assert!(e.contains("timeout_s") && e.contains("1 day"), "{e}");
        }
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("18446744073709551616").is_err());
        assert_eq!(parse_timeout("120"), Ok(120));
        assert!(deadline(Duration::MAX) > Instant::now());
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

/// Bytes in a MiB (perftest's `MiB/sec`, and its older `MB/sec`, count these).
pub const MIB: f64 = 1_048_576.0;

/// MiB/s → Gb/s (decimal, 10^9 bit/s): 6000 MiB/s = 50.33 Gb/s. Not `* 8 / 1024`,
/// which gives Gibit/s and reads 7 % low.
pub fn mib_per_s_to_gbps(mib_per_s: f64) -> f64 {
    mib_per_s * MIB * 8.0 / 1e9
}

/// Gb/s (decimal) → MiB/s.
pub fn gbps_to_mib_per_s(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0 / MIB
}

/// Gb/s (decimal) for `bytes` moved in `seconds`; 0 when no time passed.
pub fn bytes_to_gbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds / 1e9
    } else {
        0.0
    }
}

/// One-way latency as perftest's write/send tests report it: half a round trip.
pub fn half_rtt(rtt: f64) -> f64 {
    rtt / 2.0
}

/// The ceiling of a path in Gb/s: the slowest of the NIC line rates and
/// PCIe links that are known (`None` when nothing is known).
pub fn path_ceiling_gbps(limits: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    limits
        .into_iter()
        .flatten()
        .filter(|g| g.is_finite() && *g > 0.0)
        .reduce(f64::min)
}

#[cfg(test)]
mod bench_unit_tests {
    use super::*;

    #[test]
    fn mib_and_gbps() {
        // 6000 * 1048576 * 8 = 50_331_648_000 bit/s
        assert!((mib_per_s_to_gbps(6000.0) - 50.331648).abs() < 1e-9);
        // the community script's *8/1024 would say 46.875
        assert!((mib_per_s_to_gbps(6000.0) - 6000.0 * 8.0 / 1024.0).abs() > 3.0);
        // 100 Gb/s = 1e11 / 8 / 1048576 = 11920.93 MiB/s
        assert!((gbps_to_mib_per_s(100.0) - 11920.929).abs() < 0.001);
        assert!((gbps_to_mib_per_s(mib_per_s_to_gbps(1234.5)) - 1234.5).abs() < 1e-9);
        // 1.25 GB in 1 s = 10 Gb/s; 0 s → 0
        assert!((bytes_to_gbps(1_250_000_000, 1.0) - 10.0).abs() < 1e-12);
        assert_eq!(bytes_to_gbps(5, 0.0), 0.0);
    }

    #[test]
    fn half_round_trip() {
        // 68 µs ping RTT is 34 µs one way, the figure comparable with ib_write_lat
        assert_eq!(half_rtt(68.0), 34.0);
        assert_eq!(half_rtt(10.46), 5.23);
    }

    #[test]
    fn ceilings() {
        // PCIe 3.0 x4: 8 * 128/130 * 4 = 31.508; x16 = 126.031
        assert!((pcie_link_gbps(8.0, 4) - 31.508).abs() < 0.001);
        assert!((pcie_link_gbps(8.0, 16) - 126.031).abs() < 0.001);
        // PCIe 4.0 x4: 63.015; x16: 252.062
        assert!((pcie_link_gbps(16.0, 4) - 63.015).abs() < 0.001);
        assert!((pcie_link_gbps(16.0, 16) - 252.062).abs() < 0.001);
        // 100 GbE behind PCIe 4.0 x4: the slot limits (63.0)
        let c = path_ceiling_gbps([Some(100.0), Some(pcie_link_gbps(16.0, 4))]).unwrap();
        assert!((c - 63.015).abs() < 0.001);
        // 25 GbE behind PCIe 3.0 x4: the NIC limits
        assert_eq!(
            path_ceiling_gbps([Some(25.0), Some(pcie_link_gbps(8.0, 4))]),
            Some(25.0)
        );
        // 100 GbE behind PCIe 4.0 x16, peer 25 GbE: 25
        assert_eq!(
            path_ceiling_gbps([
                Some(100.0),
                Some(pcie_link_gbps(16.0, 16)),
                Some(25.0),
                None
            ]),
            Some(25.0)
        );
        assert_eq!(path_ceiling_gbps([None, None]), None);
        assert_eq!(path_ceiling_gbps([Some(0.0)]), None);
    }
}
