//! Helpers shared by the integration tests: run the real binary.

#![allow(dead_code)]

pub mod engines;
pub mod netns;
pub mod serve;
pub mod spy;
pub mod standin;
pub mod tmux;

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

/// A finished process's status, stdout and stderr, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The stdout of a process that must have succeeded (else a panic with [`text`]).
pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", text(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The halobox binary, run from the crate root (so fixture paths are relative).
pub fn halobox() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("halobox").expect("halobox binary");
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd.env_remove("HSA_OVERRIDE_GFX_VERSION");
    // Containers get the Hugging Face cache bound in: a test folder, not
    // the user's own.
    cmd.env("HF_HOME", test_hf_home());
    // The folder of halobox that podman/docker containers see: this
    // build's own, not one another checkout's tests keep replacing.
    cmd.env("XDG_DATA_HOME", test_data_home());
    cmd
}

/// `XDG_DATA_HOME` of the tests' halobox (under this build's target folder).
pub fn test_data_home() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xdg-data")
}

/// The Hugging Face cache the tests' containers get.
pub fn test_hf_home() -> PathBuf {
    std::env::temp_dir().join("halobox-test-hf")
}

/// Runs halobox with `args`, returning its output.
pub fn run(args: &[&str]) -> Output {
    halobox().args(args).output().expect("run halobox")
}

/// Runs halobox with `args` and parses stdout as JSON.
pub fn run_json(args: &[&str]) -> (Value, i32) {
    let out = run(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "halobox {args:?} printed no JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().expect("exit code"))
}

/// The check with `id` in a doctor JSON report.
pub fn check<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {report:#}"))
}

/// A fixture host folder, relative to the crate root.
pub fn fixture(name: &str) -> String {
    format!("tests/fixtures/hosts/{name}")
}

/// The absolute path of a fixture host folder.
pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(fixture(name))
}

/// Copies a snapshot tree (symlinks as symlinks) so a test can change it.
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        let ty = entry.file_type().unwrap();
        if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &dest).unwrap();
        } else if ty.is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// An IPv4 address this machine holds (not loopback): `serve` runs on the head.
pub fn local_ipv4() -> String {
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .expect("ip (iproute2)");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .map(str::to_string)
        .expect("serve needs this machine to hold a non-loopback IPv4 address")
}
