//! `serve`'s plan (pure): the `vllm serve` command on the head with its
//! environment, tensor x pipeline parallel against the nodes, the secrets
//! it takes on stdin, and its `--dry-run` text.

use std::net::IpAddr;

use serde::Serialize;

use crate::cluster::env::{EnvVar, NodeEnv};
use crate::shell;

/// What `serve` was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeRequest {
    /// Model id or path.
    pub model: String,
    /// Tensor-parallel size (default: the nodes divided by the pipeline-parallel size).
    pub tp: Option<u32>,
    /// `--max-model-len`.
    pub max_model_len: Option<u32>,
    /// `--gpu-memory-utilization`.
    pub gpu_memory_utilization: f64,
    /// `--enforce-eager`.
    pub eager: bool,
    /// The API's bind address (default: vLLM's, every interface).
    pub host: Option<IpAddr>,
    /// API port.
    pub port: u16,
    /// `NCCL_DEBUG=INFO`.
    pub nccl_debug: bool,
    /// Remove vLLM's torch.compile cache in the head's container first.
    pub clear_cache: bool,
    /// Extra `vllm serve` arguments.
    pub extra: Vec<String>,
    /// Whether `HF_TOKEN` is set (its value never enters a plan).
    pub hf_token: bool,
    /// Whether `VLLM_API_KEY` is set (its value never enters a plan).
    pub api_key: bool,
}

/// The `vllm serve` command on the head and its environment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServePlan {
    /// `vllm serve …` (argv, no secrets).
    pub command: Vec<String>,
    /// Environment besides the secrets (the head's node env; empty when
    /// it is not known here: this machine is not the head).
    pub env: Vec<EnvVar>,
    /// Tensor-parallel size.
    pub tp: u32,
    /// Pipeline-parallel size (from the extra arguments; 1 without).
    pub pp: u32,
    /// The secrets handed over on stdin, in order (names only).
    pub secrets: Vec<String>,
    /// vLLM's compile cache is removed in the head's container first.
    pub clear_cache: bool,
    /// Notes (warnings) about the request.
    pub notes: Vec<String>,
}

/// The secrets vLLM may take from halobox's environment, in the order
/// they are read from stdin.
pub const SECRETS: [&str; 2] = ["HF_TOKEN", "VLLM_API_KEY"];

/// The greatest `--gpu-memory-utilization` that does not push unified-memory
/// hosts into swap (the field's experience).
pub const SAFE_GPU_MEMORY: f64 = 0.90;

/// vLLM's torch.compile cache as the shell in the head's container names it:
/// `VLLM_CACHE_ROOT` (default `${XDG_CACHE_HOME:-~/.cache}/vllm`, as
/// vllm/envs.py computes it) + `torch_compile_cache` (vllm/compilation).
/// A crash while compiling can leave it unusable: the guides' "erase vLLM
/// cache".
pub const COMPILE_CACHE: &str =
    "${VLLM_CACHE_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm}/torch_compile_cache";

/// The revision vLLM is told to load: `--revision R` among its extra
/// arguments (`None`: its default, `main`).
pub fn revision(extra: &[String]) -> Option<&str> {
    extra_value(extra, &["--revision"]).and_then(|(_, v)| v)
}

/// The value of `flag` (any of `names`, `--a_b` spelled `--a-b` too) in
/// `args`: `--flag V` or `--flag=V`.
pub fn extra_value<'a>(args: &'a [String], names: &[&str]) -> Option<(&'a str, Option<&'a str>)> {
    args.iter().enumerate().find_map(|(i, a)| {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (a.as_str(), None),
        };
        let flag_norm = if flag.starts_with("--") {
            flag.replace('_', "-")
        } else {
            flag.to_string()
        };
        names
            .contains(&flag_norm.as_str())
            .then(|| (flag, inline.or_else(|| args.get(i + 1).map(String::as_str))))
    })
}

/// Tensor x pipeline parallel against `nodes` GPUs (one per node): the
/// sizes, or why they cannot run.
fn parallel(req: &ServeRequest, nodes: usize) -> Result<(u32, u32, Option<String>), String> {
    let n = u32::try_from(nodes).unwrap_or(u32::MAX);
    if let Some((flag, _)) = extra_value(&req.extra, &["--tensor-parallel-size", "-tp"]) {
        return Err(format!(
            "{flag} after `--`: give the tensor-parallel size as `halobox serve … --tp N` (checked against the cluster)"
        ));
    }
    let pp = match extra_value(&req.extra, &["--pipeline-parallel-size", "-pp"]) {
        None => 1,
        Some((flag, v)) => match v.and_then(|v| v.parse::<u32>().ok()) {
            Some(p) if p >= 1 => p,
            _ => {
                return Err(format!(
                    "{flag} {}: not a pipeline-parallel size (a whole number from 1)",
                    v.unwrap_or("(missing)")
                ));
            }
        },
    };
    let tp = match req.tp {
        Some(t) => t,
        None if n % pp != 0 => {
            return Err(format!(
                "--pipeline-parallel-size {pp} does not divide the {n} node(s): tp × pp GPUs run on one GPU per node, so pp must divide {n} (or give --tp N with N × {pp} ≤ {n})"
            ));
        }
        None => n / pp,
    };
    if tp == 0 || u64::from(tp) * u64::from(pp) > u64::from(n) {
        return Err(if pp == 1 {
            format!(
                "--tp {tp} needs {tp} GPU(s), the cluster has {n} node(s) with one GPU each: use --tp 1..{n}"
            )
        } else {
            format!(
                "--tp {tp} × --pipeline-parallel-size {pp} = {} GPU(s), the cluster has {n} node(s) with one GPU each: use tp × pp ≤ {n} (e.g. --tp {})",
                u64::from(tp) * u64::from(pp),
                (n / pp).max(1)
            )
        });
    }
    let idle = (tp * pp < n).then(|| {
        format!(
            "tp {tp} × pp {pp} uses {} of the {n} node(s): {} stay idle",
            tp * pp,
            n - tp * pp
        )
    });
    Ok((tp, pp, idle))
}

/// Builds the serve plan; `head` is the head's env (`None`: not known on
/// this machine), `nodes` the cluster's size.
pub fn serve(
    req: &ServeRequest,
    head: Option<&NodeEnv>,
    nodes: usize,
) -> Result<ServePlan, String> {
    serve_with(req, head, nodes, "vllm")
}

/// [`serve`] with the `vllm` command of the head's container (cluster.toml's `vllm`).
pub fn serve_with(
    req: &ServeRequest,
    head: Option<&NodeEnv>,
    nodes: usize,
    vllm: &str,
) -> Result<ServePlan, String> {
    let (tp, pp, idle) = parallel(req, nodes)?;
    let u = req.gpu_memory_utilization;
    if !(u > 0.0 && u <= 1.0) {
        return Err(format!(
            "--gpu-memory-utilization {u} is not a fraction in (0, 1]: the default {SAFE_GPU_MEMORY} is safe on unified memory"
        ));
    }
    if let Some((flag, _)) = extra_value(&req.extra, &["--distributed-executor-backend"]) {
        return Err(format!(
            "halobox serve always uses --distributed-executor-backend ray: drop {flag} from the extra arguments"
        ));
    }
    if let Some((flag, _)) = extra_value(&req.extra, &["--api-key"]) {
        return Err(format!(
            "{flag} after `--` would put the key in the process arguments: export VLLM_API_KEY instead (halobox hands it to vLLM on stdin)"
        ));
    }
    if let Some((flag, _)) = extra_value(&req.extra, &["--host"]) {
        return Err(format!(
            "{flag} after `--`: give the bind address as `halobox serve … --host ADDR`"
        ));
    }
    let mut notes: Vec<String> = idle.into_iter().collect();
    if u > SAFE_GPU_MEMORY {
        notes.push(format!(
            "--gpu-memory-utilization {u} is above {SAFE_GPU_MEMORY}: on unified memory the host may swap"
        ));
    }
    if !req.eager {
        notes.push(
            "CUDA-graph capture (--no-eager) can deadlock on distributed Strix Halo APUs".into(),
        );
    }
    if req.clear_cache && nodes > 1 {
        notes.push(format!(
            "--clear-cache clears the head's compile cache only: after a crash on a worker, run `rm -rf -- \"{COMPILE_CACHE}\"` in its container too"
        ));
    }
    // vLLM's flags as vllm/engine/arg_utils.py (EngineArgs) and
    // vllm/entrypoints/launchers/cli_args.py define them at v0.32.0, the
    // version of images/vllm-therock-gfx1151.toml.
    let mut c: Vec<String> = vec![
        vllm.into(),
        "serve".into(),
        req.model.clone(),
        "--tensor-parallel-size".into(),
        tp.to_string(),
        "--distributed-executor-backend".into(),
        "ray".into(),
        "--gpu-memory-utilization".into(),
        format!("{u}"),
    ];
    if let Some(h) = req.host {
        c.push("--host".into());
        c.push(h.to_string());
    }
    c.push("--port".into());
    c.push(req.port.to_string());
    if let Some(l) = req.max_model_len {
        c.push("--max-model-len".into());
        c.push(l.to_string());
    }
    if req.eager {
        c.push("--enforce-eager".into());
    }
    if req.api_key {
        // vLLM's --api-key guards /v1, /v2, /inference and /cohere only:
        // halobox's middleware asks for the key on every other route too.
        c.push("--middleware".into());
        c.push(super::api_key::VLLM_MIDDLEWARE.into());
    }
    c.extend(req.extra.iter().cloned());
    let mut env = head.map(|h| h.vars.clone()).unwrap_or_default();
    if req.nccl_debug && head.is_some_and(|h| h.per_node.iter().any(|n| n == "NCCL_DEBUG")) {
        notes.push(
            "a node sets NCCL_DEBUG in its `env` (cluster.toml), so vLLM keeps each worker's own: --nccl-debug sets INFO on the head only".into(),
        );
    }
    if req.nccl_debug {
        env.push(EnvVar {
            name: "NCCL_DEBUG".into(),
            value: "INFO".into(),
        });
    }
    let secrets = SECRETS
        .into_iter()
        .zip([req.hf_token, req.api_key])
        .filter(|(_, set)| *set)
        .map(|(name, _)| name.to_string())
        .collect();
    Ok(ServePlan {
        command: c,
        env,
        tp,
        pp,
        secrets,
        clear_cache: req.clear_cache,
        notes,
    })
}

/// The `--dry-run` text of a serve plan (secrets masked).
pub fn render_serve(plan: &ServePlan, argv: &[String]) -> String {
    let mut s = String::new();
    for v in &plan.env {
        s.push_str(&format!("{}={}\n", v.name, v.value));
    }
    for name in &plan.secrets {
        s.push_str(&format!("{name}=******** (passed on stdin)\n"));
    }
    if plan.clear_cache {
        s.push_str(&format!(
            "# first, in the head's container: rm -rf -- \"{COMPILE_CACHE}\" (vLLM's compile cache, --clear-cache)\n"
        ));
    }
    s.push_str(&shell::line(&plan.command));
    s.push('\n');
    s.push_str(&format!("# runs as: {}\n", shell::line(argv)));
    for n in &plan.notes {
        s.push_str(&format!("# note: {n}\n"));
    }
    s
}

/// What NCCL says it uses, from one `NCCL_DEBUG=INFO` line.
pub fn nccl_transport(line: &str) -> Option<String> {
    let i = line
        .find("NET/IB : Using")
        .or_else(|| line.find("NET/Socket : Using"))?;
    let rest = line[i..].trim();
    Some(if rest.starts_with("NET/IB") {
        if rest.contains("RoCE") {
            format!("RoCE ({rest})")
        } else {
            format!("InfiniBand ({rest})")
        }
    } else {
        format!("TCP sockets ({rest})")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_lines() {
        assert_eq!(
            nccl_transport("n1:1:1 [0] NCCL INFO NET/IB : Using [0]rocep194s0:1/RoCE [RO]; OOB enp194s0np0:192.168.100.1<0>").unwrap(),
            "RoCE (NET/IB : Using [0]rocep194s0:1/RoCE [RO]; OOB enp194s0np0:192.168.100.1<0>)"
        );
        assert!(
            nccl_transport("NCCL INFO NET/Socket : Using [0]enp1s0:10.0.0.1<0>")
                .unwrap()
                .starts_with("TCP")
        );
        assert_eq!(nccl_transport("INFO Bootstrap : Using enp1s0"), None);
    }
}
