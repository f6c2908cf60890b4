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
    let chain = plan.chain();
    let bars = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    let style = indicatif::ProgressStyle::with_template(
        "{prefix:>12} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    let total = plan.stream_bytes();
    let job = |keep: Vec<usize>, listen, next| Job {
        token: token.clone(),
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
    };
    let mut running: Vec<Running> = vec![];
    let mut next: Option<SocketAddr> = None;
    for t in chain.iter().rev() {
        let node = &cfg.nodes[t.node];
        let line = serde_json::to_string(&job(t.needs.clone(), Some(node.ip.into()), next))?;
        let rn = remote_node(cfg, node).through(masters);
        let mut proc = rn.spawn_with_line(&family_cmd(cfg, family, &["node-receive"]), &line)?;
        let port = match listening(&mut proc) {
            Ok(p) => p,
            Err(why) => {
                let done = proc.wait(Duration::from_secs(5));
                bail!("{}", rn.error(&format!("the receiver ({why})"), &done));
            }
        };
        next = Some(SocketAddr::new(node.ip.into(), port));
        let bar = bars.insert(0, indicatif::ProgressBar::new(total));
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
    let src = &cfg.nodes[source];
    let line = serde_json::to_string(&job(vec![], None, next))?;
    let srn = remote_node(cfg, src).through(masters);
    let mut sender = srn.spawn_with_line(&family_cmd(cfg, family, &["node-send"]), &line)?;
    let started = Instant::now();
    let end = |label: String, role| End {
        label,
        role,
        running: true,
        word: started,
        count: 0,
        moved: started,
    };
    // The receivers in chain order, then the sender.
    let mut ends: Vec<End> = running
        .iter()
        .map(|r| end(format!("node {}", cfg.nodes[r.target].label()), "receiver"))
        .chain(std::iter::once(end(
            format!("node {}", src.label()),
            "sender",
        )))
        .collect();
    for r in &mut running {
        r.started = started;
    }
    let deadline = deadline_for(total);
    let mut gave_up: Option<(Vec<usize>, String)> = None;
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
            watch(&mut sender, &mut ends[s], "sent", Duration::ZERO);
        }
        if ends.iter().all(|e| !e.running) {
            break;
        }
        if let Some(v) = judge(&ends, total, started, deadline, Instant::now()) {
            gave_up = Some(v);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if gave_up.is_some() {
        // Their stdin closed, the guards stop every end at once.
        for r in running.iter_mut().filter(|r| r.ended.is_none()) {
            let _ = r.proc.send(&[]);
        }
        let _ = sender.send(&[]);
    }
    // Which node each end is, to name it in the outcomes.
    let named: Vec<usize> = gave_up.as_ref().map(|(v, _)| v.clone()).unwrap_or_default();
    let reason = gave_up.as_ref().map(|(_, why)| why.clone());
    let sender_named = named.contains(&(ends.len() - 1));
    let sent = sender.wait(Duration::from_secs(5));
    let sender_error = match &reason {
        Some(why) if sender_named => Some(why.clone()),
        _ => (!sent.status.is_some_and(|s| s.success()))
            .then(|| srn.error("the sender", &sent).to_string()),
    };
    let named_targets: Vec<usize> = named
        .iter()
        .filter(|&&i| i < running.len())
        .map(|&i| running[i].target)
        .collect();
    let counts: Vec<(usize, u64)> = running
        .iter()
        .zip(&ends)
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
        let r = running.remove(pos);
        let node = &cfg.nodes[t.node];
        let seconds = r
            .ended
            .unwrap_or_else(Instant::now)
            .duration_since(r.started)
            .as_secs_f64();
        let done = r.proc.wait(Duration::from_secs(5));
        let (moved, bad, error) = if let Some(why) = &reason
            && named_targets.contains(&t.node)
        {
            (0, vec![], Some(why.clone()))
        } else if done.status.is_some_and(|s| s.success()) {
            match last_json::<Received>(node, "the receiver", &done.stdout, &done.output) {
                Ok(rec) => (rec.bytes, rec.bad, None),
                Err(e) => (0, vec![], Some(e)),
            }
        } else if let Some(why) = &reason
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
        let seen = counts
            .iter()
            .find(|(n, _)| *n == t.node)
            .map_or(0, |(_, c)| *c);
        out.push(Outcome {
            label: t.label.clone(),
            moved,
            carried: last_count(&done.stdout, "bytes").max(seen),
            seconds,
            bad,
            error: error.or_else(|| sender_error.clone()),
        });
    }
    Ok(out)
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
