//! `halobox setup` from start to end, as one library entry point
//! ([`run()`]): doctor's facts → plan of fixes → confirmation per group
//! (an [`Ask`]) → apply through the journal → checks again; `--undo` puts
//! back what it changed. Its words go to a [`Reporter`].

use std::net::Ipv4Addr;
use std::path::PathBuf;

use super::journal::{JOURNAL, Store, Tree, run_command};
use super::{self as setup, Plan, Selection, Step, When, apply, lock, render};
use crate::doctor::{self, DoctorOptions, Report};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::reporter::{Ask, Reporter};

/// One `halobox setup`: the flags as given.
#[derive(Debug, Clone)]
pub struct Options {
    /// The tree to fix: this host, or a snapshot (`--sysroot`).
    pub root: HostRoot,
    /// Report the plan, change nothing.
    pub dry_run: bool,
    /// JSON instead of text.
    pub json: bool,
    /// `--yes`: apply every step without asking.
    pub yes: bool,
    /// `--only`: families or check ids.
    pub only: Vec<String>,
    /// `--skip`: families or check ids.
    pub skip: Vec<String>,
    /// `--ip`: the data-plane address.
    pub ip: Option<Ipv4Addr>,
    /// `--user`: the user to fix.
    pub user: Option<String>,
    /// `--usb4-address`: this node's address on its USB4 link.
    pub usb4_address: Option<crate::host::net::Ipv4Net>,
    /// `--undo`: put back what setup changed.
    pub undo: bool,
}

/// Runs `halobox setup` (or `--undo`) as `o` asks; `Ok(false)` when
/// nothing changed because the answer was no.
pub fn run(o: &Options, r: &mut dyn Reporter, ask: &mut dyn Ask) -> anyhow::Result<bool> {
    let root = &o.root;
    refuse_running_root(root)?;
    // One setup or undo at a time on a tree; a dry run changes nothing.
    let _lock = match o.dry_run {
        true => None,
        false => Some(lock::acquire(
            root.sysroot_dir().unwrap_or(std::path::Path::new("/")),
        )?),
    };
    let store = open_store(root)?;
    if o.undo {
        return undo(o, store, r, ask);
    }
    let sel = Selection {
        only: o.only.clone(),
        skip: o.skip.clone(),
        usb4: o.usb4_address,
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
    let (report, plan) = make_plan(o, root, &sel);
    if o.json {
        r.out(&format!("{}\n", serde_json::to_string_pretty(&plan)?));
    } else {
        r.out(&render::plan(&plan));
    }
    if o.dry_run || plan.is_empty() {
        return Ok(true);
    }
    refuse_without_root(&plan, store.tree().is_sysroot())?;
    let chosen = confirm(o.yes, &plan, ask)?;
    if chosen.is_empty() {
        r.note("nothing changed\n");
        return Ok(false);
    }
    let mut store = store;
    r.out("\n");
    let result = apply::apply(&mut store, &chosen, &mut |line| r.out(&format!("{line}\n")));
    if let Err(e) = result {
        return Err(e.context(format!(
            "setup stopped; what it changed is recorded in {}",
            store.location().display()
        )));
    }
    let (after, _) = make_plan(o, root, &sel);
    r.out(&format!("\n{}\n", before_after(&report, &after, &chosen)));
    r.out(&left_to_do(&chosen));
    r.out("undo with: halobox setup --undo\n");
    Ok(true)
}

fn make_plan(o: &Options, root: &HostRoot, sel: &Selection) -> (Report, Plan) {
    let facts = host::gather(root.clone(), GatherOptions::default());
    let report = doctor::diagnose(
        &facts,
        DoctorOptions {
            ip: o.ip,
            ..DoctorOptions::default()
        },
    );
    let iface = match &report.data_plane {
        crate::dataplane::Selection::Chosen(p) => Some(p.interface.clone()),
        _ => None,
    };
    let sf = setup::gather(root.clone(), &facts, o.user.as_deref(), iface.as_deref());
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
fn confirm<'a>(yes: bool, plan: &'a Plan, ask: &mut dyn Ask) -> anyhow::Result<Vec<&'a Step>> {
    if yes {
        return Ok(plan.steps.iter().collect());
    }
    if !ask.can_ask() {
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
        let question = format!("apply the {} step(s) that {}?", group.len(), when.heading());
        let go = ask.ask(&[], &question)?;
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

fn undo(
    o: &Options,
    mut store: Store,
    r: &mut dyn Reporter,
    ask: &mut dyn Ask,
) -> anyhow::Result<bool> {
    if store.journal.entries.is_empty() {
        if !o.dry_run {
            store.tidy()?;
        }
        r.out(&format!(
            "nothing to undo: no setup journal at {}\n",
            store.location().display()
        ));
        return Ok(true);
    }
    let live = !store.tree().is_sysroot();
    if live && !nix::unistd::geteuid().is_root() && store.location().starts_with("/var") {
        return Err(UsageError(
            "undoing setup needs root: its journal lists files only root can write\n  hint: sudo halobox setup --undo".into(),
        )
        .into());
    }
    r.out(&format!(
        "halobox setup --undo: {} change(s) recorded in {}\n",
        store.journal.entries.len(),
        store.location().display()
    ));
    if !o.dry_run && !o.yes {
        if !ask.can_ask() {
            return Err(UsageError(
                "not undoing without confirmation: no terminal to ask on\n  hint: pass --yes"
                    .into(),
            )
            .into());
        }
        if !ask.ask(&[], "put back everything setup changed?")? {
            r.note("nothing changed\n");
            return Ok(false);
        }
    }
    if o.dry_run {
        for e in store.journal.entries.iter().rev() {
            r.out(&format!("  would undo: {e:?}\n"));
        }
        return Ok(true);
    }
    let runner =
        |argv: &[String]| -> anyhow::Result<()> { if live { run_command(argv) } else { Ok(()) } };
    for line in store.undo(&runner)? {
        r.out(&format!("  {line}\n"));
    }
    r.out("undone\n");
    Ok(true)
}
