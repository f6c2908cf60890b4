//! What the host's own facts say about a local engine: the process behind
//! its socket (limits, uid), whether it is rootless, and podman's runtime.
//! Cheaper and more exact than asking the engine (`/info` runs helpers).

use super::discover::unix_path;
use super::{EngineInfo, EngineKind};
use crate::host::HostFacts;
use crate::host::containers_conf::PODMAN_DEFAULT_RUNTIME;
use crate::host::procs::Process;

/// The local process behind the engine's socket: the podman service whose
/// command line names the socket (or the only one running), or dockerd.
pub fn engine_process<'a>(facts: &'a HostFacts, engine: &EngineInfo) -> Option<&'a Process> {
    let socket = unix_path(&engine.address)?.to_str()?.to_string();
    match engine.kind {
        EngineKind::Podman => {
            let services = &facts.limits.podman_services;
            services
                .iter()
                .find(|p| p.argv.iter().any(|a| a.ends_with(&socket)))
                .or_else(|| (services.len() == 1).then(|| &services[0]))
        }
        EngineKind::Docker => facts.limits.docker_daemons.first(),
    }
}

/// `engine` with rootless and runtime taken from the host when it is local.
pub fn refine(engine: &EngineInfo, facts: &HostFacts) -> EngineInfo {
    let mut info = engine.clone();
    if unix_path(&engine.address).is_none() {
        return info;
    }
    if let Some(uid) = engine_process(facts, engine).and_then(|p| p.uid) {
        info.rootless = uid != 0;
    }
    if engine.kind == EngineKind::Podman {
        info.oci_runtime = Some(
            facts
                .podman_runtime
                .clone()
                .unwrap_or_else(|| PODMAN_DEFAULT_RUNTIME.to_string()),
        );
    }
    info
}
