//! The container spec: a pure plan of what to create, from host facts, the
//! engine's traits and the user's options (the types are in
//! [`super::model`]; a toolbox spec gets [`super::toolbox`]'s shape). [`crate::container::api`] turns it
//! into an engine request and [`crate::container::cli`] into a command line.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::binds;
use super::memlock::MemlockRequest;
use super::model::{Mount, Rlimit};
use super::toolbox;
use crate::backend::Backend;
use crate::engine::EngineKind;
use crate::host::HostFacts;
use crate::host::limits::{Limit, LimitValue};

/// The spec's types, where the spec is planned.
pub use super::model::{ContainerSpec, EngineTraits};

/// Label on every container halobox manages.
pub const LABEL_MANAGED: &str = "dev.halobox.managed";
/// Label with the backend that made the container.
pub const LABEL_BACKEND: &str = "dev.halobox.backend";
/// Label with the image reference the container was made from.
pub const LABEL_IMAGE: &str = "dev.halobox.image";
/// Label with the image's digest.
pub const LABEL_DIGEST: &str = "dev.halobox.image-digest";
/// Label with the channel (`latest`, `dev`).
pub const LABEL_CHANNEL: &str = "dev.halobox.channel";
/// Label with the memlock limit asked for.
pub const LABEL_MEMLOCK: &str = "dev.halobox.memlock";
/// Podman annotation that keeps the caller's supplementary groups (crun only).
pub const KEEP_GROUPS: &str = "run.oci.keep_original_groups";

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct SpecOptions {
    /// Container name.
    pub name: String,
    /// Image reference to create from.
    pub image: String,
    /// The image's digest, for the label.
    pub image_digest: Option<String>,
    /// Channel, for the label.
    pub channel: Option<String>,
    /// How to make it.
    pub backend: Backend,
    /// Memlock limit.
    pub memlock: MemlockRequest,
    /// The user's `XDG_RUNTIME_DIR` (toolbox binds it for non-root users).
    pub runtime_dir: Option<String>,
    /// The real path of the halobox binary, made available inside
    /// toolbox and distrobox containers ([`super::binds`]).
    pub halobox_exe: Option<PathBuf>,
    /// The folder that holds only halobox, bound into podman and docker
    /// containers ([`super::staged`]).
    pub halobox_dir: Option<PathBuf>,
    /// The host's Hugging Face cache, bound into podman/docker containers.
    pub hf_home: Option<String>,
    /// The user's own bind mounts ([`super::volume`]), for every backend.
    pub volumes: Vec<Mount>,
}

/// The entry point of a plain container: halobox's own, so an image's
/// ENTRYPOINT (a server, a script that exits) never decides whether the
/// container stays up.
pub fn idle_entrypoint() -> Vec<String> {
    vec!["/bin/sh".into()]
}

/// The arguments to [`idle_entrypoint`]: keep the container alive and stop
/// at once on SIGTERM, with any POSIX shell (busybox included).
pub fn idle_command() -> Vec<String> {
    vec![
        "-c".into(),
        "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done".into(),
    ]
}

/// Builds the spec for `opts` on a host with `facts`, created by `engine`.
pub fn build(facts: &HostFacts, engine: &EngineTraits, opts: &SpecOptions) -> ContainerSpec {
    let mut notes = Vec::new();
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_MANAGED.to_string(), "true".to_string());
    labels.insert(LABEL_BACKEND.to_string(), opts.backend.to_string());
    labels.insert(LABEL_IMAGE.to_string(), opts.image.clone());
    labels.insert(LABEL_MEMLOCK.to_string(), opts.memlock.label_value());
    if let Some(d) = &opts.image_digest {
        labels.insert(LABEL_DIGEST.to_string(), d.clone());
    }
    if let Some(c) = &opts.channel {
        labels.insert(LABEL_CHANNEL.to_string(), c.clone());
    }

    let devices = device_paths(facts, &mut notes);
    let (annotations, group_add) = groups(facts, engine, &mut notes);
    let rlimits = rlimits(engine, opts.memlock, &mut notes);
    if !facts.env_hazards.is_empty() {
        notes.push(format!(
            "host variables {} are not passed into the container",
            facts
                .env_hazards
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }

    let mut spec = ContainerSpec {
        name: opts.name.clone(),
        image: opts.image.clone(),
        labels,
        annotations,
        devices,
        group_add,
        rlimits,
        privileged: false,
        network_host: true,
        ipc_host: true,
        pid_host: false,
        userns: None,
        // The engine's default seccomp profile stays on (podman's allows
        // the NUMA memory-policy calls ROCm makes); toolbox containers are
        // privileged, as toolbx makes them, which turns it off there.
        security_opt: vec!["label=disable".into()],
        mounts: Vec::new(),
        devpts: false,
        use_image_hosts: false,
        ensure_dirs: Vec::new(),
        env: Vec::new(),
        hostname: None,
        user: None,
        entrypoint: Some(idle_entrypoint()),
        cmd: idle_command(),
        notes,
    };
    if opts.backend == Backend::Toolbox {
        toolbox::apply(facts, engine, opts.runtime_dir.as_deref(), &mut spec);
    }
    binds::apply(
        &mut spec,
        opts.backend,
        opts.halobox_exe.as_deref(),
        opts.halobox_dir.as_deref(),
        opts.hf_home.as_deref(),
    );
    spec.mounts.extend(opts.volumes.iter().cloned());
    spec
}

fn to_api(v: LimitValue) -> i64 {
    match v {
        LimitValue::Unlimited => -1,
        LimitValue::Finite(b) => i64::try_from(b).unwrap_or(i64::MAX),
    }
}

/// Memlock as asked, plus nofile and nproc as the engine process has them:
/// podman replaces all its default limits as soon as one is given, and its
/// built-in nofile/nproc (1048576) can exceed what the host allows.
fn rlimits(engine: &EngineTraits, memlock: MemlockRequest, notes: &mut Vec<String>) -> Vec<Rlimit> {
    let mut out = vec![Rlimit {
        name: "memlock".into(),
        soft: memlock.api_value(),
        hard: memlock.api_value(),
    }];
    let creator = engine.creator_limits.unwrap_or_default();
    for (name, limit) in [("nofile", creator.nofile), ("nproc", creator.nproc)] {
        match limit {
            Some(Limit { soft, hard }) => out.push(Rlimit {
                name: name.into(),
                soft: to_api(soft),
                hard: to_api(hard),
            }),
            None if engine.kind == EngineKind::Podman => notes.push(format!(
                "the engine's {name} limit is unknown: podman will apply its built-in default"
            )),
            None => {}
        }
    }
    out
}

fn device_paths(facts: &HostFacts, notes: &mut Vec<String>) -> Vec<String> {
    let mut devices = Vec::new();
    match &facts.gpu.kfd {
        Some(kfd) => devices.push(kfd.path.clone()),
        None => notes.push("no /dev/kfd on this host: the container gets no GPU compute".into()),
    }
    let dri: Vec<String> = facts.gpu.dri.iter().map(|d| d.path.clone()).collect();
    if dri.is_empty() {
        notes.push("no /dev/dri render nodes on this host".into());
    }
    devices.extend(dri);
    let ib: Vec<String> = facts
        .rdma
        .dev_nodes
        .iter()
        .map(|d| d.path.clone())
        .collect();
    if ib.is_empty() {
        notes.push("no /dev/infiniband on this host: RDMA is unavailable in the container".into());
    }
    devices.extend(ib);
    // A USB4 RDMA provider's devices (OdinLink's /dev/odl_tb5_N), for its RCCL net plugin.
    devices.extend(facts.net_plugins.usb4_devices.iter().cloned());
    devices
}

fn groups(
    facts: &HostFacts,
    engine: &EngineTraits,
    notes: &mut Vec<String>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut annotations = BTreeMap::new();
    let numeric: Vec<String> = facts
        .user
        .device_groups
        .iter()
        .filter_map(|g| g.gid.map(|gid| gid.to_string()))
        .collect();
    let runtime = engine.oci_runtime.as_deref().unwrap_or("unknown");
    match engine.kind {
        EngineKind::Podman if runtime == "crun" => {
            annotations.insert(KEEP_GROUPS.to_string(), "1".to_string());
            (annotations, Vec::new())
        }
        EngineKind::Podman if engine.rootless => {
            notes.push(format!(
                "podman runs rootless with the {runtime} runtime: supplementary groups are not kept \
                 (keep-groups needs crun); device access relies on the nodes' modes"
            ));
            (annotations, Vec::new())
        }
        EngineKind::Podman => {
            notes.push(format!(
                "podman uses the {runtime} runtime, which cannot keep groups: adding the host's \
                 render/video/rdma GIDs ({}) instead",
                numeric.join(", ")
            ));
            (annotations, numeric)
        }
        EngineKind::Docker => (annotations, numeric),
    }
}
