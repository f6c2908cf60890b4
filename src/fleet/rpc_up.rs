//! llama.cpp's executor of `cluster up` and `cluster down` (Ray's is
//! [`super::ray_up`]): every worker's data-plane facts, then its RPC server
//! started in its container ([`crate::serve::rpc_servers`] says how), or
//! stopped.

use std::io::Write;

use anyhow::bail;

use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::env::{EnvVar, NodeEnv};
use crate::cluster::run::{self, each_node, remote_node};
use crate::remote::Masters;
use crate::serve::rpc_servers::{
    NODE_TIMEOUT, endpoint, iwarp_warning, rdma_env, start_command, stop_command, workers,
};
use crate::shell;

/// `cluster up` with engine `llama.cpp`: every worker's data-plane facts
/// (its `join --dry-run`, for RDMA), then its RPC server started; progress
/// to `out`. Returns each worker's env (its transport and why).
pub fn up(cfg: &ClusterConfig, dry_run: bool, out: &mut dyn Write) -> anyhow::Result<Vec<NodeEnv>> {
    let workers = workers(cfg);
    writeln!(
        out,
        "engine llama.cpp: llama-server on the head {} ({}), an RPC server on each of {} other node(s), port {}, bound to each node's data-plane address only",
        cfg.head().label(),
        cfg.head().ip,
        workers.len(),
        cfg.rpc_port
    )?;
    if workers.is_empty() {
        writeln!(
            out,
            "one node: nothing to start (`halobox serve` runs llama-server alone)"
        )?;
        return Ok(Vec::new());
    }
    let masters = Masters::start(
        &workers
            .iter()
            .map(|n| remote_node(cfg, n))
            .collect::<Vec<_>>(),
    );
    let facts = run::reports_of(cfg, workers, &masters);
    let mut envs = Vec::new();
    for (node, f) in workers.iter().zip(facts) {
        match f {
            Ok(r) => envs.push(r.env),
            Err(e) => bail!(
                "{e}\n  hint: fix node {} first; nothing was started",
                node.label()
            ),
        }
    }
    for (node, env) in workers.iter().zip(&envs) {
        if let Some(w) = iwarp_warning(node, env) {
            writeln!(out, "{w}")?;
        }
        let rdma = rdma_env(env);
        writeln!(
            out,
            "node {} ({}): {} ({}){}",
            node.label(),
            node.ip,
            if rdma.is_empty() { "TCP" } else { "RDMA" },
            env.reason,
            if rdma.is_empty() {
                String::new()
            } else {
                format!(
                    ", {}",
                    rdma.iter()
                        .map(|v| format!("{}={}", v.name, v.value))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            }
        )?;
        if dry_run {
            writeln!(
                out,
                "  from here: {}",
                shell::line(&run::node_argv(cfg, node, &start_command(cfg, node, &rdma)))
            )?;
        }
    }
    if dry_run {
        writeln!(out, "Nothing was started (--dry-run).")?;
        return Ok(envs);
    }
    let pairs: Vec<(NodeConfig, Vec<EnvVar>)> = workers
        .iter()
        .cloned()
        .zip(envs.iter().map(rdma_env))
        .collect();
    let results: Vec<Result<String, String>> =
        crate::fan_out::each(&pairs, |_, (node, env)| start_one(cfg, &masters, node, env));
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(line) => writeln!(out, "{line}")?,
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        bail!(
            "{} of {} RPC server(s) did not start:\n  {}\n  hint: the others keep running; `halobox cluster down` stops them",
            errors.len(),
            workers.len(),
            errors.join("\n  ")
        );
    }
    writeln!(
        out,
        "{} RPC server(s) listening; `halobox serve MODEL.gguf` on the head uses them",
        workers.len()
    )?;
    Ok(envs)
}

/// Starts one RPC server: the line to print, or the error naming the node.
fn start_one(
    cfg: &ClusterConfig,
    masters: &Masters,
    node: &NodeConfig,
    env: &[EnvVar],
) -> Result<String, String> {
    let n = remote_node(cfg, node).through(masters);
    let done = n
        .run(&start_command(cfg, node, env), NODE_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let code = done.status.and_then(|s| s.code());
    let said = crate::remote::tail(&done.output, 5);
    let at = format!("node {} ({})", node.label(), node.ip);
    match code {
        Some(0) => {
            let line = done
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix("halobox-rpc-pid "))
                .unwrap_or("?")
                .to_string();
            Ok(format!(
                "{at}: RPC server on {} (pid {line})",
                endpoint(cfg, node)
            ))
        }
        Some(98) => Err(format!(
            "{at}: container {} has no RPC server: {said}\n  hint: refresh the node with a llama.cpp image built with GGML_RPC=ON (`halobox refresh --image …`), or set `rpc_server` (or `llama_server`) in cluster.toml to its path",
            node.container
        )),
        Some(99) => Err(format!(
            "{at}: the RPC server could not listen on {}: {said}\n  hint: `ss -ltnp 'sport = :{}'` on the node shows who holds the port; stop it, or set another `rpc_port` in cluster.toml",
            endpoint(cfg, node),
            cfg.rpc_port
        )),
        _ => Err(n.error("the RPC server's start", &done).to_string()),
    }
}

/// `cluster down` with engine `llama.cpp`: every worker's RPC server
/// stopped; per node, its name and what the stop said (or the error).
pub fn down(cfg: &ClusterConfig) -> Vec<(String, Result<String, String>)> {
    each_node(workers(cfg), |node| {
        let r = remote_node(cfg, node)
            .run_ok(
                "the RPC server's stop",
                &stop_command(cfg, node),
                NODE_TIMEOUT,
            )
            .map(|d| d.stdout.lines().last().unwrap_or("none").trim().to_string())
            .map_err(|e| e.to_string());
        (node.label().to_string(), r)
    })
}
