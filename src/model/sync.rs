//! Runs the model commands over the cluster: every node's facts over ssh
//! (a sync logs in to each node once: facts, receivers and sender share
//! that connection), then (for a sync) the chain of [`super::transfer`]: receivers started
//! from the last to the first (each listening on its data-plane address
//! before the one before it connects), then the source's sender; per-node
//! progress bars from the receivers' `bytes N` lines, and what each wrote.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;

use super::cache::ModelRef;
use super::facts::{HashMode, Holdings, NodeFacts};
use super::plan::Plan;
use super::transfer::{self, Job, Received};
use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::run::{each_node, remote_node};
use crate::proc::Proc;
use crate::remote::{self, Masters};

/// How long reading one node's facts may take (hashing new files included).
const FACTS_TIMEOUT: Duration = Duration::from_secs(6 * 3600);
/// How long a receiver may take to say where it listens.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(60);

/// `halobox FAMILY SUB ARGS…` as it runs on `node` (`model`, or `image`
/// for an image's blobs, which ride the same stream).
fn family_cmd(cfg: &ClusterConfig, family: &str, args: &[&str]) -> Vec<String> {
    std::iter::once(cfg.halobox.clone())
        .chain([family.to_string()])
        .chain(args.iter().map(|a| a.to_string()))
        .collect()
}

/// `halobox model SUB ARGS…` as it runs on `node`.
fn node_cmd(cfg: &ClusterConfig, args: &[&str]) -> Vec<String> {
    family_cmd(cfg, "model", args)
}

fn last_json<T: serde::de::DeserializeOwned>(
    node: &NodeConfig,
    what: &str,
    stdout: &str,
    output: &str,
) -> Result<T, String> {
    remote::last_json(&format!("node {}", node.label()), what, stdout, output)
}

/// Runs `halobox model ARGS` on every node; each one's JSON report.
fn on_every_node<T: serde::de::DeserializeOwned + Send>(
    cfg: &ClusterConfig,
    what: &str,
    args: &[String],
    timeout: Duration,
) -> Vec<Result<T, String>> {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let cmd = node_cmd(cfg, &argv);
    each_node(&cfg.nodes, |node| {
        let done = remote_node(cfg, node)
            .run_ok(what, &cmd, timeout)
            .map_err(|e| e.to_string())?;
        last_json(node, what, &done.stdout, &done.output)
    })
}

/// Fails with every node's error at once.
fn all_ok<T>(results: Vec<Result<T, String>>) -> anyhow::Result<Vec<T>> {
    let mut ok = vec![];
    let mut errors = vec![];
    for r in results {
        match r {
            Ok(v) => ok.push(v),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(ok)
    } else {
        bail!("{}", errors.join("\n"))
    }
}

/// Every node's facts of `model`: the source's first (it hashes only its
/// small files; LFS files are checked against their names on arrival),
/// then the others' at the source's commit (each hashes what it has not
/// hashed yet); `verify` hashes everything everywhere.
pub fn facts(
    cfg: &ClusterConfig,
    masters: &Masters,
    model: &ModelRef,
    source: usize,
    verify: bool,
) -> anyhow::Result<Vec<NodeFacts>> {
    let what = "`halobox model node-facts`";
    let ask = |node: &NodeConfig, spec: &str, mode: &str| -> Result<NodeFacts, String> {
        let cmd = node_cmd(cfg, &["node-facts", spec, "--hash", mode]);
        let done = remote_node(cfg, node)
            .through(masters)
            .run_ok(what, &cmd, FACTS_TIMEOUT)
            .map_err(|e| e.to_string())?;
        last_json::<NodeFacts>(node, what, &done.stdout, &done.output)
    };
    let spec = format!("{}@{}", model.id, model.revision);
    let src = ask(
        &cfg.nodes[source],
        &spec,
        if verify { "all" } else { "small" },
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    // Its commit goes into the other nodes' command lines: checked first.
    src.check().map_err(|e| {
        crate::error::UsageError(super::plan::untrusted(
            &format!("node {}", cfg.nodes[source].label()),
            &e,
        ))
    })?;
    // A node a killed sync left without the ref still has the snapshot.
    let at = match src.model.as_ref().and_then(|m| m.commit.as_ref()) {
        Some(c) => format!("{}@{c}", model.id),
        None => spec,
    };
    let mode = if verify { "all" } else { "new" };
    let results = each_node(&cfg.nodes, |node| {
        if std::ptr::eq(node, &cfg.nodes[source]) {
            Ok(src.clone())
        } else {
            ask(node, &at, mode)
        }
    });
    all_ok(results)
}

/// The facts of `model` on every node without hashing (for `serve`).
pub fn sizes(cfg: &ClusterConfig, model: &ModelRef) -> anyhow::Result<Vec<NodeFacts>> {
    let spec = format!("{}@{}", model.id, model.revision);
    all_ok(on_every_node(
        cfg,
        "`halobox model node-facts`",
        &[
            "node-facts".into(),
            spec,
            "--hash".into(),
            HashMode::None.word().into(),
        ],
        Duration::from_secs(60),
    ))
}

/// `Ok(summary)` when every node holds `model` complete as the head does
/// (read without hashing); else the refusal naming the nodes.
pub fn complete_everywhere(cfg: &ClusterConfig, model: &ModelRef) -> anyhow::Result<String> {
    judge_everywhere(cfg, model, sizes(cfg, model)?)
}

/// [`complete_everywhere`] for a plan (`serve --dry-run`): nodes that
/// cannot be asked leave the model "not checked" instead of failing it.
pub fn complete_everywhere_or_unchecked(
    cfg: &ClusterConfig,
    model: &ModelRef,
) -> anyhow::Result<String> {
    match sizes(cfg, model) {
        Ok(nodes) => judge_everywhere(cfg, model, nodes),
        Err(e) => Ok(format!(
            "not checked: {}",
            e.to_string().lines().next().unwrap_or_default()
        )),
    }
}

fn judge_everywhere(
    cfg: &ClusterConfig,
    model: &ModelRef,
    nodes: Vec<NodeFacts>,
) -> anyhow::Result<String> {
    let labels: Vec<String> = cfg
        .nodes
        .iter()
        .map(|n| format!("node {}", n.label()))
        .collect();
    Ok(super::complete::check(model, &labels, &nodes)?)
}

/// What every node holds (`model ls`).
pub fn holdings(cfg: &ClusterConfig) -> Vec<Result<Holdings, String>> {
    on_every_node(
        cfg,
        "`halobox model node-list`",
        &["node-list".into()],
        Duration::from_secs(60),
    )
}

/// Removes `spec` (ORG/NAME, or ORG/NAME@REV for one revision) from every
/// node (`model rm`): what each freed.
pub fn remove(cfg: &ClusterConfig, spec: &str) -> anyhow::Result<Vec<u64>> {
    all_ok(on_every_node::<super::facts::Removed>(
        cfg,
        "`halobox model node-rm`",
        &["node-rm".into(), spec.to_string()],
        Duration::from_secs(600),
    ))
    .map(|r| r.into_iter().map(|x| x.freed).collect())
}

/// One node's outcome of a sync.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Its name.
    pub label: String,
    /// Bytes written there.
    pub moved: u64,
    /// Bytes its link carried in (its receiver's own count).
    pub carried: u64,
    /// Seconds its stream took.
    pub seconds: f64,
    /// Files that failed verification (not installed).
    pub bad: Vec<String>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// How long a running end may print nothing before its node is named as
/// stopped (each prints a line every [`transfer::TICK`]).
const SILENT: Duration = Duration::from_secs(30);
/// How long a receiver may get no byte before its node is named as
/// stalled (longer than the ends' own [`transfer::STALL`], so their own
/// errors, which say more, come first).
const STILL: Duration = Duration::from_secs(90);
/// The slowest a whole sync may go: its deadline is the bytes on the
/// stream at this rate, plus [`transfer::STALL`] twice.
const MIN_RATE: u64 = 8 << 20;

/// The longest a sync of `bytes` may take once its sender started.
pub fn deadline_for(bytes: u64) -> Duration {
    transfer::STALL * 2 + Duration::from_secs(bytes / MIN_RATE)
}

/// One end of the stream as the run sees it.
#[derive(Debug, Clone)]
pub struct End {
    /// `node b`.
    pub label: String,
    /// `receiver` or `sender`.
    pub role: &'static str,
    /// Still running.
    pub running: bool,
    /// When it last printed a line.
    pub word: Instant,
    /// Its byte count.
    pub count: u64,
    /// When that count last grew.
    pub moved: Instant,
}

/// Why the run gives up, judged from what each end showed by `now`: the
/// ends it names (indices into `ends`) and the reason; `None` while the
/// sync may go on. An end silent for `SILENT` is named first (a stopped
/// process or a hung node: the others merely wait for it), then a
/// receiver short of `total` bytes that got none for `STILL`, then
/// every running end once `deadline` has passed since `started`.
pub fn judge(
    ends: &[End],
    total: u64,
    started: Instant,
    deadline: Duration,
    now: Instant,
) -> Option<(Vec<usize>, String)> {
    let running = || ends.iter().enumerate().filter(|(_, e)| e.running);
    let silent: Vec<usize> = running()
        .filter(|(_, e)| now.duration_since(e.word) >= SILENT)
        .map(|(i, _)| i)
        .collect();
    if !silent.is_empty() {
        let names: Vec<String> = silent
            .iter()
            .map(|&i| format!("{} (its {})", ends[i].label, ends[i].role))
            .collect();
        return Some((
            silent,
            format!(
                "{} stopped answering: nothing from halobox there for {} s (the process is stopped, or the node hung)",
                names.join(", "),
                SILENT.as_secs()
            ),
        ));
    }
    let still: Vec<usize> = running()
        .filter(|(_, e)| {
            e.role == "receiver" && e.count < total && now.duration_since(e.moved) >= STILL
        })
        .map(|(i, _)| i)
        .collect();
    if !still.is_empty() {
        let names: Vec<String> = still
            .iter()
            .map(|&i| {
                format!(
                    "{} (at {} of {})",
                    ends[i].label,
                    crate::units::format_bytes(ends[i].count),
                    crate::units::format_bytes(total)
                )
            })
            .collect();
        return Some((
            still,
            format!(
                "{} stalled: no byte arrived for {} s",
                names.join(", "),
                STILL.as_secs()
            ),
        ));
    }
    if now.duration_since(started) >= deadline {
        let late: Vec<usize> = running().map(|(i, _)| i).collect();
        let names: Vec<String> = late.iter().map(|&i| ends[i].label.clone()).collect();
        return Some((
            late,
            format!(
                "{} did not finish within {} s (the deadline for {} at {}/s)",
                names.join(", "),
                deadline.as_secs(),
                crate::units::format_bytes(total),
                crate::units::format_bytes(MIN_RATE)
            ),
        ));
    }
    None
}

struct Running {
    target: usize,
    proc: Proc,
    bar: indicatif::ProgressBar,
    started: Instant,
    ended: Option<Instant>,
}

/// Updates `end` from the lines `proc` printed (`WORD N`); whether it
/// still runs.
fn watch(proc: &mut Proc, end: &mut End, word: &str, wait: Duration) -> bool {
    let now = Instant::now();
    for l in proc.lines(wait) {
        end.word = now;
        if let Some(n) = l
            .strip_prefix(word)
            .and_then(|n| n.strip_prefix(' '))
            .and_then(|n| n.trim().parse::<u64>().ok())
            && n > end.count
        {
            end.count = n;
            end.moved = now;
        }
    }
    end.running = proc.try_status().is_none();
    end.running
}

/// Runs the plan's chain; one outcome per node of the plan's targets.
pub fn run(
    cfg: &ClusterConfig,
    masters: &Masters,
    plan: &Plan,
    source: usize,
) -> anyhow::Result<Vec<Outcome>> {
    run_family(cfg, masters, plan, source, "model")
}

/// [`run`] with the ends started as `halobox FAMILY node-receive` and
/// `node-send` (`image` for an image's blobs: the same stream into another
/// store).
pub fn run_family(
    cfg: &ClusterConfig,
    masters: &Masters,
    plan: &Plan,
    source: usize,
    family: &str,
) -> anyhow::Result<Vec<Outcome>> {
    let token = transfer::token().context("reading /dev/urandom for the run's token")?;
    let bars = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    let total = plan.stream_bytes();
    let (mut running, first) = start_receivers(cfg, masters, plan, family, &token, &bars)?;
    let src = &cfg.nodes[source];
    let line = serde_json::to_string(&job(plan, &token, vec![], None, first))?;
    let srn = remote_node(cfg, src).through(masters);
    let mut sender = srn.spawn_with_line(&family_cmd(cfg, family, &["node-send"]), &line)?;
    let started = Instant::now();
    for r in &mut running {
        r.started = started;
    }
    let mut ends = ends_at(cfg, &running, src, started);
    let gave_up = follow(&mut running, &mut sender, &mut ends, total, started);
    if gave_up.is_some() {
        stop_every_end(&mut running, &mut sender);
    }
    let sent = sender.wait(Duration::from_secs(5));
    let sender_error = match &gave_up {
        Some((named, why)) if named.contains(&(ends.len() - 1)) => Some(why.clone()),
        _ => (!sent.status.is_some_and(|s| s.success()))
            .then(|| srn.error("the sender", &sent).to_string()),
    };
    Ok(outcomes(
        cfg,
        plan,
        running,
        &ends,
        gave_up.as_ref(),
        sender_error,
    ))
}

/// The job an end of the stream is given: the plan's snapshot with the
/// run's token, and (for a receiver) what it keeps, where it listens and
/// the next receiver it passes the stream to.
fn job(
    plan: &Plan,
    token: &str,
    keep: Vec<usize>,
    listen: Option<std::net::IpAddr>,
    next: Option<SocketAddr>,
) -> Job {
    Job {
        token: token.to_string(),
        id: plan.model.id.clone(),
        ref_name: (!super::cache::is_commit(&plan.model.revision))
            .then(|| plan.model.revision.clone()),
        commit: plan.commit.clone(),
        files: plan.files.clone(),
        send: plan.send.clone(),
        keep,
        listen,
        next,
        hub: plan.hub.clone(),
    }
}

/// A receiver's progress bar: node, bar, bytes, rate.
fn progress_style() -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(
        "{prefix:>12} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ")
}

/// Starts the chain's receivers from the last to the first (each listens
/// before the one before it connects), each with its bar in `bars`: the
/// receivers in chain order and the first one's address.
fn start_receivers(
    cfg: &ClusterConfig,
    masters: &Masters,
    plan: &Plan,
    family: &str,
    token: &str,
    bars: &indicatif::MultiProgress,
) -> anyhow::Result<(Vec<Running>, Option<SocketAddr>)> {
    let style = progress_style();
    let mut running: Vec<Running> = vec![];
    let mut next: Option<SocketAddr> = None;
    for t in plan.chain().iter().rev() {
        let node = &cfg.nodes[t.node];
        let job = job(plan, token, t.needs.clone(), Some(node.ip.into()), next);
        let line = serde_json::to_string(&job)?;
        let rn = remote_node(cfg, node).through(masters);
        let (proc, port) = start_receiver(&rn, &family_cmd(cfg, family, &["node-receive"]), &line)?;
        next = Some(SocketAddr::new(node.ip.into(), port));
        let bar = bars.insert(0, indicatif::ProgressBar::new(plan.stream_bytes()));
        bar.set_style(style.clone());
        bar.set_prefix(node.label().to_string());
        running.insert(
            0,
            Running {
                target: t.node,
                proc,
                bar,
                started: Instant::now(),
                ended: None,
            },
        );
    }
    Ok((running, next))
}

/// Runs `cmd` on `rn` with `line` on its stdin and waits until it listens:
/// the receiver and its port, or the node's error.
fn start_receiver(rn: &remote::Node, cmd: &[String], line: &str) -> anyhow::Result<(Proc, u16)> {
    let mut proc = rn.spawn_with_line(cmd, line)?;
    match listening(&mut proc) {
        Ok(port) => Ok((proc, port)),
        Err(why) => {
            let done = proc.wait(Duration::from_secs(5));
            bail!("{}", rn.error(&format!("the receiver ({why})"), &done));
        }
    }
}

/// The ends as [`judge`] follows them from `started`: the receivers in
/// chain order, then the sender on `src`.
fn ends_at(
    cfg: &ClusterConfig,
    running: &[Running],
    src: &NodeConfig,
    started: Instant,
) -> Vec<End> {
    let end = |label: String, role| End {
        label,
        role,
        running: true,
        word: started,
        count: 0,
        moved: started,
    };
    running
        .iter()
        .map(|r| end(format!("node {}", cfg.nodes[r.target].label()), "receiver"))
        .chain(std::iter::once(end(
            format!("node {}", src.label()),
            "sender",
        )))
        .collect()
}

/// Reads every end's lines (moving the bars) until all have ended or
/// [`judge`] gives up: the ends it named and why, if it did.
fn follow(
    running: &mut [Running],
    sender: &mut Proc,
    ends: &mut [End],
    total: u64,
    started: Instant,
) -> Option<(Vec<usize>, String)> {
    let deadline = deadline_for(total);
    loop {
        for (r, e) in running.iter_mut().zip(ends.iter_mut()) {
            if r.ended.is_some() {
                continue;
            }
            let was = e.count;
            if !watch(&mut r.proc, e, "bytes", Duration::from_millis(20)) {
                r.ended = Some(Instant::now());
                r.bar.finish();
            } else if e.count != was {
                r.bar.set_position(e.count);
            }
        }
        let s = ends.len() - 1;
        if ends[s].running {
            watch(sender, &mut ends[s], "sent", Duration::ZERO);
        }
        if ends.iter().all(|e| !e.running) {
            return None;
        }
        if let Some(v) = judge(ends, total, started, deadline, Instant::now()) {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Closes the stdin of every end still running: their guards stop them
/// all at once.
fn stop_every_end(running: &mut [Running], sender: &mut Proc) {
    for r in running.iter_mut().filter(|r| r.ended.is_none()) {
        let _ = r.proc.send(&[]);
    }
    let _ = sender.send(&[]);
}

/// One outcome per target of the plan, in its order: a node with nothing
/// to receive moved nothing; a receiver's as [`receiver_outcome`] reads it.
fn outcomes(
    cfg: &ClusterConfig,
    plan: &Plan,
    mut running: Vec<Running>,
    ends: &[End],
    gave_up: Option<&(Vec<usize>, String)>,
    sender_error: Option<String>,
) -> Vec<Outcome> {
    let reason = gave_up.map(|(_, why)| why.as_str());
    // Which node each end the give-up named is.
    let named_targets: Vec<usize> = gave_up
        .map(|(named, _)| named.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|&&i| i < running.len())
        .map(|&i| running[i].target)
        .collect();
    let counts: Vec<(usize, u64)> = running
        .iter()
        .zip(ends)
        .map(|(r, e)| (r.target, e.count))
        .collect();
    let mut out = vec![];
    for t in &plan.targets {
        let Some(pos) = running.iter().position(|r| r.target == t.node) else {
            out.push(Outcome {
                label: t.label.clone(),
                moved: 0,
                carried: 0,
                seconds: 0.0,
                bad: vec![],
                error: None,
            });
            continue;
        };
        let seen = counts
            .iter()
            .find(|(n, _)| *n == t.node)
            .map_or(0, |(_, c)| *c);
        let gave_up = GaveUp {
            reason,
            named: named_targets.contains(&t.node),
        };
        let mut o = receiver_outcome(cfg, t, running.remove(pos), seen, gave_up);
        o.error = o.error.or_else(|| sender_error.clone());
        out.push(o);
    }
    out
}

/// Whether the sync gave up, as one receiver's outcome sees it.
struct GaveUp<'a> {
    /// Why the sync gave up, if it did.
    reason: Option<&'a str>,
    /// It gave up on this receiver.
    named: bool,
}

/// What receiver `r` (of target `t`) wrote, from its report, with the
/// bytes its link carried (the most of its last count and `seen`); else
/// why it failed: the give-up's reason when it named it, stopped when the
/// sync gave up on another, or the node's own error.
fn receiver_outcome(
    cfg: &ClusterConfig,
    t: &super::plan::Target,
    r: Running,
    seen: u64,
    gave_up: GaveUp,
) -> Outcome {
    let node = &cfg.nodes[t.node];
    let seconds = r
        .ended
        .unwrap_or_else(Instant::now)
        .duration_since(r.started)
        .as_secs_f64();
    let done = r.proc.wait(Duration::from_secs(5));
    let (moved, bad, error) = if let Some(why) = gave_up.reason
        && gave_up.named
    {
        (0, vec![], Some(why.to_string()))
    } else if done.status.is_some_and(|s| s.success()) {
        match last_json::<Received>(node, "the receiver", &done.stdout, &done.output) {
            Ok(rec) => (rec.bytes, rec.bad, None),
            Err(e) => (0, vec![], Some(e)),
        }
    } else if let Some(why) = gave_up.reason
        && r.ended.is_none()
    {
        (
            0,
            vec![],
            Some(format!("{}: stopped, as the sync gave up: {why}", t.label)),
        )
    } else {
        (
            0,
            vec![],
            Some(
                remote_node(cfg, node)
                    .error("the receiver", &done)
                    .to_string(),
            ),
        )
    };
    Outcome {
        label: t.label.clone(),
        moved,
        carried: last_count(&done.stdout, "bytes").max(seen),
        seconds,
        bad,
        error,
    }
}

/// The last `WORD N` count in `stdout`, or 0.
fn last_count(stdout: &str, word: &str) -> u64 {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(word)?.strip_prefix(' ')?.trim().parse().ok())
        .next_back()
        .unwrap_or(0)
}

/// Waits for the receiver's `listening PORT`.
fn listening(proc: &mut Proc) -> Result<u16, String> {
    let deadline = Instant::now() + LISTEN_TIMEOUT;
    while Instant::now() < deadline {
        for l in proc.lines(Duration::from_millis(100)) {
            if let Some(p) = l
                .strip_prefix("listening ")
                .and_then(|p| p.trim().parse().ok())
            {
                return Ok(p);
            }
        }
        if proc.try_status().is_some() {
            return Err("it ended before it listened".into());
        }
    }
    Err(format!(
        "it did not listen within {} s",
        LISTEN_TIMEOUT.as_secs()
    ))
}

/// The final table: node, bytes moved, rate, verified.
pub fn render_outcomes(outcomes: &[Outcome]) -> String {
    let mut s = format!(
        "{:<16} {:>12} {:>14}  {}\n",
        "NODE", "MOVED", "RATE", "VERIFIED"
    );
    for o in outcomes {
        let rate = if o.moved > 0 && o.seconds > 0.0 {
            format!(
                "{}/s",
                crate::units::format_bytes((o.moved as f64 / o.seconds) as u64)
            )
        } else {
            "-".into()
        };
        let verified = match (&o.error, o.bad.len()) {
            (Some(_), _) => "no: failed".to_string(),
            (None, 0) => "yes".to_string(),
            (None, n) => format!("no: {n} file(s) bad"),
        };
        s.push_str(&format!(
            "{:<16} {:>12} {:>14}  {verified}\n",
            o.label,
            crate::units::format_bytes(o.moved),
            rate
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(label: &str, role: &'static str, at: Instant, count: u64) -> End {
        End {
            label: label.into(),
            role,
            running: true,
            word: at,
            count,
            moved: at,
        }
    }

    #[test]
    fn the_node_that_stalls_is_named() {
        let t0 = Instant::now();
        let total = 1 << 30;
        let deadline = deadline_for(total);
        assert!(deadline > Duration::from_secs(120));
        assert!(deadline_for(100 << 30) > deadline_for(1 << 30));
        let mut ends = vec![
            end("node b", "receiver", t0, 10),
            end("node c", "receiver", t0, 10),
            end("node a", "sender", t0, 10),
        ];
        assert!(judge(&ends, total, t0, deadline, t0 + Duration::from_secs(5)).is_none());
        // b printed nothing for SILENT while the others kept printing.
        let later = t0 + SILENT + Duration::from_secs(1);
        ends[1].word = later;
        ends[2].word = later;
        let (who, why) = judge(&ends, total, t0, deadline, later).unwrap();
        assert_eq!(who, [0]);
        assert!(
            why.contains("node b (its receiver) stopped answering"),
            "{why}"
        );
        // Everyone answers but b's bytes stopped short (its disk hangs).
        let later = t0 + STILL + Duration::from_secs(1);
        for e in &mut ends {
            e.word = later;
        }
        ends[1].running = false;
        ends[2].running = false;
        let (who, why) = judge(&ends, total, t0, deadline, later).unwrap();
        assert_eq!(who, [0]);
        assert!(why.contains("node b (at 10 B of 1 GiB) stalled"), "{why}");
        // All bytes in (installing): only the deadline ends it.
        ends[0].count = total;
        assert!(judge(&ends, total, t0, deadline, later).is_none());
        let late = t0 + deadline;
        ends[0].word = late;
        let (who, why) = judge(&ends, total, t0, deadline, late).unwrap();
        assert_eq!(who, [0]);
        assert!(why.contains("node b did not finish within"), "{why}");
    }
}
