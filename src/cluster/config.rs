//! `cluster.toml`: the nodes in order (the first is the Ray head), how to
//! reach each one and where its Ray runs, plus cluster-wide settings. Loaded
//! and validated here; nothing is guessed.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::error::UsageError;

/// Ray's default GCS port.
pub const DEFAULT_RAY_PORT: u16 = 6379;
/// Seconds `cluster up` waits for every node to register.
pub const DEFAULT_TIMEOUT_S: u64 = 120;

/// How NCCL/RCCL moves tensors between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// RoCE when an ACTIVE RoCE v2 port serves the node's address, else USB4 on a thunderbolt-net interface, else Ethernet.
    #[default]
    Auto,
    /// RoCE v2 (fails when a node has no ACTIVE RoCE v2 port for its address).
    Roce,
    /// Native InfiniBand (IPoIB address on the data plane).
    Ib,
    /// TCP sockets (`NCCL_IB_DISABLE=1`).
    Ethernet,
    /// TCP sockets over a USB4/Thunderbolt cable (a thunderbolt-net
    /// interface must hold the node's address).
    Usb4,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Auto => "auto",
            Transport::Roce => "roce",
            Transport::Ib => "ib",
            Transport::Ethernet => "ethernet",
            Transport::Usb4 => "usb4",
        })
    }
}

impl FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        <Transport as ValueEnum>::from_str(s, true)
            .map_err(|_| format!("unknown transport {s:?}: use auto, roce, ib, ethernet or usb4"))
    }
}

impl<'de> Deserialize<'de> for Transport {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The inference engine the cluster runs: `cluster up` starts what it
/// needs (Ray, or the llama.cpp rpc-servers) and `serve` runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize)]
pub enum Engine {
    /// vLLM, tensor-parallel over Ray.
    #[default]
    #[serde(rename = "vllm")]
    #[value(name = "vllm")]
    Vllm,
    /// llama.cpp: `llama-server` on the head, an RPC server on every other node.
    #[serde(rename = "llama.cpp")]
    #[value(name = "llama.cpp")]
    LlamaCpp,
}

impl Engine {
    /// Its name in messages (`vLLM`, `llama.cpp`).
    pub fn title(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::LlamaCpp => "llama.cpp",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Engine::Vllm => "vllm",
            Engine::LlamaCpp => "llama.cpp",
        })
    }
}

/// llama.cpp's RPC server port (its default).
pub const DEFAULT_RPC_PORT: u16 = 50052;

/// Where a node's Ray runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeBackend {
    /// Directly on the node (bare metal, or a venv): no container.
    Host,
    /// In a toolbx container (`toolbox run -c NAME`).
    #[default]
    Toolbox,
    /// In a distrobox container (`distrobox enter NAME --`).
    Distrobox,
    /// In a Podman container (API exec).
    Podman,
    /// In a Docker container (API exec).
    Docker,
}

impl NodeBackend {
    /// True for every backend that runs Ray in a container.
    pub fn is_container(self) -> bool {
        self != NodeBackend::Host
    }

    /// The refresh backend this means (`host`: none, no container).
    pub fn refresh_backend(self) -> Option<crate::backend::Backend> {
        use crate::backend::Backend;
        match self {
            NodeBackend::Host => None,
            NodeBackend::Toolbox => Some(Backend::Toolbox),
            NodeBackend::Distrobox => Some(Backend::Distrobox),
            NodeBackend::Podman => Some(Backend::Podman),
            NodeBackend::Docker => Some(Backend::Docker),
        }
    }
}

impl fmt::Display for NodeBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeBackend::Host => "host",
            NodeBackend::Toolbox => "toolbox",
            NodeBackend::Distrobox => "distrobox",
            NodeBackend::Podman => "podman",
            NodeBackend::Docker => "docker",
        })
    }
}

/// One node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Display name (default: the ssh target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// ssh destination (`host`, `user@host`, a Host of ~/.ssh/config); may differ from `ip`.
    pub ssh: String,
    /// The node's data-plane IPv4 address (NCCL, Ray and vLLM traffic): one
    /// per node (a list is refused: one data-plane NIC per node).
    #[serde(deserialize_with = "one_ip")]
    pub ip: Ipv4Addr,
    /// Container name (ignored by the `host` backend).
    #[serde(default = "default_container")]
    pub container: String,
    /// Where Ray runs on this node.
    #[serde(default)]
    pub backend: NodeBackend,
    /// CPUs Ray may schedule on this node (default: the node's CPU count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Variables for this node's Ray only (over `[env]`); vLLM does not copy
    /// the head's values of these to the workers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The node's memory bandwidth in GB/s for `plan`'s speed estimate
    /// (default: Strix Halo's, `crate::model::speed::STRIX_HALO_BANDWIDTH_GBS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth_gbs: Option<f64>,
}

impl NodeConfig {
    /// The name used in messages.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.ssh)
    }
}

/// One IPv4 address; a list says why a node has only one.
fn one_ip<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Ipv4Addr, D::Error> {
    struct One;
    impl<'de> serde::de::Visitor<'de> for One {
        type Value = Ipv4Addr;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("one IPv4 address")
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Ipv4Addr, E> {
            s.parse()
                .map_err(|_| E::custom(format!("{s:?} is not an IPv4 address")))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Ipv4Addr, A::Error> {
            let mut ips = Vec::new();
            while let Some(ip) = seq.next_element::<String>()? {
                ips.push(ip);
            }
            Err(serde::de::Error::custom(format!(
                "a node with the data-plane addresses [{}]: halobox supports one data-plane NIC per node, so `ip` is one address (two NICs: bond them, or use one and leave the other out)",
                ips.join(", ")
            )))
        }
    }
    d.deserialize_any(One)
}

/// The host part of an ssh target (`root@n1` -> `n1`), lowercased.
fn ssh_host(target: &str) -> String {
    target
        .rsplit_once('@')
        .map_or(target, |(_, h)| h)
        .to_ascii_lowercase()
}

fn default_container() -> String {
    crate::config::DEFAULT_NAME.to_string()
}
fn default_port() -> u16 {
    DEFAULT_RAY_PORT
}
fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_S
}
fn default_ray() -> String {
    "ray".into()
}
fn default_halobox() -> String {
    "halobox".into()
}

fn default_vllm() -> String {
    "vllm".into()
}

fn is_default_vllm(v: &str) -> bool {
    v == "vllm"
}

fn is_default_engine(e: &Engine) -> bool {
    *e == Engine::Vllm
}

fn default_llama_server() -> String {
    "llama-server".into()
}

fn is_default_llama_server(v: &str) -> bool {
    v == "llama-server"
}

fn default_rpc_port() -> u16 {
    DEFAULT_RPC_PORT
}

fn is_default_rpc_port(p: &u16) -> bool {
    *p == DEFAULT_RPC_PORT
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The engine: `vllm` (Ray on every node) or `llama.cpp` (an RPC
    /// server on every node but the head).
    #[serde(default, skip_serializing_if = "is_default_engine")]
    pub engine: Engine,
    /// NCCL transport.
    #[serde(default)]
    pub transport: Transport,
    /// The head's Ray (GCS) port.
    #[serde(default = "default_port")]
    pub ray_port: u16,
    /// Seconds `cluster up` waits for every node to register with Ray.
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
    /// The `ray` command on the nodes (in their containers); its directory's
    /// `python` queries Ray's state when it is a path.
    #[serde(default = "default_ray")]
    pub ray: String,
    /// The `halobox` command on the nodes (outside the containers).
    #[serde(default = "default_halobox")]
    pub halobox: String,
    /// The `vllm` command in the head's container (`serve` runs it).
    #[serde(default = "default_vllm", skip_serializing_if = "is_default_vllm")]
    pub vllm: String,
    /// The `llama-server` command in the head's container (engine `llama.cpp`).
    #[serde(
        default = "default_llama_server",
        skip_serializing_if = "is_default_llama_server"
    )]
    pub llama_server: String,
    /// The RPC server command in the other nodes' containers (default:
    /// `ggml-rpc-server`, else the older `rpc-server`, next to
    /// `llama_server` when that is a path, else on the PATH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_server: Option<String>,
    /// The port of every node's RPC server, on its data-plane address only.
    #[serde(
        default = "default_rpc_port",
        skip_serializing_if = "is_default_rpc_port"
    )]
    pub rpc_port: u16,
    /// Extra `ray start` arguments on every node (`--object-store-memory=…`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ray_args: Vec<String>,
    /// Extra `ray start` arguments on the head only (`--include-dashboard=false`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ray_head_args: Vec<String>,
    /// Extra `ssh -o` options (host key checking cannot be turned off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_options: Vec<String>,
    /// Variables for every node's Ray (`NCCL_IB_TC`, `NCCL_DEBUG`, Ray's
    /// memory monitor, …); never the per-node data-plane ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Names in `[env]` or a node's `env` that look like secrets
    /// ([`crate::cluster::vars::is_secret_like`]) but hold none
    /// (`TOKENIZERS_PARALLELISM`): listed here, they are accepted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_secret: Vec<String>,
    /// The nodes; the first is the head.
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeConfig>,
}

impl ClusterConfig {
    /// The nodes a refresh changes (those with a container) and the ones
    /// it skips, with why.
    pub fn container_nodes(&self) -> (Vec<NodeConfig>, Vec<String>) {
        let mut nodes = Vec::new();
        let mut skipped = Vec::new();
        for n in &self.nodes {
            match n.backend.is_container() {
                true => nodes.push(n.clone()),
                false => skipped.push(format!(
                    "node {}: its Ray runs on the host (backend host): no container to refresh",
                    n.label()
                )),
            }
        }
        (nodes, skipped)
    }

    /// A config with defaults and these nodes.
    pub fn new(nodes: Vec<NodeConfig>) -> ClusterConfig {
        ClusterConfig {
            engine: Engine::Vllm,
            transport: Transport::Auto,
            ray_port: DEFAULT_RAY_PORT,
            timeout_s: DEFAULT_TIMEOUT_S,
            ray: default_ray(),
            halobox: default_halobox(),
            vllm: default_vllm(),
            llama_server: default_llama_server(),
            rpc_server: None,
            rpc_port: DEFAULT_RPC_PORT,
            ray_args: vec![],
            ray_head_args: vec![],
            ssh_options: vec![],
            env: BTreeMap::new(),
            not_secret: vec![],
            nodes,
        }
    }

    /// The head (the first node); validated configs always have one.
    pub fn head(&self) -> &NodeConfig {
        &self.nodes[0]
    }

    /// The names any node sets for itself (every node's `env`), sorted and
    /// each once: they differ between nodes, so every node's vLLM list
    /// holds them (vLLM reads the head's).
    pub fn node_env_names(&self) -> Vec<String> {
        let names: std::collections::BTreeSet<&String> =
            self.nodes.iter().flat_map(|n| n.env.keys()).collect();
        names.into_iter().cloned().collect()
    }

    /// The Python next to `ray` when `ray` is a path, else `python3`.
    pub fn python(&self) -> String {
        match Path::new(&self.ray).parent() {
            Some(dir) if self.ray.contains('/') => dir.join("python").display().to_string(),
            _ => "python3".into(),
        }
    }

    /// Checks what the types cannot: a head, unique addresses and names,
    /// usable ports and ssh options.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err(
                "the head is missing: add at least one [[node]] (the first one is the Ray head)"
                    .into(),
            );
        }
        if self.ray_port == 0 {
            return Err("ray_port 0 is not a port: use 1..65535 (Ray's default is 6379)".into());
        }
        crate::units::check_timeout("timeout_s", self.timeout_s)?;
        if self.rpc_port == 0 {
            return Err(
                "rpc_port 0 is not a port: use 1..65535 (llama.cpp's default is 50052)".into(),
            );
        }
        if self.llama_server.trim().is_empty()
            || self
                .rpc_server
                .as_ref()
                .is_some_and(|r| r.trim().is_empty())
        {
            return Err(
                "llama_server and rpc_server must name commands (default: `llama-server`; `ggml-rpc-server` or `rpc-server`)".into(),
            );
        }
        if self.ray.trim().is_empty() || self.halobox.trim().is_empty() {
            return Err("ray and halobox must name commands (default: `ray`, `halobox`)".into());
        }
        crate::ssh::check_options(&self.ssh_options)?;
        super::vars::check_not_secret(&self.not_secret)?;
        for (k, v) in &self.env {
            super::vars::check_user_var(k, v, &self.not_secret)
                .map_err(|e| format!("[env]: {e}"))?;
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for (k, v) in &n.env {
                super::vars::check_user_var(k, v, &self.not_secret)
                    .map_err(|e| format!("node {}: env: {e}", n.label()))?;
            }
            crate::ssh::check_target(&n.ssh).map_err(|e| format!("node {}: {e}", i + 1))?;
            if n.ip.is_unspecified() || n.ip.is_loopback() || n.ip.is_broadcast() {
                return Err(format!(
                    "node {}: {} cannot be a data-plane address: use the address of its RDMA (or LAN) interface",
                    n.label(),
                    n.ip
                ));
            }
            if n.cpus == Some(0) {
                return Err(format!("node {}: cpus must be at least 1", n.label()));
            }
            if n.backend.is_container() && !valid_container_name(&n.container) {
                return Err(format!(
                    "node {}: {:?} is not a container name: use letters, digits, '_', '.' and '-'",
                    n.label(),
                    n.container
                ));
            }
            for m in &self.nodes[..i] {
                if m.ip == n.ip {
                    return Err(format!(
                        "nodes {} and {} have the same address {}: each node needs its own data-plane IPv4",
                        m.label(),
                        n.label(),
                        n.ip
                    ));
                }
                if m.label() == n.label() {
                    return Err(format!(
                        "two nodes are called {}: give them distinct `name`s",
                        n.label()
                    ));
                }
                if ssh_host(&m.ssh) == ssh_host(&n.ssh) {
                    return Err(format!(
                        "nodes {} and {} are the same machine ({}): halobox supports one data-plane NIC per node, so each machine is one [[node]] with one `ip` (two NICs: bond them, or use one)",
                        m.label(),
                        n.label(),
                        ssh_host(&n.ssh)
                    ));
                }
            }
        }
        Ok(())
    }

    /// The TOML text of this config.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("the config serialises")
    }
}

fn valid_container_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// A cluster file that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ClusterConfigError {
    /// The file.
    pub path: String,
    /// What is wrong, with the fix.
    pub message: String,
}

/// `--cluster FILE`, else `cluster.toml` next to halobox's config file.
pub fn path(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    crate::config::path().and_then(|p| p.parent().map(|d| d.join("cluster.toml")))
}

/// Parses and validates cluster TOML.
pub fn parse(text: &str) -> Result<ClusterConfig, String> {
    let cfg: ClusterConfig = toml::from_str(text).map_err(|e| e.message().trim().to_string())?;
    cfg.validate()?;
    Ok(cfg)
}

/// Loads and validates the cluster file.
pub fn load(path: &Path) -> Result<ClusterConfig, ClusterConfigError> {
    let err = |message: String| ClusterConfigError {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            err("no such file\n  hint: write it with `halobox cluster init --node SSH,IP …`, or pass --cluster FILE".into())
        } else {
            err(e.to_string())
        }
    })?;
    parse(&text).map_err(err)
}

/// The cluster file `--cluster FILE` names (else the default) and its
/// validated contents; what goes wrong is a usage error.
pub fn open(flag: Option<&Path>) -> Result<(PathBuf, ClusterConfig), UsageError> {
    let path = path(flag).ok_or_else(|| {
        UsageError("no config directory (HOME unset?): pass --cluster FILE".into())
    })?;
    let cfg = load(&path).map_err(|e| UsageError(e.to_string()))?;
    Ok((path, cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"
transport = "roce"
[[node]]
ssh = "root@n1"
ip = "192.168.100.1"
[[node]]
ssh = "n2"
ip = "192.168.100.2"
backend = "host"
cpus = 4
"#;

    #[test]
    fn parses_with_defaults() {
        let c = parse(TWO).unwrap();
        assert_eq!(c.transport, Transport::Roce);
        assert_eq!(c.ray_port, 6379);
        assert_eq!(c.head().ssh, "root@n1");
        assert_eq!(c.head().container, "vllm");
        assert_eq!(c.head().backend, NodeBackend::Toolbox);
        assert_eq!(c.nodes[1].backend, NodeBackend::Host);
        assert_eq!(c.nodes[1].cpus, Some(4));
        assert_eq!(c.python(), "python3");
        assert_eq!(parse(&c.to_toml()).unwrap(), c);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = parse("").unwrap_err();
        assert!(e.contains("head is missing"), "{e}");
        let e = parse(&TWO.replace("192.168.100.2", "192.168.100.1")).unwrap_err();
        assert!(
            e.contains("same address 192.168.100.1") && e.contains("root@n1"),
            "{e}"
        );
        let e = parse(&TWO.replace("\"roce\"", "\"rocev3\"")).unwrap_err();
        assert!(e.contains("unknown transport \"rocev3\""), "{e}");
        let e = parse(&TWO.replace("backend = \"host\"", "backend = \"vm\"")).unwrap_err();
        assert!(e.contains("vm"), "{e}");
        let e = parse(&format!(
            "ssh_options = [\"StrictHostKeyChecking=no\"]\n{TWO}"
        ))
        .unwrap_err();
        assert!(e.contains("host key"), "{e}");
        let e = parse(&TWO.replace("192.168.100.2", "127.0.0.1")).unwrap_err();
        assert!(e.contains("n2") && e.contains("127.0.0.1"), "{e}");
        let e = parse(&TWO.replace("\"n2\"", "\"root@n1\"")).unwrap_err();
        assert!(e.contains("two nodes are called root@n1"), "{e}");
        let e = parse(&TWO.replace("\"n2\"", "\"admin@N1\"")).unwrap_err();
        assert!(
            e.contains("nodes root@n1 and admin@N1 are the same machine (n1)")
                && e.contains("one data-plane NIC per node"),
            "{e}"
        );
        let e = parse(&TWO.replace(
            "ip = \"192.168.100.2\"",
            "ip = [\"192.168.100.2\", \"192.168.101.2\"]",
        ))
        .unwrap_err();
        assert!(
            e.contains("[192.168.100.2, 192.168.101.2]")
                && e.contains("one data-plane NIC per node"),
            "{e}"
        );
        let e = parse(&TWO.replace("192.168.100.2", "192.168.100.256")).unwrap_err();
        assert!(
            e.contains("\"192.168.100.256\" is not an IPv4 address"),
            "{e}"
        );
    }

    #[test]
    fn the_engine_and_its_keys() {
        let c = parse(TWO).unwrap();
        assert_eq!(c.engine, Engine::Vllm);
        assert!(!c.to_toml().contains("engine"));
        let l = parse(&format!(
            "engine = \"llama.cpp\"\nrpc_port = 50100\nllama_server = \"/opt/l/bin/llama-server\"\n{TWO}"
        ))
        .unwrap();
        assert_eq!(l.engine, Engine::LlamaCpp);
        assert_eq!(l.rpc_port, 50100);
        assert_eq!(parse(&l.to_toml()).unwrap(), l);
        let e = parse(&format!("engine = \"mpi\"\n{TWO}")).unwrap_err();
        assert!(e.contains("mpi"), "{e}");
        let e = parse(&format!("rpc_port = 0\n{TWO}")).unwrap_err();
        assert!(e.contains("rpc_port 0"), "{e}");
    }

    #[test]
    fn python_next_to_a_ray_path() {
        let mut c = parse(TWO).unwrap();
        c.ray = "/opt/halobox-ray/bin/ray".into();
        assert_eq!(c.python(), "/opt/halobox-ray/bin/python");
    }
}
