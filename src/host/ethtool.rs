//! NIC driver and firmware from `ethtool -i` (live) or
//! `captured/ethtool-i/<netdev>` (snapshot).

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// What `ethtool -i` says about one netdev.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DriverInfo {
    /// The netdev asked about.
    pub netdev: String,
    /// `driver:` (`ice`, `mlx5_core`).
    pub driver: Option<String>,
    /// `version:`.
    pub version: Option<String>,
    /// `firmware-version:` as printed (`4.91 0x800214b5 1.3909.0`).
    pub firmware_version: Option<String>,
    /// `bus-info:` (PCI address).
    pub bus_info: Option<String>,
}

/// Reads driver info for each netdev; netdevs without an answer are left out.
pub fn read(r: &Reader, netdevs: &[String], ethtool: Option<&str>) -> Vec<DriverInfo> {
    netdevs
        .iter()
        .filter_map(|netdev| {
            let text = if r.root().is_live() {
                let out = crate::proc::command(ethtool?)
                    .args(["-i", netdev])
                    .output()
                    .ok()?;
                let text = out
                    .status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).into_owned())?;
                r.write(&format!("/captured/ethtool-i/{netdev}"), text.as_bytes());
                text
            } else {
                r.text_quiet(&format!("/captured/ethtool-i/{netdev}"))?
            };
            Some(parse(netdev, &text))
        })
        .collect()
}

/// Parses `ethtool -i` output.
pub fn parse(netdev: &str, text: &str) -> DriverInfo {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    DriverInfo {
        netdev: netdev.to_string(),
        driver: field("driver"),
        version: field("version"),
        firmware_version: field("firmware-version"),
        bus_info: field("bus-info"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_i() {
        let i = parse(
            "enp194s0np0",
            "driver: ice\nversion: 6.18.5-200.fc43.x86_64\nfirmware-version: 4.91 0x800214b5 1.3909.0\nexpansion-rom-version: \nbus-info: 0000:c2:00.0\n",
        );
        assert_eq!(i.driver.as_deref(), Some("ice"));
        assert_eq!(
            i.firmware_version.as_deref(),
            Some("4.91 0x800214b5 1.3909.0")
        );
        assert_eq!(i.bus_info.as_deref(), Some("0000:c2:00.0"));
    }
}
