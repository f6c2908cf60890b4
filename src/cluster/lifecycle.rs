//! `cluster up` and `cluster down` as library entry points: Ray (or
//! llama.cpp's RPC servers) on every node, and their end, the serve on
//! the head first. Their words go to a [`Reporter`].

use std::path::Path;

use super::config::{ClusterConfig, Engine};
use super::env::NodeEnv;
use super::{auth, run};
use crate::reporter::{Out, Reporter};
use crate::serve::rpc_servers as rpc;

/// `cluster up` of `cfg` (read from `path`, perhaps changed in memory):
/// Ray, or llama.cpp's RPC servers; each node's env as applied.
pub fn up(
    cfg: &ClusterConfig,
    path: &Path,
    dry_run: bool,
    timeout_s: u64,
    mode: auth::Mode,
    r: &mut dyn Reporter,
) -> anyhow::Result<Vec<NodeEnv>> {
    if cfg.engine == Engine::LlamaCpp {
        return rpc::up(cfg, dry_run, &mut Out(r));
    }
    run::up(cfg, path, dry_run, timeout_s, mode, &mut Out(r))
}

/// `cluster down` of `cfg`: the serve on the head first, then Ray or the
/// RPC servers; true when every node stopped.
pub fn down(cfg: &ClusterConfig, r: &mut dyn Reporter) -> bool {
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
        for (name, said) in rpc::down(cfg) {
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
        return ok;
    }
    let results = run::down(cfg);
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
    ok
}
