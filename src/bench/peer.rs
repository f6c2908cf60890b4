//! The peer from the cluster config: the node asked for (a name, ssh
//! target, address or 1-based index), else the first node that is not this
//! machine. This machine is the node whose data-plane address a local
//! interface holds exactly. Pure: the config and the local interfaces in, a
//! choice (with the reason, for `--dry-run`) out.

use std::net::Ipv4Addr;
use std::path::Path;

use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::host::net::NetworkFacts;

/// This machine as a node of the config.
#[derive(Debug, Clone, PartialEq)]
pub struct ThisNode {
    /// Its label in the config.
    pub label: String,
    /// Its data-plane address.
    pub ip: Ipv4Addr,
    /// The local interface that holds it.
    pub interface: String,
}

/// The chosen peer.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerChoice {
    /// The peer's node.
    pub node: NodeConfig,
    /// This machine, when it is in the config.
    pub this: Option<ThisNode>,
    /// Why this node, in one line.
    pub why: String,
}

/// The node of `cfg` this machine is: the first whose address a local
/// interface holds.
pub fn this_node(cfg: &ClusterConfig, net: &NetworkFacts) -> Option<ThisNode> {
    cfg.nodes.iter().find_map(|n| {
        net.interface_with_ip(n.ip).map(|i| ThisNode {
            label: n.label().to_string(),
            ip: n.ip,
            interface: i.name.clone(),
        })
    })
}

/// The node `wanted` names: its `name`, ssh target or address, else its
/// 1-based position.
pub fn find<'a>(cfg: &'a ClusterConfig, wanted: &str) -> Option<&'a NodeConfig> {
    cfg.nodes
        .iter()
        .find(|n| {
            n.name.as_deref() == Some(wanted) || n.ssh == wanted || n.ip.to_string() == wanted
        })
        .or_else(|| {
            let i: usize = wanted.parse().ok()?;
            cfg.nodes.get(i.checked_sub(1)?)
        })
}

fn listing(cfg: &ClusterConfig) -> String {
    cfg.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{} {} ({})", i + 1, n.label(), n.ip))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Chooses the peer: `wanted` when given, else the first node that is not
/// this machine. `file` names the config in messages.
pub fn choose(
    cfg: &ClusterConfig,
    file: &Path,
    net: &NetworkFacts,
    wanted: Option<&str>,
) -> Result<PeerChoice, String> {
    let this = this_node(cfg, net);
    let file = file.display();
    let this_desc = |t: &ThisNode| {
        format!(
            "this machine is {}: {} holds {}",
            t.label, t.interface, t.ip
        )
    };
    if let Some(w) = wanted {
        let node = find(cfg, w).ok_or_else(|| {
            format!(
                "no node {w:?} in {file} (its nodes: {})\n  hint: give a node's name, ssh target, address or position (1 = the first), e.g. `halobox bench run --peer-node 2`",
                listing(cfg)
            )
        })?;
        if let Some(t) = this.as_ref().filter(|t| t.ip == node.ip) {
            return Err(format!(
                "node {w:?} is this machine ({}): pick another node as the peer",
                this_desc(t)
            ));
        }
        return Ok(PeerChoice {
            node: node.clone(),
            why: format!("node {} of {file}, as asked ({w})", node.label()),
            this,
        });
    }
    let Some(t) = this else {
        return Err(format!(
            "this machine is not in {file}: no local interface holds any of its nodes' addresses ({})\n  hint: name the peer with --peer-node NAME, or pass --peer SSH_TARGET --peer-ip IP",
            listing(cfg)
        ));
    };
    let node = cfg.nodes.iter().find(|n| n.ip != t.ip).ok_or_else(|| {
        format!(
            "{file} lists only this machine ({}): add the peer (`halobox cluster init --node …`) or pass --peer SSH_TARGET --peer-ip IP",
            t.label
        )
    })?;
    Ok(PeerChoice {
        node: node.clone(),
        why: format!(
            "node {} of {file}: the first node that is not this machine ({})",
            node.label(),
            this_desc(&t)
        ),
        this: Some(t),
    })
}
