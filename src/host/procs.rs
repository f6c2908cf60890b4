//! Processes of interest, found by scanning `/proc/<pid>/comm`.

use schemars::JsonSchema;
use serde::Serialize;

use super::limits::{self, Limit};
use super::reader::Reader;

/// A running process halobox cares about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// `comm`.
    pub comm: String,
    /// `cmdline` split at NUL bytes.
    pub argv: Vec<String>,
    /// Its memlock limit (`/proc/<pid>/limits`, "Max locked memory").
    pub memlock: Option<Limit>,
}

/// The processes whose `comm` is one of `names`.
pub fn find(r: &Reader, names: &[&str]) -> Vec<Process> {
    let mut found = Vec::new();
    for entry in r.dir("/proc").unwrap_or_default() {
        let Ok(pid) = entry.parse::<u32>() else {
            continue;
        };
        let Some(comm) = r.text_quiet(&format!("/proc/{pid}/comm")) else {
            continue;
        };
        let comm = comm.trim().to_string();
        if !names.contains(&comm.as_str()) {
            continue;
        }
        let argv = r
            .text_quiet(&format!("/proc/{pid}/cmdline"))
            .map(|s| split_nul(&s))
            .unwrap_or_default();
        let memlock = limits::read_memlock(r, &format!("/proc/{pid}/limits"));
        found.push(Process {
            pid,
            comm,
            argv,
            memlock,
        });
    }
    found
}

/// True for a podman API service (`podman system service`).
pub fn is_podman_service(p: &Process) -> bool {
    p.comm == "podman"
        && p.argv
            .windows(2)
            .any(|w| w[0] == "system" && w[1] == "service")
}

/// Splits NUL-separated procfs text (`cmdline`, `environ`).
pub fn split_nul(s: &str) -> Vec<String> {
    s.split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}
