//! Runs a collective plan: every rank at once over ssh (the program on its
//! stdin), then saves the record and the results in a folder that `bench
//! report` and `bench compare` read again.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use super::plan::Plan;
use super::report::{self, RankRun, Record, Results};
use crate::cluster::auth::Mode;
use crate::cluster::config::ClusterConfig;
use crate::cluster::plan::JoinReport;
use crate::cluster::preflight::{self, Level};
use crate::cluster::run::{each_node, remote_node};
use crate::remote::Masters;

/// Largest saved file read back.
const MAX_SAVED_BYTES: u64 = 64 << 20;

/// Every node's `cluster join --dry-run` report: the env its ranks run
/// with and its container's facts; the first node that cannot report is an
/// error naming it.
pub fn node_reports(cfg: &ClusterConfig, masters: &Masters) -> anyhow::Result<Vec<JoinReport>> {
    crate::cluster::run::reports(cfg, masters)
        .into_iter()
        .map(|r| r.map_err(anyhow::Error::msg))
        .collect()
}

/// Per node, what halobox's facts say could keep RCCL off RDMA there
/// (memlock, device access, the RDMA port and its GID), or "" when nothing.
pub fn likely_causes(cfg: &ClusterConfig, reports: &[JoinReport]) -> Vec<String> {
    let ok: Vec<Result<JoinReport, String>> = reports.iter().cloned().map(Ok).collect();
    let version = reports
        .first()
        .map_or(String::new(), |r| r.halobox_version.clone());
    let findings = preflight::preflight(cfg, &ok, &version, Mode::Insecure);
    cfg.nodes
        .iter()
        .zip(reports)
        .map(|(node, r)| {
            let mut said: Vec<String> = findings
                .iter()
                .filter(|f| f.node.as_deref() == Some(node.label()))
                .filter(|f| f.level != Level::Pass)
                .filter(|f| matches!(f.check.as_str(), "memlock" | "devices" | "rdma" | "mtu"))
                .map(|f| f.message.clone())
                .collect();
            if let (true, Some(dev), Some(port)) =
                (said.is_empty(), &r.env.rdma_device, r.env.rdma_port)
            {
                said.push(format!(
                    "RCCL was given NCCL_IB_HCA=={dev}:{port}{}: check that the GID index is the RoCE v2 GID of {} (`halobox doctor` on the node) and that the container's RCCL has the NET/IB transport",
                    r.env
                        .gid_index
                        .map(|g| format!(" and NCCL_IB_GID_INDEX={g}"))
                        .unwrap_or_default(),
                    r.env.ip
                ));
            }
            said.join("; ")
        })
        .collect()
}

/// Runs every rank at once and waits for all of them.
pub fn execute(cfg: &ClusterConfig, plan: &Plan, masters: &Masters) -> Vec<RankRun> {
    // Each rank stops itself at its own timeout; ssh gets a little more.
    let timeout = Duration::from_secs(plan.options.timeout_s.saturating_add(30));
    let nodes: Vec<_> = plan
        .ranks
        .iter()
        .map(|r| cfg.nodes[r.rank].clone())
        .collect();
    each_node(&nodes, |node| {
        let rank = plan
            .ranks
            .iter()
            .find(|r| r.ssh == node.ssh && r.ip == node.ip)
            .expect("a rank per node");
        let remote = remote_node(cfg, node).through(masters);
        match remote.run_input(&rank.command, super::PROGRAM.as_bytes(), timeout) {
            Ok(done) => {
                let code = done.status.and_then(|s| s.code());
                let error = match (done.timed_out, code) {
                    (Some(t), _) => Some(format!(
                        "node {}: the benchmark did not finish within {} s (stopped): {}",
                        rank.node,
                        t.as_secs(),
                        crate::remote::tail(&done.output, 4)
                    )),
                    (None, Some(0)) => None,
                    (None, c) if crate::ssh::unreachable(c) => {
                        Some(remote.error("the collective benchmark", &done).message)
                    }
                    (None, Some(127)) => Some(format!(
                        "node {}: a command is missing there: {}\n  hint: name the container's Python with --python, or set `ray` in cluster.toml to the venv's ray",
                        rank.node,
                        crate::remote::tail(&done.output, 4)
                    )),
                    _ => None,
                };
                RankRun {
                    exit_code: code,
                    error,
                    stdout: done.stdout,
                    output: done.output,
                }
            }
            Err(e) => RankRun {
                exit_code: None,
                error: Some(e.message),
                stdout: String::new(),
                output: String::new(),
            },
        }
    })
}

/// Writes `collective-run.json` and `collective.json` in `dir`.
pub fn save(dir: &Path, rec: &Record, res: &Results) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(
        dir.join(report::RUN_FILE),
        serde_json::to_string_pretty(rec)? + "\n",
    )?;
    std::fs::write(
        dir.join(report::RESULTS_FILE),
        serde_json::to_string_pretty(res)? + "\n",
    )?;
    Ok(())
}

/// True when `dir` holds a saved collective run.
pub fn is_saved(dir: &Path) -> bool {
    dir.join(report::RUN_FILE).is_file()
}

/// Reads a saved run's record.
pub fn load(dir: &Path) -> anyhow::Result<Record> {
    let kind = crate::bench::saved::Kind {
        file: report::RUN_FILE,
        made_by: "halobox bench collective --save",
        what: "collective record",
        max_bytes: MAX_SAVED_BYTES,
        schema_version: report::SCHEMA_VERSION,
    };
    crate::bench::saved::load(dir, &kind, |r: &Record| r.schema_version)
}
