//! perftest tables, iperf3 JSON, halobox's raw TCP logs and the diagnosis.
#![no_main]

use halobox::bench::diagnose::{self, Side};
use halobox::bench::perftest::{self, Table};
use halobox::bench::{iperf3, tcp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    match perftest::parse(s) {
        Some(Table::Bandwidth { rows, .. }) => {
            assert!(!rows.is_empty());
            assert!(rows.iter().all(|r| r.average_gbps.is_finite() && r.average_gbps >= 0.0));
        }
        Some(Table::Latency { rows }) => assert!(!rows.is_empty()),
        None => {}
    }
    if let Ok(r) = iperf3::parse(s) {
        assert!(r.received_gbps.is_finite() && r.received_gbps >= 0.0);
    }
    if let Ok(streams) = tcp::parse_bandwidth_log(s) {
        let g = tcp::aggregate_gbps(&streams);
        assert!(g.is_nan() || g >= 0.0);
    }
    let _ = tcp::parse_latency_log(s);
    let _ = diagnose::perftest(s, Side::Local, "ib_write_bw");
    let _ = diagnose::unknown(s, Side::Peer, "ib_write_lat");
    if let Some((line, format)) = s.split_once('\n') {
        let _ = diagnose::matches_format(line, format);
    }
});
