//! `vllm serve` on the head: the head's env from its own facts, the plan
//! and command, and the run itself. `HF_TOKEN` is handed to the command on
//! stdin, never in an argument; with `--nccl-debug` vLLM's output is copied
//! through and the transport NCCL chose is said once.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};

use super::config::ClusterConfig;
use super::env::{self, EnvError, EnvRequest};
use super::plan::{self, ServePlan, ServeRequest};
use crate::error::UsageError;
use crate::host::HostFacts;

/// `HF_TOKEN` from this process's environment, when set and not empty.
pub fn hf_token() -> Option<String> {
    std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty())
}

/// The serve plan for this head (whose facts are `facts`) and the full
/// command that runs it in the head's container.
pub fn prepare(
    cfg: &ClusterConfig,
    facts: &HostFacts,
    req: &ServeRequest,
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
    };
    let head_env = env::plan(facts, &env_req).map_err(|e| match e {
        EnvError::IpNotFound { .. } => anyhow::anyhow!(
            "this machine does not hold the head's address {} ({}): `halobox serve` runs on the head, next to the Ray driver\n  hint: ssh {} halobox serve {} …",
            head.ip,
            head.label(),
            head.ssh,
            req.model
        ),
        other => anyhow::anyhow!("head {}: {other}", head.label()),
    })?;
    let p = plan::serve(req, &head_env, cfg.nodes.len()).map_err(UsageError)?;
    let argv = plan::serve_argv(&cfg.halobox, head, &p);
    Ok((p, argv))
}

/// Runs `argv` with `token` (if any) on its stdin; with `nccl_debug` copies
/// its output through and says which transport NCCL used. Returns its exit
/// status.
pub fn run(argv: &[String], token: Option<&str>, nccl_debug: bool) -> anyhow::Result<u8> {
    let (prog, args) = argv.split_first().expect("serve argv");
    let mut cmd = crate::proc::command(prog);
    cmd.args(args).stdin(if token.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    if nccl_debug {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {prog}: {e}"))?;
    if let (Some(t), Some(mut stdin)) = (token, child.stdin.take()) {
        stdin.write_all(format!("{t}\n").as_bytes())?;
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
