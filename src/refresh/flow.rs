//! `halobox refresh` from start to end, as one library entry point
//! ([`run()`]): resolve the target, read the host and the engine, plan, then
//! report the plan (a dry run) or carry it out, staged or at once, and
//! check the new container from inside. Its words go to a [`Reporter`];
//! the question before a container is replaced goes to an [`Ask`].

use anyhow::Context as _;

use super::journal::{Journal, Step};
use super::plan::{RefreshPlan, Source};
use super::prepare::{self, RefreshRequest};
use super::render::{consequences, plan_text, rollback};
use super::{repair, run, word};
use crate::backend::Backend;
use crate::check;
use crate::doctor::Status;
use crate::doctor::render::Style;
use crate::engine::{Engine, connect};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::reporter::Reporter;
use crate::{lock, signals};

/// One `halobox refresh`: the request and how this run goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// The container and image asked for.
    pub request: RefreshRequest,
    /// The engine's address (`None`: discovered).
    pub engine: Option<String>,
    /// Report the plan, change nothing.
    pub dry_run: bool,
    /// JSON instead of text.
    pub json: bool,
    /// Check the new container from inside.
    pub check: bool,
    /// Wait for another run on the same container instead of failing.
    pub wait: bool,
    /// Put the new container in place beside the old one and wait for
    /// `cluster refresh`'s word on stdin.
    pub stage: bool,
    /// Remove what a staged run left, and stop.
    pub discard_staged: bool,
    /// `--yes`: replace without asking.
    pub yes: bool,
    /// Colour in the check's report.
    pub color: bool,
}

/// How a run asks before it replaces a container.
pub use crate::reporter::Ask;

/// How a run ended (errors aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Done, or nothing to do.
    Done,
    /// Not confirmed: nothing changed.
    Declined,
    /// The new container is in place but fails its check.
    CheckFailed,
}

/// Runs `halobox refresh` as `o` asks.
pub fn run(o: &Options, r: &mut dyn Reporter, ask: &mut dyn Ask) -> anyhow::Result<Ended> {
    let req = &o.request;
    let target = prepare::target(req)?;
    let facts = host::gather(HostRoot::live(), GatherOptions::default());
    crate::engine::block_on(async {
        let mut engine = connect(o.engine.as_deref()).await?;
        if o.dry_run {
            let repairs = repair::survey(&engine, &target.name).await?;
            let plan = prepare::plan(&mut engine, &facts, req, &target).await?;
            r.out(&plan_text(&plan, &repairs, o.json, o.check)?);
            return Ok(Ended::Done);
        }
        let address = engine.info.address.clone();
        let _lock = lock::acquire(&address, &target.name, o.wait, &mut |holder| {
            r.note(&format!(
                "==> waiting for the halobox run{} that is changing {}\n",
                holder.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                target.name
            ))
        })?;
        let journal = Journal::open(&address, &target.name)?;
        let staged = journal.read()?.filter(|e| e.step == Step::Staged);
        if o.discard_staged || (o.stage && staged.is_some()) {
            let line = match &staged {
                Some(e) => run::discard(&engine, &journal, e).await?,
                None => format!("nothing is staged for {}", target.name),
            };
            r.note(&format!("==> {line}\n"));
            if o.discard_staged {
                return Ok(Ended::Done);
            }
        }
        let mut caught = signals::Caught::install().context("catching SIGINT and SIGTERM")?;
        // A staged run takes the cluster refresh's word on stdin; its end
        // (the link dropped) is a SIGTERM, caught from here on.
        let listener = o.stage.then(word::Listener::start);
        let healed = repair::heal(&engine, &target.name).await?;
        for line in &healed.done {
            r.note(&format!("==> repaired {}: {line}\n", target.name));
        }
        if !healed.unresolved.is_empty() {
            anyhow::bail!(
                "{} cannot be refreshed until what an interrupted refresh left is cleared up:\n  {}",
                target.name,
                healed.unresolved.join("\n  ")
            );
        }
        let plan = prepare::plan(&mut engine, &facts, req, &target).await?;
        if !confirm(&engine, &plan, o.yes, ask).await? {
            r.note("nothing changed\n");
            return Ok(Ended::Declined);
        }
        for note in &plan.notes {
            r.note(&format!("note: {note}\n"));
        }
        if matches!(plan.backend, Backend::Podman | Backend::Docker) {
            crate::container::staged::stage()
                .context("cannot put halobox into the folder its containers see")?;
        }
        // Progress never fails the run: a staged run's stderr is an ssh
        // link that may be gone while it puts things back (the reporter
        // does not fail on a closed stream).
        let mut say = |line: String| r.note(&format!("==> {line}\n"));
        let result = match listener {
            Some(listener) => {
                let staged = run::stage(&engine, &plan, &journal, &mut caught, &mut say).await;
                let staged = staged.map_err(|e| reraised(e, r))?;
                let mut line = serde_json::to_value(&staged)?;
                if o.check {
                    line["check"] = serde_json::to_value(
                        check_staged(&engine, &staged.staged, &target.name, &facts, r).await,
                    )?;
                }
                r.out(&format!("{}\n", serde_json::to_string(&line)?));
                let word = tokio::select! {
                    w = listener.word() => w,
                    _ = caught.wait() => word::Word::Discard,
                };
                if word == word::Word::Discard {
                    let line = run::discard(&engine, &journal, &staged.entry).await?;
                    r.note(&format!("==> {line}\n"));
                    if let Some(s) = caught.arrived() {
                        signals::reraise(s);
                    }
                    return Ok(Ended::Done);
                }
                let mut say = |line: String| r.note(&format!("==> {line}\n"));
                run::commit(
                    &engine,
                    &plan,
                    &journal,
                    staged.entry,
                    &mut caught,
                    &mut say,
                )
                .await
            }
            None => run::execute(&engine, &plan, &journal, &mut caught, &mut say).await,
        };
        let outcome = result.map_err(|e| reraised(e, r))?;
        let report = match o.check && !o.stage && outcome.signal.is_none() {
            true => Some(check_new(&engine, &outcome.name, &facts, r).await?),
            false => None,
        };
        finish(o, &outcome, report.as_ref(), r)
    })?
}

/// The error of a run a signal stopped: said, then the signal raised
/// again (the process ends as the signal asks); any other error as is.
fn reraised(e: run::RefreshError, r: &mut dyn Reporter) -> anyhow::Error {
    if let Some(s) = e.signal() {
        r.note(&format!("error: {e}\n"));
        signals::reraise(s);
    }
    e.into()
}

/// Says how the refresh ended: the new container (text or JSON), its
/// warnings, a signal that arrived during the swap (raised again), and the
/// check of the new container.
fn finish(
    o: &Options,
    outcome: &run::Outcome,
    report: Option<&check::Report>,
    r: &mut dyn Reporter,
) -> anyhow::Result<Ended> {
    if o.json {
        let mut doc = serde_json::to_value(outcome)?;
        if let Some(rep) = report {
            doc["check"] = serde_json::to_value(rep)?;
        }
        r.out(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
    } else {
        r.out(&format!(
            "{} now runs {}{}\n",
            outcome.name,
            outcome.image,
            outcome
                .kept
                .as_ref()
                .map(|k| format!(" (the old one is kept, stopped, as {k})"))
                .unwrap_or_default()
        ));
        if let Some(d) = &outcome.deleted {
            r.out(&format!("deleted the older {d}\n"));
        }
        r.out(&format!("enter it with: halobox enter {}\n", outcome.name));
    }
    for w in &outcome.warnings {
        r.note(&format!("warning: {w}\n"));
    }
    if let Some(s) = outcome.signal {
        r.note(&format!(
            "{} arrived during the swap: the swap was finished first, pruning was skipped\n",
            signals::name(s)
        ));
        signals::reraise(s);
    }
    if let Some(rep) = report {
        if !o.json {
            r.out(&check::human(rep, Style { color: o.color }));
        }
        if rep.has_failures() {
            let failed: Vec<&str> = rep
                .checks
                .iter()
                .filter(|c| c.status == Status::Fail)
                .map(|c| c.id.as_str())
                .collect();
            r.note(&format!(
                "error: the new {} fails {}\n  hint: it stays in place; roll back with `{}`\n",
                outcome.name,
                failed.join(", "),
                rollback(&outcome.name)
            ));
            return Ok(Ended::CheckFailed);
        }
    }
    Ok(Ended::Done)
}

/// Asks before a refresh replaces a container: where someone can answer,
/// with what is stopped, kept and deleted (default no); elsewhere only
/// `--yes` goes on.
async fn confirm(
    engine: &Engine,
    plan: &RefreshPlan,
    yes: bool,
    ask: &mut dyn Ask,
) -> anyhow::Result<bool> {
    let Some(current) = &plan.current else {
        return Ok(true);
    };
    if yes {
        return Ok(true);
    }
    if !ask.can_ask() {
        return Err(UsageError(format!(
            "not replacing {} without confirmation: pass --yes\n  hint: {}",
            plan.name,
            consequences(plan, None, None).join(" ")
        ))
        .into());
    }
    let mine = engine.changes(&current.id).await.ok();
    let older = match &plan.retired {
        Some(r) => engine.changes(&r.id).await.ok(),
        None => None,
    };
    let question = match &plan.source {
        Source::Prev { container } => format!("Roll {} back to {}?", plan.name, container.name),
        _ => format!("Replace {} once the new container stays up?", plan.name),
    };
    ask.ask(&consequences(plan, Some(mine), Some(older)), &question)
}

/// What a staged run's `--check` found: the staged container checked from
/// inside before any swap, against the container it would replace.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StagedCheck {
    /// The checks the staged container FAILs that the current one passes
    /// (each `ID: summary`): any of them keeps the cluster on its old
    /// containers.
    pub new_failures: Vec<String>,
    /// Every check the staged container FAILs.
    pub failures: Vec<String>,
    /// Why it could not be checked, when it could not.
    pub error: Option<String>,
}

/// The FAILs of `staged` that `current` (the container it would replace,
/// when it could be checked) does not have, each `ID: summary`.
pub fn new_failures(staged: &check::Report, current: Option<&check::Report>) -> Vec<String> {
    let failed_before = |id: &str| {
        current.is_some_and(|c| {
            c.checks
                .iter()
                .any(|x| x.id == id && x.status == Status::Fail)
        })
    };
    staged
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail && !failed_before(&c.id))
        .map(|c| format!("{}: {}", c.id, c.summary))
        .collect()
}

/// `--check` of a staged run: `halobox check` in the staged container and
/// in `current` (the one it would replace), before the swap.
async fn check_staged(
    engine: &Engine,
    staged: &str,
    current: &str,
    facts: &host::HostFacts,
    r: &mut dyn Reporter,
) -> StagedCheck {
    r.note(&format!("==> check the staged {staged} from inside\n"));
    let new = match check::run::check(engine, staged, Some(facts)).await {
        Ok(rep) => rep,
        Err(e) => {
            return StagedCheck {
                new_failures: vec![format!(
                    "check: the staged container could not be checked: {e:#}"
                )],
                failures: vec![],
                error: Some(format!("{e:#}")),
            };
        }
    };
    let old = check::run::check(engine, current, Some(facts)).await.ok();
    let failures = new_failures(&new, None);
    StagedCheck {
        new_failures: new_failures(&new, old.as_ref()),
        failures,
        error: None,
    }
}

/// `--check`: the new container checked from inside; an error keeps it.
async fn check_new(
    engine: &Engine,
    name: &str,
    facts: &host::HostFacts,
    r: &mut dyn Reporter,
) -> anyhow::Result<check::Report> {
    r.note(&format!("==> check {name} from inside\n"));
    check::run::check(engine, name, Some(facts))
        .await
        .with_context(|| {
            format!(
                "{name} was replaced but could not be checked (it stays; roll back with `{}`)",
                rollback(name)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(fails: &[&str]) -> check::Report {
        let checks: Vec<crate::doctor::Check> = ["gpu", "python.torch", "rdma.ports"]
            .iter()
            .map(|id| match fails.contains(id) {
                true => crate::doctor::Check::fail(id, format!("{id} says"), "fix"),
                false => crate::doctor::Check::pass(id, format!("{id} says")),
            })
            .collect();
        check::Report {
            schema_version: 1,
            container: "c".into(),
            backend: None,
            image: "i".into(),
            image_id: "sha256:x".into(),
            via: "engine exec".into(),
            python: None,
            summary: crate::doctor::Summary::of(&checks),
            checks,
        }
    }

    #[test]
    fn a_staged_container_fails_only_what_the_current_one_passes() {
        let now = report(&["gpu"]);
        let staged = report(&["gpu", "python.torch"]);
        assert_eq!(
            new_failures(&staged, Some(&now)),
            ["python.torch: python.torch says"]
        );
        assert_eq!(new_failures(&staged, None).len(), 2);
        assert!(new_failures(&now, Some(&now)).is_empty());
    }
}
