//! Memlock facts: the limit of this process and of the engine services that
//! grant containers theirs (podman API services, Docker daemons), and what
//! the files configure for the user's next login and for podman.service.

use schemars::JsonSchema;
use serde::Serialize;

use super::limits::{Limit, LimitValue, read_process_limits};
use super::pam_limits::{self, ConfiguredMemlock, LoginUser};
use super::procs::{self, Process};
use super::reader::Reader;
use super::unit_limits::{self, Scope, UnitLimit};
use super::users::{self, UserFacts};

/// The unit of podman's API service.
pub const PODMAN_UNIT: &str = "podman.service";

/// Memlock facts.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct LimitsFacts {
    /// Memlock of the invoking process (live: getrlimit; snapshot: `/proc/self/limits`).
    pub memlock: Option<Limit>,
    /// Running podman API services (`podman system service`) with their
    /// memlock, in halobox's mount namespace (a service in another one
    /// listens on another host's socket, even when the path is the same).
    pub podman_services: Vec<Process>,
    /// Running Docker daemons with their memlock, in halobox's mount namespace.
    pub docker_daemons: Vec<Process>,
    /// Memlock the user's next login gets from `/etc/security/limits.conf`
    /// and `limits.d` (pam_limits), or any login's (`*` lines) when the
    /// user is not known; `null` without those files, or when the user is
    /// exempt from limits there.
    pub configured: Option<ConfiguredMemlock>,
    /// `LimitMEMLOCK=` of podman.service in its unit files: the system unit,
    /// and the user's unit for a user other than root.
    pub podman_units: Vec<UnitLimit>,
}

impl LimitsFacts {
    /// The configured podman.service of `scope`.
    pub fn podman_unit(&self, scope: Scope) -> Option<&UnitLimit> {
        self.podman_units.iter().find(|u| u.scope == scope)
    }
}

/// Reads memlock limits; `processes` are the podman processes already found,
/// `user` the invoking user.
pub fn read(r: &Reader, processes: &[Process], user: &UserFacts) -> LimitsFacts {
    let memlock = if r.root().is_live() {
        r.touch_read("/proc/self/limits");
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK)
            .ok()
            .map(|(soft, hard)| Limit {
                soft: from_rlim(soft),
                hard: from_rlim(hard),
            })
    } else {
        read_process_limits(r, "/proc/self/limits").memlock
    };
    let own = procs::own_mnt_ns(r);
    let ours = |p: &&Process| procs::shares_mount_ns(own.as_deref(), p);
    LimitsFacts {
        memlock,
        podman_services: processes
            .iter()
            .filter(|p| procs::is_podman_service(p))
            .filter(ours)
            .cloned()
            .collect(),
        docker_daemons: processes
            .iter()
            .filter(|p| procs::is_dockerd(p))
            .filter(ours)
            .cloned()
            .collect(),
        configured: pam_limits::read(r, login_user(r, user).as_ref()),
        podman_units: podman_units(r, user),
    }
}

/// The user as pam_limits matches it, when the name and ids are known.
fn login_user(r: &Reader, user: &UserFacts) -> Option<LoginUser> {
    let (name, uid, gid) = (user.name.clone()?, user.uid?, user.gid?);
    let mut gids = user.groups.clone();
    gids.push(gid);
    let groups = users::group_file(r)
        .into_iter()
        .filter(|g| gids.contains(&g.gid) || g.members.contains(&name))
        .map(|g| g.name)
        .collect();
    Some(LoginUser {
        name,
        uid,
        gid,
        groups,
        gids,
    })
}

fn podman_units(r: &Reader, user: &UserFacts) -> Vec<UnitLimit> {
    let mut units = vec![unit_limits::read(r, PODMAN_UNIT, Scope::System, None)];
    if let Some(home) = user.home.as_deref().filter(|_| !user.is_root()) {
        units.push(unit_limits::read(r, PODMAN_UNIT, Scope::User, Some(home)));
    }
    units
}

fn from_rlim(v: u64) -> LimitValue {
    if v == nix::sys::resource::RLIM_INFINITY {
        LimitValue::Unlimited
    } else {
        LimitValue::Finite(v)
    }
}
