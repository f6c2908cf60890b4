//! `halobox bench collective`: all-reduce and all-gather across every node
//! of cluster.toml with torch.distributed, one rank per node in its halobox
//! container, as tensor parallelism feels the link.
//!
//! [`run()`] is the workflow: every node's report, the plan, the ranks,
//! the results saved. [`plan`] decides what runs (pure), [`mod@run`] runs
//! it over ssh and saves it, [`report`] derives the results (nccl-tests' bandwidths, the check of
//! the sums, the transport RCCL used) and [`nccl`] reads RCCL's log.
//! [`PROGRAM`] is what each rank runs (`collective.py`, sent on stdin).

pub mod nccl;
pub mod plan;
pub mod report;
pub mod run;

use std::path::{Path, PathBuf};

use crate::cluster::config::ClusterConfig;
use crate::error::UsageError;
use crate::reporter::Reporter;

/// Runs `bench collective` on `cfg`'s nodes: the results, and the folder
/// they were saved in (`save`, or a new one in the default place). A dry
/// run reports the plan (JSON with `json`) and returns `None`.
pub fn run(
    cfg: &ClusterConfig,
    opts: &plan::Options,
    save: Option<&Path>,
    dry_run: bool,
    json: bool,
    r: &mut dyn Reporter,
) -> anyhow::Result<Option<(report::Results, PathBuf)>> {
    let masters = crate::cluster::run::masters(cfg);
    let reports = run::node_reports(cfg, &masters)?;
    let plan = plan::build(cfg, &reports, opts).map_err(UsageError)?;
    if dry_run {
        r.out(&render_plan(cfg, &plan, json)?);
        return Ok(None);
    }
    let (started, stamp) = crate::bench::run::utc_now();
    let dir = match save {
        Some(d) => d.to_path_buf(),
        None => crate::bench::run::default_save_dir(&format!("{stamp}-collective"))?,
    };
    let ranks = run::execute(cfg, &plan, &masters);
    let rec = report::Record {
        schema_version: report::SCHEMA_VERSION,
        started_utc: started,
        causes: run::likely_causes(cfg, &reports),
        plan,
        ranks,
    };
    let res = report::derive(&rec);
    run::save(&dir, &rec, &res)?;
    Ok(Some((res, dir)))
}

/// The plan as shown by a dry run: each rank's ssh command line, or JSON.
fn render_plan(cfg: &ClusterConfig, p: &plan::Plan, json: bool) -> anyhow::Result<String> {
    if json {
        return Ok(format!("{}\n", serde_json::to_string_pretty(p)?));
    }
    let ssh: Vec<Vec<String>> = p
        .ranks
        .iter()
        .map(|r| {
            crate::cluster::run::remote_node(cfg, &cfg.nodes[r.rank]).unguarded_argv(&r.command)
        })
        .collect();
    Ok(plan::render(p, &ssh))
}

/// The rank program (Python), sent on each rank's stdin.
pub const PROGRAM: &str = include_str!("collective.py");
