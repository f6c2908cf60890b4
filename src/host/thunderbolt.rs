//! USB4/Thunderbolt host-to-host links: a thunderbolt-net interface is
//! known by its driver (`/sys/class/net/IF/device/driver` → `thunderbolt-net`),
//! never by its name. Its `device` is the XDomain service (`0-1.0`); the
//! XDomain it belongs to (`/sys/bus/thunderbolt/devices/0-1`) says the
//! negotiated lane speed and lane count in `rx_speed`, `rx_lanes`,
//! `tx_speed`, `tx_lanes` (kernel 6.x, `sysfs-bus-thunderbolt`).

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// The driver names of thunderbolt-net (the service driver registers
/// `thunderbolt-net`; the module is `thunderbolt_net`).
pub const DRIVERS: [&str; 2] = ["thunderbolt-net", "thunderbolt_net"];

/// The negotiated USB4 link under a thunderbolt-net interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Usb4Link {
    /// The XDomain device (`0-1`), when the service names one.
    pub xdomain: Option<String>,
    /// Receive speed per lane, Gb/s.
    pub rx_gbps: Option<u32>,
    /// Receive lanes.
    pub rx_lanes: Option<u32>,
    /// Transmit speed per lane, Gb/s.
    pub tx_gbps: Option<u32>,
    /// Transmit lanes.
    pub tx_lanes: Option<u32>,
}

impl Usb4Link {
    /// The link's rate in Gb/s: lanes × lane speed, the slower direction.
    pub fn total_gbps(&self) -> Option<u32> {
        let rx = self.rx_gbps? * self.rx_lanes?;
        let tx = self.tx_gbps? * self.tx_lanes?;
        Some(rx.min(tx))
    }
}

/// True when `driver` is thunderbolt-net's.
pub fn is_driver(driver: Option<&str>) -> bool {
    driver.is_some_and(|d| DRIVERS.contains(&d))
}

/// The USB4 link of interface `name` whose `device` is the service `service`
/// (`0-1.0`).
pub fn read_link(r: &Reader, service: Option<&str>) -> Usb4Link {
    let xdomain = service.map(|s| s.rsplit_once('.').map_or(s, |(x, _)| x).to_string());
    let attr = |name: &str| {
        let x = xdomain.as_deref()?;
        r.line(&format!("/sys/bus/thunderbolt/devices/{x}/{name}"))
    };
    Usb4Link {
        rx_gbps: attr("rx_speed").and_then(|s| parse_speed(&s)),
        rx_lanes: attr("rx_lanes").and_then(|s| s.parse().ok()),
        tx_gbps: attr("tx_speed").and_then(|s| parse_speed(&s)),
        tx_lanes: attr("tx_lanes").and_then(|s| s.parse().ok()),
        xdomain,
    }
}

/// `20.0 Gb/s` (the kernel's `%u.0 Gb/s`) as 20.
fn parse_speed(s: &str) -> Option<u32> {
    let n = s.trim().strip_suffix("Gb/s")?.trim();
    n.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_and_totals() {
        assert_eq!(parse_speed("20.0 Gb/s"), Some(20));
        assert_eq!(parse_speed("10.0 Gb/s\n"), Some(10));
        assert_eq!(parse_speed("fast"), None);
        let link = Usb4Link {
            xdomain: Some("0-1".into()),
            rx_gbps: Some(20),
            rx_lanes: Some(2),
            tx_gbps: Some(10),
            tx_lanes: Some(2),
        };
        assert_eq!(link.total_gbps(), Some(20));
        assert!(is_driver(Some("thunderbolt-net")) && is_driver(Some("thunderbolt_net")));
        assert!(!is_driver(Some("ice")) && !is_driver(None));
    }
}
