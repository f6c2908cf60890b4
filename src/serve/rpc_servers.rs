//! The cluster with engine `llama.cpp`: llama.cpp's RPC server in every
//! node's container but the head's (the head runs `llama-server`, which
//! `serve` starts), each bound to its node's data-plane address only: its
//! start and stop commands, its environment, and `cluster status`'s view of
//! it over ssh. No Ray. Starting and stopping them on every node is
//! [`crate::fleet::rpc_up`].

use std::net::Ipv4Addr;
use std::time::Duration;

use serde::Serialize;

use super::{program, rpc};
use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::env::{EnvVar, NodeEnv};
use crate::cluster::plan::{in_container, with_env};
use crate::cluster::run::{each_node, remote_node};

/// How long starting (or stopping, or looking at) one RPC server may take over ssh.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(60);

/// The nodes that run an RPC server: every node but the head.
pub fn workers(cfg: &ClusterConfig) -> &[NodeConfig] {
    &cfg.nodes[1..]
}

/// The RPC address of `node`: its data-plane address and the cluster's RPC port.
pub fn endpoint(cfg: &ClusterConfig, node: &NodeConfig) -> String {
    format!("{}:{}", node.ip, cfg.rpc_port)
}

/// llama.cpp's RDMA transport for a node whose data plane is RoCE (or
/// InfiniBand): `GGML_RDMA_DEV` and `GGML_RDMA_GID` from its own facts;
/// nothing for TCP.
pub fn rdma_env(env: &NodeEnv) -> Vec<EnvVar> {
    let mut v = Vec::new();
    if env.transport.is_rdma()
        && let Some(dev) = &env.rdma_device
    {
        v.push(EnvVar {
            name: "GGML_RDMA_DEV".into(),
            value: dev.clone(),
        });
        if let Some(g) = env.gid_index {
            v.push(EnvVar {
                name: "GGML_RDMA_GID".into(),
                value: g.to_string(),
            });
        }
    }
    v
}

/// The preflight's word on a node whose RDMA port is iWARP: llama.cpp's
/// RDMA transport speaks RoCE only, so its RPC falls back to TCP there.
pub fn iwarp_warning(node: &NodeConfig, env: &NodeEnv) -> Option<String> {
    env.reason.contains("iWARP").then(|| {
        format!(
            "warning: node {} ({}): its RDMA port is iWARP, which llama.cpp's RDMA transport does not support: its RPC server runs over TCP (switch the NIC to RoCE v2: `halobox doctor` says how)",
            node.label(),
            node.ip
        )
    })
}

/// The RPC server's start program as run in `node`'s container (argv on the node).
pub fn start_command(cfg: &ClusterConfig, node: &NodeConfig, env: &[EnvVar]) -> Vec<String> {
    let args = [
        node.ip.to_string(),
        cfg.rpc_port.to_string(),
        cfg.rpc_server.clone().unwrap_or_default(),
        cfg.llama_server.clone(),
    ];
    in_container(
        &cfg.halobox,
        node.backend,
        &node.container,
        &with_env(env, &program::argv(rpc::start(), &args)),
    )
}

/// A program about the RPC server ([`rpc::state`], [`rpc::stop`]) as run in `node`'s container.
fn in_node(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    program: String,
    args: &[String],
) -> Vec<String> {
    in_container(
        &cfg.halobox,
        node.backend,
        &node.container,
        &program::argv(program, args),
    )
}

/// One node's RPC server, as `cluster status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RpcStatus {
    /// The node's name.
    pub name: String,
    /// Its data-plane address.
    pub ip: Ipv4Addr,
    /// `running`, `frozen`, `exited`, `none` or `unreachable`.
    pub state: String,
    /// Its pid in the container, or why it could not be asked.
    pub detail: String,
    /// Its `HELLO` from here (protocol version, or what happened), when asked.
    pub hello: Option<String>,
}

/// What the state program says on `node`: the word, its pid, the log lines it printed.
pub fn state_of(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    log_lines: usize,
) -> (String, String, String) {
    match remote_node(cfg, node).run_ok(
        "the RPC server's state",
        &in_node(cfg, node, rpc::state(), &[log_lines.to_string()]),
        NODE_TIMEOUT,
    ) {
        Ok(done) => {
            let mut lines = done.stdout.lines();
            let first = lines.next().unwrap_or("none").trim().to_string();
            let rest: Vec<&str> = lines.collect();
            let (word, pid) = first.split_once(' ').unwrap_or((first.as_str(), ""));
            (word.to_string(), pid.to_string(), rest.join("\n"))
        }
        Err(e) => ("unreachable".into(), e.to_string(), String::new()),
    }
}

/// `cluster status` with engine `llama.cpp`: every worker's RPC server, and
/// (when `hello`: from a machine on the data plane) its `HELLO`.
pub fn status(cfg: &ClusterConfig, hello: bool) -> Vec<RpcStatus> {
    each_node(workers(cfg), |node| {
        let (state, detail, _) = state_of(cfg, node, 0);
        let hello = (hello && state == "running").then(|| {
            let addr = std::net::SocketAddr::from((node.ip, cfg.rpc_port));
            match rpc::hello(addr, Duration::from_secs(3)) {
                rpc::Hello::Version(a, b, c) => format!("protocol {a}.{b}.{c}"),
                rpc::Hello::Silent => "busy (a llama-server holds it)".into(),
                other => format!("{other:?}"),
            }
        });
        RpcStatus {
            name: node.label().to_string(),
            ip: node.ip,
            state,
            detail,
            hello,
        }
    })
}

/// The status table.
pub fn render_status(rows: &[RpcStatus]) -> String {
    let mut out = format!("{:<16} {:<15} {:<11} {}\n", "NODE", "IP", "RPC", "DETAIL");
    for r in rows {
        out.push_str(&format!(
            "{:<16} {:<15} {:<11} {}{}\n",
            r.name,
            r.ip,
            r.state,
            if r.detail.is_empty() {
                "-".to_string()
            } else if r.state == "unreachable" {
                r.detail.clone()
            } else {
                format!("pid {}", r.detail)
            },
            r.hello
                .as_ref()
                .map(|h| format!(", {h}"))
                .unwrap_or_default()
        ));
    }
    out
}

/// The stop program as `cluster down` runs it on `node` (argv on the node).
pub fn stop_command(cfg: &ClusterConfig, node: &NodeConfig) -> Vec<String> {
    in_node(cfg, node, rpc::stop(), &[])
}
