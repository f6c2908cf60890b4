//! The refresh plan: what `halobox refresh` will do, decided from host facts,
//! the engine, the existing container and the user's options. Nothing here
//! touches the engine.

use std::time::Duration;

use serde::Serialize;

use crate::backend::Backend;
use crate::container::memlock::{Grant, MemlockRequest};
use crate::container::model::{ContainerSpec, EngineTraits};
use crate::container::ops::ContainerInfo;
use crate::container::owner::Owner;
use crate::container::spec::{self, SpecOptions};
use crate::container::toolbox;
use crate::engine::EngineInfo;
use crate::host::HostFacts;
use crate::host::limits::LimitValue;
use crate::image_ref::ImageRef;

use super::pull::{self, PullError, PullPolicy, Pulling};

/// Suffix of the container created before the old one is replaced.
pub const NEW_SUFFIX: &str = "-halobox-new";
/// Suffix the old container carries while the new one takes its name.
pub const OLD_SUFFIX: &str = "-halobox-old";
/// Suffix of the replaced container, kept stopped (one generation) until
/// the next successful refresh or `halobox rm`; `--rollback` brings it back.
pub const PREV_SUFFIX: &str = "-prev";

/// Where the new container's image comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Pull this reference, then pin it under a date tag.
    Pull {
        /// The reference pulled.
        reference: String,
    },
    /// Re-create from an already pinned image (rollback when no container
    /// was kept).
    Pinned {
        /// The pinned reference.
        reference: String,
    },
    /// Bring back the kept `NAME-prev` container itself, with its files
    /// (rollback).
    Prev {
        /// The kept container.
        container: Known,
    },
}

/// A container that exists, as the plan refers to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Known {
    /// Its name now.
    pub name: String,
    /// Its id (what the executor acts on).
    pub id: String,
    /// The image reference it was made from.
    pub image: String,
}

impl Known {
    /// The plan's view of `c`.
    pub fn of(c: &ContainerInfo) -> Known {
        Known {
            name: c.name.clone(),
            id: c.id.clone(),
            image: c
                .labels
                .get(spec::LABEL_IMAGE)
                .cloned()
                .unwrap_or_else(|| c.image.clone()),
        }
    }
}

/// The containers of the refreshed name that exist now.
#[derive(Debug, Clone, Copy, Default)]
pub struct Found<'a> {
    /// The container named `NAME`.
    pub existing: Option<&'a ContainerInfo>,
    /// The container named `NAME-prev`.
    pub prev: Option<&'a ContainerInfo>,
    /// Whether the engine has the image the source names.
    pub image_present: bool,
}

/// What the user asked `refresh` for.
#[derive(Debug, Clone)]
pub struct RefreshOptions {
    /// The image to refresh from (channel tag already applied).
    pub image: ImageRef,
    /// The channel name (for the label).
    pub channel: String,
    /// Container name.
    pub name: String,
    /// Backend.
    pub backend: Backend,
    /// Memlock asked for.
    pub memlock: MemlockRequest,
    /// Clamp memlock to what the engine can grant instead of failing.
    pub memlock_clamp: bool,
    /// How many pinned images of the repository to keep.
    pub keep: usize,
    /// Replace a container of that name that halobox did not make.
    pub adopt: bool,
    /// The user's `XDG_RUNTIME_DIR`.
    pub runtime_dir: Option<String>,
    /// How long the new container must keep running before it replaces
    /// the old one.
    pub settle: Duration,
    /// The real path of this halobox binary (made available inside
    /// toolbox and distrobox containers).
    pub halobox_exe: Option<std::path::PathBuf>,
    /// The folder that holds only halobox (bound into podman and docker
    /// containers; [`crate::container::staged`]).
    pub halobox_dir: Option<std::path::PathBuf>,
    /// The Hugging Face cache to bind (podman/docker).
    pub hf_home: Option<String>,
    /// The user's own bind mounts (`--volume`, config `volumes`).
    pub volumes: Vec<crate::container::model::Mount>,
    /// `--pull` (`None`: the default for the image).
    pub pull: Option<PullPolicy>,
}

/// Everything `refresh` will do.
#[derive(Debug, Clone, Serialize)]
pub struct RefreshPlan {
    /// The engine that will do it.
    pub engine: EngineInfo,
    /// Backend.
    pub backend: Backend,
    /// Image source.
    pub source: Source,
    /// Whether the image is pulled (`None`: a rollback, which never pulls).
    pub pulling: Option<Pulling>,
    /// Repository whose pinned images are pruned.
    pub repository: String,
    /// The final container name.
    pub name: String,
    /// The name the new container is created under.
    pub temp_name: String,
    /// The name the old container carries during the swap.
    pub old_name: String,
    /// The name the replaced container is kept under.
    pub prev_name: String,
    /// The container being replaced, if any.
    pub replaces: Option<String>,
    /// The container now named `NAME`: stopped and kept as `NAME-prev`.
    pub current: Option<Known>,
    /// The `NAME-prev` a successful refresh deletes to keep one generation.
    pub retired: Option<Known>,
    /// Seconds the new container must keep running before the swap.
    pub settle_secs: f64,
    /// toolbox backend: the host directory where toolbx's init-container
    /// writes its `container-initialized-<pid>` stamp when it is ready.
    pub ready_stamps: Option<String>,
    /// The spec (its image is replaced by the pinned reference after the pull).
    pub spec: ContainerSpec,
    /// Pinned images kept.
    pub keep: usize,
    /// What the user should know.
    pub notes: Vec<String>,
}

/// Why a refresh cannot start. Nothing has been changed when one is returned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    /// The backend needs another engine.
    #[error(
        "the {backend} backend needs {needs}, but the engine at {address} is {engine}\n  hint: pass --backend {engine} or --engine with a {needs} socket"
    )]
    BackendEngine {
        /// Backend asked for.
        backend: Backend,
        /// What it needs.
        needs: &'static str,
        /// What answered.
        engine: String,
        /// Where.
        address: String,
    },
    /// A container of that name has halobox's labels only from its image.
    #[error(
        "a container named {name} carries halobox's labels only because its image {image} does (a commit of a halobox container?): halobox did not create it, so it will not replace it\n  hint: pass --name to use another name, or --adopt to replace it once the new one runs"
    )]
    InheritedLabels {
        /// The name.
        name: String,
        /// Its image.
        image: String,
    },
    /// A container of that name exists and halobox did not make it.
    #[error(
        "a container named {name} exists and was not made by halobox (image {image})\n  hint: pass --name to use another name, or --adopt to replace it once the new one runs"
    )]
    NameTaken {
        /// The name.
        name: String,
        /// Its image.
        image: String,
    },
    /// The engine cannot give containers the memlock asked for.
    #[error(
        "the engine process {who} has a hard memlock limit of {hard}, so containers cannot get memlock {asked}\n  hint: {fix}\n  or pass --memlock-clamp to create it with {hard} (RDMA may fail to register memory), or --memlock SIZE"
    )]
    Memlock {
        /// Which process.
        who: String,
        /// Its hard limit.
        hard: String,
        /// The request.
        asked: String,
        /// The fix.
        fix: String,
    },
    /// distrobox will not run as root.
    #[error(
        "distrobox refuses to run as root (even with --root)\n  hint: run halobox as your own user; with a rootful engine halobox passes --root and distrobox uses sudo; or pick --backend toolbox or podman"
    )]
    DistroboxAsRoot,
    /// distrobox gives containers this process's memlock, which is too small.
    #[error(
        "distrobox gives containers this user's own limits (--ulimit host): memlock {have}, not {asked}\n  hint: {fix}\n  or pass --memlock-clamp to accept {have}, or use --backend toolbox, which sets memlock itself"
    )]
    DistroboxMemlock {
        /// This process's memlock.
        have: String,
        /// The request.
        asked: String,
        /// The fix.
        fix: String,
    },
    /// A container that halobox did not make holds the name the replaced
    /// container is kept under.
    #[error(
        "a container named {0} exists and was not made by halobox; refresh keeps the replaced container under that name and deletes the one there before\n  hint: if it is what an --adopt refresh replaced, pass --adopt again to let it go; else rename or remove it"
    )]
    PrevTaken(String),
    /// The image is not there and will not be pulled.
    #[error(transparent)]
    Image(#[from] PullError),
}

/// The memlock fix for the engine's service.
const SERVICE_FIX: &str = "give the engine service LimitMEMLOCK=infinity: \
    `sudo systemctl edit podman.service` (or docker.service), add `[Service]` `LimitMEMLOCK=infinity`, \
    then `sudo systemctl daemon-reload && sudo systemctl restart podman.service`";

/// Decides the refresh, or says why it cannot start.
pub fn plan(
    facts: &HostFacts,
    engine: &EngineInfo,
    creator: Option<&crate::host::procs::Process>,
    found: Found<'_>,
    source: Source,
    opts: &RefreshOptions,
) -> Result<RefreshPlan, PlanError> {
    let Found {
        existing,
        prev,
        image_present,
    } = found;
    if !opts.backend.supports(engine.kind) {
        return Err(PlanError::BackendEngine {
            backend: opts.backend,
            needs: match opts.backend {
                Backend::Docker => "docker",
                _ => "podman",
            },
            engine: engine.kind.to_string(),
            address: engine.address.clone(),
        });
    }
    if let Some(c) = existing
        && !is_managed(c)
        && !opts.adopt
    {
        let (name, image) = (c.name.clone(), c.image.clone());
        return Err(if c.owner == Owner::Inherited {
            PlanError::InheritedLabels { name, image }
        } else {
            PlanError::NameTaken { name, image }
        });
    }
    if let Some(p) = prev
        && !is_managed(p)
        && !opts.adopt
    {
        return Err(PlanError::PrevTaken(p.name.clone()));
    }
    let pulling = match &source {
        Source::Pull { .. } => Some(pull::decide(opts.pull, &opts.image, image_present)?),
        Source::Pinned { .. } | Source::Prev { .. } => None,
    };
    let temp_name = format!("{}{NEW_SUFFIX}", opts.name);
    let mut notes = Vec::new();
    let reuses_prev = matches!(source, Source::Prev { .. });
    let memlock = if reuses_prev {
        opts.memlock
    } else if opts.backend == Backend::Distrobox {
        distrobox_memlock(facts, opts, &mut notes)?
    } else {
        engine_memlock(opts, creator, &mut notes)?
    };
    if memlock.0 != LimitValue::Unlimited && !reuses_prev {
        notes.push(format!(
            "memlock is {memlock}, not unlimited: fine for testing, small for RCCL over RDMA"
        ));
    }
    let image = match &source {
        Source::Pull { reference } | Source::Pinned { reference } => reference.clone(),
        Source::Prev { container } => container.image.clone(),
    };
    let traits = EngineTraits {
        kind: engine.kind,
        oci_runtime: engine.oci_runtime.clone(),
        rootless: engine.rootless,
        creator_limits: creator.map(|p| p.limits),
    };
    let spec = spec::build(
        facts,
        &traits,
        &SpecOptions {
            name: temp_name.clone(),
            image,
            image_digest: None,
            channel: Some(opts.channel.clone()),
            backend: opts.backend,
            memlock,
            runtime_dir: opts.runtime_dir.clone(),
            halobox_exe: opts.halobox_exe.clone(),
            halobox_dir: opts.halobox_dir.clone(),
            hf_home: opts.hf_home.clone(),
            volumes: opts.volumes.clone(),
        },
    );
    Ok(RefreshPlan {
        engine: engine.clone(),
        backend: opts.backend,
        source,
        pulling,
        repository: opts.image.repository.clone(),
        name: opts.name.clone(),
        old_name: format!("{}{OLD_SUFFIX}", opts.name),
        temp_name,
        prev_name: format!("{}{PREV_SUFFIX}", opts.name),
        replaces: existing.map(|c| c.name.clone()),
        current: existing.map(Known::of),
        retired: prev.filter(|_| !reuses_prev).map(Known::of),
        settle_secs: opts.settle.as_secs_f64(),
        ready_stamps: (opts.backend == Backend::Toolbox).then(|| {
            toolbox::init_stamp_dir(facts.user.uid.unwrap_or(0), opts.runtime_dir.as_deref())
        }),
        spec,
        keep: opts.keep,
        notes,
    })
}

fn engine_memlock(
    opts: &RefreshOptions,
    creator: Option<&crate::host::procs::Process>,
    notes: &mut Vec<String>,
) -> Result<MemlockRequest, PlanError> {
    match crate::container::memlock::grant(opts.memlock, creator) {
        Grant::Yes => Ok(opts.memlock),
        Grant::Unknown(why) => {
            notes.push(format!(
                "cannot check that the engine can grant memlock {}: {why}",
                opts.memlock
            ));
            Ok(opts.memlock)
        }
        Grant::No { hard } if opts.memlock_clamp => {
            notes.push(format!(
                "memlock clamped from {} to {hard}, the engine's hard limit: RDMA may fail to register large buffers",
                opts.memlock
            ));
            Ok(MemlockRequest(hard))
        }
        Grant::No { hard } => Err(PlanError::Memlock {
            who: creator.map_or("?".into(), |p| format!("{} (pid {})", p.comm, p.pid)),
            hard: hard.to_string(),
            asked: opts.memlock.to_string(),
            fix: SERVICE_FIX.into(),
        }),
    }
}

/// distrobox passes `--ulimit host`: the container gets this process's limit.
fn distrobox_memlock(
    facts: &HostFacts,
    opts: &RefreshOptions,
    notes: &mut Vec<String>,
) -> Result<MemlockRequest, PlanError> {
    if facts.user.is_root() {
        return Err(PlanError::DistroboxAsRoot);
    }
    let Some(own) = facts.limits.memlock else {
        notes.push(
            "this process's memlock is unknown; distrobox gives the container the same".into(),
        );
        return Ok(opts.memlock);
    };
    if own.soft >= opts.memlock.0 {
        return Ok(MemlockRequest(own.soft));
    }
    if opts.memlock_clamp {
        notes.push(format!(
            "distrobox gives the container this user's memlock ({}), less than the {} asked for",
            own.soft, opts.memlock
        ));
        return Ok(MemlockRequest(own.soft));
    }
    Err(PlanError::DistroboxMemlock {
        have: own.soft.to_string(),
        asked: opts.memlock.to_string(),
        fix: "printf '* soft memlock unlimited\\n* hard memlock unlimited\\n' | sudo tee /etc/security/limits.d/90-halobox-memlock.conf, then log in again".into(),
    })
}

/// True when halobox made the container (labels inherited from its image
/// do not count: [`crate::container::owner`]).
pub fn is_managed(c: &ContainerInfo) -> bool {
    c.owner == Owner::Halobox
}

/// Which pinned (date-tagged) images to remove: all but the newest `keep`,
/// never one in `in_use` nor `protect`. `tags` are (tag, image id).
pub fn prune_list(
    tags: &[(String, String)],
    keep: usize,
    in_use: &[String],
    protect: Option<&str>,
) -> Vec<String> {
    let mut pinned: Vec<&(String, String)> = tags
        .iter()
        .filter(|(t, _)| crate::image_ref::is_date_tag(t))
        .collect();
    pinned.sort_by(|a, b| b.0.cmp(&a.0));
    pinned
        .into_iter()
        .skip(keep)
        .filter(|(t, id)| !in_use.contains(id) && Some(t.as_str()) != protect)
        .map(|(t, _)| t.clone())
        .collect()
}

/// The pinned tag to roll back to: the newest one older than the tag of the
/// image the container runs now.
pub fn rollback_target(tags: &[(String, String)], current_image_id: &str) -> Option<String> {
    let mut pinned: Vec<&(String, String)> = tags
        .iter()
        .filter(|(t, _)| crate::image_ref::is_date_tag(t))
        .collect();
    pinned.sort_by(|a, b| b.0.cmp(&a.0));
    let current = pinned.iter().position(|(_, id)| id == current_image_id)?;
    pinned
        .iter()
        .skip(current + 1)
        .find(|(_, id)| id != current_image_id)
        .map(|(t, _)| t.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(t, i)| (t.to_string(), i.to_string()))
            .collect()
    }

    #[test]
    fn prune_keeps_newest_and_used() {
        let t = tags(&[
            ("latest", "d"),
            ("20240101-000000", "a"),
            ("20240201-000000", "b"),
            ("20240301-000000", "c"),
            ("20240401-000000", "d"),
        ]);
        assert_eq!(
            prune_list(&t, 2, &[], None),
            ["20240201-000000", "20240101-000000"]
        );
        assert_eq!(prune_list(&t, 2, &["a".into()], None), ["20240201-000000"]);
        assert_eq!(
            prune_list(&t, 2, &[], Some("20240101-000000")),
            ["20240201-000000"]
        );
        assert!(prune_list(&t, 10, &[], None).is_empty());
    }

    #[test]
    fn rollback_picks_the_previous_pin() {
        let t = tags(&[
            ("20240101-000000", "a"),
            ("20240201-000000", "b"),
            ("20240301-000000", "c"),
        ]);
        assert_eq!(rollback_target(&t, "c").as_deref(), Some("20240201-000000"));
        assert_eq!(rollback_target(&t, "b").as_deref(), Some("20240101-000000"));
        assert_eq!(rollback_target(&t, "a"), None);
        assert_eq!(rollback_target(&t, "zzz"), None);
    }
}
