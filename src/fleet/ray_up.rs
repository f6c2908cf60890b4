//! Ray's executor of `cluster up`, `cluster status` and `cluster down`
//! over every node (llama.cpp's is [`super::rpc_up`]): the containers
//! started, the preflight over every node's report, the head then the
//! workers joined (`halobox cluster join` in each container, the token on
//! ssh stdin), every node seen alive in the head's table; the up's record
//! kept for `down` and for what the next `up` finds already there.

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde::{Deserialize, Serialize};

use crate::cluster::auth;
use crate::cluster::config::{ClusterConfig, NodeBackend, NodeConfig};
use crate::cluster::env::NodeEnv;
use crate::cluster::join::VERSION;
use crate::cluster::plan::{self, JoinReport, RayNodes};
use crate::cluster::preflight::{self, Finding, Level};
use crate::cluster::resume;
use crate::cluster::run::{
    QUERY_TIMEOUT, each_node, masters, node_argv, on_node, parse_nodes, ray_nodes, remote_node,
    reports, reports_of,
};
use crate::proc::{Finished, Proc, WaitError};
use crate::remote::{self, Failure, Masters};
use crate::shell;

/// How long one node's `join` (Ray start included) may take over ssh.
const JOIN_TIMEOUT: Duration = Duration::from_secs(180);

/// The Ray state query, started now and read later (it overlaps the
/// workers' start); dropping it stops it on the head too.
struct Waiter {
    node: remote::Node,
    proc: Proc,
    timeout: Duration,
}

impl Waiter {
    fn start(
        cfg: &ClusterConfig,
        masters: &Masters,
        want: usize,
        timeout_s: u64,
        mode: auth::Mode,
    ) -> anyhow::Result<Waiter> {
        // An API exec (podman, docker) gives the command no stdin to watch;
        // the guard stops what runs on the host either way.
        let watch = !matches!(
            cfg.head().backend,
            NodeBackend::Podman | NodeBackend::Docker
        );
        let node = remote_node(cfg, cfg.head()).through(masters);
        let proc = node.spawn(&plan::nodes_query(
            cfg,
            want,
            timeout_s,
            watch,
            Some(mode),
            None,
        ))?;
        Ok(Waiter {
            node,
            proc,
            timeout: Duration::from_secs(timeout_s.saturating_add(60)),
        })
    }

    fn result(mut self, head: &NodeConfig) -> anyhow::Result<RayNodes> {
        let waited = self
            .proc
            .wait_for_line(|l| l.starts_with('{'), self.timeout);
        let done = match waited {
            Err(WaitError::Timeout) => Finished {
                timed_out: Some(self.timeout),
                ..self.proc.wait(remote::STOP_GRACE)
            },
            _ => self.proc.complete(remote::STOP_GRACE, remote::STOP_GRACE),
        };
        if !done.stdout.lines().any(|l| l.starts_with('{')) {
            bail!("{}", self.node.error("the Ray state query", &done));
        }
        parse_nodes(head, &done.stdout, &done.output)
    }
}

/// `cluster join` as `up` starts Ray with it on `node` (the token, in
/// token mode, comes on stdin).
fn start_command(cfg: &ClusterConfig, node: &NodeConfig, mode: auth::Mode) -> Vec<String> {
    let mut argv = plan::join_command(cfg, node, false);
    argv.push(mode.join_flag().into());
    argv
}

/// The `--dry-run` line about Ray's authentication (never the token).
fn auth_summary(mode: auth::Mode, token_file: &Path) -> String {
    match mode {
        auth::Mode::Token => format!(
            "Ray token authentication: {}=token; the cluster's token is kept in {} (0600; made at the first `up`), sent to each node on ssh stdin into {} (0600), which {} names for Ray and for the drivers on the head",
            auth::MODE_VAR,
            token_file.display(),
            auth::NODE_TOKEN_SH,
            auth::TOKEN_PATH_VAR
        ),
        auth::Mode::Insecure => format!(
            "Ray WITHOUT authentication ({}=disabled, --insecure-ray)",
            auth::MODE_VAR
        ),
    }
}

/// `halobox enter NAME -- true` on `node`: starts its stopped container.
fn start_container_argv(cfg: &ClusterConfig, node: &NodeConfig) -> Vec<String> {
    plan::in_container(
        &cfg.halobox,
        node.backend,
        &node.container,
        &["true".to_string()],
    )
}

/// Starts the containers of `stopped` (each on its node, at once); an
/// error naming the first node whose container did not start.
fn start_containers(
    cfg: &ClusterConfig,
    masters: &Masters,
    stopped: &[resume::Stopped],
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let nodes: Vec<NodeConfig> = stopped.iter().map(|s| cfg.nodes[s.index].clone()).collect();
    let results = each_node(&nodes, |node| {
        on_node(
            cfg,
            masters,
            node,
            "`halobox enter`",
            &start_container_argv(cfg, node),
            JOIN_TIMEOUT,
        )
    });
    for ((node, s), res) in nodes.iter().zip(stopped).zip(results) {
        match res {
            Ok(_) => writeln!(
                out,
                "node {} ({}): container {} was {}: started",
                node.label(),
                node.ip,
                node.container,
                s.state
            )?,
            Err(e) => bail!(
                "node {} ({}): its container {} is {} and did not start: {e}\n  hint: `halobox enter {} -- true` on that node shows why; `halobox refresh --name {}` there makes it again; nothing was started",
                node.label(),
                node.ip,
                node.container,
                s.state,
                node.container,
                node.container
            ),
        }
    }
    Ok(())
}

/// One look at the head's GCS with this cluster's driver: its node table
/// when this cluster's Ray already runs there (in token mode: a gcs_server
/// of this user's, of the Ray `session` that `up` recorded); else why not,
/// when it sent nothing because the port's holder is not proven ours.
fn running_ray(
    cfg: &ClusterConfig,
    masters: &Masters,
    mode: auth::Mode,
    session: Option<&str>,
) -> Result<RayNodes, Option<String>> {
    match query(cfg, masters, mode, session) {
        Some(n) if n.not_sent().is_some() => Err(n.error),
        Some(n) if n.error.is_none() && resume::head_alive(cfg, &n) => Ok(n),
        _ => Err(None),
    }
}

/// One look at the head's GCS by a driver in `mode` (`None`: no answer).
fn query(
    cfg: &ClusterConfig,
    masters: &Masters,
    mode: auth::Mode,
    session: Option<&str>,
) -> Option<RayNodes> {
    let head = cfg.head();
    let done = on_node(
        cfg,
        masters,
        head,
        "the Ray state query",
        &plan::nodes_query(cfg, 0, 5, false, Some(mode), session),
        QUERY_TIMEOUT,
    )
    .ok()?;
    parse_nodes(head, &done.stdout, &done.output).ok()
}

/// The Ray that holds the head's port, when `up` may keep it: this
/// cluster's (proven before the token goes to it, [`running_ray`]), of the
/// session `up` recorded, and allowed by [`resume::keep`]; else `None`,
/// after saying why (the preflight's port check then fails).
fn adopt(
    cfg: &ClusterConfig,
    masters: &Masters,
    mode: auth::Mode,
    config_path: &Path,
    reports: &[Result<JoinReport, String>],
    out: &mut dyn Write,
) -> std::io::Result<Option<RayNodes>> {
    let head = cfg.head();
    let last = load_state(config_path);
    let session = last.as_ref().and_then(|l| l.ray_session.as_deref());
    let ray = match running_ray(cfg, masters, mode, session) {
        Ok(ray) => ray,
        Err(why) => {
            if let Some(why) = why {
                writeln!(
                    out,
                    "the head {}'s port {}:{} is not proven this cluster's Ray: {why}",
                    head.label(),
                    head.ip,
                    cfg.ray_port
                )?;
            }
            return Ok(None);
        }
    };
    let open = mode == auth::Mode::Token
        && query(cfg, masters, auth::Mode::Insecure, None)
            .is_some_and(|n| n.error.is_none() && resume::head_alive(cfg, &n));
    let envs = last.as_ref().map(|l| &l.envs[..]);
    match resume::keep(cfg, &ray, open, mode, envs, reports) {
        Ok(()) => Ok(Some(ray)),
        Err(why) => {
            writeln!(
                out,
                "Ray already runs on the head {} ({}:{}), but is not kept: {why}",
                head.label(),
                head.ip,
                cfg.ray_port
            )?;
            Ok(None)
        }
    }
}

/// What `up` says of a Ray that already runs on the head.
fn kept_line(cfg: &ClusterConfig, join: &[&NodeConfig]) -> String {
    let head = cfg.head();
    let what = if join.is_empty() {
        "every node is in it already".to_string()
    } else {
        format!(
            "{} node(s) join it: {}",
            join.len(),
            join.iter()
                .map(|n| format!("{} ({})", n.label(), n.ip))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "Ray already runs on the head {} ({}:{}) and is kept; {what}",
        head.label(),
        head.ip,
        cfg.ray_port
    )
}

/// What `up` recorded, for `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpState {
    /// The cluster file.
    pub config: String,
    /// Each node's env as applied, in node order.
    pub envs: Vec<NodeEnv>,
    /// The Ray session of the head's GCS that `up` started or kept (in
    /// token mode): another one is not kept by the next `up`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_session: Option<String>,
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

fn save_state(config: &Path, envs: Vec<NodeEnv>, ray_session: Option<String>) {
    if let Some(p) = state_path() {
        let s = UpState {
            config: config.display().to_string(),
            envs,
            ray_session,
        };
        let _ = std::fs::create_dir_all(p.parent().expect("parent"));
        let _ = std::fs::write(p, serde_json::to_string_pretty(&s).expect("serialises"));
    }
}

fn print_findings(out: &mut dyn Write, findings: &[Finding]) -> std::io::Result<()> {
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
        writeln!(out, "  {level} {}{node}: {}", f.check, f.message)?;
    }
    Ok(())
}

/// `cluster up`: preflight, head, workers, wait for every node in Ray;
/// its progress goes to `out` (the caller warns about
/// [`auth::Mode::Insecure`]: [`auth::INSECURE_WARNING`]). Returns each node's env (as it would be
/// applied with `dry_run`).
pub fn up(
    cfg: &ClusterConfig,
    config_path: &Path,
    dry_run: bool,
    timeout_s: u64,
    mode: auth::Mode,
    out: &mut dyn Write,
) -> anyhow::Result<Vec<NodeEnv>> {
    let t0 = Instant::now();
    let token_file = auth::cluster_token_path(config_path);
    writeln!(out, "preflight of {} node(s):", cfg.nodes.len())?;
    // One ssh connection per node for the whole run (closed when `up`
    // returns, however it returns).
    let masters = masters(cfg);
    let mut reports = reports(cfg, &masters);
    let stopped = resume::stopped(&reports);
    if !dry_run && !stopped.is_empty() {
        start_containers(cfg, &masters, &stopped, out)?;
        report_again(cfg, &masters, &stopped, &mut reports);
    }
    let running = keep_running(cfg, &masters, mode, config_path, &mut reports, out)?;
    let join = resume::to_join(cfg, running.as_ref());
    if dry_run {
        print_stopped(cfg, &stopped, out)?;
    }
    let reports = pass_preflight(cfg, reports, mode, out)?;
    if dry_run {
        if running.is_some() {
            writeln!(out, "\n{}", kept_line(cfg, &join))?;
        }
        print_node_plans(cfg, &reports, &join, mode, out)?;
        writeln!(out, "\n{}", auth_summary(mode, &token_file))?;
        writeln!(
            out,
            "\nthen wait up to {timeout_s} s until Ray's GCS on {}:{} lists {} alive node(s). Nothing was started (--dry-run).",
            cfg.head().ip,
            cfg.ray_port,
            cfg.nodes.len()
        )?;
        return Ok(reports.into_iter().map(|r| r.env).collect());
    }
    let token = match mode {
        auth::Mode::Token => Some(auth::load_or_create(&token_file)?),
        auth::Mode::Insecure => None,
    };
    let starter = Starter {
        cfg,
        masters: &masters,
        mode,
        token: token.as_ref(),
    };
    let head = cfg.head();
    // The state query starts with the head, so Python and Ray's modules
    // load while Ray starts rather than beside the workers (it polls the
    // head's port until the GCS answers).
    let waiter = Waiter::start(cfg, &masters, cfg.nodes.len(), timeout_s, mode)?;
    if running.is_some() {
        writeln!(out, "{}", kept_line(cfg, &join))?;
    } else {
        starter.start_head(out)?;
    }
    starter.start_workers(&join, out)?;
    let t = Instant::now();
    let nodes = waiter.result(head)?;
    all_alive(cfg, &nodes, timeout_s)?;
    let envs: Vec<NodeEnv> = reports.into_iter().map(|r| r.env).collect();
    save_state(config_path, envs.clone(), nodes.gcs.and_then(|g| g.session));
    writeln!(
        out,
        "Ray lists all {} node(s) ({:.1} s); cluster up in {:.1} s",
        cfg.nodes.len(),
        t.elapsed().as_secs_f64(),
        t0.elapsed().as_secs_f64()
    )?;
    Ok(envs)
}

/// What `up` adds to an error once nodes may have started.
const CLEANUP: &str =
    "\n  hint: the nodes already started keep running; `halobox cluster down` stops them";

/// Replaces the reports of the `stopped` nodes (their containers just
/// started) with new ones.
fn report_again(
    cfg: &ClusterConfig,
    masters: &Masters,
    stopped: &[resume::Stopped],
    reports: &mut [Result<JoinReport, String>],
) {
    for s in stopped {
        let node = std::slice::from_ref(&cfg.nodes[s.index]);
        if let Some(r) = reports_of(cfg, node, masters).pop() {
            reports[s.index] = r;
        }
    }
}

/// The Ray kept when the head's port is taken by this cluster's Ray
/// ([`adopt`]; its port then is no finding); `None` when it is free or
/// taken by something else (the preflight names it).
fn keep_running(
    cfg: &ClusterConfig,
    masters: &Masters,
    mode: auth::Mode,
    config_path: &Path,
    reports: &mut [Result<JoinReport, String>],
    out: &mut dyn Write,
) -> std::io::Result<Option<RayNodes>> {
    let running = match reports.first() {
        Some(Ok(r)) if r.env.is_head && r.port_free == Some(false) => {
            adopt(cfg, masters, mode, config_path, reports, out)?
        }
        _ => None,
    };
    if running.is_some()
        && let Some(Ok(r)) = reports.first_mut()
    {
        r.port_free = None;
    }
    Ok(running)
}

/// The `--dry-run` lines of the containers `up` would start first.
fn print_stopped(
    cfg: &ClusterConfig,
    stopped: &[resume::Stopped],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for s in stopped {
        let node = &cfg.nodes[s.index];
        writeln!(
            out,
            "node {} ({}): container {} is {}: started first (`{}` there)",
            node.label(),
            node.ip,
            node.container,
            s.state,
            shell::line(&start_container_argv(cfg, node))
        )?;
    }
    Ok(())
}

/// Prints the preflight's findings; every node's report once none fails,
/// else the error naming the failed checks.
fn pass_preflight(
    cfg: &ClusterConfig,
    reports: Vec<Result<JoinReport, String>>,
    mode: auth::Mode,
    out: &mut dyn Write,
) -> anyhow::Result<Vec<JoinReport>> {
    let findings = preflight::preflight(cfg, &reports, VERSION, mode);
    print_findings(out, &findings)?;
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
    Ok(reports
        .into_iter()
        .map(|r| r.expect("preflight passed"))
        .collect())
}

/// The `--dry-run` plan of each node that joins: its transport, env and
/// the command that starts it there.
fn print_node_plans(
    cfg: &ClusterConfig,
    reports: &[JoinReport],
    join: &[&NodeConfig],
    mode: auth::Mode,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for (node, r) in cfg.nodes.iter().zip(reports) {
        if !join.iter().any(|j| j.ip == node.ip) {
            continue;
        }
        writeln!(
            out,
            "\nnode {} ({}){}: transport {}: {}",
            node.label(),
            node.ip,
            if r.env.is_head { ", head" } else { "" },
            r.env.transport,
            r.env.reason
        )?;
        for a in r.env.assignments() {
            writeln!(out, "  {a}")?;
        }
        writeln!(
            out,
            "  per node (vLLM must not copy the head's): {}",
            r.env.per_node.join(" ")
        )?;
        writeln!(out, "  on the node: {}", shell::line(&r.command))?;
        writeln!(
            out,
            "  from here:   {}",
            shell::line(&node_argv(cfg, node, &start_command(cfg, node, mode)))
        )?;
    }
    Ok(())
}

/// Starts Ray on nodes: `cluster join` over each node's master
/// connection, with the cluster's token on its stdin in token mode.
struct Starter<'a> {
    /// The cluster.
    cfg: &'a ClusterConfig,
    /// The run's ssh connections.
    masters: &'a Masters,
    /// Ray's authentication.
    mode: auth::Mode,
    /// The cluster's token (token mode).
    token: Option<&'a auth::Token>,
}

impl Starter<'_> {
    /// Starts Ray on `node`: its stale-Ray notes (`cluster join` stopped
    /// what was left of a cluster that is gone), named by the node.
    fn start(&self, node: &NodeConfig) -> Result<Vec<String>, String> {
        let what = "`halobox cluster join`";
        let argv = start_command(self.cfg, node, self.mode);
        let n = remote_node(self.cfg, node).through(self.masters);
        match self.token {
            Some(t) => n.run_ok_with_line(what, &argv, t.secret(), JOIN_TIMEOUT),
            None => n.run_ok(what, &argv, JOIN_TIMEOUT),
        }
        .map(|done| {
            done.output
                .lines()
                .filter(|l| l.starts_with(crate::cluster::join::STALE_NOTE))
                .map(|l| format!("node {} ({}): {l}", node.label(), node.ip))
                .collect()
        })
        .map_err(|e| e.to_string())
    }

    /// Starts the head, then says how long it took.
    fn start_head(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let head = self.cfg.head();
        let t = Instant::now();
        let notes = self
            .start(head)
            .map_err(|e| anyhow::anyhow!("starting the Ray head failed: {e}{CLEANUP}"))?;
        for n in notes {
            writeln!(out, "{n}")?;
        }
        writeln!(
            out,
            "head {} ({}) started in {:.1} s",
            head.label(),
            head.ip,
            t.elapsed().as_secs_f64()
        )?;
        Ok(())
    }

    /// Starts every node of `join` but the head at once; an error names
    /// each that failed.
    fn start_workers(&self, join: &[&NodeConfig], out: &mut dyn Write) -> anyhow::Result<()> {
        let head = self.cfg.head();
        let workers: Vec<NodeConfig> = join
            .iter()
            .filter(|n| n.ip != head.ip)
            .map(|n| (*n).clone())
            .collect();
        if workers.is_empty() {
            return Ok(());
        }
        let t = Instant::now();
        let results = each_node(&workers, |n| self.start(n));
        let mut errors = Vec::new();
        for r in results {
            match r {
                Ok(notes) => notes.iter().try_for_each(|n| writeln!(out, "{n}"))?,
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            bail!(
                "{} of {} worker(s) failed to start:\n  {}{CLEANUP}",
                errors.len(),
                workers.len(),
                errors.join("\n  ")
            );
        }
        writeln!(
            out,
            "{} worker(s) started in {:.1} s",
            workers.len(),
            t.elapsed().as_secs_f64()
        )?;
        Ok(())
    }
}

/// An error naming the nodes Ray does not list alive after `timeout_s`
/// (with the GCS's last error).
fn all_alive(cfg: &ClusterConfig, nodes: &RayNodes, timeout_s: u64) -> anyhow::Result<()> {
    let alive: Vec<&plan::RayNode> = nodes.alive().collect();
    if alive.len() >= cfg.nodes.len() {
        return Ok(());
    }
    let missing: Vec<String> = cfg
        .nodes
        .iter()
        .filter(|n| !alive.iter().any(|a| a.ip == n.ip.to_string()))
        .map(|n| format!("{} ({})", n.label(), n.ip))
        .collect();
    bail!(
        "after {timeout_s} s Ray lists {} of {} node(s); missing: {}{}{CLEANUP}",
        alive.len(),
        cfg.nodes.len(),
        missing.join(", "),
        nodes
            .error
            .as_ref()
            .map(|e| format!(" (last GCS error: {e})"))
            .unwrap_or_default()
    );
}

/// One node in `cluster status`.
#[derive(Debug, Clone, Serialize)]
pub struct NodeStatus {
    /// Name.
    pub name: String,
    /// Data-plane address.
    pub ip: Ipv4Addr,
    /// Ray's view of it: alive, or listed alive by the GCS with a raylet
    /// that refuses the head (`unreachable`); absent when Ray does not list
    /// it alive.
    pub ray: Option<plan::RayNode>,
    /// The env `up` applied (absent when `up` did not run from here).
    pub env: Option<NodeEnv>,
    /// The image digest its container runs (its `dev.halobox.image-digest`
    /// label; none without a container).
    pub image_digest: Option<String>,
    /// Why the node could not be asked which image it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_error: Option<String>,
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

/// Removes the record of the `up` with `config` (`cluster down` stopped
/// its Ray: a Ray found on the head's port later is not that one).
fn forget_state(config: &Path) {
    if let (Some(p), Some(_)) = (state_path(), load_state(config)) {
        let _ = std::fs::remove_file(p);
    }
}

/// `cluster status`.
pub fn status(cfg: &ClusterConfig, config_path: &Path) -> anyhow::Result<Status> {
    let nodes = ray_nodes(cfg, 0, 5)?;
    let state = load_state(config_path);
    // Which image each node's container runs, asked of every node at once.
    let images: Vec<Result<Option<String>, String>> = reports(cfg, &Masters::default())
        .into_iter()
        .map(|r| r.map(|j| j.container.image_digest))
        .collect();
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
                ray: alive
                    .iter()
                    .find(|r| r.ip == n.ip.to_string())
                    .or_else(|| {
                        nodes
                            .nodes
                            .iter()
                            .find(|r| r.ip == n.ip.to_string() && r.unreachable)
                    })
                    .cloned(),
                env: state.as_ref().and_then(|s| s.envs.get(i).cloned()),
                image_digest: images.get(i).cloned().and_then(Result::ok).flatten(),
                image_error: images.get(i).cloned().and_then(Result::err),
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

/// [`down`] of the cluster `config_path` holds, and the record of the `up`
/// that started its Ray forgotten once the head's Ray stopped.
pub fn down_and_forget(cfg: &ClusterConfig, config_path: &Path) -> Vec<DownResult> {
    let results = down(cfg);
    if results.first().is_some_and(|h| h.outcome == "stopped") {
        forget_state(config_path);
    }
    results
}

/// `cluster down`: `ray stop` on every node, each result reported.
pub fn down(cfg: &ClusterConfig) -> Vec<DownResult> {
    each_node(&cfg.nodes, |node| {
        let res = |outcome: &str, detail: String| DownResult {
            name: node.label().into(),
            outcome: outcome.into(),
            detail,
        };
        match on_node(
            cfg,
            &Masters::default(),
            node,
            "`ray stop`",
            &plan::stop_command(cfg, node),
            QUERY_TIMEOUT,
        ) {
            Ok(done) => res("stopped", stop_summary(&done.output)),
            Err(e) => res(
                if e.failure == Failure::Unreachable {
                    "unreachable"
                } else {
                    "failed"
                },
                e.message,
            ),
        }
    })
}

/// `ray stop`'s verdict without its log prefixes ("Stopped all 5 Ray processes.").
fn stop_summary(output: &str) -> String {
    let last = remote::tail(output, 1);
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
