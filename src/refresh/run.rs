//! Carries out a [`RefreshPlan`] against the engine. Until the new container
//! runs, nothing about the old one changes; any failure before that removes
//! what this run created and leaves the old container exactly as it was.

use serde::Serialize;

use super::plan::{RefreshPlan, Source};
use crate::container::backend::Backend;
use crate::container::distrobox;
use crate::container::spec::{LABEL_DIGEST, LABEL_IMAGE};
use crate::engine::{Engine, EngineError};
use crate::image_ref::{ImageRef, date_tag};

/// The OCI label that dates an image.
pub const CREATED_LABEL: &str = "org.opencontainers.image.created";

/// What a finished refresh did.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The container now in place.
    pub name: String,
    /// The pinned image it runs.
    pub image: String,
    /// The image's digest, when it has one.
    pub digest: Option<String>,
    /// The container it replaced.
    pub replaced: Option<String>,
    /// Pinned images removed.
    pub pruned: Vec<String>,
    /// Things that went wrong after the new container was in place.
    pub warnings: Vec<String>,
    /// How long each step took.
    pub timings: Vec<StepTime>,
}

/// The wall time of one step.
#[derive(Debug, Clone, Serialize)]
pub struct StepTime {
    /// `pull`, `pin`, `create`, `start_check`, `swap` (old container
    /// moved aside and removed), `prune`.
    pub step: &'static str,
    /// Milliseconds.
    pub ms: f64,
}

/// Measures consecutive steps.
struct Laps {
    last: std::time::Instant,
    done: Vec<StepTime>,
}

impl Laps {
    fn new() -> Self {
        Self {
            last: std::time::Instant::now(),
            done: Vec::new(),
        }
    }

    fn lap(&mut self, step: &'static str) {
        let now = std::time::Instant::now();
        self.done.push(StepTime {
            step,
            ms: (now - self.last).as_secs_f64() * 1000.0,
        });
        self.last = now;
    }
}

/// A refresh that stopped.
#[derive(Debug, thiserror::Error)]
#[error("refresh failed while {step}: {cause}\n  {state}")]
pub struct RefreshError {
    /// The step that failed.
    pub step: String,
    /// Why (shown in the message, so not chained again).
    pub cause: EngineError,
    /// What state the containers are in.
    pub state: String,
}

/// Runs `plan`; `say` receives one line per step.
pub async fn execute(
    engine: &Engine,
    plan: &RefreshPlan,
    say: &mut dyn FnMut(String),
) -> Result<Outcome, RefreshError> {
    let untouched = match &plan.replaces {
        Some(name) => format!("the existing container {name} was left as it was"),
        None => "no container was changed".to_string(),
    };
    let fail = |step: &str, cause: EngineError| RefreshError {
        step: step.to_string(),
        cause,
        state: untouched.clone(),
    };

    let mut laps = Laps::new();
    if let Some(stale) = &plan.stale_temp {
        say(format!(
            "removing {stale}, left over from an interrupted refresh"
        ));
        engine
            .remove(stale)
            .await
            .map_err(|e| fail("removing a leftover container", e))?;
    }

    let (reference, pin) = match &plan.source {
        Source::Pull { reference } => (reference.clone(), true),
        Source::Pinned { reference } => (reference.clone(), false),
    };
    if pin {
        say(format!("pulling {reference}"));
        let image = ImageRef::parse(&reference).map_err(|e| {
            fail(
                "pulling",
                EngineError::Stream {
                    context: reference.clone(),
                    message: e,
                },
            )
        })?;
        engine.pull(&image).await.map_err(|e| fail("pulling", e))?;
    }
    let local = engine
        .image(&reference)
        .await
        .map_err(|e| fail("inspecting the image", e))?
        .ok_or_else(|| {
            fail(
                "inspecting the image",
                EngineError::Stream {
                    context: reference.clone(),
                    message: "not in the local image store".into(),
                },
            )
        })?;
    laps.lap("pull");
    let digest = local.digest_for(&plan.repository);
    let pinned = if pin {
        let created = local
            .labels
            .get(CREATED_LABEL)
            .cloned()
            .or(local.created.clone())
            .unwrap_or_default();
        let tag = date_tag(&created).map_err(|message| {
            fail(
                "pinning the image",
                EngineError::Stream {
                    context: format!(
                        "{reference} has no usable {CREATED_LABEL} label or creation time"
                    ),
                    message,
                },
            )
        })?;
        let repo = ImageRef::parse(&plan.repository).map_err(|message| {
            fail(
                "pinning the image",
                EngineError::Stream {
                    context: plan.repository.clone(),
                    message,
                },
            )
        })?;
        let pinned = repo.with_tag(&tag);
        say(format!("pinning it as {pinned}"));
        engine
            .tag(&local.id, &pinned)
            .await
            .map_err(|e| fail("pinning the image", e))?;
        pinned.to_string()
    } else {
        reference.clone()
    };

    laps.lap("pin");
    let mut spec = plan.spec.clone();
    spec.image = pinned.clone();
    spec.labels.insert(LABEL_IMAGE.into(), pinned.clone());
    if let Some(d) = &digest {
        spec.labels.insert(LABEL_DIGEST.into(), d.clone());
    }
    say(format!("creating {} ({} backend)", spec.name, plan.backend));
    let created = if plan.backend == Backend::Distrobox {
        run_program(&distrobox::create_command(&spec, !plan.engine.rootless)).await
    } else {
        engine.create(&spec).await.map(|_| ())
    };
    if let Err(e) = created {
        let _ = engine.remove(&spec.name).await;
        return Err(fail("creating the new container", e));
    }
    laps.lap("create");
    say(format!("starting {} and checking it runs", spec.name));
    if let Err(e) = engine.start_and_check(&spec.name).await {
        let _ = engine.remove(&spec.name).await;
        return Err(fail("starting the new container (it was removed again)", e));
    }

    laps.lap("start_check");
    if plan.replaces.is_some() {
        say(format!("replacing {}", plan.name));
        if let Err(e) = engine.rename(&plan.name, &plan.old_name).await {
            let _ = engine.remove(&spec.name).await;
            return Err(fail(
                "moving the old container aside (the new one was removed)",
                e,
            ));
        }
        if let Err(e) = engine.rename(&spec.name, &plan.name).await {
            let _ = engine.rename(&plan.old_name, &plan.name).await;
            let _ = engine.remove(&spec.name).await;
            return Err(fail(
                "renaming the new container (the old one was put back)",
                e,
            ));
        }
    } else if let Err(e) = engine.rename(&spec.name, &plan.name).await {
        let _ = engine.remove(&spec.name).await;
        return Err(fail("naming the new container (it was removed)", e));
    }

    let mut warnings = Vec::new();
    if plan.replaces.is_some()
        && let Err(e) = engine.remove(&plan.old_name).await
    {
        warnings.push(format!(
            "could not remove the old container {}: {e}; remove it with `halobox rm {}`",
            plan.old_name, plan.old_name
        ));
    }
    laps.lap("swap");
    let (pruned, prune_warnings) = prune(engine, plan, &pinned).await;
    warnings.extend(prune_warnings);
    laps.lap("prune");
    for p in &pruned {
        say(format!("removed old image {p}"));
    }
    Ok(Outcome {
        name: plan.name.clone(),
        image: pinned,
        digest,
        replaced: plan.replaces.clone(),
        pruned,
        warnings,
        timings: laps.done,
    })
}

/// Removes pinned images beyond `plan.keep`; returns (removed, warnings).
async fn prune(engine: &Engine, plan: &RefreshPlan, pinned: &str) -> (Vec<String>, Vec<String>) {
    let mut warnings = Vec::new();
    let tags = match engine.repository_tags(&plan.repository).await {
        Ok(t) => t,
        Err(e) => {
            warnings.push(format!("could not list images to prune: {e}"));
            return (Vec::new(), warnings);
        }
    };
    let in_use = match engine.images_in_use().await {
        Ok(u) => u,
        Err(e) => {
            warnings.push(format!(
                "could not list containers, so no image was pruned: {e}"
            ));
            return (Vec::new(), warnings);
        }
    };
    let protect = pinned.rsplit_once(':').map(|(_, t)| t);
    let mut removed = Vec::new();
    for tag in super::plan::prune_list(&tags, plan.keep, &in_use, protect) {
        let reference = format!("{}:{tag}", plan.repository);
        match engine.untag(&reference).await {
            Ok(()) => removed.push(reference),
            Err(e) => warnings.push(format!("could not remove {reference}: {e}")),
        }
    }
    (removed, warnings)
}

/// Runs a program to completion; a failure carries the end of its output.
async fn run_program(argv: &[String]) -> Result<(), EngineError> {
    let out = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| EngineError::Stream {
            context: format!("running {}", argv[0]),
            message: format!("{e} (is {} installed?)", argv[0]),
        })?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    Err(EngineError::Stream {
        context: format!("{} exited with {}", argv[..2].join(" "), out.status),
        message: tail.into_iter().rev().collect::<Vec<_>>().join(" / "),
    })
}
