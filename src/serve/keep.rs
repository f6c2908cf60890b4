//! `serve --restart on-failure[:MAX]`: keeping a serve serving. The
//! library's entry point [`serve()`] starts it ([`super::start`](mod@super::start)), then
//! either starts a detached supervisor on the head (`--detach`: `halobox
//! serve supervise`, its pid file beside the serve's record, one at a time
//! by an `flock`) or supervises in this process (the foreground).
//!
//! The supervisor ([`supervise`]) watches the engine with serve's checks
//! (the log judged, `/health`, llama.cpp's 1-token probe) and the progress
//! probe ([`super::restart::Stall`]). On a failure it stops the engine and
//! its process group, waits with a bounded backoff until every node of the
//! split is back (Ray lists it alive, or its RPC server answers `HELLO`;
//! `cluster up` brings back what is missing), waits while another process
//! holds the API port (not this serve's: no restart is spent on it), then
//! starts the recorded serve again; after a start that failed, the next
//! restart waits longer ([`super::restart::pause_before`]). Each restart is an event in the state folder; past the
//! policy's limit it gives up, leaving nothing running. It never restarts a
//! serve a `serve stop`, `cluster down` or `--ab-transport` holds
//! ([`super::program::HELD_FILE`]).

use std::io::{BufRead as _, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::engine::{EngineState, Head, Held};
use super::request::{Request, Spec};
use super::restart::{self, Check, Decision, Event, Hung, Outcome, Policy, Port, Restarts, Stall};
use super::state::{self, Process, ServeState};
use super::{api_key, interrupt, llama, plan, preflight, start, watch};
use crate::cluster::config::{ClusterConfig, Engine};
use crate::error::UsageError;
use crate::http;
use crate::reporter::Reporter;

/// The secrets a serve reads from the environment at every start, handed
/// to a detached supervisor on its stdin (never in an argument).
const SECRETS: [&str; 3] = [plan::SECRETS[0], plan::SECRETS[1], "LLAMA_API_KEY"];

/// How long the supervisor waits for every node to be back after a
/// failure before it counts the restart as failed.
const NODES_WITHIN: Duration = Duration::from_secs(600);

/// How often a vLLM supervisor asks Ray whether every node of the split is
/// alive (and where each raylet listens; those ports are tried every
/// second, as llama.cpp's RPC ports): vLLM notices a lost worker only once
/// Ray tells it, or at its next request.
const RAY_EVERY: Duration = Duration::from_secs(30);

/// How often a supervisor looks again whether another process still holds
/// the API port.
const PORT_EVERY: Duration = Duration::from_secs(2);

/// How long after one 1-token probe of vLLM ends the next starts.
const VLLM_PROBE_EVERY: Duration = Duration::from_secs(10);

/// Starts the serve `req` asks for (see [`super::start::start`]); under
/// `--restart` it is then supervised: by a detached supervisor with
/// `--detach`, else by this process until Ctrl-C.
pub fn serve(
    req: &Request,
    path: &Path,
    cfg: &ClusterConfig,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    let policy = match req.spec.restart {
        Some(p) if !req.dry_run => p,
        _ => return start::start(req, path, cfg, r),
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
    let res = supervise(cfg, path, true, r);
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
            if let Some(v) = super::prepare::secret(name) {
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
    let res = supervise(cfg, path, false, r);
    state::remove_supervisor(path, &me);
    if let Err(e) = &res {
        r.note(&format!("{} supervisor ended: {e}\n", stamp()));
    }
    res
}

/// The time now, for the supervisor's log lines.
fn stamp() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A failure one of the checks saw.
#[derive(Debug, Clone)]
struct Failure {
    check: Check,
    node: Option<String>,
    cause: String,
}

/// How watching the engine ended.
enum Seen {
    /// Nothing to keep any more (why).
    Done(String),
    /// A signal (this supervisor is stopped).
    Signal(i32),
    /// A failure to restart from.
    Failed(Failure),
}

/// Watches and restarts the serve of `path` until it is stopped, a signal
/// arrives, or the policy gives up. In the `foreground`, the engine's log
/// is copied through, and a signal stops the engine too.
pub fn supervise(
    cfg: &ClusterConfig,
    path: &Path,
    foreground: bool,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    interrupt::catch()?;
    let head = Head::of(cfg);
    loop {
        let Some(rec) = state::load(path) else {
            r.note(&format!(
                "{} the serve's record is gone (`halobox serve stop`): nothing to keep\n",
                stamp()
            ));
            return Ok(());
        };
        let Some(spec) = rec.args.clone().filter(|s| s.restart.is_some()) else {
            r.note(&format!(
                "{} the recorded serve has no --restart: nothing to keep\n",
                stamp()
            ));
            return Ok(());
        };
        match watch_engine(cfg, path, &head, &rec, &spec, foreground, r) {
            Seen::Done(why) => {
                r.note(&format!("{} {why}: the supervisor ends\n", stamp()));
                return Ok(());
            }
            Seen::Signal(sig) => {
                r.note(&format!(
                    "{} {}: the supervisor ends\n",
                    stamp(),
                    crate::refresh::signals::name(sig)
                ));
                if foreground {
                    let said = head.stop(grace(cfg.engine), true)?;
                    state::remove(path);
                    r.note(&format!("==> {} stopped ({said})\n", cfg.engine.title()));
                }
                return Ok(());
            }
            Seen::Failed(f) => {
                if !restart_after(cfg, path, &head, &spec, f, r)? {
                    return Ok(());
                }
            }
        }
    }
}

fn grace(engine: Engine) -> Duration {
    match engine {
        Engine::Vllm => Duration::from_secs(20),
        Engine::LlamaCpp => Duration::from_secs(5),
    }
}

/// The API key the checks send (as the serve's start chose it).
fn key(spec: &Spec, path: &Path, engine: Engine) -> Option<String> {
    let env = match engine {
        Engine::Vllm => plan::SECRETS[1],
        Engine::LlamaCpp => "LLAMA_API_KEY",
    };
    let value = super::prepare::secret(env);
    let source = api_key::Source::choose(spec.no_api_key, value.is_some().then_some(env), path);
    api_key::load(&source, value.as_deref()).ok().flatten()
}

/// Watches the recorded engine until it fails, is stopped or held, or a
/// signal arrives.
fn watch_engine(
    cfg: &ClusterConfig,
    path: &Path,
    head: &Head,
    rec: &ServeState,
    spec: &Spec,
    foreground: bool,
    r: &mut dyn Reporter,
) -> Seen {
    let api: SocketAddr = match rec.endpoint.trim_start_matches("http://").parse() {
        Ok(a) => a,
        Err(_) => {
            return Seen::Done(format!(
                "the recorded endpoint {} is not IP:PORT",
                rec.endpoint
            ));
        }
    };
    let key = key(spec, path, cfg.engine);
    let key = key.as_deref();
    let t0 = Instant::now();
    let stall_after = spec.stall();
    let mut stall = Stall::default();
    let mut follower: Option<crate::proc::Proc> = None;
    let mut seen = 0usize;
    let mut fails = 0u32;
    let mut next_health = Instant::now() + Duration::from_secs(1);
    let mut next_look = Instant::now();
    let mut next_probe = Instant::now() + llama::PROBE_EVERY;
    let mut next_port = Instant::now() + llama::PORT_EVERY;
    let mut next_progress = Instant::now() + Duration::from_secs(5);
    let mut next_ray = Instant::now();
    let mut hung = Hung::default();
    let mut probe: Option<std::sync::mpsc::Receiver<()>> = None;
    let mut next_vllm_probe = Instant::now() + VLLM_PROBE_EVERY;
    let mut tokens: Option<u64> = None;
    let mut raylets: Vec<Raylet> = Vec::new();
    // Only a split over every node: with fewer GPUs than nodes, which
    // nodes vLLM uses is Ray's choice, and a lost idle node is no failure.
    let split = cfg.engine == Engine::Vllm
        && cfg.nodes.len() > 1
        && spec
            .tp
            .is_none_or(|t| usize::try_from(t).is_ok_and(|t| t >= cfg.nodes.len()));
    loop {
        if let Some(sig) = interrupt::arrived() {
            return Seen::Signal(sig);
        }
        // The log: every line judged (and copied through in the foreground).
        if follower.as_mut().is_none_or(|f| f.try_status().is_some()) {
            follower = head.follow(&format!("+{}", seen + 1)).ok();
        }
        let lines = match follower.as_mut() {
            Some(f) => f.lines(Duration::from_millis(500)),
            None => {
                std::thread::sleep(Duration::from_millis(500));
                Vec::new()
            }
        };
        for l in lines {
            seen += 1;
            if foreground {
                r.out(&format!("{l}\n"));
            }
            if watch::fatal(&l) {
                return failed(cfg, Check::Log, watch::cause(&l).to_string());
            }
        }
        if Instant::now() >= next_look {
            next_look = Instant::now() + Duration::from_secs(3);
            match head.look() {
                Ok((_, true)) => {
                    return Seen::Done(
                        "a serve stop, cluster down or --ab-transport holds the serve".into(),
                    );
                }
                Ok((EngineState::None, _)) => {
                    return Seen::Done("the engine was stopped (`halobox serve stop`)".into());
                }
                Ok((EngineState::Exited(pid), _)) if pid == rec.pid => {
                    return failed(
                        cfg,
                        Check::Exited,
                        format!("{} (pid {pid}) exited", cfg.engine.title()),
                    );
                }
                Ok((EngineState::Running(pid) | EngineState::Exited(pid), _)) if pid != rec.pid => {
                    return Seen::Done(format!(
                        "another engine (pid {pid}) runs in the head's container now"
                    ));
                }
                _ => {}
            }
        }
        if Instant::now() >= next_health {
            next_health = Instant::now() + Duration::from_secs(1);
            // `/health` needs no key: none is sent to whatever listens.
            let ok = http::get(api, "/health", None, Duration::from_secs(5))
                .is_ok_and(|h| h.status == 200);
            fails = if ok { 0 } else { fails + 1 };
            if !ok {
                // The process is looked at now, not at its next turn: an
                // engine that died is seen within a second.
                next_look = Instant::now();
            }
            if fails >= 5 {
                return failed(
                    cfg,
                    Check::Health,
                    format!(
                        "{}'s API stopped answering /health (5 checks in a row)",
                        cfg.engine.title()
                    ),
                );
            }
        }
        if cfg.engine == Engine::LlamaCpp && Instant::now() >= next_port {
            next_port = Instant::now() + llama::PORT_EVERY;
            if let Some(n) = llama::refused(cfg) {
                let cause = format!("port {} refused a connection", cfg.rpc_port);
                let at = format!("node {} ({})", n.label(), n.ip);
                let b = llama::blame(cfg)
                    .filter(|b| b.starts_with(&format!("{at}: ")))
                    .unwrap_or_else(|| format!("{at}: no RPC server listens there"));
                return Seen::Failed(blamed(Check::Rpc, &b, cause));
            }
        }
        if cfg.engine == Engine::LlamaCpp && Instant::now() >= next_probe {
            let answered = llama::answers(api, key).unwrap_or_else(|why| {
                r.note(&format!("{} {why}\n", stamp()));
                true
            });
            if !answered && let Some(b) = llama::blame(cfg) {
                return Seen::Failed(blamed(
                    Check::Probe,
                    &b,
                    format!(
                        "llama-server did not finish a 1-token completion within {} s",
                        llama::PROBE_TIMEOUT.as_secs()
                    ),
                ));
            }
            next_probe = Instant::now() + llama::PROBE_EVERY;
        }
        if split && Instant::now() >= next_ray {
            let (lost, found) = ray_look(cfg);
            if let Some(b) = lost {
                return ray_failed(&b);
            }
            raylets = found;
            next_ray = Instant::now() + RAY_EVERY;
        }
        if split && Instant::now() >= next_port {
            next_port = Instant::now() + llama::PORT_EVERY;
            if let Some(b) = raylet_refused(&raylets) {
                return ray_failed(&b);
            }
        }
        if cfg.engine == Engine::Vllm {
            if probe.as_ref().is_some_and(|rx| {
                !matches!(rx.try_recv(), Err(std::sync::mpsc::TryRecvError::Empty))
            }) {
                probe = None;
                hung.finished();
                next_vllm_probe = Instant::now() + VLLM_PROBE_EVERY;
            }
            // Not before the engine has generated a token: the first
            // request's steps warm it up (compiled kernels), and a probe
            // behind them would count that as a hang.
            if probe.is_none() && tokens.is_some_and(|t| t > 0) && Instant::now() >= next_vllm_probe
            {
                probe = Some(vllm_probe(api, key, stall_after));
                hung.started(tokens, t0.elapsed());
            }
            if hung.look(tokens, t0.elapsed(), stall_after) {
                return failed(
                    cfg,
                    Check::Stall,
                    format!(
                        "a 1-token completion did not finish within {} s (--stall-timeout) and no token was generated",
                        stall_after.as_secs()
                    ),
                );
            }
        }
        if Instant::now() >= next_progress {
            next_progress = Instant::now() + Duration::from_secs(5);
            let (path_, parse): (&str, fn(&str) -> Option<restart::Sample>) = match cfg.engine {
                Engine::Vllm => ("/metrics", restart::vllm_sample),
                Engine::LlamaCpp => ("/slots", restart::llama_sample),
            };
            let sample = match api_key::get(api, path_, key, Duration::from_secs(5)) {
                Ok(h) => Some(h)
                    .filter(|h| h.status == 200)
                    .and_then(|h| parse(&h.body)),
                Err(e) => {
                    if let Some(why) = api_key::not_ours(&e) {
                        r.note(&format!("{} {why}\n", stamp()));
                    }
                    None
                }
            };
            tokens = sample.map(|s| s.tokens);
            if stall.look(sample, t0.elapsed(), stall_after) {
                return failed(
                    cfg,
                    Check::Stall,
                    format!(
                        "requests ran with no new token for {} s (--stall-timeout)",
                        stall_after.as_secs()
                    ),
                );
            }
        }
    }
}

/// A failure of `check` with `cause`, blamed on a node where one is to
/// blame.
fn failed(cfg: &ClusterConfig, check: Check, cause: String) -> Seen {
    match who(cfg) {
        Some(b) => Seen::Failed(blamed(check, &b, cause)),
        None => Seen::Failed(Failure {
            check,
            node: Some(format!("head {} ({})", cfg.head().label(), cfg.head().ip)),
            cause,
        }),
    }
}

/// A failure whose node `blame` names (`node X (IP): why`).
fn blamed(check: Check, blame: &str, cause: String) -> Failure {
    let (node, why) = blame.split_once(": ").unwrap_or((blame, ""));
    let why: String = why.chars().take(300).collect();
    Failure {
        check,
        node: Some(node.to_string()),
        cause: if why.is_empty() {
            cause
        } else {
            format!("{cause}: {why}")
        },
    }
}

/// The `ray` failure of the node `blame` names (`node X (IP): why`).
fn ray_failed(blame: &str) -> Seen {
    Seen::Failed(blamed(
        Check::Ray,
        blame,
        "a node of the split is no longer alive in Ray".into(),
    ))
}

/// A 1-token completion sent to vLLM's API in a thread of its own (it may
/// wait as long as the engine hangs); the receiver hears once it is over,
/// answered or not.
fn vllm_probe(
    api: SocketAddr,
    key: Option<&str>,
    stall_after: Duration,
) -> std::sync::mpsc::Receiver<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let key = key.map(str::to_string);
    std::thread::spawn(move || {
        let body = r#"{"prompt": "a", "max_tokens": 1, "temperature": 0}"#;
        let _ = api_key::post_json(
            api,
            "/v1/completions",
            body,
            key.as_deref(),
            stall_after + Duration::from_secs(30),
        );
        let _ = tx.send(());
    });
    rx
}

/// The worker node to blame now: llama.cpp's RPC server gone, frozen or
/// unreachable; a node Ray no longer lists alive.
fn who(cfg: &ClusterConfig) -> Option<String> {
    match cfg.engine {
        Engine::LlamaCpp => llama::blame(cfg),
        Engine::Vllm => ray_lost(cfg),
    }
}

/// A node of the split Ray's table lists dead or not at all (`node X
/// (IP): why`); `None` when every node is alive or the table cannot be
/// read (a head that is gone is the other checks' to see).
fn ray_lost(cfg: &ClusterConfig) -> Option<String> {
    ray_look(cfg).0
}

/// A node's raylet: `node X (IP)` and where it listens.
type Raylet = (String, SocketAddr);

/// One look at Ray's table: the node of the split it lost (as
/// [`ray_lost`]), and the raylet of every node of the split it lists alive.
fn ray_look(cfg: &ClusterConfig) -> (Option<String>, Vec<Raylet>) {
    let Some(nodes) = crate::cluster::run::ray_nodes(cfg, 0, 5)
        .ok()
        .filter(|n| n.error.is_none())
    else {
        return (None, Vec::new());
    };
    let mut raylets = Vec::new();
    for n in &cfg.nodes {
        let ip = n.ip.to_string();
        let at = format!("node {} ({})", n.label(), n.ip);
        match nodes.alive().find(|r| r.ip == ip) {
            Some(r) => {
                if let Some(port) = r.raylet_port.filter(|p| *p > 0) {
                    raylets.push((at, SocketAddr::from((n.ip, port))));
                }
            }
            None => {
                let why = if nodes.nodes.iter().any(|r| r.ip == ip && r.unreachable) {
                    "its raylet does not answer the head (Ray's GCS has not marked it dead yet)"
                } else {
                    "Ray no longer lists it as alive"
                };
                return (Some(format!("{at}: {why}")), raylets);
            }
        }
    }
    (None, raylets)
}

/// The first of `raylets` whose port refuses a TCP connection: its node
/// is up but its Ray is gone (the container killed, Ray stopped). One that
/// does not answer in time is left to the next look at Ray's table.
fn raylet_refused(raylets: &[Raylet]) -> Option<String> {
    raylets.iter().find_map(|(at, addr)| {
        llama::port_refused(*addr).then(|| {
            format!(
                "{at}: its raylet (port {}) refuses connections",
                addr.port()
            )
        })
    })
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
        if matches!(head.look(), Ok((_, true))) {
            r.note(&format!(
                "{} a serve stop, cluster down or --ab-transport holds the serve: no restart\n",
                stamp()
            ));
            return Ok(false);
        }
        let seen_at = Instant::now();
        let mut kept = state::restarts(path);
        kept.policy = Some(policy);
        let now = now_s();
        let mut event = Event {
            at: now,
            check: f.check,
            node: f.node.clone(),
            cause: f.cause.clone(),
            serving_again_s: None,
            outcome: Outcome::Restarting,
        };
        match restart::decide(&policy, &kept.events, now) {
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
                return Ok(false);
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
                let pause = restart::pause_before(failed);
                if !pause.is_zero() {
                    r.note(&format!(
                        "{} restart {n} in {} s (the start again failed {failed} time(s) in a row)\n",
                        stamp(),
                        pause.as_secs()
                    ));
                    if !pause_unless_stopped(pause, head, r) {
                        return Ok(false);
                    }
                }
            }
        }
        let said = head.stop(grace(cfg.engine), false);
        r.note(&format!(
            "{} {} stopped: {}\n",
            stamp(),
            cfg.engine.title(),
            match said {
                Ok(s) => s,
                Err(e) => e.to_string(),
            }
        ));
        let outcome = match wait_nodes(cfg, path, head, r) {
            Wait::Held => return Ok(false),
            Wait::Signal => return Ok(false),
            Wait::Missing(why) => Err(why),
            Wait::Back => {
                match wait_port(cfg, spec, head, &policy, r) {
                    PortEnd::Free => {}
                    PortEnd::Stopped => return Ok(false),
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
                        return Ok(false);
                    }
                }
                let mut req = Request::again(spec.clone());
                req.restarted = true;
                match start::start(&req, path, cfg, r) {
                    Ok(()) => Ok(()),
                    Err(e) if e.is::<Held>() => {
                        r.note(&format!("{} {e}\n", stamp()));
                        return Ok(false);
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
        };
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
                return Ok(true);
            }
            Err(why) => {
                let why = why.lines().next().unwrap_or("").to_string();
                if let Some(e) = last {
                    e.outcome = Outcome::Failed(why.clone());
                }
                state::save_restarts(path, &kept)?;
                r.note(&format!("{} the start again failed: {why}\n", stamp()));
                failed += 1;
                f = Failure {
                    check: Check::Start,
                    node: None,
                    cause: why,
                };
            }
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
/// policy's window ([`restart::port_verdict`]).
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
        match restart::port_verdict(
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
                        restart::not_ours(spec.port, cfg.engine.title())
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
        if let Err(e) = crate::cluster::up(
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
        let pause = Instant::now() + restart::backoff(attempt);
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
            let gone: Vec<String> = super::rpc_servers::workers(cfg)
                .iter()
                .filter(|n| {
                    !matches!(
                        super::rpc::hello(
                            SocketAddr::from((n.ip, cfg.rpc_port)),
                            Duration::from_secs(5)
                        ),
                        super::rpc::Hello::Version(..)
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
