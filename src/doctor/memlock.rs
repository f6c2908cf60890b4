//! Memlock checks: RDMA pins memory, so the user and the podman service that
//! creates containers must be allowed to lock it (unlimited is the norm).

use super::{Check, has_rdma};
use crate::host::HostFacts;
use crate::host::limits::{Limit, LimitValue};

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
    match facts.limits.memlock {
        None => Check::warn(id, "memlock limit could not be read", USER_FIX),
        Some(limit) => judge(id, facts, limit, "this user", USER_FIX),
    }
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
    judge(
        id,
        facts,
        worst.1,
        &format!("the podman API service (pid {})", worst.0),
        SERVICE_FIX,
    )
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
