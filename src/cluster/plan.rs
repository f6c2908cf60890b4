//! Pure plans for the cluster commands: the commands each node runs (and
//! where: host or container), the preflight verdict over every node's
//! report, and the `vllm serve` command with its environment.

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::config::{ClusterConfig, NodeBackend, NodeConfig};
use super::env::{EnvRequest, EnvVar, NodeEnv};
use super::view::RuntimeView;
use crate::host::HostFacts;

use crate::shell;

/// `cmd` as run in a node's container: directly for `host`, else through
/// `halobox enter NAME -- …` (toolbox run, distrobox enter or an API exec,
/// as `halobox enter` does for that container).
pub fn in_container(
    halobox: &str,
    backend: NodeBackend,
    container: &str,
    cmd: &[String],
) -> Vec<String> {
    if backend == NodeBackend::Host {
        return cmd.to_vec();
    }
    let mut a = vec![
        halobox.to_string(),
        "enter".into(),
        container.to_string(),
        "--".into(),
    ];
    a.extend(cmd.iter().cloned());
    a
}

/// `env NAME=value … cmd` (the variables are not secret); `cmd` alone
/// without variables.
pub fn with_env(vars: &[EnvVar], cmd: &[String]) -> Vec<String> {
    if vars.is_empty() {
        return cmd.to_vec();
    }
    let mut a = vec!["env".to_string()];
    a.extend(vars.iter().map(|v| format!("{}={}", v.name, v.value)));
    a.extend(cmd.iter().cloned());
    a
}

/// `halobox cluster join …` as `up` runs it on `node` (argv on that node).
pub fn join_command(cfg: &ClusterConfig, node: &NodeConfig, dry_run: bool) -> Vec<String> {
    let head = cfg.head();
    let mut a = vec![
        cfg.halobox.clone(),
        "cluster".into(),
        "join".into(),
        format!("--head={}", head.ip),
        format!("--ip={}", node.ip),
        format!("--port={}", cfg.ray_port),
        format!("--transport={}", cfg.transport),
        format!("--backend={}", node.backend),
        format!("--container={}", node.container),
        format!("--ray={}", cfg.ray),
    ];
    if let Some(n) = node.cpus {
        a.push(format!("--num-cpus={n}"));
    }
    a.extend(cfg.ray_args.iter().map(|r| format!("--ray-arg={r}")));
    if node.ip == head.ip {
        a.extend(
            cfg.ray_head_args
                .iter()
                .map(|r| format!("--ray-head-arg={r}")),
        );
    }
    a.extend(cfg.not_secret.iter().map(|k| format!("--not-secret={k}")));
    a.extend(cfg.env.iter().map(|(k, v)| format!("--env={k}={v}")));
    a.extend(node.env.iter().map(|(k, v)| format!("--node-env={k}={v}")));
    a.extend(
        cfg.node_env_names()
            .iter()
            .map(|k| format!("--per-node-name={k}")),
    );
    if dry_run {
        a.push("--dry-run".into());
        a.push("--json".into());
    }
    a
}

/// `cluster join` as the node's halobox runs it inside the container (at
/// `inside`, its path there): the same request with `--backend=host`, so
/// the env, the view and Ray's start all happen where Ray runs.
pub fn inside_join(inside: &str, req: &EnvRequest, dry_run: bool) -> Vec<String> {
    let mut a = vec![
        inside.to_string(),
        "cluster".into(),
        "join".into(),
        format!("--head={}", req.head),
        format!("--ip={}", req.ip),
        format!("--port={}", req.port),
        format!("--transport={}", req.transport),
        "--backend=host".into(),
        format!("--ray={}", req.ray),
        format!("--num-cpus={}", req.cpus),
    ];
    a.extend(req.ray_args.iter().map(|r| format!("--ray-arg={r}")));
    a.extend(
        req.ray_head_args
            .iter()
            .map(|r| format!("--ray-head-arg={r}")),
    );
    // The outer join accepted these names (cluster.toml's `not_secret`).
    let mut cleared: Vec<&str> = req
        .env
        .iter()
        .chain(&req.node_env)
        .map(|v| v.name.as_str())
        .filter(|n| super::vars::is_secret_like(n))
        .collect();
    cleared.sort_unstable();
    cleared.dedup();
    a.extend(cleared.iter().map(|k| format!("--not-secret={k}")));
    a.extend(
        req.env
            .iter()
            .map(|v| format!("--env={}={}", v.name, v.value)),
    );
    a.extend(
        req.node_env
            .iter()
            .map(|v| format!("--node-env={}={}", v.name, v.value)),
    );
    a.extend(
        req.cluster_node_env
            .iter()
            .map(|k| format!("--per-node-name={k}")),
    );
    if dry_run {
        a.push("--dry-run".into());
        a.push("--json".into());
    }
    a
}

/// `ray stop` on `node`, in its container.
pub fn stop_command(cfg: &ClusterConfig, node: &NodeConfig) -> Vec<String> {
    in_container(
        &cfg.halobox,
        node.backend,
        &node.container,
        &[cfg.ray.clone(), "stop".into()],
    )
}

/// The Python program that reads the node table from Ray's GCS and waits,
/// polling with a short back-off (Ray's modules loaded first, at a lower
/// CPU priority than the Ray processes starting beside it, so it can start
/// before the head does without slowing it), until `want` nodes are alive or the
/// deadline passes (`want` 0: one look). Arguments: `ADDRESS WANT TIMEOUT_S
/// [watch-stdin]` (the last: exit when stdin closes, i.e. when halobox
/// stops waiting). Prints one JSON
/// document: `{"nodes": [...], "error": null | "..."}`.
pub const NODES_PY: &str = r#"
import json, os, socket, sys, time
addr, want, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
if want > 0:
    os.nice(10)
if sys.argv[4:] == ["watch-stdin"]:
    import threading
    def orphaned():
        sys.stdin.read()
        os._exit(3)
    threading.Thread(target=orphaned, daemon=True).start()
deadline = time.monotonic() + timeout
try:
    from ray._raylet import GcsClient
    from ray.core.generated import gcs_pb2
except Exception:
    GcsClient = None
def table():
    host, port = addr.rsplit(":", 1)
    socket.create_connection((host, int(port)), timeout=2).close()
    if GcsClient is not None:
        infos = GcsClient(address=addr).get_all_node_info(timeout=10).values()
        alive = gcs_pb2.GcsNodeInfo.GcsNodeState.Value("ALIVE")
        return [dict(ip=n.node_manager_address, id=n.node_id.hex(), alive=n.state == alive,
                     head=n.is_head_node, resources=dict(n.resources_total)) for n in infos]
    else:
        import ray
        if not ray.is_initialized():
            ray.init(address=addr, logging_level="ERROR", log_to_driver=False)
        return [dict(ip=n["NodeManagerAddress"], id=n["NodeID"], alive=n["Alive"],
                     head="node:__internal_head__" in n["Resources"], resources=n["Resources"])
                for n in ray.nodes()]
nodes, error, pause = [], None, 0.05
while True:
    try:
        nodes, error = table(), None
    except Exception as e:
        error = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
    if want == 0 or (error is None and sum(n["alive"] for n in nodes) >= want):
        break
    if time.monotonic() + pause > deadline:
        break
    time.sleep(pause)
    pause = min(pause * 2, 0.25)
print(json.dumps({"nodes": nodes, "error": error}))
"#;

/// The Ray state query on the head (argv there): a Ray driver with the
/// node's token ([`super::auth::driver_argv`]; `mode`: how `up` starts the
/// cluster, `None` for one already up).
pub fn nodes_query(
    cfg: &ClusterConfig,
    want: usize,
    timeout_s: u64,
    watch_stdin: bool,
    mode: Option<super::auth::Mode>,
) -> Vec<String> {
    let head = cfg.head();
    let mut cmd = vec![
        cfg.python(),
        "-c".into(),
        NODES_PY.into(),
        format!("{}:{}", head.ip, cfg.ray_port),
        want.to_string(),
        timeout_s.to_string(),
    ];
    if watch_stdin {
        cmd.push("watch-stdin".into());
    }
    in_container(
        &cfg.halobox,
        head.backend,
        &head.container,
        &super::auth::driver_argv(&cmd, mode),
    )
}

/// One node in Ray's table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RayNode {
    /// The node's address as Ray knows it.
    pub ip: String,
    /// Ray's node id.
    pub id: String,
    /// Alive (not dead).
    pub alive: bool,
    /// The head.
    pub head: bool,
    /// Total resources (`CPU`, `GPU`, `memory`, …).
    pub resources: std::collections::BTreeMap<String, f64>,
}

/// What the Ray state query printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RayNodes {
    /// Every node Ray knows (alive and dead).
    pub nodes: Vec<RayNode>,
    /// The last error talking to the GCS, if the query ended on one.
    pub error: Option<String>,
}

impl RayNodes {
    /// Alive nodes.
    pub fn alive(&self) -> impl Iterator<Item = &RayNode> {
        self.nodes.iter().filter(|n| n.alive)
    }
}

/// The container (or host) a node's Ray runs in, as `join` sees it from
/// the node (the engine's record of the container).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerReport {
    /// Backend.
    pub backend: NodeBackend,
    /// Container name (`host` backend: none).
    pub name: Option<String>,
    /// The container exists (always true for `host`).
    pub found: bool,
    /// The engine's state of it (`running`, `exited`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The image digest label (`dev.halobox.image-digest`).
    pub image_digest: Option<String>,
    /// Memlock soft limit in the container (-1 unlimited), when known.
    pub memlock: Option<i64>,
    /// `/dev/kfd` reaches the container.
    pub kfd: bool,
    /// The node itself has `/dev/kfd`.
    #[serde(default)]
    pub node_kfd: bool,
    /// The node's `/dev/infiniband/*`.
    #[serde(default)]
    pub node_infiniband: Vec<String>,
    /// Where halobox is inside the container, when it was made with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halobox: Option<String>,
}

impl ContainerReport {
    /// Found, and running (always true for `host`).
    pub fn running(&self) -> bool {
        self.found && self.state.as_deref().is_none_or(|s| s == "running")
    }
}

impl ContainerReport {
    /// A container nothing is known about (it was not inspected).
    pub fn unknown(backend: NodeBackend, name: &str) -> ContainerReport {
        ContainerReport {
            backend,
            name: Some(name.into()),
            found: false,
            state: None,
            image_digest: None,
            memlock: None,
            kfd: false,
            node_kfd: false,
            node_infiniband: vec![],
            halobox: None,
        }
    }
}

/// Why a snapshot's container is not inspected.
pub fn snapshot_not_inspected(backend: NodeBackend, name: &str) -> String {
    format!(
        "a snapshot (--sysroot) has no container engine to ask, so the {backend} container {name} was not inspected (image, memlock, /dev/kfd unknown): run `halobox cluster join --dry-run --json` on the node itself to see them"
    )
}

/// The prefix length of `ip` on the interface that holds it (`None` when
/// only a RoCE GID names the address).
pub fn prefix_len(facts: &HostFacts, ip: Ipv4Addr) -> Option<u8> {
    facts
        .network
        .interface_with_ip(ip)?
        .ipv4
        .iter()
        .find(|a| a.address == ip)
        .map(|a| a.prefix_len)
}

/// What `cluster join --dry-run --json` prints: a node's view of itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JoinReport {
    /// halobox's version on the node.
    pub halobox_version: String,
    /// The node's environment.
    pub env: NodeEnv,
    /// Where Ray would run.
    pub container: ContainerReport,
    /// Why `container` was not inspected (a snapshot has no engine to ask);
    /// its facts are then unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_inspected: Option<String>,
    /// The prefix length of the data-plane address on its interface (`None`
    /// when only a RoCE GID names the address).
    #[serde(default)]
    pub prefix_len: Option<u8>,
    /// On the head: whether the Ray port is free on the data-plane address.
    pub port_free: Option<bool>,
    /// The exact command that starts Ray (argv on the node).
    pub command: Vec<String>,
    /// What RCCL will see where Ray runs (inside the container, as its user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<RuntimeView>,
    /// halobox's version inside the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside_version: Option<String>,
    /// Why halobox could not look from inside the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside_error: Option<String>,
    /// The vLLM file `join` writes where Ray runs ([`super::carry`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carry_over: Option<String>,
    /// The version of the Ray that `ray` runs there (token authentication
    /// needs 2.52 or later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_version: Option<String>,
    /// Why Ray's version could not be told there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_error: Option<String>,
}

/// A node's env as `join --dry-run` prints it: the transport and why, the
/// variables, the ones vLLM must not copy from the head, and `ray start`.
pub fn render_env(env: &NodeEnv) -> String {
    let mut s = format!(
        "# node {}{}: transport {}: {}\n",
        env.ip,
        if env.is_head { " (head)" } else { "" },
        env.transport,
        env.reason
    );
    for line in env.assignments() {
        s.push_str(&line);
        s.push('\n');
    }
    s.push_str(&format!(
        "# per node (vLLM must not copy the head's): {}\n",
        env.per_node.join(" ")
    ));
    s.push_str(&shell::line(&env.ray_start));
    s.push('\n');
    s
}

/// The text form of a node's report (`join --dry-run`).
pub fn render_join(r: &JoinReport) -> String {
    let mut s = render_env(&r.env);
    let c = &r.container;
    if let Some(name) = &c.name {
        s.push_str(&format!(
            "# container {name} ({}): {}\n",
            c.backend,
            if !c.found {
                "not found: `halobox refresh --name NAME` creates it".to_string()
            } else {
                format!(
                    "{}, halobox inside: {}",
                    c.state.as_deref().unwrap_or("?"),
                    c.halobox.as_deref().unwrap_or("none (made without it)")
                )
            }
        ));
    }
    if let Some(v) = &r.view {
        let place = c
            .name
            .as_deref()
            .map_or("here".to_string(), |n| format!("in {n}"));
        for line in v.lines() {
            s.push_str(&format!("# {place}: {line}\n"));
        }
    }
    if let Some(e) = &r.inside_error {
        s.push_str(&format!("# inside: {e}\n"));
    }
    if let Some(p) = &r.carry_over {
        s.push_str(&format!("# vLLM's list of per-node variables: {p}\n"));
    }
    if !r.command.is_empty() {
        s.push_str(&format!("# runs as: {}\n", shell::line(&r.command)));
    }
    s
}

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

    #[test]
    fn host_backend_runs_directly_others_through_enter() {
        let cmd = vec!["ray".to_string(), "stop".into()];
        assert_eq!(
            in_container("halobox", NodeBackend::Host, "vllm", &cmd),
            cmd
        );
        assert_eq!(
            in_container("/usr/bin/halobox", NodeBackend::Toolbox, "vllm", &cmd),
            ["/usr/bin/halobox", "enter", "vllm", "--", "ray", "stop"]
        );
    }
}
