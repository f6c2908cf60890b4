//! `cluster doctor`'s effects: every node's probe over ssh (the one remote
//! runner), all at once.

use std::time::Duration;

use super::doctor::{self, Answer};
use crate::cluster::config::ClusterConfig;
use crate::cluster::run::{each_node, remote_node};

/// How long a node's doctor probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// Every node's probe, in parallel; in node order.
pub fn doctor(cfg: &ClusterConfig) -> Vec<Answer> {
    each_node(&cfg.nodes, |node| {
        let peers: Vec<_> = cfg
            .nodes
            .iter()
            .filter(|n| n.ip != node.ip)
            .map(|n| n.ip)
            .collect();
        let container = node
            .backend
            .is_container()
            .then_some(node.container.as_str());
        let remote = remote_node(cfg, node);
        let cmd = doctor::probe_command(&cfg.halobox, node.ip, container, &peers);
        let probe = match remote.run(&cmd, PROBE_TIMEOUT) {
            Err(e) => Err(e.message),
            Ok(done) if done.timed_out.is_some() || done.status.is_none_or(|s| !s.success()) => {
                Err(remote.error("the doctor probe", &done).message)
            }
            Ok(done) => doctor::parse_probe(&done.stdout, container)
                .map_err(|e| format!("{}: {e}", remote.label())),
        };
        Answer {
            name: node.label().to_string(),
            ssh: node.ssh.clone(),
            ip: node.ip,
            probe,
        }
    })
}
