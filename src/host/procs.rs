//! Processes of interest, found by scanning `/proc/<pid>/comm`.

use schemars::JsonSchema;
use serde::Serialize;

use super::limits::{self, ProcessLimits};
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
    /// Real uid (`/proc/<pid>/status`).
    pub uid: Option<u32>,
    /// Whether CAP_SYS_RESOURCE is in its effective set (it may then raise
    /// any limit, memlock included).
    pub cap_sys_resource: Option<bool>,
    /// Its limits (`/proc/<pid>/limits`).
    pub limits: ProcessLimits,
    /// Its mount namespace (`/proc/<pid>/ns/mnt`, e.g. `mnt:[4026531832]`),
    /// when the link can be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mnt_ns: Option<String>,
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
        let limits = limits::read_process_limits(r, &format!("/proc/{pid}/limits"));
        let status = r
            .text_quiet(&format!("/proc/{pid}/status"))
            .unwrap_or_default();
        found.push(Process {
            pid,
            comm,
            argv,
            uid: crate::host::users::parse_status_ids(&status).0,
            cap_sys_resource: parse_cap_eff(&status).map(|caps| caps & CAP_SYS_RESOURCE != 0),
            limits,
            mnt_ns: r.link_name(&format!("/proc/{pid}/ns/mnt")),
        });
    }
    found
}

/// The mount namespace of halobox itself (`/proc/self/ns/mnt`).
pub fn own_mnt_ns(r: &Reader) -> Option<String> {
    r.link_name("/proc/self/ns/mnt")
}

/// Whether `p` sees the same socket paths as halobox: it runs in `own`
/// mount namespace, or either namespace is unknown. A service in another
/// one (a test node, a container) may listen on a socket of the same path
/// that is not the one halobox connects to.
pub fn shares_mount_ns(own: Option<&str>, p: &Process) -> bool {
    match (own, p.mnt_ns.as_deref()) {
        (Some(own), Some(theirs)) => own == theirs,
        _ => true,
    }
}

/// Bit of CAP_SYS_RESOURCE in a capability mask.
const CAP_SYS_RESOURCE: u64 = 1 << 24;

/// The `CapEff:` mask of a `/proc/<pid>/status` text.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    u64::from_str_radix(hex, 16).ok()
}

/// True for a Docker daemon.
pub fn is_dockerd(p: &Process) -> bool {
    p.comm == "dockerd"
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
