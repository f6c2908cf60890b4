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
    /// RCCL where every rank's torch sees a GPU, else gloo (decided by the ranks together).
    Auto,
    /// RCCL (NCCL's API on ROCm): GPU buffers, RDMA when the cluster has it.
    Nccl,
    /// Gloo: CPU buffers over TCP.
    Gloo,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Auto => "auto",
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

impl Options {
    /// `bench collective`'s defaults (what its flags default to).
    pub fn defaults() -> Options {
        Options {
            sizes: parse_sizes(DEFAULT_SIZES).expect("the default sizes parse"),
            ops: vec![Op::AllReduce, Op::AllGather],
            iters: 100,
            warmup: 10,
            port: DEFAULT_PORT,
            backend: None,
            python: None,
            timeout_s: 180,
        }
    }

    /// What `serve --preflight` runs: an all-reduce at a decode step's size
    /// and at a prefill's, enough to check the sums and the transport.
    pub fn preflight() -> Options {
        Options {
            sizes: parse_sizes(PREFLIGHT_SIZES).expect("the preflight sizes parse"),
            ops: vec![Op::AllReduce],
            iters: 20,
            warmup: 3,
            ..Options::defaults()
        }
    }
}

/// The sizes `serve --preflight` runs.
pub const PREFLIGHT_SIZES: &str = "64K,1M";

/// The default rendezvous port.
pub const DEFAULT_PORT: u16 = 29511;

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
    /// The backend asked of the ranks (`auto`: they decide together).
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
        (Some(b), _) if b != Backend::Auto => Ok((b, format!("--backend {b}"))),
        (_, true) => Ok((
            Backend::Auto,
            "every container has a GPU (/dev/kfd): RCCL if every rank's torch sees it, else gloo"
                .into(),
        )),
        (_, false) => Ok((
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
            if backend != Backend::Gloo {
                for (k, v) in [("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET")] {
                    env.retain(|e| e.name != k);
                    env.push(EnvVar {
                        name: k.into(),
                        value: v.into(),
                    });
                }
            }
            let program = program_argv(&python, backend, opts);
            RankPlan {
                rank,
                node: node.label().to_string(),
                ssh: node.ssh.clone(),
                ip: node.ip,
                backend: node.backend,
                container: node.backend.is_container().then(|| node.container.clone()),
                transport: r.env.transport,
                command: cluster_plan::in_container(
                    &cfg.halobox,
                    node.backend,
                    &node.container,
                    &cluster_plan::with_env(&env, &program),
                ),
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
        o.ops
            .iter()
            .map(|o| o.name())
            .collect::<Vec<_>>()
            .join(", "),
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

/// A node's `cluster join --dry-run` report as tests need it.
#[cfg(test)]
pub(crate) fn test_report(ip: Ipv4Addr, kfd: bool, transport: Resolved) -> JoinReport {
    use crate::cluster::env::NodeEnv;
    use crate::cluster::plan::ContainerReport;
    let var = |n: &str, v: &str| EnvVar {
        name: n.into(),
        value: v.into(),
    };
    let mut vars = vec![
        var("NCCL_SOCKET_IFNAME", "=dp0"),
        var("GLOO_SOCKET_IFNAME", "dp0"),
    ];
    if transport == Resolved::Roce {
        vars.push(var("NCCL_IB_HCA", "=rocep194s0:1"));
        vars.push(var("NCCL_IB_GID_INDEX", "1"));
    } else {
        vars.push(var("NCCL_IB_DISABLE", "1"));
    }
    let env = NodeEnv {
        ip,
        is_head: false,
        interface: "dp0".into(),
        mtu: Some(9000),
        transport,
        reason: "test".into(),
        rdma_device: (transport == Resolved::Roce).then(|| "rocep194s0".into()),
        rdma_port: (transport == Resolved::Roce).then_some(1),
        gid_index: (transport == Resolved::Roce).then_some(1),
        net_plugin: None,
        vars,
        per_node: vec![],
        ray_start: vec![],
    };
    let container = ContainerReport {
        kfd,
        found: true,
        state: Some("running".into()),
        ..ContainerReport::unknown(NodeBackend::Podman, "vllm")
    };
    JoinReport {
        halobox_version: "0".into(),
        ..JoinReport::new(env, container, Some(24))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::config::NodeConfig;

    pub(crate) fn cluster(n: usize) -> ClusterConfig {
        let mut cfg = ClusterConfig::new(
            (0..n)
                .map(|i| NodeConfig {
                    name: Some(((b'a' + i as u8) as char).to_string()),
                    ssh: format!("root@10.77.1.{}", i + 1),
                    ip: Ipv4Addr::new(10, 77, 1, i as u8 + 1),
                    container: "vllm".into(),
                    backend: NodeBackend::Podman,
                    cpus: Some(1),
                    env: Default::default(),
                    memory_bandwidth_gbs: None,
                })
                .collect(),
        );
        cfg.ray = "/opt/halobox-vllm/bin/ray".into();
        cfg
    }

    fn opts() -> Options {
        Options::defaults()
    }

    fn reports(cfg: &ClusterConfig, kfd: &[bool]) -> Vec<JoinReport> {
        cfg.nodes
            .iter()
            .zip(kfd)
            .map(|(n, k)| test_report(n.ip, *k, Resolved::Ethernet))
            .collect()
    }

    #[test]
    fn sizes_parse_and_out_of_range_is_refused() {
        assert_eq!(
            parse_sizes("4K,16K,64K,1M,16M").unwrap(),
            [4096, 16384, 65536, 1 << 20, 16 << 20]
        );
        assert_eq!(parse_sizes("1024, 1K").unwrap(), [1024]);
        let e = parse_sizes("4K,1G").unwrap_err();
        assert!(
            e.contains("1G is out of range") && e.contains("256 MiB"),
            "{e}"
        );
        assert!(parse_sizes("512").unwrap_err().contains("out of range"));
        assert!(parse_sizes("lots").unwrap_err().contains("not a size"));
        assert!(parse_sizes("").unwrap_err().contains("not a size"));
    }

    #[test]
    fn bus_factors_are_nccl_tests() {
        assert_eq!(Op::AllReduce.bus_factor(2), 1.0);
        assert_eq!(Op::AllGather.bus_factor(2), 0.5);
        assert_eq!(Op::AllReduce.bus_factor(4), 1.5);
        assert_eq!(Op::AllGather.bus_factor(4), 0.75);
    }

    /// No GPU in a container: gloo, said why; each rank runs in its own
    /// container with its own interface, the head's address for the
    /// rendezvous, the program on stdin (`halobox enter … python -`, over
    /// halobox's own engine connection).
    #[test]
    fn gloo_without_gpus_one_rank_per_node_in_its_container() {
        let cfg = cluster(2);
        let p = build(&cfg, &reports(&cfg, &[true, false]), &opts()).unwrap();
        assert_eq!(p.backend, Backend::Gloo);
        assert!(p.backend_why.contains("node(s) b"), "{}", p.backend_why);
        assert_eq!(p.master_addr, Ipv4Addr::new(10, 77, 1, 1));
        let r1 = &p.ranks[1];
        assert_eq!(&r1.command[..4], ["halobox", "enter", "vllm", "--"]);
        let line = r1.command.join(" ");
        for want in [
            "GLOO_SOCKET_IFNAME=dp0",
            "MASTER_ADDR=10.77.1.1",
            "MASTER_PORT=29511",
            "RANK=1",
            "WORLD_SIZE=2",
            "/opt/halobox-vllm/bin/python -",
            "--backend=gloo",
            "--sizes=4096,16384,65536,1048576,16777216",
            "--ops=all_reduce,all_gather",
        ] {
            assert!(line.contains(want), "{want}: {line}");
        }
        assert!(!line.contains("NCCL_DEBUG"), "{line}");
        let text = render(&p, &[vec!["ssh".into()], vec!["ssh".into()]]);
        assert!(text.contains("backend gloo"), "{text}");
        assert!(text.contains("rank 1 on node b"), "{text}");
    }

    #[test]
    fn nccl_with_gpus_everywhere_and_its_debug_log() {
        let cfg = cluster(3);
        let p = build(&cfg, &reports(&cfg, &[true, true, true]), &opts()).unwrap();
        assert_eq!(p.backend, Backend::Auto);
        let line = p.ranks[2].command.join(" ");
        assert!(
            line.contains("NCCL_DEBUG=INFO") && line.contains("RANK=2"),
            "{line}"
        );
    }

    #[test]
    fn nccl_asked_without_a_gpu_names_the_node() {
        let cfg = cluster(2);
        let o = Options {
            backend: Some(Backend::Nccl),
            ..opts()
        };
        let e = build(&cfg, &reports(&cfg, &[true, false]), &o).unwrap_err();
        assert!(
            e.contains("node(s) b") && e.contains("--backend gloo"),
            "{e}"
        );
    }

    #[test]
    fn a_container_not_running_is_named() {
        let cfg = cluster(2);
        let mut r = reports(&cfg, &[false, false]);
        r[1].container.state = Some("exited".into());
        let e = build(&cfg, &r, &opts()).unwrap_err();
        assert!(
            e.contains("node b") && e.contains("exited") && e.contains("hint:"),
            "{e}"
        );
    }
}
