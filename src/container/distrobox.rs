//! The distrobox backend: `distrobox create` makes the container (its init
//! sets up the user, home and shell), with halobox's devices, groups and
//! labels passed as `--additional-flags`.
//!
//! distrobox always adds `--ulimit host`, and podman then drops any other
//! `--ulimit`: the container gets the limits of the process that runs
//! distrobox, so memlock is checked against this user's own limit instead.
//! distrobox refuses to run as root; with a rootful engine halobox passes
//! `--root` (distrobox then uses sudo).
//!
//! Commands run in a distrobox container through the engine API as the user
//! and in the directory `distrobox enter` would use: distrobox-enter rebuilds
//! its command line as one string and `eval`s it on the host, so quotes,
//! tabs and `$` in an argument would be re-read by a shell.

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

/// What distrobox-init prints once the container is set up.
pub const SETUP_DONE: &str = "container_setup_done";

/// The user distrobox made in the container: the `--name` (else `--user`)
/// that `distrobox create` passed to its init, found in the container's
/// command. `distrobox enter` runs commands as that user.
pub fn user(cmd: &[String]) -> Option<String> {
    let value = |flag: &str| {
        cmd.iter()
            .position(|a| a == flag)
            .and_then(|i| cmd.get(i + 1))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    value("--name").or_else(|| value("--user"))
}

/// The container's `HOME` (distrobox create sets it to the user's home).
pub fn home(env: &[String]) -> Option<String> {
    env.iter()
        .find_map(|e| e.strip_prefix("HOME="))
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

/// Where `distrobox enter` starts a command: the current directory when it
/// is inside the container's home (which distrobox binds at the same path),
/// else that directory through `/run/host` (the host's root in the container).
pub fn workdir(home: Option<&str>, cwd: &std::path::Path) -> String {
    match home {
        Some(h) if cwd.starts_with(h) => cwd.display().to_string(),
        _ if cwd == std::path::Path::new("/") => "/run/host".to_string(),
        _ => format!("/run/host{}", cwd.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn user_home_and_workdir_as_distrobox_enter_has_them() {
        let cmd = words(&[
            "-v",
            "--name",
            "halotest",
            "--user",
            "1500",
            "--group",
            "1500",
            "--home",
            "/home/halotest",
            "--init",
            "0",
            "--",
        ]);
        assert_eq!(user(&cmd).as_deref(), Some("halotest"));
        assert_eq!(user(&words(&["--user", "1500"])).as_deref(), Some("1500"));
        assert_eq!(user(&words(&["sleep", "1"])), None);
        let env = words(&["PATH=/usr/bin", "HOME=/home/halotest"]);
        assert_eq!(home(&env).as_deref(), Some("/home/halotest"));
        let h = Some("/home/halotest");
        assert_eq!(
            workdir(h, std::path::Path::new("/home/halotest/src")),
            "/home/halotest/src"
        );
        assert_eq!(
            workdir(h, std::path::Path::new("/srv/x")),
            "/run/host/srv/x"
        );
        assert_eq!(workdir(h, std::path::Path::new("/")), "/run/host");
        assert_eq!(
            workdir(h, std::path::Path::new("/home/halotest2")),
            "/run/host/home/halotest2"
        );
    }
}
