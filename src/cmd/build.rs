//! `halobox build`: load the image definition, resolve the build, then print
//! it (`--dry-run`) or send it to the engine's classic builder.

use std::process::ExitCode;

use crate::cli::BuildArgs;
use crate::engine::build::BuildRequest;
use crate::engine::{block_on, connect};
use crate::error::UsageError;
use crate::image::build::{self, BuildOptions};
use crate::image::compose::rfc3339;
use crate::image::definition;
use crate::image::git;
use crate::image::layer::source_date_epoch;

/// Runs `halobox build`.
pub fn run(args: &BuildArgs) -> anyhow::Result<ExitCode> {
    let def = definition::load(&definition::locate(&args.image)).map_err(UsageError)?;
    let created = match source_date_epoch().map_err(UsageError)? {
        Some(s) => rfc3339(s),
        None => rfc3339(chrono::Utc::now().timestamp().max(0) as u64),
    };
    let opts = BuildOptions {
        target: args.target.clone(),
        build_args: args.build_arg.clone(),
        tags: args.tag.clone(),
        created,
        revision: git::revision(),
    };
    let plan = build::plan(&def, &opts).map_err(UsageError)?;
    if args.mode.dry_run() {
        let dry = build::dry_run(&plan).map_err(|e| {
            anyhow::anyhow!("reading the build context {}: {e}", plan.context.display())
        })?;
        if args.mode.json() {
            println!("{}", serde_json::to_string_pretty(&dry)?);
        } else {
            print!("{}", build::render(&dry));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let context = build::context_tar(&plan).map_err(|e| {
        anyhow::anyhow!("packing the build context {}: {e}", plan.context.display())
    })?;
    eprintln!(
        "build {} from {} ({} KiB context)",
        plan.name,
        plan.definition.display(),
        context.len() / 1024
    );
    block_on(async {
        let engine = connect(args.engine.engine.as_deref()).await?;
        let start = std::time::Instant::now();
        let id = engine
            .build(BuildRequest {
                containerfile: plan.containerfile.clone(),
                target: plan.target.clone(),
                args: plan.args.clone().into_iter().collect(),
                labels: plan.labels.clone().into_iter().collect(),
                tag: plan.tags[0].clone(),
                context,
            })
            .await?;
        let first = crate::image_ref::ImageRef::parse(&plan.tags[0]).map_err(UsageError)?;
        for t in &plan.tags[1..] {
            let r = crate::image_ref::ImageRef::parse(t).map_err(UsageError)?;
            engine.tag(&first.to_string(), &r).await?;
        }
        let secs = start.elapsed().as_secs_f64();
        if args.mode.json() {
            println!(
                "{}",
                serde_json::json!({"id": id, "tags": plan.tags, "seconds": secs})
            );
        } else {
            println!("built {} ({id}) in {secs:.1} s", plan.tags.join(", "));
        }
        Ok(ExitCode::SUCCESS)
    })?
}
