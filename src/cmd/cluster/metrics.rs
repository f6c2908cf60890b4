//! `halobox cluster metrics`: every node's metrics endpoint and the
//! serve's engine metrics, listed or as a Prometheus scrape configuration.

use std::process::ExitCode;

use crate::cli::ClusterMetricsArgs;
use crate::cluster::config;
use crate::metrics::scrape_config;

/// Runs `cluster metrics`.
pub fn run(a: &ClusterMetricsArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    if a.prometheus_config {
        print!(
            "{}",
            scrape_config::prometheus_config(
                &cfg,
                a.metrics_port,
                a.serve_port,
                &crate::serve::api_key::path(&path)
            )
        );
    } else {
        for e in scrape_config::endpoints(&cfg, a.metrics_port, a.serve_port) {
            println!("{:<8} {:<16} http://{}/metrics", e.job, e.node, e.target);
        }
    }
    Ok(ExitCode::SUCCESS)
}
