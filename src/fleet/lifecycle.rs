//! `cluster up` and `cluster down` as library entry points: Ray (or
//! llama.cpp's RPC servers) on every node, then `halobox metrics` on every
//! node's host ([`metrics_nodes`]); and their end, the serve on the head
//! first, the exporters last. Their words go to a [`Reporter`].

use std::path::Path;

use super::metrics_nodes;
use crate::cluster::config::{ClusterConfig, Engine};
use crate::cluster::env::NodeEnv;
use crate::cluster::{auth, plan, run};
use crate::reporter::{Out, Reporter};
use crate::serve::rpc_servers;
use crate::shell;

/// `cluster up` of `cfg` (read from `path`, perhaps changed in memory):
/// Ray, or llama.cpp's RPC servers, then (with `metrics`) `halobox
/// metrics` on every node; each node's env as applied. An exporter that
/// does not start is a warning: the cluster itself is up.
pub fn up(
    cfg: &ClusterConfig,
    path: &Path,
    dry_run: bool,
    timeout_s: u64,
    mode: auth::Mode,
    metrics: bool,
    r: &mut dyn Reporter,
) -> anyhow::Result<Vec<NodeEnv>> {
    if mode == auth::Mode::Insecure && cfg.engine != Engine::LlamaCpp {
        r.note(&format!("{}\n", auth::INSECURE_WARNING));
    }
    let envs = engine_up(cfg, path, dry_run, timeout_s, mode, r)?;
    if !metrics {
        r.out("halobox metrics: not started (--no-metrics)\n");
        return Ok(envs);
    }
    if dry_run {
        r.out("\nthen halobox metrics on every node's host:\n");
        for node in &cfg.nodes {
            r.out(&format!(
                "  {}: {}\n",
                node.label(),
                crate::shell::line(&run::node_argv(
                    cfg,
                    node,
                    &metrics_nodes::metrics_argv(cfg, node, path)
                ))
            ));
        }
        return Ok(envs);
    }
    let mut failed = false;
    for (_, said) in metrics_nodes::up(cfg, path) {
        match said {
            Ok(line) => r.out(&format!("{line}\n")),
            Err(e) => {
                failed = true;
                r.note(&format!("warning: {e}\n"));
            }
        }
    }
    if failed {
        r.note("warning: halobox metrics did not start on every node (see above); the cluster is up without it there: free the port, then run `halobox cluster up` again\n");
    }
    Ok(envs)
}

/// The engine's cluster alone: Ray on every node, or llama.cpp's RPC
/// servers on the workers; each node's env as applied.
pub fn engine_up(
    cfg: &ClusterConfig,
    path: &Path,
    dry_run: bool,
    timeout_s: u64,
    mode: auth::Mode,
    r: &mut dyn Reporter,
) -> anyhow::Result<Vec<NodeEnv>> {
    match cfg.engine {
        Engine::LlamaCpp => super::rpc_up::up(cfg, dry_run, &mut Out(r)),
        _ => super::ray_up::up(cfg, path, dry_run, timeout_s, mode, &mut Out(r)),
    }
}

/// Stops the engine's cluster alone: llama.cpp's RPC servers on the
/// workers, or Ray on every node (the up's record forgotten too when
/// `forget` names the cluster file); a note for each node that did not
/// stop.
pub fn engine_down(cfg: &ClusterConfig, forget: Option<&Path>) -> Vec<String> {
    if cfg.engine == Engine::LlamaCpp {
        return super::rpc_up::down(cfg)
            .into_iter()
            .filter_map(|(name, said)| {
                said.err()
                    .map(|e| format!("{name}: RPC server not stopped: {e}"))
            })
            .collect();
    }
    let down = match forget {
        Some(path) => super::ray_up::down_and_forget(cfg, path),
        None => super::ray_up::down(cfg),
    };
    down.iter()
        .filter(|d| d.outcome != "stopped")
        .map(|d| format!("{}: Ray not stopped: {}", d.name, d.detail))
        .collect()
}

/// Stops `halobox metrics` on every node: true when each was asked.
fn stop_metrics(cfg: &ClusterConfig, r: &mut dyn Reporter) -> bool {
    let mut ok = true;
    for (name, said) in metrics_nodes::down(cfg) {
        match said {
            Ok(said) if said == "none" => {}
            Ok(said) => r.out(&format!("{name}: halobox metrics {said}\n")),
            Err(e) => {
                ok = false;
                r.out(&format!("{name}: halobox metrics: FAILED: {e}\n"));
            }
        }
    }
    ok
}

/// `cluster down --dry-run`: what [`down`] runs on each node, in its
/// order (the serve on the head, then Ray or the RPC servers, then
/// `halobox metrics`), one line each.
pub fn down_plan(cfg: &ClusterConfig) -> Vec<String> {
    let mut lines = vec![format!(
        "{} (first: a vLLM that halobox serve started, and its shm segments): {}",
        cfg.head().label(),
        shell::line(&crate::serve::control::stop_argv(cfg))
    )];
    let engine: Vec<_> = if cfg.engine == Engine::LlamaCpp {
        rpc_servers::workers(cfg)
            .iter()
            .map(|n| (n, rpc_servers::stop_command(cfg, n)))
            .collect()
    } else {
        cfg.nodes
            .iter()
            .map(|n| (n, plan::stop_command(cfg, n)))
            .collect()
    };
    for (node, argv) in engine {
        lines.push(format!(
            "{}: {}",
            node.label(),
            shell::line(&run::node_argv(cfg, node, &argv))
        ));
    }
    for node in &cfg.nodes {
        lines.push(format!(
            "{} (last: halobox metrics on its host): {}",
            node.label(),
            shell::line(&run::node_argv(
                cfg,
                node,
                &metrics_nodes::stop_command(node)
            ))
        ));
    }
    lines
}

/// `cluster down` of `cfg` (read from `config_path`): the serve on the
/// head first, then Ray or the RPC servers (the record of the `up` that
/// started Ray goes once the head's Ray stopped), then `halobox metrics`;
/// true when every node stopped.
pub fn down(cfg: &ClusterConfig, config_path: &Path, r: &mut dyn Reporter) -> bool {
    match crate::serve::control::stop_over_ssh(cfg) {
        Ok(said) if said.starts_with("stopped ") => {
            r.out(&format!(
                "{}: {} stopped first ({said})\n",
                cfg.head().label(),
                cfg.engine.title()
            ));
        }
        Ok(_) => {}
        Err(e) => r.note(&format!(
            "warning: could not look for a running {} on the head first: {e}\n",
            cfg.engine.title()
        )),
    }
    if cfg.engine == Engine::LlamaCpp {
        let mut ok = true;
        for (name, said) in super::rpc_up::down(cfg) {
            match said {
                Ok(said) => r.out(&format!("{name}: RPC server {said}\n")),
                Err(e) => {
                    ok = false;
                    r.out(&format!("{name}: FAILED: {e}\n"));
                }
            }
        }
        if !ok {
            r.note(
                "error: an RPC server was not stopped (see above); `halobox cluster status` shows them, then run `halobox cluster down` again\n",
            );
        }
        return stop_metrics(cfg, r) && ok;
    }
    let results = super::ray_up::down_and_forget(cfg, config_path);
    let mut ok = true;
    for n in &results {
        if n.outcome == "stopped" {
            r.out(&format!("{}: stopped ({})\n", n.name, n.detail));
        } else {
            ok = false;
            r.out(&format!(
                "{}: {}: {}\n",
                n.name,
                n.outcome.to_uppercase(),
                n.detail
            ));
        }
    }
    if !ok {
        r.note(
            "error: Ray was not stopped on every node (see above); stop it there by hand with `ray stop`, then run `halobox cluster down` again\n",
        );
    }
    stop_metrics(cfg, r) && ok
}
