//! `halobox bench` without a peer: the dry-run plan, refused ssh options,
//! and clear errors for folders that are not saved runs.

use std::process::{Command, Output};

fn halobox(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn dry_run_prints_every_command_and_runs_nothing() {
    let out = halobox(&[
        "bench",
        "run",
        "--peer",
        "node2.invalid",
        "--peer-ip",
        "10.77.250.2",
        "--iface-ip",
        "127.0.0.1",
        "--rdma",
        "--streams",
        "3",
        "--dry-run",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "ssh -o BatchMode=yes",
        "-- node2.invalid 'halobox bench probe --ip 10.77.250.2'",
        "halobox bench serve --bind 10.77.250.2 --port 5301",
        "iperf3 -c 10.77.250.2 -B 127.0.0.1 -p 5201 -t 10 -P 3 --json",
        "iperf3 -s -1 --forceflush -B 10.77.250.2 -p 5201",
        // The peer's RDMA endpoint is only known after the probe.
        "halobox-guard ib_write_lat -d '\\''<peer device>'\\'' -i '\\''<peer port>'\\'' -x '\\''<peer gid index>'\\'' -F -p 18515",
        // lo has MTU 65536: the RoCE path MTU is capped at 4096.
        "local: ib_write_lat -F -p 18515 -m 4096 -n 20000 10.77.250.2",
        "--report_gbits -s 65536 -q 3",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("StrictHostKeyChecking"));
}

#[test]
fn host_key_checking_cannot_be_turned_off() {
    let out = halobox(&[
        "bench",
        "run",
        "--peer",
        "n",
        "--peer-ip",
        "10.77.250.2",
        "--iface-ip",
        "127.0.0.1",
        "--ssh-option",
        "StrictHostKeyChecking=no",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("host key checking"));
}

#[test]
fn report_of_a_folder_that_is_not_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = halobox(&["bench", "report", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run.json") && err.contains("--save"), "{err}");
}

#[test]
fn mismatched_iface_ips_are_refused() {
    let out = halobox(&[
        "bench",
        "run",
        "--peer",
        "n",
        "--peer-ip",
        "10.0.0.2",
        "--peer-ip",
        "10.0.1.2",
        "--iface-ip",
        "10.0.0.1",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("one local address per peer address"));
}
