//! What `halobox refresh` shows: the dry run's plan, what a refresh does to
//! the containers that exist (asked before it replaces one), and the
//! repairs of an interrupted run. Pure: text from the plan.

use crate::backend::Backend;
use crate::container::cli::create_command;
use crate::engine::lifecycle::Changes;
use crate::refresh::plan::{RefreshPlan, Source};
use crate::refresh::repair::{Action, Decision};
use crate::shell;
use crate::units::format_bytes;

/// What a refresh does to the containers that exist: `mine` and `older` are
/// the filesystem changes of the current container and of the `NAME-prev`
/// that is deleted (outer `None`: not read).
pub fn consequences(
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

/// The command that rolls `name` back to the container it replaced.
pub fn rollback(name: &str) -> String {
    format!("halobox refresh --rollback --name {name}")
}

/// The dry run's report of `plan`, with the repairs it would make first:
/// JSON, or the numbered steps.
pub fn plan_text(
    plan: &RefreshPlan,
    repairs: &Decision,
    json: bool,
    check: bool,
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let mut o = String::new();
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
        return Ok(format!("{}\n", serde_json::to_string_pretty(&v)?));
    }
    let e = &plan.engine;
    let _ = writeln!(o, "halobox refresh plan (dry run: nothing was changed)");
    let _ = writeln!(
        o,
        "  engine   {} {} at {} (API {}, runtime {}, {})",
        e.kind,
        e.version,
        e.address,
        e.api_version,
        e.oci_runtime.as_deref().unwrap_or("unknown"),
        if e.rootless { "rootless" } else { "rootful" }
    );
    let _ = writeln!(o, "  backend  {}", plan.backend);
    let mut steps: Vec<String> = Vec::new();
    let mut step = |text: String| steps.push(text);
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
    for (n, text) in steps.iter().enumerate() {
        let _ = writeln!(o, "  {}. {text}", n + 1);
    }
    for note in plan.notes.iter().chain(&plan.spec.notes) {
        let _ = writeln!(o, "  note: {note}");
    }
    Ok(o)
}

/// What the repairs of an interrupted run would do, one line each.
pub fn repair_lines(d: &Decision) -> Vec<String> {
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
