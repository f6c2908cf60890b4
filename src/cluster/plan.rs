//! Pure plans for the cluster commands: the commands each node runs (and
//! where: host or container) and the preflight verdict over every node's
//! report (`vllm serve`'s plan is [`crate::serve::plan`]).

use std::net::Ipv4Addr;

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

/// The first words of the state query's error when it sent nothing
/// because it could not prove that the head's port is this cluster's Ray.
pub const NOT_SENT: &str = "Ray's token was not sent";

/// The Python program that reads the node table from Ray's GCS and waits,
/// polling with a short back-off (Ray's modules loaded first, at a lower
/// CPU priority than the Ray processes starting beside it, so it can start
/// before the head does without slowing it), until `want` nodes are alive or the
/// deadline passes (`want` 0: one look). A node the GCS lists alive whose
/// raylet refuses the head's connection is gone and listed dead
/// (`unreachable`): the GCS marks it dead only after its health checks,
/// some 15–30 s later (a connection that does not answer within 2 s, a
/// packet lost or a machine gone, is left to those). While `want` is not 0
/// it also waits (to the deadline) until the GCS has marked every such
/// node dead: a vLLM started before that reads "the node … has been marked
/// dead" for a raylet that is already back, and fails its start.
///
/// Before a driver in token mode sends Ray's token (in its first RPC's
/// metadata), it proves the port is this cluster's Ray: every socket that
/// listens on the port where a connection to the head's address lands
/// (`/proc/net/tcp{,6}`) must belong to a `gcs_server` run by this user,
/// and, with `session=NAME`, started for that Ray session (its
/// `--session-name`). Otherwise it sends nothing and its error starts with
/// [`NOT_SENT`], naming the holder. Arguments: `ADDRESS WANT TIMEOUT_S
/// [watch-stdin] [session=NAME]` (`watch-stdin`: exit when stdin closes,
/// i.e. when halobox stops waiting). Prints one JSON document:
/// `{"nodes": [...], "error": null | "...", "gcs": null | {"pid", "uid", "session"}}`.
pub const NODES_PY: &str = r#"
import json, os, socket, struct, sys, time
addr, want, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
flags = sys.argv[4:]
expect = next((f[8:] for f in flags if f.startswith("session=")), None)
if want > 0:
    os.nice(10)
if "watch-stdin" in flags:
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
class NotProven(Exception):
    pass
def shown(text):
    return "".join(c if c.isprintable() else "?" for c in text)[:64]
def listening(ip, port):
    found = []
    for path, fam, words in (("/proc/net/tcp", socket.AF_INET, 1), ("/proc/net/tcp6", socket.AF_INET6, 4)):
        try:
            rows = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) < 10 or f[3] != "0A":
                continue
            host, p = f[1].split(":")
            if int(p, 16) != port:
                continue
            a = socket.inet_ntop(fam, struct.pack("<%dI" % words, *[int(host[i:i + 8], 16) for i in range(0, 8 * words, 8)]))
            if a in ("0.0.0.0", "::", "::ffff:0.0.0.0", ip, "::ffff:" + ip):
                found.append(f[9])
    return found
def owners(inodes):
    want_links = {"socket:[%s]" % i: i for i in inodes}
    got = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink("/proc/%s/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link in want_links:
                got[want_links[link]] = int(pid)
    return got
def gcs_of(pid, ip, port, me):
    try:
        comm = open("/proc/%d/comm" % pid).read().strip()
        uid = int(next(l.split()[1] for l in open("/proc/%d/status" % pid) if l.startswith("Uid:")))
        args = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")
    except (OSError, StopIteration, ValueError):
        raise NotProven("port %d on %s is held by pid %d, which could not be read" % (port, ip, pid))
    if comm != "gcs_server" or uid != me:
        raise NotProven("port %d on %s is held by pid %d (%s, uid %d), not by a gcs_server of this user (uid %d)" % (port, ip, pid, shown(comm), uid, me))
    session = next((a.split(b"=", 1)[1].decode(errors="replace") for a in args if a.startswith((b"--session-name=", b"--session_name="))), None)
    return dict(pid=pid, uid=uid, session=session)
def proven(ip, port):
    if os.environ.get("RAY_AUTH_MODE") != "token":
        return None
    me = os.geteuid()
    inodes = listening(ip, port)
    if not inodes:
        raise NotProven("nothing that this user can see listens on port %d on %s" % (port, ip))
    got = owners(inodes)
    gcs = None
    for i in inodes:
        if i not in got:
            raise NotProven("port %d on %s is held by a process that this user (uid %d) cannot see" % (port, ip, me))
        gcs = gcs_of(got[i], ip, port, me)
    if expect is not None and gcs["session"] != expect:
        raise NotProven("the gcs_server on port %d on %s (pid %d) runs Ray session %s, not %s that `cluster up` recorded" % (port, ip, gcs["pid"], shown(str(gcs["session"])), shown(expect)))
    return gcs
def refused(ip, port):
    try:
        socket.create_connection((ip, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        pass
    return False
def checked(nodes):
    for n in nodes:
        port = n.get("raylet_port") or 0
        if n["alive"] and port and refused(n["ip"], port):
            n["alive"], n["unreachable"] = False, True
    return nodes
gcs = None
def table():
    global gcs
    host, port = addr.rsplit(":", 1)
    socket.create_connection((host, int(port)), timeout=2).close()
    gcs = proven(host, int(port))
    if GcsClient is not None:
        infos = GcsClient(address=addr).get_all_node_info(timeout=10).values()
        alive = gcs_pb2.GcsNodeInfo.GcsNodeState.Value("ALIVE")
        return checked([dict(ip=n.node_manager_address, id=n.node_id.hex(), alive=n.state == alive,
                             head=n.is_head_node, resources=dict(n.resources_total),
                             raylet_port=n.node_manager_port) for n in infos])
    else:
        import ray
        if not ray.is_initialized():
            ray.init(address=addr, logging_level="ERROR", log_to_driver=False)
        return checked([dict(ip=n["NodeManagerAddress"], id=n["NodeID"], alive=n["Alive"],
                             head="node:__internal_head__" in n["Resources"], resources=n["Resources"],
                             raylet_port=n.get("NodeManagerPort", 0))
                        for n in ray.nodes()])
nodes, error, pause = [], None, 0.05
while True:
    try:
        nodes, error = table(), None
    except NotProven as e:
        nodes, error, gcs = [], "Ray's token was not sent: %s" % e, None
    except Exception as e:
        error = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
    stale = any(n.get("unreachable") for n in nodes)
    if want == 0 or (error is None and sum(n["alive"] for n in nodes) >= want and not stale):
        break
    if time.monotonic() + pause > deadline:
        break
    time.sleep(pause)
    pause = min(pause * 2, 0.25)
print(json.dumps({"nodes": nodes, "error": error, "gcs": gcs}))
"#;

/// The Ray state query on the head (argv there): a Ray driver with the
/// node's token ([`super::auth::driver_argv`]; `mode`: how `up` starts the
/// cluster, `None` for one already up), which sends the token only to the
/// gcs_server of Ray `session` when one is given ([`NODES_PY`]).
pub fn nodes_query(
    cfg: &ClusterConfig,
    want: usize,
    timeout_s: u64,
    watch_stdin: bool,
    mode: Option<super::auth::Mode>,
    session: Option<&str>,
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
    if let Some(s) = session {
        cmd.push(format!("session={s}"));
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
    /// Alive: the GCS lists it alive and its raylet takes a connection
    /// from the head.
    pub alive: bool,
    /// The GCS still lists it alive, but its raylet refused the head's
    /// connection: it is gone (the GCS has not seen it yet).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unreachable: bool,
    /// The port its raylet (Ray's node manager) listens on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raylet_port: Option<u16>,
    /// The head.
    pub head: bool,
    /// Total resources (`CPU`, `GPU`, `memory`, …).
    pub resources: std::collections::BTreeMap<String, f64>,
}

/// What the Ray state query printed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RayNodes {
    /// Every node Ray knows (alive and dead).
    pub nodes: Vec<RayNode>,
    /// The last error talking to the GCS, if the query ended on one.
    pub error: Option<String>,
    /// The GCS the token went to, proven this cluster's user's (absent
    /// when no token was sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs: Option<GcsProof>,
}

/// The process a driver proved holds the head's Ray port before it sent
/// Ray's token ([`NODES_PY`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcsProof {
    /// Its pid (where the query ran).
    pub pid: u32,
    /// Its user (the driver's own).
    pub uid: u32,
    /// The Ray session it was started for (`--session-name`).
    pub session: Option<String>,
}

impl RayNodes {
    /// Why the query sent nothing, when it could not prove the head's port
    /// is this cluster's Ray.
    pub fn not_sent(&self) -> Option<&str> {
        self.error.as_deref().filter(|e| e.starts_with(NOT_SENT))
    }

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

impl JoinReport {
    /// A report of this halobox on a node: `env` and `container`, no
    /// command yet, nothing looked at inside or on the host.
    pub fn new(env: NodeEnv, container: ContainerReport, prefix_len: Option<u8>) -> Self {
        JoinReport {
            halobox_version: env!("CARGO_PKG_VERSION").into(),
            env,
            container,
            not_inspected: None,
            prefix_len,
            port_free: None,
            command: vec![],
            view: None,
            inside_version: None,
            inside_error: None,
            carry_over: None,
            ray_version: None,
            ray_error: None,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
