//! `--sweep`: `ib_write_bw -a` in the plan, and its multi-row table (a real
//! perftest output, tests/fixtures/perftest/write_bw_gbits_sweep.txt) shown
//! as one row per message size.

mod common;

use std::fs;
use std::path::Path;

use halobox::bench::plan::{BenchOptions, LegKind, PathSpec, RdmaMode};
use halobox::bench::probe::NodeContext;
use halobox::bench::report;
use halobox::bench::results::{self, LegRecord, LegStatus, PathRecord, RunRecord};

#[test]
fn dry_run_adds_the_size_sweep() {
    let out = common::run(&[
        "bench",
        "run",
        "--peer",
        "n2",
        "--peer-ip",
        "10.77.250.2",
        "--iface-ip",
        "127.0.0.1",
        "--rdma",
        "--sweep",
        "--dry-run",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("p0-ib_write_bw-sweep (RDMA write bandwidth, every message size x1):"),
        "{text}"
    );
    assert!(
        text.contains("local: ib_write_bw -F -p 18518 -m 4096 --report_gbits -a -q 1 10.77.250.2"),
        "{text}"
    );
    let out = common::run(&[
        "bench",
        "run",
        "--peer",
        "n2",
        "--peer-ip",
        "10.0.0.2",
        "--no-rdma",
        "--sweep",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

fn end(ip: &str) -> NodeContext {
    serde_json::from_value(serde_json::json!({
        "ip": ip, "interface": "enp1s0f0np0", "mtu": 9000, "roce_mtu": 4096,
        "link_gbps": 100.0, "virtual_link": false, "pcie": null, "pcie_gbps": null,
        "rdma": {"device": "mlx5_0", "port": 1, "gid_index": 3, "port_up": true, "transport": "roce"},
        "rdma_devices": 1, "iperf3": true, "perftest": true
    }))
    .unwrap()
}

/// A run record with one sweep leg whose raw log is `fixture_name`.
fn sweep_run(dir: &Path, fixture_name: &str) -> RunRecord {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/perftest")
        .join(fixture_name);
    fs::copy(&fixture, dir.join(format!("{SWEEP_LEG}.txt"))).unwrap();
    RunRecord {
        schema_version: results::SCHEMA_VERSION,
        started_utc: "2026-01-01T00:00:00Z".into(),
        options: BenchOptions {
            peer: "n2".into(),
            peer_from: None,
            peer_halobox: "halobox".into(),
            ssh_options: vec![],
            paths: vec![PathSpec {
                local_ip: "10.0.0.1".parse().unwrap(),
                peer_ip: "10.0.0.2".parse().unwrap(),
            }],
            rdma: RdmaMode::On,
            duration_s: 10,
            streams: 1,
            port: 5301,
            latency_samples: 1000,
            sweep: true,
            local_in: None,
            peer_container: None,
            host_why: None,
            link: None,
        },
        paths: vec![PathRecord {
            id: "p0".into(),
            local_ip: "10.0.0.1".parse().unwrap(),
            peer_ip: "10.0.0.2".parse().unwrap(),
            local: end("10.0.0.1"),
            peer: end("10.0.0.2"),
            legs: vec![LegRecord {
                id: SWEEP_LEG.into(),
                kind: LegKind::RdmaSweep,
                streams: 1,
                commands: vec!["ib_write_bw -a".into()],
                status: LegStatus::Ran,
            }],
            rdma_counters: None,
        }],
    }
}

const SWEEP_LEG: &str = "p0-ib_write_bw-sweep";

#[test]
fn a_sweep_is_a_row_per_size() {
    let dir = tempfile::tempdir().unwrap();
    let id = SWEEP_LEG;
    let rec = sweep_run(dir.path(), "write_bw_gbits_sweep.txt");
    let res = results::derive(&rec, dir.path());
    let sizes: Vec<u64> = res.rows.iter().map(|r| r.message_bytes.unwrap()).collect();
    // The capture holds the first three sizes of `-a`.
    assert_eq!(sizes, [2, 4, 8], "one row per size");
    assert!(res.rows.iter().all(|r| r.status == "ok" && r.leg == id));
    assert_eq!(res.rows[0].bandwidth_gbps, Some(0.042185));
    // The ceiling is the 100 Gb/s line rate.
    let last = res.rows.last().unwrap();
    assert_eq!(last.ceiling_gbps, Some(100.0));
    let text = report::human(&res);
    assert!(text.contains("rdma ib_write_bw 2 B "), "{text}");
    assert!(text.contains("rdma ib_write_bw 8 B "), "{text}");
    assert!(!text.contains("collapses"), "{text}");
    // Comparing a run with itself matches row by row (size included).
    let cmp = report::compare(&res, &res);
    assert!(cmp.contains("p0-ib_write_bw-sweep 8 B  Gb/s"), "{cmp}");
    assert!(!cmp.contains("absent"), "{cmp}");
}

/// Sizes where bandwidth falls to under half of the best smaller size are
/// marked, and the report says what that means and what to check.
#[test]
fn a_collapsing_sweep_is_marked_and_explained() {
    let dir = tempfile::tempdir().unwrap();
    let rec = sweep_run(dir.path(), "write_bw_sweep_collapse.txt");
    let res = results::derive(&rec, dir.path());
    let warned: Vec<u64> = res
        .rows
        .iter()
        .filter(|r| r.status == "warn")
        .map(|r| r.message_bytes.unwrap())
        .collect();
    // 128 KiB (21.35) is under half of 53.07 at 64 KiB, and so is every size above.
    assert_eq!(
        warned,
        [131072, 262144, 524288, 1048576, 2097152, 4194304, 8388608]
    );
    let r = res
        .rows
        .iter()
        .find(|r| r.message_bytes == Some(131072))
        .unwrap();
    assert_eq!(r.bandwidth_gbps, Some(21.35), "the measurement is kept");
    let d = r.diagnosis.as_ref().unwrap();
    assert!(d.why.contains("against 53.07 Gb/s at 64 KiB"), "{}", d.why);
    assert!(d.fix.contains("MTU") && d.fix.contains("PFC"), "{}", d.fix);
    let text = report::human(&res);
    assert!(
        text.contains("WARN (under half of 53.07 Gb/s at 64 KiB)"),
        "{text}"
    );
    assert_eq!(
        text.matches("bandwidth collapses at 128 KiB").count(),
        1,
        "one explanation for the sweep: {text}"
    );
    // A warning is not a failure.
    assert!(res.rows.iter().all(|r| r.status != "failed"));
}
