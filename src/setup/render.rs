//! The plan as text: steps grouped by when they take effect, each file as a
//! unified diff and each command as a shell line.

use std::fmt::Write;

use super::{Action, Plan, Step, When, diff};

/// The whole plan.
pub fn plan(plan: &Plan) -> String {
    let mut out = String::new();
    let source = plan
        .sysroot
        .as_deref()
        .map(|s| format!("snapshot {s}"))
        .unwrap_or_else(|| "this host".into());
    let user = plan
        .user
        .as_deref()
        .map(|u| format!(" (user {u})"))
        .unwrap_or_default();
    let _ = writeln!(out, "halobox setup: {source}{user}");
    if plan.is_empty() {
        let _ = writeln!(
            out,
            "\nnothing to do: every fix halobox can apply is in place"
        );
    }
    for when in [When::Now, When::Relogin, When::Reboot] {
        let steps = plan.group(when);
        if steps.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{}:", when.heading());
        for s in steps {
            out.push_str(&step(s));
        }
    }
    if !plan.manual.is_empty() {
        let _ = writeln!(out, "\nnot fixed by halobox (do these by hand):");
        for m in &plan.manual {
            let _ = writeln!(out, "  {}: {}", m.check, m.summary);
            for line in m.fix.lines() {
                let _ = writeln!(out, "      {line}");
            }
        }
    }
    out
}

/// One step with its files and commands.
pub fn step(s: &Step) -> String {
    let mut out = String::new();
    let root = if s.needs_root { ", needs root" } else { "" };
    let _ = writeln!(
        out,
        "  [{}] {} (fixes {}{root})",
        s.family,
        s.title,
        s.checks.join(", ")
    );
    for a in &s.actions {
        match a {
            Action::Write { path, old, new, .. } => {
                let verb = if old.is_some() { "change" } else { "create" };
                let _ = writeln!(out, "    {verb} {path}:");
                for line in diff::unified(path, old.as_deref(), new).lines() {
                    let _ = writeln!(out, "      {line}");
                }
            }
            Action::Run(cmd) => {
                let _ = writeln!(out, "    run: {}", cmd.line());
            }
            Action::NotRun { cmd, why } => {
                let _ = writeln!(out, "    {why}: {}", cmd.line());
            }
            Action::ByHand { what } => {
                let _ = writeln!(out, "    by hand: {}", what.replace('\n', "\n      "));
            }
        }
    }
    out
}
