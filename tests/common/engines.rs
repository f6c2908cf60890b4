//! Real engines for the container tests: started by scripts/engines/start.sh
//! (scripts/test.sh runs it). A missing engine fails the test with the fix.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// Rootful podman's API socket.
pub const PODMAN: &str = "unix:///run/podman/podman.sock";
/// dockerd's socket.
pub const DOCKER: &str = "unix:///var/run/docker.sock";
/// The plain-HTTP test registry and repository.
pub const REPO: &str = "127.0.0.1:5000/halobox/test";
/// The htpasswd registry's repository.
pub const AUTH_REPO: &str = "127.0.0.1:5001/halobox/test";

/// Panics with the fix when the socket is not there.
pub fn require(socket: &str) {
    let path = socket.trim_start_matches("unix://");
    assert!(
        Path::new(path).exists(),
        "{path} is missing: start the test engines with `bash scripts/engines/start.sh` (scripts/test.sh does)"
    );
}

/// Held for the whole test by tests that tag and untag the same test image
/// at once (tests/image_publish.rs: `podman tag`, `rmi NAME`, and the tags
/// `halobox publish` makes). Podman 4.3 (Debian 12's) writes an image's
/// whole name list back on each tag and untag, so two at once on one image
/// lose one another's names (fixed upstream in containers/common#1700): a
/// tag made by one test vanished before its push ("image not known") while
/// another test untagged the same image.
pub fn image_names() -> std::sync::MutexGuard<'static, ()> {
    static NAMES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    NAMES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a CLI (podman, docker, toolbox) and returns its output.
pub fn cli(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"))
}

/// `podman inspect`/`docker inspect` of a container, or `None`.
pub fn inspect(program: &str, name: &str) -> Option<Value> {
    let out = cli(program, &["container", "inspect", name]);
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).expect("inspect JSON");
    v.as_array().and_then(|a| a.first().cloned())
}

/// Removes a container if it exists.
pub fn cleanup(program: &str, names: &[&str]) {
    for n in names {
        let _ = cli(program, &["rm", "-f", n]);
    }
}

/// The stand-in device nodes scripts/test.sh creates under /dev/infiniband
/// (this machine has no RDMA hardware): device passthrough is checked on them.
pub fn host_infiniband_nodes() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/dev/infiniband")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    assert!(
        !v.is_empty(),
        "/dev/infiniband is empty: scripts/test.sh creates a stand-in uverbs0 node so passthrough is tested"
    );
    v
}
