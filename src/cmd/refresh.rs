//! `halobox refresh`: resolve options, read the host and the engine, plan,
//! then print the plan (`--dry-run`) or carry it out.

use std::io::{IsTerminal, Write as _};
use std::process::ExitCode;

use anyhow::Context as _;

use crate::backend::Backend;
use crate::check;
use crate::cli::RefreshArgs;
use crate::container::cli::create_command;
use crate::doctor::Status;
use crate::doctor::render::Style;
use crate::engine::lifecycle::Changes;
use crate::engine::{Engine, block_on, connect};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::refresh::journal::{Journal, Step};
use crate::refresh::plan::{RefreshPlan, Source};
use crate::refresh::prepare::{self, RefreshRequest};
use crate::refresh::repair::{self, Action, Decision};
use crate::refresh::{lock, run, signals, word};
use crate::shell;
use crate::units::format_bytes;

/// Runs `halobox refresh`.
pub fn run(args: &RefreshArgs, color: bool) -> anyhow::Result<ExitCode> {
    let req = RefreshRequest {
        image: args.image.clone(),
        channel: args.channel.tag().to_string(),
        name: args.name.clone(),
        backend: args.backend,
        memlock: args.memlock,
        memlock_clamp: args.memlock_clamp,
        keep: args.keep,
        rollback: args.rollback,
        adopt: args.adopt,
        settle: args.settle,
        volumes: args.volume.clone(),
        pull: args.pull,
    };
    let target = prepare::target(&req)?;
    let facts = host::gather(HostRoot::live(), GatherOptions::default());
    block_on(async {
        let mut engine = connect(args.engine.engine.as_deref()).await?;
        if args.mode.dry_run() {
            let repairs = repair::survey(&engine, &target.name).await?;
            let plan = prepare::plan(&mut engine, &facts, &req, &target).await?;
            print_plan(&plan, &repairs, args.mode.json(), args.check)?;
            return Ok(ExitCode::SUCCESS);
        }
        let address = engine.info.address.clone();
        let _lock = lock::acquire(&address, &target.name, args.wait, &mut |holder| {
            eprintln!(
                "==> waiting for the halobox run{} that is changing {}",
                holder.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                target.name
            )
        })?;
        let journal = Journal::open(&address, &target.name)?;
        let staged = journal.read()?.filter(|e| e.step == Step::Staged);
        if args.discard_staged || (args.stage && staged.is_some()) {
            let line = match &staged {
                Some(e) => run::discard(&engine, &journal, e).await?,
                None => format!("nothing is staged for {}", target.name),
            };
            eprintln!("==> {line}");
            if args.discard_staged {
                return Ok(ExitCode::SUCCESS);
            }
        }
        let mut caught = signals::Caught::install().context("catching SIGINT and SIGTERM")?;
        // A staged run takes the cluster refresh's word on stdin; its end
        // (the link dropped) is a SIGTERM, caught from here on.
        let listener = args.stage.then(word::Listener::start);
        let healed = repair::heal(&engine, &target.name).await?;
        for line in &healed.done {
            eprintln!("==> repaired {}: {line}", target.name);
        }
        if !healed.unresolved.is_empty() {
            anyhow::bail!(
                "{} cannot be refreshed until what an interrupted refresh left is cleared up:\n  {}",
                target.name,
                healed.unresolved.join("\n  ")
            );
        }
        let plan = prepare::plan(&mut engine, &facts, &req, &target).await?;
        if !confirm(&engine, &plan, args.confirm.yes).await? {
            eprintln!("nothing changed");
            return Ok(ExitCode::FAILURE);
        }
        for note in &plan.notes {
            eprintln!("note: {note}");
        }
        if matches!(plan.backend, Backend::Podman | Backend::Docker) {
            crate::container::staged::stage()
                .context("cannot put halobox into the folder its containers see")?;
        }
        // Progress never fails the run: a staged run's stderr is an ssh
        // link that may be gone while it puts things back.
        let mut say = |line: String| {
            let _ = writeln!(std::io::stderr(), "==> {line}");
        };
        let result = match listener {
            Some(listener) => {
                let staged = run::stage(&engine, &plan, &journal, &mut caught, &mut say).await;
                let staged = match staged {
                    Ok(st) => st,
                    Err(e) => {
                        if let Some(s) = e.signal() {
                            let _ = writeln!(std::io::stderr(), "error: {e}");
                            signals::reraise(s);
                        }
                        return Err(e.into());
                    }
                };
                let _ = writeln!(std::io::stdout(), "{}", serde_json::to_string(&staged)?);
                let word = tokio::select! {
                    w = listener.word() => w,
                    _ = caught.wait() => word::Word::Discard,
                };
                if word == word::Word::Discard {
                    let line = run::discard(&engine, &journal, &staged.entry).await?;
                    say(line);
                    if let Some(s) = caught.arrived() {
                        signals::reraise(s);
                    }
                    return Ok(ExitCode::SUCCESS);
                }
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
        let outcome = match result {
            Ok(o) => o,
            Err(e) => {
                if let Some(s) = e.signal() {
                    eprintln!("error: {e}");
                    signals::reraise(s);
                }
                return Err(e.into());
            }
        };
        let report = match args.check && outcome.signal.is_none() {
            true => Some(check_new(&engine, &outcome.name, &facts).await?),
            false => None,
        };
        if args.mode.json() {
            let mut doc = serde_json::to_value(&outcome)?;
            if let Some(r) = &report {
                doc["check"] = serde_json::to_value(r)?;
            }
            println!("{}", serde_json::to_string_pretty(&doc)?);
        } else {
            println!(
                "{} now runs {}{}",
                outcome.name,
                outcome.image,
                outcome
                    .kept
                    .as_ref()
                    .map(|k| format!(" (the old one is kept, stopped, as {k})"))
                    .unwrap_or_default()
            );
            if let Some(d) = &outcome.deleted {
                println!("deleted the older {d}");
            }
            println!("enter it with: halobox enter {}", outcome.name);
        }
        for w in &outcome.warnings {
            eprintln!("warning: {w}");
        }
        if let Some(s) = outcome.signal {
            eprintln!(
                "{} arrived during the swap: the swap was finished first, pruning was skipped",
                signals::name(s)
            );
            signals::reraise(s);
        }
        if let Some(r) = &report {
            if !args.mode.json() {
                print!("{}", check::human(r, Style { color }));
            }
            if r.has_failures() {
                let failed: Vec<&str> = r
                    .checks
                    .iter()
                    .filter(|c| c.status == Status::Fail)
                    .map(|c| c.id.as_str())
                    .collect();
                eprintln!(
                    "error: the new {} fails {}\n  hint: it stays in place; roll back with `{}`",
                    outcome.name,
                    failed.join(", "),
                    rollback(&outcome.name)
                );
                return Ok(ExitCode::FAILURE);
            }
        }
        Ok(ExitCode::SUCCESS)
    })?
}

/// Asks before a refresh replaces a container: on a terminal with what is
/// stopped, kept and deleted (default no); without one only `--yes` goes on.
async fn confirm(engine: &Engine, plan: &RefreshPlan, yes: bool) -> anyhow::Result<bool> {
    let Some(current) = &plan.current else {
        return Ok(true);
    };
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
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
    for line in consequences(plan, Some(mine), Some(older)) {
        eprintln!("{line}");
    }
    let question = match &plan.source {
        Source::Prev { container } => format!("Roll {} back to {}?", plan.name, container.name),
        _ => format!("Replace {} once the new container stays up?", plan.name),
    };
    dialoguer::Confirm::new()
        .with_prompt(question)
        .default(false)
        .interact()
        .context("reading the answer")
}

/// What a refresh does to the containers that exist: `mine` and `older` are
/// the filesystem changes of the current container and of the `NAME-prev`
/// that is deleted (outer `None`: not read).
fn consequences(
    plan: &RefreshPlan,
    mine: Option<Option<Changes>>,
    older: Option<Option<Changes>>,
) -> Vec<String> {
    let said = |c: Option<Option<Changes>>| match c {
        None => String::new(),
        Some(None) => "; its changes could not be read".to_string(),
        Some(Some(c)) => format!(
            "; {} changed path{}{}",
            c.paths,
            if c.paths == 1 { "" } else { "s" },
            c.bytes
                .and_then(|b| u64::try_from(b).ok())
                .map(|b| format!(", {}", format_bytes(b)))
                .unwrap_or_default()
        ),
    };
    let mut lines = Vec::new();
    if let Some(current) = &plan.current {
        lines.push(format!(
            "{} ({}{}) will be stopped and kept as {} with its files.",
            plan.name,
            current.image,
            said(mine),
            plan.prev_name
        ));
    }
    match (&plan.source, &plan.retired) {
        (Source::Prev { container }, _) => lines.push(format!(
            "{} ({}) takes the name {} again; nothing is deleted.",
            container.name, container.image, plan.name
        )),
        (_, Some(r)) => lines.push(format!(
            "The older {} ({}{}) will be deleted: what was changed in it is lost.",
            r.name,
            r.image,
            said(older)
        )),
        (_, None) => lines.push("Nothing is deleted.".to_string()),
    }
    lines
}

fn rollback(name: &str) -> String {
    format!("halobox refresh --rollback --name {name}")
}

/// `--check`: the new container checked from inside; an error keeps it.
async fn check_new(
    engine: &Engine,
    name: &str,
    facts: &host::HostFacts,
) -> anyhow::Result<check::Report> {
    eprintln!("==> check {name} from inside");
    check::run::check(engine, name, Some(facts))
        .await
        .with_context(|| {
            format!(
                "{name} was replaced but could not be checked (it stays; roll back with `{}`)",
                rollback(name)
            )
        })
}

fn print_plan(
    plan: &RefreshPlan,
    repairs: &Decision,
    json: bool,
    check: bool,
) -> anyhow::Result<()> {
    let command = if plan.backend == Backend::Distrobox {
        crate::container::distrobox::create_command(&plan.spec, !plan.engine.rootless)
    } else {
        create_command(&plan.spec, plan.engine.kind)
    };
    if json {
        let v = serde_json::json!({
            "dry_run": true,
            "plan": plan,
            "create_command": shell::line(&command),
            "repairs_first": repair_lines(repairs),
            "check": check,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let e = &plan.engine;
    println!("halobox refresh plan (dry run: nothing was changed)");
    println!(
        "  engine   {} {} at {} (API {}, runtime {}, {})",
        e.kind,
        e.version,
        e.address,
        e.api_version,
        e.oci_runtime.as_deref().unwrap_or("unknown"),
        if e.rootless { "rootless" } else { "rootful" }
    );
    println!("  backend  {}", plan.backend);
    let mut n = 0;
    let mut step = |text: String| {
        n += 1;
        println!("  {n}. {text}");
    };
    for line in repair_lines(repairs) {
        step(format!("repair first: {line}"));
    }
    match &plan.source {
        Source::Pull { reference } => {
            match &plan.pulling {
                Some(p) if !p.pull => step(format!("use {reference} as it is: {}", p.why)),
                Some(p) => step(format!("pull {reference} ({})", p.why)),
                None => step(format!("pull {reference}")),
            }
            step(format!(
                "pin it as {}:<its org.opencontainers.image.created time, YYYYMMDD-HHMMSS UTC>",
                plan.repository
            ));
        }
        Source::Pinned { reference } => step(format!("use the pinned image {reference}")),
        Source::Prev { .. } => {}
    }
    let settle = plan.settle_secs;
    let ready = plan
        .ready_stamps
        .as_ref()
        .map(|d| format!(", after toolbx's readiness stamp in {d}"))
        .unwrap_or_default();
    let new = match &plan.source {
        Source::Prev { container } => {
            step(format!(
                "start {} (kept by the last refresh, with its files) and check it keeps running for {settle:.1}s{ready}",
                container.name
            ));
            container.name.clone()
        }
        _ => {
            step(format!(
                "create {} and check it keeps running for {settle:.1}s{ready}:\n       {}",
                plan.temp_name,
                shell::line(&command)
            ));
            plan.temp_name.clone()
        }
    };
    match &plan.replaces {
        Some(old) => {
            step(format!(
                "swap: rename {old} to {}, then {new} to {}",
                plan.old_name, plan.name
            ));
            step(format!(
                "stop the old container and keep it as {}{}",
                plan.prev_name,
                plan.retired
                    .as_ref()
                    .map(|r| format!(" (deleting the older {} {})", r.name, r.image))
                    .unwrap_or_default()
            ));
        }
        None => step(format!("rename {new} to {}", plan.name)),
    }
    step(format!(
        "keep the newest {} pinned images of {}, and any a container uses",
        plan.keep, plan.repository
    ));
    if check {
        step(format!(
            "check {} from inside (halobox check {}); a FAIL exits 1 and leaves it in place",
            plan.name, plan.name
        ));
    }
    for note in plan.notes.iter().chain(&plan.spec.notes) {
        println!("  note: {note}");
    }
    Ok(())
}

fn repair_lines(d: &Decision) -> Vec<String> {
    let mut out: Vec<String> = d
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Rename { why, .. } | Action::Stop { why, .. } | Action::Remove { why, .. } => {
                Some(why.clone())
            }
            Action::ClearJournal => None,
        })
        .collect();
    out.extend(d.unresolved.iter().map(|u| format!("needs you: {u}")));
    out
}
