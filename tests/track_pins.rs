//! scripts/track-pins.py (what .github/workflows/track.yml runs) against a
//! real local package index: pypiserver from PyPI serving empty wheel files
//! named like TheRock's stable index, and a local git repository with vLLM-
//! like release tags.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where scripts/test.sh installs pypiserver (a venv from PyPI).
fn pypiserver() -> PathBuf {
    let p = PathBuf::from(
        std::env::var("HALOBOX_PYPISERVER")
            .unwrap_or_else(|_| "/opt/halobox-pypiserver/bin/pypi-server".into()),
    );
    assert!(
        p.is_file(),
        "{} is missing: run scripts/test.sh (it installs pypiserver into /opt/halobox-pypiserver)",
        p.display()
    );
    p
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(dir: &Path) -> (Server, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(pypiserver())
        .args(["run", "-i", "127.0.0.1", "-p", &port.to_string()])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "pypiserver did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (server, format!("http://127.0.0.1:{port}/simple/"))
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A repository with v0.27.1, v0.28.0 (annotated) and v0.29.0rc1; returns
/// it and the commit v0.28.0 names.
fn vllm_repo(dir: &Path) -> (PathBuf, String) {
    let repo = dir.join("vllm");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "a"]);
    git(&repo, &["tag", "v0.27.1"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "b"]);
    git(&repo, &["tag", "-a", "-m", "release", "v0.28.0"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "c"]);
    git(&repo, &["tag", "v0.29.0rc1"]);
    let commit = git(&repo, &["rev-parse", "v0.28.0^{commit}"]);
    (repo, commit)
}

fn wheels(dir: &Path, names: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    for n in names {
        std::fs::write(dir.join(n), b"").unwrap();
    }
}

/// A complete set for ROCm `rocm` and torch `torch` (torchvision 0.(minor+15).0).
fn set(rocm: &str, torch: &str) -> Vec<String> {
    let minor: u32 = torch.split('.').nth(1).unwrap().parse().unwrap();
    vec![
        format!("torch-{torch}+rocm{rocm}-cp312-cp312-linux_x86_64.whl"),
        format!("amd_torch_device_gfx1151-{torch}+rocm{rocm}-py3-none-linux_x86_64.whl"),
        format!(
            "torchvision-0.{}.0+rocm{rocm}-cp312-cp312-linux_x86_64.whl",
            minor + 15
        ),
        format!("torchaudio-{torch}+rocm{rocm}-cp312-cp312-linux_x86_64.whl"),
        format!("rocm_sdk_device_gfx1151-{rocm}-py3-none-linux_x86_64.whl"),
    ]
}

fn track(index: &str, repo: &Path, extra: &[&str]) -> (Output, Value) {
    let o = Command::new("python3")
        .arg("scripts/track-pins.py")
        .args(["--index", index, "--vllm-repo"])
        .arg(repo)
        .args(extra)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o, v)
}

#[test]
fn the_newest_complete_set_wins_and_incomplete_ones_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let pkgs = tmp.path().join("packages");
    let mut names: Vec<String> = Vec::new();
    names.extend(set("7.13.0", "2.10.0"));
    names.extend(set("7.14.0", "2.11.0"));
    // torch 2.12 for 7.14 lacks its torchvision (0.27).
    names.extend(
        set("7.14.0", "2.12.0")
            .into_iter()
            .filter(|n| !n.starts_with("torchvision")),
    );
    // 7.16: everything but the gfx1151 torch device package.
    names.extend(
        set("7.16.0", "2.13.0")
            .into_iter()
            .filter(|n| !n.starts_with("amd_torch_device")),
    );
    // 7.17: the ROCm device wheels are out, no torch yet.
    names.push("rocm_sdk_device_gfx1151-7.17.0-py3-none-linux_x86_64.whl".into());
    // A CPU torch on the same index is not a ROCm set.
    names.push("torch-2.14.0-cp312-cp312-linux_x86_64.whl".into());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    wheels(&pkgs, &refs);
    let (_server, index) = serve(&pkgs);
    let (repo, commit) = vllm_repo(tmp.path());

    // --update on copies of the shipped definitions.
    let defs: Vec<PathBuf> = ["rccl-gfx1151", "vllm-therock-gfx1151"]
        .iter()
        .map(|n| {
            let p = tmp.path().join(format!("{n}.toml"));
            std::fs::copy(format!("images/{n}.toml"), &p).unwrap();
            p
        })
        .collect();
    let mut extra = vec!["--update".to_string()];
    extra.extend(defs.iter().map(|p| p.display().to_string()));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let (o, v) = track(&index, &repo, &extra);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        v["set"],
        serde_json::json!({"rocm": "7.14.0", "torch": "2.11.0", "torchvision": "0.26.0", "torchaudio": "2.11.0"}),
        "{v:#}"
    );
    let incomplete = &v["incomplete"];
    assert_eq!(
        incomplete[0],
        serde_json::json!({"rocm": "7.17.0", "torch": null, "missing": ["torch"]})
    );
    assert_eq!(
        incomplete[1],
        serde_json::json!({"rocm": "7.16.0", "torch": "2.13.0", "missing": ["amd-torch-device-gfx1151"]})
    );
    assert_eq!(
        incomplete[2],
        serde_json::json!({"rocm": "7.14.0", "torch": "2.12.0", "missing": ["torchvision 0.27"]})
    );
    assert_eq!(v["vllm"]["tag"], "v0.28.0", "rc tags are not releases");
    assert_eq!(
        v["vllm"]["commit"],
        commit.as_str(),
        "annotated tags are peeled"
    );
    // The shipped pins are 7.14.0 / 2.11.0 already: only the vLLM pin moves,
    // in both definitions (they carry the same pins).
    assert_eq!(v["changed"].as_array().unwrap().len(), 2, "{v:#}");
    let rccl = std::fs::read_to_string(&defs[0]).unwrap();
    assert!(rccl.contains("tag = \"v0.28.0\""), "{rccl}");
    let runtime = std::fs::read_to_string(&defs[1]).unwrap();
    assert!(
        runtime.contains(&format!("commit = \"{commit}\"\ntag = \"v0.28.0\"")),
        "{runtime}"
    );
    assert!(runtime.contains("ROCM_VERSION = \"7.14.0\""));

    // A newer complete set moves every version, the RCCL tag and the tarball URL.
    let mut more = names.clone();
    more.extend(set("7.16.0", "2.13.0"));
    let refs: Vec<&str> = more.iter().map(String::as_str).collect();
    wheels(&pkgs, &refs);
    let (o, v) = track(&index, &repo, &extra);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["set"]["rocm"], "7.16.0", "{v:#}");
    assert_eq!(v["set"]["torchvision"], "0.28.0");
    let runtime = std::fs::read_to_string(&defs[1]).unwrap();
    for line in [
        "ROCM_VERSION = \"7.16.0\"",
        "TORCH_VERSION = \"2.13.0\"",
        "TORCHVISION_VERSION = \"0.28.0\"",
        "TORCHAUDIO_VERSION = \"2.13.0\"",
        "RCCL_TAG = \"therock-7.16\"",
        "therock-dist-linux-gfx1151-7.16.0.tar.gz\"",
    ] {
        assert!(runtime.contains(line), "{line} missing:\n{runtime}");
    }
    assert_eq!(
        std::fs::read_to_string(&defs[0])
            .unwrap()
            .lines()
            .filter(|l| l.contains("7.16"))
            .count(),
        runtime.lines().filter(|l| l.contains("7.16")).count(),
        "both definitions move together"
    );
}

#[test]
fn no_complete_set_is_exit_1_and_a_dead_index_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let pkgs = tmp.path().join("packages");
    wheels(
        &pkgs,
        &["torch-2.11.0+rocm7.14.0-cp312-cp312-linux_x86_64.whl"],
    );
    let (server, index) = serve(&pkgs);
    let (repo, _) = vllm_repo(tmp.path());
    let (o, v) = track(&index, &repo, &[]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(v["set"].is_null());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no complete gfx1151 set"));
    drop(server);
    let (o, _) = track(&index, &repo, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("track-pins: http://127.0.0.1:"));
    let (o, _) = track(&index, &repo, &["--gfx", "navi"]);
    assert_eq!(o.status.code(), Some(2));
}
