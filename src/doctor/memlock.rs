//! Memlock checks: RDMA pins memory, so the user and the podman service that
//! creates containers must be allowed to lock it (unlimited is the norm).

use super::{Check, Pending, has_rdma};
use crate::host::HostFacts;
use crate::host::limits::{Limit, LimitValue};
use crate::host::procs::Process;
use crate::host::unit_limits::Scope;

/// Below this a finite memlock limit fails RDMA memory registration outright
/// (perftest: "Couldn't allocate MR"; RCCL registers buffers of hundreds of MiB).
pub const RDMA_MIN_BYTES: u64 = 1 << 30;

const USER_FIX: &str = "\
printf '* soft memlock unlimited\\n* hard memlock unlimited\\n' | sudo tee /etc/security/limits.d/90-halobox-memlock.conf
# then log out and back in; `ulimit -l` must print 'unlimited'";

const SERVICE_FIX: &str = "\
sudo mkdir -p /etc/systemd/system/podman.service.d
printf '[Service]\\nLimitMEMLOCK=infinity\\n' | sudo tee /etc/systemd/system/podman.service.d/memlock.conf
sudo systemctl daemon-reload && sudo systemctl restart podman.service
# rootless service: the same file under ~/.config/systemd/user/podman.service.d/, then
# systemctl --user daemon-reload && systemctl --user restart podman.service";

pub(super) fn checks(facts: &HostFacts) -> Vec<Check> {
    vec![user(facts), service(facts)]
}

fn user(facts: &HostFacts) -> Check {
    let id = "memlock.user";
    let now = match facts.limits.memlock {
        None => Check::warn(id, "memlock limit could not be read", USER_FIX),
        Some(limit) => judge(id, facts, limit, "this user", USER_FIX),
    };
    if !now.is_fault() {
        return now;
    }
    let Some((configured, files)) = configured_unlimited(facts) else {
        return now;
    };
    let current = facts
        .limits
        .memlock
        .map_or("this session's limit is not known".to_string(), |l| {
            format!("this session has soft {}, hard {}", l.soft, l.hard)
        });
    let who = match (&facts.limits.configured, facts.user.name.as_deref()) {
        (Some(c), _) if c.every_login => "every login (`*`; which user is not known)",
        (_, Some(name)) => name,
        (_, None) => "this user",
    };
    Check::pending(
        id,
        Pending::Relogin,
        format!(
            "memlock {configured} for {who} configured in {files}: takes effect at the next login ({current})"
        ),
    )
}

/// What the files give the user's next login (`soft X, hard unlimited`)
/// and which files, when the hard limit is unlimited there.
fn configured_unlimited(facts: &HostFacts) -> Option<(String, String)> {
    let c = facts.limits.configured.as_ref()?;
    let hard = c
        .hard
        .as_ref()
        .filter(|h| h.value == LimitValue::Unlimited)?;
    let mut files = vec![hard.file.as_str()];
    let desc = match &c.soft {
        Some(soft) => {
            if soft.file != hard.file {
                files.push(&soft.file);
            }
            format!("soft {}, hard {}", soft.value, hard.value)
        }
        None => format!("hard {}", hard.value),
    };
    Some((desc, files.join(", ")))
}

fn service(facts: &HostFacts) -> Check {
    let id = "memlock.podman_service";
    let services = &facts.limits.podman_services;
    let Some(worst) = services
        .iter()
        .filter_map(|p| p.limits.memlock.map(|m| (p.pid, m)))
        .min_by_key(|(_, m)| m.hard)
    else {
        return match services.first() {
            Some(p) => Check::warn(
                id,
                format!(
                    "podman API service (pid {}) runs but its limits could not be read",
                    p.pid
                ),
                "run halobox doctor as the same user as the service (or as root)",
            ),
            None => Check::skip(
                id,
                "no podman API service is running now (socket-activated services start on first use); \
                 `systemctl show podman.service -p LimitMEMLOCK` shows what it will get",
            ),
        };
    };
    let now = judge(
        id,
        facts,
        worst.1,
        &format!("the podman API service (pid {})", worst.0),
        SERVICE_FIX,
    );
    if !now.is_fault() {
        return now;
    }
    let short: Vec<&Process> = services
        .iter()
        .filter(|p| {
            p.limits
                .memlock
                .is_some_and(|m| m.hard != LimitValue::Unlimited)
        })
        .collect();
    let fixed: Option<Vec<(String, Pending)>> =
        short.iter().map(|p| configured_service(facts, p)).collect();
    let Some(fixed) = fixed.filter(|f| !f.is_empty()) else {
        return now;
    };
    let pending = fixed
        .iter()
        .map(|f| f.1)
        .max_by_key(|p| match p {
            Pending::Restart => 0,
            Pending::Relogin => 1,
            Pending::Reboot => 2,
        })
        .unwrap_or(Pending::Restart);
    let files: Vec<&str> = fixed.iter().map(|f| f.0.as_str()).collect();
    Check::pending(
        id,
        pending,
        format!(
            "LimitMEMLOCK=infinity configured in {}: the podman API service gets it when it restarts{} (pid {} has soft {}, hard {} now)",
            files.join(", "),
            if pending == Pending::Relogin {
                " in a new login of its user"
            } else {
                ""
            },
            worst.0,
            worst.1.soft,
            worst.1.hard
        ),
    )
}

/// The unit file that gives the service `p` memlock unlimited once it
/// restarts, and what that waits for: a root service its restart; a user's
/// service also its user manager's limit, which comes from the login. A
/// service of unknown owner is taken for the invoking user's, as setup does.
fn configured_service(facts: &HostFacts, p: &Process) -> Option<(String, Pending)> {
    let scope = match p.uid {
        Some(0) => Scope::System,
        None => Scope::User,
        uid if uid == facts.user.uid => Scope::User,
        Some(_) => return None,
    };
    let unit = facts.limits.podman_unit(scope)?;
    let file = unit
        .memlock
        .filter(|m| m.hard == LimitValue::Unlimited)
        .and(unit.file.clone())?;
    if scope == Scope::System {
        return Some((file, Pending::Restart));
    }
    let user_hard = facts.limits.memlock.map(|l| l.hard);
    if user_hard == Some(LimitValue::Unlimited) {
        Some((file, Pending::Restart))
    } else {
        configured_unlimited(facts).map(|_| (file, Pending::Relogin))
    }
}

fn judge(id: &str, facts: &HostFacts, limit: Limit, who: &str, fix: &str) -> Check {
    let desc = format!("{who}: memlock soft {}, hard {}", limit.soft, limit.hard);
    match limit.hard {
        LimitValue::Unlimited if limit.soft == LimitValue::Unlimited => Check::pass(id, desc),
        LimitValue::Unlimited => Check::pass(
            id,
            format!("{desc}: the hard limit allows containers to ask for unlimited"),
        ),
        LimitValue::Finite(hard) => {
            let why = format!(
                "{desc}: containers cannot get memlock unlimited (RDMA pins every buffer it registers)"
            );
            if !has_rdma(facts) {
                Check::warn(
                    id,
                    format!("{why}; no RDMA device here, so only matters once one is"),
                    fix,
                )
            } else if hard < RDMA_MIN_BYTES {
                Check::fail(id, why, fix)
            } else {
                Check::warn(id, why, fix)
            }
        }
    }
}
