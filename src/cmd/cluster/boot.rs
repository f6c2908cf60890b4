//! `halobox cluster enable` and `cluster disable` (the library's
//! [`crate::fleet::boot::run`]): systemd units that bring the cluster
//! back after a reboot, and their removal.

use std::process::ExitCode;

use crate::cli::ClusterBootArgs;
use crate::cluster::config;
use crate::fleet::boot::run;
use crate::reporter::Terminal;

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

pub fn enable(a: &ClusterBootArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    Ok(exit(run::enable(
        &cfg,
        &path,
        a.plan.dry_run,
        &mut Terminal,
    )?))
}

pub fn disable(a: &ClusterBootArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    Ok(exit(run::disable(
        &cfg,
        &path,
        a.plan.dry_run,
        &mut Terminal,
    )?))
}
