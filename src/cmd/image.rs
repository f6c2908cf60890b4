//! `halobox image add-layer` and `image sync`: the flags become the
//! library's options ([`add_layer::run`], [`image_sync::sync`]); and the
//! hidden commands each node runs for a sync ([`image_store`], and the
//! model sync's stream into the image blob store).

use std::io::BufRead;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::cli::{AddLayerArgs, ImageCommand, ImageSyncArgs};
use crate::cluster::{image_store, image_sync};
use crate::image::add_layer;
use crate::model::transfer;
use crate::reporter::Terminal;

/// Runs `halobox image …`.
pub fn run(cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    let store = || image_store::store_dir().map_err(anyhow::Error::msg);
    match cmd {
        ImageCommand::AddLayer(args) => run_add_layer(&args),
        ImageCommand::Sync(args) => run_sync(&args),
        ImageCommand::NodeExport { image } => {
            json(&image_store::export(&store()?, &image).map_err(anyhow::Error::msg)?)
        }
        ImageCommand::NodeHeld { image } => json(&image_store::HeldReply {
            held: image_store::held(&image).map_err(anyhow::Error::msg)?,
        }),
        ImageCommand::NodePrepare => {
            let req: image_store::PrepareRequest = serde_json::from_str(&stdin_line()?)
                .map_err(|e| anyhow::anyhow!("the request on stdin cannot be read: {e}"))?;
            json(&image_store::prepare(&store()?, &req).map_err(anyhow::Error::msg)?)
        }
        ImageCommand::NodeReceive => {
            let (job, dir) = read_job()?;
            let r = transfer::receive(&job, &dir, &mut std::io::stdout())
                .map_err(anyhow::Error::msg)?;
            json(&r)
        }
        ImageCommand::NodeSend => {
            let (job, dir) = read_job()?;
            let n =
                transfer::send(&job, &dir, &mut std::io::stdout()).map_err(anyhow::Error::msg)?;
            json(&serde_json::json!({ "sent": n }))
        }
        ImageCommand::NodeImport {
            image,
            commit,
            digest,
            docker_id,
        } => {
            let want = match (digest, docker_id) {
                (_, Some(id)) => image_store::Want::DockerId(id),
                (Some(d), None) => image_store::Want::Digest(d),
                (None, None) => anyhow::bail!("--digest or --docker-id is needed"),
            };
            json(
                &image_store::import(&store()?, &image, &commit, &want)
                    .map_err(anyhow::Error::msg)?,
            )
        }
        ImageCommand::NodeStage { digest } => {
            // Stopped (the stream failed, the run was killed: the remote
            // guard's SIGTERM), it ends between two prefixes, never inside
            // an import.
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            for sig in [
                signal_hook::consts::SIGTERM,
                signal_hook::consts::SIGINT,
                signal_hook::consts::SIGHUP,
            ] {
                signal_hook::flag::register(sig, std::sync::Arc::clone(&stop))
                    .context("catching SIGTERM, SIGINT and SIGHUP")?;
            }
            let staged = image_store::stage_following(&store()?, &digest, &stop);
            if let Some(w) = &staged.warning {
                eprintln!("warning: {w}");
            }
            json(&staged)
        }
    }
}

/// A node's answer, as one JSON line.
fn json<T: serde::Serialize>(v: &T) -> anyhow::Result<ExitCode> {
    println!("{}", serde_json::to_string(v)?);
    Ok(ExitCode::SUCCESS)
}

fn stdin_line() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line)
}

/// The job line on stdin, and this node's image store (which must be the job's).
fn read_job() -> anyhow::Result<(transfer::Job, std::path::PathBuf)> {
    let job: transfer::Job = serde_json::from_str(stdin_line()?.trim())
        .map_err(|e| anyhow::anyhow!("the sync job on stdin cannot be read: {e}"))?;
    let dir = image_store::store_dir().map_err(anyhow::Error::msg)?;
    if dir.display().to_string() != job.hub {
        anyhow::bail!(
            "this node's image blob store is {}, not {} as planned\n  hint: the store follows XDG_DATA_HOME (or HOME): give the ssh login the same one on every node (`export XDG_DATA_HOME=…` in ~/.ssh/environment), then `halobox image sync` again",
            dir.display(),
            job.hub
        );
    }
    Ok((job, dir))
}

fn run_sync(args: &ImageSyncArgs) -> anyhow::Result<ExitCode> {
    let o = image_sync::Options {
        image: args.image.clone(),
        cluster: args.file.cluster.clone(),
        dry_run: args.mode.dry_run(),
        json: args.mode.json(),
    };
    image_sync::sync(&o, &mut Terminal)?;
    Ok(ExitCode::SUCCESS)
}

fn run_add_layer(args: &AddLayerArgs) -> anyhow::Result<ExitCode> {
    let o = add_layer::Options {
        base: args.base.clone(),
        add: args.add.clone(),
        no_dereference: args.no_dereference,
        tag: args.tag.clone(),
        label: args.label.clone(),
        output: args.output.clone(),
        load: args.load,
        engine: args.engine.engine.clone(),
        dry_run: args.mode.dry_run(),
        json: args.mode.json(),
    };
    add_layer::run(&o, &mut Terminal)?;
    Ok(ExitCode::SUCCESS)
}
