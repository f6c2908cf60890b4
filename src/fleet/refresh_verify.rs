//! `cluster refresh --verify` (the default while a serve is recorded): the
//! new containers proven by the serve itself. Before anything changes, the
//! recorded serve must give its golden tokens ([`baseline`]); every node's
//! staged container is checked against the one it replaces (`halobox check`,
//! in [`super::refresh`]); after the swap the engine's cluster and the
//! recorded serve start again and must give the golden tokens and pass a
//! short soak ([`prove`]). When a step fails, every node goes back to the
//! container it had (`halobox refresh --rollback`, kept as `NAME-prev` until
//! then) and the old serve starts again ([`roll_back`]); once proven, the
//! old containers go ([`retire_old`]). A greedy token that changed with the
//! engine's version rolls back too, unless `--accept-tokens` records the new
//! ones as the golden set: never forward silently.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::lifecycle;
use crate::bench::serving::key::{is_set, key_from, load_key};
use crate::bench::serving::target;
use crate::bench::soak::{self, plan::SoakOptions, plan::Watched};
use crate::cluster::auth;
use crate::cluster::config::{ClusterConfig, Engine, NodeConfig};
use crate::cluster::run::remote_node;
use crate::fan_out::each;
use crate::refresh::plan::PREV_SUFFIX;
use crate::reporter::Reporter;
use crate::serve::golden::{self, Check, Outcome};
use crate::serve::request::{Request, Spec};
use crate::serve::{control, state};

/// `halobox metrics`' port on each node, read by the soak for GTT.
const METRICS_PORT: u16 = 9837;
/// The soak's long prompt, at most (fewer when the serve's context is short).
const SOAK_CONTEXT: u64 = 8192;
/// Output tokens per soak request.
const SOAK_OUTPUT: u32 = 32;
/// Soak requests in flight at once.
const SOAK_CONCURRENCY: u32 = 2;
/// How long one node's rollback or removal of its old container may take.
const NODE_TIMEOUT: Duration = Duration::from_secs(600);

/// What `--verify` asks beyond the refresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// How long the soak after the swap runs, seconds.
    pub soak_s: u64,
    /// `--accept-tokens`: other greedy tokens after the swap are recorded
    /// as the new golden set instead of rolling back.
    pub accept_tokens: bool,
}

/// The serve that proves the new containers, as it was before the refresh.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The arguments that start it again.
    pub spec: Spec,
    /// Said about it (the golden set recorded or checked).
    pub notes: Vec<String>,
}

/// The step of the proof that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// `halobox check` in a staged container.
    Check,
    /// The swap itself on a node.
    Swap,
    /// The engine's cluster (Ray or the RPC servers) after the swap.
    Cluster,
    /// The recorded serve, started again on the new containers.
    Serve,
    /// Its greedy completions against the golden tokens.
    Golden,
    /// The short soak.
    Soak,
}

impl Step {
    /// The step in words.
    pub fn words(self) -> &'static str {
        match self {
            Step::Check => "`halobox check` in the staged container",
            Step::Swap => "the swap",
            Step::Cluster => "the cluster's start on the new containers",
            Step::Serve => "the serve's start on the new containers",
            Step::Golden => "the golden tokens",
            Step::Soak => "the soak",
        }
    }
}

/// A failed step: which, on which node (when one), and what differed.
#[derive(Debug, Clone, Serialize)]
pub struct Failed {
    /// The step.
    pub step: Step,
    /// The node it failed on, when it is one node's.
    pub node: Option<String>,
    /// What went wrong.
    pub detail: String,
}

/// What the proof found.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    /// `proven`, `rolled_back`, or `not_rolled_back` (the rollback failed).
    pub outcome: String,
    /// The step that failed, when one did.
    pub failed: Option<Failed>,
    /// The check of the golden tokens on the new containers, when it ran.
    pub golden: Option<Check>,
    /// The new tokens were recorded as the golden set (`--accept-tokens`).
    pub accepted_tokens: bool,
    /// The soak's verdict line, when it ran.
    pub soak: Option<String>,
    /// Where the soak was saved.
    pub soak_dir: Option<String>,
    /// Seconds from the serve's stop to its answer on the new containers
    /// (or to the failure).
    pub down_s: f64,
    /// Seconds from the failure to the old serve answering again, when
    /// rolled back.
    pub rollback_down_s: Option<f64>,
    /// After a rollback, the old serve's check against the golden tokens.
    pub golden_after_rollback: Option<Check>,
    /// Per node: the old container removed, or why not.
    pub retired: Vec<String>,
    /// Other lines for the user.
    pub notes: Vec<String>,
}

impl Verified {
    /// Nothing proven yet, nothing failed.
    pub fn new() -> Verified {
        Verified {
            outcome: "proven".into(),
            failed: None,
            golden: None,
            accepted_tokens: false,
            soak: None,
            soak_dir: None,
            down_s: 0.0,
            rollback_down_s: None,
            golden_after_rollback: None,
            retired: Vec::new(),
            notes: Vec::new(),
        }
    }
}

impl Default for Verified {
    fn default() -> Self {
        Verified::new()
    }
}

/// Whether a run verifies: `--verify`/`--no-verify`, else whether a serve
/// is recorded for the cluster file.
pub fn wanted(asked: Option<bool>, config_path: &Path) -> bool {
    asked.unwrap_or_else(|| state::load(config_path).is_some())
}

/// The recorded serve as the proof needs it, before anything changes: its
/// arguments, and its golden tokens (recorded now from the running serve
/// when there are none, else checked: a serve that already gives others
/// cannot judge an upgrade). `Err`: why nothing can be verified, with the
/// fix.
pub fn baseline(config_path: &Path) -> Result<Baseline, String> {
    let rec = state::load(config_path).ok_or_else(|| {
        format!(
            "--verify: no serve is recorded for {}: there is nothing to prove the new image with\n  hint: start one (`halobox serve MODEL --detach`), or pass --no-verify",
            config_path.display()
        )
    })?;
    let spec = rec.args.clone().ok_or_else(|| {
        "--verify: the serve record was written by an older halobox and holds no arguments to start it again\n  hint: start the serve again with this halobox (`halobox serve stop`, then `halobox serve MODEL --detach`), or pass --no-verify".to_string()
    })?;
    let said = match golden::run(config_path, false) {
        Ok(Outcome::Recorded(s)) => format!(
            "recorded {} golden completions from the running serve to compare the new image against",
            s.prompts
        ),
        Ok(Outcome::Checked(c)) if c.differences.is_empty() => format!(
            "the serve gives its {} golden completions (recorded {}) before the refresh",
            c.prompts, c.recorded_utc
        ),
        Ok(Outcome::Checked(c)) => {
            return Err(format!(
                "--verify: the serve already differs from its golden tokens before the refresh, so they cannot judge the new image:\n{}  hint: if its answers now are right, record them (`halobox serve golden --record`) and run again",
                golden::render(&c)
            ));
        }
        Err(e) => {
            return Err(format!(
                "--verify: the recorded serve does not answer ({}), so the new image cannot be compared with it\n  hint: `halobox serve status` shows it; start it again, or pass --no-verify",
                crate::remote::printable(&format!("{e:#}"))
            ));
        }
    };
    let mut notes = vec![said];
    if state::supervisor(config_path).is_some() {
        notes.push(
            "the serve runs under `serve --restart`: after the refresh it runs detached; run `halobox serve stop` and start it with --restart again to keep it watched".into(),
        );
    }
    Ok(Baseline { spec, notes })
}

/// Stops the serve and the engine's cluster (Ray or the RPC servers; the
/// exporters stay), before a swap or a rollback.
pub fn stop_serving(cfg: &ClusterConfig, config_path: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    if let Err(e) = control::stop(cfg, config_path) {
        notes.push(format!("the serve's stop: {e:#}"));
    }
    notes.extend(lifecycle::engine_down(cfg, Some(config_path)));
    notes
}

/// Starts the engine's cluster and then the serve `spec`; returns once it
/// answers. `Err`: the step that failed and why.
fn start_serving(
    cfg: &ClusterConfig,
    config_path: &Path,
    spec: &Spec,
    r: &mut dyn Reporter,
) -> Result<(), (Step, String)> {
    lifecycle::engine_up(cfg, config_path, false, cfg.timeout_s, auth::Mode::Token, r)
        .map_err(|e| (Step::Cluster, format!("{e:#}")))?;
    crate::serve::start::start(&Request::again(spec.clone()), config_path, cfg, r).map_err(|e| {
        (
            Step::Serve,
            crate::remote::printable_lines(&format!("{e:#}")),
        )
    })
}

/// The proof on the swapped containers: the cluster and the serve start
/// again, its golden tokens, the soak. `down_from` is when the serve was
/// stopped.
pub fn prove(
    cfg: &ClusterConfig,
    config_path: &Path,
    base: &Baseline,
    o: &Options,
    down_from: Instant,
    r: &mut dyn Reporter,
) -> Verified {
    let mut v = Verified::new();
    let started = start_serving(cfg, config_path, &base.spec, r);
    v.down_s = down_from.elapsed().as_secs_f64();
    if let Err((step, detail)) = started {
        v.failed = Some(Failed {
            step,
            node: Some(cfg.head().label().to_string()),
            detail,
        });
        return v;
    }
    if let Err(detail) = golden_step(config_path, o, &mut v, r) {
        v.failed = Some(Failed {
            step: Step::Golden,
            node: None,
            detail,
        });
        return v;
    }
    if let Err(detail) = soak_step(cfg, config_path, o, &mut v, r) {
        v.failed = Some(Failed {
            step: Step::Soak,
            node: None,
            detail,
        });
    }
    v
}

/// The serve on the new containers against its golden tokens; with
/// `--accept-tokens`, other tokens become the golden set.
fn golden_step(
    config_path: &Path,
    o: &Options,
    v: &mut Verified,
    r: &mut dyn Reporter,
) -> Result<(), String> {
    r.note("==> the serve's greedy completions against its golden tokens\n");
    let c = match golden::run(config_path, false) {
        Ok(Outcome::Checked(c)) => c,
        Ok(Outcome::Recorded(_)) => {
            return Err("the serve now names another model than its golden set's".into());
        }
        Err(e) => return Err(format!("{e:#}")),
    };
    v.golden = Some(c.clone());
    if c.differences.is_empty() {
        return Ok(());
    }
    if !o.accept_tokens {
        return Err(differences(&c));
    }
    golden::run(config_path, true)
        .map_err(|e| format!("--accept-tokens: recording the new golden set: {e:#}"))?;
    v.accepted_tokens = true;
    v.notes.push(format!(
        "--accept-tokens: {} of {} prompts give other greedy tokens on the new image; recorded them as the golden set",
        c.differences.len(),
        c.prompts
    ));
    Ok(())
}

/// The differences in words: each prompt's first differing token, and
/// whether the engine's version changed (then `--accept-tokens` is the way
/// forward, once the new answers are judged right).
pub fn differences(c: &Check) -> String {
    let mut s = format!(
        "{} of {} prompts give other greedy tokens than the golden set",
        c.differences.len(),
        c.prompts
    );
    for d in &c.differences {
        s.push_str(&format!(
            "\n    {}: first differing token #{}: golden {:?}, now {:?}",
            d.prompt, d.token, d.recorded, d.now
        ));
    }
    match &c.engine_changed {
        Some((a, b)) => s.push_str(&format!(
            "\n  the engine changed ({a} -> {b}): other kernels can change greedy tokens; if the new answers are right, run again with --accept-tokens to take the new image and record them"
        )),
        None => s.push_str(
            "\n  the engine's version is the same: the new image changes what it computes (its settings, libraries or kernels)",
        ),
    }
    s
}

/// The soak options for the recorded serve of `config_path`: mixed long
/// and short prompts for `soak_s`, every node's GTT watched.
/// The soak's long prompt for a serve of `context` tokens: what the
/// concurrent requests fit in together with their output (llama.cpp's
/// slots share one KV cache of that size), beside the room left to the
/// serve's users ([`golden::left_for_others`]), at most [`SOAK_CONTEXT`].
fn soak_context(context: Option<u64>) -> u64 {
    context
        .map_or(SOAK_CONTEXT, |c| {
            (c.saturating_sub(golden::left_for_others(c)) / u64::from(SOAK_CONCURRENCY))
                .saturating_sub(u64::from(SOAK_OUTPUT) + 8)
        })
        .clamp(16, SOAK_CONTEXT)
}

fn soak_options(
    cfg: &ClusterConfig,
    config_path: &Path,
    soak_s: u64,
) -> anyhow::Result<(SoakOptions, Option<crate::bench::serving::client::Key>)> {
    let t = target::resolve(None, Some(config_path))?;
    let from = key_from(false, t.serve.as_ref(), Some(config_path), is_set);
    let context = soak_context(golden::serve_context(config_path));
    let opts = SoakOptions {
        watched: cfg
            .nodes
            .iter()
            .map(|n| Watched {
                name: n.label().to_string(),
                addr: (n.ip, METRICS_PORT).into(),
            })
            .collect(),
        endpoint: t.endpoint,
        endpoint_from: t.from,
        model: None,
        concurrency: SOAK_CONCURRENCY,
        context: u32::try_from(context).unwrap_or(u32::MAX),
        short_tokens: 64.min(u32::try_from(context).unwrap_or(64)),
        long_every: 4,
        output_tokens: SOAK_OUTPUT,
        duration_s: soak_s,
        window_s: soak::plan::default_window(soak_s),
        stall_s: 120,
        max_gtt_growth_mib: 1024,
        sample_s: 5,
        seed: 0,
        key: from.describe(),
    };
    Ok((opts, load_key(&from)?))
}

/// The short soak of the serve on the new containers; `Err`: its FAIL.
fn soak_step(
    cfg: &ClusterConfig,
    config_path: &Path,
    o: &Options,
    v: &mut Verified,
    r: &mut dyn Reporter,
) -> Result<(), String> {
    r.note(&format!("==> a {} s soak of the serve\n", o.soak_s));
    let (opts, key) = soak_options(cfg, config_path, o.soak_s).map_err(|e| format!("{e:#}"))?;
    let (_, stamp) = crate::bench::run::utc_now();
    let dir = crate::bench::run::default_save_dir(&format!("{stamp}-refresh-soak"))
        .map_err(|e| format!("{e:#}"))?;
    let res = soak::measure(&opts, key.as_ref(), &dir, r).map_err(|e| format!("{e:#}"))?;
    v.soak_dir = Some(dir.display().to_string());
    v.soak = Some(format!(
        "{} ({} requests, {} failed, {:.0} s)",
        res.verdict, res.requests, res.failed, res.elapsed_s
    ));
    match res.verdict {
        "PASS" => Ok(()),
        _ => Err(format!(
            "the soak FAILed: {} (saved in {})",
            res.reasons.join("; "),
            dir.display()
        )),
    }
}

/// The `halobox refresh --rollback` that puts `node` back on the container
/// the swap replaced.
pub fn rollback_command(cfg: &ClusterConfig, node: &NodeConfig) -> Vec<String> {
    let backend = node
        .backend
        .refresh_backend()
        .map_or("podman".to_string(), |b| b.to_string());
    [
        cfg.halobox.as_str(),
        "refresh",
        "--rollback",
        "--name",
        node.container.as_str(),
        "--backend",
        backend.as_str(),
        "--yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The `halobox rm NAME-prev` that removes `node`'s old container once
/// the new one is proven.
pub fn retire_command(cfg: &ClusterConfig, node: &NodeConfig) -> Vec<String> {
    vec![
        cfg.halobox.clone(),
        "rm".into(),
        format!("{}{PREV_SUFFIX}", node.container),
        "--yes".into(),
    ]
}

/// Every swapped node back on its old container, then the old serve
/// again, checked against the golden tokens. `swapped`: the nodes the swap
/// reached.
pub fn roll_back(
    cfg: &ClusterConfig,
    config_path: &Path,
    base: &Baseline,
    swapped: &[NodeConfig],
    v: &mut Verified,
    r: &mut dyn Reporter,
) {
    let t0 = Instant::now();
    v.notes.extend(stop_serving(cfg, config_path));
    let back = each(swapped, |_, n| {
        remote_node(cfg, n)
            .run_ok(
                "`halobox refresh --rollback`",
                &rollback_command(cfg, n),
                NODE_TIMEOUT,
            )
            .map_err(|e| e.to_string())
    });
    let failed: Vec<String> = back.into_iter().filter_map(Result::err).collect();
    if !failed.is_empty() {
        v.outcome = "not_rolled_back".into();
        v.notes.extend(failed);
        v.notes.push(
            "a node was not put back: run `halobox refresh --rollback --name NAME` on it, then `halobox cluster up` and the serve".into(),
        );
        return;
    }
    v.outcome = "rolled_back".into();
    match start_serving(cfg, config_path, &base.spec, r) {
        Ok(()) => {
            v.rollback_down_s = Some(t0.elapsed().as_secs_f64());
            v.golden_after_rollback = match golden::run(config_path, false) {
                Ok(Outcome::Checked(c)) => Some(c),
                _ => None,
            };
        }
        Err((step, e)) => {
            v.outcome = "not_rolled_back".into();
            v.notes.push(format!(
                "every node is back on its old container, but {} failed: {e}",
                step.words()
            ));
        }
    }
}

/// Removes every node's old container (`NAME-prev`) once the new ones are
/// proven; a line per node.
pub fn retire_old(cfg: &ClusterConfig, nodes: &[NodeConfig]) -> Vec<String> {
    each(nodes, |_, n| {
        match remote_node(cfg, n).run_ok(
            "`halobox rm` of the old container",
            &retire_command(cfg, n),
            NODE_TIMEOUT,
        ) {
            Ok(_) => format!(
                "node {}: the old container {}{PREV_SUFFIX} was removed",
                n.label(),
                n.container
            ),
            Err(e) => format!(
                "node {}: the old container {}{PREV_SUFFIX} stays ({e})",
                n.label(),
                n.container
            ),
        }
    })
}

/// The proof's steps as `--dry-run` prints them.
pub fn render_plan(cfg: &ClusterConfig, o: &Options) -> String {
    let mut out = format!(
        "  verify (the recorded serve proves the new containers; --no-verify skips it):\n     before: the running serve must give its golden tokens (recorded from it now when there are none)\n     3. after the swap: {} and the recorded serve start again; its greedy completions must give the golden tokens{}; then a {} s soak must PASS\n     4. proven: every node's old container (NAME-prev) is removed:\n",
        match cfg.engine {
            Engine::LlamaCpp => "the RPC servers",
            _ => "Ray",
        },
        match o.accept_tokens {
            true => " (other tokens are recorded as the new golden set: --accept-tokens)",
            false => " (other tokens roll back; --accept-tokens records them instead)",
        },
        o.soak_s
    );
    let (nodes, _) = cfg.container_nodes();
    for n in &nodes {
        out.push_str(&format!(
            "        {}: {}\n",
            n.label(),
            crate::shell::line(&retire_command(cfg, n))
        ));
    }
    out.push_str("     any failure: the serve and the cluster stop, every swapped node goes back to its old container, then the old serve starts again:\n");
    for n in &nodes {
        out.push_str(&format!(
            "        {}: {}\n",
            n.label(),
            crate::shell::line(&rollback_command(cfg, n))
        ));
    }
    out
}

/// The proof as lines of the report.
pub fn render(v: &Verified) -> String {
    let mut out = String::new();
    match (&v.failed, v.outcome.as_str()) {
        (None, _) => out.push_str(&format!(
            "verify: proven: the serve answered on the new containers {:.1} s after it stopped, gave its golden tokens{}, and the soak passed ({})\n",
            v.down_s,
            if v.accepted_tokens { " (the new ones, accepted)" } else { "" },
            v.soak.as_deref().unwrap_or("-")
        )),
        (Some(f), outcome) => {
            out.push_str(&format!(
                "verify: FAILED at {}{}:\n  {}\n",
                f.step.words(),
                f.node.as_deref().map(|n| format!(" on node {n}")).unwrap_or_default(),
                f.detail.replace('\n', "\n  ")
            ));
            out.push_str(&match (outcome, v.rollback_down_s) {
                ("rolled_back", Some(s)) => format!(
                    "verify: rolled back: every node is on its old container again; the serve was down {:.1} s in all ({:.1} s on the new containers, {s:.1} s for the rollback){}\n",
                    v.down_s + s,
                    v.down_s,
                    match &v.golden_after_rollback {
                        Some(c) if c.differences.is_empty() => format!(
                            "; the old serve gives its {} golden completions again",
                            c.prompts
                        ),
                        Some(c) => format!("; the old serve differs too: {}", differences(c)),
                        None => "; its golden tokens could not be checked".into(),
                    }
                ),
                _ => "verify: NOT rolled back (see the notes): the cluster needs you\n".into(),
            });
        }
    }
    for r in &v.retired {
        out.push_str(&format!("verify: {r}\n"));
    }
    for n in &v.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::golden::Difference;

    #[test]
    fn the_soak_prompts_fit_the_serve_side_by_side() {
        assert_eq!(soak_context(None), SOAK_CONTEXT);
        assert_eq!(soak_context(Some(128)), 16);
        assert_eq!(soak_context(Some(2048)), 856);
        assert_eq!(soak_context(Some(4096)), 1880);
        assert_eq!(soak_context(Some(131_072)), SOAK_CONTEXT);
        assert_eq!(soak_context(Some(40)), 16);
    }

    fn cfg() -> ClusterConfig {
        crate::cluster::config::parse(
            r#"
halobox = "/opt/hb/halobox"
engine = "llama.cpp"
[[node]]
name = "a"
ssh = "root@n1"
ip = "10.0.0.1"
backend = "podman"
[[node]]
name = "b"
ssh = "root@n2"
ip = "10.0.0.2"
backend = "docker"
container = "llm"
"#,
        )
        .unwrap()
    }

    fn check(engine_changed: Option<(String, String)>) -> Check {
        Check {
            recorded_utc: "2026-12-01T00:00:00Z".into(),
            checked_utc: "2026-12-02T00:00:00Z".into(),
            prompts: 4,
            same: 3,
            differences: vec![Difference {
                prompt: "long-4608".into(),
                token: 7,
                recorded: " Paris".into(),
                now: " Lyon".into(),
            }],
            engine_changed,
        }
    }

    #[test]
    fn each_node_goes_back_and_loses_its_old_container_by_its_own_halobox() {
        let c = cfg();
        assert_eq!(
            rollback_command(&c, &c.nodes[1]).join(" "),
            "/opt/hb/halobox refresh --rollback --name llm --backend docker --yes"
        );
        assert_eq!(
            retire_command(&c, &c.nodes[0]).join(" "),
            "/opt/hb/halobox rm vllm-prev --yes"
        );
        let plan = render_plan(
            &c,
            &Options {
                soak_s: 30,
                accept_tokens: false,
            },
        );
        assert!(
            plan.contains("the RPC servers and the recorded serve start again"),
            "{plan}"
        );
        assert!(plan.contains("a 30 s soak must PASS"), "{plan}");
        assert!(
            plan.contains("--accept-tokens records them instead"),
            "{plan}"
        );
        assert!(
            plan.contains(
                "b: /opt/hb/halobox refresh --rollback --name llm --backend docker --yes"
            ),
            "{plan}"
        );
        assert!(
            plan.contains("a: /opt/hb/halobox rm vllm-prev --yes"),
            "{plan}"
        );
    }

    #[test]
    fn a_difference_names_the_token_and_whether_the_engine_changed() {
        let same = differences(&check(None));
        assert!(
            same.contains("1 of 4 prompts give other greedy tokens"),
            "{same}"
        );
        assert!(
            same.contains("long-4608: first differing token #7: golden \" Paris\", now \" Lyon\""),
            "{same}"
        );
        assert!(same.contains("the engine's version is the same"), "{same}");
        let changed = differences(&check(Some(("b100".into(), "b200".into()))));
        assert!(
            changed.contains("the engine changed (b100 -> b200)")
                && changed.contains("--accept-tokens"),
            "{changed}"
        );
    }

    #[test]
    fn the_report_says_proven_or_rolled_back_with_the_downtime() {
        let mut v = Verified {
            down_s: 12.0,
            soak: Some("PASS (20 requests, 0 failed, 30 s)".into()),
            retired: vec!["node a: the old container vllm-prev was removed".into()],
            ..Verified::new()
        };
        let text = render(&v);
        assert!(
            text.contains(
                "verify: proven: the serve answered on the new containers 12.0 s after it stopped"
            ),
            "{text}"
        );
        assert!(
            text.contains("verify: node a: the old container vllm-prev was removed"),
            "{text}"
        );
        v.failed = Some(Failed {
            step: Step::Golden,
            node: None,
            detail: differences(&check(None)),
        });
        v.outcome = "rolled_back".into();
        v.rollback_down_s = Some(8.0);
        v.golden_after_rollback = Some(Check {
            differences: vec![],
            same: 4,
            ..check(None)
        });
        v.retired.clear();
        let text = render(&v);
        assert!(
            text.contains("verify: FAILED at the golden tokens:"),
            "{text}"
        );
        assert!(text.contains("first differing token #7"), "{text}");
        assert!(
            text.contains("the serve was down 20.0 s in all (12.0 s on the new containers, 8.0 s for the rollback); the old serve gives its 4 golden completions again"),
            "{text}"
        );
        v.outcome = "not_rolled_back".into();
        assert!(render(&v).contains("NOT rolled back"));
    }
}
