//! The command line equivalent of a spec, for `--dry-run` and for users who
//! want to see what halobox does.

use super::model::ContainerSpec;
use crate::engine::EngineKind;

/// `podman create …` / `docker create …` that makes the same container.
pub fn create_command(spec: &ContainerSpec, engine: EngineKind) -> Vec<String> {
    let mut a: Vec<String> = vec![
        engine.to_string(),
        "create".into(),
        "--name".into(),
        spec.name.clone(),
    ];
    let mut flag = |f: &str, v: String| {
        a.push(f.to_string());
        a.push(v);
    };
    if let Some(h) = &spec.hostname {
        flag("--hostname", h.clone());
    }
    for (k, v) in &spec.labels {
        flag("--label", format!("{k}={v}"));
    }
    for (k, v) in &spec.annotations {
        flag("--annotation", format!("{k}={v}"));
    }
    for d in &spec.devices {
        flag("--device", format!("{d}:{d}:rwm"));
    }
    for g in &spec.group_add {
        flag("--group-add", g.clone());
    }
    for r in &spec.rlimits {
        flag("--ulimit", format!("{}={}:{}", r.name, r.soft, r.hard));
    }
    if spec.network_host {
        flag("--network", "host".into());
    }
    if spec.ipc_host {
        flag("--ipc", "host".into());
    }
    if spec.pid_host {
        flag("--pid", "host".into());
    }
    if let Some(u) = &spec.userns {
        flag("--userns", u.clone());
    }
    for s in &spec.security_opt {
        flag("--security-opt", s.clone());
    }
    if spec.use_image_hosts {
        flag("--dns", "none".into());
    }
    for m in &spec.mounts {
        flag("--volume", m.volume());
    }
    if spec.devpts {
        flag("--mount", "type=devpts,destination=/dev/pts".into());
    }
    for (k, v) in &spec.env {
        flag("--env", format!("{k}={v}"));
    }
    if let Some(u) = &spec.user {
        flag("--user", u.clone());
    }
    if let Some(ep) = &spec.entrypoint {
        flag("--entrypoint", ep.join(" "));
    }
    if spec.use_image_hosts {
        a.push("--no-hosts".into());
    }
    if spec.privileged {
        a.push("--privileged".into());
    }
    a.push(spec.image.clone());
    a.extend(spec.cmd.iter().cloned());
    a
}
