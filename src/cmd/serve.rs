//! `halobox serve MODEL …`: `vllm serve` in the head's container with
//! `--distributed-executor-backend ray` and the head's node env. Runs on the
//! head (its env comes from its own facts). `HF_TOKEN` is taken from this
//! process's environment and handed over on stdin, never in an argument.

use std::process::ExitCode;

use crate::cli::ServeArgs;
use crate::cluster::config;
use crate::cluster::plan::{self, ServeRequest};
use crate::cluster::serve;
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
    let token = serve::hf_token();
    let req = ServeRequest {
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
    let (p, argv) = serve::prepare(&cfg, &facts, &req)?;
    if a.plan.dry_run {
        print!("{}", plan::render_serve(&p, &argv));
        return Ok(ExitCode::SUCCESS);
    }
    for n in &p.notes {
        eprintln!("warning: {n}");
    }
    let code = serve::run(&argv, token.as_deref(), a.nccl_debug)?;
    Ok(ExitCode::from(code))
}
