//! What a container spec is: the data [`super::spec`] plans and every
//! form (API request, command line, backend shape) is made from.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::EngineKind;
use crate::host::limits::ProcessLimits;

/// The engine facts the spec depends on.
#[derive(Debug, Clone)]
pub struct EngineTraits {
    /// Podman or Docker.
    pub kind: EngineKind,
    /// Default OCI runtime (`crun`, `runc`).
    pub oci_runtime: Option<String>,
    /// Rootless engine.
    pub rootless: bool,
    /// Limits of the engine process that starts containers, when known.
    pub creator_limits: Option<ProcessLimits>,
}

/// One resource limit (soft, hard; -1 is unlimited).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rlimit {
    /// `memlock`, `nofile`, `nproc`.
    pub name: String,
    /// Soft limit.
    pub soft: i64,
    /// Hard limit.
    pub hard: i64,
}

/// A bind mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mount {
    /// Host path.
    pub source: String,
    /// Path in the container.
    pub destination: String,
    /// `ro`, `rslave`, …
    pub options: Vec<String>,
}

impl Mount {
    /// A bind mount of `source` at `destination` with `options`.
    pub fn new(source: &str, destination: &str, options: &[&str]) -> Self {
        Self {
            source: source.into(),
            destination: destination.into(),
            options: options.iter().map(|o| o.to_string()).collect(),
        }
    }

    /// `SRC:DST[:OPTS]`, as `--volume` and the compat API's `Binds` take it.
    pub fn volume(&self) -> String {
        match self.options.as_slice() {
            [] => format!("{}:{}", self.source, self.destination),
            o => format!("{}:{}:{}", self.source, self.destination, o.join(",")),
        }
    }
}

/// Everything needed to create one container.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContainerSpec {
    /// Container name.
    pub name: String,
    /// Image reference.
    pub image: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// OCI annotations.
    pub annotations: BTreeMap<String, String>,
    /// Device nodes passed through (same path inside, `rwm`).
    pub devices: Vec<String>,
    /// Supplementary groups (numeric host GIDs).
    pub group_add: Vec<String>,
    /// Resource limits; memlock first.
    pub rlimits: Vec<Rlimit>,
    /// Run privileged (toolbox does).
    pub privileged: bool,
    /// Share the host's network namespace.
    pub network_host: bool,
    /// Share the host's IPC namespace (and so its `/dev/shm`, which NCCL
    /// and vLLM use between processes).
    pub ipc_host: bool,
    /// Share the host's PID namespace.
    pub pid_host: bool,
    /// User namespace mode (`keep-id`, `host`).
    pub userns: Option<String>,
    /// Security options.
    pub security_opt: Vec<String>,
    /// Bind mounts.
    pub mounts: Vec<Mount>,
    /// Mount a fresh devpts on `/dev/pts` (toolbox does).
    pub devpts: bool,
    /// Keep the image's `/etc/hosts` and `/etc/resolv.conf` (`--no-hosts --dns none`).
    pub use_image_hosts: bool,
    /// Host directories the executor creates before creating the container.
    pub ensure_dirs: Vec<String>,
    /// Environment.
    pub env: Vec<(String, String)>,
    /// Hostname.
    pub hostname: Option<String>,
    /// User to run as.
    pub user: Option<String>,
    /// Entrypoint.
    pub entrypoint: Option<Vec<String>>,
    /// Command.
    pub cmd: Vec<String>,
    /// Things the user should know about this spec (what is missing, what differs).
    pub notes: Vec<String>,
}

impl ContainerSpec {
    /// The memlock limit asked for.
    pub fn memlock(&self) -> i64 {
        self.rlimits
            .iter()
            .find(|r| r.name == "memlock")
            .map_or(0, |r| r.soft)
    }
}
