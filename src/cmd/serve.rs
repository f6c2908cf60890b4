//! `halobox serve MODEL …`: `vllm serve` in the head's container with
//! `--distributed-executor-backend ray` and the head's node env. Runs on the
//! head (its env comes from its own facts; `--dry-run` prints the plan from
//! anywhere). `HF_TOKEN` and `VLLM_API_KEY` are taken from this process's
//! environment and handed over on stdin, never in an argument.

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
    let secrets: Vec<Option<String>> = plan::SECRETS.iter().map(|n| serve::secret(n)).collect();
    if let Some(name) = plan::SECRETS.iter().zip(&secrets).find_map(|(n, v)| {
        v.as_ref()
            .is_some_and(|v| v.contains(['\n', '\r']))
            .then_some(n)
    }) {
        return Err(UsageError(format!(
            "{name} holds a line break: it goes to vLLM as one line on stdin\n  hint: export it again without the newline"
        ))
        .into());
    }
    if a.api_key && secrets[1].is_none() {
        return Err(UsageError(
            "--api-key: VLLM_API_KEY is not set in this environment\n  hint: `read -rs VLLM_API_KEY; export VLLM_API_KEY` (halobox hands it to vLLM on stdin, never in an argument)".into(),
        )
        .into());
    }
    let req = ServeRequest {
        model: a.model.clone(),
        tp: a.tp,
        max_model_len: a.max_model_len,
        gpu_memory_utilization: a.gpu_memory_utilization,
        eager: !a.no_eager,
        host: a.host,
        port: a.port,
        nccl_debug: a.nccl_debug,
        clear_cache: a.clear_cache,
        extra: a.extra.clone(),
        hf_token: secrets[0].is_some(),
        api_key: secrets[1].is_some(),
    };
    let (p, argv) = serve::prepare(&cfg, &facts, &req, a.plan.dry_run)?;
    if a.plan.dry_run {
        print!("{}", plan::render_serve(&p, &argv));
        return Ok(ExitCode::SUCCESS);
    }
    for n in &p.notes {
        eprintln!("warning: {n}");
    }
    let values: Vec<String> = secrets.into_iter().flatten().collect();
    let code = serve::run(&argv, &values, a.nccl_debug)?;
    Ok(ExitCode::from(code))
}
