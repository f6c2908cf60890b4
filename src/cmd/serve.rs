//! `halobox serve MODEL …`: `vllm serve` in the head's container with
//! `--distributed-executor-backend ray` and the head's node env. Runs on the
//! head (its env comes from its own facts). `HF_TOKEN` is taken from this
//! process's environment and handed over on stdin, never in an argument.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cli::ServeArgs;
use crate::cluster::config;
use crate::cluster::env::{self, EnvError, EnvRequest};
use crate::cluster::plan::{self, ServeRequest};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};

/// Runs `serve`.
pub fn run(a: &ServeArgs) -> anyhow::Result<ExitCode> {
    if a.source.sysroot.is_some() && !a.plan.dry_run {
        return Err(UsageError(
            "--sysroot reads a snapshot: vLLM cannot be started from it; add --dry-run".into(),
        )
        .into());
    }
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    let root = match &a.source.sysroot {
        Some(dir) => HostRoot::sysroot(dir)?,
        None => HostRoot::live(),
    };
    let facts = host::gather(root, GatherOptions::default());
    let head = cfg.head();
    let req = EnvRequest {
        ip: head.ip,
        head: head.ip,
        port: cfg.ray_port,
        transport: cfg.transport,
        cpus: head.cpus.unwrap_or(1),
        ray: cfg.ray.clone(),
        ray_args: vec![],
        ray_head_args: vec![],
    };
    let head_env = env::plan(&facts, &req).map_err(|e| match e {
        EnvError::IpNotFound { .. } => anyhow::anyhow!(
            "this machine does not hold the head's address {} ({}): `halobox serve` runs on the head, next to the Ray driver\n  hint: ssh {} halobox serve {} …",
            head.ip,
            head.label(),
            head.ssh,
            a.model
        ),
        other => anyhow::anyhow!("head {}: {other}", head.label()),
    })?;
    let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty());
    let sreq = ServeRequest {
        model: a.model.clone(),
        tp: a
            .tp
            .unwrap_or(u32::try_from(cfg.nodes.len()).unwrap_or(u32::MAX)),
        max_model_len: a.max_model_len,
        gpu_memory_utilization: a.gpu_memory_utilization,
        eager: !a.no_eager,
        port: a.port,
        nccl_debug: a.nccl_debug,
        extra: a.extra.clone(),
        hf_token: token.is_some(),
    };
    let p = plan::serve(&sreq, &head_env, cfg.nodes.len()).map_err(UsageError)?;
    let argv = plan::serve_argv(&cfg.halobox, head, &p);
    if a.plan.dry_run {
        print!("{}", plan::render_serve(&p, &argv));
        return Ok(ExitCode::SUCCESS);
    }
    for n in &p.notes {
        eprintln!("warning: {n}");
    }
    let (prog, args) = argv.split_first().expect("serve argv");
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .env_remove("HF_TOKEN")
        .stdin(if token.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    if a.nccl_debug {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {prog}: {e}"))?;
    if let (Some(t), Some(mut stdin)) = (&token, child.stdin.take()) {
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
    Ok(ExitCode::from(
        u8::try_from(status.code().unwrap_or(1).clamp(0, 255)).unwrap_or(1),
    ))
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
