//! `halobox plan MODEL`: the placement preview. Reads the model's headers
//! here, the nodes' memory from cluster.toml (as `serve` does) or from
//! `--nodes N --gtt SIZE`, and prints [`crate::model::placement`]'s splits.

use std::process::ExitCode;

use crate::cli::PlanArgs;
use crate::cluster::config;
use crate::error::UsageError;
use crate::model::fit::{FitRequest, Split};
use crate::model::memory_args::{self, Flags};
use crate::model::placement::{self, Ask};
use crate::serve::fit;
use crate::serve::plan::SAFE_GPU_MEMORY;

/// Runs `plan`.
pub fn run(a: &PlanArgs) -> anyhow::Result<ExitCode> {
    let args = memory_args::read(
        &Flags {
            max_model_len: a.max_model_len,
            tp: a.tp,
            gpu_memory_utilization: a.gpu_memory_utilization,
        },
        &a.extra,
    )
    .map_err(UsageError)?;
    let utilization = args.gpu_memory_utilization.unwrap_or(SAFE_GPU_MEMORY);
    if !(utilization > 0.0 && utilization <= 1.0) {
        return Err(UsageError(format!(
            "--gpu-memory-utilization {utilization} is not a fraction in (0, 1]"
        ))
        .into());
    }
    let kv = args.kv_options().map_err(UsageError)?;
    let size = fit::model_size(
        &a.model,
        &a.extra,
        crate::model::cache::hub_dir_from_env().as_deref(),
    )
    .map_err(|e| UsageError(format!("cannot read the model: {e}")))?;
    let nodes = match (a.nodes, &a.gtt) {
        (Some(n), Some(g)) => {
            placement::hypothetical(n, placement::parse_size(g).map_err(UsageError)?)
        }
        _ => {
            let (_, cfg) = config::open(a.file.cluster.as_deref())?;
            fit::cluster_memory(&cfg)
        }
    };
    let ask = Ask {
        tp: args.tp,
        pp: args.pp,
        request: FitRequest {
            split: Split::Tensor { tp: 1, pp: 1 },
            max_model_len: args.max_model_len,
            utilization,
            kv,
        },
    };
    let p = placement::place(&size, &ask, &nodes);
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
