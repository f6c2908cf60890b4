//! What `serve` checks before it starts anything, each failure naming the
//! node and the fix: the cluster is up and Ray has enough GPUs for the
//! parallel sizes, the API port is free on the head, the head's container
//! has vLLM, a model given as a folder is there in every node's
//! container, and a Hugging Face id is complete in every node's cache.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

use super::engine::Head;
use super::plan;
use crate::cluster::config::ClusterConfig;
use crate::cluster::{plan as cluster_plan, run as cluster_run};
use crate::error::UsageError;

/// How long the check in each node's container may take.
const NODE_CHECK: Duration = Duration::from_secs(60);

/// Every check; the first failure (in the order listed) as an error with
/// its fix. The checks that ask the nodes run at once: each waits on ssh
/// or an engine, and `serve`'s time to an answering API includes them.
pub fn check(
    cfg: &ClusterConfig,
    model: &str,
    extra: &[String],
    gpus_needed: u32,
    host: Option<IpAddr>,
    port: u16,
) -> anyhow::Result<()> {
    port_free(host, port, cfg.engine.title())?;
    let (complete, ray, vllm, everywhere) = std::thread::scope(|s| {
        let complete = s.spawn(|| model_complete(cfg, model, extra, false));
        let ray = s.spawn(|| ray_has(cfg, gpus_needed));
        let vllm = s.spawn(|| has_vllm(cfg));
        let everywhere = is_path(model).then(|| model_everywhere(cfg, model));
        (
            joined(complete),
            joined(ray),
            joined(vllm),
            everywhere.unwrap_or(Ok(())),
        )
    });
    if let Some(summary) = complete? {
        eprintln!("{summary}");
    }
    ray?;
    vllm?;
    everywhere
}

/// What a scoped thread returned (a panic there is passed on).
pub fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// A model given as a Hugging Face id: every node holds it complete, at
/// the head's commit of the revision vLLM loads (`--revision` after `--`,
/// else `main`), in its cache (`None`: a folder, checked apart). With
/// `for_plan` (`--dry-run`), nodes that cannot be asked leave the model
/// "not checked" (the plan is still shown); a node that lacks files still
/// fails it.
pub fn model_complete(
    cfg: &ClusterConfig,
    model: &str,
    extra: &[String],
    for_plan: bool,
) -> anyhow::Result<Option<String>> {
    if is_path(model) {
        return Ok(None);
    }
    let spec = match plan::revision(extra) {
        Some(rev) => format!("{model}@{rev}"),
        None => model.to_string(),
    };
    let Ok(m) = crate::model::cache::ModelRef::parse(&spec) else {
        return Ok(None);
    };
    if for_plan {
        crate::model::sync::complete_everywhere_or_unchecked(cfg, &m).map(Some)
    } else {
        crate::model::sync::complete_everywhere(cfg, &m).map(Some)
    }
}

/// A model given as a folder (not a Hugging Face id).
pub fn is_path(model: &str) -> bool {
    model.starts_with('/') || model.starts_with("./") || model.starts_with("../")
}

/// The name the API lists the model under: `--served-model-name` after
/// `--`, else the model as given.
pub fn served_name(model: &str, extra: &[String]) -> String {
    extra
        .iter()
        .enumerate()
        .find_map(|(i, a)| {
            a.strip_prefix("--served-model-name=")
                .map(str::to_string)
                .or_else(|| {
                    (a == "--served-model-name")
                        .then(|| extra.get(i + 1).cloned())
                        .flatten()
                })
        })
        .unwrap_or_else(|| model.to_string())
}

/// The port is free where the API binds (the head shares its network with
/// the container).
/// `engine` names the serve's engine in the words.
pub fn port_free(host: Option<IpAddr>, port: u16, engine: &str) -> anyhow::Result<()> {
    let ip = host.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    match TcpListener::bind(SocketAddr::new(ip, port)) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(UsageError(format!(
            "port {port} is already taken on the head{}: {engine} could not listen there\n  hint: `halobox serve status` (a serve of halobox?), `ss -ltnp 'sport = :{port}'` shows who holds it; or choose another with --port",
            host.map(|h| format!(" ({h})")).unwrap_or_default()
        ))
        .into()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => Err(UsageError(format!(
            "--host {ip}: this machine holds no such address, so {engine} could not listen there\n  hint: give an address of the head (its data-plane {ip}?) or leave --host out"
        ))
        .into()),
        Err(_) => Ok(()),
    }
}

/// Whether another socket listens on `port` where the API binds (`host`,
/// else every address).
pub fn port_taken(host: Option<IpAddr>, port: u16) -> bool {
    let ip = host.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    TcpListener::bind(SocketAddr::new(ip, port))
        .is_err_and(|e| e.kind() == std::io::ErrorKind::AddrInUse)
}

/// Ray answers and has `needed` GPUs over its alive nodes.
fn ray_has(cfg: &ClusterConfig, needed: u32) -> anyhow::Result<()> {
    let head = cfg.head();
    let down = |why: String| {
        anyhow::anyhow!(
            "the cluster is down: {why}\n  hint: `halobox cluster up` first (then `halobox cluster status` lists the nodes)"
        )
    };
    let nodes = cluster_run::ray_nodes(cfg, 0, 5).map_err(|e| down(first_line(&e.to_string())))?;
    let alive: Vec<&cluster_plan::RayNode> = nodes.alive().collect();
    if alive.is_empty() {
        return Err(down(format!(
            "Ray's GCS at {}:{} lists no node{}",
            head.ip,
            cfg.ray_port,
            nodes
                .error
                .map(|e| format!(" ({})", first_line(&e)))
                .unwrap_or_default()
        )));
    }
    let gpus: f64 = alive
        .iter()
        .map(|n| n.resources.get("GPU").copied().unwrap_or(0.0))
        .sum();
    if f64::from(needed) > gpus {
        let names: Vec<String> = alive
            .iter()
            .map(|n| {
                let name = cfg
                    .nodes
                    .iter()
                    .find(|c| c.ip.to_string() == n.ip)
                    .map_or(n.ip.clone(), |c| c.label().to_string());
                format!(
                    "{name}: {} GPU",
                    n.resources.get("GPU").copied().unwrap_or(0.0)
                )
            })
            .collect();
        let missing: Vec<&str> = cfg
            .nodes
            .iter()
            .filter(|c| !alive.iter().any(|n| n.ip == c.ip.to_string()))
            .map(|c| c.label())
            .collect();
        return Err(UsageError(format!(
            "tensor × pipeline parallel needs {needed} GPUs, but Ray lists {gpus} ({}){}\n  hint: serve with --tp {} or bring every node up (`halobox cluster up`)",
            names.join(", "),
            if missing.is_empty() {
                String::new()
            } else {
                format!("; not in Ray: node {}", missing.join(", "))
            },
            gpus.max(1.0) as u32,
        ))
        .into());
    }
    Ok(())
}

/// The head's container has the `vllm` command.
fn has_vllm(cfg: &ClusterConfig) -> anyhow::Result<()> {
    let head = Head::of(cfg);
    let probe = vec![
        "sh".to_string(),
        "-c".into(),
        "command -v \"$1\" >/dev/null 2>&1 || [ -x \"$1\" ]".into(),
        "halobox-check".into(),
        cfg.vllm.clone(),
    ];
    let done = crate::proc::run(&head.argv(&probe), NODE_CHECK)?;
    if done.status.is_some_and(|s| s.success()) {
        return Ok(());
    }
    if done.status.and_then(|s| s.code()) == Some(1) {
        return Err(UsageError(format!(
            "the head's container {} has no `{}`: its image lacks vLLM\n  hint: `halobox refresh` the head with an image that has vLLM (halobox's vllm-therock-gfx1151), or set `vllm = \"/path/to/vllm\"` in cluster.toml",
            head.container, cfg.vllm
        ))
        .into());
    }
    anyhow::bail!(
        "cannot look into container {} on the head ({}): {}\n  hint: `halobox list`; `halobox refresh` makes it",
        head.container,
        head.label,
        crate::remote::tail(&done.output, 3)
    )
}

/// Every node's container holds the model folder at `model`.
fn model_everywhere(cfg: &ClusterConfig, model: &str) -> anyhow::Result<()> {
    let results = cluster_run::each_node(&cfg.nodes, |node| {
        let cmd = cluster_plan::in_container(
            &cfg.halobox,
            node.backend,
            &node.container,
            &[
                "test".to_string(),
                "-e".into(),
                format!("{}/config.json", model.trim_end_matches('/')),
            ],
        );
        cluster_run::remote_node(cfg, node).run(&cmd, NODE_CHECK)
    });
    let mut missing = Vec::new();
    for (node, r) in cfg.nodes.iter().zip(results) {
        match r {
            Ok(done) if done.status.is_some_and(|s| s.success()) => {}
            Ok(done) if done.status.and_then(|s| s.code()) == Some(1) => {
                missing.push(format!("{} ({})", node.label(), node.ip));
            }
            Ok(done) => anyhow::bail!(
                "node {}: cannot look for the model in container {}: {}\n  hint: `halobox cluster status`; is the container running?",
                node.label(),
                node.container,
                crate::remote::tail(&done.output, 3)
            ),
            Err(e) => anyhow::bail!("{e}"),
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(UsageError(format!(
        "the model folder {model} (its config.json) is missing in the container on node {}: every node loads its own copy at the same path\n  hint: copy it there (`rsync -a {model}/ NODE:{model}/`), or bind a shared store into every container: `halobox refresh --volume SRC:{model}:ro` on each node",
        missing.join(", ")
    ))
    .into())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_names_and_paths() {
        assert_eq!(served_name("/m/tiny", &[]), "/m/tiny");
        assert_eq!(
            served_name("/m/tiny", &["--served-model-name".into(), "tiny".into()]),
            "tiny"
        );
        assert_eq!(served_name("x", &["--served-model-name=y".into()]), "y");
        assert!(is_path("/models/x") && is_path("./x") && !is_path("Qwen/Qwen3-0.6B"));
    }

    #[test]
    fn a_taken_port_is_named() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let e = port_free(Some(IpAddr::V4(Ipv4Addr::LOCALHOST)), port, "llama.cpp").unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("port {port} is already taken")),
            "{e}"
        );
        assert!(e.to_string().contains("llama.cpp could not listen"), "{e}");
        assert!(!e.to_string().contains("vLLM"), "{e}");
        assert!(e.to_string().contains("--port"), "{e}");
        assert!(port_taken(Some(IpAddr::V4(Ipv4Addr::LOCALHOST)), port));
        drop(l);
        assert!(!port_taken(Some(IpAddr::V4(Ipv4Addr::LOCALHOST)), port));
    }
}
