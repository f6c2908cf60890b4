//! `halobox refresh`: resolve options, read the host and the engine, plan,
//! then print the plan (`--dry-run`) or carry it out.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::check;
use crate::cli::RefreshArgs;
use crate::container::backend::Backend;
use crate::container::cli::create_command;
use crate::doctor::Status;
use crate::doctor::render::Style;
use crate::engine::{block_on, connect};
use crate::host::{self, GatherOptions, HostRoot};
use crate::refresh::plan::{RefreshPlan, Source};
use crate::refresh::prepare::{self, RefreshRequest};
use crate::refresh::run;
use crate::shell;

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
    };
    let target = prepare::target(&req)?;
    let facts = host::gather(HostRoot::live(), GatherOptions::default());
    block_on(async {
        let mut engine = connect(args.engine.engine.as_deref()).await?;
        let plan = prepare::plan(&mut engine, &facts, &req, &target).await?;
        if args.mode.dry_run() {
            print_plan(&plan, args.mode.json(), args.check)?;
            return Ok(ExitCode::SUCCESS);
        }
        if plan.replaces.is_some() && !args.confirm.yes && std::io::stdin().is_terminal() {
            let go = dialoguer::Confirm::new()
                .with_prompt(format!(
                    "Replace {} once the new container runs?",
                    plan.name
                ))
                .default(true)
                .interact()
                .context("reading the answer")?;
            if !go {
                eprintln!("nothing changed");
                return Ok(ExitCode::FAILURE);
            }
        }
        for note in &plan.notes {
            eprintln!("note: {note}");
        }
        let outcome = run::execute(&engine, &plan, &mut |line| eprintln!("==> {line}")).await?;
        let report = match args.check {
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
                    .replaced
                    .as_ref()
                    .map(|r| format!(" (replaced the old {r})"))
                    .unwrap_or_default()
            );
            println!("enter it with: halobox enter {}", outcome.name);
        }
        for w in &outcome.warnings {
            eprintln!("warning: {w}");
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

fn rollback(name: &str) -> String {
    format!("halobox refresh --rollback --name {name}")
}

/// `--check`: the new container checked from inside; an error keeps it.
async fn check_new(
    engine: &crate::engine::Engine,
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

fn print_plan(plan: &RefreshPlan, json: bool, check: bool) -> anyhow::Result<()> {
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
    if let Some(stale) = &plan.stale_temp {
        step(format!(
            "remove {stale}, left over from an interrupted refresh"
        ));
    }
    match &plan.source {
        Source::Pull { reference } => {
            step(format!("pull {reference}"));
            step(format!(
                "pin it as {}:<its org.opencontainers.image.created time, YYYYMMDD-HHMMSS UTC>",
                plan.repository
            ));
        }
        Source::Pinned { reference } => step(format!("use the pinned image {reference}")),
    }
    step(format!(
        "create {} and check that it runs:\n       {}",
        plan.temp_name,
        shell::line(&command)
    ));
    match &plan.replaces {
        Some(old) => step(format!(
            "replace {old}: rename it to {}, rename {} to {}, remove {}",
            plan.old_name, plan.temp_name, plan.name, plan.old_name
        )),
        None => step(format!("rename {} to {}", plan.temp_name, plan.name)),
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
