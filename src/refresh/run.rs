//! Carries out a [`RefreshPlan`] against the engine. Until the new container
//! has kept running through the settle window nothing about the old one
//! changes; any failure before that removes what this run created (by the id
//! the engine gave it) and leaves the old container exactly as it was. The
//! swap is two renames, recorded in the [`journal`](super::journal) and
//! shielded from SIGINT/SIGTERM; the old container is then stopped and kept
//! as `NAME-prev`, and the `NAME-prev` before it is deleted.

use std::time::Duration;

use serde::Serialize;

use super::check::{self, Readiness};
use super::journal::{Entry, Journal, JournalError, StagedImage, Step};
use super::plan::{Known, RefreshPlan, Source};
use crate::backend::Backend;
use crate::container::spec::{LABEL_DIGEST, LABEL_IMAGE};
use crate::container::{distrobox, owner};
use crate::engine::images::LocalImage;
use crate::engine::{Engine, EngineError};
use crate::image::publish::VERIFIED;
use crate::image_ref::{ImageRef, date_tag};
use crate::signals::{self, Caught};

/// The OCI label that dates an image.
pub const CREATED_LABEL: &str = "org.opencontainers.image.created";
/// How long a stopped container gets between SIGTERM and SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// What a finished refresh did.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The container now in place.
    pub name: String,
    /// The image it runs (pinned).
    pub image: String,
    /// The image's digest, when it has one.
    pub digest: Option<String>,
    /// The container it replaced.
    pub replaced: Option<String>,
    /// Where the replaced container is kept (stopped, with its files).
    pub kept: Option<String>,
    /// The older kept container deleted to keep one generation.
    pub deleted: Option<String>,
    /// Pinned images removed.
    pub pruned: Vec<String>,
    /// Things that went wrong after the new container was in place.
    pub warnings: Vec<String>,
    /// How long each step took.
    pub timings: Vec<StepTime>,
    /// The signal that arrived during the swap: the swap was finished, then
    /// the run stopped before pruning.
    pub interrupted: Option<String>,
    /// That signal's number.
    #[serde(skip)]
    pub signal: Option<i32>,
}

/// The wall time of one step.
#[derive(Debug, Clone, Serialize)]
pub struct StepTime {
    /// `pull`, `pin`, `create`, `start_check` (start, readiness and the
    /// settle window), `swap` (the renames), `retire_and_prune` (old
    /// container stopped and kept, older one deleted; pinned images
    /// pruned alongside).
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

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The journal could not be written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// SIGINT or SIGTERM arrived.
    #[error("interrupted by {}", signals::name(*.0))]
    Signal(i32),
}

/// A refresh that stopped.
#[derive(Debug, thiserror::Error)]
#[error("refresh failed while {step}: {cause}\n  {state}")]
pub struct RefreshError {
    /// The step that failed.
    pub step: String,
    /// Why (shown in the message, so not chained again).
    pub cause: Box<Cause>,
    /// What state the containers are in: the real result of every undo.
    pub state: String,
}

impl RefreshError {
    /// The signal that stopped the run, if one did.
    pub fn signal(&self) -> Option<i32> {
        match *self.cause {
            Cause::Signal(s) => Some(s),
            _ => None,
        }
    }
}

/// Runs `plan`, recording its steps in `journal`; `say` receives one line
/// per step. `signals` stop the run before the swap and are held across it.
pub async fn execute(
    engine: &Engine,
    plan: &RefreshPlan,
    journal: &Journal,
    signals: &mut Caught,
    say: &mut dyn FnMut(String),
) -> Result<Outcome, RefreshError> {
    let mut steps = Steps::new(engine, plan, journal, say);
    let mut laps = Laps::new();
    let made = make_new(&mut steps, &mut laps, signals).await?;
    finish(steps, laps, signals, made).await
}

/// A staged refresh: the new container, checked, under the temporary name.
#[derive(Debug, Clone, Serialize)]
pub struct Staged {
    /// The container name it is staged for.
    pub name: String,
    /// The staged container's id.
    pub staged: String,
    /// The image it runs (pinned).
    pub image: String,
    /// The image's digest, when it has one.
    pub digest: Option<String>,
    /// The image's id (`sha256:…`): the same on every engine that has the
    /// same image, pulled or loaded.
    pub image_id: Option<String>,
    /// How long each step took.
    pub timings: Vec<StepTime>,
    /// What the journal records of it (for [`commit`] and [`discard`]).
    #[serde(skip)]
    pub entry: Entry,
}

/// Runs `plan` up to the swap: pull, pin, create and check the new
/// container, then records it as staged in `journal` and leaves it running
/// under the temporary name; the old container is untouched. A failure
/// removes what the run made, as [`execute`] does.
pub async fn stage(
    engine: &Engine,
    plan: &RefreshPlan,
    journal: &Journal,
    signals: &mut Caught,
    say: &mut dyn FnMut(String),
) -> Result<Staged, RefreshError> {
    let mut steps = Steps::new(engine, plan, journal, say);
    let mut laps = Laps::new();
    let made = make_new(&mut steps, &mut laps, signals).await?;
    steps.entry.staged = Some(StagedImage {
        image: made.image.clone(),
        digest: made.digest.clone(),
    });
    steps.entry.step = Step::Staged;
    if let Err(e) = journal.write(&steps.entry) {
        return Err(steps.undo("recording the staged container", e.into()).await);
    }
    Ok(Staged {
        name: plan.name.clone(),
        staged: made.new_id,
        image: made.image,
        digest: made.digest,
        image_id: made.image_id,
        timings: laps.done,
        entry: steps.entry,
    })
}

/// Swaps in the container a [`stage`] of `plan` left (`entry`; the lock
/// held since), then retires the old one and prunes as [`execute`] does.
pub async fn commit(
    engine: &Engine,
    plan: &RefreshPlan,
    journal: &Journal,
    entry: Entry,
    signals: &mut Caught,
    say: &mut dyn FnMut(String),
) -> Result<Outcome, RefreshError> {
    let mut steps = Steps::new(engine, plan, journal, say);
    let staged = entry.staged.clone();
    let made = Made {
        new_id: entry.new_id.clone().unwrap_or_default(),
        image: staged.as_ref().map(|s| s.image.clone()).unwrap_or_default(),
        digest: staged.and_then(|s| s.digest),
        image_id: None,
    };
    steps.entry = Entry {
        pid: std::process::id(),
        ..entry
    };
    finish(steps, Laps::new(), signals, made).await
}

/// Removes the container a [`stage`] left (`entry`) and clears the
/// journal; the old container was never touched. Returns what was done.
pub async fn discard(
    engine: &Engine,
    journal: &Journal,
    entry: &Entry,
) -> Result<String, EngineError> {
    let Some(id) = entry.new_id.as_deref() else {
        journal.clear().map_err(|e| EngineError::Stream {
            context: "clearing the refresh journal".into(),
            message: e.to_string(),
        })?;
        return Ok("nothing was staged".into());
    };
    if let Err(e) = engine.remove(id).await
        && engine.container(id).await.ok().flatten().is_some()
    {
        return Err(e);
    }
    journal.clear().map_err(|e| EngineError::Stream {
        context: "clearing the refresh journal".into(),
        message: e.to_string(),
    })?;
    Ok(format!(
        "removed the staged container {}; {} was left as it was",
        short(id),
        entry.name
    ))
}

/// The new container, checked and not yet swapped in.
struct Made {
    new_id: String,
    image: String,
    digest: Option<String>,
    /// The image's id, when this run inspected it.
    image_id: Option<String>,
}

/// Pull, pin, create and check (or, for a rollback, start the kept
/// container and check it).
async fn make_new(
    steps: &mut Steps<'_>,
    laps: &mut Laps,
    signals: &mut Caught,
) -> Result<Made, RefreshError> {
    let plan = steps.plan;
    let (new_id, image, digest, image_id) = match &plan.source {
        Source::Prev { container } => {
            steps.reuse(container)?;
            (container.id.clone(), container.image.clone(), None, None)
        }
        Source::Pull { .. } | Source::Pinned { .. } => {
            let pulled = tokio::select! {
                r = steps.pull() => r,
                s = signals.wait() => Err(steps.fail("pulling", Cause::Signal(s))),
            };
            let local = pulled?;
            laps.lap("pull");
            let digest = local.digest_for(&plan.repository);
            if let Some(d) = &digest {
                steps.say(format!("image digest {d}"));
            }
            let pinned = steps.pin(&local).await?;
            laps.lap("pin");
            steps
                .checkpoint("creating the new container", signals)
                .await?;
            let id = steps.create(&pinned, digest.as_deref()).await?;
            laps.lap("create");
            (id, pinned, digest, Some(local.id))
        }
    };
    steps
        .checkpoint("starting the new container", signals)
        .await?;
    steps.check(&new_id, signals).await?;
    laps.lap("start_check");
    Ok(Made {
        new_id,
        image,
        digest,
        image_id,
    })
}

/// The swap, the retiring of the old container and the pruning.
async fn finish(
    mut steps: Steps<'_>,
    mut laps: Laps,
    signals: &mut Caught,
    made: Made,
) -> Result<Outcome, RefreshError> {
    let (engine, plan) = (steps.engine, steps.plan);
    let Made {
        new_id,
        image,
        digest,
        ..
    } = made;
    steps.checkpoint("swapping", signals).await?;
    steps.swap(&new_id).await?;
    laps.lap("swap");
    // Retiring the old container and pruning images are independent: run
    // them together. A signal cancels the pruning, never the retiring.
    let pruning = async {
        if signals.arrived().is_some() {
            return (Vec::new(), Vec::new());
        }
        tokio::select! {
            done = prune(engine, plan, &image) => done,
            _ = signals.wait() => (Vec::new(), Vec::new()),
        }
    };
    let ((kept, deleted, mut warnings), (pruned, prune_warnings)) =
        tokio::join!(steps.retire(), pruning);
    warnings.extend(prune_warnings);
    laps.lap("retire_and_prune");
    for p in &pruned {
        steps.say(format!("removed old image {p}"));
    }
    let signal = signals.arrived();
    Ok(Outcome {
        name: plan.name.clone(),
        image,
        digest,
        replaced: plan.replaces.clone(),
        kept,
        deleted,
        pruned,
        warnings,
        timings: laps.done,
        interrupted: signal.map(|s| signals::name(s).to_string()),
        signal,
    })
}

/// How long to pause at `point`: when `HALOBOX_TEST_PAUSE_AT` names it,
/// `HALOBOX_TEST_PAUSE_SECS` seconds (default 5), after printing
/// `HALOBOX_TEST_PAUSED at POINT (pid N)`. The tests use it to signal or
/// kill a real refresh between the two renames (`swap`), to hold its lock,
/// and to kill a `cluster refresh` once every node is staged (`commit`).
/// Nothing else reads these variables.
pub fn test_pause(point: &str) -> Option<Duration> {
    if std::env::var("HALOBOX_TEST_PAUSE_AT").as_deref() != Ok(point) {
        return None;
    }
    let secs = std::env::var("HALOBOX_TEST_PAUSE_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| (0.0..=600.0).contains(s))
        .unwrap_or(5.0);
    eprintln!(
        "HALOBOX_TEST_PAUSED at {point} (pid {})",
        std::process::id()
    );
    Some(Duration::from_secs_f64(secs))
}

/// The steps of one refresh, each undoing what it made when it fails.
struct Steps<'a> {
    engine: &'a Engine,
    plan: &'a RefreshPlan,
    journal: &'a Journal,
    say: &'a mut dyn FnMut(String),
    /// What this run records of itself.
    entry: Entry,
    /// The engine's command, for the commands failure messages suggest.
    cli: String,
    /// Warnings from after the swap.
    late: Vec<String>,
}

impl<'a> Steps<'a> {
    fn new(
        engine: &'a Engine,
        plan: &'a RefreshPlan,
        journal: &'a Journal,
        say: &'a mut dyn FnMut(String),
    ) -> Self {
        let entry = Entry {
            engine: engine.info.address.clone(),
            name: plan.name.clone(),
            pid: std::process::id(),
            step: Step::Creating,
            new_id: None,
            new_created: true,
            old_id: plan.current.as_ref().map(|c| c.id.clone()),
            prev_id: plan.retired.as_ref().map(|c| c.id.clone()),
            staged: None,
        };
        Self {
            engine,
            plan,
            journal,
            say,
            entry,
            cli: engine.info.kind.to_string(),
            late: Vec::new(),
        }
    }

    fn say(&mut self, line: String) {
        (self.say)(line);
    }

    /// What is true of the old container while it is untouched.
    fn untouched(&self) -> String {
        match &self.plan.replaces {
            Some(name) => format!("the existing container {name} was left as it was"),
            None => "no existing container was changed".to_string(),
        }
    }

    fn fail(&self, step: &str, cause: impl Into<Cause>) -> RefreshError {
        RefreshError {
            step: step.to_string(),
            cause: Box::new(cause.into()),
            state: self.untouched(),
        }
    }

    /// Writes the journal at `step`.
    fn record(&mut self, step: Step) -> Result<(), JournalError> {
        self.entry.step = step;
        self.journal.write(&self.entry)
    }

    /// Stops the run when a signal arrived, undoing what it made.
    async fn checkpoint(&mut self, step: &str, signals: &mut Caught) -> Result<(), RefreshError> {
        match signals.arrived() {
            None => Ok(()),
            Some(s) => Err(self.undo(step, Cause::Signal(s)).await),
        }
    }

    /// Undoes what the run made before the swap (the container it created
    /// is removed by its id; a `NAME-prev` it started is stopped again) and
    /// returns `cause` with the real result of each undo.
    async fn undo(&mut self, step: &str, cause: Cause) -> RefreshError {
        let head = self.untouched();
        self.undo_after(step, cause, head, true).await
    }

    /// [`Self::undo`] after the old container was moved: `head` says what
    /// became of it, and the journal stays unless it is back (`old_back`).
    async fn undo_after(
        &mut self,
        step: &str,
        cause: Cause,
        head: String,
        old_back: bool,
    ) -> RefreshError {
        let mut state = vec![head];
        let mut clean = old_back;
        if let Some(id) = self.entry.new_id.clone() {
            let (did, result) = if self.entry.new_created {
                ("removed", self.engine.remove(&id).await)
            } else {
                ("stopped again", self.engine.stop(&id, STOP_GRACE).await)
            };
            let which = if self.entry.new_created {
                format!("the new container {}", short(&id))
            } else {
                self.plan.prev_name.clone()
            };
            match result {
                Ok(()) => state.push(format!("{which} was {did}")),
                Err(e) => {
                    clean = false;
                    let fix = if self.entry.new_created {
                        format!("{} rm -f {}", self.cli, short(&id))
                    } else {
                        format!("{} stop {}", self.cli, short(&id))
                    };
                    state.push(format!("{which} could not be {did} ({e}): run `{fix}`"));
                }
            }
        }
        if clean && let Err(e) = self.journal.clear() {
            state.push(e.to_string());
        }
        RefreshError {
            step: step.to_string(),
            cause: Box::new(cause),
            state: state.join("; "),
        }
    }

    /// Rollback: the kept `NAME-prev` is the container that takes the name.
    fn reuse(&mut self, prev: &Known) -> Result<(), RefreshError> {
        self.entry.new_id = Some(prev.id.clone());
        self.entry.new_created = false;
        self.record(Step::Created)
            .map_err(|e| self.fail("recording the refresh journal", e))
    }

    /// The image the plan names, and whether it is pulled and pinned (not
    /// already a pinned one).
    fn source(&self) -> (&'a str, bool) {
        match &self.plan.source {
            Source::Pull { reference } => (reference, true),
            Source::Pinned { reference } => (reference, false),
            Source::Prev { container } => (&container.image, false),
        }
    }

    /// Pulls the image (unless it is already pinned) and inspects it.
    async fn pull(&mut self) -> Result<LocalImage, RefreshError> {
        let (reference, _) = self.source();
        let pulling = self.plan.pulling.as_ref();
        if let Some(p) = pulling.filter(|p| !p.pull) {
            self.say(format!("not pulling {reference}: {}", p.why));
        }
        if pulling.is_some_and(|p| p.pull) {
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
        if local.labels.get(VERIFIED).map(String::as_str) == Some("false") {
            self.late.push(format!(
                "{reference} is unverified ({VERIFIED}=false): its channel moved without the check on a Strix Halo node; run `halobox check` in the new container, or refresh to a dated tag that was checked"
            ));
        }
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
    /// image; returns its id.
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
        self.record(Step::Creating)
            .map_err(|e| self.fail("recording the refresh journal", e))?;
        let created = if plan.backend == Backend::Distrobox {
            match run_program(&distrobox::create_command(&spec, !plan.engine.rootless)).await {
                Ok(()) => self.engine.container(&spec.name).await.and_then(|c| {
                    c.map(|c| c.id).ok_or_else(|| EngineError::Stream {
                        context: format!("distrobox create {}", spec.name),
                        message: "it reported success but there is no such container".into(),
                    })
                }),
                Err(e) => Err(e),
            }
        } else {
            self.engine.create(&spec).await
        };
        match created {
            Ok(id) => {
                self.entry.new_id = Some(id.clone());
                match self.record(Step::Created) {
                    Ok(()) => Ok(id),
                    Err(e) => Err(self.undo("recording the refresh journal", e.into()).await),
                }
            }
            Err(e) => {
                // The journal says this run was creating it, under the lock:
                // a container of that name now is this run's own.
                if let Ok(Some(c)) = self.engine.container(&spec.name).await {
                    self.entry.new_id = Some(c.id);
                }
                Err(self.undo("creating the new container", e.into()).await)
            }
        }
    }

    /// Starts the new container and checks that it stays up.
    async fn check(&mut self, id: &str, signals: &mut Caught) -> Result<(), RefreshError> {
        let shown = match &self.plan.source {
            Source::Prev { container } => container.name.clone(),
            _ => self.plan.temp_name.clone(),
        };
        self.say(format!(
            "starting {shown} and checking it keeps running for {:.1}s",
            self.plan.settle_secs
        ));
        let ready = Readiness {
            toolbox_stamps: self.plan.ready_stamps.as_ref().map(Into::into),
            settle: Duration::from_secs_f64(self.plan.settle_secs),
        };
        let checked = tokio::select! {
            r = check::start_and_settle(self.engine, id, &ready) => r.map(|_| ()).map_err(Cause::from),
            s = signals.wait() => Err(Cause::Signal(s)),
        };
        match checked {
            Ok(()) => Ok(()),
            Err(cause) => Err(self.undo("starting the new container", cause).await),
        }
    }

    /// Puts the new container in the old one's place: the old one is renamed
    /// aside, then the new one takes the name. Each failure puts back what
    /// was moved and says whether that worked.
    async fn swap(&mut self, new_id: &str) -> Result<(), RefreshError> {
        let (engine, plan) = (self.engine, self.plan);
        if let Err(e) = self.record(Step::Swapping) {
            return Err(self.undo("recording the refresh journal", e.into()).await);
        }
        if let Some(current) = &plan.current {
            self.say(format!("replacing {}", plan.name));
            if let Err(e) = engine.rename(&current.id, &plan.old_name).await {
                return Err(self
                    .undo(&format!("moving {} aside", plan.name), e.into())
                    .await);
            }
        }
        if let Some(pause) = test_pause("swap") {
            tokio::time::sleep(pause).await;
        }
        let Err(e) = engine.rename(new_id, &plan.name).await else {
            // The swap is done; a journal that cannot say so is a warning
            // (the repair finishes the retiring from the names alone).
            if let Err(e) = self.record(Step::Swapped) {
                self.late.push(e.to_string());
            }
            return Ok(());
        };
        let (head, back) = match &plan.current {
            None => (self.untouched(), true),
            Some(current) => match engine.rename(&current.id, &plan.name).await {
                Ok(()) => (
                    format!("the old {} was put back under its name", plan.name),
                    true,
                ),
                Err(back) => (
                    format!(
                        "putting the old {} back failed ({back}): it is {} now; run `{} rename {} {}` once the name is free",
                        plan.name,
                        plan.old_name,
                        self.cli,
                        short(&current.id),
                        plan.name
                    ),
                    false,
                ),
            },
        };
        let step = format!("giving the new container the name {}", plan.name);
        Err(self.undo_after(&step, e.into(), head, back).await)
    }

    /// After the swap: stops the old container and keeps it as `NAME-prev`,
    /// deleting the `NAME-prev` before it. Returns (kept, deleted, warnings);
    /// the journal stays when something is left undone, for the next run.
    async fn retire(&mut self) -> (Option<String>, Option<String>, Vec<String>) {
        let (engine, plan) = (self.engine, self.plan);
        let mut warnings = std::mem::take(&mut self.late);
        let (mut kept, mut deleted) = (None, None);
        if let Some(current) = &plan.current {
            self.say(format!(
                "stopping the old {} and keeping it as {}",
                plan.name, plan.prev_name
            ));
            let cli = &self.cli;
            let id = short(&current.id);
            let deleting = async {
                match &plan.retired {
                    Some(older) => Some((older, engine.remove(&older.id).await)),
                    None => None,
                }
            };
            let (stopped, removed) = tokio::join!(engine.stop(&current.id, STOP_GRACE), deleting);
            if let Err(e) = stopped {
                warnings.push(format!(
                    "could not stop the old container {} ({e}): run `{cli} stop {id}`",
                    plan.old_name
                ));
            }
            let mut free = true;
            if let Some((older, removed)) = removed {
                match removed {
                    Ok(()) => deleted = Some(older.name.clone()),
                    Err(e) => {
                        free = false;
                        warnings.push(format!(
                            "could not delete the older {} ({e}); the old container stays as {}: run `{cli} rm -f {}` then `{cli} rename {id} {}`",
                            older.name,
                            plan.old_name,
                            short(&older.id),
                            plan.prev_name
                        ));
                    }
                }
            }
            if free {
                match engine.rename(&current.id, &plan.prev_name).await {
                    Ok(()) => kept = Some(plan.prev_name.clone()),
                    Err(e) => warnings.push(format!(
                        "could not rename the old container {} to {} ({e}): run `{cli} rename {id} {}`",
                        plan.old_name, plan.prev_name, plan.prev_name
                    )),
                }
            }
        }
        if warnings.is_empty()
            && let Err(e) = self.journal.clear()
        {
            warnings.push(e.to_string());
        }
        (kept, deleted, warnings)
    }
}

/// The first 12 characters of an id.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
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
