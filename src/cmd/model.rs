//! `halobox model sync|ls|rm`, and the hidden commands each node runs for
//! them.

use std::io::BufRead;
use std::process::ExitCode;

use crate::cli::{ModelCommand, ModelLsArgs, ModelPullArgs, ModelRmArgs, ModelSyncArgs};
use crate::error::UsageError;
use crate::model::cache::ModelRef;
use crate::model::{facts, flow, transfer};
use crate::reporter::{Prompt, Terminal};

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

fn pull(a: &ModelPullArgs) -> anyhow::Result<ExitCode> {
    let o = flow::PullOptions {
        model: a.model.clone(),
        on: a.on.clone(),
        include: a.include.clone(),
        exclude: a.exclude.clone(),
        cluster: a.file.cluster.clone(),
        dry_run: a.mode.dry_run,
        token: crate::serve::prepare::secret("HF_TOKEN"),
    };
    flow::pull(&o, &mut Terminal)?;
    Ok(ExitCode::SUCCESS)
}

fn sync_cmd(a: &ModelSyncArgs) -> anyhow::Result<ExitCode> {
    let o = flow::SyncOptions {
        model: a.model.clone(),
        from: a.from.clone(),
        verify: a.verify,
        cluster: a.file.cluster.clone(),
        dry_run: a.mode.dry_run,
    };
    flow::sync(&o, &mut Terminal)?;
    Ok(ExitCode::SUCCESS)
}

fn ls(a: &ModelLsArgs) -> anyhow::Result<ExitCode> {
    Ok(
        match flow::ls(a.file.cluster.as_deref(), a.output.json, &mut Terminal)? {
            true => ExitCode::SUCCESS,
            false => ExitCode::FAILURE,
        },
    )
}

fn rm(a: &ModelRmArgs) -> anyhow::Result<ExitCode> {
    let o = flow::RmOptions {
        model: a.model.clone(),
        cluster: a.file.cluster.clone(),
        dry_run: a.mode.dry_run,
        yes: a.confirm.yes,
    };
    flow::rm(&o, &mut Terminal, &mut Prompt)?;
    Ok(ExitCode::SUCCESS)
}
