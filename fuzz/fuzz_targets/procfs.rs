//! procfs-style texts: limits, status, meminfo, ip -json, ethtool -i, zones.
#![no_main]

use halobox::host::{ethtool, firewall, kernel, limits, net, users};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let _ = limits::parse_limits_memlock(s);
    let _ = users::parse_status_ids(s);
    let _ = users::parse_group(s);
    let _ = kernel::parse_meminfo_total(s);
    let _ = net::parse_ip_json(s);
    let _ = ethtool::parse("x", s);
    let _ = firewall::zone_interfaces(s);
});
