//! perftest and iperf3 parsers and the failure diagnosis, on real outputs
//! (tests/fixtures/perftest, tests/fixtures/iperf3; their READMEs say where
//! each came from) and on the real perftest binaries of this machine.

use std::path::PathBuf;
use std::process::Command;

use halobox::bench::diagnose::{self, Cause, Side};
use halobox::bench::iperf3;
use halobox::bench::perftest::{self, BwUnit, Table};

fn fixture(dir: &str, name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn bw(name: &str) -> (BwUnit, Vec<perftest::BwRow>) {
    match perftest::parse(&fixture("perftest", name)) {
        Some(Table::Bandwidth { unit, rows }) => (unit, rows),
        other => panic!("{name}: {other:?}"),
    }
}

fn lat(name: &str) -> Vec<perftest::LatRow> {
    match perftest::parse(&fixture("perftest", name)) {
        Some(Table::Latency { rows }) => rows,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn bandwidth_in_gbits() {
    let (unit, rows) = bw("write_bw_gbits_duration.txt");
    assert_eq!(unit, BwUnit::Gbps);
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].bytes, rows[0].iterations), (8, 224_958_464));
    assert_eq!(rows[0].average_gbps, 0.48);
    assert_eq!(rows[0].msg_rate_mpps, Some(7.498617));

    let (_, rows) = bw("write_bw_gbits_sweep.txt");
    let sizes: Vec<u64> = rows.iter().map(|r| r.bytes).collect();
    assert_eq!(sizes, [2, 4, 8]);
    assert_eq!(rows[0].peak_gbps, 0.042350);
    assert_eq!(rows[0].average_gbps, 0.042185);
    assert_eq!(rows[2].average_gbps, 0.17);
}

#[test]
fn mib_and_old_mb_headers_mean_mib() {
    let (unit, rows) = bw("write_bw_mib.txt");
    assert_eq!(unit, BwUnit::MiBps);
    // 3293.56 MiB/s * 1048576 * 8 / 1e9 = 27.6288 Gb/s
    assert!(
        (rows[0].average_gbps - 27.6288).abs() < 1e-3,
        "{}",
        rows[0].average_gbps
    );
    let (unit, rows) = bw("send_bw_mb.txt");
    assert_eq!(unit, BwUnit::MiBps);
    // 5544.28 "MB/sec" is MiB/s: 46.5093 Gb/s, not 44.35 (MB) nor 43.31 (*8/1024)
    assert!(
        (rows[0].average_gbps - 46.5093).abs() < 1e-3,
        "{}",
        rows[0].average_gbps
    );
}

#[test]
fn latency_tables() {
    let rows = lat("write_lat_tabs.txt");
    let r = rows[0];
    assert_eq!((r.bytes, r.iterations), (2, 1000));
    assert_eq!(
        (
            r.min_us,
            r.max_us,
            r.typical_us,
            r.avg_us,
            r.stdev_us,
            r.p99_us,
            r.p999_us
        ),
        (
            Some(1.10),
            Some(2.05),
            Some(1.11),
            Some(1.12),
            Some(0.00),
            Some(1.19),
            Some(2.05)
        )
    );
    // Warnings between header and row are skipped.
    let r = lat("read_lat_roce.txt")[0];
    assert_eq!(
        (r.typical_us, r.p99_us, r.p999_us),
        (Some(7.04), Some(7.38), Some(16.81))
    );
    // Old builds: three columns, the rest unknown (not 0).
    let r = lat("lat_old_three_columns.txt")[0];
    assert_eq!(
        (r.min_us, r.max_us, r.typical_us),
        (Some(1.85), Some(28.40), Some(2.05))
    );
    assert_eq!((r.avg_us, r.p99_us), (None, None));
}

fn cause(name: &str, side: Side) -> diagnose::Diagnosis {
    let text = fixture("perftest", name);
    assert_eq!(perftest::parse(&text), None, "{name} has no result table");
    diagnose::perftest(&text, side, "ib_write_bw").unwrap_or_else(|| panic!("{name}: no diagnosis"))
}

#[test]
fn failures_are_diagnosed() {
    let d = cause("connect_failed.txt", Side::Local);
    assert_eq!(d.cause, Cause::Connect);
    assert!(d.why.contains("192.168.125.211:18515"), "{}", d.why);
    assert!(d.fix.contains("firewall-cmd"), "{}", d.fix);

    let d = cause("retry_exceeded.txt", Side::Local);
    assert_eq!(d.cause, Cause::RetryExceeded);
    assert!(d.fix.contains("GID") && d.fix.contains("MTU"), "{}", d.fix);

    let d = cause("alloc_mr.txt", Side::Peer);
    assert_eq!(d.cause, Cause::Memlock);
    assert!(
        d.why.contains("Couldn't allocate MR") && d.why.contains("the peer"),
        "{}",
        d.why
    );
    assert!(
        d.fix.contains("/etc/security/limits.d/") && d.fix.contains("LimitMEMLOCK=infinity"),
        "{}",
        d.fix
    );

    let d = cause("port_down.txt", Side::Peer);
    assert_eq!(d.cause, Cause::PortDown);

    let d = cause("no_device_debian12.txt", Side::Local);
    assert_eq!(d.cause, Cause::NoDevice);

    let d = cause("port_down_then_context.txt", Side::Local);
    assert_eq!(d.cause, Cause::PortDown, "{}", d.why);
    assert!(d.why.contains("Port number 1 state is Down"), "{}", d.why);

    let d = cause("retry_exceeded_named.txt", Side::Local);
    assert_eq!(d.cause, Cause::RetryExceeded, "{}", d.why);
    assert_eq!(d.completion.as_ref().unwrap().code, 12);
    assert!(
        d.fix.contains("GID") && d.fix.contains("UDP 4791"),
        "{}",
        d.fix
    );

    let cq = diagnose::perftest("Couldn't create CQ\n", Side::Local, "ib_write_lat").unwrap();
    assert_eq!(cq.cause, Cause::Memlock);
    let old = diagnose::perftest("No IB devices found\n", Side::Local, "ib_write_lat").unwrap();
    assert_eq!(old.cause, Cause::NoDevice);
    let new = diagnose::perftest(
        " Failed status 12 (transport retry counter exceeded): wr_id 0 syndrom 0x81\n",
        Side::Local,
        "ib_write_bw",
    )
    .unwrap();
    assert_eq!(new.cause, Cause::RetryExceeded);
}

/// Completion errors are decoded into their ibv_wc_status, with the end
/// (this node or the peer) and the role (client or server) that printed it.
#[test]
fn completion_errors_are_decoded() {
    let d = cause("local_protection_error.txt", Side::Local);
    assert_eq!(d.cause, Cause::Completion);
    let wc = d.completion.as_ref().unwrap();
    assert_eq!((wc.code, wc.name.as_str()), (4, "IBV_WC_LOC_PROT_ERR"));
    assert!(
        d.why.contains("this node (client side)") && d.why.contains("local protection error"),
        "{}",
        d.why
    );
    assert!(d.why.contains("vendor syndrome 0x51"), "{}", d.why);
    assert!(d.fix.contains("memlock"), "{}", d.fix);

    let d = cause("wr_flushed_server.txt", Side::Peer);
    assert_eq!(d.completion.as_ref().unwrap().name, "IBV_WC_WR_FLUSH_ERR");
    assert!(d.why.contains("the peer (server side)"), "{}", d.why);
    assert!(d.fix.contains("earlier failure"), "{}", d.fix);

    let d = cause("rnr_retry_exceeded.txt", Side::Local);
    assert_eq!(d.completion.as_ref().unwrap().code, 13);
    assert!(d.why.contains("RNR retry counter exceeded"), "{}", d.why);
    assert!(d.fix.contains("no buffer ready"), "{}", d.fix);

    let d = cause("retry_exceeded.txt", Side::Local);
    assert_eq!(d.completion.as_ref().unwrap().name, "IBV_WC_RETRY_EXC_ERR");
    assert!(d.fix.contains("UDP 4791"), "{}", d.fix);
}

/// Every failure line perftest can print on halobox's runs (from its
/// format strings) gets its cause, not "unknown".
#[test]
fn every_perftest_failure_line_is_decoded() {
    let text = fixture("perftest", "failure_lines.txt");
    let mut n = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (want, failure) = line.split_once('\t').expect("cause<TAB>line");
        let d = diagnose::perftest(failure, Side::Local, "ib_write_bw")
            .unwrap_or_else(|| panic!("undiagnosed: {failure:?}"));
        let got = serde_json::to_value(d.cause).unwrap();
        assert_eq!(got, want, "{failure:?}: {}", d.why);
        assert!(!d.fix.is_empty());
        n += 1;
    }
    assert!(n > 60, "{n} lines");
}

/// The real perftest binaries on a machine without RDMA devices: the
/// failure is the "no device" one, diagnosed as such.
#[test]
fn real_perftest_without_device() {
    for (tool, args) in [
        ("ib_write_lat", vec!["-F"]),
        ("ib_write_bw", vec!["-F", "--report_gbits"]),
    ] {
        let out = Command::new(tool).args(&args).output().unwrap_or_else(|e| {
            panic!("{tool} must be installed (perftest; scripts/test.sh installs it): {e}")
        });
        assert!(
            !out.status.success(),
            "{tool} succeeded without an RDMA device?"
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(perftest::parse(&text), None);
        let d = diagnose::perftest(&text, Side::Local, tool)
            .unwrap_or_else(|| panic!("undiagnosed: {text}"));
        assert_eq!(d.cause, Cause::NoDevice, "{text}");
        assert!(d.why.contains(tool));
    }
}

#[test]
fn iperf3_json() {
    let r = iperf3::parse(&fixture("iperf3", "veth_1_stream.json")).unwrap();
    assert_eq!(r.streams, 1);
    assert!(
        (r.received_gbps - 13.2696).abs() < 1e-3,
        "{}",
        r.received_gbps
    );
    assert_eq!(r.retransmits, Some(28));
    let r = iperf3::parse(&fixture("iperf3", "veth_2_streams.json")).unwrap();
    assert_eq!(r.streams, 2);
    assert!((r.received_gbps - 12.9030).abs() < 1e-3);
    assert!(r.sent_gbps >= r.received_gbps * 0.99);
    let e = iperf3::parse(&fixture("iperf3", "refused.json")).unwrap_err();
    assert!(e.contains("Connection refused"), "{e}");
    assert!(!r.moved_nothing());
    // A run that connected and moved nothing (real iperf3 3.12 output).
    let z = iperf3::parse(&fixture("iperf3", "zero_bytes.json")).unwrap();
    assert_eq!(z.received_bytes, Some(0));
    assert!(z.moved_nothing());
}
