//! Carries out a [`RefreshPlan`] against the engine. Until the new container
//! runs, nothing about the old one changes; any failure before that removes
//! what this run created and leaves the old container exactly as it was.

use serde::Serialize;

use super::plan::{RefreshPlan, Source};
use crate::container::backend::Backend;
use crate::container::spec::{LABEL_DIGEST, LABEL_IMAGE};
use crate::container::{distrobox, owner};
use crate::engine::images::LocalImage;
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

/// Runs `plan`; `say` receives one line per step. The steps are the plan's:
/// clear a leftover, pull, pin, create, check, swap, prune.
pub async fn execute(
    engine: &Engine,
    plan: &RefreshPlan,
    say: &mut dyn FnMut(String),
) -> Result<Outcome, RefreshError> {
    let mut steps = Steps::new(engine, plan, say);
    let mut laps = Laps::new();
    steps.remove_leftover().await?;
    let local = steps.pull().await?;
    laps.lap("pull");
    let digest = local.digest_for(&plan.repository);
    let pinned = steps.pin(&local).await?;
    laps.lap("pin");
    let temp = steps.create(&pinned, digest.as_deref()).await?;
    laps.lap("create");
    steps.check(&temp).await?;
    laps.lap("start_check");
    let mut warnings = steps.swap(&temp).await?;
    laps.lap("swap");
    let (pruned, prune_warnings) = prune(engine, plan, &pinned).await;
    warnings.extend(prune_warnings);
    laps.lap("prune");
    for p in &pruned {
        steps.say(format!("removed old image {p}"));
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

/// The steps of one refresh, each undoing what it made when it fails.
struct Steps<'a> {
    engine: &'a Engine,
    plan: &'a RefreshPlan,
    say: &'a mut dyn FnMut(String),
    /// What a failure leaves as it was (said in every error).
    untouched: String,
}

impl<'a> Steps<'a> {
    fn new(engine: &'a Engine, plan: &'a RefreshPlan, say: &'a mut dyn FnMut(String)) -> Self {
        let untouched = match &plan.replaces {
            Some(name) => format!("the existing container {name} was left as it was"),
            None => "no container was changed".to_string(),
        };
        Self {
            engine,
            plan,
            say,
            untouched,
        }
    }

    fn say(&mut self, line: String) {
        (self.say)(line);
    }

    fn fail(&self, step: &str, cause: EngineError) -> RefreshError {
        RefreshError {
            step: step.to_string(),
            cause,
            state: self.untouched.clone(),
        }
    }

    /// The image the plan names, and whether it is pulled and pinned (not
    /// already a pinned one).
    fn source(&self) -> (&'a str, bool) {
        match &self.plan.source {
            Source::Pull { reference } => (reference, true),
            Source::Pinned { reference } => (reference, false),
        }
    }

    /// Removes the container an interrupted refresh left behind.
    async fn remove_leftover(&mut self) -> Result<(), RefreshError> {
        let Some(stale) = &self.plan.stale_temp else {
            return Ok(());
        };
        self.say(format!(
            "removing {stale}, left over from an interrupted refresh"
        ));
        self.engine
            .remove(stale)
            .await
            .map_err(|e| self.fail("removing a leftover container", e))
    }

    /// Pulls the image (unless it is already pinned) and inspects it.
    async fn pull(&mut self) -> Result<LocalImage, RefreshError> {
        let (reference, pin) = self.source();
        if pin {
            self.say(format!("pulling {reference}"));
            let image = ImageRef::parse(reference).map_err(|e| {
                self.fail(
                    "pulling",
                    EngineError::Stream {
                        context: reference.to_string(),
                        message: e,
                    },
                )
            })?;
            self.engine
                .pull(&image)
                .await
                .map_err(|e| self.fail("pulling", e))?;
        }
        self.engine
            .image(reference)
            .await
            .map_err(|e| self.fail("inspecting the image", e))?
            .ok_or_else(|| {
                self.fail(
                    "inspecting the image",
                    EngineError::Stream {
                        context: reference.to_string(),
                        message: "not in the local image store".into(),
                    },
                )
            })
    }

    /// Tags a pulled image `REPO:YYYYMMDD-HHMMSS` from its created label;
    /// returns the reference the container is made from.
    async fn pin(&mut self, local: &LocalImage) -> Result<String, RefreshError> {
        let (reference, pin) = self.source();
        if !pin {
            return Ok(reference.to_string());
        }
        let created = local
            .labels
            .get(CREATED_LABEL)
            .cloned()
            .or(local.created.clone())
            .unwrap_or_default();
        let tag = date_tag(&created).map_err(|message| {
            self.fail(
                "pinning the image",
                EngineError::Stream {
                    context: format!(
                        "{reference} has no usable {CREATED_LABEL} label or creation time"
                    ),
                    message,
                },
            )
        })?;
        let repo = ImageRef::parse(&self.plan.repository).map_err(|message| {
            self.fail(
                "pinning the image",
                EngineError::Stream {
                    context: self.plan.repository.clone(),
                    message,
                },
            )
        })?;
        let pinned = repo.with_tag(&tag);
        self.say(format!("pinning it as {pinned}"));
        self.engine
            .tag(&local.id, &pinned)
            .await
            .map_err(|e| self.fail("pinning the image", e))?;
        Ok(pinned.to_string())
    }

    /// Creates the new container under its temporary name from the pinned
    /// image; returns that name.
    async fn create(&mut self, pinned: &str, digest: Option<&str>) -> Result<String, RefreshError> {
        let plan = self.plan;
        let mut spec = plan.spec.clone();
        spec.image = pinned.to_string();
        spec.labels.insert(LABEL_IMAGE.into(), pinned.to_string());
        spec.labels
            .insert(owner::LABEL_INSTANCE.into(), owner::new_instance());
        if let Some(d) = digest {
            spec.labels.insert(LABEL_DIGEST.into(), d.to_string());
        }
        self.say(format!("creating {} ({} backend)", spec.name, plan.backend));
        let created = if plan.backend == Backend::Distrobox {
            run_program(&distrobox::create_command(&spec, !plan.engine.rootless)).await
        } else {
            self.engine.create(&spec).await.map(|_| ())
        };
        if let Err(e) = created {
            let _ = self.engine.remove(&spec.name).await;
            return Err(self.fail("creating the new container", e));
        }
        Ok(spec.name)
    }

    /// Starts the new container and checks that it keeps running.
    async fn check(&mut self, temp: &str) -> Result<(), RefreshError> {
        self.say(format!("starting {temp} and checking it runs"));
        if let Err(e) = self.engine.start_and_check(temp).await {
            let _ = self.engine.remove(temp).await;
            return Err(self.fail("starting the new container (it was removed again)", e));
        }
        Ok(())
    }

    /// Puts the new container in the old one's place and removes the old
    /// one; returns warnings from after the swap.
    async fn swap(&mut self, temp: &str) -> Result<Vec<String>, RefreshError> {
        let (engine, plan) = (self.engine, self.plan);
        if plan.replaces.is_some() {
            self.say(format!("replacing {}", plan.name));
            if let Err(e) = engine.rename(&plan.name, &plan.old_name).await {
                let _ = engine.remove(temp).await;
                return Err(self.fail(
                    "moving the old container aside (the new one was removed)",
                    e,
                ));
            }
            if let Err(e) = engine.rename(temp, &plan.name).await {
                let _ = engine.rename(&plan.old_name, &plan.name).await;
                let _ = engine.remove(temp).await;
                return Err(self.fail("renaming the new container (the old one was put back)", e));
            }
        } else if let Err(e) = engine.rename(temp, &plan.name).await {
            let _ = engine.remove(temp).await;
            return Err(self.fail("naming the new container (it was removed)", e));
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
        Ok(warnings)
    }
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

/// How long `distrobox create` may take (the image is already local; on
/// podman's vfs storage, rootless, create copies every layer).
const PROGRAM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(180);

/// Runs a program to completion within [`PROGRAM_TIMEOUT`] (stopped after
/// it); a failure carries the end of its output.
async fn run_program(argv: &[String]) -> Result<(), EngineError> {
    let out = crate::proc::run_async(argv, PROGRAM_TIMEOUT)
        .await
        .map_err(|e| EngineError::Stream {
            context: format!("running {}", argv[0]),
            message: format!("{e} (is {} installed?)", argv[0]),
        })?
        .ok_or_else(|| EngineError::Stream {
            context: format!("{} did not finish", argv[..2].join(" ")),
            message: format!(
                "stopped after {}s; check that the engine answers (`podman ps`) and that sudo does not ask for a password",
                PROGRAM_TIMEOUT.as_secs()
            ),
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
