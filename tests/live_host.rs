//! `detect` and `doctor` on the machine the tests run on, checked against
//! independent witnesses of the same facts (`ip -json addr`, the shell's
//! `ulimit`, `id`, the filesystem).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{check, run, run_json};
use serde_json::Value;

fn sh(cmd: &str) -> String {
    let out = Command::new("bash")
        .args(["-c", cmd])
        .output()
        .expect("bash");
    assert!(out.status.success(), "{cmd} failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn interfaces_match_ip_json() {
    let (facts, code) = run_json(&["detect", "--json", "--no-versions"]);
    assert_eq!(code, 0);
    let ip: Value = serde_json::from_str(&sh("ip -json addr show")).unwrap();
    let mut want: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for link in ip.as_array().unwrap() {
        let name = link["ifname"].as_str().unwrap().to_string();
        let mut v4: Vec<String> = link["addr_info"]
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .filter(|a| a["family"] == "inet")
            .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
            .collect();
        v4.sort();
        want.insert(name, v4);
    }
    let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for i in facts["network"]["interfaces"].as_array().unwrap() {
        let mut v4: Vec<String> = i["ipv4"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| format!("{}/{}", a["address"].as_str().unwrap(), a["prefix_len"]))
            .collect();
        v4.sort();
        got.insert(i["name"].as_str().unwrap().to_string(), v4);
        let mtu = std::fs::read_to_string(format!(
            "/sys/class/net/{}/mtu",
            i["name"].as_str().unwrap()
        ))
        .unwrap();
        assert_eq!(i["mtu"].as_u64().unwrap().to_string(), mtu.trim());
    }
    assert_eq!(got, want);
    assert!(got.contains_key("lo"));
}

#[test]
fn memlock_and_user_match_the_shell() {
    let (facts, _) = run_json(&["detect", "--json", "--no-versions"]);
    let to_json = |kib: &str| -> Value {
        if kib == "unlimited" {
            Value::from("unlimited")
        } else {
            Value::from(kib.parse::<u64>().unwrap() * 1024)
        }
    };
    let memlock = &facts["limits"]["memlock"];
    assert_eq!(memlock["soft"], to_json(&sh("ulimit -Sl")));
    assert_eq!(memlock["hard"], to_json(&sh("ulimit -Hl")));
    assert_eq!(
        facts["user"]["uid"].as_u64().unwrap().to_string(),
        sh("id -u")
    );
    assert_eq!(facts["user"]["name"].as_str().unwrap(), sh("id -un"));
    for g in facts["user"]["device_groups"].as_array().unwrap() {
        let name = g["name"].as_str().unwrap();
        let line = sh(&format!("getent group {name} || true"));
        match line.split(':').nth(2) {
            Some(gid) => assert_eq!(g["gid"].as_u64().unwrap().to_string(), gid),
            None => assert!(g["gid"].is_null(), "{name} has no gid here"),
        }
    }
}

#[test]
fn gpu_and_rdma_match_the_filesystem() {
    let (facts, _) = run_json(&["detect", "--json", "--no-versions"]);
    assert_eq!(
        facts["gpu"]["kfd_topology"].as_bool().unwrap(),
        Path::new("/sys/class/kfd/kfd/topology").exists()
    );
    assert_eq!(
        facts["gpu"]["kfd"].is_null(),
        !Path::new("/dev/kfd").exists()
    );
    let ib = std::fs::read_dir("/sys/class/infiniband")
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(facts["rdma"]["devices"].as_array().unwrap().len(), ib);
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap();
    assert_eq!(facts["kernel"]["cmdline"].as_str().unwrap(), cmdline.trim());
}

#[test]
fn tools_match_path_and_report_versions() {
    let (facts, _) = run_json(&["detect", "--json"]);
    for tool in facts["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let found = sh(&format!("command -v {name} || true"));
        if found.is_empty() {
            assert!(tool["path"].is_null(), "{name} is not on PATH");
        } else {
            assert_eq!(tool["path"].as_str().unwrap(), found);
            assert!(tool["version"].is_string(), "{name} printed no version");
        }
    }
    // The test script installs these, so the real version probe is exercised.
    let iperf = facts["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "iperf3")
        .unwrap();
    assert!(
        iperf["version"].as_str().unwrap().contains("iperf 3"),
        "{iperf}"
    );
}

#[test]
fn doctor_reports_what_is_really_here() {
    let (report, code) = run_json(&["doctor", "--json"]);
    let fails = report["summary"]["fail"].as_u64().unwrap();
    assert_eq!(code, if fails > 0 { 1 } else { 0 });
    let gpu = check(&report, "gpu.present");
    if !Path::new("/sys/class/kfd").exists() {
        assert_eq!(gpu["status"], "FAIL");
        assert!(
            gpu["summary"]
                .as_str()
                .unwrap()
                .contains("/sys/class/kfd is absent")
        );
        assert!(gpu["fix"].is_string());
        assert_eq!(check(&report, "gpu.kfd_access")["status"], "SKIP");
    }
    if !Path::new("/sys/class/infiniband").exists() {
        let rdma = check(&report, "rdma.device");
        assert_eq!(rdma["status"], "WARN");
        assert!(rdma["summary"].as_str().unwrap().contains("TCP"));
        assert_eq!(check(&report, "rdma.gid")["status"], "SKIP");
    }
    let memlock = check(&report, "memlock.user");
    if sh("ulimit -Hl") == "unlimited" {
        assert_eq!(memlock["status"], "PASS");
    } else {
        assert_ne!(memlock["status"], "PASS");
        assert!(
            memlock["fix"]
                .as_str()
                .unwrap()
                .contains("memlock unlimited")
        );
    }
    for c in report["checks"].as_array().unwrap() {
        assert!(!c["summary"].as_str().unwrap().is_empty());
        if c["status"] == "WARN" || c["status"] == "FAIL" {
            assert!(c["fix"].is_string(), "{c} has no fix");
        }
    }
}

#[test]
fn doctor_text_lists_every_check_and_the_totals() {
    let (report, _) = run_json(&["doctor", "--json"]);
    let out = run(&["doctor"]);
    let text = String::from_utf8(out.stdout).unwrap();
    for c in report["checks"].as_array().unwrap() {
        let line = format!("{}  ", c["status"].as_str().unwrap());
        assert!(
            text.lines()
                .any(|l| l.starts_with(&line) && l.contains(c["id"].as_str().unwrap())),
            "{c} missing from:\n{text}"
        );
    }
    let s = &report["summary"];
    assert!(text.contains(&format!(
        "{} passed, {} warned, {} failed, {} skipped",
        s["pass"], s["warn"], s["fail"], s["skip"]
    )));
    assert!(!text.contains('\x1b'), "no colour when not a terminal");
}

#[test]
fn data_plane_ip_that_is_here_resolves_to_its_interface() {
    let (report, _) = run_json(&["doctor", "--json", "--ip", "127.0.0.1"]);
    assert_eq!(report["data_plane"]["outcome"], "chosen");
    assert_eq!(report["data_plane"]["interface"], "lo");
    assert_eq!(check(&report, "net.data_plane")["status"], "PASS");
    let (report, code) = run_json(&["doctor", "--json", "--ip", "203.0.113.77"]);
    assert_eq!(code, 1);
    let c = check(&report, "net.data_plane");
    assert_eq!(c["status"], "FAIL");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("no interface holds 203.0.113.77")
    );
}
