//! procfs-style texts: limits, status, meminfo, ip -json, ethtool -i, zones,
//! routes, packet filter dumps, package databases, os-release, CPU lists.
#![no_main]

use halobox::doctor::versions;
use halobox::host::{cpu, ethtool, firewall, firmware, kernel, limits, net, netfilter, os, routes, users};
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
    let _ = firewall::parse_zone("z", s, "f");
    for r in routes::parse(s) {
        assert!(r.prefix_len <= 32);
    }
    let _ = netfilter::parse_iptables_save(s);
    let _ = netfilter::parse_nft_json(s);
    let _ = firmware::parse_dpkg_status(s);
    let _ = firmware::parse_name_version(s, "rpm");
    let _ = os::parse(s);
    let _ = cpu::parse_list(s);
    let _ = versions::judge_kernel(s, true);
});
