//! The supervisor: `serve`'s one entry point [`serve()`] starts the serve
//! ([`crate::serve::start`](mod@crate::serve::start)), then under `--restart
//! on-failure[:MAX]` either starts a detached supervisor on the head
//! (`--detach`: `halobox serve supervise`, its pid file beside the serve's
//! record, one at a time by an `flock`) or supervises in this process (the
//! foreground). A plain foreground `serve` is this supervisor under the
//! policy [`Keep::Never`]: the same checks, and a failure ends it, named.
//!
//! The supervisor ([`supervise`]) watches the engine through
//! [`crate::serve::watcher`] (the log judged, `/health`, the process, the progress
//! probe, the 1-token probe, Ray's table, the RPC and raylet ports: see
//! [`crate::serve::checks`]). Under `--restart`, on a failure it stops the engine and
//! its process group, waits with a bounded backoff until every node of the
//! split is back (Ray lists it alive, or its RPC server answers `HELLO`;
//! `cluster up` brings back what is missing), waits while another process
//! holds the API port (not this serve's: no restart is spent on it), then
//! starts the recorded serve again; after a start that failed, the next
//! restart waits longer ([`crate::serve::restart_policy::pause_before`]). Each
//! restart is an event in the state folder; past the policy's limit it gives up, leaving nothing running. It never restarts a
//! serve a `serve stop`, `cluster down` or `--ab-transport` holds
//! ([`crate::serve::program::HELD_FILE`]).

use std::io::{BufRead as _, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cluster::config::{ClusterConfig, Engine};
use crate::error::UsageError;
use crate::reporter::Reporter;
use crate::serve::engine::{Head, Held};
use crate::serve::launch::{self, Log, NotServing, grace};
use crate::serve::request::{Request, Spec};
use crate::serve::restart_policy::{self, Check, Decision, Event, Outcome, Policy, Port, Restarts};
use crate::serve::state::{self, Process};
use crate::serve::watcher::{self, Failure, Seen, Watched, stamp};
use crate::serve::{api_key, interrupt, plan, preflight, start};

/// The secrets a serve reads from the environment at every start, handed
/// to a detached supervisor on its stdin (never in an argument).
const SECRETS: [&str; 3] = [plan::SECRETS[0], plan::SECRETS[1], "LLAMA_API_KEY"];

/// How long the supervisor waits for every node to be back after a
/// failure before it counts the restart as failed.
const NODES_WITHIN: Duration = Duration::from_secs(600);

/// How often a supervisor looks again whether another process still holds
/// the API port.
const PORT_EVERY: Duration = Duration::from_secs(2);

/// Starts the serve `req` asks for (see [`crate::serve::start::start`]) and
/// supervises it: under `--restart` by a detached supervisor with
/// `--detach`, else by this process until Ctrl-C; without `--restart` in
/// the foreground by this process under [`Keep::Never`] (the same checks),
/// with `--detach` not at all.
pub fn serve(
    req: &Request,
    path: &Path,
    cfg: &ClusterConfig,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    let policy = match req.spec.restart {
        _ if req.dry_run => return start::start(req, path, cfg, r),
        Some(p) => p,
        None if req.detach => return start::start(req, path, cfg, r),
        None => {
            start::start(req, path, cfg, r)?;
            return supervise(cfg, path, Keep::Never, true, r);
        }
    };
    if let Some(p) = state::supervisor(path) {
        return Err(UsageError(format!(
            "a supervisor (pid {}) already keeps a serve of {} running\n  hint: `halobox serve status` shows it; `halobox serve stop` stops it",
            p.pid,
            path.display()
        ))
        .into());
    }
    let mut once = req.clone();
    once.detach = true;
    start::start(&once, path, cfg, r)?;
    state::remove_restarts(path);
    let kept = Restarts {
        policy: Some(policy),
        ..Restarts::default()
    };
    if let Err(e) = state::save_restarts(path, &kept) {
        r.note(&format!(
            "warning: cannot record the restart policy for `halobox serve status`: {e}\n"
        ));
    }
    if req.detach {
        let pid = spawn(path)?;
        r.out(&format!(
            "  kept running by a supervisor on this machine (pid {pid}): {}\n",
            policy.describe(req.spec.stall().as_secs())
        ));
        return Ok(());
    }
    r.note(&format!(
        "==> supervising here: {} (Ctrl-C stops it)\n",
        policy.describe(req.spec.stall().as_secs())
    ));
    let me = Process::this();
    if let Some(me) = &me {
        state::save_supervisor(path, me)?;
    }
    let res = supervise(cfg, path, Keep::OnFailure, true, r);
    if let Some(me) = &me {
        state::remove_supervisor(path, me);
    }
    res
}

/// Starts `halobox serve supervise` detached (its own process group, its
/// output appended to the supervisor's log in the state folder), the
/// secrets of this environment on its stdin; its pid once it recorded
/// itself.
fn spawn(path: &Path) -> anyhow::Result<u32> {
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::os::unix::process::CommandExt as _;
    let log_path = state::file(path, "supervisor.log")
        .ok_or_else(|| anyhow::anyhow!("no state folder (set XDG_STATE_HOME or HOME)"))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)?;
    let exe = std::env::current_exe()?;
    let mut child = crate::proc::command(&exe)
        .args(["serve", "supervise", "--cluster"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?;
    let pid = child.id();
    if let Some(mut stdin) = child.stdin.take() {
        let mut text = String::new();
        for name in SECRETS {
            if let Some(v) = crate::serve::prepare::secret(name) {
                text.push_str(&format!("{name}={v}\n"));
            }
        }
        stdin.write_all(text.as_bytes())?;
    }
    // Reaped when it ends, should this halobox still run then.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if state::supervisor(path).is_some_and(|p| p.pid == pid) {
            return Ok(pid);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    anyhow::bail!(
        "the supervisor (pid {pid}) did not start: see {}\n  hint: `halobox serve stop`, then `halobox serve --restart …` again",
        log_path.display()
    )
}

/// `halobox serve supervise`: the detached supervisor. Reads the secrets
/// from stdin (`NAME=VALUE` lines, until it closes) into its own
/// environment, takes the supervisor's lock, records its pid, supervises.
pub fn supervise_detached(
    path: &Path,
    cfg: &ClusterConfig,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if let Some((name, value)) = line.split_once('=')
            && SECRETS.contains(&name)
        {
            // SAFETY: set before this process starts any thread.
            unsafe { std::env::set_var(name, value) };
        }
    }
    let lock_path = state::file(path, "supervisor.lock")
        .ok_or_else(|| anyhow::anyhow!("no state folder (set XDG_STATE_HOME or HOME)"))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&lock_path)?;
    let _lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|_| {
            anyhow::anyhow!(
                "another supervisor holds {}\n  hint: `halobox serve status` shows it",
                lock_path.display()
            )
        })?;
    let me = Process::this().ok_or_else(|| anyhow::anyhow!("cannot read /proc/self/stat"))?;
    state::save_supervisor(path, &me)?;
    r.note(&format!("{} supervisor pid {} started\n", stamp(), me.pid));
    let res = supervise(cfg, path, Keep::OnFailure, false, r);
    state::remove_supervisor(path, &me);
    if let Err(e) = &res {
        r.note(&format!("{} supervisor ended: {e}\n", stamp()));
    }
    res
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What a supervisor does after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nothing: the serve ends, named (a plain foreground `serve`).
    Never,
    /// Restart it under the recorded `--restart`'s policy.
    OnFailure,
}

/// Watches ([`watcher::watch`]) and restarts the serve of `path` under
/// `keep` until it is stopped, a signal arrives, or the policy gives up.
/// In the `foreground`, the engine's log is copied through, and a signal
/// stops the engine too.
pub fn supervise(
    cfg: &ClusterConfig,
    path: &Path,
    keep: Keep,
    foreground: bool,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    interrupt::catch()?;
    let head = Head::of(cfg);
    // A plain serve follows on from where its launch read the log.
    let mut from = if keep == Keep::Never {
        head.log_length()
    } else {
        0
    };
    loop {
        let Some(rec) = state::load(path) else {
            r.note(&format!(
                "{} the serve's record is gone (`halobox serve stop`): nothing to keep\n",
                stamp()
            ));
            return Ok(());
        };
        let Some(spec) = rec
            .args
            .clone()
            .filter(|s| keep == Keep::Never || s.restart.is_some())
        else {
            r.note(&format!(
                "{} the recorded serve has no --restart: nothing to keep\n",
                stamp()
            ));
            return Ok(());
        };
        let key = key(&spec, path, cfg.engine);
        let watched = Watched {
            cfg,
            head: &head,
            rec: &rec,
            spec: &spec,
            key: key.as_deref(),
            foreground,
        };
        let mut log = Log::new(false, std::mem::take(&mut from));
        match (watcher::watch(&watched, &mut log, r), keep) {
            (Seen::Done(why), Keep::Never) => {
                r.note(&format!("==> {why}\n"));
                return Ok(());
            }
            (Seen::Done(why), _) => {
                r.note(&format!("{} {why}: the supervisor ends\n", stamp()));
                return Ok(());
            }
            (Seen::Signal(sig), _) => {
                return stop_on_signal(cfg, path, &head, keep, foreground, sig, r);
            }
            (Seen::Failed(f), Keep::Never) => {
                return Err(never_again(cfg, path, &head, &mut log, &f, foreground, r));
            }
            (Seen::Failed(f), Keep::OnFailure) => {
                if !restart_after(cfg, path, &head, &spec, f, r)? {
                    return Ok(());
                }
            }
        }
    }
}

/// A signal ended the watch: in the foreground the engine is stopped on
/// every node and the serve forgotten.
fn stop_on_signal(
    cfg: &ClusterConfig,
    path: &Path,
    head: &Head,
    keep: Keep,
    foreground: bool,
    sig: i32,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    let name = crate::signals::name(sig);
    match keep {
        Keep::Never => r.note(&format!(
            "==> {name}: stopping {} on every node\n",
            cfg.engine.title()
        )),
        Keep::OnFailure => r.note(&format!("{} {name}: the supervisor ends\n", stamp())),
    }
    if foreground {
        let said = head.stop(grace(cfg.engine), true)?;
        state::remove(path);
        r.note(&format!("==> {} stopped ({said})\n", cfg.engine.title()));
    }
    Ok(())
}

/// A failure under [`Keep::Never`]: the lines right after it read (they
/// usually name the node), then the engine stopped and the error named
/// ([`launch::end`]).
fn never_again(
    cfg: &ClusterConfig,
    path: &Path,
    head: &Head,
    log: &mut Log,
    f: &Failure,
    foreground: bool,
    r: &mut dyn Reporter,
) -> anyhow::Error {
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        for l in log.read(head, Duration::from_millis(300), r) {
            if foreground {
                r.out(&format!("{l}\n"));
            }
        }
    }
    let what = match f.check {
        Check::Log => format!("{} stopped serving: {}", cfg.engine.title(), f.what),
        _ => f.what.clone(),
    };
    launch::end(cfg, path, head, log, NotServing(what))
}

/// The API key the checks send (as the serve's start chose it).
fn key(spec: &Spec, path: &Path, engine: Engine) -> Option<String> {
    let env = match engine {
        Engine::Vllm => plan::SECRETS[1],
        Engine::LlamaCpp => "LLAMA_API_KEY",
    };
    let value = crate::serve::prepare::secret(env);
    let source = api_key::Source::choose(spec.no_api_key, value.is_some().then_some(env), path);
    api_key::load(&source, value.as_deref()).ok().flatten()
}

/// Acts on `f` under the serve's policy: restarts (true: watch again) or
/// gives up, or ends when a deliberate stop holds the serve (false).
fn restart_after(
    cfg: &ClusterConfig,
    path: &Path,
    head: &Head,
    spec: &Spec,
    mut f: Failure,
    r: &mut dyn Reporter,
) -> anyhow::Result<bool> {
    let policy: Policy = spec
        .restart
        .unwrap_or("on-failure".parse().expect("policy"));
    // Starts again that failed in a row: each waits longer before the next.
    let mut failed = 0u32;
    loop {
        let seen_at = Instant::now();
        let Some(event) = decide_after(cfg, path, head, &policy, &f, failed, r)? else {
            return Ok(false);
        };
        let Some(outcome) = start_again(cfg, path, head, spec, &policy, &event, r)? else {
            return Ok(false);
        };
        match settle(path, &event, outcome, seen_at, r)? {
            None => return Ok(true),
            Some(why) => {
                failed += 1;
                f = Failure {
                    check: Check::Start,
                    node: None,
                    what: why,
                    why: None,
                };
            }
        }
    }
}

/// Records the failure `f` as an event and decides under `policy`: the
/// event to restart for (after the pause that `failed` starts in a row
/// earn), or `None` when the policy gives up (the engine stopped, nothing
/// left running) or a deliberate stop holds the serve.
fn decide_after(
    cfg: &ClusterConfig,
    path: &Path,
    head: &Head,
    policy: &Policy,
    f: &Failure,
    failed: u32,
    r: &mut dyn Reporter,
) -> anyhow::Result<Option<Event>> {
    if matches!(head.look(), Ok((_, true))) {
        r.note(&format!(
            "{} a serve stop, cluster down or --ab-transport holds the serve: no restart\n",
            stamp()
        ));
        return Ok(None);
    }
    let mut kept = state::restarts(path);
    kept.policy = Some(*policy);
    let now = now_s();
    let mut event = Event {
        at: now,
        check: f.check,
        node: f.node.clone(),
        cause: f.cause(),
        serving_again_s: None,
        outcome: Outcome::Restarting,
    };
    match restart_policy::decide(policy, &kept.events, now) {
        Decision::GiveUp(why) => {
            let said = head.stop(grace(cfg.engine), true);
            state::remove(path);
            event.outcome = Outcome::GaveUp;
            kept.events.push(event.clone());
            kept.gave_up = Some(format!(
                "{}; the last failure: {}",
                why.lines().next().unwrap_or(&why),
                event.line()
            ));
            state::save_restarts(path, &kept)?;
            r.note(&format!(
                "{} {}: {}\n{} {why}\n",
                stamp(),
                event.line(),
                match said {
                    Ok(s) => format!("{} {s}", cfg.engine.title()),
                    Err(e) => format!("could not stop {}: {e}", cfg.engine.title()),
                },
                stamp()
            ));
            Ok(None)
        }
        Decision::Restart(n) => {
            r.note(&format!(
                "{} failure: {}; restart {n} of {} allowed in {} minutes\n",
                stamp(),
                event.line(),
                policy.max,
                policy.window_s / 60
            ));
            kept.events.push(event.clone());
            state::save_restarts(path, &kept)?;
            let pause = restart_policy::pause_before(failed);
            if !pause.is_zero() {
                r.note(&format!(
                    "{} restart {n} in {} s (the start again failed {failed} time(s) in a row)\n",
                    stamp(),
                    pause.as_secs()
                ));
                if !pause_unless_stopped(pause, head, r) {
                    return Ok(None);
                }
            }
            Ok(Some(event))
        }
    }
}

/// One restart for `event`: the engine stopped, the nodes and the API port
/// awaited, the recorded serve started again. `None` when a signal, a
/// deliberate stop or a port never freed ended it; else whether the start
/// again served (`Err`: why not).
fn start_again(
    cfg: &ClusterConfig,
    path: &Path,
    head: &Head,
    spec: &Spec,
    policy: &Policy,
    event: &Event,
    r: &mut dyn Reporter,
) -> anyhow::Result<Option<Result<(), String>>> {
    let wait = restart_policy::restart_grace(event.check).unwrap_or(grace(cfg.engine));
    let said = head.stop(wait, false);
    r.note(&format!(
        "{} {} stopped: {}\n",
        stamp(),
        cfg.engine.title(),
        match said {
            Ok(s) => s,
            Err(e) => e.to_string(),
        }
    ));
    match wait_nodes(cfg, path, head, r) {
        Wait::Held | Wait::Signal => return Ok(None),
        Wait::Missing(why) => return Ok(Some(Err(why))),
        Wait::Back => {}
    }
    match wait_port(cfg, spec, head, policy, r) {
        PortEnd::Free => {}
        PortEnd::Stopped => return Ok(None),
        PortEnd::GaveUp(why) => {
            let _ = head.stop(grace(cfg.engine), true);
            let mut kept = state::restarts(path);
            state::remove(path);
            if let Some(e) = kept.events.iter_mut().rev().find(|e| e.at == event.at) {
                e.outcome = Outcome::GaveUp;
            }
            kept.gave_up = Some(format!(
                "{}; the last failure: {}",
                why.lines().next().unwrap_or(&why),
                event.line()
            ));
            state::save_restarts(path, &kept)?;
            r.note(&format!("{} {why}\n", stamp()));
            return Ok(None);
        }
    }
    let mut req = Request::again(spec.clone());
    req.restarted = true;
    match start::start(&req, path, cfg, r) {
        Ok(()) => Ok(Some(Ok(()))),
        Err(e) if e.is::<Held>() => {
            r.note(&format!("{} {e}\n", stamp()));
            Ok(None)
        }
        Err(e) => Ok(Some(Err(e.to_string()))),
    }
}

/// Records how the restart for `event` (seen at `seen_at`) ended: `None`
/// when serving again, else why the start again failed.
fn settle(
    path: &Path,
    event: &Event,
    outcome: Result<(), String>,
    seen_at: Instant,
    r: &mut dyn Reporter,
) -> anyhow::Result<Option<String>> {
    let mut kept = state::restarts(path);
    let last = kept.events.iter_mut().rev().find(|e| e.at == event.at);
    match outcome {
        Ok(()) => {
            let secs = seen_at.elapsed().as_secs_f64();
            if let Some(e) = last {
                e.outcome = Outcome::Serving;
                e.serving_again_s = Some(secs);
            }
            state::save_restarts(path, &kept)?;
            r.note(&format!("{} serving again after {secs:.0} s\n", stamp()));
            Ok(None)
        }
        Err(why) => {
            let why = why.lines().next().unwrap_or("").to_string();
            if let Some(e) = last {
                e.outcome = Outcome::Failed(why.clone());
            }
            state::save_restarts(path, &kept)?;
            r.note(&format!("{} the start again failed: {why}\n", stamp()));
            Ok(Some(why))
        }
    }
}

/// Waits `pause` (a signal cuts it short), then looks whether a
/// deliberate stop holds the serve: false when either ended the wait.
fn pause_unless_stopped(pause: Duration, head: &Head, r: &mut dyn Reporter) -> bool {
    let until = Instant::now() + pause;
    while Instant::now() < until {
        if interrupt::arrived().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if matches!(head.look(), Ok((_, true))) {
        r.note(&format!(
            "{} a serve stop, cluster down or --ab-transport holds the serve: no restart\n",
            stamp()
        ));
        return false;
    }
    true
}

/// How waiting for the API port ended.
enum PortEnd {
    /// Free: start.
    Free,
    /// A signal or a deliberate stop ended the wait.
    Stopped,
    /// Still taken after the policy's window (why).
    GaveUp(String),
}

/// With the engine stopped, waits while another process holds the API
/// port (not this serve's: no restart is spent on it), at most the
/// policy's window ([`restart_policy::port_verdict`]).
fn wait_port(
    cfg: &ClusterConfig,
    spec: &Spec,
    head: &Head,
    policy: &Policy,
    r: &mut dyn Reporter,
) -> PortEnd {
    let host = Some(spec.host.unwrap_or(IpAddr::V4(cfg.head().ip)));
    let since = Instant::now();
    let mut said = false;
    loop {
        let taken = preflight::port_taken(host, spec.port);
        match restart_policy::port_verdict(
            taken,
            since.elapsed(),
            policy,
            spec.port,
            cfg.engine.title(),
        ) {
            Port::Start => {
                if said {
                    r.note(&format!("{} port {} is free again\n", stamp(), spec.port));
                }
                return PortEnd::Free;
            }
            Port::GiveUp(why) => return PortEnd::GaveUp(why),
            Port::Wait => {
                if !said {
                    r.note(&format!(
                        "{} {}\n",
                        stamp(),
                        restart_policy::not_ours(spec.port, cfg.engine.title())
                    ));
                    said = true;
                }
                if !pause_unless_stopped(PORT_EVERY, head, r) {
                    return PortEnd::Stopped;
                }
            }
        }
    }
}

/// How waiting for the nodes ended.
enum Wait {
    /// Every node is back.
    Back,
    /// A deliberate stop holds the serve.
    Held,
    /// A signal arrived.
    Signal,
    /// Not every node came back in time (what is missing).
    Missing(String),
}

/// Waits, with a bounded backoff, until every node of the split is back:
/// each RPC server answers `HELLO` (llama.cpp), or Ray lists every node
/// alive (vLLM). What is missing is brought back by `cluster up`.
fn wait_nodes(cfg: &ClusterConfig, path: &Path, head: &Head, r: &mut dyn Reporter) -> Wait {
    let until = Instant::now() + NODES_WITHIN;
    let mut attempt = 0;
    loop {
        if interrupt::arrived().is_some() {
            return Wait::Signal;
        }
        if matches!(head.look(), Ok((_, true))) {
            r.note(&format!(
                "{} a serve stop, cluster down or --ab-transport holds the serve: no restart\n",
                stamp()
            ));
            return Wait::Held;
        }
        let gone = match missing(cfg) {
            None => return Wait::Back,
            Some(m) => m,
        };
        if Instant::now() >= until {
            return Wait::Missing(format!(
                "not every node came back within {} s: {gone}",
                NODES_WITHIN.as_secs()
            ));
        }
        r.note(&format!(
            "{} waiting for the nodes: {gone}; `cluster up` brings back what is missing\n",
            stamp()
        ));
        let mut out = NoteLines(r);
        if let Err(e) = crate::fleet::up(
            cfg,
            path,
            false,
            cfg.timeout_s,
            crate::cluster::auth::Mode::Token,
            true,
            &mut out,
        ) {
            r.note(&format!("{} cluster up: {e}\n", stamp()));
        }
        if missing(cfg).is_none() {
            return Wait::Back;
        }
        let pause = Instant::now() + restart_policy::backoff(attempt);
        while Instant::now() < pause && interrupt::arrived().is_none() {
            std::thread::sleep(Duration::from_millis(200));
        }
        attempt += 1;
    }
}

/// What of the split is not back: RPC servers that do not answer, nodes
/// Ray does not list alive.
fn missing(cfg: &ClusterConfig) -> Option<String> {
    match cfg.engine {
        Engine::LlamaCpp => {
            let gone: Vec<String> = crate::serve::rpc_servers::workers(cfg)
                .iter()
                .filter(|n| {
                    !matches!(
                        crate::serve::rpc::hello(
                            SocketAddr::from((n.ip, cfg.rpc_port)),
                            Duration::from_secs(5)
                        ),
                        crate::serve::rpc::Hello::Version(..)
                    )
                })
                .map(|n| {
                    format!(
                        "node {} ({}): its RPC server does not answer",
                        n.label(),
                        n.ip
                    )
                })
                .collect();
            (!gone.is_empty()).then(|| gone.join("; "))
        }
        Engine::Vllm => match crate::cluster::run::ray_nodes(cfg, 0, 10) {
            Err(e) => Some(format!("Ray's state cannot be read: {e}")),
            Ok(nodes) => {
                let alive: Vec<String> = nodes.alive().map(|n| n.ip.clone()).collect();
                let gone: Vec<String> = cfg
                    .nodes
                    .iter()
                    .filter(|n| !alive.contains(&n.ip.to_string()))
                    .map(|n| format!("node {} ({}) is not alive in Ray", n.label(), n.ip))
                    .collect();
                (!gone.is_empty()).then(|| gone.join("; "))
            }
        },
    }
}

/// `cluster up`'s output as the supervisor's notes.
struct NoteLines<'a>(&'a mut dyn Reporter);

impl Reporter for NoteLines<'_> {
    fn out(&mut self, text: &str) {
        self.0.note(text);
    }
    fn note(&mut self, text: &str) {
        self.0.note(text);
    }
}
