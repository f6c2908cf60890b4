//! Reaches the cluster's nodes over ssh: each node's runner, the `join
//! --dry-run` reports of every node at once, and the head's Ray node table
//! (what runs on each node is [`super::join`]; Ray's `up`, `status` and
//! `down` over every node are [`crate::fleet::ray_up`]).

use std::time::Duration;

use super::config::{ClusterConfig, NodeConfig};
use super::plan::{self, JoinReport, RayNodes};
use crate::proc::Finished;
use crate::remote::{self, Masters, RemoteError};

/// How long a read-only command on a node may take over ssh.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(60);

/// `node` as the remote runner reaches it.
pub fn remote_node(cfg: &ClusterConfig, node: &NodeConfig) -> remote::Node {
    remote::Node::new(
        &node.ssh,
        &cfg.ssh_options,
        format!("node {} ({})", node.label(), node.ssh),
        "install halobox (and Ray in the container), or set `halobox`/`ray` in cluster.toml to their paths".into(),
    )
}

/// One master connection to each node of `cfg` for the rest of a run
/// ([`Masters`]).
pub fn masters(cfg: &ClusterConfig) -> Masters {
    Masters::start(
        &cfg.nodes
            .iter()
            .map(|n| remote_node(cfg, n))
            .collect::<Vec<_>>(),
    )
}

/// The ssh argv that runs `argv` on `node` under the guard (as `--dry-run` prints it).
pub fn node_argv(cfg: &ClusterConfig, node: &NodeConfig, argv: &[String]) -> Vec<String> {
    remote_node(cfg, node).argv(argv)
}

/// Runs `argv` (on the node) over ssh under the guard, through the node's
/// master connection in `masters` when there is one; an error naming the
/// node unless it exits 0.
pub fn on_node(
    cfg: &ClusterConfig,
    masters: &Masters,
    node: &NodeConfig,
    what: &str,
    argv: &[String],
    timeout: Duration,
) -> Result<Finished, RemoteError> {
    remote_node(cfg, node)
        .through(masters)
        .run_ok(what, argv, timeout)
}

/// Runs `f` for every node at once; results in node order.
pub fn each_node<T: Send>(nodes: &[NodeConfig], f: impl Fn(&NodeConfig) -> T + Sync) -> Vec<T> {
    crate::fan_out::each(nodes, |_, n| f(n))
}

/// Every node's `join --dry-run --json`.
pub fn reports(cfg: &ClusterConfig, masters: &Masters) -> Vec<Result<JoinReport, String>> {
    reports_of(cfg, &cfg.nodes, masters)
}

/// The `join --dry-run --json` of each of `nodes`.
pub fn reports_of(
    cfg: &ClusterConfig,
    nodes: &[NodeConfig],
    masters: &Masters,
) -> Vec<Result<JoinReport, String>> {
    each_node(nodes, |node| {
        let done = on_node(
            cfg,
            masters,
            node,
            "`halobox cluster join --dry-run`",
            &plan::join_command(cfg, node, true),
            QUERY_TIMEOUT,
        )
        .map_err(|e| e.to_string())?;
        remote::last_json(
            &format!("node {}", node.label()),
            "`halobox cluster join --dry-run`",
            &done.stdout,
            &done.output,
        )
    })
}

/// Asks the head's Ray for its node table, waiting up to `timeout_s` for `want` alive nodes.
pub fn ray_nodes(cfg: &ClusterConfig, want: usize, timeout_s: u64) -> anyhow::Result<RayNodes> {
    let head = cfg.head();
    let done = on_node(
        cfg,
        &Masters::default(),
        head,
        "the Ray state query",
        &plan::nodes_query(cfg, want, timeout_s, false, None, None),
        Duration::from_secs(timeout_s.saturating_add(60)),
    )?;
    parse_nodes(head, &done.stdout, &done.output)
}

/// The head's Ray node table from the state query's output.
pub fn parse_nodes(head: &NodeConfig, stdout: &str, output: &str) -> anyhow::Result<RayNodes> {
    remote::last_json(
        &format!("node {}", head.label()),
        "the Ray state query",
        stdout,
        output,
    )
    .map_err(anyhow::Error::msg)
}
