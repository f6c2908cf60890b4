//! A spec as an engine request: Docker's `POST /containers/create` body, or
//! podman's own `POST /libpod/containers/create` body (podman's compat API
//! drops annotations and cannot express `--no-hosts`/`--dns none` or a
//! devpts mount, so podman containers are created through libpod).

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, DeviceMapping, HostConfig, ResourcesUlimits};
use serde_json::{Value, json};

use super::model::ContainerSpec;

/// The Docker `POST /containers/create` body for `spec`.
pub fn compat_body(spec: &ContainerSpec) -> ContainerCreateBody {
    let host_config = HostConfig {
        devices: Some(
            spec.devices
                .iter()
                .map(|d| DeviceMapping {
                    path_on_host: Some(d.clone()),
                    path_in_container: Some(d.clone()),
                    cgroup_permissions: Some("rwm".into()),
                })
                .collect(),
        ),
        group_add: (!spec.group_add.is_empty()).then(|| spec.group_add.clone()),
        ulimits: Some(
            spec.rlimits
                .iter()
                .map(|r| ResourcesUlimits {
                    name: Some(r.name.clone()),
                    soft: Some(r.soft),
                    hard: Some(r.hard),
                })
                .collect(),
        ),
        network_mode: spec.network_host.then(|| "host".to_string()),
        ipc_mode: spec.ipc_host.then(|| "host".to_string()),
        pid_mode: spec.pid_host.then(|| "host".to_string()),
        userns_mode: spec.userns.clone(),
        security_opt: Some(spec.security_opt.clone()),
        binds: (!spec.mounts.is_empty()).then(|| spec.mounts.iter().map(|m| m.volume()).collect()),
        privileged: Some(spec.privileged),
        annotations: (!spec.annotations.is_empty()).then(|| {
            spec.annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<HashMap<_, _>>()
        }),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        hostname: spec.hostname.clone(),
        user: spec.user.clone(),
        env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        labels: Some(
            spec.labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        entrypoint: spec.entrypoint.clone(),
        cmd: Some(spec.cmd.clone()),
        host_config: Some(host_config),
        ..Default::default()
    }
}

fn ns(host: bool) -> Value {
    if host {
        json!({"nsmode": "host"})
    } else {
        json!({"nsmode": "private"})
    }
}

/// Podman's `POST /libpod/containers/create` body (a SpecGenerator) for `spec`.
pub fn libpod_body(spec: &ContainerSpec) -> Value {
    let mut mounts: Vec<Value> = spec
        .mounts
        .iter()
        .map(|m| {
            let mut options = vec!["rbind".to_string()];
            options.extend(m.options.iter().cloned());
            json!({"destination": m.destination, "type": "bind", "source": m.source, "options": options})
        })
        .collect();
    if spec.devpts {
        mounts.push(
            json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []}),
        );
    }
    let selinux: Vec<String> = spec
        .security_opt
        .iter()
        .filter(|o| *o == "label=disable")
        .map(|_| "disable".to_string())
        .collect();
    let mut body = json!({
        "name": spec.name,
        "image": spec.image,
        "labels": spec.labels,
        "annotations": spec.annotations,
        "devices": spec.devices.iter().map(|d| json!({"path": format!("{d}:{d}:rwm")})).collect::<Vec<_>>(),
        "groups": spec.group_add,
        "r_limits": spec.rlimits.iter().map(|r| json!({"type": r.name, "soft": r.soft, "hard": r.hard})).collect::<Vec<_>>(),
        "privileged": spec.privileged,
        "netns": ns(spec.network_host),
        "ipcns": ns(spec.ipc_host),
        "pidns": ns(spec.pid_host),
        "selinux_opts": selinux,
        "mounts": mounts,
        "use_image_hosts": spec.use_image_hosts,
        "use_image_resolve_conf": spec.use_image_hosts,
        "env": spec.env.iter().cloned().collect::<HashMap<_, _>>(),
        "command": spec.entrypoint.iter().flatten().chain(spec.cmd.iter()).collect::<Vec<_>>(),
    });
    let obj = body.as_object_mut().expect("object");
    if spec.entrypoint.is_some() {
        obj.insert("entrypoint".into(), json!([]));
    }
    if let Some(userns) = &spec.userns {
        obj.insert("userns".into(), json!({"nsmode": userns}));
    }
    if let Some(h) = &spec.hostname {
        obj.insert("hostname".into(), json!(h));
    }
    if let Some(u) = &spec.user {
        obj.insert("user".into(), json!(u));
    }
    body
}
