//! Launching the engine: it counts as served only once its API answers
//! `/health` and lists the model. A failure before then stops the engine,
//! names the node it lost where one is to blame, and ends non-zero; once
//! ready, [`super::watcher`] watches it (in the foreground, and under a
//! supervisor). [`Log`] and [`end`] are shared with the watcher: the log as
//! it arrives, judged, and the error a failed serve ends with.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::engine::{EngineState, Head};
use super::kv_check::{self, EngineKv};
use super::state::{self, ServeState};
use super::{interrupt, log_lines};
use crate::cluster::config::{ClusterConfig, Engine};
use crate::cluster::run as cluster_run;
use crate::http;
use crate::proc::Proc;
use crate::reporter::Reporter;

/// How often the API is asked while the engine starts (and how long the
/// log is read between two asks): a refused connect costs nothing, and the
/// answer is what the user waits for.
const HEALTH_EVERY: Duration = Duration::from_millis(100);

/// How long after the start the log begins to be followed (from its first
/// line, so nothing is missed): its reader is an exec into the container,
/// whose work would compete with an engine that is ready within a second.
const FOLLOW_AFTER: Duration = Duration::from_secs(1);

/// How long the engine gets to end after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// The same for llama-server, which keeps nothing to clean up (and hangs on
/// a frozen RPC server).
const LLAMA_STOP_GRACE: Duration = Duration::from_secs(5);

/// The grace period of `engine`.
pub fn grace(engine: Engine) -> Duration {
    match engine {
        Engine::Vllm => STOP_GRACE,
        Engine::LlamaCpp => LLAMA_STOP_GRACE,
    }
}
/// Log lines kept to show when something fails.
const KEPT_LINES: usize = 40;
/// The first error lines kept (the root cause is usually among them).
const FIRST_ERRORS: usize = 6;

/// What to start and how to watch it.
#[derive(Debug, Clone)]
pub struct Start<'a> {
    /// The cluster.
    pub cfg: &'a ClusterConfig,
    /// Its file (the state's key).
    pub cluster_path: &'a Path,
    /// The model as given.
    pub model: String,
    /// The name the API lists it under.
    pub served_name: String,
    /// The engine's argv with its env words in front.
    pub command: Vec<String>,
    /// Names of the secrets handed over on stdin, in order.
    pub secret_names: Vec<String>,
    /// Their values, in the same order.
    pub secrets: Vec<String>,
    /// The compile cache to remove first (as the shell in the container expands it).
    pub clear_cache: Option<String>,
    /// A check the start program runs first ([`super::program::start`]).
    pub check: Option<String>,
    /// Where the head reaches the API.
    pub api: SocketAddr,
    /// The API key, when one is in force.
    pub api_key: Option<String>,
    /// How many nodes the engine's workers run on (the log names each;
    /// 0: the engine's log does not).
    pub workers: usize,
    /// Where that key comes from (for the `curl` line).
    pub api_key_source: super::api_key::Source,
    /// Say which transport NCCL used.
    pub nccl_debug: bool,
    /// Return once ready, leaving the engine running.
    pub detach: bool,
    /// How long the engine may take to become ready.
    pub timeout: Duration,
    /// Which engine it is.
    pub engine: Engine,
    /// The arguments that start it again, for the record.
    pub args: Option<super::request::Spec>,
    /// A supervisor's restart (refused while a deliberate stop holds the
    /// serve).
    pub restart: bool,
    /// Plan's count of the KV cache, checked against the engine's log.
    pub kv_plan: Option<super::kv_check::PlanKv>,
}

/// Why the engine is not (or no longer) serving: the error `serve` ends with.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotServing(pub String);

/// The log as it arrives: kept lines, worker nodes seen, NCCL's transport,
/// the first fatal line.
pub struct Log {
    follower: Option<Proc>,
    seen: usize,
    kept: VecDeque<String>,
    errors: Vec<String>,
    workers: Vec<Ipv4Addr>,
    /// The first fatal line read.
    pub fatal: Option<String>,
    transport_said: bool,
    nccl_debug: bool,
    /// What the engine said about its KV cache.
    pub kv: EngineKv,
}

impl Log {
    /// The log followed from after its line `seen` (0: from its start).
    pub fn new(nccl_debug: bool, seen: usize) -> Log {
        Log {
            follower: None,
            seen,
            kept: VecDeque::new(),
            errors: Vec::new(),
            workers: Vec::new(),
            fatal: None,
            transport_said: false,
            nccl_debug,
            kv: EngineKv::default(),
        }
    }

    /// The lines that came within `wait`, judged and kept.
    pub fn read(&mut self, head: &Head, wait: Duration, r: &mut dyn Reporter) -> Vec<String> {
        let ended = self
            .follower
            .as_mut()
            .is_none_or(|f| f.try_status().is_some());
        if ended {
            self.follower = head.follow(&format!("+{}", self.seen + 1)).ok();
        }
        let Some(f) = self.follower.as_mut() else {
            std::thread::sleep(wait);
            return Vec::new();
        };
        let lines = f.lines(wait);
        for l in &lines {
            self.seen += 1;
            if self.kept.len() == KEPT_LINES {
                self.kept.pop_front();
            }
            self.kept.push_back(l.clone());
            self.kv.read(l);
            if let Some(e) = log_lines::error(l)
                && self.errors.len() < FIRST_ERRORS
                && !self.errors.iter().any(|k| k == e)
            {
                self.errors.push(e.to_string());
            }
            if let Some(ip) = log_lines::worker_ip(l, head.ip)
                && !self.workers.contains(&ip)
            {
                self.workers.push(ip);
            }
            if self.fatal.is_none() && log_lines::fatal(l) {
                self.fatal = Some(l.clone());
            }
            if self.nccl_debug
                && !self.transport_said
                && let Some(t) = super::plan::nccl_transport(l)
            {
                self.transport_said = true;
                r.note(&format!("halobox: NCCL uses {t}\n"));
            }
        }
        lines
    }

    fn tail(&self, n: usize) -> String {
        let skip = self.kept.len().saturating_sub(n);
        self.kept
            .iter()
            .skip(skip)
            .map(|l| format!("  | {l}\n"))
            .collect()
    }
}

/// Starts the engine and waits until it is ready (or fails, named).
pub fn serve(s: &Start, r: &mut dyn Reporter) -> anyhow::Result<()> {
    let head = Head::of(s.cfg);
    interrupt::catch()?;
    let pid = head.start(
        &s.command,
        &s.secret_names,
        &s.secrets,
        s.clear_cache.as_deref(),
        s.check.as_deref(),
        s.restart,
    )?;
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let record = ServeState {
        cluster: s.cluster_path.display().to_string(),
        engine: s.engine.to_string(),
        model: s.model.clone(),
        endpoint: format!("http://{}", s.api),
        started,
        pid,
        container: head.container.clone(),
        api_key: s.api_key.is_some(),
        detached: s.detach,
        watcher: if s.detach {
            None
        } else {
            state::Process::this()
        },
        args: s.args.clone(),
        kv_plan: s.kv_plan.clone(),
        kv_cache: None,
    };
    if let Err(e) = state::save(s.cluster_path, &record) {
        r.note(&format!(
            "warning: cannot record the serve for `halobox serve status`: {e}\n"
        ));
    }
    r.note(&format!(
        "==> {} started in container {} on the head ({}), pid {pid}; waiting for its API at {}\n",
        s.engine.title(),
        head.container,
        head.label,
        record.endpoint
    ));
    let mut log = Log::new(s.nccl_debug, 0);
    let t0 = Instant::now();
    if let Err(e) = wait_ready(s, &head, &mut log, t0, r) {
        return Err(end(s.cfg, s.cluster_path, &head, &log, e));
    }
    let ready_in = t0.elapsed().as_secs_f64();
    await_workers(s, &head, &mut log, r);
    check_kv(s, record, &log, r);
    print_ready(s, &head, &log, ready_in, r);
    let api = super::golden::Api {
        addr: s.api,
        key: s.api_key.as_deref(),
    };
    let engine = s.engine.to_string();
    if let Some(said) = super::golden::record_first(s.cluster_path, &api, &s.served_name, &engine) {
        r.note(&said);
    }
    Ok(())
}

/// The engine's KV-cache figures against plan's: said, warned about when
/// they differ by more than [`kv_check::WARN_OFF`], and recorded for
/// `serve status`.
fn check_kv(s: &Start, mut record: ServeState, log: &Log, r: &mut dyn Reporter) {
    let c = kv_check::judge(s.kv_plan.as_ref(), &log.kv);
    r.note(&format!("==> KV cache: {}\n", kv_check::render(&c)));
    if let Some(w) = kv_check::warning(&c) {
        r.note(&format!("warning: {w}\n"));
    }
    record.kv_cache = Some(c);
    if let Err(e) = state::save(s.cluster_path, &record) {
        r.note(&format!(
            "warning: cannot record the KV-cache check for `halobox serve status`: {e}\n"
        ));
    }
}

/// Waits until `/health` answers 200 and `/v1/models` lists the model.
fn wait_ready(
    s: &Start,
    head: &Head,
    log: &mut Log,
    t0: Instant,
    r: &mut dyn Reporter,
) -> Result<(), NotServing> {
    let mut last_word = "";
    let mut next_health = Instant::now();
    let mut next_state = Instant::now() + Duration::from_secs(3);
    loop {
        if let Some(sig) = interrupt::arrived() {
            return Err(NotServing(format!(
                "{} before the API answered: {} stopped",
                crate::signals::name(sig),
                s.engine.title()
            )));
        }
        if Instant::now() >= next_health {
            next_health = Instant::now() + HEALTH_EVERY;
            if ready(s) {
                return Ok(());
            }
        }
        let lines = if t0.elapsed() < FOLLOW_AFTER {
            std::thread::sleep(HEALTH_EVERY);
            Vec::new()
        } else {
            log.read(head, HEALTH_EVERY, r)
        };
        for l in lines {
            if let Some(w) = log_lines::progress(&l)
                && w != last_word
            {
                last_word = w;
                r.note(&format!("==> [{:>4} s] {w}\n", t0.elapsed().as_secs()));
            }
        }
        if let Some(f) = &log.fatal {
            return Err(NotServing(format!(
                "{} failed while starting: {}",
                s.engine.title(),
                log_lines::cause(f)
            )));
        }
        if Instant::now() >= next_state {
            next_state = Instant::now() + Duration::from_secs(3);
            if let Ok(EngineState::Exited(_) | EngineState::None) = head.state() {
                log.read(head, Duration::from_millis(500), r);
                return Err(NotServing(format!(
                    "{} exited before its API answered",
                    s.engine.title()
                )));
            }
        }
        if t0.elapsed() > s.timeout {
            return Err(NotServing(format!(
                "{}'s API did not answer within {} s (--timeout)",
                s.engine.title(),
                s.timeout.as_secs()
            )));
        }
    }
}

/// `/health` is 200 and `/v1/models` lists the served name.
fn ready(s: &Start) -> bool {
    let t = Duration::from_secs(3);
    // `/health` and `/v1/models` as vLLM v0.32.0 serves them
    // (vllm/entrypoints/serve/instrumentator/health.py,
    // vllm/entrypoints/openai/models/api_router.py).
    // `/health` needs no key (halobox's middleware and llama-server leave
    // it open); the key goes only to a listener proven this user's.
    let Ok(h) = http::get(s.api, "/health", None, t) else {
        return false;
    };
    if h.status != 200 {
        return false;
    }
    let Ok(m) = super::api_key::get(s.api, "/v1/models", s.api_key.as_deref(), t) else {
        return false;
    };
    m.status == 200 && lists(&m.body, &s.served_name)
}

/// Whether an OpenAI `/v1/models` body lists `name`.
pub fn lists(body: &str, name: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v["data"]
                .as_array()
                .map(|d| d.iter().any(|m| m["id"].as_str() == Some(name)))
        })
        .unwrap_or(false)
}

/// Ray forwards a remote worker's first lines to the head's log a little
/// after the API answers: reads on, for 10 s at most, until every node the
/// workers run on has been named.
fn await_workers(s: &Start, head: &Head, log: &mut Log, r: &mut dyn Reporter) {
    let until = Instant::now() + Duration::from_secs(10);
    while log.workers.len() < s.workers && Instant::now() < until {
        log.read(head, Duration::from_millis(500), r);
    }
}

fn print_ready(s: &Start, head: &Head, log: &Log, secs: f64, r: &mut dyn Reporter) {
    let (what, nodes) = match s.engine {
        Engine::Vllm => (
            "tensor-parallel workers on",
            node_names(s.cfg, head, &log.workers),
        ),
        Engine::LlamaCpp => (
            "layers on the RPC servers of",
            s.cfg.nodes[1..]
                .iter()
                .map(|n| format!("{} ({})", n.label(), n.ip))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    };
    r.out(&format!(
        "serving {} at {} (ready in {secs:.0} s; {what} {nodes})\n",
        s.served_name,
        format_args!("http://{}", s.api)
    ));
    let auth = s.api_key_source.curl_header();
    r.out(&format!(
        "  curl -s http://{}/v1/completions -H 'Content-Type: application/json'{auth} -d '{{\"model\": \"{}\", \"prompt\": \"Hello\", \"max_tokens\": 16, \"temperature\": 0}}'\n",
        s.api, s.served_name
    ));
    if s.detach {
        r.out("  halobox serve status | halobox serve logs -f | halobox serve stop\n");
    } else {
        r.out(&format!(
            "  (Ctrl-C stops {} on every node)\n",
            s.engine.title()
        ));
    }
}

/// The nodes whose workers were seen, by their names in cluster.toml; the
/// head's own when the log named none (one node, or the log did not say).
fn node_names(cfg: &ClusterConfig, head: &Head, workers: &[Ipv4Addr]) -> String {
    let mut names: Vec<String> = cfg
        .nodes
        .iter()
        .filter(|n| n.ip == head.ip || workers.contains(&n.ip))
        .map(|n| format!("{} ({})", n.label(), n.ip))
        .collect();
    for w in workers {
        if !cfg.nodes.iter().any(|n| n.ip == *w) {
            names.push(format!("{w} (not in cluster.toml)"));
        }
    }
    names.join(", ")
}

/// Ends a failed serve: names the node to blame, stops the engine, forgets
/// the serve; the error to report.
pub fn end(
    cfg: &ClusterConfig,
    cluster_path: &Path,
    head: &Head,
    log: &Log,
    e: NotServing,
) -> anyhow::Error {
    let engine = cfg.engine;
    let blame = match engine {
        Engine::Vllm => blame(cfg, head, log),
        Engine::LlamaCpp => super::llama::blame(cfg),
    };
    let stopped = head.stop(grace(engine), false);
    state::remove(cluster_path);
    let mut msg = match &blame {
        Some(b) => format!("{b}: {}", e.0),
        None => e.0,
    };
    msg.push('\n');
    if !log.errors.is_empty() {
        msg.push_str("  the engine's first errors:\n");
        for l in &log.errors {
            msg.push_str(&format!("  | {l}\n"));
        }
    }
    let tail = log.tail(12);
    if !tail.is_empty() {
        msg.push_str(&format!("  the engine's last lines:\n{tail}"));
    }
    match stopped {
        Ok(said) => msg.push_str(&format!(
            "  {} on the head: {said}{}\n",
            engine.title(),
            if engine == Engine::Vllm {
                " (its shm segments removed)"
            } else {
                ""
            }
        )),
        Err(e) => msg.push_str(&format!(
            "  could not stop {} on the head: {e}\n",
            engine.title()
        )),
    }
    msg.push_str(match engine {
        Engine::Vllm => "  hint: `halobox cluster status` shows which nodes Ray still has; `halobox serve logs` shows the whole log; fix the node, then `halobox cluster up` and `halobox serve` again",
        Engine::LlamaCpp => "  hint: `halobox cluster status` shows every node's RPC server; `halobox serve logs` shows the whole log; fix the node, then `halobox cluster down`, `halobox cluster up` and `halobox serve` again",
    });
    anyhow::anyhow!(msg)
}

/// The worker node a failure names: an address of a worker node in the
/// fatal line, else a node Ray no longer lists as alive, asked every 5 s for up
/// to 40 s while Ray notices (its health checks take tens of seconds).
fn blame(cfg: &ClusterConfig, head: &Head, log: &Log) -> Option<String> {
    let workers: Vec<_> = cfg.nodes.iter().filter(|n| n.ip != head.ip).collect();
    if workers.is_empty() {
        return None;
    }
    let cause = log.fatal.as_deref().map(log_lines::cause);
    let named = log
        .kept
        .iter()
        .filter(|l| log_lines::fatal(l))
        .flat_map(|l| log_lines::addresses(l))
        .find_map(|ip| workers.iter().find(|n| n.ip == ip));
    if let Some(n) = named {
        return Some(format!(
            "worker on node {} ({}) lost{}",
            n.label(),
            n.ip,
            cause.map(|c| format!(" ({c})")).unwrap_or_default()
        ));
    }
    for attempt in 0..8 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_secs(5));
        }
        let Ok(nodes) = cluster_run::ray_nodes(cfg, 0, 5) else {
            continue;
        };
        let alive: Vec<String> = nodes.alive().map(|r| r.ip.clone()).collect();
        if let Some(n) = workers.iter().find(|n| !alive.contains(&n.ip.to_string())) {
            return Some(format!(
                "worker on node {} ({}) lost: Ray no longer lists the node as alive",
                n.label(),
                n.ip
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_listing() {
        let body = r#"{"object":"list","data":[{"id":"/models/tiny","object":"model"}]}"#;
        assert!(lists(body, "/models/tiny"));
        assert!(!lists(body, "tiny"));
        assert!(!lists("<html>", "tiny"));
    }
}
