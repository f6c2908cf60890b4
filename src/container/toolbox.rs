//! The toolbx shape: what `toolbox create` gives a container (podman-toolbox
//! 0.0.99's `podman create` arguments, docs/dev-engines.md), plus the
//! devices and an explicit memlock limit instead of `--ulimit host`.
//!
//! `toolbox create` ignores every podman flag passed after `--`, so halobox
//! creates a container of the same shape itself, through podman's own API
//! (the Docker-compatible one cannot say `--no-hosts`/`--dns none`, and
//! toolbox's init-container fails without them). `toolbox list`, `enter` and
//! `run` accept it because it carries toolbx's label, entry point and binds.

use super::model::{ContainerSpec, EngineTraits, Mount};
use crate::host::HostFacts;

/// The label toolbx uses to find its containers.
pub const TOOLBOX_LABEL: &str = "com.github.containers.toolbox";

/// Where the toolbox binary is mounted inside the container.
const TOOLBOX_IN_CONTAINER: &str = "/usr/bin/toolbox";

/// The host directory bound into the container for toolbx's runtime files:
/// `/run/toolbox` for root, else the user's runtime directory.
fn run_dir(uid: u32, runtime_dir: Option<&str>) -> String {
    if uid == 0 {
        "/run/toolbox".to_string()
    } else {
        runtime_dir
            .map(str::to_string)
            .unwrap_or_else(|| format!("/run/user/{uid}"))
    }
}

/// Where toolbx's init-container writes `container-initialized-<pid>` (the
/// entry point's pid) once the container is ready: `toolbox run`/`enter`
/// wait for that file (toolbx's runtime directory: `/run/toolbox` for root,
/// `$XDG_RUNTIME_DIR/toolbox` for users).
pub fn init_stamp_dir(uid: u32, runtime_dir: Option<&str>) -> String {
    if uid == 0 {
        run_dir(uid, runtime_dir)
    } else {
        format!("{}/toolbox", run_dir(uid, runtime_dir))
    }
}

/// Turns a plain spec into a toolbx-compatible one.
pub fn apply(
    facts: &HostFacts,
    engine: &EngineTraits,
    runtime_dir: Option<&str>,
    spec: &mut ContainerSpec,
) {
    let user = &facts.user;
    let name = user.name.clone().unwrap_or_else(|| "root".into());
    let uid = user.uid.unwrap_or(0);
    let gid = user.gid.unwrap_or(0);
    let home = user.home.clone().unwrap_or_else(|| "/root".into());
    let shell = user.shell.clone().unwrap_or_else(|| "/bin/bash".into());
    let toolbox = facts
        .tool("toolbox")
        .and_then(|t| t.path.clone())
        .unwrap_or_else(|| TOOLBOX_IN_CONTAINER.into());
    let run_dir = run_dir(uid, runtime_dir);

    spec.labels.insert(TOOLBOX_LABEL.into(), "true".into());
    spec.privileged = true;
    spec.pid_host = true;
    spec.userns = Some(if engine.rootless { "keep-id" } else { "host" }.into());
    spec.hostname = Some("toolbox".into());
    spec.user = Some("root:root".into());
    spec.devpts = true;
    spec.use_image_hosts = true;
    spec.security_opt = vec!["label=disable".into()];
    spec.mounts = vec![
        Mount::new("/", "/run/host", &["rslave"]),
        Mount::new("/dev", "/dev", &["rslave"]),
    ];
    let optional = |p: &str| facts.toolbox_paths.iter().any(|x| x == p);
    if optional("/run/dbus/system_bus_socket") {
        spec.mounts.push(Mount::new(
            "/run/dbus/system_bus_socket",
            "/run/dbus/system_bus_socket",
            &[],
        ));
    }
    spec.mounts.push(Mount::new(&home, &home, &["rslave"]));
    spec.mounts
        .push(Mount::new(&toolbox, TOOLBOX_IN_CONTAINER, &["ro"]));
    spec.mounts.push(Mount::new(&run_dir, &run_dir, &[]));
    spec.ensure_dirs.push(run_dir.clone());
    for p in ["/media", "/mnt", "/run/media"] {
        if optional(p) {
            spec.mounts.push(Mount::new(p, p, &["rslave"]));
        }
    }
    if optional("/etc/profile.d/toolbox.sh") {
        spec.mounts.push(Mount::new(
            "/etc/profile.d/toolbox.sh",
            "/etc/profile.d/toolbox.sh",
            &["ro"],
        ));
    }
    spec.env = vec![("TOOLBOX_PATH".into(), toolbox)];
    if uid != 0 {
        spec.env.push(("XDG_RUNTIME_DIR".into(), run_dir));
    }
    spec.entrypoint = Some(vec!["toolbox".into()]);
    spec.cmd = vec![
        "--log-level".into(),
        "debug".into(),
        "init-container".into(),
        "--gid".into(),
        gid.to_string(),
        "--home".into(),
        home,
        "--shell".into(),
        shell,
        "--uid".into(),
        uid.to_string(),
        "--user".into(),
        name,
        "--monitor-host".into(),
    ];
    spec.notes.push(
        "toolbox shape: as `toolbox create` makes it, but with the GPU/RDMA devices and an explicit \
         --ulimit memlock (plus nofile/nproc as the engine has them) instead of --ulimit host"
            .into(),
    );
}
