//! Bad input gets a clear error and no panic.

mod common;

use std::fs;

use common::{check, halobox, run, run_json};
use predicates::str::contains;

#[test]
fn missing_sysroot_is_a_usage_error() {
    halobox()
        .args(["doctor", "--sysroot", "/does/not/exist"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(contains("sysroot /does/not/exist does not exist"))
        .stderr(contains("hint:"));
    halobox()
        .args(["detect", "--json", "--sysroot", "/does/not/exist"])
        .assert()
        .code(2);
}

#[test]
fn sysroot_that_is_a_file_is_a_usage_error() {
    let f = tempfile::NamedTempFile::new().unwrap();
    halobox()
        .args(["detect", "--sysroot", f.path().to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(contains("is not a directory"));
}

#[test]
fn non_ip_is_a_usage_error() {
    for bad in ["192.168.100", "fe80::1", "node1", "192.168.100.256"] {
        halobox()
            .args(["doctor", "--ip", bad])
            .assert()
            .code(2)
            .stderr(contains("invalid value"))
            .stderr(contains("--ip"));
    }
}

#[test]
fn unknown_command_and_flag_are_usage_errors() {
    halobox().args(["frobnicate"]).assert().code(2);
    halobox().args(["doctor", "--nope"]).assert().code(2);
}

#[test]
fn empty_sysroot_gives_an_honest_report() {
    let dir = tempfile::tempdir().unwrap();
    let (report, code) = run_json(&[
        "doctor",
        "--json",
        "--sysroot",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "no GPU is a FAIL");
    assert_eq!(check(&report, "gpu.present")["status"], "FAIL");
    assert_eq!(check(&report, "rdma.device")["status"], "WARN");
    assert_eq!(check(&report, "tools.containers")["status"], "FAIL");
    assert_eq!(check(&report, "memlock.user")["status"], "WARN");
}

/// A snapshot whose files hold garbage, are directories where files belong,
/// or are not UTF-8.
fn garbage_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let w = |p: &str, content: &[u8]| {
        let path = dir.path().join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    };
    w(
        "sys/class/kfd/kfd/topology/nodes/0/properties",
        b"cpu_cores_count 16\ngfx_target_version 0\n",
    );
    w(
        "sys/class/kfd/kfd/topology/nodes/1/properties",
        b"gfx_target_version lots\nsimd_count -3\n\xff\xfe\n",
    );
    w(
        "sys/class/kfd/kfd/topology/nodes/2/properties",
        b"gfx_target_version 99999999999999999999\ndrm_render_minor 4294967296\n",
    );
    let port = "sys/class/infiniband/rocep1s0/ports/1";
    w(&format!("{port}/state"), b"4: ACTIVE\n");
    w(&format!("{port}/phys_state"), b"5: LinkUp\n");
    w(&format!("{port}/link_layer"), b"Ethernet\n");
    w(&format!("{port}/rate"), b"fast\n");
    w(&format!("{port}/gids/0"), b"this is not a gid\n");
    w(
        &format!("{port}/gids/1"),
        b"0000:0000:0000:0000:0000:ffff:c0a8:6401:0000\n",
    );
    w(
        &format!("{port}/gids/2"),
        b"0000:0000:0000:0000:0000:ffff:c0a8:6401\n",
    );
    w(&format!("{port}/gid_attrs/types/2"), b"RoCE v2\n");
    w("sys/class/infiniband/rocep1s0/node_type", b"1: CA\n");
    w(
        "proc/cmdline",
        b"iommu=pt \"unterminated quote pcie_aspm=off\n",
    );
    w("proc/meminfo", b"MemTotal: many kB\n");
    w("proc/self/limits", b"Max locked memory  soft hard bytes\n");
    w("proc/self/status", b"Uid:\tx\n");
    w("etc/group", b"render:x:notanumber:\n::::\n");
    w("captured/ip-addr.json", b"{not json");
    w("captured/dev-stat.txt", b"/dev/kfd rw-rw-rw- root render\n");
    fs::create_dir_all(dir.path().join("proc/sys/kernel/osrelease")).unwrap();
    dir
}

#[test]
fn garbage_files_are_reported_not_fatal() {
    let dir = garbage_tree();
    let root = dir.path().to_str().unwrap();
    let (facts, code) = run_json(&["detect", "--json", "--sysroot", root]);
    assert_eq!(code, 0);
    let issues = facts["read_issues"].to_string();
    for what in [
        "topology/nodes/1/properties",
        "topology/nodes/2/properties",
        "gids/0",
        "gids/1",
        "/proc/meminfo",
        "/proc/self/limits",
        "/captured/ip-addr.json",
        "/captured/dev-stat.txt",
        "/proc/sys/kernel/osrelease",
    ] {
        assert!(issues.contains(what), "{what} not reported in {issues}");
    }
    let nodes = facts["gpu"]["nodes"].as_array().unwrap();
    assert!(nodes.iter().all(|n| n["gfx_target"].is_null()));
    let gids = &facts["rdma"]["devices"][0]["ports"][0]["gids"];
    assert_eq!(
        gids.as_array().unwrap().len(),
        1,
        "only the valid GID is kept"
    );
    assert_eq!(gids[0]["ipv4"], "192.168.100.1");
    assert!(facts["rdma"]["devices"][0]["ports"][0]["rate_gbps"].is_null());

    let (report, code) = run_json(&["doctor", "--json", "--sysroot", root]);
    assert_eq!(code, 1);
    let readable = check(&report, "host.readable");
    assert_eq!(readable["status"], "WARN");
    assert!(
        readable["summary"]
            .as_str()
            .unwrap()
            .contains("/proc/meminfo")
    );

    let text = run(&["doctor", "--sysroot", root]);
    assert_eq!(text.status.code(), Some(1));
    assert!(
        text.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
}

#[test]
fn check_of_a_bad_name_or_with_a_bad_flag_is_a_usage_error() {
    halobox()
        .args(["check", "no/such name"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(contains("is not a container name"));
    halobox().args(["check", "--nope"]).assert().code(2);
}
