//! What `cluster up` finds already there, so that running it again brings
//! back only what is missing (after a reboot, a node lost, or by a
//! supervisor): a container halobox made that is stopped is started first
//! ([`stopped`]); a Ray head that already runs on the head's port (its GCS
//! answers this cluster's driver) is kept, and only the nodes it does not
//! list alive join it ([`to_join`]).

use super::config::{ClusterConfig, NodeConfig};
use super::plan::{JoinReport, RayNodes};

/// A node whose container is stopped and will be started first.
#[derive(Debug, Clone, PartialEq)]
pub struct Stopped {
    /// Its index in the cluster's nodes.
    pub index: usize,
    /// The engine's state of the container (`exited`, `created`, …).
    pub state: String,
}

/// The nodes whose container halobox made (it has halobox inside) is not
/// running but can be started. A container made by hand is left to the
/// preflight, which names it.
pub fn stopped(reports: &[Result<JoinReport, String>]) -> Vec<Stopped> {
    reports
        .iter()
        .enumerate()
        .filter_map(|(index, r)| {
            let c = &r.as_ref().ok()?.container;
            let state = c.state.as_deref()?;
            let name = c.name.as_deref()?;
            (c.found
                && c.backend.is_container()
                && c.halobox.is_some()
                && crate::container::enter::needs_start(name, state) == Ok(true))
            .then(|| Stopped {
                index,
                state: state.to_string(),
            })
        })
        .collect()
}

/// Whether `ray`'s table shows this cluster's head alive at the head's
/// address: the Ray that holds the port is this cluster's, and is kept.
pub fn head_alive(cfg: &ClusterConfig, ray: &RayNodes) -> bool {
    let ip = cfg.head().ip.to_string();
    ray.alive().any(|n| n.head && n.ip == ip)
}

/// Whether the Ray that runs on the head (its GCS answered this cluster's
/// driver and lists this head alive) may be kept; why not, else. It is not
/// kept when it answers a driver without a token too (it runs without
/// authentication) while `up` asks for token mode, nor when there is no
/// record of the `up` that started it with this cluster file, or when a
/// node it keeps would now get another env (cluster.toml changed since):
/// the nodes it keeps go on with the env of that `up`.
pub fn keep(
    cfg: &ClusterConfig,
    ray: &RayNodes,
    open: bool,
    mode: super::auth::Mode,
    last: Option<&[crate::cluster::env::NodeEnv]>,
    reports: &[Result<JoinReport, String>],
) -> Result<(), String> {
    if open && mode == super::auth::Mode::Token {
        return Err("it answers a driver without Ray's token (it was started with --insecure-ray), and this `up` asks for token authentication".into());
    }
    let Some(last) = last else {
        return Err(
            "this machine has no record of the `up` that started it with this cluster file".into(),
        );
    };
    let join = to_join(cfg, Some(ray));
    for (i, node) in cfg.nodes.iter().enumerate() {
        if join.iter().any(|j| j.ip == node.ip) {
            continue;
        }
        let Some(Ok(now)) = reports.get(i) else {
            continue;
        };
        let before = last.iter().find(|e| e.ip == now.env.ip);
        if before != Some(&now.env) {
            return Err(format!(
                "node {} ({}) would now get another env than the `up` that started it (cluster.toml or the node changed)",
                node.label(),
                node.ip
            ));
        }
    }
    Ok(())
}

/// The nodes `up` starts Ray on: every node, or (Ray already running)
/// those its table does not list alive.
pub fn to_join<'a>(cfg: &'a ClusterConfig, ray: Option<&RayNodes>) -> Vec<&'a NodeConfig> {
    match ray {
        None => cfg.nodes.iter().collect(),
        Some(ray) => {
            let alive: Vec<&str> = ray.alive().map(|n| n.ip.as_str()).collect();
            cfg.nodes
                .iter()
                .filter(|n| !alive.contains(&n.ip.to_string().as_str()))
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::config::NodeBackend;
    use crate::cluster::plan::{ContainerReport, RayNode};

    fn cfg() -> ClusterConfig {
        toml::from_str(
            "[[node]]\nssh = \"root@10.0.0.1\"\nip = \"10.0.0.1\"\n[[node]]\nssh = \"root@10.0.0.2\"\nip = \"10.0.0.2\"\n",
        )
        .expect("config")
    }

    fn node(ip: &str, head: bool, alive: bool) -> RayNode {
        RayNode {
            ip: ip.into(),
            id: format!("id-{ip}"),
            alive,
            head,
            unreachable: false,
            raylet_port: None,
            resources: Default::default(),
        }
    }

    fn container(state: &str, halobox: bool) -> ContainerReport {
        ContainerReport {
            state: Some(state.into()),
            found: true,
            halobox: halobox.then(|| "/run/halobox/bin/halobox".into()),
            ..ContainerReport::unknown(NodeBackend::Podman, "vllm")
        }
    }

    #[test]
    fn only_a_stopped_container_halobox_made_is_started() {
        let env: crate::cluster::env::NodeEnv = serde_json::from_value(serde_json::json!({
            "ip": "10.0.0.2", "is_head": false, "interface": "enp1s0", "mtu": 9000,
            "transport": "ethernet", "reason": "test",
            "vars": [], "per_node": [], "ray_start": []
        }))
        .expect("env");
        let report = |c: ContainerReport| Ok(JoinReport::new(env.clone(), c, None));
        let reports = vec![
            report(container("running", true)),
            report(container("exited", true)),
            report(container("created", false)),
            report(container("paused", true)),
            report(container("created", true)),
            Err("unreachable".into()),
        ];
        assert_eq!(
            stopped(&reports),
            vec![
                Stopped {
                    index: 1,
                    state: "exited".into()
                },
                Stopped {
                    index: 4,
                    state: "created".into()
                }
            ]
        );
    }

    fn env(ip: &str, is_head: bool) -> crate::cluster::env::NodeEnv {
        serde_json::from_value(serde_json::json!({
            "ip": ip, "is_head": is_head, "interface": "dp0", "mtu": 9000,
            "transport": "ethernet", "reason": "test",
            "vars": [], "per_node": [], "ray_start": ["ray", "start"]
        }))
        .expect("env")
    }

    #[test]
    fn a_running_ray_is_kept_only_with_its_record_the_same_env_and_auth() {
        use crate::cluster::auth::Mode;
        let cfg = cfg();
        let ray = RayNodes {
            nodes: vec![node("10.0.0.1", true, true), node("10.0.0.2", false, false)],
            error: None,
            gcs: None,
        };
        let reports = |head: crate::cluster::env::NodeEnv| {
            vec![
                Ok(JoinReport::new(head, container("running", true), None)),
                Ok(JoinReport::new(
                    env("10.0.0.2", false),
                    container("running", true),
                    None,
                )),
            ]
        };
        let last = vec![env("10.0.0.1", true), env("10.0.0.2", false)];
        let now = reports(env("10.0.0.1", true));
        assert_eq!(
            keep(&cfg, &ray, false, Mode::Token, Some(&last[..]), &now),
            Ok(())
        );
        let e = keep(&cfg, &ray, true, Mode::Token, Some(&last[..]), &now).unwrap_err();
        assert!(e.contains("--insecure-ray"), "{e}");
        assert_eq!(
            keep(&cfg, &ray, true, Mode::Insecure, Some(&last[..]), &now),
            Ok(())
        );
        let e = keep(&cfg, &ray, false, Mode::Token, None, &now).unwrap_err();
        assert!(e.contains("no record"), "{e}");
        let mut changed = env("10.0.0.1", true);
        changed.mtu = Some(1500);
        let e = keep(
            &cfg,
            &ray,
            false,
            Mode::Token,
            Some(&last[..]),
            &reports(changed),
        )
        .unwrap_err();
        assert!(e.contains("(10.0.0.1) would now get another env"), "{e}");
        // A node that joins anew may have another env.
        let mut moved = last.clone();
        moved[1].mtu = Some(1500);
        assert_eq!(
            keep(&cfg, &ray, false, Mode::Token, Some(&moved[..]), &now),
            Ok(())
        );
    }

    #[test]
    fn a_running_head_is_kept_and_only_the_missing_nodes_join() {
        let cfg = cfg();
        let up = RayNodes {
            nodes: vec![node("10.0.0.1", true, true), node("10.0.0.2", false, false)],
            error: None,
            gcs: None,
        };
        assert!(head_alive(&cfg, &up));
        let join: Vec<String> = to_join(&cfg, Some(&up))
            .iter()
            .map(|n| n.ip.to_string())
            .collect();
        assert_eq!(join, ["10.0.0.2"]);
        assert_eq!(to_join(&cfg, None).len(), 2);
        let other = RayNodes {
            nodes: vec![node("10.0.0.9", true, true)],
            error: None,
            gcs: None,
        };
        assert!(!head_alive(&cfg, &other), "another cluster's head");
        let dead = RayNodes {
            nodes: vec![node("10.0.0.1", true, false)],
            error: None,
            gcs: None,
        };
        assert!(!head_alive(&cfg, &dead));
    }
}
