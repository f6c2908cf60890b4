//! What the container user gets from the system: memlock, device nodes and
//! the groups that open them, the GPU in the KFD topology, RDMA ports, the
//! rdma-core their driver needs, and variables that break ROCm.

use super::probe::{DeviceSeen, Probe};
use super::{Context, GFX1151};
use crate::doctor::{Check, RDMA_MIN_BYTES};
use crate::host::gpu::gfx_target_name;
use crate::host::limits::LimitValue;

pub(super) fn checks(p: &Probe, ctx: &Context) -> Vec<Check> {
    let mut out = Vec::new();
    if !p.complete {
        out.push(incomplete(p, ctx));
    }
    out.extend([
        memlock(p, ctx),
        devices(p, ctx),
        groups(p, ctx),
        gpu(p, ctx),
        rdma_ports(p, ctx),
        rdma_core(p, ctx),
        env(p),
    ]);
    out
}

fn incomplete(p: &Probe, ctx: &Context) -> Check {
    let last = p
        .python_exits
        .last()
        .map(|e| format!(" (python's {} part exited {}: {})", e.part, e.code, e.tail))
        .unwrap_or_default();
    Check::fail(
        "probe",
        format!(
            "the probe stopped before its end{last}: the checks below miss what it did not print"
        ),
        format!(
            "run `halobox check {0}` again and read each check; `halobox enter {0}` to look by hand",
            ctx.name
        ),
    )
}

fn memlock_fix(ctx: &Context) -> String {
    if ctx.backend == Some("distrobox") {
        return format!(
            "distrobox passes --ulimit host: raise your own limit (`halobox doctor` shows memlock.user's fix), log in again, then\n{}",
            ctx.recreate()
        );
    }
    format!(
        "{} --memlock unlimited\n# the engine's service must be allowed to grant it: `halobox doctor` checks memlock.podman_service and prints its drop-in",
        ctx.recreate()
    )
}

fn memlock(p: &Probe, ctx: &Context) -> Check {
    let id = "memlock";
    let Some(limit) = p.memlock else {
        return Check::warn(
            id,
            "`ulimit -l` printed nothing in the container",
            format!(
                "`halobox enter {} -- sh -c 'ulimit -l'` must print unlimited",
                ctx.name
            ),
        );
    };
    let LimitValue::Finite(bytes) = limit else {
        return Check::pass(id, "ulimit -l: unlimited");
    };
    let asked = match ctx.memlock_asked {
        Some(-1) => Some(LimitValue::Unlimited),
        Some(n) => u64::try_from(n).ok().map(LimitValue::Finite),
        None => None,
    };
    let got = format!("ulimit -l: {limit}");
    if let Some(want) = asked.filter(|w| *w > limit) {
        return Check::fail(
            id,
            format!(
                "{got}, but the container was created with memlock {want}: something between the engine and this shell lowered it"
            ),
            memlock_fix(ctx),
        );
    }
    if !p.rdma_ports.is_empty() {
        let why = format!(
            "{got}: RDMA pins every buffer it registers and RCCL registers hundreds of MiB"
        );
        return if bytes < RDMA_MIN_BYTES {
            Check::fail(id, why, memlock_fix(ctx))
        } else {
            Check::warn(id, why, memlock_fix(ctx))
        };
    }
    let made = asked
        .map(|a| format!(", as the container was created ({a})"))
        .unwrap_or_default();
    Check::pass(
        id,
        format!(
            "{got}{made}; no RDMA port in the container, so the limit RDMA needs (unlimited) does not apply yet"
        ),
    )
}

/// The errno text of a shell's "cannot open" message.
fn errno(message: &str) -> &str {
    message.rsplit(": ").next().unwrap_or(message).trim()
}

/// The device nodes of the host the container should have.
fn host_nodes(ctx: &Context) -> Option<Vec<String>> {
    let h = ctx.host?;
    let mut v: Vec<String> = h.gpu.kfd.iter().map(|d| d.path.clone()).collect();
    v.extend(
        h.gpu
            .dri
            .iter()
            .filter(|d| d.path.starts_with("/dev/dri/renderD"))
            .map(|d| d.path.clone()),
    );
    v.extend(h.rdma.dev_nodes.iter().map(|d| d.path.clone()));
    v.extend(h.net_plugins.usb4_devices.iter().cloned());
    Some(v)
}

fn devices(p: &Probe, ctx: &Context) -> Check {
    let id = "devices";
    let seen: Vec<&str> = p.devices.iter().map(|d| d.path.as_str()).collect();
    let missing: Vec<String> = match host_nodes(ctx) {
        Some(want) => want
            .into_iter()
            .filter(|w| !seen.contains(&w.as_str()))
            .collect(),
        None => {
            let mut m = Vec::new();
            if p.device("/dev/kfd").is_none() {
                m.push("/dev/kfd".to_string());
            }
            if p.devices_under("/dev/dri/renderD").next().is_none() {
                m.push("/dev/dri/renderD*".to_string());
            }
            m
        }
    };
    if !missing.is_empty() {
        let whose = if ctx.host.is_some() {
            "the host has them"
        } else {
            "a GPU node needs them"
        };
        return Check::fail(
            id,
            format!("missing in the container: {} ({whose})", missing.join(", ")),
            format!(
                "{}   # passes /dev/kfd, /dev/dri/renderD* and /dev/infiniband/* of the host",
                ctx.recreate()
            ),
        );
    }
    if seen.is_empty() {
        return Check::skip(
            id,
            "no /dev/kfd, /dev/dri/renderD* or /dev/infiniband/* in the container, and the host has none either",
        );
    }
    let listed: Vec<String> = p
        .devices
        .iter()
        .map(|d| match d.open_error.as_deref().filter(|_| !d.denied()) {
            Some(e) => format!(
                "{} (opening it says {}: no driver behind the node)",
                d.path,
                errno(e)
            ),
            None => d.path.clone(),
        })
        .collect();
    let host = if ctx.host.is_some() {
        ", every one the host has"
    } else {
        ""
    };
    Check::pass(id, format!("present{host}: {}", listed.join(", ")))
}

fn who(p: &Probe) -> String {
    let groups: Vec<String> = p.groups.iter().map(u32::to_string).collect();
    format!(
        "{} (uid {}, groups {})",
        p.user.as_deref().unwrap_or("the container user"),
        p.uid.map(|u| u.to_string()).unwrap_or_else(|| "?".into()),
        if groups.is_empty() {
            "?".into()
        } else {
            groups.join(" ")
        }
    )
}

fn why_denied(p: &Probe, d: &DeviceSeen) -> String {
    let mode = d.mode.map(|m| format!("mode {m:04o}")).unwrap_or_default();
    let group = match d.gid {
        Some(g) if !p.groups.contains(&g) => format!(", group {g} is not among the user's"),
        Some(g) => format!(", group {g}"),
        None => String::new(),
    };
    let open = d
        .open_error
        .as_deref()
        .map(|e| format!(": {}", errno(e)))
        .unwrap_or_default();
    format!("{} ({mode}{group}){open}", d.path)
}

fn groups(p: &Probe, ctx: &Context) -> Check {
    let id = "groups";
    if p.devices.is_empty() {
        return Check::skip(id, "no device node in the container to open");
    }
    let denied: Vec<&DeviceSeen> = p.devices.iter().filter(|d| d.denied()).collect();
    if denied.is_empty() {
        return Check::pass(
            id,
            format!("{} can open every device node read-write", who(p)),
        );
    }
    let list: Vec<String> = denied.iter().map(|d| why_denied(p, d)).collect();
    let fix = match ctx.backend {
        Some("toolbox") | Some("distrobox") => format!(
            "sudo usermod -aG render,video $USER   # on the host; log out and in again\n{}",
            ctx.recreate()
        ),
        _ => format!(
            "{}   # adds the host's render, video and rdma GIDs to the container\n# or give the nodes mode 0666 with a udev rule, as Fedora does",
            ctx.recreate()
        ),
    };
    Check::fail(
        id,
        format!("{} cannot open {}", who(p), list.join("; ")),
        fix,
    )
}

fn gpu(p: &Probe, ctx: &Context) -> Check {
    let id = "gpu";
    let doctor = "run `halobox doctor` on the host: gpu.present says what is missing";
    if !p.kfd {
        return match ctx.host {
            Some(h) if h.gpu.kfd_topology => Check::fail(
                id,
                "no KFD topology in the container (/sys/class/kfd), though the host has one",
                format!(
                    "{}   # the container must see the host's /sys",
                    ctx.recreate()
                ),
            ),
            Some(_) => Check::fail(
                id,
                "no KFD topology in the container (/sys/class/kfd), and the host has none either: amdgpu is not loaded or there is no AMD GPU",
                doctor,
            ),
            None => Check::fail(
                id,
                "no KFD topology in the container (/sys/class/kfd): no AMD GPU is visible",
                doctor,
            ),
        };
    }
    let agents: Vec<_> = p
        .kfd_nodes
        .iter()
        .filter(|n| n.gfx_target_version.is_some_and(|v| v != 0))
        .collect();
    let Some(first) = agents.first() else {
        return Check::fail(
            id,
            "the KFD topology lists no GPU agent (only CPU nodes)",
            doctor,
        );
    };
    let Some(agent) = agents
        .iter()
        .find(|n| n.gfx_target_version == Some(GFX1151))
    else {
        let v = first.gfx_target_version.unwrap_or_default();
        return Check::fail(
            id,
            format!(
                "the GPU agent is {} (gfx_target_version {v}), not gfx1151: the image and its RCCL are built for Strix Halo",
                gfx_target_name(v).unwrap_or_else(|| "unknown".into())
            ),
            "run it on a Ryzen AI Max (Strix Halo) node",
        );
    };
    let render = agent.render_minor.map(|m| format!("/dev/dri/renderD{m}"));
    let mut missing = Vec::new();
    if p.device("/dev/kfd").is_none() {
        missing.push("/dev/kfd".to_string());
    }
    match &render {
        Some(r) if p.device(r).is_none() => missing.push(r.clone()),
        _ => {}
    }
    let at = format!(
        "gfx1151 agent at KFD node {}{}",
        agent.id,
        render
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    );
    if missing.is_empty() {
        Check::pass(id, at)
    } else {
        Check::fail(
            id,
            format!(
                "{at}, but {} is not in the container",
                missing.join(" and ")
            ),
            ctx.recreate(),
        )
    }
}

fn rdma_ports(p: &Probe, ctx: &Context) -> Check {
    let id = "rdma.ports";
    let host_devices: Vec<&str> = ctx
        .host
        .map(|h| h.rdma.devices.iter().map(|d| d.name.as_str()).collect())
        .unwrap_or_default();
    if p.rdma_ports.is_empty() {
        if !host_devices.is_empty() {
            return Check::fail(
                id,
                format!(
                    "the host has RDMA devices ({}) but /sys/class/infiniband in the container lists no port",
                    host_devices.join(", ")
                ),
                format!(
                    "{}   # host network and /sys, as halobox makes it",
                    ctx.recreate()
                ),
            );
        }
        let whose = if ctx.host.is_some() {
            ", nor on the host"
        } else {
            ""
        };
        return Check::skip(
            id,
            format!(
                "no RDMA port in the container (/sys/class/infiniband {}){whose}: the cluster would run over TCP",
                if p.rdma_class {
                    "is empty"
                } else {
                    "is absent"
                }
            ),
        );
    }
    let ports: Vec<String> = p
        .rdma_ports
        .iter()
        .map(|x| {
            format!(
                "{} port {} {} ({})",
                x.device, x.port, x.state, x.link_layer
            )
        })
        .collect();
    let active = p.rdma_ports.iter().any(|x| x.active());
    let verbs = p.devices_under("/dev/infiniband/uverbs").next().is_some();
    if !verbs {
        Check::fail(
            id,
            format!(
                "{}, but no /dev/infiniband/uverbs* in the container: verbs cannot open the device",
                ports.join(", ")
            ),
            ctx.recreate(),
        )
    } else if active {
        Check::pass(id, ports.join(", "))
    } else {
        Check::warn(
            id,
            format!("no ACTIVE port: {}", ports.join(", ")),
            "bring the link up (cable, switch port, `ip link set NETDEV up`); `halobox doctor` checks rdma.port on the host",
        )
    }
}

/// The oldest rdma-core known to work with the E810's `irdma` under RCCL:
/// distributions' 50 fails with "Unknown completion"; the public gfx1151
/// image builds 62 for that (FIELD-NOTES §1). The same number as
/// `RDMA_CORE_MIN` of images/*.toml, which the image build enforces
/// (tests/image_definitions.rs ties the two). No later linux-rdma/rdma-core
/// release changes the E810's provider: v62.1, v63.x and v64.0 touch
/// `providers/irdma` only for the IPU E2000 ("GEN 3"); images/README.md
/// has the evidence.
pub const IRDMA_RDMA_CORE_MIN: (u32, u32) = (62, 0);

/// `57.0`, `62.0-1.fc43`, `50.0-2ubuntu1` → (major, minor).
fn major_minor(v: &str) -> Option<(u32, u32)> {
    let v = v.split_once(':').map_or(v, |(_, r)| r);
    let mut parts = v.split(['.', '-', '+', '~']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    Some((major, minor))
}

fn rdma_core(p: &Probe, ctx: &Context) -> Check {
    let id = "rdma.core";
    let (min_major, min_minor) = IRDMA_RDMA_CORE_MIN;
    let min = format!("{min_major}.{min_minor}");
    let e810: Vec<&str> = p
        .rdma_drivers
        .iter()
        .filter(|(_, d)| d == "irdma")
        .map(|(dev, _)| dev.as_str())
        .collect();
    let fix = format!(
        "use an image with rdma-core {min} or newer (halobox's image prints its version when it is built): {}",
        ctx.recreate()
    );
    let Some(v) = &p.rdma_core else {
        return if !e810.is_empty() {
            Check::fail(
                id,
                format!(
                    "no rdma-core (libibverbs) package in the container, and {} is an E810 (irdma): RCCL cannot use RoCE",
                    e810.join(", ")
                ),
                fix,
            )
        } else if p.rdma_ports.is_empty() {
            Check::skip(
                id,
                "no rdma-core (libibverbs) package in the container, and no RDMA device either",
            )
        } else {
            Check::warn(
                id,
                "no rdma-core (libibverbs) package in the container: RCCL falls back to TCP",
                fix,
            )
        };
    };
    if e810.is_empty() {
        return Check::pass(id, format!("rdma-core {v}"));
    }
    match major_minor(v) {
        Some(have) if have >= IRDMA_RDMA_CORE_MIN => Check::pass(
            id,
            format!(
                "rdma-core {v}, at least the {min} that {} (E810, irdma) needs",
                e810.join(", ")
            ),
        ),
        _ => Check::fail(
            id,
            format!(
                "rdma-core {v} with {} (E810, irdma): RCCL fails there with \"Unknown completion\" below {min}",
                e810.join(", ")
            ),
            fix,
        ),
    }
}

fn env(p: &Probe) -> Check {
    let id = "env";
    let Some((_, v)) = p.env.iter().find(|(k, _)| k == "HSA_OVERRIDE_GFX_VERSION") else {
        return Check::pass(id, "HSA_OVERRIDE_GFX_VERSION is not set");
    };
    if v == "11.5.1" {
        return Check::pass(
            id,
            "HSA_OVERRIDE_GFX_VERSION=11.5.1 names gfx1151 itself: harmless",
        );
    }
    Check::warn(
        id,
        format!(
            "HSA_OVERRIDE_GFX_VERSION={v} inside: ROCm treats gfx1151 as another GPU (it crashed ROCm in the field)"
        ),
        "unset it where it comes from: your shell profile on the host (toolbox and distrobox pass the host's environment) or the image's ENV",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::find;
    use crate::check::probe::parse;
    use crate::doctor::Status;
    use std::collections::HashMap;

    fn ctx<'a>(labels: &'a HashMap<String, String>) -> Context<'a> {
        Context {
            name: "vllm",
            backend: Some("podman"),
            memlock_asked: Some(8 << 20),
            labels,
            ray_pin: Some("2.51.1"),
            host: None,
        }
    }

    fn status(checks: &[Check], id: &str) -> Status {
        find(checks, id).status
    }

    #[test]
    fn busybox_without_gpu() {
        let labels = HashMap::new();
        let p = parse(include_str!(
            "../../tests/fixtures/probe/podman-busybox.txt"
        ));
        let c = checks(&p, &ctx(&labels));
        assert_eq!(status(&c, "memlock"), Status::Pass);
        assert_eq!(status(&c, "groups"), Status::Pass);
        // No host facts: a GPU node needs /dev/kfd.
        assert_eq!(status(&c, "devices"), Status::Fail);
        assert_eq!(status(&c, "gpu"), Status::Fail);
        assert_eq!(status(&c, "rdma.ports"), Status::Skip);
        assert_eq!(status(&c, "env"), Status::Pass);
        assert!(c.iter().all(|c| c.id != "probe"));
    }

    fn host(name: &str) -> crate::host::HostFacts {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hosts")
            .join(name);
        crate::host::gather(
            crate::host::HostRoot::sysroot(&dir).unwrap(),
            Default::default(),
        )
    }

    #[test]
    fn what_the_host_has_and_the_container_lacks_is_named() {
        let labels = HashMap::new();
        let facts = host("strix-e810");
        let mut x = ctx(&labels);
        x.host = Some(&facts);
        let p = parse(include_str!(
            "../../tests/fixtures/probe/docker-busybox.txt"
        ));
        let c = checks(&p, &x);
        let get = |id: &str| find(&c, id);
        assert_eq!(get("devices").status, Status::Fail);
        assert!(
            get("devices")
                .summary
                .contains("missing in the container: /dev/kfd, /dev/dri/renderD128, /dev/infiniband/rdma_cm (the host has them)"),
            "{:?}",
            get("devices")
        );
        assert!(get("gpu").summary.contains("though the host has one"));
        assert_eq!(get("rdma.ports").status, Status::Fail);
        assert_eq!(get("memlock").status, Status::Pass);
        // The same container on a host without GPU or RDMA: what is there is all there can be.
        let bare = host("no-gpu-no-rdma");
        x.host = Some(&bare);
        let p = parse(include_str!(
            "../../tests/fixtures/probe/toolbox-busybox.txt"
        ));
        let c = checks(&p, &x);
        let get = |id: &str| find(&c, id);
        assert_eq!(get("gpu").status, Status::Fail);
        assert!(get("gpu").summary.contains("the host has none either"));
        assert_eq!(get("rdma.ports").status, Status::Skip);
    }

    #[test]
    fn rdma_core_below_what_irdma_needs_fails_only_on_an_e810() {
        let labels = HashMap::new();
        let x = ctx(&labels);
        let mut p = parse(include_str!("../../tests/fixtures/probe/strix-halo.txt"));
        assert_eq!(rdma_core(&p, &x).status, Status::Pass);
        p.rdma_core = Some("57.0-3.fc43".into());
        let c = rdma_core(&p, &x);
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.summary
                .contains("rdma-core 57.0-3.fc43 with rocep194s0f0 (E810, irdma)")
                && c.summary.contains("below 62.0"),
            "{c:?}"
        );
        assert!(
            c.fix
                .as_deref()
                .unwrap()
                .contains("halobox refresh --name vllm")
        );
        // A ConnectX (mlx5) port: any rdma-core is fine.
        p.rdma_drivers = vec![("mlx5_0".into(), "mlx5_core".into())];
        assert_eq!(rdma_core(&p, &x).status, Status::Pass);
        // None installed: FAIL on an E810, SKIP without RDMA, WARN with another NIC.
        p.rdma_core = None;
        assert_eq!(rdma_core(&p, &x).status, Status::Warn);
        p.rdma_drivers = vec![("rocep1s0".into(), "irdma".into())];
        assert_eq!(rdma_core(&p, &x).status, Status::Fail);
        p.rdma_drivers.clear();
        p.rdma_ports.clear();
        assert_eq!(rdma_core(&p, &x).status, Status::Skip);
        assert_eq!(major_minor("1:62.1-1"), Some((62, 1)));
        assert_eq!(major_minor("50.0-2ubuntu1"), Some((50, 0)));
        assert_eq!(major_minor("x"), None);
    }

    #[test]
    fn a_strix_halo_node_passes() {
        let labels = HashMap::new();
        let p = parse(include_str!("../../tests/fixtures/probe/strix-halo.txt"));
        let mut x = ctx(&labels);
        x.memlock_asked = Some(-1);
        for c in checks(&p, &x) {
            assert_eq!(c.status, Status::Pass, "{c:?}");
        }
    }

    #[test]
    fn memlock_lower_than_created_or_too_low_for_rdma_fails() {
        let labels = HashMap::new();
        let mut p = parse(include_str!("../../tests/fixtures/probe/strix-halo.txt"));
        p.memlock = Some(LimitValue::Finite(8 << 20));
        let mut x = ctx(&labels);
        x.memlock_asked = Some(-1);
        let m = memlock(&p, &x);
        assert_eq!(m.status, Status::Fail);
        assert!(
            m.summary.contains("created with memlock unlimited"),
            "{m:?}"
        );
        x.memlock_asked = None;
        let m = memlock(&p, &x);
        assert_eq!(m.status, Status::Fail);
        assert!(m.summary.contains("RDMA pins"), "{m:?}");
        x.backend = Some("distrobox");
        assert!(memlock(&p, &x).fix.unwrap().contains("--ulimit host"));
    }

    #[test]
    fn a_node_the_user_cannot_open_names_the_group() {
        let labels = HashMap::new();
        let p = parse(
            "@@hbx probe 1\n@@hbx uid 1000\n@@hbx user ada\n@@hbx groups 1000\n@@hbx dev /dev/kfd 660 0 105 - sh: can't open '/dev/kfd': Permission denied\n@@hbx end\n",
        );
        let mut x = ctx(&labels);
        x.backend = Some("toolbox");
        let g = groups(&p, &x);
        assert_eq!(g.status, Status::Fail);
        assert!(
            g.summary.contains(
                "/dev/kfd (mode 0660, group 105 is not among the user's): Permission denied"
            ),
            "{g:?}"
        );
        assert!(g.fix.unwrap().contains("usermod -aG render,video"));
    }

    #[test]
    fn another_gpu_and_a_missing_render_node_fail() {
        let labels = HashMap::new();
        let x = ctx(&labels);
        let p = parse("@@hbx kfd yes\n@@hbx kfd.node 1 110000 128\n@@hbx end\n");
        let g = gpu(&p, &x);
        assert_eq!(g.status, Status::Fail);
        assert!(g.summary.contains("gfx1100"), "{g:?}");
        let p = parse(
            "@@hbx kfd yes\n@@hbx kfd.node 1 110501 129\n@@hbx dev /dev/kfd 666 0 0 rw ok\n@@hbx end\n",
        );
        let g = gpu(&p, &x);
        assert_eq!(g.status, Status::Fail);
        assert!(
            g.summary
                .contains("/dev/dri/renderD129 is not in the container"),
            "{g:?}"
        );
    }

    #[test]
    fn ports_down_warn_and_an_override_warns() {
        let p = parse(
            "@@hbx rdma yes\n@@hbx rdma.port mlx5_0 1 Ethernet 1: DOWN\n@@hbx dev /dev/infiniband/uverbs0 666 0 0 rw ok\n@@hbx env HSA_OVERRIDE_GFX_VERSION 11.0.0\n@@hbx end\n",
        );
        let labels = HashMap::new();
        assert_eq!(rdma_ports(&p, &ctx(&labels)).status, Status::Warn);
        assert_eq!(env(&p).status, Status::Warn);
    }
}
