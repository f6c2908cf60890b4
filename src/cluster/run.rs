//! Executes the cluster plans: `join` on this node (Ray in the container or
//! on the host), and `up`/`status`/`down` over ssh to every node, in
//! parallel where the order does not matter.

use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::config::{ClusterConfig, NodeBackend, NodeConfig};
use super::env::{self, EnvRequest, NodeEnv};
use super::plan::{
    self, ContainerReport, Finding, JoinReport, Level, RayNodes, in_container, with_env,
};
use crate::host::HostFacts;
use crate::proc::{self, Finished, Proc};
use crate::shell;

/// This halobox's version (compared across nodes).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// How long one node's `join` (Ray start included) may take over ssh.
const JOIN_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a read-only command on a node may take over ssh.
const QUERY_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether `ip:port` can be bound (nothing listens there).
pub fn port_free(ip: Ipv4Addr, port: u16) -> bool {
    !matches!(TcpListener::bind((ip, port)), Err(e) if e.kind() == std::io::ErrorKind::AddrInUse)
}

/// Where this node's Ray would run, as seen from here.
pub fn container_report(
    facts: &HostFacts,
    backend: NodeBackend,
    name: &str,
    engine: Option<&str>,
) -> anyhow::Result<ContainerReport> {
    let host_kfd = facts.gpu.kfd.is_some();
    if backend == NodeBackend::Host {
        let memlock = facts.limits.memlock.map(|l| match l.soft {
            crate::host::limits::LimitValue::Unlimited => -1,
            crate::host::limits::LimitValue::Finite(v) => i64::try_from(v).unwrap_or(i64::MAX),
        });
        return Ok(ContainerReport {
            backend,
            name: None,
            found: true,
            image_digest: None,
            memlock,
            kfd: host_kfd,
        });
    }
    let info = crate::engine::block_on(async {
        let engine = crate::engine::connect(engine).await?;
        anyhow::Ok(engine.container(name).await?)
    })??;
    Ok(match info {
        None => ContainerReport {
            backend,
            name: Some(name.into()),
            found: false,
            image_digest: None,
            memlock: None,
            kfd: false,
        },
        Some(c) => ContainerReport {
            backend,
            name: Some(name.into()),
            found: true,
            image_digest: c.labels.get(crate::container::spec::LABEL_DIGEST).cloned(),
            memlock: c.memlock,
            // toolbox and distrobox bind the host's /dev.
            kfd: c.devices.iter().any(|d| d.starts_with("/dev/kfd"))
                || (matches!(backend, NodeBackend::Toolbox | NodeBackend::Distrobox) && host_kfd),
        },
    })
}

/// This node's report and env (what `join --dry-run --json` prints).
pub fn join_report(
    facts: &HostFacts,
    req: &EnvRequest,
    backend: NodeBackend,
    container: &str,
    engine: Option<&str>,
    halobox: &str,
    check_port: bool,
) -> anyhow::Result<JoinReport> {
    let env = env::plan(facts, req).map_err(|e| anyhow::anyhow!("{e}"))?;
    let report = container_report(facts, backend, container, engine)?;
    let port_free = (env.is_head && check_port).then(|| port_free(req.ip, req.port));
    let command = in_container(
        halobox,
        backend,
        container,
        &with_env(&env.vars, &env.ray_start),
    );
    Ok(JoinReport {
        halobox_version: VERSION.into(),
        env,
        container: report,
        port_free,
        command,
    })
}

/// Starts Ray on this node as the report says; fails with Ray's own words.
pub fn join(report: &JoinReport, container: &str, engine: Option<String>) -> anyhow::Result<()> {
    let env = &report.env;
    if env.is_head && report.port_free == Some(false) {
        bail!(
            "port {} on {} is already in use, so the Ray head cannot start there\n  hint: stop what holds it (`ss -ltnp`), `halobox cluster down`, or choose another ray_port",
            port_of(&env.ray_start),
            env.ip
        );
    }
    if report.container.backend == NodeBackend::Host {
        let (prog, args) = env.ray_start.split_first().expect("ray start argv");
        let status = proc::command(prog)
            .args(args)
            .envs(env.vars.iter().map(|v| (&v.name, &v.value)))
            .env("RAY_USAGE_STATS_ENABLED", "0")
            .status()
            .map_err(|e| anyhow::anyhow!("cannot run {prog}: {e}\n  hint: install Ray (scripts/ray-venv.sh) or set `ray` in cluster.toml to its path"))?;
        if !status.success() {
            bail!("`ray start` failed on {} ({status})", env.ip);
        }
        return Ok(());
    }
    if !report.container.found {
        bail!(
            "there is no container {container}\n  hint: create it with `halobox refresh --name {container}`"
        );
    }
    let command = with_env(&env.vars, &env.ray_start);
    let code = crate::container::enter::run(Some(container), engine.as_deref(), &command)?;
    if code != 0 {
        bail!("`ray start` failed on {} in container {container}", env.ip);
    }
    Ok(())
}

fn port_of(ray_start: &[String]) -> String {
    ray_start
        .iter()
        .find_map(|a| a.strip_prefix("--port="))
        .unwrap_or("?")
        .to_string()
}

/// Runs `argv` (on the node) over ssh.
fn on_node(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    argv: &[String],
    timeout: Duration,
) -> anyhow::Result<Finished> {
    let ssh = crate::ssh::command(&node.ssh, &cfg.ssh_options, &shell::line(argv));
    Ok(proc::run(&ssh, timeout)?)
}

/// A failed remote command, in words that name the node.
fn node_error(node: &NodeConfig, what: &str, done: &Finished) -> String {
    let tail = last_lines(&done.output, 4);
    let code = done.status.and_then(|s| s.code());
    if crate::ssh::unreachable(code) {
        format!(
            "node {} ({}): cannot reach it over ssh: {tail}\n  hint: {}",
            node.label(),
            node.ssh,
            crate::ssh::reach_hint(&node.ssh)
        )
    } else if code == Some(127) {
        format!(
            "node {}: a command is missing there ({what}): {tail}\n  hint: install halobox (and Ray in the container), or set `halobox`/`ray` in cluster.toml to their paths",
            node.label()
        )
    } else if code.is_none() {
        format!(
            "node {}: {what} did not finish in time: {tail}",
            node.label()
        )
    } else {
        format!("node {}: {what} failed: {tail}", node.label())
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(n)..].join(" / ");
    if tail.is_empty() {
        "(no output)".into()
    } else {
        tail
    }
}

/// Runs `f` for every node at once; results in node order.
fn each_node<T: Send>(nodes: &[NodeConfig], f: impl Fn(&NodeConfig) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = nodes.iter().map(|n| s.spawn(|| f(n))).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("node thread"))
            .collect()
    })
}

/// Every node's `join --dry-run --json`.
pub fn reports(cfg: &ClusterConfig) -> Vec<Result<JoinReport, String>> {
    each_node(&cfg.nodes, |node| {
        let done = on_node(
            cfg,
            node,
            &plan::join_command(cfg, node, true),
            QUERY_TIMEOUT,
        )
        .map_err(|e| format!("node {}: {e:#}", node.label()))?;
        if done.status.is_some_and(|s| s.success()) {
            let line = done
                .stdout
                .lines()
                .rev()
                .find(|l| l.starts_with('{'))
                .unwrap_or("");
            serde_json::from_str(line).map_err(|e| {
                format!(
                    "node {}: its halobox answered in a form this one does not read ({e}): different versions? install the same halobox everywhere",
                    node.label()
                )
            })
        } else {
            Err(node_error(node, "`halobox cluster join --dry-run`", &done))
        }
    })
}

/// Asks the head's Ray for its node table, waiting up to `timeout_s` for `want` alive nodes.
pub fn ray_nodes(cfg: &ClusterConfig, want: usize, timeout_s: u64) -> anyhow::Result<RayNodes> {
    let head = cfg.head();
    let done = on_node(
        cfg,
        head,
        &plan::nodes_query(cfg, want, timeout_s, false),
        Duration::from_secs(timeout_s + 60),
    )?;
    if !done.status.is_some_and(|s| s.success()) {
        bail!("{}", node_error(head, "the Ray state query", &done));
    }
    parse_nodes(head, &done.stdout, &done.output)
}

fn parse_nodes(head: &NodeConfig, stdout: &str, output: &str) -> anyhow::Result<RayNodes> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).with_context(|| {
        format!(
            "node {}: the Ray state query printed no node table: {}",
            head.label(),
            last_lines(output, 4)
        )
    })
}

/// The Ray state query, started now and read later (it overlaps the
/// workers' start); dropping it stops it on the head too.
struct Waiter {
    proc: Proc,
    timeout: Duration,
}

impl Waiter {
    fn start(cfg: &ClusterConfig, want: usize, timeout_s: u64) -> anyhow::Result<Waiter> {
        // An API exec (podman, docker) gives the command no stdin to watch.
        let watch = !matches!(
            cfg.head().backend,
            NodeBackend::Podman | NodeBackend::Docker
        );
        let argv = plan::nodes_query(cfg, want, timeout_s, watch);
        let ssh = crate::ssh::command(&cfg.head().ssh, &cfg.ssh_options, &shell::line(&argv));
        Ok(Waiter {
            proc: Proc::spawn(&ssh)?,
            timeout: Duration::from_secs(timeout_s + 60),
        })
    }

    fn result(mut self, head: &NodeConfig) -> anyhow::Result<RayNodes> {
        let _ = self
            .proc
            .wait_for_line(|l| l.starts_with('{'), self.timeout);
        let stdout = self.proc.stdout();
        let status = self.proc.try_status();
        let output = self.proc.finish(Duration::from_secs(5));
        if !stdout.lines().any(|l| l.starts_with('{')) {
            let done = Finished {
                status,
                output,
                stdout,
            };
            bail!("{}", node_error(head, "the Ray state query", &done));
        }
        parse_nodes(head, &stdout, &output)
    }
}

/// What `up` recorded, for `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpState {
    /// The cluster file.
    pub config: String,
    /// Each node's env as applied, in node order.
    pub envs: Vec<NodeEnv>,
}

fn state_path() -> Option<std::path::PathBuf> {
    dirs::state_dir().map(|d| d.join("halobox/cluster-up.json"))
}

/// The env `up` applied with `config`, when recorded.
pub fn load_state(config: &Path) -> Option<UpState> {
    let text = std::fs::read_to_string(state_path()?).ok()?;
    let s: UpState = serde_json::from_str(&text).ok()?;
    (s.config == config.display().to_string()).then_some(s)
}

fn save_state(config: &Path, envs: Vec<NodeEnv>) {
    if let Some(p) = state_path() {
        let s = UpState {
            config: config.display().to_string(),
            envs,
        };
        let _ = std::fs::create_dir_all(p.parent().expect("parent"));
        let _ = std::fs::write(p, serde_json::to_string_pretty(&s).expect("serialises"));
    }
}

fn print_findings(findings: &[Finding]) {
    for f in findings {
        let level = match f.level {
            Level::Pass => "PASS",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        };
        let node = f
            .node
            .as_ref()
            .map(|n| format!(" [{n}]"))
            .unwrap_or_default();
        println!("  {level} {}{node}: {}", f.check, f.message);
    }
}

/// `cluster up`: preflight, head, workers, wait for every node in Ray.
pub fn up(
    cfg: &ClusterConfig,
    config_path: &Path,
    dry_run: bool,
    timeout_s: u64,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    println!("preflight of {} node(s):", cfg.nodes.len());
    let reports = reports(cfg);
    let findings = plan::preflight(cfg, &reports, VERSION);
    print_findings(&findings);
    let failed: Vec<&Finding> = findings.iter().filter(|f| f.level == Level::Fail).collect();
    if !failed.is_empty() {
        let named: Vec<String> = failed
            .iter()
            .map(|f| match &f.node {
                Some(n) => format!("{n}: {}", f.check),
                None => f.check.clone(),
            })
            .collect();
        bail!(
            "preflight failed ({}); nothing was started",
            named.join(", ")
        );
    }
    let reports: Vec<JoinReport> = reports
        .into_iter()
        .map(|r| r.expect("preflight passed"))
        .collect();
    if dry_run {
        for (node, r) in cfg.nodes.iter().zip(&reports) {
            println!(
                "\nnode {} ({}){}: transport {}: {}",
                node.label(),
                node.ip,
                if r.env.is_head { ", head" } else { "" },
                r.env.transport,
                r.env.reason
            );
            for a in r.env.assignments() {
                println!("  {a}");
            }
            println!("  on the node: {}", shell::line(&r.command));
            println!(
                "  from here:   {}",
                shell::line(&crate::ssh::command(
                    &node.ssh,
                    &cfg.ssh_options,
                    &shell::line(&plan::join_command(cfg, node, false))
                ))
            );
        }
        println!(
            "\nthen wait up to {timeout_s} s until Ray's GCS on {}:{} lists {} alive node(s). Nothing was started (--dry-run).",
            cfg.head().ip,
            cfg.ray_port,
            cfg.nodes.len()
        );
        return Ok(());
    }
    let start = |node: &NodeConfig| -> Result<(), String> {
        let done = on_node(
            cfg,
            node,
            &plan::join_command(cfg, node, false),
            JOIN_TIMEOUT,
        )
        .map_err(|e| format!("node {}: {e:#}", node.label()))?;
        if done.status.is_some_and(|s| s.success()) {
            Ok(())
        } else {
            Err(node_error(node, "`halobox cluster join`", &done))
        }
    };
    let cleanup =
        "\n  hint: the nodes already started keep running; `halobox cluster down` stops them";
    let head = cfg.head();
    let t = Instant::now();
    start(head).map_err(|e| anyhow::anyhow!("starting the Ray head failed: {e}{cleanup}"))?;
    println!(
        "head {} ({}) started in {:.1} s",
        head.label(),
        head.ip,
        t.elapsed().as_secs_f64()
    );
    let waiter = Waiter::start(cfg, cfg.nodes.len(), timeout_s)?;
    let workers = &cfg.nodes[1..];
    if !workers.is_empty() {
        let t = Instant::now();
        let results = each_node(workers, start);
        let errors: Vec<String> = results.into_iter().filter_map(Result::err).collect();
        if !errors.is_empty() {
            bail!(
                "{} of {} worker(s) failed to start:\n  {}{cleanup}",
                errors.len(),
                workers.len(),
                errors.join("\n  ")
            );
        }
        println!(
            "{} worker(s) started in {:.1} s",
            workers.len(),
            t.elapsed().as_secs_f64()
        );
    }
    let t = Instant::now();
    let nodes = waiter.result(head)?;
    let alive: Vec<&plan::RayNode> = nodes.alive().collect();
    if alive.len() < cfg.nodes.len() {
        let missing: Vec<String> = cfg
            .nodes
            .iter()
            .filter(|n| !alive.iter().any(|a| a.ip == n.ip.to_string()))
            .map(|n| format!("{} ({})", n.label(), n.ip))
            .collect();
        bail!(
            "after {timeout_s} s Ray lists {} of {} node(s); missing: {}{}{cleanup}",
            alive.len(),
            cfg.nodes.len(),
            missing.join(", "),
            nodes
                .error
                .map(|e| format!(" (last GCS error: {e})"))
                .unwrap_or_default()
        );
    }
    save_state(config_path, reports.into_iter().map(|r| r.env).collect());
    println!(
        "Ray lists all {} node(s) ({:.1} s); cluster up in {:.1} s",
        cfg.nodes.len(),
        t.elapsed().as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One node in `cluster status`.
#[derive(Debug, Clone, Serialize)]
pub struct NodeStatus {
    /// Name.
    pub name: String,
    /// Data-plane address.
    pub ip: Ipv4Addr,
    /// Ray's view of it (absent when Ray does not list it).
    pub ray: Option<plan::RayNode>,
    /// The env `up` applied (absent when `up` did not run from here).
    pub env: Option<NodeEnv>,
}

/// `cluster status`'s document.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Ray's GCS address.
    pub gcs: String,
    /// Alive nodes in Ray / nodes in cluster.toml.
    pub alive: usize,
    /// Per node of cluster.toml.
    pub nodes: Vec<NodeStatus>,
    /// Nodes Ray lists that cluster.toml does not.
    pub unknown: Vec<plan::RayNode>,
    /// The GCS could not be read.
    pub error: Option<String>,
}

/// `cluster status`.
pub fn status(cfg: &ClusterConfig, config_path: &Path) -> anyhow::Result<Status> {
    let nodes = ray_nodes(cfg, 0, 5)?;
    let state = load_state(config_path);
    let alive: Vec<plan::RayNode> = nodes.alive().cloned().collect();
    Ok(Status {
        gcs: format!("{}:{}", cfg.head().ip, cfg.ray_port),
        alive: alive.len(),
        nodes: cfg
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeStatus {
                name: n.label().into(),
                ip: n.ip,
                ray: alive.iter().find(|r| r.ip == n.ip.to_string()).cloned(),
                env: state.as_ref().and_then(|s| s.envs.get(i).cloned()),
            })
            .collect(),
        unknown: alive
            .iter()
            .filter(|r| !cfg.nodes.iter().any(|n| r.ip == n.ip.to_string()))
            .cloned()
            .collect(),
        error: nodes.error,
    })
}

/// What `down` did on a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DownResult {
    /// Name.
    pub name: String,
    /// `stopped`, `unreachable` or `failed`.
    pub outcome: String,
    /// Details.
    pub detail: String,
}

/// `cluster down`: `ray stop` on every node, each result reported.
pub fn down(cfg: &ClusterConfig) -> Vec<DownResult> {
    each_node(&cfg.nodes, |node| {
        let res = |outcome: &str, detail: String| DownResult {
            name: node.label().into(),
            outcome: outcome.into(),
            detail,
        };
        match on_node(cfg, node, &plan::stop_command(cfg, node), QUERY_TIMEOUT) {
            Err(e) => res("failed", format!("{e:#}")),
            Ok(done) if done.status.is_some_and(|s| s.success()) => {
                res("stopped", stop_summary(&done.output))
            }
            Ok(done) => {
                let unreachable = crate::ssh::unreachable(done.status.and_then(|s| s.code()));
                res(
                    if unreachable { "unreachable" } else { "failed" },
                    node_error(node, "`ray stop`", &done),
                )
            }
        }
    })
}

/// `ray stop`'s verdict without its log prefixes ("Stopped all 5 Ray processes.").
fn stop_summary(output: &str) -> String {
    let last = last_lines(output, 1);
    last.rsplit(" -- ")
        .next()
        .unwrap_or(&last)
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ray_stop_summary() {
        let out = "2026-01-01 10:00:00,000\tINFO scripts.py:1451 -- 1/1 stopped.2026-01-01 10:00:00,001\tSUCC scripts.py:1496 -- Stopped all 5 Ray processes.\n";
        assert_eq!(stop_summary(out), "Stopped all 5 Ray processes.");
        assert_eq!(stop_summary(""), "(no output)");
    }
}
