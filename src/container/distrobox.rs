//! The distrobox backend: `distrobox create` makes the container (its init
//! sets up the user, home and shell), with halobox's devices, groups and
//! labels passed as `--additional-flags`.
//!
//! distrobox always adds `--ulimit host`, and podman then drops any other
//! `--ulimit`: the container gets the limits of the process that runs
//! distrobox, so memlock is checked against this user's own limit instead.
//! distrobox refuses to run as root; with a rootful engine halobox passes
//! `--root` (distrobox then uses sudo).

use super::model::ContainerSpec;
use crate::shell;

/// `distrobox create …` for `spec` (its name and image as they are).
pub fn create_command(spec: &ContainerSpec, rootful: bool) -> Vec<String> {
    let mut flags: Vec<String> = Vec::new();
    for d in &spec.devices {
        flags.push(format!("--device {d}:{d}:rwm"));
    }
    for g in &spec.group_add {
        flags.push(format!("--group-add {g}"));
    }
    for (k, v) in &spec.annotations {
        flags.push(format!("--annotation {k}={v}"));
    }
    for (k, v) in &spec.labels {
        flags.push(shell::line(&["--label".to_string(), format!("{k}={v}")]));
    }
    for s in &spec.security_opt {
        if s.starts_with("seccomp") {
            flags.push(format!("--security-opt {s}"));
        }
    }
    let mut argv = vec![
        "distrobox".to_string(),
        "create".into(),
        "--yes".into(),
        "--no-entry".into(),
        "--name".into(),
        spec.name.clone(),
        "--image".into(),
        spec.image.clone(),
    ];
    if rootful {
        argv.push("--root".into());
    }
    argv.push("--additional-flags".into());
    argv.push(flags.join(" "));
    argv
}
