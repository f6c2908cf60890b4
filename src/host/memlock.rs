//! Memlock facts: the limit of this process and of the engine services that
//! grant containers theirs (podman API services, Docker daemons).

use schemars::JsonSchema;
use serde::Serialize;

use super::limits::{Limit, LimitValue, read_process_limits};
use super::procs::{self, Process};
use super::reader::Reader;

/// Memlock facts.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct LimitsFacts {
    /// Memlock of the invoking process (live: getrlimit; snapshot: `/proc/self/limits`).
    pub memlock: Option<Limit>,
    /// Running podman API services (`podman system service`) with their memlock.
    pub podman_services: Vec<Process>,
    /// Running Docker daemons with their memlock.
    pub docker_daemons: Vec<Process>,
}

/// Reads memlock limits; `processes` are the podman processes already found.
pub fn read(r: &Reader, processes: &[Process]) -> LimitsFacts {
    let memlock = if r.root().is_live() {
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK)
            .ok()
            .map(|(soft, hard)| Limit {
                soft: from_rlim(soft),
                hard: from_rlim(hard),
            })
    } else {
        read_process_limits(r, "/proc/self/limits").memlock
    };
    LimitsFacts {
        memlock,
        podman_services: processes
            .iter()
            .filter(|p| procs::is_podman_service(p))
            .cloned()
            .collect(),
        docker_daemons: processes
            .iter()
            .filter(|p| procs::is_dockerd(p))
            .cloned()
            .collect(),
    }
}

fn from_rlim(v: u64) -> LimitValue {
    if v == nix::sys::resource::RLIM_INFINITY {
        LimitValue::Unlimited
    } else {
        LimitValue::Finite(v)
    }
}
