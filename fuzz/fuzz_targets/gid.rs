//! sysfs GIDs, port rates and link speeds.
#![no_main]

use halobox::host::rdma::{parse_gid, parse_link_speed, parse_rate_gbps, state_name};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Some(addr) = parse_gid(s) {
        // A parsed GID prints back to the same eight groups.
        let segs = addr.segments();
        let printed: Vec<String> = segs.iter().map(|g| format!("{g:04x}")).collect();
        assert_eq!(
            printed.join(":"),
            s.trim().to_ascii_lowercase()
                .split(':')
                .map(|g| format!("{:0>4}", g))
                .collect::<Vec<_>>()
                .join(":")
        );
    }
    if let Some(r) = parse_rate_gbps(s) {
        assert!(r.is_finite() && r >= 0.0);
    }
    if let Some(r) = parse_link_speed(s) {
        assert!(r.is_finite() && r > 0.0);
    }
    let _ = state_name(s);
});
