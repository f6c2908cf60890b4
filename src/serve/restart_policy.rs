//! `serve --restart on-failure[:MAX]`, decided without effects: the policy
//! as given and recorded, the restarts it allows in its window, the events
//! a supervisor records (when, which check, which node, how long until
//! serving again), and the progress probe's judgement (requests running
//! but no token generated for `--stall-timeout`). The supervisor that acts
//! on them is [`crate::fleet::supervisor`](mod@crate::fleet::supervisor)'s.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The restarts allowed in one [`WINDOW_S`] when `on-failure` names none.
pub const DEFAULT_MAX: u32 = 5;
/// The window the restarts are counted in (seconds): 10 minutes.
pub const WINDOW_S: u64 = 600;
/// `--stall-timeout`'s default (seconds).
pub const DEFAULT_STALL_S: u64 = 120;
/// The most restarts one window may allow.
const MOST: u32 = 100;

/// `--restart on-failure[:MAX]`: restart after a failure, at most `max`
/// times in [`WINDOW_S`] seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Restarts allowed in the window.
    pub max: u32,
    /// The window, in seconds.
    pub window_s: u64,
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> Result<Policy, String> {
        let bad = || {
            format!(
                "{s:?}: --restart takes `on-failure` or `on-failure:MAX` (MAX 1..={MOST} restarts in {} minutes)",
                WINDOW_S / 60
            )
        };
        let max = match s.strip_prefix("on-failure") {
            Some("") => DEFAULT_MAX,
            Some(rest) => rest
                .strip_prefix(':')
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|n| (1..=MOST).contains(n))
                .ok_or_else(bad)?,
            None => return Err(bad()),
        };
        Ok(Policy {
            max,
            window_s: WINDOW_S,
        })
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "on-failure:{}", self.max)
    }
}

impl Policy {
    /// The policy in words, for `--dry-run` and `serve status`.
    pub fn describe(&self, stall_s: u64) -> String {
        format!(
            "--restart {self}: a supervisor restarts the serve after a failure (the log judged, /health, the 1-token probe and the RPC ports of llama.cpp, requests running with no token for {stall_s} s), at most {} times in {} minutes, then gives up and leaves nothing running",
            self.max,
            self.window_s / 60
        )
    }
}

/// Which check saw the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// A fatal line in the engine's log.
    Log,
    /// `/health` failed several times in a row.
    Health,
    /// The engine's process ended.
    Exited,
    /// llama.cpp's 1-token completion did not finish in time.
    Probe,
    /// A llama.cpp RPC server's port refused a connection (its server is
    /// gone while its node is up).
    Rpc,
    /// A node of vLLM's split is no longer alive in Ray (its container or
    /// machine is gone), seen even while no request runs.
    Ray,
    /// Requests ran but no token came for `--stall-timeout`.
    Stall,
    /// The start again failed.
    Start,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Check::Log => "the log",
            Check::Health => "/health",
            Check::Exited => "the process",
            Check::Probe => "the 1-token probe",
            Check::Rpc => "the RPC port",
            Check::Ray => "Ray's node table",
            Check::Stall => "the progress probe",
            Check::Start => "the start",
        })
    }
}

/// What became of one restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Under way: the engine stopped, the nodes awaited, the start.
    Restarting,
    /// Serving again.
    Serving,
    /// The start again failed (why).
    Failed(String),
    /// Past the policy's limit: given up, nothing left running.
    GaveUp,
}

/// One failure the supervisor acted on. Never holds a secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When it was seen (seconds since the epoch).
    pub at: u64,
    /// The check that saw it.
    pub check: Check,
    /// The node to blame, when one is.
    #[serde(default)]
    pub node: Option<String>,
    /// What the check saw.
    pub cause: String,
    /// Seconds from seeing it until the API answered again.
    #[serde(default)]
    pub serving_again_s: Option<f64>,
    /// What became of it.
    pub outcome: Outcome,
}

impl Event {
    /// The event in one line.
    pub fn line(&self) -> String {
        format!(
            "{}{} ({}){}",
            self.node
                .as_deref()
                .map(|n| format!("{n}: "))
                .unwrap_or_default(),
            self.cause,
            self.check,
            match (&self.outcome, self.serving_again_s) {
                (Outcome::Serving, Some(s)) => format!("; serving again after {s:.0} s"),
                (Outcome::Restarting, _) => "; restarting".into(),
                (Outcome::Failed(why), _) => format!("; the start again failed: {why}"),
                (Outcome::GaveUp, _) => "; gave up".into(),
                _ => String::new(),
            }
        )
    }
}

/// A serve's restarts, as kept in its state folder.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Restarts {
    /// The policy they were made under.
    #[serde(default)]
    pub policy: Option<Policy>,
    /// Every failure acted on, oldest first.
    pub events: Vec<Event>,
    /// Why the supervisor gave up, once it did.
    #[serde(default)]
    pub gave_up: Option<String>,
}

impl Restarts {
    /// The restarts made: every event acted on but the ones given up.
    pub fn made(&self) -> u64 {
        self.events
            .iter()
            .filter(|e| e.outcome != Outcome::GaveUp)
            .count() as u64
    }
}

/// What to do about a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Restart: this is restart `n` of the window.
    Restart(u32),
    /// Give up, and why (the words `serve status` and the log show).
    GiveUp(String),
}

/// Whether a failure at `now` may be restarted, given the restarts
/// already made (`events`, whose restarts in the window count).
pub fn decide(policy: &Policy, events: &[Event], now: u64) -> Decision {
    let since = now.saturating_sub(policy.window_s);
    let made = events
        .iter()
        .filter(|e| e.at >= since && e.outcome != Outcome::GaveUp)
        .count();
    let made = u32::try_from(made).unwrap_or(u32::MAX);
    if made >= policy.max {
        return Decision::GiveUp(format!(
            "gave up: {made} restart(s) in the last {} minutes (--restart {policy}); nothing is left running\n  hint: `halobox serve logs` and `halobox serve status --json` show why; fix it, then `halobox serve` again",
            policy.window_s / 60
        ));
    }
    Decision::Restart(made + 1)
}

/// How long an engine stopped for a restart gets between SIGTERM and
/// SIGKILL, `None` for its usual grace. After a node of vLLM's split is
/// lost (the Ray check), vLLM's shutdown waits on actors that will never
/// answer: `scripts/bench-recovery.sh --engine vllm --faults raylet` saw the
/// whole 20 s grace spent there, so 2 s are given instead.
pub fn restart_grace(check: Check) -> Option<Duration> {
    (check == Check::Ray).then_some(Duration::from_secs(2))
}

/// How long to wait before asking the nodes again, after `attempt` asks
/// (2 s, doubled each time, at most 30 s).
pub fn backoff(attempt: u32) -> Duration {
    Duration::from_secs(2u64.saturating_mul(1 << attempt.min(4)).min(30))
}

/// How long to wait before the next restart after `failed` starts in a
/// row failed: none after a serve that ran, then [`backoff`] (2 s, 4 s,
/// 8 s, 16 s, then 30 s), so a start that fails at once does not spend
/// every restart of the window in a second.
pub fn pause_before(failed: u32) -> Duration {
    match failed {
        0 => Duration::ZERO,
        n => backoff(n - 1),
    }
}

/// What to do about the API port before a restart's start, the engine
/// being stopped: anything still listening there is not this serve's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Port {
    /// Free: start.
    Start,
    /// Taken by another process: wait and look again, no restart spent.
    Wait,
    /// Still taken after the policy's window: give up (why).
    GiveUp(String),
}

/// The verdict on the API port `port`, `taken` or not, after waiting
/// `waited` for it to free, under `policy`; `engine` names the serve's
/// engine in the words.
pub fn port_verdict(
    taken: bool,
    waited: Duration,
    policy: &Policy,
    port: u16,
    engine: &str,
) -> Port {
    if !taken {
        return Port::Start;
    }
    if waited < Duration::from_secs(policy.window_s) {
        return Port::Wait;
    }
    Port::GiveUp(format!(
        "gave up: port {port} on the head stayed taken by another process (not this serve's {engine}) for {} minutes; nothing is left running\n  hint: `ss -ltnp 'sport = :{port}'` shows who holds it; stop it, then `halobox serve` again (or serve on another --port)",
        policy.window_s / 60
    ))
}

/// What the supervisor says while the API port is taken by another
/// process.
pub fn not_ours(port: u16, engine: &str) -> String {
    format!(
        "port {port} on the head is taken by another process, not this serve's {engine}: waiting for it to free (no restart spent)\n  hint: `ss -ltnp 'sport = :{port}'` shows who holds it"
    )
}

/// The progress an engine reports: requests running, tokens generated so
/// far (a counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Requests being generated now.
    pub running: u64,
    /// Tokens generated (a counter that only grows while it runs).
    pub tokens: u64,
}

/// The sum of every series of the Prometheus metric `name` in `text`.
fn metric(text: &str, name: &str) -> Option<f64> {
    let mut sum = None;
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = l.trim().rsplit_once(' ') else {
            continue;
        };
        if series.split('{').next() == Some(name)
            && let Ok(v) = value.parse::<f64>()
        {
            *sum.get_or_insert(0.0) += v;
        }
    }
    sum
}

/// vLLM's `/metrics`: `vllm:num_requests_running` and
/// `vllm:generation_tokens_total` (vllm/v1/metrics/loggers.py).
pub fn vllm_sample(text: &str) -> Option<Sample> {
    let running = metric(text, "vllm:num_requests_running")?;
    let tokens = metric(text, "vllm:generation_tokens_total")?;
    Some(Sample {
        running: running.max(0.0) as u64,
        tokens: tokens.max(0.0) as u64,
    })
}

/// llama-server's `/slots`: the slots `is_processing`, and the tokens each
/// decoded (`n_decoded`, at the top of a slot or in its `next_token`, as
/// llama-server versions put it).
pub fn llama_sample(json: &str) -> Option<Sample> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let slots = v.as_array()?;
    let mut s = Sample {
        running: 0,
        tokens: 0,
    };
    for slot in slots {
        if slot["is_processing"].as_bool() == Some(true) {
            s.running += 1;
        }
        let nt = &slot["next_token"];
        let decoded = slot["n_decoded"]
            .as_u64()
            .or_else(|| nt["n_decoded"].as_u64())
            .or_else(|| nt[0]["n_decoded"].as_u64())
            .unwrap_or(0);
        s.tokens += decoded;
    }
    Some(s)
}

/// The progress probe's memory: since when requests ran with the same
/// token count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stall {
    /// The token count and when it was first seen with requests running.
    since: Option<(u64, Duration)>,
}

impl Stall {
    /// Takes one look at `now` (`None`: the engine did not answer the
    /// probe, which counts as no token); true when requests have run
    /// without a new token for `timeout`.
    pub fn look(&mut self, sample: Option<Sample>, now: Duration, timeout: Duration) -> bool {
        match sample {
            Some(s) if s.running == 0 => {
                self.since = None;
                false
            }
            Some(s) => match self.since {
                Some((tokens, t)) if tokens == s.tokens => now.saturating_sub(t) >= timeout,
                _ => {
                    self.since = Some((s.tokens, now));
                    false
                }
            },
            None => self
                .since
                .is_some_and(|(_, t)| now.saturating_sub(t) >= timeout),
        }
    }
}

/// The 1-token probe of vLLM (sent once the engine has generated a token,
/// so not during its warm-up), which publishes its counts after each step:
/// a step that never ends (a worker frozen) can leave no request counted
/// as running, so [`Stall`] alone does not see it. A probe still under way
/// after the stall timeout, while the token count did not move, is a stall;
/// tokens that move (a busy engine, the probe queued behind others) start
/// the wait again.
#[derive(Debug, Default)]
pub struct Hung {
    /// The token count when the probe started (or last moved), and when.
    since: Option<(Option<u64>, Duration)>,
}

impl Hung {
    /// A probe started at `now` with the token count `tokens`.
    pub fn started(&mut self, tokens: Option<u64>, now: Duration) {
        self.since = Some((tokens, now));
    }

    /// The probe finished (answered or failed: either is not a hang).
    pub fn finished(&mut self) {
        self.since = None;
    }

    /// Whether a probe is under way.
    pub fn probing(&self) -> bool {
        self.since.is_some()
    }

    /// True when the probe under way has waited `timeout` with the token
    /// count `tokens` (the latest seen) unmoved.
    pub fn look(&mut self, tokens: Option<u64>, now: Duration, timeout: Duration) -> bool {
        match self.since {
            None => false,
            Some((before, _)) if tokens.is_some() && before.is_some() && tokens != before => {
                self.since = Some((tokens, now));
                false
            }
            Some((_, t)) => now.saturating_sub(t) >= timeout,
        }
    }
}

/// `serve status`'s line about restarts (`None`: none made, none allowed).
pub fn summary(r: &Restarts) -> Option<String> {
    if let Some(g) = &r.gave_up {
        return Some(g.lines().next().unwrap_or(g).to_string());
    }
    let last = r.events.last();
    match (r.policy, last) {
        (None, None) => None,
        (Some(p), None) => Some(format!("0 (--restart {p})")),
        (p, Some(e)) => Some(format!(
            "{}{}; last: {}",
            r.events.len(),
            p.map(|p| format!(" (--restart {p})")).unwrap_or_default(),
            e.line()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at: u64, outcome: Outcome) -> Event {
        Event {
            at,
            check: Check::Exited,
            node: None,
            cause: "llama-server exited".into(),
            serving_again_s: Some(3.0),
            outcome,
        }
    }

    #[test]
    fn a_lost_node_is_stopped_quickly() {
        assert_eq!(restart_grace(Check::Ray), Some(Duration::from_secs(2)));
        for c in [
            Check::Log,
            Check::Health,
            Check::Exited,
            Check::Stall,
            Check::Probe,
        ] {
            assert_eq!(restart_grace(c), None, "{c:?}");
        }
    }

    #[test]
    fn the_policy_as_given() {
        assert_eq!(
            "on-failure".parse::<Policy>(),
            Ok(Policy {
                max: 5,
                window_s: 600
            })
        );
        assert_eq!("on-failure:2".parse::<Policy>().unwrap().max, 2);
        assert_eq!(
            "on-failure:2".parse::<Policy>().unwrap().to_string(),
            "on-failure:2"
        );
        for bad in ["always", "on-failure:0", "on-failure:x", "on-failure2", ""] {
            assert!(bad.parse::<Policy>().is_err(), "{bad}");
        }
    }

    #[test]
    fn restarts_are_counted_in_the_window() {
        let p: Policy = "on-failure:2".parse().unwrap();
        assert_eq!(decide(&p, &[], 1000), Decision::Restart(1));
        let one = [event(900, Outcome::Serving)];
        assert_eq!(decide(&p, &one, 1000), Decision::Restart(2));
        let two = [event(900, Outcome::Serving), event(950, Outcome::Serving)];
        let Decision::GiveUp(why) = decide(&p, &two, 1000) else {
            panic!("a third restart in the window");
        };
        assert!(why.contains("2 restart(s) in the last 10 minutes"), "{why}");
        assert!(why.contains("`halobox serve"), "{why}");
        // An old restart has left the window.
        let old = [event(100, Outcome::Serving), event(950, Outcome::Serving)];
        assert_eq!(decide(&p, &old, 1000), Decision::Restart(2));
        // A failed start counts.
        let failed = [
            event(900, Outcome::Failed("x".into())),
            event(950, Outcome::Serving),
        ];
        assert!(matches!(decide(&p, &failed, 1000), Decision::GiveUp(_)));
    }

    /// `halobox_serve_restarts_total`: every restart made, old or failed,
    /// not the failure given up on.
    #[test]
    fn restarts_made_leave_out_the_give_up() {
        let r = Restarts {
            policy: None,
            events: vec![
                event(100, Outcome::Serving),
                event(900, Outcome::Failed("x".into())),
                event(950, Outcome::Restarting),
                event(990, Outcome::GaveUp),
            ],
            gave_up: Some("limit".into()),
        };
        assert_eq!(r.made(), 3);
        assert_eq!(Restarts::default().made(), 0);
    }

    #[test]
    fn restarts_after_failed_starts_back_off() {
        let secs: Vec<u64> = (0..8).map(|n| pause_before(n).as_secs()).collect();
        assert_eq!(secs, [0, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[test]
    fn a_port_taken_by_another_process_is_waited_for_not_restarted() {
        let p: Policy = "on-failure:3".parse().unwrap();
        let window = Duration::from_secs(p.window_s);
        assert_eq!(
            port_verdict(false, Duration::ZERO, &p, 8080, "llama.cpp"),
            Port::Start
        );
        assert_eq!(
            port_verdict(false, window * 2, &p, 8080, "llama.cpp"),
            Port::Start
        );
        assert_eq!(
            port_verdict(true, Duration::ZERO, &p, 8080, "llama.cpp"),
            Port::Wait
        );
        assert_eq!(
            port_verdict(true, window - Duration::from_secs(1), &p, 8080, "llama.cpp"),
            Port::Wait
        );
        let Port::GiveUp(why) = port_verdict(true, window, &p, 8080, "llama.cpp") else {
            panic!("not given up after the window");
        };
        assert!(
            why.contains("port 8080") && why.contains("llama.cpp") && why.contains("hint:"),
            "{why}"
        );
        assert!(!why.contains("vLLM"), "{why}");
        let said = not_ours(8080, "llama.cpp");
        assert!(
            said.contains("not this serve's llama.cpp") && said.contains("no restart spent"),
            "{said}"
        );
    }

    #[test]
    fn backoff_is_bounded() {
        assert_eq!(backoff(0), Duration::from_secs(2));
        assert_eq!(backoff(1), Duration::from_secs(4));
        assert_eq!(backoff(10), Duration::from_secs(30));
    }

    #[test]
    fn progress_of_both_engines() {
        let m = "# HELP x\nvllm:num_requests_running{model_name=\"m\"} 2.0\nvllm:generation_tokens_total{model_name=\"m\"} 40.0\n";
        assert_eq!(
            vllm_sample(m),
            Some(Sample {
                running: 2,
                tokens: 40
            })
        );
        assert_eq!(vllm_sample("nothing"), None);
        let slots = r#"[{"id":0,"is_processing":true,"next_token":[{"n_decoded":7}]},{"id":1,"is_processing":false,"n_decoded":3}]"#;
        assert_eq!(
            llama_sample(slots),
            Some(Sample {
                running: 1,
                tokens: 10
            })
        );
        assert_eq!(llama_sample("{}"), None);
    }

    #[test]
    fn a_stall_is_requests_running_with_no_new_token() {
        let t = Duration::from_secs(120);
        let s = |running, tokens| Some(Sample { running, tokens });
        let at = Duration::from_secs;
        let mut st = Stall::default();
        assert!(!st.look(s(1, 10), at(0), t));
        assert!(!st.look(s(1, 10), at(119), t));
        assert!(st.look(s(1, 10), at(120), t));
        // A new token starts the count again.
        let mut st = Stall::default();
        st.look(s(1, 10), at(0), t);
        assert!(!st.look(s(1, 11), at(100), t));
        assert!(!st.look(s(1, 11), at(200), t));
        assert!(st.look(s(1, 11), at(220), t));
        // Idle is no stall, however long.
        let mut st = Stall::default();
        assert!(!st.look(s(0, 10), at(0), t));
        assert!(!st.look(s(0, 10), at(1000), t));
        // No answer while requests ran counts as no token.
        let mut st = Stall::default();
        st.look(s(2, 5), at(0), t);
        assert!(!st.look(None, at(60), t));
        assert!(st.look(None, at(130), t));
        // No answer with nothing seen running is not a stall.
        assert!(!Stall::default().look(None, at(1000), t));
    }

    #[test]
    fn a_hang_is_a_probe_unanswered_with_no_new_token() {
        let t = Duration::from_secs(20);
        let at = Duration::from_secs;
        let mut h = Hung::default();
        assert!(!h.look(Some(5), at(100), t), "no probe, no hang");
        h.started(Some(5), at(0));
        assert!(h.probing());
        assert!(!h.look(Some(5), at(19), t));
        assert!(h.look(Some(5), at(20), t));
        // Tokens that move (a busy engine) start the wait again.
        let mut h = Hung::default();
        h.started(Some(5), at(0));
        assert!(!h.look(Some(9), at(15), t));
        assert!(!h.look(Some(9), at(34), t));
        assert!(h.look(Some(9), at(35), t));
        // An unknown count cannot show progress.
        let mut h = Hung::default();
        h.started(None, at(0));
        assert!(h.look(None, at(20), t));
        // A finished probe is no hang.
        h.finished();
        assert!(!h.probing() && !h.look(None, at(100), t));
    }

    #[test]
    fn the_summary_names_the_last_cause() {
        let mut r = Restarts {
            policy: Some("on-failure:3".parse().unwrap()),
            ..Restarts::default()
        };
        assert_eq!(summary(&r).unwrap(), "0 (--restart on-failure:3)");
        r.events.push(Event {
            node: Some("node b (10.0.0.2)".into()),
            check: Check::Probe,
            cause: "its RPC server is stopped".into(),
            ..event(1, Outcome::Serving)
        });
        assert_eq!(
            summary(&r).unwrap(),
            "1 (--restart on-failure:3); last: node b (10.0.0.2): its RPC server is stopped (the 1-token probe); serving again after 3 s"
        );
        r.gave_up = Some("gave up: 3 restart(s)\n  hint: x".into());
        assert_eq!(summary(&r).unwrap(), "gave up: 3 restart(s)");
        assert_eq!(summary(&Restarts::default()), None);
    }
}
