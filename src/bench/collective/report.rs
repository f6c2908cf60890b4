//! A collective run's results, derived from what each rank printed (its
//! JSON lines and its log) the same way right after the run and later from
//! the saved folder: per operation and size the latency of each iteration
//! (the slowest rank's), p50/p99, nccl-tests' algorithm and bus bandwidth,
//! the check of every rank's values, and, with RCCL, the transport each
//! rank used against the one the cluster asks for.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::nccl::{self, Used};
use super::plan::{Op, Plan, RankPlan};
use crate::bench::stats::{LatencySummary, summarise};

/// Version of `collective-run.json` and `collective.json`.
pub const SCHEMA_VERSION: u32 = 1;

/// What one rank printed, as saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankRun {
    /// Its exit code (`None`: stopped, or never started).
    pub exit_code: Option<i32>,
    /// Why it could not run or failed, in halobox's words.
    pub error: Option<String>,
    /// Its stdout (the JSON lines).
    pub stdout: String,
    /// stdout and stderr together (RCCL's log is on stderr).
    pub output: String,
}

/// `collective-run.json`: the plan and what every rank printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Start time, UTC, RFC 3339.
    pub started_utc: String,
    /// What ran.
    pub plan: Plan,
    /// Likely causes of sockets, per node, from halobox's facts (computed at
    /// run time: the facts are not saved).
    #[serde(default)]
    pub causes: Vec<String>,
    /// Per rank, in rank order.
    pub ranks: Vec<RankRun>,
}

/// One event line of the program.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Event {
    Start {
        torch: String,
        backend: String,
        #[serde(default)]
        why: String,
    },
    Result {
        op: Op,
        size: u64,
        bytes: u64,
        times_us: Vec<f64>,
        correct: bool,
        wrong: u64,
    },
    Error {
        kind: String,
        message: String,
        #[serde(default)]
        python: Option<String>,
    },
    Done {},
}

/// One rank in the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankSummary {
    /// Rank.
    pub rank: usize,
    /// Node.
    pub node: String,
    /// torch's version there.
    pub torch: Option<String>,
    /// The transport RCCL used (`nccl` backend), as its log says.
    pub used: Option<String>,
    /// `ok` or `failed`.
    pub status: String,
    /// What went wrong.
    pub error: Option<String>,
}

/// One row: an operation at one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// `all_reduce` or `all_gather`.
    pub op: String,
    /// Message size (nccl-tests' size: the whole buffer, for all-gather the gathered one).
    pub bytes: u64,
    /// Latency of an iteration (the slowest rank's), µs.
    pub latency: Option<LatencySummary>,
    /// Mean time of an iteration, µs (each rank's mean; the slowest rank's).
    pub mean_us: Option<f64>,
    /// Algorithm bandwidth, GB/s (10^9 bytes/s): size / mean time.
    pub algbw_gbs: Option<f64>,
    /// Bus bandwidth, GB/s: algbw × 2(n-1)/n (all-reduce), × (n-1)/n (all-gather).
    pub busbw_gbs: Option<f64>,
    /// Every rank got the right values.
    pub correct: bool,
    /// `ok` or `failed`.
    pub status: String,
    /// Why it failed.
    pub note: Option<String>,
}

/// `collective.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Results {
    /// The format version (1).
    pub schema_version: u32,
    /// `collective`.
    pub kind: String,
    /// Start time, UTC.
    pub started_utc: String,
    /// `nccl` or `gloo`.
    pub backend: String,
    /// Why that backend.
    pub backend_why: String,
    /// Ranks (nodes).
    pub world: usize,
    /// The transport cluster.toml asks for.
    pub cluster_transport: String,
    /// Per rank.
    pub ranks: Vec<RankSummary>,
    /// Per operation and size.
    pub rows: Vec<Row>,
    /// What failed, with the likely cause and the fix (empty: nothing).
    pub failures: Vec<String>,
    /// `ok` or `failed`.
    pub status: String,
}

/// Name of the record in a saved folder.
pub const RUN_FILE: &str = "collective-run.json";
/// Name of the results in a saved folder.
pub const RESULTS_FILE: &str = "collective.json";

fn events(stdout: &str) -> Vec<Event> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Why a rank failed, in words that name the node and the fix.
fn rank_error(node: &str, run: &RankRun, evs: &[Event], python: &str) -> Option<String> {
    for e in evs {
        if let Event::Error {
            kind,
            message,
            python: p,
        } = e
        {
            let py = p.as_deref().unwrap_or(python);
            return Some(match kind.as_str() {
                "no-torch" => format!(
                    "node {node}: no torch in its container ({py}: {message})\n  hint: install torch in the container's Python (the image's vLLM brings it), or name a Python that has it: `halobox bench collective --python /path/to/venv/bin/python` (default: the one next to `ray` in cluster.toml)"
                ),
                "no-gpu" => format!(
                    "node {node}: {message}\n  hint: run `halobox bench collective --backend gloo`, or recreate the container with the GPU (`halobox refresh`)"
                ),
                _ => format!("node {node}: {message}"),
            });
        }
    }
    if let Some(e) = &run.error {
        return Some(e.clone());
    }
    if !evs.iter().any(|e| matches!(e, Event::Done {})) {
        return Some(format!(
            "node {node}: the benchmark ended without finishing (exit {}): {}",
            run.exit_code
                .map_or_else(|| "none".to_string(), |c| c.to_string()),
            crate::remote::tail(&run.output, 4)
        ));
    }
    None
}

/// The results of a record.
pub fn derive(rec: &Record) -> Results {
    let plan = &rec.plan;
    let world = plan.ranks.len();
    let mut failures = Vec::new();
    let mut ranks = Vec::new();
    let all: Vec<Vec<Event>> = rec.ranks.iter().map(|r| events(&r.stdout)).collect();
    // The backend the ranks ran (with `auto` they chose it together).
    let (backend, backend_why) = all
        .iter()
        .flatten()
        .find_map(|e| match e {
            Event::Start { backend, why, .. } => Some((backend.clone(), why.clone())),
            _ => None,
        })
        .map(|(b, why)| {
            let why = if why.is_empty() {
                plan.backend_why.clone()
            } else {
                why
            };
            (b, why)
        })
        .unwrap_or_else(|| (plan.backend.to_string(), plan.backend_why.clone()));
    let mut per_rank: Vec<Vec<Event>> = Vec::new();
    for ((rp, run), evs) in plan.ranks.iter().zip(&rec.ranks).zip(all) {
        let python = plan
            .options
            .python
            .clone()
            .unwrap_or_else(|| "the Python next to `ray`".into());
        let error = rank_error(&rp.node, run, &evs, &python);
        let torch = evs.iter().find_map(|e| match e {
            Event::Start { torch, .. } => Some(torch.clone()),
            _ => None,
        });
        let used = (backend == "nccl").then(|| nccl::parse(&run.output).used());
        if let Some(e) = &error {
            failures.push(e.clone());
        }
        if let Some(f) = used
            .as_ref()
            .and_then(|u| socket_fallback(rp, u, &rec.causes))
        {
            failures.push(f);
        }
        ranks.push(RankSummary {
            rank: rp.rank,
            node: rp.node.clone(),
            torch,
            used: used.map(|u| u.to_string()),
            status: if error.is_some() { "failed" } else { "ok" }.into(),
            error,
        });
        per_rank.push(evs);
    }
    let rows = rows(plan, &per_rank, world);
    for r in rows.iter().filter(|r| !r.correct) {
        failures.push(format!(
            "{} at {}: {}",
            r.op,
            crate::units::format_bytes(r.bytes),
            r.note.as_deref().unwrap_or("wrong values")
        ));
    }
    printable(Results {
        schema_version: SCHEMA_VERSION,
        kind: "collective".into(),
        started_utc: rec.started_utc.clone(),
        backend,
        backend_why,
        world,
        cluster_transport: plan.cluster_transport.to_string(),
        ranks,
        rows,
        status: if failures.is_empty() { "ok" } else { "failed" }.into(),
        failures,
    })
}

/// `res` with every text in it safe for a terminal
/// ([`crate::remote::printable`], line breaks kept): the ranks' JSON is
/// decoded before this, so a `\u001b` a rank (its Python comes from the
/// image) or a saved run wrote is a real ESC until here. Every report, fresh
/// or saved, text or JSON, passes through this.
fn printable(mut res: Results) -> Results {
    use crate::remote::printable_lines as clean;
    let opt = |s: &mut Option<String>| {
        if let Some(t) = s {
            *t = clean(t);
        }
    };
    for s in [
        &mut res.kind,
        &mut res.started_utc,
        &mut res.backend,
        &mut res.backend_why,
        &mut res.cluster_transport,
        &mut res.status,
    ] {
        *s = clean(s);
    }
    for r in &mut res.ranks {
        r.node = clean(&r.node);
        r.status = clean(&r.status);
        opt(&mut r.torch);
        opt(&mut r.used);
        opt(&mut r.error);
    }
    for r in &mut res.rows {
        r.op = clean(&r.op);
        r.status = clean(&r.status);
        opt(&mut r.note);
    }
    for f in &mut res.failures {
        *f = clean(f);
    }
    res
}

/// FAIL when the node's transport is RoCE/IB, or it was given a net plugin
/// (`NCCL_NET_PLUGIN`: the USB4 one), but RCCL ran on sockets.
fn socket_fallback(rp: &RankPlan, used: &Used, causes: &[String]) -> Option<String> {
    let (node, transport, rank) = (&rp.node, rp.transport, rp.rank);
    let plugin = rp
        .env
        .iter()
        .find(|v| v.name == "NCCL_NET_PLUGIN" && !v.value.eq_ignore_ascii_case("none"));
    if !matches!(used, Used::Socket { .. }) {
        return None;
    }
    if let (false, Some(p)) = (transport.is_rdma(), plugin) {
        return Some(format!(
            "node {node}: RCCL was given the net plugin {} (NCCL_NET_PLUGIN) but used sockets ({used}): likely cause: the plugin did not load or found no device; see RCCL's NET/Plugin lines (NCCL_DEBUG=INFO) and `halobox check` in the container",
            p.value
        ));
    }
    if !transport.is_rdma() {
        return None;
    }
    let cause = causes
        .get(rank)
        .filter(|c| !c.is_empty())
        .cloned()
        .unwrap_or_else(|| {
            "halobox's facts name no cause: see RCCL's log (NCCL WARN lines)".into()
        });
    Some(format!(
        "node {node}: the cluster's transport there is {transport}, but RCCL used sockets ({used}): likely cause: {cause}"
    ))
}

fn rows(plan: &Plan, per_rank: &[Vec<Event>], world: usize) -> Vec<Row> {
    let mut out = Vec::new();
    for &op in &plan.options.ops {
        for &size in &plan.options.sizes {
            let mut times: Vec<Vec<f64>> = Vec::new();
            let mut bytes = size;
            let mut wrong = 0u64;
            let mut missing = Vec::new();
            for (rank, evs) in per_rank.iter().enumerate() {
                let found = evs.iter().find_map(|e| match e {
                    Event::Result {
                        op: o,
                        size: s,
                        bytes: b,
                        times_us,
                        correct,
                        wrong: w,
                    } if *o == op && *s == size => Some((*b, times_us.clone(), *correct, *w)),
                    _ => None,
                });
                match found {
                    Some((b, t, correct, w)) => {
                        bytes = b;
                        times.push(t);
                        if !correct {
                            wrong += w.max(1);
                        }
                    }
                    None => missing.push(rank),
                }
            }
            out.push(row(op, bytes, &times, wrong, &missing, world));
        }
    }
    out
}

fn row(op: Op, bytes: u64, times: &[Vec<f64>], wrong: u64, missing: &[usize], world: usize) -> Row {
    let mut r = Row {
        op: op.name().into(),
        bytes,
        latency: None,
        mean_us: None,
        algbw_gbs: None,
        busbw_gbs: None,
        correct: false,
        status: "failed".into(),
        note: None,
    };
    if !missing.is_empty() {
        r.note = Some(format!(
            "no result from rank(s) {}",
            missing
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return r;
    }
    let iters = times.iter().map(Vec::len).min().unwrap_or(0);
    // Each iteration takes as long as its slowest rank.
    let slowest: Vec<f64> = (0..iters)
        .map(|i| times.iter().map(|t| t[i]).fold(0.0, f64::max))
        .collect();
    if let Some(lat) = summarise(&slowest) {
        // As nccl-tests: each rank's mean time, the slowest rank's counts.
        let mean = times
            .iter()
            .map(|t| t[..iters].iter().sum::<f64>() / iters as f64)
            .fold(0.0, f64::max);
        let algbw = bytes as f64 / (mean * 1e-6) / 1e9;
        r.latency = Some(lat);
        r.mean_us = Some(mean);
        r.algbw_gbs = Some(algbw);
        r.busbw_gbs = Some(algbw * op.bus_factor(world));
    }
    r.correct = wrong == 0;
    if !r.correct {
        r.note = Some(format!(
            "{wrong} value(s) wrong across the ranks: the sum is not what every rank gave"
        ));
    } else if r.latency.is_none() {
        r.note = Some("no timed iteration".into());
    } else {
        r.status = "ok".into();
    }
    r
}

/// The text report.
pub fn human(res: &Results) -> String {
    let mut s = format!(
        "collective over {} node(s), backend {} ({}); cluster transport {}; started {}\n",
        res.world, res.backend, res.backend_why, res.cluster_transport, res.started_utc
    );
    for r in &res.ranks {
        s.push_str(&format!(
            "  rank {} node {}: {}{}{}\n",
            r.rank,
            r.node,
            r.status,
            r.torch
                .as_ref()
                .map(|t| format!(", torch {t}"))
                .unwrap_or_default(),
            r.used
                .as_ref()
                .map(|u| format!(", RCCL used {u}"))
                .unwrap_or_default()
        ));
    }
    s.push_str(&format!(
        "{:<11} {:>9} {:>11} {:>11} {:>12} {:>12}  {}\n",
        "op", "size", "p50 µs", "p99 µs", "algbw GB/s", "busbw GB/s", "check"
    ));
    let opt = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
    for r in &res.rows {
        s.push_str(&format!(
            "{:<11} {:>9} {:>11} {:>11} {:>12} {:>12}  {}\n",
            r.op,
            crate::units::format_bytes(r.bytes),
            opt(r.latency.map(|l| l.median_us), 1),
            opt(r.latency.and_then(|l| l.p99_us), 1),
            opt(r.algbw_gbs, 3),
            opt(r.busbw_gbs, 3),
            if r.correct {
                "ok".to_string()
            } else {
                format!("FAIL: {}", r.note.as_deref().unwrap_or(""))
            }
        ));
    }
    for f in &res.failures {
        s.push_str(&format!("FAIL: {f}\n"));
    }
    s
}

/// Two runs side by side: bus bandwidth and p50 per operation and size.
pub fn compare(a: &Results, b: &Results) -> String {
    let mut s = format!(
        "collective {} ({} nodes, {}) → {} ({} nodes, {})\n{:<11} {:>9} {:>12} {:>12} {:>8} {:>10} {:>10}\n",
        a.started_utc,
        a.world,
        a.backend,
        b.started_utc,
        b.world,
        b.backend,
        "op",
        "size",
        "busbw A",
        "busbw B",
        "B/A",
        "p50 A µs",
        "p50 B µs"
    );
    for rb in &b.rows {
        let Some(ra) = a.rows.iter().find(|r| r.op == rb.op && r.bytes == rb.bytes) else {
            continue;
        };
        let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
        let ratio = match (ra.busbw_gbs, rb.busbw_gbs) {
            (Some(x), Some(y)) if x > 0.0 => Some(y / x),
            _ => None,
        };
        s.push_str(&format!(
            "{:<11} {:>9} {:>12} {:>12} {:>8} {:>10} {:>10}\n",
            rb.op,
            crate::units::format_bytes(rb.bytes),
            f(ra.busbw_gbs, 3),
            f(rb.busbw_gbs, 3),
            ratio.map_or("-".to_string(), |r| format!("{r:.2}x")),
            f(ra.latency.map(|l| l.median_us), 1),
            f(rb.latency.map(|l| l.median_us), 1),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::collective::plan::{self, Options, test_report};
    use crate::cluster::config::{ClusterConfig, NodeBackend, NodeConfig};
    use crate::cluster::env::Resolved;
    use std::net::Ipv4Addr;

    fn record(transport: Resolved, kfd: bool, outs: Vec<(String, String)>) -> Record {
        let nodes = (0..outs.len())
            .map(|i| NodeConfig {
                name: Some(format!("n{i}")),
                ssh: format!("root@10.0.0.{}", i + 1),
                ip: Ipv4Addr::new(10, 0, 0, i as u8 + 1),
                container: "vllm".into(),
                backend: NodeBackend::Podman,
                cpus: None,
                env: Default::default(),
                memory_bandwidth_gbs: None,
            })
            .collect();
        let cfg = ClusterConfig::new(nodes);
        let reports: Vec<_> = cfg
            .nodes
            .iter()
            .map(|n| test_report(n.ip, kfd, transport))
            .collect();
        let opts = Options {
            sizes: vec![4096, 1 << 20],
            ops: vec![plan::Op::AllReduce],
            iters: 5,
            warmup: 1,
            port: 29511,
            backend: None,
            python: None,
            timeout_s: 60,
        };
        Record {
            schema_version: SCHEMA_VERSION,
            started_utc: "2026-11-26T00:00:00Z".into(),
            plan: plan::build(&cfg, &reports, &opts).unwrap(),
            causes: vec!["memlock is 8388608 bytes in container vllm".into(); outs.len()],
            ranks: outs
                .into_iter()
                .map(|(stdout, log)| RankRun {
                    exit_code: Some(0),
                    error: None,
                    output: format!("{log}{stdout}"),
                    stdout,
                })
                .collect(),
        }
    }

    fn lines(rank: usize, slow: f64, correct: bool, backend: &str) -> String {
        let mut s = format!(
            "{{\"event\": \"start\", \"rank\": {rank}, \"torch\": \"2.13.0\", \"backend\": \"{backend}\", \"why\": \"test\"}}\n"
        );
        for size in [4096u64, 1 << 20] {
            s.push_str(&format!(
                "{{\"event\": \"result\", \"rank\": {rank}, \"op\": \"all_reduce\", \"size\": {size}, \"bytes\": {size}, \"elements\": {}, \"times_us\": [100.0, {slow}, 100.0, 100.0, 100.0], \"correct\": {correct}, \"wrong\": {}}}\n",
                size / 4,
                if correct { 0 } else { 3 }
            ));
        }
        s.push_str(&format!("{{\"event\": \"done\", \"rank\": {rank}}}\n"));
        s
    }

    /// Latency is the slowest rank's per iteration; algbw = size / the
    /// slowest rank's mean time, busbw = algbw × 2(n-1)/n.
    #[test]
    fn slowest_rank_per_iteration_and_nccl_tests_bandwidths() {
        let rec = record(
            Resolved::Ethernet,
            false,
            vec![
                (lines(0, 100.0, true, "gloo"), String::new()),
                (lines(1, 600.0, true, "gloo"), String::new()),
            ],
        );
        let res = derive(&rec);
        assert_eq!(res.status, "ok", "{:?}", res.failures);
        assert_eq!(res.backend, "gloo");
        let r = &res.rows[1];
        assert_eq!(r.bytes, 1 << 20);
        assert_eq!(r.mean_us, Some(200.0));
        assert_eq!(r.latency.unwrap().median_us, 100.0);
        assert_eq!(r.latency.unwrap().p99_us, Some(600.0));
        let algbw = (1u64 << 20) as f64 / 200e-6 / 1e9;
        assert!((r.algbw_gbs.unwrap() - algbw).abs() < 1e-9);
        assert!(
            (r.busbw_gbs.unwrap() - algbw).abs() < 1e-9,
            "2 ranks: factor 1"
        );
        assert_eq!(res.ranks[1].torch.as_deref(), Some("2.13.0"));
        assert!(human(&res).contains("backend gloo"));
    }

    /// A rank whose JSON carries `\u001b`, BEL and RLO escapes (its Python
    /// comes from the image), fresh and read back from a saved run: no
    /// control character reaches the report, text or JSON.
    #[test]
    fn a_hostile_ranks_escapes_never_reach_the_terminal() {
        let evil = r"\u001b]0;pwned\u0007\u001b[2J\u202egnp.exe\u009b31m";
        let rank0 = format!(
            "{{\"event\": \"start\", \"rank\": 0, \"torch\": \"2.13{evil}\", \"backend\": \"gloo\", \"why\": \"w{evil}\"}}\n\
             {{\"event\": \"error\", \"rank\": 0, \"kind\": \"no-gpu{evil}\", \"message\": \"bad{evil}\", \"python\": \"py{evil}\"}}\n"
        );
        let rec = record(
            Resolved::Ethernet,
            false,
            vec![
                (rank0, String::new()),
                (lines(1, 100.0, true, "gloo"), String::new()),
            ],
        );
        let dir = tempfile::tempdir().unwrap();
        let fresh = derive(&rec);
        crate::bench::collective::run::save(dir.path(), &rec, &fresh).unwrap();
        let saved = derive(&crate::bench::collective::run::load(dir.path()).unwrap());
        for res in [&fresh, &saved] {
            assert_eq!(res.status, "failed");
            let text = human(res);
            assert!(text.contains("bad"), "{text}");
            assert!(
                !text
                    .chars()
                    .any(|c| (c.is_control() && c != '\n') || matches!(c, '\u{202e}' | '\u{9b}')),
                "{text:?}"
            );
            // Every decoded string (what `--json` prints) too.
            let debug = format!("{res:?}");
            assert!(!debug.contains("\\u{"), "{debug}");
        }
    }

    #[test]
    fn a_wrong_sum_fails() {
        let rec = record(
            Resolved::Ethernet,
            false,
            vec![
                (lines(0, 100.0, true, "gloo"), String::new()),
                (lines(1, 100.0, false, "gloo"), String::new()),
            ],
        );
        let res = derive(&rec);
        assert_eq!(res.status, "failed");
        assert!(!res.rows[0].correct);
        assert!(
            human(&res).contains("FAIL: all_reduce at 4 KiB"),
            "{}",
            human(&res)
        );
    }

    #[test]
    fn no_torch_names_the_node_and_the_fix() {
        let err = "{\"event\": \"error\", \"rank\": 1, \"kind\": \"no-torch\", \"python\": \"/opt/halobox-ray/bin/python\", \"message\": \"ModuleNotFoundError: No module named 'torch'\"}\n";
        let rec = record(
            Resolved::Ethernet,
            false,
            vec![
                (lines(0, 100.0, true, "gloo"), String::new()),
                (err.into(), String::new()),
            ],
        );
        let res = derive(&rec);
        assert_eq!(res.status, "failed");
        let e = res.ranks[1].error.as_deref().unwrap();
        assert!(
            e.contains("node n1: no torch in its container (/opt/halobox-ray/bin/python")
                && e.contains("hint:")
                && e.contains("halobox bench collective --python"),
            "{e}"
        );
        assert!(res.rows[0].note.as_deref().unwrap().contains("rank(s) 1"));
    }

    const IB_LOG: &str = "n0:1:2 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 1.\nn0:1:2 [0] NCCL INFO NET/IB : Using [0]rocep194s0:1/RoCE [RO]; OOB dp0:10.0.0.1<0>\nn0:1:2 [0] NCCL INFO Using network IB\n";
    const SOCKET_LOG: &str = "n1:1:2 [0] NCCL INFO NET/IB : No device found.\nn1:1:2 [0] NCCL INFO NET/Socket : Using [0]dp0:10.0.0.2<0>\nn1:1:2 [0] NCCL INFO Using network Socket\n";

    /// RoCE asked, RCCL on sockets on one node: FAIL, with the cause from
    /// halobox's facts; the other node's NET/IB device and GID reported.
    #[test]
    fn roce_cluster_on_sockets_fails_with_the_cause() {
        let rec = record(
            Resolved::Roce,
            true,
            vec![
                (lines(0, 100.0, true, "nccl"), IB_LOG.into()),
                (lines(1, 100.0, true, "nccl"), SOCKET_LOG.into()),
            ],
        );
        let res = derive(&rec);
        assert_eq!(res.backend, "nccl");
        assert_eq!(
            res.ranks[0].used.as_deref(),
            Some("NET/IB rocep194s0:1/RoCE, GID index 1")
        );
        assert_eq!(res.status, "failed");
        assert_eq!(res.failures.len(), 1, "{:?}", res.failures);
        let f = &res.failures[0];
        assert!(
            f.contains("node n1") && f.contains("RCCL used sockets") && f.contains("memlock"),
            "{f}"
        );
    }

    /// Sockets are what an Ethernet cluster should use.
    #[test]
    fn ethernet_cluster_on_sockets_passes() {
        let rec = record(
            Resolved::Ethernet,
            true,
            vec![
                (lines(0, 100.0, true, "nccl"), SOCKET_LOG.into()),
                (lines(1, 100.0, true, "nccl"), SOCKET_LOG.into()),
            ],
        );
        let res = derive(&rec);
        assert_eq!(res.status, "ok", "{:?}", res.failures);
        assert!(
            res.ranks[1]
                .used
                .as_deref()
                .unwrap()
                .starts_with("NET/Socket")
        );
    }

    #[test]
    fn compare_shows_the_ratio() {
        let a = derive(&record(
            Resolved::Ethernet,
            false,
            vec![
                (lines(0, 100.0, true, "gloo"), String::new()),
                (lines(1, 100.0, true, "gloo"), String::new()),
            ],
        ));
        let b = derive(&record(
            Resolved::Ethernet,
            false,
            vec![
                (lines(0, 100.0, true, "gloo"), String::new()),
                (lines(1, 600.0, true, "gloo"), String::new()),
            ],
        ));
        let text = compare(&a, &b);
        assert!(text.contains("0.50x"), "{text}");
    }
}
