//! `halobox cluster join`: Ray on this node, as `cluster up` runs it on each node.

use std::process::ExitCode;

use crate::cli::ClusterJoinArgs;
use crate::cluster::auth;
use crate::cluster::env::{self, EnvRequest};
use crate::cluster::join::{self, JoinRequest, RayAuth};
use crate::cluster::plan::{self, in_container, with_env};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::shell;

fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1))
}

pub fn join(a: &ClusterJoinArgs) -> anyhow::Result<ExitCode> {
    if a.source.sysroot.is_some() && !a.mode.dry_run() {
        return Err(UsageError(
            "--sysroot reads a snapshot of another machine: Ray cannot be started from it; add --dry-run".into(),
        )
        .into());
    }
    if a.mode.json() && !a.mode.dry_run() {
        return Err(UsageError("--json goes with --dry-run".into()).into());
    }
    let root = match &a.source.sysroot {
        Some(dir) => HostRoot::sysroot(dir)?,
        None => HostRoot::live(),
    };
    let facts = host::gather(root, GatherOptions::default());
    // A snapshot's CPU count is its own, never this machine's.
    let cpus = match (a.num_cpus, &a.source.sysroot, facts.cpus_online) {
        (Some(n), _, _) => n,
        (None, Some(_), Some(n)) => n,
        (None, Some(dir), None) => {
            return Err(UsageError(format!(
                "{} has no sys/devices/system/cpu/online, so its CPU count is unknown\n  hint: pass --num-cpus N",
                dir.display()
            ))
            .into());
        }
        (None, None, _) => cpus(),
    };
    crate::cluster::vars::check_not_secret(&a.not_secret)
        .map_err(|e| UsageError(format!("--not-secret: {e}")))?;
    let parse = |list: &[String]| -> Result<Vec<env::EnvVar>, UsageError> {
        list.iter()
            .map(|s| {
                env::parse_assignment(s, &a.not_secret)
                    .map_err(|e| UsageError(format!("--env {e}")))
            })
            .collect()
    };
    let req = JoinRequest {
        env: EnvRequest {
            ip: a.ip,
            head: a.head,
            port: a.ray_node.port,
            transport: a.ray_node.transport,
            cpus,
            ray: a.ray.clone(),
            ray_args: a.ray_arg.clone(),
            ray_head_args: a.ray_head_arg.clone(),
            env: parse(&a.env)?,
            node_env: parse(&a.node_env)?,
            cluster_node_env: a.per_node_name.clone(),
        },
        backend: a.ray_node.backend,
        container: a.ray_node.container.clone(),
        engine: a.engine.engine.clone(),
        halobox: "halobox".into(),
        check_port: a.source.sysroot.is_none(),
        auth: None,
    };
    let named = |e: String| anyhow::anyhow!("node {}: {e}", a.ip);
    if a.source.sysroot.is_some() && a.ray_node.backend.is_container() && !a.mode.json() {
        let env = env::plan(&facts, &req.env).map_err(|e| named(e.to_string()))?;
        print!("{}", plan::render_env(&env));
        let full = in_container(
            "halobox",
            a.ray_node.backend,
            &a.ray_node.container,
            &with_env(&env.vars, &env.ray_start),
        );
        println!("# runs as: {}", shell::line(&full));
        return Ok(ExitCode::SUCCESS);
    }
    let report =
        join::report(&facts, &req, a.mode.dry_run()).map_err(|e| named(format!("{e:#}")))?;
    if a.mode.dry_run() {
        if a.mode.json() {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print!("{}", plan::render_join(&report));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let req = JoinRequest {
        auth: if a.ray_token_stdin {
            Some(RayAuth::Token(auth::read_token_line(std::io::stdin())?))
        } else if a.insecure_ray {
            eprintln!("{}", auth::INSECURE_WARNING);
            Some(RayAuth::Insecure)
        } else {
            None
        },
        ..req
    };
    join::start(&report, &req, &mut crate::reporter::Terminal)
        .map_err(|e| named(format!("{e:#}")))?;
    Ok(ExitCode::SUCCESS)
}
