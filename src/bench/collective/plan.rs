//! What `bench collective` runs (pure): one rank per node of cluster.toml,
//! in the node's halobox container, each with the variables its own
//! `cluster join --dry-run` computed (GLOO_/NCCL_ socket interface, RDMA
//! port, GID index), the rendezvous at the head's data-plane address, and
//! the backend: RCCL (`nccl`) where every container has a GPU, gloo where
//! one has none.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::cluster::config::{ClusterConfig, NodeBackend, Transport};
use crate::cluster::env::{EnvVar, Resolved};
use crate::cluster::plan::{self as cluster_plan, JoinReport};
use crate::serve::engine::Head;

/// Smallest message size (bytes).
pub const MIN_SIZE: u64 = 1 << 10;
/// Largest message size (bytes): the buffers live in every node's memory.
pub const MAX_SIZE: u64 = 256 << 20;
/// The sizes when none are given: a decode step's (KiB) to a prefill's (MiB).
pub const DEFAULT_SIZES: &str = "4K,16K,64K,1M,16M";

/// A collective operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Sum of every rank's buffer, on every rank.
    #[value(name = "all_reduce", alias = "all-reduce")]
    AllReduce,
    /// Every rank's buffer, on every rank.
    #[value(name = "all_gather", alias = "all-gather")]
    AllGather,
}

impl Op {
    /// Its name in the program and the report.
    pub fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all_reduce",
            Op::AllGather => "all_gather",
        }
    }

    /// nccl-tests' bus bandwidth factor for `n` ranks: all-reduce
    /// 2(n-1)/n, all-gather (n-1)/n.
    pub fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Op::AllReduce => 2.0 * (n - 1.0) / n,
            Op::AllGather => (n - 1.0) / n,
        }
    }
}

/// torch.distributed's backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// RCCL (NCCL's API on ROCm): GPU buffers, RDMA when the cluster has it.
    Nccl,
    /// Gloo: CPU buffers over TCP.
    Gloo,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Nccl => "nccl",
            Backend::Gloo => "gloo",
        })
    }
}

/// What was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Message sizes, bytes.
    pub sizes: Vec<u64>,
    /// Operations, in order.
    pub ops: Vec<Op>,
    /// Timed iterations per size.
    pub iters: u32,
    /// Warm-up iterations per size.
    pub warmup: u32,
    /// The rendezvous port on the head.
    pub port: u16,
    /// The backend asked for (`None`: by the GPUs).
    pub backend: Option<Backend>,
    /// The Python in the containers (`None`: the one next to `ray`).
    pub python: Option<String>,
    /// Seconds each rank may take.
    pub timeout_s: u64,
}

/// Parses `--sizes` (`4K,16K,1M`: bytes, or K/M/G, binary), each within
/// [`MIN_SIZE`]..=[`MAX_SIZE`].
pub fn parse_sizes(s: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for word in s.split(',').map(str::trim) {
        let bytes = match word.parse::<crate::container::memlock::MemlockRequest>() {
            Ok(crate::container::memlock::MemlockRequest(
                crate::host::limits::LimitValue::Finite(b),
            )) => b,
            _ => {
                return Err(format!(
                    "--sizes: {word:?} is not a size: use bytes or K, M, G (4K,64K,16M)"
                ));
            }
        };
        if !(MIN_SIZE..=MAX_SIZE).contains(&bytes) {
            return Err(format!(
                "--sizes: {word} is out of range: sizes go from {} to {}",
                crate::units::format_bytes(MIN_SIZE),
                crate::units::format_bytes(MAX_SIZE)
            ));
        }
        if !out.contains(&bytes) {
            out.push(bytes);
        }
    }
    Ok(out)
}

/// One rank: a node and the command it runs there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankPlan {
    /// Rank (the node's place in cluster.toml; the head is 0).
    pub rank: usize,
    /// The node's name.
    pub node: String,
    /// Its ssh target.
    pub ssh: String,
    /// Its data-plane address.
    pub ip: Ipv4Addr,
    /// Where it runs (container backend).
    pub backend: NodeBackend,
    /// The container (`None` on the host).
    pub container: Option<String>,
    /// The transport halobox resolved for the node.
    pub transport: Resolved,
    /// The variables it runs with (none is secret).
    pub env: Vec<EnvVar>,
    /// The command on the node (the program comes on its stdin).
    pub command: Vec<String>,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// What was asked.
    pub options: Options,
    /// The backend used.
    pub backend: Backend,
    /// Why that backend.
    pub backend_why: String,
    /// The transport cluster.toml asks for.
    pub cluster_transport: Transport,
    /// The rendezvous address (the head's data-plane address).
    pub master_addr: Ipv4Addr,
    /// Ranks, head first.
    pub ranks: Vec<RankPlan>,
}

/// Why the backend: nccl where every container sees a GPU (`/dev/kfd`).
fn choose_backend(
    asked: Option<Backend>,
    cfg: &ClusterConfig,
    reports: &[JoinReport],
) -> Result<(Backend, String), String> {
    let without: Vec<&str> = cfg
        .nodes
        .iter()
        .zip(reports)
        .filter(|(_, r)| !r.container.kfd)
        .map(|(n, _)| n.label())
        .collect();
    match (asked, without.is_empty()) {
        (Some(Backend::Nccl), false) => Err(format!(
            "--backend nccl, but the container of node(s) {} has no GPU (/dev/kfd)\n  hint: recreate it with the GPU (`halobox refresh`), or run `halobox bench collective --backend gloo`",
            without.join(", ")
        )),
        (Some(b), _) => Ok((b, format!("--backend {b}"))),
        (None, true) => Ok((
            Backend::Nccl,
            "every container has a GPU (/dev/kfd): RCCL".into(),
        )),
        (None, false) => Ok((
            Backend::Gloo,
            format!(
                "no GPU (/dev/kfd) in the container of node(s) {}: gloo over TCP (RCCL and its transport are not measured)",
                without.join(", ")
            ),
        )),
    }
}

/// The plan, from the config and every node's `cluster join --dry-run`
/// report (in node order); an error names a node whose container is not
/// there or not running.
pub fn build(cfg: &ClusterConfig, reports: &[JoinReport], opts: &Options) -> Result<Plan, String> {
    for (node, r) in cfg.nodes.iter().zip(reports) {
        if !r.container.running() {
            let name = r.container.name.as_deref().unwrap_or("?");
            return Err(format!(
                "node {}: its {} container {name} is {}\n  hint: `halobox cluster up` (or `halobox refresh --name {name}` on the node)",
                node.label(),
                node.backend,
                if r.container.found {
                    r.container.state.as_deref().unwrap_or("not running")
                } else {
                    "missing"
                }
            ));
        }
    }
    let (backend, backend_why) = choose_backend(opts.backend, cfg, reports)?;
    let head = cfg.head();
    let python = opts.python.clone().unwrap_or_else(|| cfg.python());
    let n = cfg.nodes.len();
    let ranks = cfg
        .nodes
        .iter()
        .zip(reports)
        .enumerate()
        .map(|(rank, (node, r))| {
            let mut env = r.env.vars.clone();
            for (k, v) in [
                ("MASTER_ADDR", head.ip.to_string()),
                ("MASTER_PORT", opts.port.to_string()),
                ("RANK", rank.to_string()),
                ("WORLD_SIZE", n.to_string()),
            ] {
                env.push(EnvVar {
                    name: k.into(),
                    value: v,
                });
            }
            if backend == Backend::Nccl {
                for (k, v) in [("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET")] {
                    env.retain(|e| e.name != k);
                    env.push(EnvVar {
                        name: k.into(),
                        value: v.into(),
                    });
                }
            }
            let program = program_argv(&python, backend, opts);
            let in_node = Head {
                halobox: cfg.halobox.clone(),
                backend: node.backend,
                container: node.container.clone(),
                label: node.label().to_string(),
                ip: node.ip,
            };
            RankPlan {
                rank,
                node: node.label().to_string(),
                ssh: node.ssh.clone(),
                ip: node.ip,
                backend: node.backend,
                container: node.backend.is_container().then(|| node.container.clone()),
                transport: r.env.transport,
                command: in_node.argv_with_stdin(&cluster_plan::with_env(&env, &program)),
                env,
            }
        })
        .collect();
    Ok(Plan {
        options: opts.clone(),
        backend,
        backend_why,
        cluster_transport: cfg.transport,
        master_addr: head.ip,
        ranks,
    })
}

/// `python - ARGS` (the program comes on stdin).
fn program_argv(python: &str, backend: Backend, opts: &Options) -> Vec<String> {
    let join = |v: Vec<String>| v.join(",");
    vec![
        python.to_string(),
        "-".into(),
        format!("--backend={backend}"),
        format!(
            "--sizes={}",
            join(opts.sizes.iter().map(u64::to_string).collect())
        ),
        format!(
            "--ops={}",
            join(opts.ops.iter().map(|o| o.name().to_string()).collect())
        ),
        format!("--iters={}", opts.iters),
        format!("--warmup={}", opts.warmup),
        format!("--timeout={}", opts.timeout_s),
    ]
}

/// The plan as `--dry-run` prints it.
pub fn render(plan: &Plan, ssh_argv: &[Vec<String>]) -> String {
    let o = &plan.options;
    let mut s = format!(
        "# bench collective: {} over {} node(s), backend {} ({})\n# sizes {}; {} timed iterations after {} warm-up; rendezvous {}:{}\n# cluster transport {}; the program (src/bench/collective/collective.py) goes on each command's stdin\n",
        o.ops.iter().map(|o| o.name()).collect::<Vec<_>>().join(", "),
        plan.ranks.len(),
        plan.backend,
        plan.backend_why,
        o.sizes
            .iter()
            .map(|b| crate::units::format_bytes(*b))
            .collect::<Vec<_>>()
            .join(", "),
        o.iters,
        o.warmup,
        plan.master_addr,
        o.port,
        plan.cluster_transport,
    );
    for (r, argv) in plan.ranks.iter().zip(ssh_argv) {
        s.push_str(&format!(
            "# rank {} on node {} ({}, transport {}{})\n{}\n",
            r.rank,
            r.node,
            r.ip,
            r.transport,
            r.container
                .as_ref()
                .map(|c| format!(", {} container {c}", r.backend))
                .unwrap_or_default(),
            crate::shell::line(argv)
        ));
    }
    s
}
