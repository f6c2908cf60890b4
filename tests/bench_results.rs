//! Results derived from saved raw logs: a leg that moved no data fails
//! with its reason, a stray non-UTF-8 byte does not cost the leg, and a
//! failure is diagnosed from whichever end printed the cause.

use std::fs;
use std::path::Path;

use halobox::bench::diagnose::Cause;
use halobox::bench::plan::{BenchOptions, LegKind, PathSpec, RdmaMode};
use halobox::bench::probe::NodeContext;
use halobox::bench::report;
use halobox::bench::results::{self, LegRecord, LegStatus, PathRecord, Results, RunRecord};

fn fixture(dir: &str, name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(name);
    fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn end(ip: &str) -> NodeContext {
    serde_json::from_value(serde_json::json!({
        "ip": ip, "interface": "enp194s0np0", "mtu": 9000, "roce_mtu": 4096,
        "link_gbps": 100.0, "virtual_link": false, "pcie": null, "pcie_gbps": null,
        "rdma": {"device": "rocep194s0", "port": 1, "gid_index": 1, "port_up": true, "transport": "roce"},
        "rdma_devices": 1, "iperf3": true, "perftest": true
    }))
    .unwrap()
}

/// Derives results for one leg whose client (and optionally server) log
/// holds the given bytes.
fn one_leg(kind: LegKind, id: &str, client: &[u8], server: Option<&[u8]>) -> Results {
    let dir = tempfile::tempdir().unwrap();
    let rec = saved(dir.path(), kind, id, client, server);
    results::derive(&rec, dir.path())
}

/// A saved run of one leg in `dir`: its logs, and the record it returns.
fn saved(dir: &Path, kind: LegKind, id: &str, client: &[u8], server: Option<&[u8]>) -> RunRecord {
    fs::write(dir.join(results::client_log(id, kind)), client).unwrap();
    if let Some(s) = server {
        fs::write(dir.join(results::server_log(id)), s).unwrap();
    }
    RunRecord {
        schema_version: results::SCHEMA_VERSION,
        started_utc: "2026-01-01T00:00:00Z".into(),
        options: BenchOptions {
            peer: "n2".into(),
            peer_from: None,
            peer_halobox: "halobox".into(),
            ssh_options: vec![],
            paths: vec![PathSpec {
                local_ip: "192.168.100.1".parse().unwrap(),
                peer_ip: "192.168.100.2".parse().unwrap(),
            }],
            rdma: RdmaMode::On,
            duration_s: 10,
            streams: 1,
            port: 5301,
            latency_samples: 1000,
            sweep: false,
            local_in: None,
            peer_container: None,
            host_why: None,
            link: None,
        },
        paths: vec![PathRecord {
            id: "p0".into(),
            local_ip: "192.168.100.1".parse().unwrap(),
            peer_ip: "192.168.100.2".parse().unwrap(),
            local: end("192.168.100.1"),
            peer: end("192.168.100.2"),
            legs: vec![LegRecord {
                id: id.into(),
                kind,
                streams: 1,
                commands: vec![],
                status: LegStatus::Ran,
            }],
            rdma_counters: None,
        }],
    }
}

#[test]
fn iperf3_that_moved_nothing_is_a_failed_leg() {
    let res = one_leg(
        LegKind::Iperf3,
        "p0-iperf3-1",
        &fixture("iperf3", "zero_bytes.json"),
        None,
    );
    let r = &res.rows[0];
    assert_eq!(r.status, "failed");
    assert_eq!(r.bandwidth_gbps, None, "no 0.00 Gb/s");
    let d = r.diagnosis.as_ref().unwrap();
    assert_eq!(d.cause, Cause::NoData);
    assert!(d.why.contains("iperf3 moved no data"), "{}", d.why);
    let text = report::human(&res);
    assert!(text.contains("FAILED"), "{text}");
    assert!(!text.contains("0.00"), "{text}");
}

#[test]
fn perftest_with_zero_iterations_is_a_failed_leg() {
    let res = one_leg(
        LegKind::RdmaBandwidth,
        "p0-ib_write_bw-1",
        &fixture("perftest", "write_bw_zero_iterations.txt"),
        None,
    );
    let r = &res.rows[0];
    assert_eq!(r.status, "failed");
    assert_eq!(r.bandwidth_gbps, None);
    let d = r.diagnosis.as_ref().unwrap();
    assert_eq!(d.cause, Cause::NoData);
    assert!(d.why.contains("0 iterations at 65536 B"), "{}", d.why);
}

/// One invalid UTF-8 byte in a raw log (here in perftest's banner) costs
/// nothing: the table is still read.
#[test]
fn a_stray_byte_does_not_discard_the_leg() {
    let mut raw = fixture("perftest", "write_bw_gbits_duration.txt");
    raw.splice(10..10, [0xff, 0xfe]);
    assert!(String::from_utf8(raw.clone()).is_err());
    let res = one_leg(LegKind::RdmaBandwidth, "p0-ib_write_bw-1", &raw, None);
    assert_eq!(res.rows[0].status, "ok", "{:?}", res.rows[0]);
    assert_eq!(res.rows[0].bandwidth_gbps, Some(0.48));

    let mut json = fixture("iperf3", "veth_1_stream.json");
    let at = String::from_utf8_lossy(&json).find("system_info").unwrap() + 20;
    json.insert(at, 0xc3);
    let res = one_leg(LegKind::Iperf3, "p0-iperf3-1", &json, None);
    assert_eq!(res.rows[0].status, "ok", "{:?}", res.rows[0]);
}

/// The client only saw the exchange break; the server's log has the cause.
#[test]
fn the_end_that_printed_the_cause_is_named() {
    let res = one_leg(
        LegKind::RdmaBandwidth,
        "p0-ib_write_bw-1",
        b" ethernet_read_keys: Couldn't read remote address\n Unable to read to socket/rdma_cm\n",
        Some(&fixture("perftest", "alloc_mr.txt")),
    );
    let d = res.rows[0].diagnosis.as_ref().unwrap();
    assert_eq!(d.cause, Cause::Memlock, "{d:?}");
    assert!(d.why.contains("on the peer"), "{}", d.why);
    // Without a cause on the peer, the echo is what there is.
    let res = one_leg(
        LegKind::RdmaBandwidth,
        "p0-ib_write_bw-1",
        b" ethernet_read_keys: Couldn't read remote address\n",
        Some(b"\n"),
    );
    let d = res.rows[0].diagnosis.as_ref().unwrap();
    assert_eq!(d.cause, Cause::PeerExited);
    assert!(d.fix.contains("other end's log"), "{}", d.fix);
}

/// `bench report` of a saved folder (as `cluster bench` brings back from a
/// node) whose record and logs carry OSC 52 (clipboard), OSC 0 (title) and
/// CSI 2J (clear screen): none of it reaches the terminal.
#[test]
fn bench_report_of_a_saved_folder_prints_no_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let bad = "\u{1b}]52;c;aGFsb2JveA==\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m";
    let log = format!(" ethernet_read_keys: Couldn't read remote address{bad}\n");
    let rec = saved(
        dir.path(),
        LegKind::RdmaBandwidth,
        "p0-ib_write_bw-1",
        log.as_bytes(),
        Some(format!("Couldn't allocate MR{bad}\n").as_bytes()),
    );
    let hostile = serde_json::to_string(&format!("enp194s0np0{bad}")).unwrap();
    let json = serde_json::to_string(&rec)
        .unwrap()
        .replace("enp194s0np0", hostile.trim_matches('"'));
    assert!(json.contains("\\u001b"), "{json}");
    fs::write(dir.path().join(results::RUN_FILE), json).unwrap();
    for args in [&[][..], &["--json"][..]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_halobox"))
            .args(["bench", "report"])
            .arg(dir.path())
            .args(args)
            .output()
            .unwrap();
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        let text = String::from_utf8_lossy(&all);
        assert!(text.contains("enp194s0np0"), "{text}");
        assert!(
            !text
                .chars()
                .any(|c| c == '\u{1b}' || c == '\u{7}' || c == '\u{9b}'),
            "{args:?}: {text:?}"
        );
    }
}

/// `--link usb4`: the plan keeps the TCP legs and skips every RDMA leg with
/// the reason; a run over thunderbolt-net reports the link as USB4 and
/// judges its figures against the public ones (shape only, no rate).
#[test]
fn the_usb4_link_alone() {
    use halobox::bench::plan;
    use halobox::bench::plan::Link;
    let dir = tempfile::tempdir().unwrap();
    let mut rec = saved(
        dir.path(),
        LegKind::Iperf3,
        "p0-iperf3-1",
        &fixture("iperf3", "veth_1_stream.json"),
        None,
    );
    rec.options.link = Some(Link::Usb4);
    let usb4 = |ip: &str| -> NodeContext {
        serde_json::from_value(serde_json::json!({
            "ip": ip, "interface": "thunderbolt0", "mtu": 9000, "roce_mtu": 4096,
            "link_gbps": 40.0, "virtual_link": false, "pcie": null, "pcie_gbps": null,
            "rdma": null, "rdma_devices": 0, "iperf3": true, "perftest": false,
            "usb4": {"xdomain": "0-1", "gbps": 40, "lanes": "2 × 20 Gb/s"}
        }))
        .unwrap()
    };
    let (local, peer) = (usb4("10.0.0.1"), usb4("10.0.0.2"));
    let p = plan::build(&rec.options, &[(local.clone(), Some(peer.clone()))]);
    let legs = &p.paths[0].legs;
    assert!(
        legs.iter()
            .any(|l| l.kind == LegKind::TcpLatency && l.skip.is_none())
    );
    for l in legs.iter().filter(|l| {
        matches!(
            l.kind,
            LegKind::RdmaLatency | LegKind::RdmaBandwidth | LegKind::RdmaSweep
        )
    }) {
        assert!(
            l.skip
                .as_deref()
                .unwrap_or("")
                .starts_with("--link usb4: no RDMA over thunderbolt-net"),
            "{l:?}"
        );
    }
    assert!(
        plan::render(&rec.options, &p)
            .contains("link usb4: the thunderbolt-net addresses of both ends"),
    );
    rec.paths[0].local = local;
    rec.paths[0].peer = peer;
    let res = results::derive(&rec, dir.path());
    assert!(
        res.context[0].contains("USB4 (thunderbolt-net) 2 × 20 Gb/s"),
        "{:?}",
        res.context
    );
    assert!(
        res.link_notes[0]
            .starts_with("p0 is a USB4 link (thunderbolt-net, TCP): trained at 40 Gb/s"),
        "{:?}",
        res.link_notes
    );
    assert!(
        res.link_notes
            .iter()
            .any(|n| n.starts_with("p0 bandwidth: ") && n.contains(" Gb/s (the best TCP leg); ")),
        "{:?}",
        res.link_notes
    );
    let text = report::human(&res);
    assert!(text.contains("p0 is a USB4 link"), "{text}");
}
