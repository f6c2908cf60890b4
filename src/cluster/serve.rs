//! `vllm serve` on the head: the head's env from its own facts, the plan
//! and command, and the run itself. `HF_TOKEN` and `VLLM_API_KEY` are handed
//! to the command on stdin, never in an argument; with `--nccl-debug` vLLM's
//! output is copied through and the transport NCCL chose is said once.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};

use super::config::ClusterConfig;
use super::env::{self, EnvError, EnvRequest};
use super::plan::{self, ServePlan, ServeRequest};
use crate::error::UsageError;
use crate::host::HostFacts;

/// `name` from this process's environment, when set and not empty.
pub fn secret(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|t| !t.is_empty())
}

/// The serve plan for this head (whose facts are `facts`) and the full
/// command that runs it in the head's container. With `dry_run`, a machine
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
    let mut p = plan::serve(req, head_env.as_ref(), cfg.nodes.len()).map_err(UsageError)?;
    if head_env.is_none() {
        p.notes.insert(
            0,
            format!(
                "this machine does not hold the head's address {where_}: `halobox serve` runs on the head ({run_there}), whose own facts give the NCCL/Ray env left out above"
            ),
        );
    }
    let argv = plan::serve_argv(&cfg.halobox, head, &p);
    Ok((p, argv))
}

/// Runs `argv` with `secrets` (the values, in the plan's order) on its
/// stdin, one a line; with `nccl_debug` copies
/// its output through and says which transport NCCL used. Returns its exit
/// status.
pub fn run(argv: &[String], secrets: &[String], nccl_debug: bool) -> anyhow::Result<u8> {
    let (prog, args) = argv.split_first().expect("serve argv");
    let mut cmd = crate::proc::command(prog);
    cmd.args(args).stdin(if secrets.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    });
    if nccl_debug {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {prog}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        for value in secrets {
            stdin.write_all(format!("{value}\n").as_bytes())?;
        }
    }
    let seen = AtomicBool::new(false);
    let out = child.stdout.take();
    let err = child.stderr.take();
    std::thread::scope(|s| {
        if let Some(out) = out {
            s.spawn(|| echo(out, false, &seen));
        }
        if let Some(err) = err {
            s.spawn(|| echo(err, true, &seen));
        }
    });
    let status = child.wait()?;
    Ok(u8::try_from(status.code().unwrap_or(1).clamp(0, 255)).unwrap_or(1))
}

/// Copies vLLM's output through and says once which transport NCCL chose.
fn echo(from: impl Read, to_stderr: bool, seen: &AtomicBool) {
    for line in BufReader::new(from).lines().map_while(Result::ok) {
        if to_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
        if let Some(t) = plan::nccl_transport(&line)
            && !seen.swap(true, Ordering::SeqCst)
        {
            eprintln!("halobox: NCCL uses {t}");
        }
    }
}
