//! `halobox cluster status`: Ray's nodes (or llama.cpp's RPC servers), the
//! image digest each node's container runs, and each node's env.

use std::process::ExitCode;

use crate::cli::ClusterStatusArgs;
use crate::cluster::config::{self, Engine};
use crate::fleet::ray_up;
use crate::serve::rpc_servers as rpc;

pub fn status(a: &ClusterStatusArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    if cfg.engine == Engine::LlamaCpp {
        // The HELLO is said from the head only (the data plane may not be
        // reachable from elsewhere): this machine holds the head's address.
        let on_data_plane = std::net::UdpSocket::bind((cfg.head().ip, 0)).is_ok();
        let rows = rpc::status(&cfg, on_data_plane);
        if a.output.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            println!(
                "engine llama.cpp: RPC servers on port {} (head {} runs llama-server: `halobox serve status`)",
                cfg.rpc_port,
                cfg.head().label()
            );
            print!("{}", rpc::render_status(&rows));
        }
        return Ok(if rows.iter().all(|r| r.state == "running") {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let s = ray_up::status(&cfg, &path)?;
    let healthy = s.error.is_none() && s.alive == cfg.nodes.len() && s.unknown.is_empty();
    if a.output.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", render_status(&s, cfg.nodes.len()));
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The status table.
pub fn render_status(s: &ray_up::Status, n: usize) -> String {
    let mut out = format!("Ray GCS {}: {}/{n} node(s) alive\n", s.gcs, s.alive);
    if let Some(e) = &s.error {
        let hint = if e.starts_with(crate::cluster::plan::NOT_SENT) {
            "see what holds the port on the head (`ss -ltnp` there as root), stop it, then `halobox cluster up`"
        } else {
            "`halobox cluster up`"
        };
        out.push_str(&format!("  Ray is not answering: {e}\n  hint: {hint}\n"));
    }
    out.push_str(&format!(
        "{:<16} {:<15} {:<6} {:>3} {:>4}  {:<19} {:<9} {}\n",
        "NODE", "IP", "RAY", "GPU", "CPU", "IMAGE", "TRANSPORT", "ENV"
    ));
    for node in &s.nodes {
        let res = |k: &str| {
            node.ray
                .as_ref()
                .and_then(|r| r.resources.get(k))
                .map_or("-".into(), |v| format!("{v}"))
        };
        let (transport, env) = match &node.env {
            Some(e) => (e.transport.to_string(), e.assignments().join(" ")),
            None => ("-".into(), "(not started by `cluster up` from here)".into()),
        };
        let image = match (&node.image_digest, &node.image_error) {
            (Some(d), _) => d.chars().take(19).collect::<String>(),
            (None, Some(_)) => "(not answered)".into(),
            (None, None) => "-".into(),
        };
        out.push_str(&format!(
            "{:<16} {:<15} {:<6} {:>3} {:>4}  {:<19} {:<9} {}\n",
            node.name,
            node.ip,
            match &node.ray {
                Some(r) if r.alive => "alive",
                Some(_) => "gone",
                None => "absent",
            },
            res("GPU"),
            res("CPU"),
            image,
            transport,
            env
        ));
    }
    let digests: std::collections::BTreeSet<&String> = s
        .nodes
        .iter()
        .filter_map(|n| n.image_digest.as_ref())
        .collect();
    if digests.len() > 1 {
        out.push_str("note: the nodes' containers run different images: `halobox cluster refresh` puts them on one (it moves the image once)\n");
    }
    for u in &s.unknown {
        out.push_str(&format!(
            "note: Ray also lists {} (not in cluster.toml)\n",
            u.ip
        ));
    }
    out
}
