//! Command-line tools halobox drives, found on PATH with their versions.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// Tools halobox looks for, with the argument that prints their version.
pub const TOOLS: [(&str, &str); 8] = [
    ("podman", "--version"),
    ("docker", "--version"),
    ("toolbox", "--version"),
    ("distrobox", "--version"),
    ("ssh", "-V"),
    ("ib_write_bw", "--version"),
    ("iperf3", "--version"),
    ("ethtool", "--version"),
];

/// Directories searched inside a snapshot (its PATH is not known).
pub const SNAPSHOT_PATH: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// How long a `--version` call may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(3);

/// One tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Tool {
    /// Command name.
    pub name: String,
    /// Where it was found (host path); `None` when not installed.
    pub path: Option<String>,
    /// First line the tool printed for its version flag, when asked for.
    pub version: Option<String>,
}

/// Finds every tool; with `versions`, runs each found one for its version
/// (live host only, in parallel, each bounded by a timeout).
pub fn read(r: &Reader, versions: bool) -> Vec<Tool> {
    let run = versions && r.root().is_live();
    let found: Vec<(&str, &str, Option<PathBuf>, Option<String>)> = TOOLS
        .iter()
        .map(|&(name, flag)| {
            let path = locate(r, name);
            let shown = path.as_ref().map(|p| r.root().host_path_of(p));
            (name, flag, path, shown)
        })
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = found
            .iter()
            .map(|(name, flag, path, shown)| {
                s.spawn(move || Tool {
                    name: name.to_string(),
                    version: path.as_ref().filter(|_| run).and_then(|p| version(p, flag)),
                    path: shown.clone(),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("version probe thread panicked"))
            .collect()
    })
}

fn locate(r: &Reader, name: &str) -> Option<PathBuf> {
    if r.root().is_live() {
        let found = which::which(name).ok()?;
        let searched = found
            .parent()
            .is_some_and(|d| SNAPSHOT_PATH.iter().any(|s| d == std::path::Path::new(s)));
        if searched {
            r.touch_stat(&found.to_string_lossy());
        } else {
            r.write_executable(&format!("/usr/local/bin/{name}"));
        }
        return Some(found);
    }
    // In a snapshot: an executable regular file, symlinks resolved inside it.
    SNAPSHOT_PATH.iter().find_map(|d| {
        let host_path = format!("{d}/{name}");
        let real = r.root().resolve(&host_path, true).ok()?;
        let m = std::fs::symlink_metadata(real).ok()?;
        (m.is_file() && m.permissions().mode() & 0o111 != 0).then(|| r.root().path(&host_path))
    })
}

fn version(path: &std::path::Path, flag: &str) -> Option<String> {
    let mut child = crate::proc::command(path)
        .arg(flag)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < VERSION_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(2))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}
