//! Repairs what an interrupted refresh left: `NAME-halobox-old` (the user's
//! container, moved aside for the swap) and `NAME-halobox-new` (the one the
//! run made), read together with the run's [`journal`](super::journal).
//! [`decide`] is pure; [`heal`] carries it out under the refresh lock and
//! reports the real result of every step. `refresh`, `enter` and `list` run
//! it first.

use super::journal::{Entry, Journal, JournalError, Step};
use super::plan::{NEW_SUFFIX, OLD_SUFFIX, PREV_SUFFIX, is_managed};
use crate::container::ops::ContainerInfo;
use crate::engine::{Engine, EngineError};
use crate::lock;

/// A container seen under one of the names a refresh uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its id.
    pub id: String,
    /// halobox made it.
    pub managed: bool,
    /// It runs.
    pub running: bool,
}

impl Seen {
    fn of(c: &ContainerInfo) -> Seen {
        Seen {
            id: c.id.clone(),
            managed: is_managed(c),
            running: c.state == "running",
        }
    }
}

/// The containers under `NAME`, `NAME-halobox-old`, `NAME-halobox-new`
/// and `NAME-prev`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    /// `NAME`.
    pub current: Option<Seen>,
    /// `NAME-halobox-old`.
    pub old: Option<Seen>,
    /// `NAME-halobox-new`.
    pub new: Option<Seen>,
    /// `NAME-prev`.
    pub prev: Option<Seen>,
}

/// One repair step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Rename container `id` to `to`.
    Rename {
        /// Container id.
        id: String,
        /// New name.
        to: String,
        /// What it achieves.
        why: String,
    },
    /// Stop container `id`.
    Stop {
        /// Container id.
        id: String,
        /// What it achieves.
        why: String,
    },
    /// Remove container `id` (one the journal says the run made itself,
    /// or the `NAME-prev` generation it was retiring).
    Remove {
        /// Container id.
        id: String,
        /// What it achieves.
        why: String,
    },
    /// Remove the journal entry.
    ClearJournal,
}

/// What a repair will do, and what it leaves to the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Steps halobox takes.
    pub actions: Vec<Action>,
    /// What it cannot decide, each with the exact command to run.
    pub unresolved: Vec<String>,
}

impl Decision {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty() && self.unresolved.is_empty()
    }
}

/// Decides the repair of `name` from the containers `seen` under its names
/// and the journal `entry` of the run that was interrupted. `cli` is the
/// engine's command (`podman`, `docker`) for the commands it suggests.
pub fn decide(name: &str, seen: &Names, entry: Option<&Entry>, cli: &str) -> Decision {
    let (old_name, new_name, prev_name) = (
        format!("{name}{OLD_SUFFIX}"),
        format!("{name}{NEW_SUFFIX}"),
        format!("{name}{PREV_SUFFIX}"),
    );
    let mut d = Decision::default();
    let is =
        |id: Option<&String>, seen: &Option<Seen>| seen.as_ref().is_some_and(|s| id == Some(&s.id));
    if let Some(e) = entry.filter(|e| e.step == Step::Staged)
        && is(e.new_id.as_ref(), &seen.new)
    {
        d.unresolved.push(format!(
            "{new_name} ({}) is staged by `halobox cluster refresh`, which swaps it in or removes it; if that run is gone, remove it with `halobox refresh --discard-staged --name {name}`",
            short(e.new_id.as_deref().unwrap_or_default())
        ));
        return d;
    }
    if let Some(o) = &seen.old {
        let rename = |to: &str, why: String| Action::Rename {
            id: o.id.clone(),
            to: to.to_string(),
            why,
        };
        let swapped = entry
            .filter(|e| is(e.old_id.as_ref(), &seen.old) && is(e.new_id.as_ref(), &seen.current));
        match (&seen.current, swapped, &seen.prev) {
            (Some(c), None, _) if !c.managed => d.unresolved.push(format!(
                "{name} is taken by a container halobox did not make; {old_name} ({}) is the container {name} was: `{cli} rename {name} SOMETHING-ELSE && {cli} rename {} {name}`",
                short(&o.id),
                short(&o.id)
            )),
            (None, _, _) => d.actions.push(rename(
                name,
                format!("put {old_name} back as {name} (the container {name} was before the interrupted refresh)"),
            )),
            (Some(_), Some(e), prev) => {
                d.actions.push(Action::Stop {
                    id: o.id.clone(),
                    why: format!("stop {old_name}, which the refresh replaced"),
                });
                match prev {
                    Some(p) if Some(&p.id) != e.prev_id.as_ref() => d.unresolved.push(format!(
                        "{old_name} ({}) is the container {name} was before; {prev_name} exists too: `{cli} rm {prev_name}` if you do not need it, then `{cli} rename {} {prev_name}`",
                        short(&o.id),
                        short(&o.id)
                    )),
                    Some(p) => {
                        d.actions.push(Action::Remove {
                            id: p.id.clone(),
                            why: format!("remove the older {prev_name}, as the refresh was doing"),
                        });
                        d.actions
                            .push(rename(&prev_name, format!("keep {old_name} as {prev_name}")));
                    }
                    None => d
                        .actions
                        .push(rename(&prev_name, format!("keep {old_name} as {prev_name}"))),
                }
            }
            (Some(_), None, None) => d.actions.push(rename(
                &prev_name,
                format!("keep {old_name} (what {name} was before an interrupted refresh) as {prev_name}"),
            )),
            (Some(_), None, Some(_)) => d.unresolved.push(format!(
                "{old_name} ({}) is what {name} was before an interrupted refresh, and {prev_name} exists: keep it with `{cli} rm {prev_name} && {cli} rename {} {prev_name}`, or remove it with `{cli} rm -f {}`",
                short(&o.id),
                short(&o.id),
                short(&o.id)
            )),
        }
    }
    if let Some(w) = &seen.new {
        let ours = entry.is_some_and(|e| {
            e.new_created
                && (is(e.new_id.as_ref(), &seen.new)
                    || (e.new_id.is_none() && e.step == Step::Creating && w.managed))
        });
        if ours {
            d.actions.push(Action::Remove {
                id: w.id.clone(),
                why: format!("remove {new_name}, which the interrupted refresh made"),
            });
        } else if !w.managed {
            d.unresolved.push(format!(
                "a container named {new_name} exists and was not made by halobox; it blocks refreshing {name}: rename or remove it"
            ));
        } else {
            d.unresolved.push(format!(
                "{new_name} ({}) is left over from an interrupted refresh that left no journal; remove it with `{cli} rm -f {}`",
                short(&w.id),
                short(&w.id)
            ));
        }
    }
    if let (Some(e), Some(p)) = (entry, &seen.prev)
        && !e.new_created
        && e.new_id.as_ref() == Some(&p.id)
        && matches!(e.step, Step::Created | Step::Swapping)
        && p.running
    {
        d.actions.push(Action::Stop {
            id: p.id.clone(),
            why: format!("stop {prev_name} again (the interrupted rollback had started it)"),
        });
    }
    if entry.is_some() && d.unresolved.is_empty() {
        d.actions.push(Action::ClearJournal);
    }
    d
}

/// The first 12 characters of an id.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// What a repair did.
#[derive(Debug, Default)]
pub struct Healed {
    /// One line per step with its real result.
    pub done: Vec<String>,
    /// What is left for the user (with the command), including failed steps.
    pub unresolved: Vec<String>,
}

/// Why a repair could not even look.
#[derive(Debug, thiserror::Error)]
pub enum HealError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The journal cannot be read.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// The containers under `name`'s refresh names on `engine`.
pub async fn look(engine: &Engine, name: &str) -> Result<Names, EngineError> {
    let get = |suffix: &str| {
        let n = format!("{name}{suffix}");
        async move { engine.container(&n).await }
    };
    let (c, o, w, p) = tokio::join!(get(""), get(OLD_SUFFIX), get(NEW_SUFFIX), get(PREV_SUFFIX));
    Ok(Names {
        current: c?.as_ref().map(Seen::of),
        old: o?.as_ref().map(Seen::of),
        new: w?.as_ref().map(Seen::of),
        prev: p?.as_ref().map(Seen::of),
    })
}

/// What a repair of `name` would do now (for `--dry-run`).
pub async fn survey(engine: &Engine, name: &str) -> Result<Decision, HealError> {
    let journal = Journal::open(&engine.info.address, name)?;
    let entry = journal.read()?;
    let seen = look(engine, name).await?;
    Ok(decide(
        name,
        &seen,
        entry.as_ref(),
        &engine.info.kind.to_string(),
    ))
}

/// Repairs `name` on `engine`; the caller holds its refresh lock.
pub async fn heal(engine: &Engine, name: &str) -> Result<Healed, HealError> {
    let journal = Journal::open(&engine.info.address, name)?;
    let entry = journal.read()?;
    let mut healed = Healed::default();
    if let Some(e) = &entry
        && e.pid != std::process::id()
        && halobox_runs(e.pid)
    {
        healed.unresolved.push(format!(
            "halobox pid {} is refreshing {name} (journal {}); let it finish",
            e.pid,
            journal.path().display()
        ));
        return Ok(healed);
    }
    let seen = look(engine, name).await?;
    let cli = engine.info.kind.to_string();
    let decision = decide(name, &seen, entry.as_ref(), &cli);
    healed.unresolved = decision.unresolved;
    for action in decision.actions {
        let (result, why, fix) = match &action {
            Action::Rename { id, to, why } => (
                engine.rename(id, to).await.map_err(|e| e.to_string()),
                why.clone(),
                format!("{cli} rename {} {to}", short(id)),
            ),
            Action::Stop { id, why } => (
                engine
                    .stop(id, super::run::STOP_GRACE)
                    .await
                    .map_err(|e| e.to_string()),
                why.clone(),
                format!("{cli} stop {}", short(id)),
            ),
            Action::Remove { id, why } => (
                engine.remove(id).await.map_err(|e| e.to_string()),
                why.clone(),
                format!("{cli} rm -f {}", short(id)),
            ),
            Action::ClearJournal => (
                journal.clear().map_err(|e| e.to_string()),
                format!("clear the refresh journal {}", journal.path().display()),
                format!("rm {}", journal.path().display()),
            ),
        };
        match result {
            Ok(()) => healed.done.push(format!("{why}: done")),
            Err(e) => {
                healed
                    .unresolved
                    .push(format!("{why} failed: {e}; run `{fix}`"));
                break;
            }
        }
    }
    Ok(healed)
}

/// Repairs every name on `engine` with leftovers among the `managed`
/// containers or a journal entry; returns the lines to show (an engine
/// that does not answer in time is an error, see [`heal_name`]).
pub async fn heal_all(
    engine: &Engine,
    managed: &[ContainerInfo],
) -> Result<Vec<String>, EngineError> {
    let mut names = super::journal::names(&engine.info.address);
    for c in managed {
        for suffix in [OLD_SUFFIX, NEW_SUFFIX] {
            if let Some(base) = c.name.strip_suffix(suffix) {
                names.push(base.to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    let mut lines = Vec::new();
    for name in names {
        lines.extend(heal_name(engine, &name).await?);
    }
    Ok(lines)
}

/// Repairs `name` when something was left (taking its refresh lock; a name
/// whose lock is held is being refreshed now and is left alone); returns
/// the lines to show, none when there was nothing to do. An engine that
/// does not answer in time is an error: the command that asked cannot work
/// either, and waiting out the bound twice helps no one.
pub async fn heal_name(engine: &Engine, name: &str) -> Result<Vec<String>, EngineError> {
    let not_repaired = |e: HealError| match e {
        HealError::Engine(e @ EngineError::Timeout { .. }) => Err(e),
        e => Ok(vec![format!("{name}: not repaired: {e}")]),
    };
    match survey(engine, name).await {
        Ok(d) if d.is_empty() => return Ok(Vec::new()),
        Ok(_) => {}
        Err(e) => return not_repaired(e),
    }
    let _held = match lock::try_acquire(&engine.info.address, name) {
        Ok(Ok(l)) => l,
        Ok(Err(lock::LockError::Busy { holder, .. })) => {
            return Ok(vec![format!(
                "{name}: a refresh{} is changing it now; left alone",
                holder.map(|p| format!(" (pid {p})")).unwrap_or_default()
            )]);
        }
        Ok(Err(e)) | Err(e) => return Ok(vec![format!("{name}: not repaired: {e}")]),
    };
    match heal(engine, name).await {
        Ok(h) => Ok(h
            .done
            .into_iter()
            .map(|l| format!("repaired {name}: {l}"))
            .chain(
                h.unresolved
                    .into_iter()
                    .map(|l| format!("{name} needs you: {l}")),
            )
            .collect()),
        Err(e) => not_repaired(e),
    }
}

/// True when `pid` is a live halobox process.
fn halobox_runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "halobox")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(id: &str) -> Option<Seen> {
        Some(Seen {
            id: id.into(),
            managed: true,
            running: true,
        })
    }

    fn entry(step: Step, new: &str, old: Option<&str>, prev: Option<&str>) -> Entry {
        Entry {
            engine: "unix:///x".into(),
            name: "v".into(),
            pid: 1,
            step,
            new_id: Some(new.into()),
            new_created: true,
            old_id: old.map(Into::into),
            prev_id: prev.map(Into::into),
            staged: None,
        }
    }

    fn renames(d: &Decision) -> Vec<(String, String)> {
        d.actions
            .iter()
            .filter_map(|a| match a {
                Action::Rename { id, to, .. } => Some((id.clone(), to.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn between_the_renames_the_old_container_goes_back() {
        let seen = Names {
            old: seen("old"),
            new: seen("new"),
            ..Default::default()
        };
        let e = entry(Step::Swapping, "new", Some("old"), None);
        let d = decide("v", &seen, Some(&e), "podman");
        assert_eq!(renames(&d), [("old".to_string(), "v".to_string())]);
        assert!(d.actions.contains(&Action::Remove {
            id: "new".into(),
            why: "remove v-halobox-new, which the interrupted refresh made".into()
        }));
        assert_eq!(d.actions.last(), Some(&Action::ClearJournal));
        // Without a journal the user's container still goes back, but the
        // new one is not removed: nothing says who made it.
        let d = decide("v", &seen, None, "podman");
        assert_eq!(renames(&d), [("old".to_string(), "v".to_string())]);
        assert!(d.unresolved[0].contains("podman rm -f new"), "{d:?}");
    }

    #[test]
    fn after_the_renames_the_retiring_is_finished() {
        let seen = Names {
            current: seen("new"),
            old: seen("old"),
            prev: seen("older"),
            ..Default::default()
        };
        let e = entry(Step::Swapped, "new", Some("old"), Some("older"));
        let d = decide("v", &seen, Some(&e), "podman");
        assert!(matches!(&d.actions[0], Action::Stop { id, .. } if id == "old"));
        assert!(matches!(&d.actions[1], Action::Remove { id, .. } if id == "older"));
        assert_eq!(renames(&d), [("old".to_string(), "v-prev".to_string())]);
        // A NAME-prev the run did not record is never removed.
        let e = entry(Step::Swapped, "new", Some("old"), None);
        let d = decide("v", &seen, Some(&e), "podman");
        assert!(!d.actions.iter().any(|a| matches!(a, Action::Remove { .. })));
        assert_eq!(d.unresolved.len(), 1);
    }

    #[test]
    fn a_new_container_without_a_record_or_not_ours_is_left() {
        let mut foreign = seen("x");
        foreign.as_mut().unwrap().managed = false;
        let seen = Names {
            current: seen("cur"),
            new: foreign,
            ..Default::default()
        };
        let d = decide("v", &seen, None, "docker");
        assert!(d.actions.is_empty());
        assert!(d.unresolved[0].contains("not made by halobox"));
    }
}
