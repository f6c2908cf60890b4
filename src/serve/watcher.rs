//! The one loop that watches a serving engine, for a plain foreground
//! `serve` and every supervisor alike: the log read and judged (copied
//! through in the foreground), then each of [`super::checks`]' checks when
//! it is due. It returns how watching ended ([`Seen`]), a failure blamed on
//! a node where one is to blame; what to do about it is
//! [`crate::fleet::supervisor`]'s.

use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use super::checks::{Alive, Health, Ports, Probe, Process, Progress, RayTable, Raylet};
use super::engine::Head;
use super::launch::Log;
use super::request::Spec;
use super::restart_policy::Check;
use super::state::ServeState;
use super::{api_key, interrupt, llama, log_lines};
use crate::cluster::config::{ClusterConfig, Engine};
use crate::http;
use crate::reporter::Reporter;

/// A failure one of the checks saw.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The check that saw it.
    pub check: Check,
    /// The node to blame (`node X (IP)`, else the head).
    pub node: Option<String>,
    /// What the check saw.
    pub what: String,
    /// Why that node is to blame, when a check of it said.
    pub why: Option<String>,
}

impl Failure {
    /// What the check saw and why the node is to blame: the event's cause.
    pub fn cause(&self) -> String {
        match &self.why {
            Some(why) => format!("{}: {why}", self.what),
            None => self.what.clone(),
        }
    }
}

/// How watching the engine ended.
pub enum Seen {
    /// Nothing to watch any more (why).
    Done(String),
    /// A signal (its number).
    Signal(i32),
    /// A failure.
    Failed(Failure),
}

/// The serve to watch.
pub struct Watched<'a> {
    /// The cluster.
    pub cfg: &'a ClusterConfig,
    /// The head's container.
    pub head: &'a Head,
    /// The serve as recorded (its endpoint and engine pid).
    pub rec: &'a ServeState,
    /// The serve as asked (`--tp`, `--stall-timeout`).
    pub spec: &'a Spec,
    /// The API key the checks send.
    pub key: Option<&'a str>,
    /// Copy the engine's log through.
    pub foreground: bool,
}

/// The time now, for the watcher's and the supervisor's notes.
pub fn stamp() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Watches the recorded engine, its log read through `log`, until it
/// fails, is stopped or held, or a signal arrives.
pub fn watch(w: &Watched, log: &mut Log, r: &mut dyn Reporter) -> Seen {
    let Ok(api) = w.rec.endpoint.trim_start_matches("http://").parse() else {
        return Seen::Done(format!(
            "the recorded endpoint {} is not IP:PORT",
            w.rec.endpoint
        ));
    };
    let mut c = Checks::new(w, api);
    loop {
        if let Some(sig) = interrupt::arrived() {
            return Seen::Signal(sig);
        }
        for l in log.read(w.head, Duration::from_millis(500), r) {
            if w.foreground {
                r.out(&format!("{l}\n"));
            }
        }
        if let Some(f) = &log.fatal {
            return failed(w.cfg, Check::Log, log_lines::cause(f));
        }
        if let Some(seen) = c.round(w, r) {
            return seen;
        }
    }
}

/// The checks over one watch.
struct Checks {
    api: SocketAddr,
    t0: Instant,
    /// vLLM split over every node: with fewer GPUs than nodes, which nodes
    /// vLLM uses is Ray's choice, and a lost idle node is no failure.
    split: bool,
    health: Health,
    process: Process,
    progress: Progress,
    probe: Probe,
    ray: RayTable,
    ports: Ports,
    raylets: Vec<Raylet>,
    vllm_probe: Option<Receiver<()>>,
}

impl Checks {
    fn new(w: &Watched, api: SocketAddr) -> Checks {
        let cfg = w.cfg;
        Checks {
            api,
            t0: Instant::now(),
            split: cfg.engine == Engine::Vllm
                && cfg.nodes.len() > 1
                && w.spec
                    .tp
                    .is_none_or(|t| usize::try_from(t).is_ok_and(|t| t >= cfg.nodes.len())),
            health: Health::new(),
            process: Process::new(),
            progress: Progress::new(),
            probe: Probe::new(),
            ray: RayTable::new(),
            ports: Ports::new(),
            raylets: Vec::new(),
            vllm_probe: None,
        }
    }

    /// Every check that is due, in turn; the first that ends the watch.
    fn round(&mut self, w: &Watched, r: &mut dyn Reporter) -> Option<Seen> {
        if let Some(s) = self.process(w) {
            return Some(s);
        }
        if let Some(s) = self.health(w) {
            return Some(s);
        }
        if let Some(s) = self.rpc_ports(w) {
            return Some(s);
        }
        if let Some(s) = self.llama_probe(w, r) {
            return Some(s);
        }
        if let Some(s) = self.ray_table(w) {
            return Some(s);
        }
        if let Some(s) = self.raylet_ports() {
            return Some(s);
        }
        if let Some(s) = self.vllm_probe(w) {
            return Some(s);
        }
        self.progress(w, r)
    }

    fn process(&mut self, w: &Watched) -> Option<Seen> {
        if !self.process.due.take() {
            return None;
        }
        match Process::verdict(w.head.look().ok(), w.rec.pid, w.cfg.engine.title()) {
            Alive::Yes => None,
            Alive::Done(why) => Some(Seen::Done(why)),
            Alive::Exited(what) => Some(failed(w.cfg, Check::Exited, what)),
        }
    }

    fn health(&mut self, w: &Watched) -> Option<Seen> {
        if !self.health.due.take() {
            return None;
        }
        // `/health` needs no key: none is sent to whatever listens.
        let ok = http::get(self.api, "/health", None, Duration::from_secs(5))
            .is_ok_and(|h| h.status == 200);
        if !ok {
            // The process is looked at now, not at its next turn: an
            // engine that died is seen within a second.
            self.process.due.now();
        }
        let what = self.health.verdict(ok, w.cfg.engine.title())?;
        Some(failed(w.cfg, Check::Health, what))
    }

    fn rpc_ports(&mut self, w: &Watched) -> Option<Seen> {
        if w.cfg.engine != Engine::LlamaCpp || !self.ports.due.take() {
            return None;
        }
        let n = llama::refused(w.cfg)?;
        let what = format!("port {} refused a connection", w.cfg.rpc_port);
        let at = format!("node {} ({})", n.label(), n.ip);
        let b = llama::blame(w.cfg)
            .filter(|b| b.starts_with(&format!("{at}: ")))
            .unwrap_or_else(|| format!("{at}: no RPC server listens there"));
        Some(Seen::Failed(blamed(Check::Rpc, &b, what)))
    }

    fn llama_probe(&mut self, w: &Watched, r: &mut dyn Reporter) -> Option<Seen> {
        if w.cfg.engine != Engine::LlamaCpp || !self.probe.due.take() {
            return None;
        }
        let answered = llama::answers(self.api, w.key).unwrap_or_else(|why| {
            r.note(&format!("{} {why}\n", stamp()));
            true
        });
        self.probe.due.again();
        let blame = (!answered).then(|| llama::blame(w.cfg)).flatten();
        let secs = llama::PROBE_TIMEOUT.as_secs();
        if !answered && blame.is_none() {
            r.note(&format!(
                "{} a 1-token completion took over {secs} s, but every node's RPC server runs (busy slots?)\n",
                stamp()
            ));
        }
        let b = Probe::llama_verdict(answered, blame)?;
        let what = format!("llama-server did not finish a 1-token completion within {secs} s");
        Some(Seen::Failed(blamed(Check::Probe, &b, what)))
    }

    fn ray_table(&mut self, w: &Watched) -> Option<Seen> {
        if !self.split || !self.ray.due.take() {
            return None;
        }
        let (lost, found) = ray_look(w.cfg);
        self.ray.due.again();
        if let Some(b) = lost {
            return Some(ray_failed(&b));
        }
        self.raylets = found;
        None
    }

    fn raylet_ports(&mut self) -> Option<Seen> {
        if !self.split || !self.ports.due.take() {
            return None;
        }
        Ports::raylet_verdict(&self.raylets, llama::port_refused).map(|b| ray_failed(&b))
    }

    fn vllm_probe(&mut self, w: &Watched) -> Option<Seen> {
        if w.cfg.engine != Engine::Vllm {
            return None;
        }
        if self
            .vllm_probe
            .as_ref()
            .is_some_and(|rx| !matches!(rx.try_recv(), Err(TryRecvError::Empty)))
        {
            self.vllm_probe = None;
            self.probe.finished();
        }
        let tokens = self.progress.tokens;
        // Not before the engine has generated a token: the first request's
        // steps warm it up (compiled kernels), and a probe behind them
        // would count that as a hang.
        if self.vllm_probe.is_none() && self.probe.vllm_may_start(tokens) {
            self.vllm_probe = Some(send_probe(self.api, w.key, w.spec.stall()));
            self.probe.started(tokens, self.t0.elapsed());
        }
        let what = self
            .probe
            .vllm_verdict(tokens, self.t0.elapsed(), w.spec.stall())?;
        Some(failed(w.cfg, Check::Stall, what))
    }

    fn progress(&mut self, w: &Watched, r: &mut dyn Reporter) -> Option<Seen> {
        if !self.progress.due.take() {
            return None;
        }
        let (route, parse) = Progress::route(w.cfg.engine);
        let sample = match api_key::get(self.api, route, w.key, Duration::from_secs(5)) {
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
        let what = self
            .progress
            .verdict(sample, self.t0.elapsed(), w.spec.stall())?;
        Some(failed(w.cfg, Check::Stall, what))
    }
}

/// A failure of `check` that saw `what`, blamed on a node where one is to
/// blame, else on the head.
fn failed(cfg: &ClusterConfig, check: Check, what: String) -> Seen {
    let blame = match cfg.engine {
        Engine::LlamaCpp => llama::blame(cfg),
        Engine::Vllm => ray_look(cfg).0,
    };
    match blame {
        Some(b) => Seen::Failed(blamed(check, &b, what)),
        None => Seen::Failed(Failure {
            check,
            node: Some(format!("head {} ({})", cfg.head().label(), cfg.head().ip)),
            what,
            why: None,
        }),
    }
}

/// A failure whose node `blame` names (`node X (IP): why`).
fn blamed(check: Check, blame: &str, what: String) -> Failure {
    let (node, why) = blame.split_once(": ").unwrap_or((blame, ""));
    let why: String = why.chars().take(300).collect();
    Failure {
        check,
        node: Some(node.to_string()),
        what,
        why: (!why.is_empty()).then_some(why),
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

/// One look at Ray's table ([`RayTable::verdict`]); nothing lost and no
/// raylet when it cannot be read (a head that is gone is the other checks'
/// to see).
fn ray_look(cfg: &ClusterConfig) -> (Option<String>, Vec<Raylet>) {
    match crate::cluster::run::ray_nodes(cfg, 0, 5) {
        Ok(t) if t.error.is_none() => RayTable::verdict(&cfg.nodes, &t),
        _ => (None, Vec::new()),
    }
}

/// A 1-token completion sent to vLLM's API in a thread of its own (it may
/// wait as long as the engine hangs); the receiver hears once it is over,
/// answered or not.
fn send_probe(api: SocketAddr, key: Option<&str>, stall_after: Duration) -> Receiver<()> {
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
