//! `detect` and `doctor` on the snapshot hosts in tests/fixtures/hosts/:
//! output snapshots (insta) plus the decisions each host exists to test.

mod common;

use std::fs;

use common::{check, copy_tree, fixture, fixture_path, run, run_json};
use serde_json::Value;

const HOSTS: [&str; 9] = [
    "strix-e810",
    "strix-e810-iwarp",
    "strix-e810-partial",
    "strix-cx5",
    "no-gpu-no-rdma",
    "broken-e810",
    "strix-usb4",
    "strix-usb4-20g",
    "strix-usb4-down",
];

#[test]
fn output_snapshots() {
    for host in HOSTS {
        let root = fixture(host);
        let detect = run(&["detect", "--json", "--sysroot", &root]);
        assert!(detect.status.success(), "{host}");
        insta::assert_snapshot!(
            format!("{host}.detect.json"),
            String::from_utf8(detect.stdout).unwrap()
        );
        let detect_text = run(&["detect", "--sysroot", &root]);
        insta::assert_snapshot!(
            format!("{host}.detect.txt"),
            String::from_utf8(detect_text.stdout).unwrap()
        );
        let doctor = run(&["doctor", "--json", "--sysroot", &root]);
        insta::assert_snapshot!(
            format!("{host}.doctor.json"),
            String::from_utf8(doctor.stdout).unwrap()
        );
        let text = run(&["doctor", "--sysroot", &root]);
        insta::assert_snapshot!(
            format!("{host}.doctor.txt"),
            String::from_utf8(text.stdout).unwrap()
        );
    }
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn doctor(host: &str, extra: &[&str]) -> (Value, i32) {
    let root = fixture(host);
    let mut args = vec!["doctor", "--json", "--sysroot", &root];
    args.extend_from_slice(extra);
    run_json(&args)
}

#[test]
fn healthy_e810_passes_everything_but_the_x4_slot() {
    let (r, code) = doctor("strix-e810", &["--peer", "192.168.100.2"]);
    assert_eq!(code, 0);
    for (id, status) in statuses(&r) {
        let want = match id.as_str() {
            "rdma.pcie" => "WARN",
            // No USB4 interface; a snapshot cannot ping.
            "net.usb4" | "net.jumbo" => "SKIP",
            _ => "PASS",
        };
        assert_eq!(status, want, "{id}");
    }
    assert!(
        check(&r, "rdma.pcie")["summary"]
            .as_str()
            .unwrap()
            .contains("63.0 Gb/s")
    );
    // Without a peer there is no route to check.
    let (r, _) = doctor("strix-e810", &[]);
    assert_eq!(check(&r, "net.route")["status"], "SKIP");
    assert_eq!(r["data_plane"]["interface"], "enp194s0np0");
    assert_eq!(r["data_plane"]["rdma"]["device"], "rocep194s0");
    assert_eq!(r["data_plane"]["rdma"]["gid_index"], 1);
}

#[test]
fn connectx_uses_the_v2_gid_and_never_the_down_port() {
    let (r, _) = doctor("strix-cx5", &[]);
    assert_eq!(r["data_plane"]["rdma"]["device"], "mlx5_0");
    assert_eq!(
        r["data_plane"]["rdma"]["gid_index"], 3,
        "index 2 is the v1 GID"
    );
    assert_eq!(check(&r, "kernel.iommu")["status"], "PASS");
    assert_eq!(check(&r, "gpu.kfd_access")["status"], "PASS");

    // Give the down port's netdev an address too: the up port still wins.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture_path("strix-cx5"), dir.path());
    let ip_json = dir.path().join("captured/ip-addr.json");
    let mut links: Value = serde_json::from_str(&fs::read_to_string(&ip_json).unwrap()).unwrap();
    for link in links.as_array_mut().unwrap() {
        if link["ifname"] == "enp1s0f1np1" {
            link["addr_info"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"family": "inet", "local": "10.0.1.1", "prefixlen": 24}));
        }
    }
    fs::write(&ip_json, links.to_string()).unwrap();
    let root = dir.path().to_str().unwrap();
    let (r, _) = run_json(&["doctor", "--json", "--sysroot", root]);
    assert_eq!(r["data_plane"]["ip"], "10.0.0.1");
    assert_eq!(r["data_plane"]["rdma"]["device"], "mlx5_0");
    // Asked for explicitly, the down port is named as down.
    let (r, code) = run_json(&["doctor", "--json", "--sysroot", root, "--ip", "10.0.1.1"]);
    assert_eq!(code, 1);
    assert_eq!(r["data_plane"]["rdma"]["device"], "mlx5_1");
    assert_eq!(check(&r, "rdma.port")["status"], "FAIL");
    assert!(
        check(&r, "rdma.port")["summary"]
            .as_str()
            .unwrap()
            .contains("DOWN")
    );
}

/// The in-kernel ice/irdma switch to RoCE v2 is devlink's, for this NIC's
/// PCI address, made persistent; `options irdma roce_ena=1` belongs to
/// Intel's out-of-tree driver. `cluster join` says the same.
#[test]
fn iwarp_mode_fails_with_the_devlink_fix() {
    let (r, code) = doctor("strix-e810-iwarp", &[]);
    assert_eq!(code, 1);
    let mode = check(&r, "rdma.mode");
    assert_eq!(mode["status"], "FAIL");
    let fix = mode["fix"].as_str().unwrap();
    let iwarp_off =
        "sudo devlink dev param set pci/0000:c2:00.0 name enable_iwarp value false cmode runtime";
    let roce_on =
        "sudo devlink dev param set pci/0000:c2:00.0 name enable_roce value true cmode runtime";
    assert!(
        fix.find(iwarp_off).unwrap() < fix.find(roce_on).unwrap(),
        "iWARP off before RoCE on: {fix}"
    );
    assert!(fix.contains("systemctl enable"), "{fix}");
    assert!(!fix.contains("roce_ena"), "{fix}");
    assert_eq!(check(&r, "rdma.gid")["status"], "SKIP");
    let out = run(&[
        "cluster",
        "join",
        "--head",
        "192.168.100.1",
        "--ip",
        "192.168.100.1",
        "--sysroot",
        &fixture("strix-e810-iwarp"),
        "--dry-run",
        "--transport",
        "roce",
    ]);
    let cluster = String::from_utf8_lossy(&out.stderr);
    for part in ["name enable_roce value true cmode runtime", "enable_iwarp"] {
        assert!(cluster.contains(part) && fix.contains(part), "{cluster}");
    }
}

#[test]
fn broken_host_names_every_fault() {
    let (r, code) = doctor("broken-e810", &[]);
    assert_eq!(code, 1);
    let want = [
        ("gpu.kfd_access", "FAIL", "usermod -aG render"),
        ("gpu.render_access", "FAIL", "usermod -aG render"),
        ("memlock.user", "FAIL", "memlock unlimited"),
        ("memlock.podman_service", "FAIL", "LimitMEMLOCK=infinity"),
        ("rdma.port", "FAIL", "ip link set enp194s0np0 up"),
        ("net.mtu", "WARN", "mtu 9000"),
        ("kernel.iommu", "WARN", "iommu=pt"),
        ("kernel.pcie_aspm", "WARN", "pcie_aspm=off"),
        ("env.hazards", "WARN", "unset HSA_OVERRIDE_GFX_VERSION"),
        ("rdma.firmware", "WARN", "NVM"),
        (
            "net.firewall",
            "FAIL",
            "--zone=trusted --add-interface=enp194s0np0",
        ),
        ("kernel.version", "FAIL", "6.18.4"),
        ("kernel.pci_realloc", "WARN", "pci=realloc"),
    ];
    for (id, status, fix) in want {
        let c = check(&r, id);
        assert_eq!(c["status"], status, "{id}: {c}");
        assert!(c["fix"].as_str().unwrap().contains(fix), "{id}: {c}");
    }
    assert!(
        check(&r, "kernel.pcie_aspm")["summary"]
            .as_str()
            .unwrap()
            .contains("pcie_asm=off")
    );
    // A down port's placeholder rate is not compared with the PCIe ceiling.
    let pcie = check(&r, "rdma.pcie");
    assert!(
        !pcie["summary"].as_str().unwrap().contains("port's"),
        "{pcie}"
    );
    assert_eq!(pcie["status"], "PASS");
    // firewalld's public zone (its file from the firewalld package) lets
    // through only ssh and dhcpv6-client.
    let fw = check(&r, "net.firewall")["summary"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        fw.contains("firewalld (zone public)") && fw.contains("Ray GCS (TCP 6379)"),
        "{fw}"
    );
}

#[test]
fn host_without_gpu_or_rdma_explains_instead_of_failing_everything() {
    let (r, code) = doctor("no-gpu-no-rdma", &[]);
    assert_eq!(code, 1);
    let fails: Vec<_> = statuses(&r)
        .into_iter()
        .filter(|(_, s)| s == "FAIL")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(fails, ["gpu.present"]);
    for c in r["checks"].as_array().unwrap() {
        assert!(c["summary"].as_str().unwrap().len() > 10, "{c}");
    }
}

#[test]
fn gtt_recommendation_follows_this_machines_memory() {
    // The same host with 64 GB and the 128 GB board's GTT values.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture_path("strix-e810"), dir.path());
    set_mem_total(dir.path(), 65536000);
    let (r, _) = run_json(&[
        "doctor",
        "--json",
        "--sysroot",
        dir.path().to_str().unwrap(),
    ]);
    let gtt = check(&r, "kernel.gtt");
    assert_eq!(gtt["status"], "WARN");
    assert!(
        gtt["summary"]
            .as_str()
            .unwrap()
            .contains("more than the 64000 MiB of RAM")
    );
    assert!(
        gtt["fix"]
            .as_str()
            .unwrap()
            .contains("amdgpu.gttsize=61440 ttm.pages_limit=15728640")
    );
}

/// Rewrites the MemTotal line of a snapshot's /proc/meminfo.
fn set_mem_total(root: &std::path::Path, kib: u64) {
    let path = root.join("proc/meminfo");
    let text: Vec<String> = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with("MemTotal:") {
                format!("MemTotal:       {kib} kB")
            } else {
                l.to_string()
            }
        })
        .collect();
    fs::write(path, text.join("\n") + "\n").unwrap();
}

/// Copies a fixture host so a test can change it.
fn host_copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture_path(name), dir.path());
    dir
}

fn doctor_at(root: &std::path::Path, extra: &[&str]) -> (Value, i32) {
    let mut args = vec!["doctor", "--json", "--sysroot", root.to_str().unwrap()];
    args.extend_from_slice(extra);
    run_json(&args)
}

fn write(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn summary(r: &Value, id: &str) -> String {
    check(r, id)["summary"].as_str().unwrap().to_string()
}

fn fix(r: &Value, id: &str) -> String {
    check(r, id)["fix"].as_str().unwrap_or_default().to_string()
}

/// Kernels without AMD's KFD fixes for gfx1151 (6.18.4+, Ubuntu 24.04 HWE
/// 6.17.0-19+) fail with the upgrade; linux-firmware 20251125 fails; the
/// MES firmware reported to hang Strix Halo warns (sources: docs/known-versions.md).
#[test]
fn kernel_and_firmware_against_known_versions() {
    let (r, _) = doctor("strix-e810", &[]);
    assert!(summary(&r, "kernel.version").contains("verified"));
    assert!(summary(&r, "gpu.firmware").contains("amd-gpu-firmware 20260110-1.fc43 (rpm)"));

    let root = host_copy("strix-e810");
    let p = root.path();
    write(p, "proc/sys/kernel/osrelease", "6.18.3-200.fc43.x86_64\n");
    write(
        p,
        "captured/rpm-q.txt",
        "amd-gpu-firmware-20251125-1.fc43.noarch\nlinux-firmware-20251125-1.fc43.noarch\n",
    );
    let (r, code) = doctor_at(p, &[]);
    assert_eq!(code, 1);
    assert_eq!(check(&r, "kernel.version")["status"], "FAIL");
    assert!(summary(&r, "kernel.version").contains("6.18.4"));
    assert!(fix(&r, "kernel.version").contains("dnf upgrade"));
    assert_eq!(check(&r, "gpu.firmware")["status"], "FAIL");
    assert!(summary(&r, "gpu.firmware").contains("20251125"));
    assert!(fix(&r, "gpu.firmware").contains("amd-gpu-firmware"));

    // A good package, but the MES build from ROCm issue #5724 is loaded.
    write(
        p,
        "captured/rpm-q.txt",
        "amd-gpu-firmware-20260110-1.fc43.noarch\n",
    );
    write(
        p,
        "sys/class/drm/card1/device/fw_version/mes_fw_version",
        "0x00000083\n",
    );
    let (r, _) = doctor_at(p, &[]);
    assert_eq!(check(&r, "gpu.firmware")["status"], "WARN");
    assert!(summary(&r, "gpu.firmware").contains("#5724"));

    // Ubuntu 24.04 before the HWE kernel that carries the fixes.
    let root = host_copy("strix-cx5");
    write(
        root.path(),
        "proc/sys/kernel/osrelease",
        "6.14.0-37-generic\n",
    );
    let (r, _) = doctor_at(root.path(), &[]);
    assert_eq!(check(&r, "kernel.version")["status"], "FAIL");
    assert!(fix(&r, "kernel.version").contains("linux-generic-hwe-24.04"));
    // Arch's split package, from pacman's database.
    let root = host_copy("strix-cx5");
    fs::remove_file(root.path().join("var/lib/dpkg/status")).unwrap();
    write(
        root.path(),
        "var/lib/pacman/local/linux-firmware-amdgpu-20251125-2/desc",
        "%NAME%\nlinux-firmware-amdgpu\n\n%VERSION%\n20251125-2\n",
    );
    let (r, _) = doctor_at(root.path(), &[]);
    assert_eq!(check(&r, "gpu.firmware")["status"], "FAIL");
    assert!(summary(&r, "gpu.firmware").contains("linux-firmware-amdgpu 20251125-2 (pacman)"));
}

#[test]
fn pci_realloc_is_checked() {
    let (r, _) = doctor("strix-e810", &[]);
    assert_eq!(check(&r, "kernel.pci_realloc")["status"], "PASS");
    let root = host_copy("strix-e810");
    let cmdline = fs::read_to_string(root.path().join("proc/cmdline")).unwrap();
    write(
        root.path(),
        "proc/cmdline",
        &cmdline.replace("pci=realloc", "pci=nocrs,realloc"),
    );
    let (r, _) = doctor_at(root.path(), &[]);
    assert_eq!(check(&r, "kernel.pci_realloc")["status"], "PASS");
    write(
        root.path(),
        "proc/cmdline",
        &cmdline.replace("pci=realloc", "pci=realloc=off"),
    );
    let (r, _) = doctor_at(root.path(), &[]);
    assert_eq!(check(&r, "kernel.pci_realloc")["status"], "WARN");
    assert!(fix(&r, "kernel.pci_realloc").contains("--args=\"pci=realloc\""));
}

/// A 96 GB BIOS carve-out (one guide's advice) is reported before the GTT,
/// and the GTT advice is for the board's RAM (MemTotal + carve-out), not
/// MemTotal alone (which gave amdgpu.gttsize=28672).
#[test]
fn a_large_carveout_comes_first_and_fixes_the_gtt_advice() {
    let root = host_copy("strix-e810");
    let p = root.path();
    write(
        p,
        "sys/class/drm/card1/device/mem_info_vram_total",
        "103079215104\n",
    );
    set_mem_total(p, 32687712);
    let (r, _) = doctor_at(p, &[]);
    let ids: Vec<String> = statuses(&r).into_iter().map(|(id, _)| id).collect();
    let pos = |id: &str| ids.iter().position(|i| i == id).unwrap();
    assert!(pos("gpu.carveout") < pos("kernel.gtt"));
    assert_eq!(check(&r, "gpu.carveout")["status"], "WARN");
    assert!(summary(&r, "gpu.carveout").contains("96 GiB"));
    assert!(fix(&r, "gpu.carveout").contains("512 MB"));
    let gtt = check(&r, "kernel.gtt");
    assert_eq!(gtt["status"], "WARN");
    let text = format!("{gtt}");
    assert!(!text.contains("28672"), "{text}");
    assert!(fix(&r, "kernel.gtt").contains("amdgpu.gttsize=126976 ttm.pages_limit=32505856"));
    assert!(
        fix(&r, "kernel.gtt").find("UMA frame buffer").unwrap()
            < fix(&r, "kernel.gtt").find("gttsize").unwrap(),
        "the BIOS first"
    );
}

/// A 25 Gb/s port on PCIe 3.0 x4 (about 27 Gb/s usable) is capped by the
/// port, not the slot: no warning. 100 Gb/s on the same slot is.
#[test]
fn pcie_warns_only_below_the_port_rate() {
    let (r, _) = doctor("strix-cx5", &[]);
    assert_eq!(check(&r, "rdma.pcie")["status"], "WARN");
    let root = host_copy("strix-cx5");
    write(
        root.path(),
        "sys/class/infiniband/mlx5_0/ports/1/rate",
        "25 Gb/sec (1X EDR)\n",
    );
    let (r, _) = doctor_at(root.path(), &[]);
    let pcie = check(&r, "rdma.pcie");
    assert_eq!(pcie["status"], "PASS", "{pcie}");
    assert!(summary(&r, "rdma.pcie").contains("the port is the limit"));
}

/// A second port left down, or a second NIC, is listed for information,
/// never chosen, never a failure.
#[test]
fn ports_off_the_data_plane_are_information() {
    let (r, code) = doctor("strix-cx5", &[]);
    assert_eq!(code, 0);
    let others = check(&r, "rdma.others");
    assert_eq!(others["status"], "INFO");
    assert!(summary(&r, "rdma.others").contains("mlx5_1 port 1 (enp1s0f1np1) DOWN"));
    assert_eq!(r["summary"]["info"], 1);

    // The second port up with its own address: the peer's subnet says
    // which one is the data plane.
    let root = host_copy("strix-cx5");
    let p = root.path();
    let port = "sys/class/infiniband/mlx5_1/ports/1";
    write(p, &format!("{port}/state"), "4: ACTIVE\n");
    write(p, &format!("{port}/phys_state"), "5: LinkUp\n");
    write(p, &format!("{port}/rate"), "100 Gb/sec (4X EDR)\n");
    let ip_json = p.join("captured/ip-addr.json");
    let mut links: Value = serde_json::from_str(&fs::read_to_string(&ip_json).unwrap()).unwrap();
    for link in links.as_array_mut().unwrap() {
        if link["ifname"] == "enp1s0f1np1" {
            link["addr_info"] =
                serde_json::json!([{"family": "inet", "local": "10.0.1.1", "prefixlen": 24}]);
        }
    }
    fs::write(&ip_json, links.to_string()).unwrap();
    let (r, _) = doctor_at(p, &[]);
    assert_eq!(check(&r, "net.data_plane")["status"], "WARN", "ambiguous");
    let (r, code) = doctor_at(p, &["--peer", "10.0.0.2"]);
    assert_eq!(r["data_plane"]["rdma"]["device"], "mlx5_0");
    assert!(summary(&r, "rdma.others").contains("mlx5_1 port 1"));
    assert_eq!(code, 0);
    let (r, _) = doctor_at(p, &["--peer", "10.0.1.2"]);
    assert_eq!(r["data_plane"]["rdma"]["device"], "mlx5_1");
}

/// The route to each peer must leave through the data-plane interface:
/// broken-e810's address was added without a prefix (/32), so its peer is
/// reached through the LAN's default route.
#[test]
fn the_route_to_each_peer_uses_the_data_plane() {
    let (r, _) = doctor("strix-e810", &["--peer", "192.168.100.2"]);
    assert_eq!(check(&r, "net.route")["status"], "PASS");
    assert!(summary(&r, "net.route").contains("192.168.100.0/30 dev enp194s0np0"));
    let (r, _) = doctor("broken-e810", &["--peer", "192.168.100.2"]);
    assert_eq!(check(&r, "net.route")["status"], "FAIL");
    assert!(summary(&r, "net.route").contains("routed out of enp191s0 via 192.168.1.1"));
    let f = fix(&r, "net.route");
    assert!(
        f.contains("192.168.100.1/32 on enp194s0np0 was added without a prefix"),
        "{f}"
    );
    assert!(
        f.contains("sudo ip route replace 192.168.100.2/32 dev enp194s0np0"),
        "{f}"
    );
    // A peer behind a gateway on the data-plane link is a warning.
    let root = host_copy("strix-e810");
    let route = fs::read_to_string(root.path().join("proc/net/route")).unwrap();
    write(
        root.path(),
        "proc/net/route",
        &format!("{route}enp194s0np0\t0065A8C0\t0264A8C0\t0003\t0\t0\t101\t00FFFFFF\t0\t0\t0\n"),
    );
    let (r, _) = doctor_at(root.path(), &["--peer", "192.168.101.7"]);
    assert_eq!(check(&r, "net.route")["status"], "WARN");
    assert!(summary(&r, "net.route").contains("via the gateway 192.168.100.2"));
}

/// A snapshot without captured/ip-addr.json still finds the data plane from
/// the RoCE v2 GID table and says so; without captured/dev-stat.txt the
/// device checks are skipped with the reason instead of judging placeholders.
#[test]
fn a_snapshot_without_captures_says_what_it_cannot_know() {
    let root = host_copy("strix-e810");
    let p = root.path();
    fs::remove_file(p.join("captured/ip-addr.json")).unwrap();
    fs::remove_file(p.join("captured/dev-stat.txt")).unwrap();
    let (r, code) = doctor_at(p, &["--peer", "192.168.100.2"]);
    assert_eq!(code, 0);
    assert_eq!(r["data_plane"]["interface"], "enp194s0np0");
    assert_eq!(r["data_plane"]["ip"], "192.168.100.1");
    assert_eq!(r["data_plane"]["rdma"]["gid_index"], 1);
    assert!(summary(&r, "net.data_plane").contains("no captured/ip-addr.json"));
    for id in ["gpu.kfd_access", "gpu.render_access"] {
        assert_eq!(check(&r, id)["status"], "SKIP", "{id}");
        assert!(summary(&r, id).contains("no captured/dev-stat.txt"), "{id}");
    }
    let gaps = check(&r, "host.snapshot");
    assert_eq!(gaps["status"], "INFO");
    assert!(summary(&r, "host.snapshot").contains("captured/ip-addr.json is missing"));
    let (facts, _) = run_json(&["detect", "--json", "--sysroot", p.to_str().unwrap()]);
    assert_eq!(facts["network"]["addresses_from"], "gid_table");
    let e = facts["network"]["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "enp194s0np0")
        .unwrap();
    assert_eq!(e["gid_ipv4"], serde_json::json!(["192.168.100.1"]));
    assert_eq!(
        facts["gpu"]["kfd"]["mode"],
        Value::Null,
        "not the placeholder's mode"
    );
}

/// `cluster join --sysroot` gives Ray the snapshot's CPU count, never this
/// machine's, and says so when the snapshot cannot tell.
#[test]
fn a_snapshot_plans_with_its_own_cpu_count() {
    let root = host_copy("strix-e810");
    let p = root.path();
    write(p, "sys/devices/system/cpu/online", "0-11\n");
    let join = |p: &std::path::Path| {
        run(&[
            "cluster",
            "join",
            "--head",
            "192.168.100.1",
            "--ip",
            "192.168.100.1",
            "--sysroot",
            p.to_str().unwrap(),
            "--dry-run",
            "--backend",
            "host",
        ])
    };
    let out = join(p);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("--num-cpus=12 "), "{text}");
    fs::remove_file(p.join("sys/devices/system/cpu/online")).unwrap();
    let out = join(p);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hint: pass --num-cpus N"), "{err}");
}

fn without_firewalld(name: &str) -> tempfile::TempDir {
    let root = host_copy(name);
    let p = root.path();
    // strix-e810's firewalld is pid 1043.
    fs::remove_dir_all(p.join("proc/1043")).unwrap();
    fs::remove_dir_all(p.join("etc/firewalld")).unwrap();
    root
}

fn firewall_fixture(name: &str) -> String {
    fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/firewall")
            .join(name),
    )
    .unwrap()
}

/// iptables, nftables and ufw rules are each judged for what the cluster
/// sends to the data-plane interface, and the report names the firewall.
#[test]
fn firewall_rules_of_every_kind() {
    // iptables: policy DROP with ssh allowed and a rule dropping RoCE.
    let root = without_firewalld("strix-e810");
    let p = root.path();
    write(
        p,
        "captured/iptables-save.txt",
        &firewall_fixture("iptables-save.txt"),
    );
    let (r, code) = doctor_at(p, &[]);
    assert_eq!(code, 1);
    let fw = summary(&r, "net.firewall");
    assert_eq!(check(&r, "net.firewall")["status"], "FAIL", "{fw}");
    assert!(fw.contains("iptables drops RoCE v2 (UDP 4791)"), "{fw}");
    assert!(fw.contains("policy drop of filter INPUT"), "{fw}");
    assert!(fix(&r, "net.firewall").contains("sudo iptables -I INPUT -i enp194s0np0 -j ACCEPT"));

    // nftables: an inet filter input chain with policy drop.
    let root = without_firewalld("strix-e810");
    let p = root.path();
    write(
        p,
        "captured/nft-ruleset.json",
        &firewall_fixture("nft-ruleset.json"),
    );
    let (r, _) = doctor_at(p, &[]);
    let fw = summary(&r, "net.firewall");
    assert!(fw.contains("nftables drops"), "{fw}");
    assert!(
        fix(&r, "net.firewall")
            .contains("sudo nft insert rule inet filter input iifname \"enp194s0np0\" accept")
    );

    // ufw enabled with only ssh allowed, then with the interface allowed.
    let root = without_firewalld("strix-e810");
    let p = root.path();
    write(p, "etc/ufw/ufw.conf", "ENABLED=yes\nLOGLEVEL=low\n");
    write(
        p,
        "etc/default/ufw",
        "IPV6=yes\nDEFAULT_INPUT_POLICY=\"DROP\"\nDEFAULT_OUTPUT_POLICY=\"ACCEPT\"\n",
    );
    write(
        p,
        "etc/ufw/user.rules",
        &firewall_fixture("ufw-user.rules.ssh"),
    );
    let (r, _) = doctor_at(p, &[]);
    let fw = summary(&r, "net.firewall");
    assert_eq!(check(&r, "net.firewall")["status"], "FAIL", "{fw}");
    assert!(
        fw.contains("ufw drops") && fw.contains("default input policy DROP"),
        "{fw}"
    );
    assert_eq!(fix(&r, "net.firewall"), "sudo ufw allow in on enp194s0np0");
    write(
        p,
        "etc/ufw/user.rules",
        &firewall_fixture("ufw-user.rules.trusted"),
    );
    let (r, _) = doctor_at(p, &[]);
    assert_eq!(
        check(&r, "net.firewall")["status"],
        "PASS",
        "{}",
        summary(&r, "net.firewall")
    );
    assert!(summary(&r, "net.firewall").contains("active: ufw"));

    // Nothing captured and nothing running: unknown, not "fine".
    let root = without_firewalld("strix-e810");
    let (r, _) = doctor_at(root.path(), &[]);
    assert_eq!(check(&r, "net.firewall")["status"], "SKIP");
    assert!(summary(&r, "net.firewall").contains("not captured"));
}

/// broken-e810 whose files already configure what its captured session and
/// `/proc/cmdline` lack (pam_limits memlock, the podman user unit, the grub
/// kernel parameters): doctor passes those checks as waiting for a re-login
/// or a reboot, and says where they are configured.
#[test]
fn configured_but_not_yet_in_effect_passes_as_pending() {
    let dir = host_copy("broken-e810");
    let p = dir.path();
    write(
        p,
        "etc/security/limits.conf",
        "# <domain> <type> <item> <value>\n*  soft  memlock  8192\n*  hard  memlock  8192\n",
    );
    write(
        p,
        "etc/security/limits.d/50-rdma.conf",
        "@halo  -  memlock  unlimited   # the user's own group\n",
    );
    write(
        p,
        "etc/systemd/user/podman.service.d/50-memlock.conf",
        "[Service]\nLimitMEMLOCK=infinity\n",
    );
    write(
        p,
        "etc/default/grub",
        "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"iommu=pt pci=realloc pcie_aspm=off\"\n",
    );
    let root = p.to_str().unwrap();
    let text = run(&["doctor", "--sysroot", root]);
    insta::assert_snapshot!(
        "broken-e810-configured.doctor.txt",
        String::from_utf8(text.stdout)
            .unwrap()
            .replace(root, "COPY")
    );
    let json = run(&["doctor", "--json", "--sysroot", root]);
    insta::assert_snapshot!(
        "broken-e810-configured.doctor.json",
        String::from_utf8(json.stdout)
            .unwrap()
            .replace(root, "COPY")
    );
    // Still failing everywhere: a finite limit in the files is no fix.
    write(
        p,
        "etc/security/limits.d/60-less.conf",
        "halo  hard  memlock  65536\n",
    );
    let (r, _) = doctor_at(p, &[]);
    assert_eq!(check(&r, "memlock.user")["status"], "FAIL");
    assert!(check(&r, "memlock.user").get("pending").is_none());
    // A grub.cfg written before the grub defaults changed: update-grub is
    // still to run, so the next boot does not get the parameters yet.
    write(
        p,
        "boot/grub/grub.cfg",
        "# generated by grub-mkconfig
",
    );
    fs::File::options()
        .write(true)
        .open(p.join("boot/grub/grub.cfg"))
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
        .unwrap();
    let (r, _) = doctor_at(p, &[]);
    let iommu = check(&r, "kernel.iommu");
    assert_eq!(iommu["status"], "WARN", "{iommu:#}");
    assert!(
        summary(&r, "kernel.iommu").contains("until update-grub runs"),
        "{iommu:#}"
    );
    assert_eq!(fix(&r, "kernel.iommu"), "sudo update-grub\nthen reboot");
}

/// Fedora's boot loader entries give the next boot: the newest kernel's
/// entry, or the one grubenv's `saved_entry` names.
#[test]
fn the_default_boot_entry_gives_the_next_boot() {
    let dir = host_copy("broken-e810");
    let p = dir.path();
    let entry = |version: &str, options: &str| {
        format!(
            "title Fedora Linux ({version})\nversion {version}\nlinux /vmlinuz-{version}\noptions {options}\n"
        )
    };
    write(
        p,
        "boot/loader/entries/abc-6.18.9-200.fc43.x86_64.conf",
        &entry("6.18.9-200.fc43.x86_64", "root=UUID=1 ro rhgb quiet"),
    );
    write(
        p,
        "boot/loader/entries/abc-6.18.10-200.fc43.x86_64.conf",
        &entry(
            "6.18.10-200.fc43.x86_64",
            "root=UUID=1 ro rhgb quiet iommu=pt pcie_aspm=off",
        ),
    );
    write(
        p,
        "boot/loader/entries/abc-0-rescue.conf",
        &entry("0-rescue-abc", "root=UUID=1 ro iommu=pt pci=realloc"),
    );
    let (r, _) = doctor_at(p, &[]);
    let iommu = check(&r, "kernel.iommu");
    assert_eq!(iommu["pending"], "reboot", "{iommu:#}");
    assert!(
        summary(&r, "kernel.iommu")
            .contains("/boot/loader/entries/abc-6.18.10-200.fc43.x86_64.conf"),
        "{iommu:#}"
    );
    assert_eq!(check(&r, "kernel.pcie_aspm")["pending"], "reboot");
    assert_eq!(check(&r, "kernel.pci_realloc")["status"], "WARN");
    write(
        p,
        "boot/grub2/grubenv",
        "# GRUB Environment Block\nsaved_entry=abc-6.18.9-200.fc43.x86_64\n",
    );
    let (r, _) = doctor_at(p, &[]);
    assert_eq!(check(&r, "kernel.iommu")["status"], "WARN");
}

/// A snapshot with less in it still says what it can: the `*` memlock
/// lines apply to whoever the unknown user is, and the kernel release comes
/// from /proc/version or the BOOT_IMAGE= of /proc/cmdline, naming where.
#[test]
fn a_partial_snapshot_reads_what_it_has() {
    let (r, code) = doctor("strix-e810-partial", &[]);
    assert_eq!(code, 0, "{r:#}");
    let memlock = check(&r, "memlock.user");
    assert_eq!(memlock["status"], "PASS", "{memlock:#}");
    assert_eq!(memlock["pending"], "re-login", "{memlock:#}");
    assert!(
        summary(&r, "memlock.user").contains("every login")
            && summary(&r, "memlock.user").contains("/etc/security/limits.d/90-memlock.conf"),
        "{memlock:#}"
    );
    let kernel = check(&r, "kernel.version");
    assert_eq!(kernel["status"], "PASS", "{kernel:#}");
    assert!(
        summary(&r, "kernel.version")
            .starts_with("6.18.5-200.fc43.x86_64 (read from /proc/cmdline)"),
        "{kernel:#}"
    );

    let root = host_copy("strix-e810-partial");
    let p = root.path();
    write(
        p,
        "proc/version",
        "Linux version 6.12.48+deb13-amd64 (debian-kernel@lists.debian.org) (x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0, GNU ld (GNU Binutils for Debian) 2.44) #1 SMP PREEMPT_DYNAMIC Debian 6.12.48-1 (2025-09-20)\n",
    );
    let (r, _) = doctor_at(p, &[]);
    assert_eq!(check(&r, "kernel.version")["status"], "FAIL");
    assert!(
        summary(&r, "kernel.version").starts_with("6.12.48+deb13-amd64 (read from /proc/version)"),
        "{}",
        summary(&r, "kernel.version")
    );
    write(p, "proc/version", "");
    write(p, "proc/cmdline", "root=/dev/sda1 ro quiet\n");
    let (r, _) = doctor_at(p, &[]);
    assert_eq!(check(&r, "kernel.version")["status"], "SKIP");
    assert!(summary(&r, "kernel.version").contains("/proc/version"));
    // A user line for someone else does not reach the unknown user; the
    // `*` lines still do.
    write(
        p,
        "etc/security/limits.d/10-bob.conf",
        "bob  hard  memlock  64\n",
    );
    let (r, _) = doctor_at(p, &[]);
    assert_eq!(check(&r, "memlock.user")["pending"], "re-login");
}

#[test]
fn a_usb4_link_is_known_by_its_driver_and_judged_as_usb4() {
    let (r, _) = doctor("strix-usb4", &[]);
    assert_eq!(r["data_plane"]["interface"], "thunderbolt0");
    assert_eq!(r["data_plane"]["usb4"]["xdomain"], "0-1");
    let usb4 = check(&r, "net.usb4");
    assert_eq!(usb4["status"], "PASS", "{usb4:#}");
    assert!(summary(&r, "net.usb4").contains("2 × 20 Gb/s = 40 Gb/s"));
    let device = check(&r, "rdma.device");
    assert_eq!(device["status"], "INFO", "{device:#}");
    assert!(!r.to_string().contains("install an RDMA NIC"));
    assert!(!summary(&r, "net.mtu").contains("RoCE path MTU"));
    assert!(!summary(&r, "net.firewall").contains("RoCE"));

    let (r, _) = doctor("strix-usb4-20g", &[]);
    assert_eq!(check(&r, "net.usb4")["status"], "WARN");
    assert!(summary(&r, "net.usb4").contains("= 20 Gb/s"));
    assert!(fix(&r, "net.usb4").contains("/sys/bus/thunderbolt/devices/0-1/"));

    // The name says nothing: with another driver it is a plain NIC.
    let other = host_copy("strix-usb4");
    let link = other
        .path()
        .join("sys/devices/pci0000:00/0000:00:08.3/0000:c6:00.5/domain0/0-0/0-1/0-1.0/driver");
    fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("../../../../../../../../bus/pci/drivers/igc", &link).unwrap();
    let (r, _) = doctor_at(other.path(), &[]);
    assert_eq!(check(&r, "net.usb4")["status"], "SKIP");
    assert!(
        r["data_plane"].get("usb4").is_none(),
        "{:#}",
        r["data_plane"]
    );
}

#[test]
fn a_usb4_link_down_or_without_an_address_says_what_to_do() {
    let (r, _) = doctor("strix-usb4-down", &[]);
    assert_eq!(check(&r, "net.usb4")["status"], "WARN");
    assert!(fix(&r, "net.usb4").contains("setup --usb4-address"));
    assert!(summary(&r, "net.data_plane").contains("USB4 link thunderbolt0"));
    assert!(!r.to_string().contains("install an RDMA NIC"));

    let down = host_copy("strix-usb4");
    write(
        down.path(),
        "sys/class/net/thunderbolt0/operstate",
        "down\n",
    );
    let (r, code) = doctor_at(down.path(), &[]);
    assert_eq!(code, 1);
    assert_eq!(check(&r, "net.usb4")["status"], "FAIL");
    assert!(fix(&r, "net.usb4").contains("modprobe thunderbolt-net"));
    // A snapshot cannot ping: the jumbo proof is skipped, never guessed.
    let (r, _) = doctor("strix-usb4", &["--peer", "10.0.0.2"]);
    assert_eq!(check(&r, "net.route")["status"], "PASS");
    assert_eq!(check(&r, "net.jumbo")["status"], "SKIP");
}
