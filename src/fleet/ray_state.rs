//! Whether Ray runs in the cluster, for `cluster refresh` (a swap stops
//! the Ray in a node's container). The head's Ray is asked first; unless
//! its table lists alive nodes, every refreshed node's process table is
//! looked at for Ray's daemons (`raylet` on every Ray node, `gcs_server`
//! on the head): seen from the node itself, so a container's processes
//! count whatever its image holds, and a stopped container is not started.
//! Ray is taken as stopped only when every node was looked at and none
//! runs a daemon; a node that cannot be looked at leaves it unknown.

use std::time::Duration;

use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::plan::RayNodes;
use crate::cluster::run::{each_node, ray_nodes, remote_node};
use crate::remote;

/// How long a node's look at its processes may take over ssh.
const LOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// The look, as a shell script: the process name of every process named
/// like one of Ray's daemons, then `@@done` (the look went through).
const LOOK: &str = r#"for f in /proc/[0-9]*/comm; do read -r n 2>/dev/null <"$f" || continue; case $n in raylet|gcs_server) echo "$n" ;; esac; done; echo "@@done""#;

/// What is known of Ray in the cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum RayState {
    /// No node runs a Ray daemon.
    Stopped,
    /// Ray runs: how that is known.
    Running(String),
    /// It cannot be told: why.
    Unknown(String),
}

/// One node's look: its name and the Ray daemons it runs, or why it could
/// not be looked at.
pub type Look = (String, Result<Vec<String>, String>);

/// The look's argv on a node.
pub fn look_command() -> Vec<String> {
    ["sh", "-c", LOOK, "halobox-ray-look"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The Ray daemons a look printed, in order, each once; `Err` when it
/// stopped before it went through every process.
pub fn parse_look(stdout: &str) -> Result<Vec<String>, String> {
    if !stdout.lines().any(|l| l.trim_end() == "@@done") {
        return Err(format!(
            "the look at its processes stopped early: {}",
            remote::tail(stdout, 2)
        ));
    }
    let mut seen: Vec<String> = Vec::new();
    for l in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if l != "@@done" && !seen.iter().any(|s| s == l) {
            seen.push(l.to_string());
        }
    }
    Ok(seen)
}

/// What the head's answer settles: `Running` when its table lists alive
/// nodes; `None` when the nodes must be looked at.
pub fn from_head(head: &Result<RayNodes, String>) -> Option<RayState> {
    let alive = head.as_ref().ok()?.alive().count();
    (alive > 0).then(|| RayState::Running(format!("{alive} node(s) alive in Ray's table")))
}

/// The first line of an error (its hint, on the next, is not for here).
pub fn first_line(e: &str) -> &str {
    e.lines().next().unwrap_or(e).trim_end()
}

/// Why the head's answer did not settle it, in a few words.
fn head_said(head: &Result<RayNodes, String>) -> String {
    match head {
        Err(e) => format!("asking Ray on the head failed: {}", first_line(e)),
        Ok(n) => match &n.error {
            Some(e) => format!("Ray on the head did not answer: {e}"),
            None => "Ray's table on the head lists no alive node".into(),
        },
    }
}

/// Whether Ray runs, from the head's answer and every node's look.
pub fn from_looks(head: &Result<RayNodes, String>, looks: &[Look]) -> RayState {
    let running: Vec<String> = looks
        .iter()
        .filter_map(|(n, l)| match l {
            Ok(d) if !d.is_empty() => Some(format!("{n} ({})", d.join(", "))),
            _ => None,
        })
        .collect();
    let failed: Vec<&str> = looks
        .iter()
        .filter_map(|(_, l)| l.as_ref().err().map(|e| first_line(e)))
        .collect();
    if !running.is_empty() {
        RayState::Running(format!(
            "{}, but Ray's daemons run on node {}",
            head_said(head),
            running.join(", node ")
        ))
    } else if !failed.is_empty() {
        RayState::Unknown(format!("{}, and {}", head_said(head), failed.join("; ")))
    } else {
        RayState::Stopped
    }
}

/// Looks at `node`'s processes for Ray's daemons.
fn look(cfg: &ClusterConfig, node: &NodeConfig) -> Result<Vec<String>, String> {
    let done = remote_node(cfg, node)
        .run_ok(
            "the look for Ray's processes",
            &look_command(),
            LOOK_TIMEOUT,
        )
        .map_err(|e| e.message)?;
    parse_look(&done.stdout).map_err(|e| format!("node {}: {e}", node.label()))
}

/// Whether Ray runs on `nodes` (the head asked first, then every node
/// looked at, at once), and the head's answer.
pub fn ask(cfg: &ClusterConfig, nodes: &[NodeConfig]) -> (RayState, Result<RayNodes, String>) {
    let head = ray_nodes(cfg, 0, 5).map_err(|e| format!("{e:#}"));
    if let Some(s) = from_head(&head) {
        return (s, head);
    }
    let looks: Vec<Look> = each_node(nodes, |n| (n.label().to_string(), look(cfg, n)));
    (from_looks(&head, &looks), head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::plan::RayNode;

    fn table(alive: &[bool], error: Option<&str>) -> Result<RayNodes, String> {
        Ok(RayNodes {
            nodes: alive
                .iter()
                .enumerate()
                .map(|(i, &a)| RayNode {
                    ip: format!("10.0.0.{}", i + 1),
                    id: format!("n{i}"),
                    alive: a,
                    head: i == 0,
                    unreachable: false,
                    raylet_port: None,
                    resources: Default::default(),
                })
                .collect(),
            error: error.map(str::to_string),
            gcs: None,
        })
    }

    fn look_of(n: &str, l: Result<&[&str], &str>) -> Look {
        (
            n.into(),
            l.map(|d| d.iter().map(|s| s.to_string()).collect())
                .map_err(str::to_string),
        )
    }

    #[test]
    fn alive_nodes_on_the_head_settle_it() {
        assert_eq!(
            from_head(&table(&[true, false, true], None)),
            Some(RayState::Running("2 node(s) alive in Ray's table".into()))
        );
        assert_eq!(from_head(&table(&[false], None)), None);
        assert_eq!(from_head(&table(&[], Some("ConnectionRefusedError"))), None);
        assert_eq!(from_head(&Err("node a: exit 127".into())), None);
    }

    #[test]
    fn a_failed_query_with_daemons_on_a_node_is_running() {
        let head = Err(
            "node a (root@n1): a command is missing there\n  hint: install halobox".to_string(),
        );
        let s = from_looks(
            &head,
            &[
                look_of("a", Ok(&["raylet", "gcs_server"])),
                look_of("b", Ok(&[])),
                look_of("c", Err("node c (root@n3): cannot reach it over ssh")),
            ],
        );
        assert_eq!(
            s,
            RayState::Running(
                "asking Ray on the head failed: node a (root@n1): a command is missing there, but Ray's daemons run on node a (raylet, gcs_server)".into()
            )
        );
    }

    #[test]
    fn a_node_not_looked_at_leaves_it_unknown() {
        let head = table(&[], Some("TimeoutError: GCS did not answer"));
        let s = from_looks(
            &head,
            &[
                look_of("a", Ok(&[])),
                look_of(
                    "b",
                    Err("node b (root@n2): cannot reach it over ssh\n  hint: check ssh"),
                ),
            ],
        );
        assert_eq!(
            s,
            RayState::Unknown(
                "Ray on the head did not answer: TimeoutError: GCS did not answer, and node b (root@n2): cannot reach it over ssh".into()
            )
        );
    }

    #[test]
    fn no_daemon_anywhere_is_stopped() {
        let head = table(&[], Some("ConnectionRefusedError: [Errno 111]"));
        let s = from_looks(&head, &[look_of("a", Ok(&[])), look_of("b", Ok(&[]))]);
        assert_eq!(s, RayState::Stopped);
    }

    #[test]
    fn the_look_is_read_back() {
        assert_eq!(
            parse_look("raylet\ngcs_server\nraylet\n@@done\n").unwrap(),
            ["raylet", "gcs_server"]
        );
        assert_eq!(parse_look("@@done\n").unwrap(), Vec::<String>::new());
        assert!(parse_look("raylet\n").is_err());
    }

    /// The look goes through a real process table (that it finds Ray's
    /// daemons in the nodes' containers is tests/cluster_fleet.rs's: a
    /// stand-in named raylet here would meet the `ray stop` of other runs).
    #[test]
    fn the_look_goes_through_this_process_table() {
        let argv = look_command();
        let out = crate::proc::command(&argv[0])
            .args(&argv[1..])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let seen = parse_look(&String::from_utf8_lossy(&out.stdout)).unwrap();
        assert!(
            seen.iter().all(|d| d == "raylet" || d == "gcs_server"),
            "{seen:?}"
        );
    }
}
