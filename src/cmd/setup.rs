//! `halobox setup`: doctor's facts → plan of fixes → confirmation → apply
//! through the journal → checks again; `--undo` puts back what it changed.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::SetupArgs;
use crate::doctor::{self, DoctorOptions, Report};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::setup::journal::{JOURNAL, Store, Tree, run_command};
use crate::setup::lock;
use crate::setup::{self, Plan, Selection, Step, When, apply, render};

/// Runs `halobox setup`.
pub fn run(args: &SetupArgs) -> anyhow::Result<ExitCode> {
    let root = args.source.root()?;
    refuse_running_root(&root)?;
    // One setup or undo at a time on a tree; a dry run changes nothing.
    let _lock = match args.plan.dry_run() {
        true => None,
        false => Some(lock::acquire(
            root.sysroot_dir().unwrap_or(std::path::Path::new("/")),
        )?),
    };
    let store = open_store(&root)?;
    if args.undo {
        return undo(args, store);
    }
    let sel = Selection {
        only: args.only.clone(),
        skip: args.skip.clone(),
    };
    let unknown = sel.unknown();
    if !unknown.is_empty() {
        return Err(UsageError(format!(
            "unknown fix {}\n  hint: --only and --skip take families ({}) or the check ids setup fixes ({})",
            unknown.join(", "),
            setup::FAMILIES.join(", "),
            setup::FIXED_CHECKS.join(", ")
        ))
        .into());
    }
    let (report, plan) = make_plan(args, &root, &sel);
    if args.plan.json() {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        if args.plan.dry_run() || plan.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
    } else {
        print!("{}", render::plan(&plan));
    }
    if args.plan.dry_run() || plan.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    refuse_without_root(&plan, store.tree().is_sysroot())?;
    let chosen = confirm(args, &plan)?;
    if chosen.is_empty() {
        eprintln!("nothing changed");
        return Ok(ExitCode::FAILURE);
    }
    let mut store = store;
    println!();
    let result = apply::apply(&mut store, &chosen, &mut |line| println!("{line}"));
    if let Err(e) = result {
        return Err(e.context(format!(
            "setup stopped; what it changed is recorded in {}",
            store.location().display()
        )));
    }
    let (after, _) = make_plan(args, &root, &sel);
    println!("\n{}", before_after(&report, &after, &chosen));
    print!("{}", left_to_do(&chosen));
    println!("undo with: halobox setup --undo");
    Ok(ExitCode::SUCCESS)
}

fn make_plan(args: &SetupArgs, root: &HostRoot, sel: &Selection) -> (Report, Plan) {
    let facts = host::gather(root.clone(), GatherOptions::default());
    let report = doctor::diagnose(
        &facts,
        DoctorOptions {
            ip: args.ip,
            ..DoctorOptions::default()
        },
    );
    let iface = match &report.data_plane {
        crate::dataplane::Selection::Chosen(p) => Some(p.interface.clone()),
        _ => None,
    };
    let sf = setup::gather(root.clone(), &facts, args.user.as_deref(), iface.as_deref());
    let plan = setup::plan(&facts, &report, &sf, sel);
    (report, plan)
}

/// The journal: `/var/lib/halobox/setup-journal.json` of the tree written
/// (root or a snapshot), else under the user's state directory.
fn open_store(root: &HostRoot) -> anyhow::Result<Store> {
    match root.sysroot_dir() {
        Some(dir) => Store::open(Tree::sysroot(dir)?, JOURNAL),
        None if nix::unistd::geteuid().is_root() => Store::open(Tree::live(), JOURNAL),
        None => {
            let state = dirs::state_dir()
                .or_else(|| dirs::home_dir().map(|h| h.join(".local/state")))
                .unwrap_or_else(|| PathBuf::from("/tmp"));
            let path = state.join("halobox/setup-journal.json");
            Store::open(Tree::live(), &path.display().to_string())
        }
    }
}

/// A `--sysroot` that is this machine's own `/` (same device and inode:
/// `/`, `/proc/self/root`, a bind mount of it) is refused: setup would write
/// the live system while believing it writes a snapshot.
fn refuse_running_root(root: &HostRoot) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Some(dir) = root.sysroot_dir() else {
        return Ok(());
    };
    let id = |p: &std::path::Path| std::fs::metadata(p).map(|m| (m.dev(), m.ino()));
    let (this, live) = (id(dir), id(std::path::Path::new("/")));
    if this.is_ok() && this.ok() == live.ok() {
        return Err(UsageError(format!(
            "--sysroot {} is this machine's running system (its /), not a snapshot; nothing changed\n  hint: to fix this host, run `sudo halobox setup` without --sysroot; to write a snapshot, copy it first (cp -a) and pass that copy",
            dir.display()
        ))
        .into());
    }
    Ok(())
}

fn refuse_without_root(plan: &Plan, sysroot: bool) -> anyhow::Result<()> {
    if sysroot || nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let needing: Vec<String> = plan
        .steps
        .iter()
        .filter(|s| s.needs_root)
        .map(|s| format!("{} ({})", s.family, s.checks.join(", ")))
        .collect();
    if needing.is_empty() {
        return Ok(());
    }
    Err(UsageError(format!(
        "setup needs root for: {}; nothing changed\n  hint: run it as root (sudo halobox setup), or leave those out with --skip {}",
        needing.join(", "),
        plan.steps
            .iter()
            .filter(|s| s.needs_root)
            .map(|s| s.family.as_str())
            .collect::<Vec<_>>()
            .join(",")
    ))
    .into())
}

/// The steps to apply: all with `--yes`, else those of the groups the user
/// accepts on a terminal.
fn confirm<'a>(args: &SetupArgs, plan: &'a Plan) -> anyhow::Result<Vec<&'a Step>> {
    if args.confirm.yes {
        return Ok(plan.steps.iter().collect());
    }
    if !std::io::stdin().is_terminal() {
        return Err(UsageError(
            "not applying the plan without confirmation: no terminal to ask on\n  hint: review it with --dry-run, then pass --yes".into(),
        )
        .into());
    }
    let mut chosen = Vec::new();
    for when in [When::Now, When::Relogin, When::Reboot] {
        let group = plan.group(when);
        if group.is_empty() {
            continue;
        }
        let go = dialoguer::Confirm::new()
            .with_prompt(format!(
                "apply the {} step(s) that {}?",
                group.len(),
                when.heading()
            ))
            .default(false)
            .interact()
            .context("reading the answer")?;
        if go {
            chosen.extend(group);
        }
    }
    Ok(chosen)
}

/// Each check the applied steps fix, before and after, with when a
/// change that is not visible yet shows.
fn before_after(before: &Report, after: &Report, applied: &[&Step]) -> String {
    let status = |r: &Report, id: &str| {
        r.checks
            .iter()
            .find(|c| c.id == id)
            .map_or("?".to_string(), |c| match c.pending {
                Some(p) => format!("{} ({})", c.status.label(), p.label()),
                None => c.status.label().to_string(),
            })
    };
    let mut out = String::from("checks after setup:\n");
    let mut seen: Vec<&str> = Vec::new();
    for step in applied {
        for id in &step.checks {
            if seen.contains(&id.as_str()) {
                continue;
            }
            seen.push(id);
            let (was, now) = (status(before, id), status(after, id));
            let (was, now) = (was.as_str(), now.as_str());
            let not_run = step
                .actions
                .iter()
                .any(|a| matches!(a, setup::Action::NotRun { .. }));
            let by_hand = step
                .actions
                .iter()
                .any(|a| matches!(a, setup::Action::ByHand { .. }));
            let pending = match step.when {
                When::Now if was == now && not_run => {
                    " (once the commands listed as not run are run)"
                }
                When::Now if by_hand => " (for now: see what is left to do)",
                When::Now => "",
                When::Relogin if was == now => " (shows after logging out and back in)",
                When::Reboot if was == now => " (shows after a reboot)",
                _ => "",
            };
            out.push_str(&format!("  {id}: {was} -> {now}{pending}\n"));
        }
    }
    out
}

/// What the applied steps leave: the commands they listed but did not run
/// and what they say to do by hand, then the log-out or reboot that makes
/// the rest take effect; `done` when nothing.
fn left_to_do(applied: &[&Step]) -> String {
    let mut items: Vec<String> = applied
        .iter()
        .flat_map(|s| s.actions.iter().filter_map(setup::Action::left_to_do))
        .collect();
    match applied.iter().map(|s| s.when).max().unwrap_or(When::Now) {
        When::Reboot => items.push("reboot for the kernel parameters to take effect".into()),
        When::Relogin => {
            items.push("log out and back in (limits and groups apply to new logins)".into())
        }
        When::Now => {}
    }
    match items.as_slice() {
        [] => "done\n".into(),
        [one] => format!("left to do: {}\n", one.replace('\n', "\n    ")),
        many => {
            let lines: String = many
                .iter()
                .map(|i| format!("  {}\n", i.replace('\n', "\n    ")))
                .collect();
            format!("left to do:\n{lines}")
        }
    }
}

fn undo(args: &SetupArgs, mut store: Store) -> anyhow::Result<ExitCode> {
    if store.journal.entries.is_empty() {
        if !args.plan.dry_run() {
            store.tidy()?;
        }
        println!(
            "nothing to undo: no setup journal at {}",
            store.location().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let live = !store.tree().is_sysroot();
    if live && !nix::unistd::geteuid().is_root() && store.location().starts_with("/var") {
        return Err(UsageError(
            "undoing setup needs root: its journal lists files only root can write\n  hint: sudo halobox setup --undo".into(),
        )
        .into());
    }
    println!(
        "halobox setup --undo: {} change(s) recorded in {}",
        store.journal.entries.len(),
        store.location().display()
    );
    if !args.plan.dry_run() && !args.confirm.yes {
        if !std::io::stdin().is_terminal() {
            return Err(UsageError(
                "not undoing without confirmation: no terminal to ask on\n  hint: pass --yes"
                    .into(),
            )
            .into());
        }
        let go = dialoguer::Confirm::new()
            .with_prompt("put back everything setup changed?")
            .default(false)
            .interact()
            .context("reading the answer")?;
        if !go {
            eprintln!("nothing changed");
            return Ok(ExitCode::FAILURE);
        }
    }
    if args.plan.dry_run() {
        for e in store.journal.entries.iter().rev() {
            println!("  would undo: {e:?}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let runner =
        |argv: &[String]| -> anyhow::Result<()> { if live { run_command(argv) } else { Ok(()) } };
    for line in store.undo(&runner)? {
        println!("  {line}");
    }
    println!("undone");
    Ok(ExitCode::SUCCESS)
}
