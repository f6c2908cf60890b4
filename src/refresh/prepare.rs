//! What a refresh starts from: the image and container name that the flags,
//! `HALOBOX_IMAGE` and the config file give, then the engine's view (the
//! containers of that name, the pinned images for `--rollback`), handed to
//! the pure [`super::plan`].

use super::plan::{self, Found, Known, PREV_SUFFIX, RefreshOptions, RefreshPlan, Source};
use super::pull::PullPolicy;
use crate::backend::Backend;
use crate::config::{self, DEFAULT_IMAGE};
use crate::container::binds;
use crate::container::memlock::MemlockRequest;
use crate::container::model::Mount;
use crate::container::ops::ContainerInfo;
use crate::container::spec::LABEL_IMAGE;
use crate::container::{name, volume};
use crate::engine::{Engine, local};
use crate::error::UsageError;
use crate::host::HostFacts;
use crate::image_ref::ImageRef;

/// What the user asked `refresh` for.
#[derive(Debug, Clone)]
pub struct RefreshRequest {
    /// `--image` (else `HALOBOX_IMAGE`, the config's `image`, the default).
    pub image: Option<String>,
    /// The channel's tag (`latest`, `dev`).
    pub channel: String,
    /// `--name` (else the config's `name`, else `vllm`).
    pub name: Option<String>,
    /// `--backend` (else the config's, else the engine's default).
    pub backend: Option<Backend>,
    /// `--memlock`.
    pub memlock: MemlockRequest,
    /// `--memlock-clamp`.
    pub memlock_clamp: bool,
    /// `--keep`.
    pub keep: usize,
    /// `--rollback`.
    pub rollback: bool,
    /// `--adopt`.
    pub adopt: bool,
    /// `--settle`.
    pub settle: std::time::Duration,
    /// `--volume SRC:DEST[:ro|rw]` (added to the config's `volumes`).
    pub volumes: Vec<String>,
    /// `--pull` (`None`: the default for the image).
    pub pull: Option<PullPolicy>,
}

/// The image, container and backend a request means once the config file
/// and the environment have filled it in; checked before an engine is asked.
#[derive(Debug, Clone)]
pub struct Target {
    /// The image, with the channel's tag when it named none.
    pub image: ImageRef,
    /// The container name.
    pub name: String,
    /// The backend, when the flags or the config name one.
    pub backend: Option<Backend>,
    /// The user's bind mounts: the config's `volumes`, then `--volume`,
    /// each source checked to exist.
    pub volumes: Vec<Mount>,
}

/// Resolves the request's image, name and backend.
pub fn target(req: &RefreshRequest) -> anyhow::Result<Target> {
    let cfg = config::load(config::path().as_deref())?;
    let image = image_in(req.image.clone(), &cfg, &req.channel)?;
    let name = name::resolve(req.name.as_deref())?;
    let volumes =
        volume::merge(&cfg.volumes, &req.volumes).map_err(|e| UsageError(e.to_string()))?;
    volume::check_sources(&volumes).map_err(|e| UsageError(e.to_string()))?;
    Ok(Target {
        image,
        name,
        backend: req.backend.or(cfg.backend),
        volumes,
    })
}

/// The image `given` (`--image`) means, else `HALOBOX_IMAGE`, else the
/// config file's `image`, else this project's, with `channel`'s tag when it
/// names none.
pub fn image(given: Option<String>, channel: &str) -> anyhow::Result<ImageRef> {
    image_in(given, &config::load(config::path().as_deref())?, channel)
}

fn image_in(
    given: Option<String>,
    cfg: &config::Config,
    channel: &str,
) -> anyhow::Result<ImageRef> {
    let arg = given
        .or_else(|| {
            std::env::var("HALOBOX_IMAGE")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .or(cfg.image.clone())
        .unwrap_or_else(|| DEFAULT_IMAGE.to_string());
    Ok(ImageRef::parse(&arg)
        .map_err(UsageError)?
        .for_channel(channel))
}

/// Plans the refresh of `target` on `engine` (whose info is refined with
/// this host's facts).
pub async fn plan(
    engine: &mut Engine,
    facts: &HostFacts,
    req: &RefreshRequest,
    target: &Target,
) -> anyhow::Result<RefreshPlan> {
    engine.info = local::refine(&engine.info, facts);
    let backend = target
        .backend
        .unwrap_or_else(|| Backend::default_for(engine.info.kind, facts.tool("toolbox").is_some()));
    let name = &target.name;
    let prev_name = format!("{name}{PREV_SUFFIX}");
    let (existing, prev) = tokio::join!(engine.container(name), engine.container(&prev_name));
    let (existing, prev) = (existing?, prev?);
    let image_present = match req.rollback {
        true => false,
        false => engine.image(&target.image.to_string()).await?.is_some(),
    };
    let (source, repository) = if req.rollback {
        rollback_source(engine, existing.as_ref(), prev.as_ref(), name).await?
    } else {
        (
            Source::Pull {
                reference: target.image.to_string(),
            },
            target.image.clone(),
        )
    };
    let opts = RefreshOptions {
        image: repository,
        channel: req.channel.clone(),
        name: name.clone(),
        backend,
        memlock: req.memlock,
        memlock_clamp: req.memlock_clamp,
        keep: req.keep,
        adopt: req.adopt,
        runtime_dir: std::env::var("XDG_RUNTIME_DIR").ok(),
        settle: req.settle,
        halobox_exe: std::env::current_exe().and_then(|p| p.canonicalize()).ok(),
        halobox_dir: crate::container::staged::dir(),
        hf_home: hf_home(facts)?,
        volumes: target.volumes.clone(),
        pull: req.pull,
    };
    let creator = local::engine_process(facts, &engine.info);
    Ok(plan::plan(
        facts,
        &engine.info,
        creator,
        Found {
            existing: existing.as_ref(),
            prev: prev.as_ref(),
            image_present,
        },
        source,
        &opts,
    )?)
}

/// The Hugging Face cache to bind: `HF_HOME` or the default, refused
/// when it (its symlinks resolved) would show the container `/`, a
/// system folder or the home folder.
fn hf_home(facts: &HostFacts) -> Result<Option<String>, UsageError> {
    let home = facts.user.home.as_deref();
    let Some(dir) = binds::hf_home(std::env::var("HF_HOME").ok().as_deref(), home) else {
        return Ok(None);
    };
    let real =
        |p: &str| std::fs::canonicalize(p).map_or(p.to_string(), |r| r.display().to_string());
    // The account's home and `$HOME`, as written and resolved.
    let mut homes: Vec<String> = home.into_iter().map(str::to_string).collect();
    homes.extend(std::env::var("HOME").ok().filter(|h| h.starts_with('/')));
    homes.extend(homes.clone().iter().map(|h| real(h)));
    for d in [dir.clone(), real(&dir)] {
        let why = std::iter::once(None)
            .chain(homes.iter().map(|h| Some(h.as_str())))
            .find_map(|h| binds::refuse_hf_home(&d, h));
        if let Some(why) = why {
            return Err(UsageError(why));
        }
    }
    Ok(Some(dir))
}

/// What `--rollback` brings back: the kept `NAME-prev` container with its
/// files, else (none kept) the pinned image before the one `name` runs.
async fn rollback_source(
    engine: &Engine,
    existing: Option<&ContainerInfo>,
    prev: Option<&ContainerInfo>,
    name: &str,
) -> anyhow::Result<(Source, ImageRef)> {
    let current = existing.ok_or_else(|| {
        UsageError(format!(
            "there is no container {name} to roll back\n  hint: halobox list shows halobox's containers"
        ))
    })?;
    if let Some(p) = prev.filter(|p| plan::is_managed(p)) {
        let container = Known::of(p);
        let image = ImageRef::parse(&container.image).map_err(UsageError)?;
        return Ok((Source::Prev { container }, image));
    }
    let reference = current
        .labels
        .get(LABEL_IMAGE)
        .cloned()
        .unwrap_or_else(|| current.image.clone());
    let repo = ImageRef::parse(&reference).map_err(UsageError)?;
    let tags = engine.repository_tags(&repo.repository).await?;
    let target = plan::rollback_target(&tags, &current.image_id).ok_or_else(|| {
        UsageError(format!(
            "no older pinned image of {} to roll back to\n  hint: pinned images are tagged YYYYMMDD-HHMMSS by refresh; `podman images {}` lists them",
            repo.repository, repo.repository
        ))
    })?;
    let pinned = repo.with_tag(&target);
    Ok((
        Source::Pinned {
            reference: pinned.to_string(),
        },
        pinned,
    ))
}
