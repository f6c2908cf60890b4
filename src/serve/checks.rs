//! The checks [`super::watcher`] runs on a serving engine, one small type
//! each with its own interval and a pure verdict (unit-tested here):
//! [`Health`] (`/health`, every second), [`Process`] (the engine's process
//! and the held mark, every 3 s), [`Progress`] (vLLM's `/metrics` or
//! llama-server's `/slots`, every 5 s), [`Probe`] (a 1-token completion,
//! every 10 s: stall detection), [`RayTable`] (Ray's node table, every
//! 30 s) and [`Ports`] (the raylets' and RPC servers' ports, every second).
//! The thresholds ([`HEALTH_MISSES`], `--stall-timeout`) are the same for
//! every serve, under a supervisor or not.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::engine::EngineState;
use super::restart_policy::{self, Hung, Sample, Stall};
use crate::cluster::config::{Engine, NodeConfig};
use crate::cluster::plan::RayNodes;

/// `/health` misses in a row that make a failure.
pub const HEALTH_MISSES: u32 = 5;

/// When a check is due next.
#[derive(Debug, Clone)]
pub struct Due {
    every: Duration,
    next: Instant,
}

impl Due {
    /// Every `every`, the first time after `first`.
    pub fn new(every: Duration, first: Duration) -> Due {
        Due {
            every,
            next: Instant::now() + first,
        }
    }

    /// Whether the check is due now; if so, the next one is scheduled.
    pub fn take(&mut self) -> bool {
        let now = Instant::now();
        if now < self.next {
            return false;
        }
        self.next = now + self.every;
        true
    }

    /// Makes the check due at once.
    pub fn now(&mut self) {
        self.next = Instant::now();
    }

    /// Makes the check due one interval from now.
    pub fn again(&mut self) {
        self.next = Instant::now() + self.every;
    }
}

/// The API's `/health`, every second: [`HEALTH_MISSES`] in a row fail.
#[derive(Debug, Clone)]
pub struct Health {
    /// When it is asked next.
    pub due: Due,
    misses: u32,
}

impl Health {
    /// Its interval.
    pub const EVERY: Duration = Duration::from_secs(1);

    /// First asked a second from now.
    pub fn new() -> Health {
        Health {
            due: Due::new(Health::EVERY, Health::EVERY),
            misses: 0,
        }
    }

    /// One answer (`ok`: 200) of `engine`'s API: the failure's cause once
    /// [`HEALTH_MISSES`] came in a row.
    pub fn verdict(&mut self, ok: bool, engine: &str) -> Option<String> {
        self.misses = if ok { 0 } else { self.misses + 1 };
        (self.misses >= HEALTH_MISSES).then(|| {
            format!("{engine}'s API stopped answering /health ({HEALTH_MISSES} checks in a row)")
        })
    }
}

impl Default for Health {
    fn default() -> Health {
        Health::new()
    }
}

/// What one look at the engine's process says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alive {
    /// Running as recorded (or not known now: the other checks see more).
    Yes,
    /// Nothing to watch any more (why): stopped on purpose, or replaced.
    Done(String),
    /// The recorded engine exited (the cause).
    Exited(String),
}

/// The engine's process and the held mark, every 3 s (at once after a
/// `/health` miss).
#[derive(Debug, Clone)]
pub struct Process {
    /// When it is looked at next.
    pub due: Due,
}

impl Process {
    /// Its interval.
    pub const EVERY: Duration = Duration::from_secs(3);

    /// First looked at now.
    pub fn new() -> Process {
        Process {
            due: Due::new(Process::EVERY, Duration::ZERO),
        }
    }

    /// One look (`None`: it could not be taken) at the engine recorded as
    /// `pid`.
    pub fn verdict(look: Option<(EngineState, bool)>, pid: u32, engine: &str) -> Alive {
        match look {
            Some((_, true)) => {
                Alive::Done("a serve stop, cluster down or --ab-transport holds the serve".into())
            }
            Some((EngineState::None, _)) => {
                Alive::Done("the engine was stopped (`halobox serve stop`)".into())
            }
            Some((EngineState::Exited(p), _)) if p == pid => {
                Alive::Exited(format!("{engine} (pid {p}) exited"))
            }
            Some((EngineState::Running(p) | EngineState::Exited(p), _)) if p != pid => Alive::Done(
                format!("another engine (pid {p}) runs in the head's container now"),
            ),
            _ => Alive::Yes,
        }
    }
}

impl Default for Process {
    fn default() -> Process {
        Process::new()
    }
}

/// The progress probe, every 5 s: vLLM's `/metrics` or llama-server's
/// `/slots`, requests running with no new token for `--stall-timeout`.
#[derive(Debug, Clone)]
pub struct Progress {
    /// When it is asked next.
    pub due: Due,
    stall: Stall,
    /// The engine's token count at the last answer.
    pub tokens: Option<u64>,
}

impl Progress {
    /// Its interval.
    pub const EVERY: Duration = Duration::from_secs(5);

    /// First asked 5 s from now.
    pub fn new() -> Progress {
        Progress {
            due: Due::new(Progress::EVERY, Progress::EVERY),
            stall: Stall::default(),
            tokens: None,
        }
    }

    /// The route `engine` counts its tokens on, and its parser.
    pub fn route(engine: Engine) -> (&'static str, fn(&str) -> Option<Sample>) {
        match engine {
            Engine::Vllm => ("/metrics", restart_policy::vllm_sample),
            Engine::LlamaCpp => ("/slots", restart_policy::llama_sample),
        }
    }

    /// One `sample` (`None`: no answer) at `now` since the watch began:
    /// the failure's cause once requests ran `stall_after` with no token.
    pub fn verdict(
        &mut self,
        sample: Option<Sample>,
        now: Duration,
        stall_after: Duration,
    ) -> Option<String> {
        self.tokens = sample.map(|s| s.tokens);
        self.stall.look(sample, now, stall_after).then(|| {
            format!(
                "requests ran with no new token for {} s (--stall-timeout)",
                stall_after.as_secs()
            )
        })
    }
}

impl Default for Progress {
    fn default() -> Progress {
        Progress::new()
    }
}

/// The 1-token completion, every 10 s: llama-server's must finish within
/// [`super::llama::PROBE_TIMEOUT`] (a node to blame makes it a failure);
/// vLLM's, sent once the engine has generated a token, must not hang for
/// `--stall-timeout` while the token count stands still ([`Hung`]).
#[derive(Debug)]
pub struct Probe {
    /// When the next one starts.
    pub due: Due,
    hung: Hung,
}

impl Probe {
    /// Its interval (from the end of one to the start of the next).
    pub const EVERY: Duration = Duration::from_secs(10);

    /// The first one 10 s from now.
    pub fn new() -> Probe {
        Probe {
            due: Due::new(Probe::EVERY, Probe::EVERY),
            hung: Hung::default(),
        }
    }

    /// llama-server's probe `answered` or not, with the node to blame:
    /// that blame when it did not (every slot busy alone is no failure).
    pub fn llama_verdict(answered: bool, blame: Option<String>) -> Option<String> {
        if answered { None } else { blame }
    }

    /// Whether vLLM's next probe may start: none under way, the engine
    /// warmed up (a token generated), and due.
    pub fn vllm_may_start(&mut self, tokens: Option<u64>) -> bool {
        !self.hung.probing() && tokens.is_some_and(|t| t > 0) && self.due.take()
    }

    /// vLLM's probe started at `now` with the token count `tokens`.
    pub fn started(&mut self, tokens: Option<u64>, now: Duration) {
        self.hung.started(tokens, now);
    }

    /// vLLM's probe ended; the next is due an interval later.
    pub fn finished(&mut self) {
        self.hung.finished();
        self.due.again();
    }

    /// vLLM's probe under way at `now`, the token count `tokens`: the
    /// failure's cause once it hung `stall_after`.
    pub fn vllm_verdict(
        &mut self,
        tokens: Option<u64>,
        now: Duration,
        stall_after: Duration,
    ) -> Option<String> {
        self.hung.look(tokens, now, stall_after).then(|| {
            format!(
                "a 1-token completion did not finish within {} s (--stall-timeout) and no token was generated",
                stall_after.as_secs()
            )
        })
    }
}

impl Default for Probe {
    fn default() -> Probe {
        Probe::new()
    }
}

/// A node's raylet: `node X (IP)` and where it listens.
pub type Raylet = (String, SocketAddr);

/// Ray's node table, every 30 s (vLLM split over every node): vLLM notices
/// a lost worker only once Ray tells it, or at its next request.
#[derive(Debug, Clone)]
pub struct RayTable {
    /// When it is read next.
    pub due: Due,
}

impl RayTable {
    /// Its interval.
    pub const EVERY: Duration = Duration::from_secs(30);

    /// First read now.
    pub fn new() -> RayTable {
        RayTable {
            due: Due::new(RayTable::EVERY, Duration::ZERO),
        }
    }

    /// The first of `nodes` the `table` does not list alive (`node X (IP):
    /// why`), and the raylet of every node before it that it does.
    pub fn verdict(nodes: &[NodeConfig], table: &RayNodes) -> (Option<String>, Vec<Raylet>) {
        let mut raylets = Vec::new();
        for n in nodes {
            let ip = n.ip.to_string();
            let at = format!("node {} ({})", n.label(), n.ip);
            match table.alive().find(|r| r.ip == ip) {
                Some(r) => {
                    if let Some(port) = r.raylet_port.filter(|p| *p > 0) {
                        raylets.push((at, SocketAddr::from((n.ip, port))));
                    }
                }
                None => {
                    let why = if table.nodes.iter().any(|r| r.ip == ip && r.unreachable) {
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
}

impl Default for RayTable {
    fn default() -> RayTable {
        RayTable::new()
    }
}

/// The worker ports, every second: llama.cpp's RPC servers, vLLM's
/// raylets (a refused connection: the node is up, its server gone). A
/// server that died is seen within the second, not at the next probe
/// (llama-server itself notices only when it next computes).
#[derive(Debug, Clone)]
pub struct Ports {
    /// When they are tried next.
    pub due: Due,
}

impl Ports {
    /// Its interval.
    pub const EVERY: Duration = Duration::from_secs(1);

    /// First tried a second from now.
    pub fn new() -> Ports {
        Ports {
            due: Due::new(Ports::EVERY, Ports::EVERY),
        }
    }

    /// The first of `raylets` whose port `refused` says refuses a
    /// connection (`node X (IP): why`).
    pub fn raylet_verdict(
        raylets: &[Raylet],
        refused: impl Fn(SocketAddr) -> bool,
    ) -> Option<String> {
        raylets.iter().find_map(|(at, addr)| {
            refused(*addr).then(|| {
                format!(
                    "{at}: its raylet (port {}) refuses connections",
                    addr.port()
                )
            })
        })
    }
}

impl Default for Ports {
    fn default() -> Ports {
        Ports::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::plan::RayNode;

    #[test]
    fn health_fails_after_the_misses_in_a_row() {
        let mut h = Health::new();
        for _ in 1..HEALTH_MISSES {
            assert_eq!(h.verdict(false, "vLLM"), None);
        }
        assert_eq!(h.verdict(true, "vLLM"), None, "an answer starts again");
        for _ in 1..HEALTH_MISSES {
            assert_eq!(h.verdict(false, "vLLM"), None);
        }
        let why = h.verdict(false, "vLLM").expect("the fifth miss");
        assert_eq!(
            why,
            "vLLM's API stopped answering /health (5 checks in a row)"
        );
    }

    #[test]
    fn process_verdicts() {
        let v = |look, pid| Process::verdict(look, pid, "vLLM");
        assert_eq!(v(Some((EngineState::Running(7), false)), 7), Alive::Yes);
        assert_eq!(v(None, 7), Alive::Yes, "no look: the other checks");
        assert!(
            matches!(v(Some((EngineState::Running(7), true)), 7), Alive::Done(w) if w.contains("holds"))
        );
        assert!(
            matches!(v(Some((EngineState::None, false)), 7), Alive::Done(w) if w.contains("serve stop"))
        );
        assert_eq!(
            v(Some((EngineState::Exited(7), false)), 7),
            Alive::Exited("vLLM (pid 7) exited".into())
        );
        assert!(
            matches!(v(Some((EngineState::Running(8), false)), 7), Alive::Done(w) if w.contains("pid 8"))
        );
        assert!(
            matches!(v(Some((EngineState::Exited(8), false)), 7), Alive::Done(w) if w.contains("pid 8"))
        );
    }

    #[test]
    fn progress_fails_on_requests_without_tokens() {
        let mut p = Progress::new();
        let s = |running, tokens| Some(Sample { running, tokens });
        let t = Duration::from_secs(120);
        assert_eq!(p.verdict(s(1, 10), Duration::from_secs(0), t), None);
        assert_eq!(p.tokens, Some(10));
        assert_eq!(p.verdict(s(1, 10), Duration::from_secs(119), t), None);
        let why = p.verdict(s(1, 10), Duration::from_secs(120), t).unwrap();
        assert!(why.contains("no new token for 120 s"), "{why}");
        let mut p = Progress::new();
        assert_eq!(p.verdict(s(0, 10), Duration::from_secs(0), t), None);
        assert_eq!(
            p.verdict(s(0, 10), Duration::from_secs(500), t),
            None,
            "idle"
        );
        assert_eq!(Progress::route(Engine::Vllm).0, "/metrics");
        assert_eq!(Progress::route(Engine::LlamaCpp).0, "/slots");
    }

    #[test]
    fn probe_verdicts() {
        assert_eq!(Probe::llama_verdict(true, Some("node b".into())), None);
        assert_eq!(Probe::llama_verdict(false, None), None, "busy slots");
        assert_eq!(
            Probe::llama_verdict(false, Some("node b (10.0.0.2): frozen".into())),
            Some("node b (10.0.0.2): frozen".into())
        );
        let mut p = Probe::new();
        p.due.now();
        assert!(!p.vllm_may_start(Some(0)), "not before a token");
        assert!(p.vllm_may_start(Some(3)));
        let t = Duration::from_secs(60);
        p.started(Some(3), Duration::ZERO);
        p.due.now();
        assert!(!p.vllm_may_start(Some(3)), "one at a time");
        assert_eq!(p.vllm_verdict(Some(4), Duration::from_secs(50), t), None);
        assert_eq!(p.vllm_verdict(Some(4), Duration::from_secs(100), t), None);
        let why = p
            .vllm_verdict(Some(4), Duration::from_secs(110), t)
            .unwrap();
        assert!(why.contains("within 60 s"), "{why}");
        p.finished();
        assert_eq!(p.vllm_verdict(Some(4), Duration::from_secs(999), t), None);
    }

    fn node(name: &str, ip: [u8; 4]) -> NodeConfig {
        toml::from_str(&format!(
            "name = \"{name}\"\nssh = \"{name}\"\nip = \"{}.{}.{}.{}\"",
            ip[0], ip[1], ip[2], ip[3]
        ))
        .unwrap()
    }

    fn ray(ip: &str, alive: bool, unreachable: bool, port: Option<u16>) -> RayNode {
        RayNode {
            ip: ip.into(),
            id: format!("id-{ip}"),
            alive,
            unreachable,
            raylet_port: port,
            head: false,
            resources: Default::default(),
        }
    }

    #[test]
    fn ray_table_names_the_lost_node_and_the_raylets() {
        let nodes = [node("a", [10, 0, 0, 1]), node("b", [10, 0, 0, 2])];
        let mut table = RayNodes {
            nodes: vec![
                ray("10.0.0.1", true, false, Some(6000)),
                ray("10.0.0.2", true, false, Some(6001)),
            ],
            ..RayNodes::default()
        };
        let (lost, raylets) = RayTable::verdict(&nodes, &table);
        assert_eq!(lost, None);
        assert_eq!(raylets.len(), 2);
        assert_eq!(raylets[1].0, "node b (10.0.0.2)");
        assert_eq!(raylets[1].1, "10.0.0.2:6001".parse().unwrap());
        table.nodes[1] = ray("10.0.0.2", false, false, None);
        let (lost, _) = RayTable::verdict(&nodes, &table);
        assert_eq!(
            lost.as_deref(),
            Some("node b (10.0.0.2): Ray no longer lists it as alive")
        );
        table.nodes[1] = ray("10.0.0.2", false, true, None);
        let (lost, _) = RayTable::verdict(&nodes, &table);
        assert!(lost.unwrap().contains("its raylet does not answer"));
    }

    #[test]
    fn ports_name_the_refused_raylet() {
        let raylets = vec![
            (
                "node a (10.0.0.1)".to_string(),
                "10.0.0.1:6000".parse().unwrap(),
            ),
            (
                "node b (10.0.0.2)".to_string(),
                "10.0.0.2:6001".parse().unwrap(),
            ),
        ];
        assert_eq!(Ports::raylet_verdict(&raylets, |_| false), None);
        assert_eq!(
            Ports::raylet_verdict(&raylets, |a| a.port() == 6001).as_deref(),
            Some("node b (10.0.0.2): its raylet (port 6001) refuses connections")
        );
    }

    #[test]
    fn due_takes_once_an_interval() {
        let mut d = Due::new(Duration::from_secs(60), Duration::ZERO);
        assert!(d.take());
        assert!(!d.take());
        d.now();
        assert!(d.take());
    }
}
