//! `detect` and `doctor` on the snapshot hosts in tests/fixtures/hosts/:
//! output snapshots (insta) plus the decisions each host exists to test.

mod common;

use std::fs;

use common::{check, copy_tree, fixture, fixture_path, run, run_json};
use serde_json::Value;

const HOSTS: [&str; 5] = [
    "strix-e810",
    "strix-e810-iwarp",
    "strix-cx5",
    "no-gpu-no-rdma",
    "broken-e810",
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
    let (r, code) = doctor("strix-e810", &[]);
    assert_eq!(code, 0);
    for (id, status) in statuses(&r) {
        let want = if id == "rdma.pcie" { "WARN" } else { "PASS" };
        assert_eq!(status, want, "{id}");
    }
    assert!(
        check(&r, "rdma.pcie")["summary"]
            .as_str()
            .unwrap()
            .contains("63.0 Gb/s")
    );
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

#[test]
fn iwarp_mode_fails_with_the_irdma_fix() {
    let (r, code) = doctor("strix-e810-iwarp", &[]);
    assert_eq!(code, 1);
    let mode = check(&r, "rdma.mode");
    assert_eq!(mode["status"], "FAIL");
    assert!(mode["fix"].as_str().unwrap().contains("roce_ena=1"));
    assert_eq!(check(&r, "rdma.gid")["status"], "SKIP");
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
            "WARN",
            "--zone=trusted --add-interface=enp194s0np0",
        ),
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
    assert!(
        !check(&r, "rdma.pcie")["summary"]
            .as_str()
            .unwrap()
            .contains("port's")
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
    let meminfo = dir.path().join("proc/meminfo");
    let text = fs::read_to_string(&meminfo).unwrap();
    let text = text
        .lines()
        .map(|l| {
            if l.starts_with("MemTotal:") {
                "MemTotal:       65536000 kB"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    fs::write(&meminfo, text).unwrap();
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
