//! `halobox cluster up` and `cluster down` (the library's [`crate::fleet::up`] and
//! [`crate::fleet::down`]); `down --dry-run` prints what each node runs.

use std::process::ExitCode;

use crate::cli::{ClusterDownArgs, ClusterUpArgs};
use crate::cluster::auth;
use crate::cluster::config;
use crate::fleet;
use crate::reporter::Terminal;

pub fn up(a: &ClusterUpArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    fleet::up(
        &cfg,
        &path,
        a.plan.dry_run,
        a.timeout.unwrap_or(cfg.timeout_s),
        if a.insecure_ray {
            auth::Mode::Insecure
        } else {
            auth::Mode::Token
        },
        !a.no_metrics,
        &mut Terminal,
    )?;
    Ok(ExitCode::SUCCESS)
}

pub fn down(a: &ClusterDownArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    if a.plan.dry_run {
        for line in fleet::lifecycle::down_plan(&cfg) {
            println!("{line}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    Ok(if fleet::down(&cfg, &path, &mut Terminal) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
