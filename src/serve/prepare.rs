//! `vllm serve` on the head: the head's env from its own facts, the plan
//! and the command it runs in the head's container. `HF_TOKEN` and
//! `VLLM_API_KEY` are handed to it on stdin ([`super::program::start`]),
//! never in an argument.

use super::plan::{self, ServePlan, ServeRequest};
use crate::cluster::config::ClusterConfig;
use crate::cluster::env::{self, EnvError, EnvRequest};
use crate::cluster::plan::with_env;
use crate::error::UsageError;
use crate::host::HostFacts;

/// `name` from this process's environment, when set and not empty.
pub fn secret(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|t| !t.is_empty())
}

/// The serve plan for this head (whose facts are `facts`) and the argv that
/// starts it detached in the head's container ([`super::engine::Head::start_argv`]). With `dry_run`, a machine
/// that is not the head still gets the plan, without the head's env (that
/// comes from the head's own facts) and with a note saying so.
pub fn prepare(
    cfg: &ClusterConfig,
    facts: &HostFacts,
    req: &ServeRequest,
    dry_run: bool,
) -> anyhow::Result<(ServePlan, Vec<String>)> {
    let head = cfg.head();
    let env_req = EnvRequest {
        ip: head.ip,
        head: head.ip,
        port: cfg.ray_port,
        transport: cfg.transport,
        cpus: head.cpus.unwrap_or(1),
        ray: cfg.ray.clone(),
        ray_args: vec![],
        ray_head_args: vec![],
        env: env::vars(&cfg.env),
        node_env: env::vars(&head.env),
        cluster_node_env: cfg.node_env_names(),
    };
    let where_ = format!("{} ({})", head.ip, head.label());
    let run_there = format!("ssh {} halobox serve {} …", head.ssh, req.model);
    let head_env = match env::plan(facts, &env_req) {
        Ok(e) => Some(e),
        Err(EnvError::IpNotFound { .. }) if dry_run => None,
        Err(EnvError::IpNotFound { .. }) => {
            return Err(anyhow::anyhow!(
                "this machine does not hold the head's address {where_}: `halobox serve` runs on the head, next to the Ray driver\n  hint: {run_there}"
            ));
        }
        Err(other) => return Err(anyhow::anyhow!("head {}: {other}", head.label())),
    };
    let mut p =
        plan::serve_with(req, head_env.as_ref(), cfg.nodes.len(), &cfg.vllm).map_err(UsageError)?;
    if head_env.is_none() {
        p.notes.insert(
            0,
            format!(
                "this machine does not hold the head's address {where_}: `halobox serve` runs on the head ({run_there}), whose own facts give the NCCL/Ray env left out above"
            ),
        );
    }
    let argv = super::engine::Head::of(cfg).start_argv(
        &with_env(&p.env, &p.command),
        &p.secrets,
        p.clear_cache.then_some(plan::COMPILE_CACHE),
        None,
    );
    Ok((p, argv))
}
