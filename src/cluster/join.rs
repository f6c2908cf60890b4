//! `cluster join` on this node: its report (what `up`'s preflight reads)
//! and Ray's start. With the `host` backend both happen in this process:
//! the env and the [`view`] from its own facts, vLLM's list
//! of per-node variables written, `ray start` run. With a container, the
//! engine says whether the container is there, running and made with
//! halobox inside; then halobox runs *inside* it as `cluster join
//! --backend host`, so the env, the view, the vLLM file and Ray are the
//! container's own, as its user has them.

use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::Stdio;

use std::time::Duration;

use anyhow::bail;

use super::auth::{self, Token};
use super::carry;
use super::config::NodeBackend;
use super::env::{self, EnvRequest};
use super::plan::{self, ContainerReport, JoinReport, in_container, with_env};
use super::view;
use crate::container::binds;
use crate::host::HostFacts;
use crate::host::limits::LimitValue;

/// This halobox's version (compared across nodes and with the one inside).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// How long halobox inside the container may take to report.
const INSIDE_TIMEOUT: Duration = Duration::from_secs(60);

/// What `join` is asked for on this node.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// The env request (CPUs resolved).
    pub env: EnvRequest,
    /// Where Ray runs.
    pub backend: NodeBackend,
    /// The container (container backends).
    pub container: String,
    /// `--engine`.
    pub engine: Option<String>,
    /// The `halobox` command on this node (as printed).
    pub halobox: String,
    /// Check that the head's port is free (not for snapshots).
    pub check_port: bool,
    /// How Ray authenticates (a start; `None` for a report).
    pub auth: Option<RayAuth>,
}

/// How a node's Ray authenticates.
#[derive(Debug, Clone, PartialEq)]
pub enum RayAuth {
    /// Token mode, with the cluster's token (read from stdin).
    Token(Token),
    /// No authentication (`--insecure-ray`).
    Insecure,
}

impl RayAuth {
    /// The `cluster join` flag that asks for this (the token itself comes on stdin).
    pub fn flag(&self) -> &'static str {
        match self {
            RayAuth::Token(_) => auth::Mode::Token.join_flag(),
            RayAuth::Insecure => auth::Mode::Insecure.join_flag(),
        }
    }
}

/// Whether `ip:port` can be bound (nothing listens there).
pub fn port_free(ip: Ipv4Addr, port: u16) -> bool {
    !matches!(TcpListener::bind((ip, port)), Err(e) if e.kind() == std::io::ErrorKind::AddrInUse)
}

/// The real path of this halobox binary.
fn own_exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| anyhow::anyhow!("cannot find this halobox binary: {e}"))
}

/// Where this node's Ray would run, as the node (and its engine) sees it.
pub fn container_report(facts: &HostFacts, req: &JoinRequest) -> anyhow::Result<ContainerReport> {
    let node_kfd = facts.gpu.kfd.is_some();
    let node_infiniband: Vec<String> = facts
        .rdma
        .dev_nodes
        .iter()
        .map(|d| d.path.clone())
        .collect();
    let mut report = ContainerReport {
        backend: req.backend,
        name: None,
        found: true,
        state: None,
        image_digest: None,
        memlock: facts.limits.memlock.map(|l| match l.soft {
            LimitValue::Unlimited => -1,
            LimitValue::Finite(v) => i64::try_from(v).unwrap_or(i64::MAX),
        }),
        kfd: node_kfd,
        node_kfd,
        node_infiniband,
        halobox: None,
    };
    if req.backend == NodeBackend::Host {
        return Ok(report);
    }
    let name = req.container.as_str();
    let info = crate::engine::block_on(async {
        let engine = crate::engine::connect(req.engine.as_deref()).await?;
        anyhow::Ok(engine.container(name).await?)
    })??;
    report.name = Some(name.into());
    report.memlock = None;
    report.kfd = false;
    let Some(c) = info else {
        report.found = false;
        return Ok(report);
    };
    let shares_dev = matches!(req.backend, NodeBackend::Toolbox | NodeBackend::Distrobox);
    report.state = Some(c.state.clone());
    report.image_digest = c.labels.get(crate::container::spec::LABEL_DIGEST).cloned();
    report.memlock = c.memlock;
    // toolbox and distrobox bind the host's /dev.
    report.kfd = c.devices.iter().any(|d| d.starts_with("/dev/kfd")) || (shares_dev && node_kfd);
    if !shares_dev {
        crate::container::staged::refresh_if_present();
    }
    report.halobox =
        binds::existing_inside_path(&c.labels, Some(&req.backend.to_string()), &own_exe()?);
    Ok(report)
}

/// This node's report (what `join --dry-run --json` prints). With a
/// container, `look_inside` also runs halobox's own report inside it (the
/// dry run, which `up`'s preflight reads); a start leaves it out, as the
/// `join` it runs inside makes the same checks before Ray starts.
pub fn report(
    facts: &HostFacts,
    req: &JoinRequest,
    look_inside: bool,
) -> anyhow::Result<JoinReport> {
    let env = env::plan(facts, &req.env).map_err(|e| anyhow::anyhow!("{e}"))?;
    let prefix_len = plan::prefix_len(facts, req.env.ip);
    // A snapshot (`check_port` false) has no engine to ask about its container.
    if !req.check_port && req.backend.is_container() {
        let command = in_container(
            &req.halobox,
            req.backend,
            &req.container,
            &with_env(&env.vars, &env.ray_start),
        );
        return Ok(JoinReport {
            command,
            not_inspected: Some(plan::snapshot_not_inspected(req.backend, &req.container)),
            ..JoinReport::new(
                env,
                ContainerReport::unknown(req.backend, &req.container),
                prefix_len,
            )
        });
    }
    let container = container_report(facts, req)?;
    if req.backend == NodeBackend::Host {
        let port_free =
            (env.is_head && req.check_port).then(|| port_free(req.env.ip, req.env.port));
        let (ray_version, ray_error) = match auth::ray_version(&req.env.ray) {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        return Ok(JoinReport {
            command: with_env(&env.vars, &env.ray_start),
            port_free,
            view: Some(view::from_facts(facts)),
            carry_over: carry::path().map(|p| p.display().to_string()),
            ray_version,
            ray_error,
            ..JoinReport::new(env, container, prefix_len)
        });
    }
    let mut report = JoinReport::new(env, container, prefix_len);
    let Some(inside) = report.container.halobox.clone() else {
        return Ok(report);
    };
    report.command = in_container(
        &req.halobox,
        req.backend,
        &req.container,
        &plan::inside_join(&inside, &req.env, false),
    );
    if !look_inside || !report.container.running() {
        return Ok(report);
    }
    match inside_report(req, &inside) {
        Ok(r) => {
            report.inside_version = Some(r.halobox_version);
            report.env = r.env;
            report.view = r.view;
            report.port_free = r.port_free;
            report.carry_over = r.carry_over;
            report.ray_version = r.ray_version;
            report.ray_error = r.ray_error;
        }
        Err(e) => report.inside_error = Some(e),
    }
    Ok(report)
}

/// halobox's report from inside the container (`cluster join --backend
/// host --dry-run --json` there, through `halobox enter`).
fn inside_report(req: &JoinRequest, inside: &str) -> Result<JoinReport, String> {
    let name = &req.container;
    let exe = own_exe().map_err(|e| e.to_string())?;
    let mut argv = vec![exe.display().to_string(), "enter".into(), name.clone()];
    if let Some(e) = &req.engine {
        argv.extend(["--engine".into(), e.clone()]);
    }
    argv.push("--".into());
    argv.extend(plan::inside_join(inside, &req.env, true));
    let done = crate::proc::run(&argv, INSIDE_TIMEOUT)
        .map_err(|e| format!("cannot run halobox enter {name}: {e}"))?;
    let tail = crate::remote::tail(&done.output, 3);
    let line = done.stdout.lines().rev().find(|l| l.starts_with('{'));
    match (done.status.and_then(|s| s.code()), line) {
        (Some(0), Some(_)) => crate::remote::last_json(
            &format!("container {name}"),
            "halobox",
            &done.stdout,
            &done.output,
        ),
        (_, _) if done.timed_out.is_some() => Err(format!(
            "halobox inside container {name} did not answer within {} s: {tail}",
            INSIDE_TIMEOUT.as_secs()
        )),
        (Some(126 | 127), _) => Err(format!(
            "halobox does not run inside container {name} ({inside}): {tail}\n  hint: the image needs a C library at least as new as the host's (halobox is built against it), or a static halobox (`cargo build --release --target x86_64-unknown-linux-musl`); `halobox refresh --name {name}` after installing it"
        )),
        _ => Err(format!("halobox inside container {name}: {tail}")),
    }
}

/// Starts Ray on this node as `report` says (a warning to `r` when vLLM's
/// list of per-node variables cannot be written); fails with Ray's own words.
pub fn start(
    report: &JoinReport,
    req: &JoinRequest,
    r: &mut dyn crate::reporter::Reporter,
) -> anyhow::Result<()> {
    let env = &report.env;
    if env.is_head && report.port_free == Some(false) {
        bail!(
            "port {} on {} is already in use, so the Ray head cannot start there\n  hint: stop what holds it (`ss -ltnp`), `halobox cluster down`, or choose another ray_port",
            req.env.port,
            env.ip
        );
    }
    let name = &req.container;
    if req.backend == NodeBackend::Host {
        match report.carry_over.as_deref() {
            Some(p) => carry::write(std::path::Path::new(p), &env.per_node)?,
            None => r.note(&format!(
                "warning: no HOME: vLLM's list of per-node variables ({}) was not written, so vLLM may copy the head's values to the workers\n",
                carry::FILE
            )),
        }
        let token_file = node_token(req.auth.as_ref())?;
        let (prog, args) = env.ray_start.split_first().expect("ray start argv");
        stop_leftovers(prog, r)?;
        let status = crate::proc::command(prog)
            .args(args)
            .envs(env.vars.iter().map(|v| (&v.name, &v.value)))
            .envs(auth::ray_start_env(token_file.as_deref()))
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
            "there is no container {name}\n  hint: create it with `halobox refresh --name {name}`"
        );
    }
    let Some(inside) = &report.container.halobox else {
        bail!(
            "container {name} was made without halobox inside\n  hint: re-create it with `halobox refresh --name {name}`"
        );
    };
    let Some(ray_auth) = &req.auth else {
        bail!("{}", no_auth());
    };
    let mut argv = vec![
        own_exe()?.display().to_string(),
        "enter".into(),
        name.clone(),
    ];
    if let Some(e) = &req.engine {
        argv.extend(["--engine".into(), e.clone()]);
    }
    argv.push("--".into());
    argv.extend(plan::inside_join(inside, &req.env, false));
    argv.push(ray_auth.flag().into());
    let mut child = crate::proc::command(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run halobox enter {name}: {e}"))?;
    if let (Some(mut stdin), RayAuth::Token(t)) = (child.stdin.take(), ray_auth) {
        // The line goes through `halobox enter` to the join inside.
        let _ = stdin.write_all(format!("{}\n", t.secret()).as_bytes());
    }
    let status = child.wait()?;
    if !status.success() {
        bail!(
            "`halobox cluster join` failed in container {name} on {}",
            env.ip
        );
    }
    Ok(())
}

/// How `join` says it stopped the stale Ray daemons it found (`up` shows that line).
pub const STALE_NOTE: &str = "Ray's processes of a cluster that is gone still run here";

/// Ray's daemons of this user left on this node (in this PID namespace)
/// when their cluster's GCS is gone: `up` starts Ray only on a node its
/// head does not list alive, so whatever runs here is stale. A raylet
/// still naming the old head makes `ray start --head` refuse (`Ray is
/// trying to start at …, but is already running`). Their pid and name.
fn leftovers() -> Vec<(u32, String)> {
    let me = nix::unistd::geteuid().as_raw();
    let r = crate::host::Reader::new(crate::host::HostRoot::live());
    crate::host::procs::find(&r, crate::metrics::node::RAY_PROCESSES)
        .into_iter()
        .filter(|p| p.uid == Some(me))
        .map(|p| (p.pid, p.comm))
        .collect()
}

/// Stops the [`leftovers`] with `ray stop --force` (`ray`: the node's
/// `ray` command) before Ray starts, saying so to `r`.
fn stop_leftovers(ray: &str, r: &mut dyn crate::reporter::Reporter) -> anyhow::Result<()> {
    let left = leftovers();
    if left.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = left.iter().map(|(pid, c)| format!("{c} {pid}")).collect();
    r.note(&format!(
        "{STALE_NOTE} ({}): `ray stop --force` first\n",
        named.join(", ")
    ));
    let done = crate::proc::run(
        &[ray.to_string(), "stop".into(), "--force".into()],
        Duration::from_secs(60),
    )
    .map_err(|e| anyhow::anyhow!("cannot run {ray} stop: {e}"))?;
    let gone = (0..50).any(|_| {
        let none = leftovers().is_empty();
        if !none {
            std::thread::sleep(Duration::from_millis(100));
        }
        none
    });
    if !done.status.is_some_and(|s| s.success()) || !gone {
        bail!(
            "Ray's stale processes here ({}) did not stop: {}\n  hint: `{ray} stop --force` on this node, then `halobox cluster up` again",
            named.join(", "),
            crate::remote::tail(&done.output, 2)
        );
    }
    Ok(())
}

/// Why a start needs `--ray-token-stdin` or `--insecure-ray`.
fn no_auth() -> String {
    "Ray starts only with token authentication (`--ray-token-stdin`, the token on stdin, as `halobox cluster up` sends it) or explicitly without (`--insecure-ray`)\n  hint: start the cluster with `halobox cluster up`".into()
}

/// Writes the token where this node's Ray reads it (0600) and names that
/// file; with `--insecure-ray` removes an earlier one (drivers then use no
/// token).
fn node_token(ray_auth: Option<&RayAuth>) -> anyhow::Result<Option<PathBuf>> {
    let path = auth::node_token_path();
    match ray_auth {
        None => bail!("{}", no_auth()),
        Some(RayAuth::Insecure) => {
            if let Some(p) = &path {
                match std::fs::remove_file(p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => bail!("cannot remove {}: {e}", p.display()),
                }
            }
            Ok(None)
        }
        Some(RayAuth::Token(t)) => {
            let p = path.ok_or_else(|| {
                anyhow::anyhow!("no config folder (HOME unset?) for Ray's token file")
            })?;
            auth::write_private(&p, &format!("{}\n", t.secret()))?;
            Ok(Some(p))
        }
    }
}
