//! `halobox plan MODEL`: the placement preview. The library's
//! [`crate::serve::decide::plan`] reads the model, the nodes (cluster.toml's,
//! as `serve` does, or `--nodes N --gtt SIZE`) and decides; this prints its
//! splits, their fit and estimated speed, and the one chosen.

use std::process::ExitCode;

use crate::cli::PlanArgs;
use crate::error::UsageError;
use crate::model::placement;
use crate::serve::decide;

/// Runs `plan`.
pub fn run(a: &PlanArgs) -> anyhow::Result<ExitCode> {
    let p = decide::plan(&a.request().map_err(UsageError)?)?;
    if a.output.json {
        println!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        print!("{}", placement::render(&p, a.verbose));
    }
    Ok(if p.chosen.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
