//! `halobox cluster init`: cluster.toml from `--node` flags or prompts.

use std::io::IsTerminal;
use std::net::Ipv4Addr;
use std::process::ExitCode;

use crate::cli::ClusterInitArgs;
use crate::cluster::config::{self, ClusterConfig, NodeConfig};
use crate::error::UsageError;

fn parse_node(spec: &str, a: &ClusterInitArgs) -> Result<NodeConfig, String> {
    let (ssh, ip) = spec.split_once(',').ok_or_else(|| {
        format!("--node {spec:?}: write SSH_TARGET,IP (root@node1,192.168.100.1)")
    })?;
    let ip: Ipv4Addr = ip
        .trim()
        .parse()
        .map_err(|_| format!("--node {spec:?}: {ip:?} is not an IPv4 address"))?;
    Ok(NodeConfig {
        name: None,
        ssh: ssh.trim().to_string(),
        ip,
        container: a.ray_node.container.clone(),
        backend: a.ray_node.backend,
        cpus: a.cpus,
        env: Default::default(),
        memory_bandwidth_gbs: None,
    })
}

fn prompt_nodes(a: &ClusterInitArgs) -> anyhow::Result<Vec<NodeConfig>> {
    use dialoguer::Input;
    let mut nodes = Vec::new();
    loop {
        let role = if nodes.is_empty() { "head" } else { "worker" };
        let ssh: String = Input::new()
            .with_prompt(format!(
                "node {} ({role}) ssh target{}",
                nodes.len() + 1,
                if nodes.is_empty() {
                    ""
                } else {
                    " (empty: done)"
                }
            ))
            .allow_empty(!nodes.is_empty())
            .interact_text()?;
        if ssh.trim().is_empty() {
            return Ok(nodes);
        }
        let ip: Ipv4Addr = Input::new()
            .with_prompt(format!("node {} data-plane IPv4", nodes.len() + 1))
            .interact_text()?;
        nodes.push(parse_node(&format!("{ssh},{ip}"), a).map_err(UsageError)?);
    }
}

pub fn init(a: &ClusterInitArgs) -> anyhow::Result<ExitCode> {
    let nodes = if a.node.is_empty() {
        if !std::io::stdin().is_terminal() {
            return Err(UsageError(
                "no --node given and stdin is not a terminal: pass --node SSH_TARGET,IP for every node (the first is the head)".into(),
            )
            .into());
        }
        prompt_nodes(a)?
    } else {
        a.node
            .iter()
            .map(|n| parse_node(n, a))
            .collect::<Result<_, _>>()
            .map_err(UsageError)?
    };
    let mut cfg = ClusterConfig::new(nodes);
    cfg.transport = a.ray_node.transport;
    cfg.ray_port = a.ray_node.port;
    cfg.validate().map_err(UsageError)?;
    let text = cfg.to_toml();
    if a.print {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let path = config::path(a.file.cluster.as_deref())
        .ok_or_else(|| UsageError("no config directory: pass --cluster FILE".into()))?;
    if path.exists() && !a.force {
        return Err(UsageError(format!(
            "{} exists: pass --force to replace it, or --print to see the new one",
            path.display()
        ))
        .into());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, text)?;
    println!(
        "wrote {} ({} node(s), head {})",
        path.display(),
        cfg.nodes.len(),
        cfg.head().label()
    );
    Ok(ExitCode::SUCCESS)
}
