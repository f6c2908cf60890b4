//! RDMA counters: read through the host reader from a snapshot (a copy of
//! tests/fixtures/hosts/strix-cx5 with mlx5 counter files added, before and
//! after), their deltas and diagnosis, and how a run shows them.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use halobox::bench::counters::{self, Snapshots};
use halobox::bench::probe::NodeContext;
use halobox::bench::report;
use halobox::bench::results::Results;

use common::{copy_tree, fixture_path};

fn cx5_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture_path("strix-cx5"), dir.path());
    dir
}

const PORT: &str = "sys/class/infiniband/mlx5_0/ports/1";

/// Writes counter files as mlx5 has them (one decimal number each).
fn write_counters(root: &Path, sub: &str, values: &[(&str, u64)]) {
    let dir = root.join(PORT).join(sub);
    fs::create_dir_all(&dir).unwrap();
    for (name, v) in values {
        fs::write(dir.join(name), format!("{v}\n")).unwrap();
    }
}

fn probe(root: &Path) -> NodeContext {
    let out = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["bench", "probe", "--ip", "10.0.0.1", "--sysroot"])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn counters_before_and_after_from_a_snapshot() {
    let root = cx5_copy();
    let r = root.path();
    write_counters(
        r,
        "counters",
        &[
            ("port_xmit_data", 1_000),
            ("port_rcv_data", 2_000),
            ("symbol_error", 0),
        ],
    );
    write_counters(
        r,
        "hw_counters",
        &[
            ("out_of_sequence", 7),
            ("local_ack_timeout_err", 0),
            ("packet_seq_err", 0),
            ("np_cnp_sent", 0),
            ("rp_cnp_handled", 0),
            ("np_ecn_marked_roce_packets", 0),
            ("roce_slow_restart", 0),
            ("duplicate_request", 0),
            ("lifespan", 10),
        ],
    );
    let before = probe(r);
    let c = before.counters.as_ref().expect("counters read");
    assert_eq!((c.device.as_str(), c.port), ("mlx5_0", 1));
    assert_eq!(c.values["counters/port_xmit_data"], 1_000);
    assert_eq!(c.values["hw_counters/out_of_sequence"], 7);
    assert!(!c.values.contains_key("hw_counters/lifespan"));

    write_counters(
        r,
        "counters",
        &[("port_xmit_data", 9_000_000), ("port_rcv_data", 8_000_000)],
    );
    write_counters(
        r,
        "hw_counters",
        &[
            ("out_of_sequence", 19),
            ("local_ack_timeout_err", 2),
            ("np_cnp_sent", 40),
            ("np_ecn_marked_roce_packets", 41),
        ],
    );
    let after = probe(r);
    let rep = counters::report(
        "p0",
        "this node",
        before.counters.as_ref(),
        after.counters.as_ref(),
        None,
    );
    assert!(rep.present);
    let got: Vec<(&str, u64)> = rep
        .deltas
        .iter()
        .map(|(k, v)| (counters::short(k), *v))
        .collect();
    // Data counters moved but are not worth a line; zero deltas are left out.
    assert_eq!(
        got,
        [
            ("local_ack_timeout_err", 2),
            ("np_cnp_sent", 40),
            ("np_ecn_marked_roce_packets", 41),
            ("out_of_sequence", 12),
        ]
    );
    assert!(
        rep.diagnosis.contains("retries/out-of-sequence") && rep.diagnosis.contains("MTU"),
        "{}",
        rep.diagnosis
    );
    assert!(
        rep.diagnosis
            .contains("ECN/CNP: congestion control was active")
    );
    let line = counters::line(&rep);
    assert!(
        line.starts_with("p0 RDMA counters, this node mlx5_0/1: local_ack_timeout_err +2,"),
        "{line}"
    );

    // The peer had none: "not present", not an error; both show in the table.
    let s = Snapshots {
        local_before: before.counters.clone(),
        local_after: after.counters.clone(),
        ..Snapshots::default()
    };
    let res = Results {
        schema_version: 1,
        started_utc: "2026-01-01T00:00:00Z".into(),
        peer: "n2".into(),
        ran_in: String::new(),
        context: vec![],
        rows: vec![],
        counters: counters::reports("p0", &s).to_vec(),
        link_notes: vec![],
    };
    let text = report::human(&res);
    assert!(
        text.contains("  p0 RDMA counters, this node mlx5_0/1: "),
        "{text}"
    );
    assert!(
        text.contains("  p0 RDMA counters, peer: counters: not present"),
        "{text}"
    );
    let json = serde_json::to_value(&res).unwrap();
    assert_eq!(
        json["counters"][0]["deltas"]["hw_counters/out_of_sequence"],
        12
    );
    assert_eq!(json["counters"][1]["present"], false);
}

#[test]
fn irdma_names_are_read_too() {
    let root = cx5_copy();
    let r = root.path();
    // irdma keeps its hw_counters per port, with names such as these.
    write_counters(
        r,
        "hw_counters",
        &[("cnpSent", 1), ("RxECNMrkd", 5), ("RTO", 0)],
    );
    let before = probe(r).counters.unwrap();
    write_counters(
        r,
        "hw_counters",
        &[("cnpSent", 3), ("RxECNMrkd", 5), ("RTO", 4)],
    );
    let after = probe(r).counters.unwrap();
    let rep = counters::report("p0", "peer", Some(&before), Some(&after), None);
    assert_eq!(rep.deltas.len(), 2);
    assert_eq!(rep.deltas["hw_counters/RTO"], 4);
    assert_eq!(rep.deltas["hw_counters/cnpSent"], 2);
}

#[test]
fn a_port_without_counter_files_has_none() {
    let ctx = probe(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/strix-cx5"));
    assert!(ctx.rdma.is_some());
    assert_eq!(ctx.counters, None);
    let rep = counters::report("p0", "this node", None, None, None);
    assert_eq!(rep.diagnosis, "counters: not present");
}
