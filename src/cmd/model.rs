//! `halobox model sync|ls|rm`, and the hidden commands each node runs for
//! them.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use crate::cli::{ModelCommand, ModelLsArgs, ModelPullArgs, ModelRmArgs, ModelSyncArgs};
use crate::cluster::config::{self, ClusterConfig};
use crate::error::UsageError;
use crate::model::cache::{self, ModelRef};
use crate::model::{facts, plan, pull, sync, transfer};
use crate::units::format_bytes;

/// Runs a `model` subcommand.
pub fn run(cmd: ModelCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ModelCommand::Pull(a) => pull(&a),
        ModelCommand::Sync(a) => sync_cmd(&a),
        ModelCommand::Ls(a) => ls(&a),
        ModelCommand::Rm(a) => rm(&a),
        ModelCommand::NodeFacts { model, hash } => {
            let m = ModelRef::parse(&model).map_err(UsageError)?;
            let hub = facts::local_hub().map_err(UsageError)?;
            let f = facts::read(&hub, &m, hash).map_err(|e| anyhow::anyhow!(e))?;
            println!("{}", serde_json::to_string(&f)?);
            Ok(ExitCode::SUCCESS)
        }
        ModelCommand::NodeList => {
            let hub = facts::local_hub().map_err(UsageError)?;
            println!("{}", serde_json::to_string(&facts::holdings(&hub))?);
            Ok(ExitCode::SUCCESS)
        }
        ModelCommand::NodeRm { model } => {
            let m = ModelRef::parse(&model).map_err(UsageError)?;
            let hub = facts::local_hub().map_err(UsageError)?;
            let r = if model.contains('@') {
                facts::remove_revision(&hub, &m.id, &m.revision)
            } else {
                facts::remove(&hub, &m.id)
            }
            .map_err(|e| anyhow::anyhow!(e))?;
            println!("{}", serde_json::to_string(&r)?);
            Ok(ExitCode::SUCCESS)
        }
        ModelCommand::NodeReceive => {
            let (job, hub) = read_job()?;
            let mut out = std::io::stdout();
            let r = transfer::receive(&job, &hub, &mut out).map_err(|e| anyhow::anyhow!(e))?;
            println!("{}", serde_json::to_string(&r)?);
            Ok(ExitCode::SUCCESS)
        }
        ModelCommand::NodeSend => {
            let (job, hub) = read_job()?;
            let mut out = std::io::stdout();
            let n = transfer::send(&job, &hub, &mut out).map_err(|e| anyhow::anyhow!(e))?;
            println!("{{\"sent\":{n}}}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The job line on stdin, and this node's hub (which must be the job's).
fn read_job() -> anyhow::Result<(transfer::Job, std::path::PathBuf)> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let job: transfer::Job = serde_json::from_str(line.trim())
        .map_err(|e| anyhow::anyhow!("the sync job on stdin cannot be read: {e}"))?;
    let hub = facts::local_hub().map_err(UsageError)?;
    if hub.display().to_string() != job.hub {
        anyhow::bail!(
            "this node's Hugging Face cache is {}, not {} as planned\n  hint: set the same HF_HOME on every node (`export HF_HOME=…` in its shell profile), then `halobox model sync` again",
            hub.display(),
            job.hub
        );
    }
    Ok((job, hub))
}

/// The index of `--from` (a node's name or ssh target), else the head.
fn source(cfg: &ClusterConfig, from: Option<&str>) -> Result<usize, UsageError> {
    let Some(f) = from else { return Ok(0) };
    cfg.nodes
        .iter()
        .position(|n| n.label() == f || n.ssh == f)
        .ok_or_else(|| {
            let names: Vec<&str> = cfg.nodes.iter().map(|n| n.label()).collect();
            UsageError(format!(
                "--from {f}: no such node in the cluster file (its nodes: {})\n  hint: `halobox cluster status` lists them",
                names.join(", ")
            ))
        })
}

fn pull(a: &ModelPullArgs) -> anyhow::Result<ExitCode> {
    let model = ModelRef::parse(&a.model).map_err(UsageError)?;
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    let node = match a.on.as_deref() {
        None => cfg.head(),
        Some(on) => cfg
            .nodes
            .iter()
            .find(|n| n.label() == on || n.ssh == on)
            .ok_or_else(|| {
                let names: Vec<&str> = cfg.nodes.iter().map(|n| n.label()).collect();
                UsageError(format!(
                    "--on {on}: no such node in the cluster file (its nodes: {})\n  hint: `halobox cluster status` lists them",
                    names.join(", ")
                ))
            })?,
    };
    let token = crate::serve::prepare::secret("HF_TOKEN");
    if token.as_ref().is_some_and(|t| t.contains(['\n', '\r'])) {
        return Err(UsageError(
            "HF_TOKEN holds a line break: it goes to hf as one line on stdin\n  hint: export it again without the newline: `read -rs HF_TOKEN; export HF_TOKEN`".into(),
        )
        .into());
    }
    let req = pull::PullRequest {
        model: model.clone(),
        include: a.include.clone(),
        exclude: a.exclude.clone(),
        env: pull::PASSED_ON
            .iter()
            .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
            .collect(),
        token: token.is_some(),
        vllm: cfg.vllm.clone(),
    };
    if a.mode.dry_run {
        println!(
            "# on node {} ({}), in its container {}:",
            node.label(),
            node.ssh,
            node.container
        );
        if token.is_some() {
            println!("HF_TOKEN=******** (from this environment, passed on stdin)");
        }
        println!("{}", pull::shown(&req));
        let argv = pull::in_container(&cfg, node, &pull::command(&req));
        println!(
            "# runs as: {}",
            crate::shell::line(&crate::cluster::run::node_argv(&cfg, node, &argv))
        );
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "pulling {}@{} on node {} (hf download; run it again to resume)",
        model.id,
        model.revision,
        node.label()
    );
    let path = pull::run(&cfg, node, &req, token.as_deref())?;
    println!(
        "{}@{} is in node {}'s Hugging Face cache: {path}\n  next: `halobox model sync {}` puts it on every node",
        model.id,
        model.revision,
        node.label(),
        a.model
    );
    Ok(ExitCode::SUCCESS)
}

fn labels(cfg: &ClusterConfig) -> Vec<String> {
    cfg.nodes
        .iter()
        .map(|n| format!("node {}", n.label()))
        .collect()
}

fn sync_cmd(a: &ModelSyncArgs) -> anyhow::Result<ExitCode> {
    let model = ModelRef::parse(&a.model).map_err(UsageError)?;
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    let src = source(&cfg, a.from.as_deref())?;
    let started = std::time::Instant::now();
    // One ssh connection per node for the facts, the receivers and the sender.
    let masters = crate::cluster::run::masters(&cfg);
    let nodes = sync::facts(&cfg, &masters, &model, src, a.verify)?;
    let p = plan::plan(&model, src, &labels(&cfg), &nodes)?;
    print!("{}", plan::render(&p));
    if a.mode.dry_run || p.chain().is_empty() {
        if p.chain().is_empty() && !a.mode.dry_run {
            println!(
                "moved 0 B: every node already holds {}@{} complete and verified (checked in {:.1} s)",
                model.id,
                model.revision,
                started.elapsed().as_secs_f64()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let outcomes = sync::run(&cfg, &masters, &p, src)?;
    print!("{}", sync::render_outcomes(&outcomes));
    let failed: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            o.error.clone().or_else(|| {
                (!o.bad.is_empty()).then(|| format!("{}: {}", o.label, o.bad.join("; ")))
            })
        })
        .collect();
    if failed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    anyhow::bail!(
        "the sync is not complete: {}\n  hint: run `halobox model sync {}` again: it sends only what is still missing",
        failed.join("\n"),
        a.model
    )
}

fn ls(a: &ModelLsArgs) -> anyhow::Result<ExitCode> {
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    let all = sync::holdings(&cfg);
    if a.output.json {
        let v: Vec<serde_json::Value> = cfg
            .nodes
            .iter()
            .zip(&all)
            .map(|(n, h)| match h {
                Ok(h) => serde_json::json!({"node": n.label(), "holdings": h}),
                Err(e) => serde_json::json!({"node": n.label(), "error": e}),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{:<12} {:<32} {:<20} {:>10} {:>6} {:<9} {:<8}",
            "NODE", "MODEL", "REVISION", "SIZE", "FILES", "COMPLETE", "VERIFIED"
        )?;
        for (n, h) in cfg.nodes.iter().zip(&all) {
            match h {
                Ok(h) => {
                    for m in &h.models {
                        let rev = if m.refs.is_empty() {
                            m.commit[..12].to_string()
                        } else {
                            format!("{} ({})", m.refs.join(","), &m.commit[..8])
                        };
                        writeln!(
                            out,
                            "{:<12} {:<32} {:<20} {:>10} {:>6} {:<9} {:<8}",
                            n.label(),
                            m.id,
                            rev,
                            format_bytes(m.size),
                            m.files,
                            if m.complete { "yes" } else { "no" },
                            if m.verified { "yes" } else { "no" }
                        )?;
                    }
                    writeln!(
                        out,
                        "{:<12} free: {} in {}",
                        n.label(),
                        format_bytes(h.free),
                        h.hub
                    )?;
                }
                Err(e) => writeln!(out, "{:<12} error: {e}", n.label())?,
            }
        }
    }
    Ok(if all.iter().all(Result::is_ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn rm(a: &ModelRmArgs) -> anyhow::Result<ExitCode> {
    let model = ModelRef::parse(&a.model).map_err(UsageError)?;
    // MODEL@REV removes that revision; MODEL alone every revision.
    let one = a.model.contains('@').then_some(model.revision.as_str());
    let what = match one {
        Some(rev) => format!("{}@{rev}", model.id),
        None => model.id.clone(),
    };
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    let all = sync::holdings(&cfg);
    let mut plan_text = match one {
        Some(_) => format!(
            "remove {what} (its snapshot, the refs naming it, the files no other revision uses) from the Hugging Face cache of:\n"
        ),
        None => format!("remove {what} (every revision) from the Hugging Face cache of:\n"),
    };
    let mut any = false;
    for (n, h) in cfg.nodes.iter().zip(&all) {
        match h {
            Ok(h) => {
                let held: Vec<_> = h
                    .models
                    .iter()
                    .filter(|m| {
                        m.id == model.id
                            && one.is_none_or(|r| m.commit == r || m.refs.iter().any(|x| x == r))
                    })
                    .collect();
                let size: u64 = held.iter().map(|m| m.size).sum();
                any |= !held.is_empty();
                let at = match (one, held.first()) {
                    (Some(_), Some(m)) => format!(" at {}", m.commit),
                    _ => String::new(),
                };
                plan_text.push_str(&format!(
                    "  node {}: {}\n",
                    n.label(),
                    if held.is_empty() {
                        "not there".into()
                    } else {
                        format!(
                            "{}/{}{at} ({}{})",
                            h.hub,
                            cache::folder_of(&model.id),
                            if one.is_some() { "up to " } else { "" },
                            format_bytes(size)
                        )
                    }
                ));
            }
            Err(e) => anyhow::bail!("{e}"),
        }
    }
    print!("{plan_text}");
    if !any {
        println!("nothing to remove: no node holds {what}");
        return Ok(ExitCode::SUCCESS);
    }
    if a.mode.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    if !a.confirm.yes {
        let question = format!("Remove {what} from every node?");
        if !std::io::stdin().is_terminal() {
            return Err(UsageError(format!(
                "not removing without confirmation: pass --yes\n  hint: {question}"
            ))
            .into());
        }
        if !dialoguer::Confirm::new()
            .with_prompt(question)
            .default(false)
            .interact()?
        {
            println!("nothing removed");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let freed = sync::remove(&cfg, &what)?;
    for (n, f) in cfg.nodes.iter().zip(freed) {
        println!("node {}: removed, {} freed", n.label(), format_bytes(f));
    }
    Ok(ExitCode::SUCCESS)
}
