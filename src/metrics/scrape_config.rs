//! Where Prometheus finds a cluster's figures: every node's `halobox
//! metrics` and the serving engine's own `/metrics` on the head, as a list
//! and as a Prometheus scrape configuration. The engine's series stay the
//! engine's: halobox names the endpoint, it does not copy them.

use std::fmt::Write;
use std::net::SocketAddr;
use std::path::Path;

use crate::cluster::config::{ClusterConfig, Engine};

/// One endpoint to scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The Prometheus job (`halobox` or `engine`).
    pub job: &'static str,
    /// The node's name (cluster.toml `name`, else its ssh target).
    pub node: String,
    /// `IP:PORT`.
    pub target: SocketAddr,
}

/// Every node's `halobox metrics` on `metrics_port`, then the engine's API
/// on the head's data-plane address and `serve_port`.
pub fn endpoints(cfg: &ClusterConfig, metrics_port: u16, serve_port: u16) -> Vec<Endpoint> {
    let mut out: Vec<Endpoint> = cfg
        .nodes
        .iter()
        .map(|n| Endpoint {
            job: "halobox",
            node: n.label().to_string(),
            target: SocketAddr::from((n.ip, metrics_port)),
        })
        .collect();
    let head = cfg.head();
    out.push(Endpoint {
        job: "engine",
        node: head.label().to_string(),
        target: SocketAddr::from((head.ip, serve_port)),
    });
    out
}

/// The engine's name as the configuration's comments say it.
fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Vllm => "vLLM",
        Engine::LlamaCpp => "llama-server",
    }
}

/// A `scrape_configs:` document for `prometheus.yml`. The engine's
/// `/metrics` is behind the serve's API key (llama-server's own, vLLM's
/// through halobox's middleware), so that job reads the key from
/// `api_key_file` (its path, never the key).
pub fn prometheus_config(
    cfg: &ClusterConfig,
    metrics_port: u16,
    serve_port: u16,
    api_key_file: &Path,
) -> String {
    let eps = endpoints(cfg, metrics_port, serve_port);
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Scrape configuration for this cluster: `halobox metrics` on every node (port {metrics_port})\n# and the {} /metrics of `halobox serve` on the head (port {serve_port}).",
        engine_name(cfg.engine)
    );
    if cfg.engine == Engine::LlamaCpp {
        let _ = writeln!(
            o,
            "# llama-server serves /metrics only when started with --metrics: `halobox serve MODEL -- --metrics`."
        );
    }
    let _ = writeln!(o, "scrape_configs:");
    for job in ["halobox", "engine"] {
        let _ = writeln!(o, "  - job_name: {}", q(&format!("halobox-{job}")));
        let _ = writeln!(o, "    metrics_path: /metrics");
        if job == "engine" {
            let _ = writeln!(o, "    authorization:");
            let _ = writeln!(o, "      type: Bearer");
            let _ = writeln!(
                o,
                "      credentials_file: {}",
                q(&api_key_file.display().to_string())
            );
        }
        let _ = writeln!(o, "    static_configs:");
        for e in eps.iter().filter(|e| e.job == job) {
            let _ = writeln!(o, "      - targets: [{}]", q(&e.target.to_string()));
            let _ = writeln!(o, "        labels:");
            let _ = writeln!(o, "          node: {}", q(&e.node));
        }
    }
    o
}
