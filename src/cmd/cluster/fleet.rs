//! `halobox cluster refresh|install`: every node of cluster.toml at once.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::cli::{ClusterInstallArgs, ClusterRefreshArgs};
use crate::cluster::config;
use crate::error::UsageError;
use crate::fleet::{install, refresh, refresh_verify};

/// Runs `cluster refresh`.
pub fn refresh(a: &ClusterRefreshArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    let channel = a.channel.tag().to_string();
    let req = refresh::Request {
        image: crate::refresh::prepare::image(a.image.clone(), &channel)?,
        channel,
        memlock: a.memlock.map(|m| m.label_value()),
        restart: a.restart,
        pull: a.pull,
        from_registry: a.from_registry || a.pull.is_some(),
        verify: refresh_verify::wanted(
            match (a.verify || a.accept_tokens, a.no_verify) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            &path,
        )
        .then_some(refresh_verify::Options {
            soak_s: a.soak,
            accept_tokens: a.accept_tokens,
        }),
    };
    if a.mode.dry_run() {
        print!("{}", refresh::render_plan(&cfg, &req));
        return Ok(ExitCode::SUCCESS);
    }
    if !a.confirm.yes {
        let (nodes, _) = cfg.container_nodes();
        let question = format!(
            "Replace the containers of {} node(s) with {} once every new one stays up (each old one is kept, stopped, as NAME-prev{})?",
            nodes.len(),
            req.image,
            match req.verify {
                Some(_) => ", until the serve proves the new one",
                None => "",
            }
        );
        if !std::io::stdin().is_terminal() {
            return Err(UsageError(format!(
                "not replacing containers without confirmation: pass --yes\n  hint: {question}"
            ))
            .into());
        }
        if !dialoguer::Confirm::new()
            .with_prompt(question)
            .default(false)
            .interact()
            .context("reading the answer")?
        {
            eprintln!("nothing changed");
            return Ok(ExitCode::FAILURE);
        }
    }
    let report = refresh::run(&cfg, &path, &req, &mut crate::reporter::Stderr);
    if a.mode.json() {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", refresh::render(&report));
    }
    if !report.ok {
        eprintln!(
            "error: the cluster was not refreshed (see above){}",
            if report.nodes.iter().any(|n| n.outcome == "swapped") {
                ""
            } else {
                "; every node keeps its old container"
            }
        );
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs `cluster install`.
pub fn install(a: &ClusterInstallArgs) -> anyhow::Result<ExitCode> {
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .context("finding this halobox binary")?;
    let dest = a.halobox.clone().unwrap_or_else(|| exe.clone());
    if !dest.is_absolute() {
        return Err(UsageError(format!(
            "--halobox {}: give the absolute path on the nodes (/usr/local/bin/halobox)",
            dest.display()
        ))
        .into());
    }
    let dest = dest.display().to_string();
    let bin = install::Binary::read(&exe).with_context(|| format!("reading {}", exe.display()))?;
    if a.plan.dry_run {
        print!("{}", install::render_plan(&cfg, &dest, &bin, a.rollback));
        return Ok(ExitCode::SUCCESS);
    }
    let version = format!("halobox {}", crate::cli::VERSION);
    let results = if a.rollback {
        install::rollback(&cfg, &dest)
    } else {
        install::run(
            &cfg,
            &dest,
            &bin,
            &version,
            std::time::Duration::from_secs(a.timeout),
        )
    };
    let mut ok = true;
    for r in &results {
        ok &= r.outcome != "failed";
        println!("{:<16} {:<10} {}", r.node, r.outcome, r.detail);
    }
    println!("sha256 {}", bin.sha256);
    if let Some(note) = install::config_note(&cfg, &dest) {
        println!("note: {note}");
    }
    if !ok {
        eprintln!(
            "error: {} (see above)",
            if a.rollback {
                "not every node went back to its old halobox"
            } else {
                "halobox was not installed on every node; no node keeps a new one"
            }
        );
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
