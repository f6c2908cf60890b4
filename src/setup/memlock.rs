//! Memlock: the user's limit (a limits.d file) and the podman service's
//! (`LimitMEMLOCK=infinity` drop-ins for the system unit and the user unit).

use super::{Action, Cmd, Input, Step, When, write_if_changed};
use crate::doctor::Status;

/// The limits.d file (the same path doctor's fix names).
pub const LIMITS_FILE: &str = "/etc/security/limits.d/90-halobox-memlock.conf";
/// The drop-in of the rootful podman service.
pub const SYSTEM_DROPIN: &str = "/etc/systemd/system/podman.service.d/memlock.conf";

const LIMITS: &str = "# written by halobox setup: RDMA pins the memory it registers\n\
                      * soft memlock unlimited\n\
                      * hard memlock unlimited\n";
const DROPIN: &str = "[Service]\nLimitMEMLOCK=infinity\n";

/// The drop-in of `home`'s rootless podman service.
pub fn user_dropin(home: &str) -> String {
    format!(
        "{}/.config/systemd/user/podman.service.d/memlock.conf",
        home.trim_end_matches('/')
    )
}

pub(super) fn steps(input: &Input) -> Vec<Step> {
    let mut steps = Vec::new();
    let user_failing = input.failing("memlock.user").is_some();
    if user_failing
        && let Some(w) = write_if_changed(
            LIMITS_FILE,
            input.setup.file(LIMITS_FILE),
            LIMITS.to_string(),
        )
    {
        steps.push(Step {
            family: "memlock".into(),
            checks: vec!["memlock.user".into()],
            title: "memlock unlimited for every login (limits.d)".into(),
            needs_root: true,
            when: When::Relogin,
            actions: vec![w],
        });
    }
    let (rootful, rootless) = services_to_fix(input, user_failing);
    if rootful
        && let Some(w) = write_if_changed(
            SYSTEM_DROPIN,
            input.setup.file(SYSTEM_DROPIN),
            DROPIN.to_string(),
        )
    {
        steps.push(Step {
            family: "podman".into(),
            checks: vec!["memlock.podman_service".into()],
            title: "LimitMEMLOCK=infinity for the rootful podman.service".into(),
            needs_root: true,
            when: When::Now,
            actions: vec![
                w,
                input.command(Cmd::reload(&["systemctl", "daemon-reload"])),
                input.command(Cmd::reload(&["systemctl", "try-restart", "podman.service"])),
            ],
        });
    }
    if let Some(user) = input.setup.user.as_ref().filter(|u| u.uid != 0 && rootless) {
        let path = user_dropin(&user.home);
        if let Some(mut w) = write_if_changed(&path, input.setup.file(&path), DROPIN.to_string()) {
            let as_other = input.setup.root && input.setup.sysroot.is_none();
            if let Action::Write { owner, .. } = &mut w {
                *owner = as_other.then_some((user.uid, user.gid));
            }
            let mut actions = vec![w];
            for argv in [
                &["systemctl", "--user", "daemon-reload"][..],
                &["systemctl", "--user", "try-restart", "podman.service"],
            ] {
                actions.push(if as_other {
                    Action::NotRun {
                        cmd: Cmd::reload(argv),
                        why: format!("run it as {} (a user service)", user.name),
                    }
                } else {
                    input.command(Cmd::reload(argv))
                });
            }
            steps.push(Step {
                family: "podman".into(),
                checks: vec!["memlock.podman_service".into()],
                title: format!(
                    "LimitMEMLOCK=infinity for {}'s rootless podman.service",
                    user.name
                ),
                needs_root: false,
                when: When::Now,
                actions,
            });
        }
    }
    steps
}

/// Which podman units need the drop-in: those of the services doctor found
/// short of memlock; with none running, both when the user's own limit is
/// short too (a socket-activated service starts with systemd's default).
fn services_to_fix(input: &Input, user_failing: bool) -> (bool, bool) {
    let check = input
        .report
        .checks
        .iter()
        .find(|c| c.id == "memlock.podman_service");
    let installed = input.facts.tool("podman").is_some();
    match check.map(|c| c.status) {
        Some(Status::Warn | Status::Fail) => {
            let short: Vec<Option<u32>> = input
                .facts
                .limits
                .podman_services
                .iter()
                .filter(|p| {
                    p.limits
                        .memlock
                        .is_some_and(|m| m.hard != crate::host::limits::LimitValue::Unlimited)
                })
                .map(|p| p.uid)
                .collect();
            (
                short.contains(&Some(0)),
                short.iter().any(|u| *u != Some(0)),
            )
        }
        Some(Status::Skip) if installed && user_failing => (true, true),
        _ => (false, false),
    }
}
