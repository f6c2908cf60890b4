//! `halobox cluster up` and `cluster down` (the library's [`crate::fleet::up`] and
//! [`crate::fleet::down`]); `down --dry-run` prints what each node runs.

use std::process::ExitCode;

use crate::cli::{ClusterDownArgs, ClusterUpArgs};
use crate::cluster::auth;
use crate::cluster::config::{self, Engine};
use crate::cluster::plan;
use crate::cluster::run;
use crate::fleet;
use crate::fleet::metrics_nodes;
use crate::reporter::Terminal;
use crate::serve::rpc_servers as rpc;
use crate::shell;

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
        println!(
            "{} (first: a vLLM that halobox serve started, and its shm segments): {}",
            cfg.head().label(),
            shell::line(&crate::serve::control::stop_argv(&cfg))
        );
        if cfg.engine == Engine::LlamaCpp {
            for node in rpc::workers(&cfg) {
                println!(
                    "{}: {}",
                    node.label(),
                    shell::line(&run::node_argv(&cfg, node, &rpc::stop_command(&cfg, node)))
                );
            }
        } else {
            for node in &cfg.nodes {
                println!(
                    "{}: {}",
                    node.label(),
                    shell::line(&run::node_argv(&cfg, node, &plan::stop_command(&cfg, node)))
                );
            }
        }
        for node in &cfg.nodes {
            println!(
                "{} (last: halobox metrics on its host): {}",
                node.label(),
                shell::line(&run::node_argv(
                    &cfg,
                    node,
                    &metrics_nodes::stop_command(node)
                ))
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    Ok(if fleet::down(&cfg, &path, &mut Terminal) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
