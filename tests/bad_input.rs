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

/// A copy of a fixture host whose files are turned into traps: an absolute
/// symlink to a file on this machine, a relative symlink that climbs out of
/// the snapshot to another file here, a FIFO and a device node where sysfs
/// files belong. Returns the snapshot and the two "host" files' marker.
fn hostile_snapshot(top: &std::path::Path) -> (std::path::PathBuf, &'static str) {
    use std::os::unix::fs::symlink;
    let marker = "HOST-SECRET-7d1f";
    let snap = top.join("snap");
    fs::create_dir_all(&snap).unwrap();
    common::copy_tree(&common::fixture_path("strix-e810"), &snap);
    // This machine's files, outside the snapshot.
    let shadow = top.join("shadow");
    fs::write(&shadow, format!("root:{marker}:19000:0:99999:7:::\n")).unwrap();
    fs::write(
        top.join("cmdline"),
        format!("iommu=pt {marker} pcie_aspm=off\n"),
    )
    .unwrap();
    fs::remove_file(snap.join("etc/group")).unwrap();
    symlink(&shadow, snap.join("etc/group")).unwrap();
    fs::remove_file(snap.join("proc/cmdline")).unwrap();
    symlink("../../cmdline", snap.join("proc/cmdline")).unwrap();
    let port = snap.join("sys/class/infiniband/rocep194s0/ports/1");
    fs::remove_file(port.join("state")).unwrap();
    nix::unistd::mkfifo(&port.join("state"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    fs::remove_file(port.join("rate")).unwrap();
    nix::sys::stat::mknod(
        &port.join("rate"),
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::S_IRUSR,
        nix::sys::stat::makedev(1, 3),
    )
    .unwrap();
    (snap, marker)
}

#[test]
fn a_hostile_snapshot_is_read_inside_itself_and_never_blocks() {
    let top = tempfile::tempdir().unwrap();
    let (snap, marker) = hostile_snapshot(top.path());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["detect", "--json", "--sysroot", snap.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("detect --sysroot hung on the FIFO in the snapshot");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains(marker),
        "a file of this machine was read:\n{text}"
    );
    let facts: serde_json::Value = serde_json::from_str(&text).unwrap();
    let issues = facts["read_issues"].as_array().unwrap();
    let issue = |path: &str| {
        issues
            .iter()
            .find(|i| i["path"] == path)
            .map(|i| i["error"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("{path} not reported in {issues:?}"))
    };
    let group = issue("/etc/group");
    assert!(
        group.contains("/etc/group ->") && group.contains("absolute"),
        "{group}"
    );
    assert!(issue("/proc/cmdline").contains("climbs out"));
    let port = "/sys/class/infiniband/rocep194s0/ports/1";
    assert!(issue(&format!("{port}/state")).contains("FIFO"));
    assert!(issue(&format!("{port}/rate")).contains("character device"));
    // The rest of the snapshot still reads through its relative symlinks.
    assert_eq!(facts["rdma"]["devices"][0]["name"], "rocep194s0");
    assert!(
        !facts["network"]["interfaces"]
            .as_array()
            .unwrap()
            .is_empty()
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
