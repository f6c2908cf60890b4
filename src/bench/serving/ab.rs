//! `bench serving --ab-transport`: the same benchmark with the cluster on
//! TCP sockets (`transport = "ethernet"`, in memory only) and then on the
//! transport cluster.toml configures, which is also the state it ends in.
//! Pure: the refusals and the steps from what was recorded, whether the
//! engine is in use from what it answered, and the two legs side by side.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::record::{LevelResult, ServingResults};
use crate::cluster::config::{Engine, Transport};
use crate::cluster::env::{NodeEnv, Resolved};
use crate::serve::state::ServeState;

/// The file the A/B run is saved in (beside one folder per leg).
pub const AB_FILE: &str = "ab-transport.json";

/// What the plan is made from.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The cluster file.
    pub cluster: PathBuf,
    /// Its engine.
    pub engine: Engine,
    /// Its transport.
    pub transport: Transport,
    /// The serve recorded for it.
    pub serve: Option<ServeState>,
    /// `--url` was given.
    pub url: bool,
}

/// One leg: the transport the cluster is brought up with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leg {
    /// `ethernet` or `configured`.
    pub name: String,
    /// The transport `cluster up` is given.
    pub transport: Transport,
}

/// The A/B run, decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbPlan {
    /// The cluster file.
    pub cluster: String,
    /// Its engine.
    pub engine: Engine,
    /// The endpoint the serve answers at.
    pub endpoint: String,
    /// `serve …` as each leg starts it again (after `halobox`).
    pub serve_argv: Vec<String>,
    /// Ethernet first, then the configured transport.
    pub legs: Vec<Leg>,
}

/// Refuses what cannot be compared or restarted, else the plan.
pub fn plan(f: &Facts) -> Result<AbPlan, String> {
    let file = f.cluster.display();
    if f.url {
        return Err(format!(
            "--ab-transport restarts the serve recorded for {file}; an endpoint given by --url cannot be restarted by halobox\n  hint: drop --url (the recorded serve's endpoint is used)"
        ));
    }
    let s = f.serve.as_ref().ok_or_else(|| {
        format!(
            "--ab-transport restarts the serve recorded for {file}, and none is\n  hint: start one with `halobox serve MODEL --detach`"
        )
    })?;
    if !s.detached {
        return Err(format!(
            "the serve of {file} runs in the foreground of another halobox (its Ctrl-C stops it), so --ab-transport cannot restart it\n  hint: stop it there, start it again with `halobox serve {} --detach`, then run this again",
            crate::remote::printable(&s.model)
        ));
    }
    let Some(args) = &s.args else {
        return Err(format!(
            "the serve of {file} was recorded without its arguments (by an older halobox), so it cannot be started again as it was\n  hint: `halobox serve stop`, then `halobox serve {} --detach …` with this halobox",
            crate::remote::printable(&s.model)
        ));
    };
    if matches!(f.transport, Transport::Ethernet | Transport::Usb4) {
        return Err(format!(
            "{file} sets transport = \"{}\": both legs would run on TCP sockets, there is nothing to compare\n  hint: set transport = \"auto\" (or \"roce\"/\"ib\") in {file}, then `halobox cluster down`, `halobox cluster up` and serve again",
            f.transport
        ));
    }
    Ok(AbPlan {
        cluster: f.cluster.display().to_string(),
        engine: f.engine,
        endpoint: s.endpoint.clone(),
        serve_argv: args.argv(&f.cluster),
        legs: vec![
            Leg {
                name: "ethernet".into(),
                transport: Transport::Ethernet,
            },
            Leg {
                name: "configured".into(),
                transport: f.transport,
            },
        ],
    })
}

/// The commands that bring the cluster and its serve back as configured.
pub fn restore_commands(p: &AbPlan) -> String {
    let c = crate::shell::line(&[format!("--cluster={}", p.cluster)]);
    format!(
        "halobox cluster down {c} && halobox cluster up {c} && halobox {}",
        crate::shell::line(&p.serve_argv)
    )
}

/// The steps as `--dry-run` prints them; `bench` is the benchmark's own
/// plan (what `bench serving --dry-run` prints).
pub fn render(p: &AbPlan, bench: &str) -> String {
    let mut out = format!(
        "bench serving --ab-transport: {} (engine {}), the serve at {}\n",
        p.cluster, p.engine, p.endpoint
    );
    out.push_str(&format!(
        "first: {}; refused when anybody's requests run, wait or arrive within a second\n",
        usage_probe(p.engine)
    ));
    let (what, env) = match p.engine {
        Engine::Vllm => ("Ray", "NCCL/RCCL env"),
        Engine::LlamaCpp => ("the RPC servers", "GGML_RDMA_* env"),
    };
    for (i, leg) in p.legs.iter().enumerate() {
        out.push_str(&format!(
            "leg {} ({}{}):\n",
            i + 1,
            leg.name,
            if leg.transport == Transport::Ethernet {
                ", TCP sockets"
            } else {
                ", as cluster.toml says; the state it ends in"
            }
        ));
        out.push_str("  1. halobox serve stop\n");
        out.push_str(&format!("  2. halobox cluster down ({what})\n"));
        out.push_str(&format!(
            "  3. halobox cluster up with transport = \"{}\"{} (each node's {env} resolved from its facts and reported)\n",
            leg.transport,
            if leg.transport == Transport::Ethernet {
                " in memory (cluster.toml is not changed)"
            } else {
                ""
            }
        ));
        out.push_str(&format!(
            "  4. halobox {} (its key from the environment or the key file, as serve takes it)\n",
            crate::shell::line(&p.serve_argv)
        ));
        out.push_str("  5. the benchmark (below)\n");
    }
    out.push_str("the benchmark, the same in both legs (saved in a folder per leg):\n");
    for l in bench.lines() {
        out.push_str(&format!("  {l}\n"));
    }
    out.push_str(&format!(
        "a failed leg 1 still runs leg 2 (the restore); Ctrl-C stops after the step it interrupts, and this restores by hand:\n  {}\n",
        restore_commands(p)
    ));
    out.push_str("Nothing was done (--dry-run).\n");
    out
}

/// How `p.engine` is asked whether it is in use.
pub fn usage_probe(engine: Engine) -> &'static str {
    match engine {
        Engine::Vllm => {
            "ask vLLM's /metrics (vllm:num_requests_running, vllm:num_requests_waiting, vllm:generation_tokens_total twice, a second apart)"
        }
        Engine::LlamaCpp => {
            "ask llama-server's /slots (is_processing, id_task twice, a second apart)"
        }
    }
}

/// The path each engine is asked on.
pub fn usage_path(engine: Engine) -> &'static str {
    match engine {
        Engine::Vllm => "/metrics",
        Engine::LlamaCpp => "/slots",
    }
}

/// The sum of every series of the Prometheus metric `name` in `text`.
fn metric(text: &str, name: &str) -> Option<f64> {
    let mut sum = None;
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = l.trim().rsplit_once(' ') else {
            continue;
        };
        let n = series.split('{').next().unwrap_or("");
        if n == name
            && let Ok(v) = value.parse::<f64>()
        {
            *sum.get_or_insert(0.0) += v;
        }
    }
    sum
}

/// One llama-server slot, as `/slots` lists it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Slot {
    id: i64,
    #[serde(default)]
    id_task: Option<i64>,
    is_processing: bool,
}

/// Who else uses the serve, from two answers of [`usage_path`] a second
/// apart: `Ok(None)` when nobody, `Ok(Some(what was seen))` when somebody,
/// `Err` when the answers do not say.
pub fn in_use(engine: Engine, before: &str, after: &str) -> Result<Option<String>, String> {
    match engine {
        Engine::Vllm => {
            let read = |t: &str, n: &str| {
                metric(t, n).ok_or_else(|| format!("vLLM's /metrics has no {n}"))
            };
            // Gauge and counter names of vllm/v1/metrics/loggers.py at vLLM v0.32.0
            // (images/vllm-therock-gfx1151.toml's VLLM_VERSION); prometheus_client
            // adds `_total` to the counter `vllm:generation_tokens`.
            let running = read(after, "vllm:num_requests_running")?;
            let waiting = read(after, "vllm:num_requests_waiting")?;
            if running + waiting > 0.0 {
                return Ok(Some(format!(
                    "vLLM has {running} request(s) running and {waiting} waiting (vllm:num_requests_running, vllm:num_requests_waiting)"
                )));
            }
            let (a, b) = (
                read(before, "vllm:generation_tokens_total")?,
                read(after, "vllm:generation_tokens_total")?,
            );
            Ok((b > a).then(|| {
                format!(
                    "vLLM generated {} token(s) within a second (vllm:generation_tokens_total)",
                    b - a
                )
            }))
        }
        Engine::LlamaCpp => {
            let parse = |t: &str| {
                serde_json::from_str::<Vec<Slot>>(t)
                    .map_err(|e| format!("llama-server's /slots is not a list of slots ({e})"))
            };
            let (a, b) = (parse(before)?, parse(after)?);
            let busy: Vec<String> = b
                .iter()
                .filter(|s| s.is_processing)
                .map(|s| s.id.to_string())
                .collect();
            if !busy.is_empty() {
                return Ok(Some(format!(
                    "llama-server's slot(s) {} are processing a request (/slots is_processing)",
                    busy.join(", ")
                )));
            }
            let moved: Vec<String> = b
                .iter()
                .filter(|s| {
                    a.iter()
                        .find(|o| o.id == s.id)
                        .is_some_and(|o| o.id_task != s.id_task || o.is_processing)
                })
                .map(|s| s.id.to_string())
                .collect();
            Ok((!moved.is_empty()).then(|| {
                format!(
                    "llama-server's slot(s) {} took a request within a second (/slots id_task)",
                    moved.join(", ")
                )
            }))
        }
    }
}

/// The transport one node resolved to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeTransport {
    /// Its data-plane address.
    pub ip: String,
    /// `roce`, `ib` or `ethernet`.
    pub resolved: Resolved,
    /// `sockets` or `RDMA`.
    pub path: String,
    /// Why.
    pub reason: String,
    /// The transport's variables as the node got them (NCCL_IB_* or GGML_RDMA_*).
    pub vars: Vec<String>,
}

/// What each node resolved to, from the envs `cluster up` applied.
pub fn transports(engine: Engine, envs: &[NodeEnv]) -> Vec<NodeTransport> {
    envs.iter()
        .map(|e| {
            let vars: Vec<String> = match engine {
                Engine::Vllm => e
                    .vars
                    .iter()
                    .filter(|v| v.name.starts_with("NCCL_IB_") || v.name == "NCCL_NET")
                    .map(|v| format!("{}={}", v.name, v.value))
                    .collect(),
                Engine::LlamaCpp => crate::serve::rpc_servers::rdma_env(e)
                    .iter()
                    .map(|v| format!("{}={}", v.name, v.value))
                    .collect(),
            };
            let rdma = match engine {
                Engine::Vllm => e.transport.is_rdma(),
                Engine::LlamaCpp => !vars.is_empty(),
            };
            NodeTransport {
                ip: e.ip.to_string(),
                resolved: e.transport,
                path: if rdma { "RDMA" } else { "sockets" }.into(),
                reason: e.reason.clone(),
                vars,
            }
        })
        .collect()
}

/// One leg as it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegResult {
    /// `ethernet` or `configured`.
    pub name: String,
    /// The transport asked for.
    pub transport: Transport,
    /// What each node resolved to (empty when `cluster up` did not run).
    pub nodes: Vec<NodeTransport>,
    /// The benchmark (absent when the leg failed before it).
    pub results: Option<ServingResults>,
    /// The step that failed and why.
    pub error: Option<String>,
    /// Where the leg's run is saved.
    pub saved: Option<String>,
}

/// One concurrency level's ratio, configured / ethernet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// Requests in flight at once.
    pub concurrency: u32,
    /// Output tokens per second.
    pub output_throughput: Option<f64>,
    /// Time to first token, p50.
    pub ttft_p50: Option<f64>,
    /// Inter-token latency, p50.
    pub itl_p50: Option<f64>,
}

/// The A/B run's document (`--json`, and [`AB_FILE`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbResults {
    /// `bench serving --ab-transport`.
    pub kind: String,
    /// The plan it ran.
    pub plan: AbPlan,
    /// The legs that started, in order.
    pub legs: Vec<LegResult>,
    /// Per concurrency level, configured / ethernet (when both ran).
    pub ratios: Vec<Ratio>,
    /// A step changed the cluster or its serve (else both are as they were).
    pub changed: bool,
    /// The cluster and its serve are back as configured (or were not changed).
    pub restored: bool,
    /// Why the run stopped early (Ctrl-C), with the state it left.
    pub interrupted: Option<String>,
}

fn div(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// configured / ethernet per level both ran.
pub fn ratios(ethernet: &ServingResults, configured: &ServingResults) -> Vec<Ratio> {
    let find = |c: u32| ethernet.levels.iter().find(|l| l.concurrency == c);
    configured
        .levels
        .iter()
        .filter_map(|b| {
            let a = find(b.concurrency)?;
            let p50 = |l: &LevelResult, itl: bool| {
                if itl { &l.itl_ms } else { &l.ttft_ms }
                    .as_ref()
                    .map(|s| s.p50)
            };
            Some(Ratio {
                concurrency: b.concurrency,
                output_throughput: div(Some(b.output_throughput), Some(a.output_throughput)),
                ttft_p50: div(p50(b, false), p50(a, false)),
                itl_p50: div(p50(b, true), p50(a, true)),
            })
        })
        .collect()
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The A/B run as text.
pub fn render_results(r: &AbResults) -> String {
    let mut out = format!(
        "bench serving --ab-transport: {} (engine {}) at {}\n",
        r.plan.cluster, r.plan.engine, r.plan.endpoint
    );
    for leg in &r.legs {
        out.push_str(&format!(
            "\nleg {} (transport = \"{}\"):\n",
            leg.name, leg.transport
        ));
        for n in &leg.nodes {
            out.push_str(&format!(
                "  node {}: {} ({}; {}){}\n",
                n.ip,
                n.path,
                n.resolved,
                n.reason,
                if n.vars.is_empty() {
                    String::new()
                } else {
                    format!(" {}", n.vars.join(" "))
                }
            ));
        }
        if let Some(res) = &leg.results {
            out.push_str(&format!(
                "  {:>5} {:>10} {:>12} {:>10} {:>10}\n",
                "CONC", "STATUS", "OUT TOK/S", "TTFT P50", "ITL P50"
            ));
            for l in &res.levels {
                out.push_str(&format!(
                    "  {:>5} {:>10} {:>12.1} {:>10} {:>10}\n",
                    l.concurrency,
                    l.status,
                    l.output_throughput,
                    num(l.ttft_ms.as_ref().map(|s| s.p50), 1),
                    num(l.itl_ms.as_ref().map(|s| s.p50), 1)
                ));
            }
        }
        if let Some(e) = &leg.error {
            out.push_str(&format!("  FAILED: {e}\n"));
        }
        if let Some(d) = &leg.saved {
            out.push_str(&format!("  saved in {d}\n"));
        }
    }
    if !r.ratios.is_empty() {
        out.push_str("\nconfigured / ethernet:\n");
        out.push_str(&format!(
            "  {:>5} {:>12} {:>10} {:>10}\n",
            "CONC", "OUT TOK/S", "TTFT P50", "ITL P50"
        ));
        for x in &r.ratios {
            out.push_str(&format!(
                "  {:>5} {:>11}x {:>9}x {:>9}x\n",
                x.concurrency,
                num(x.output_throughput, 2),
                num(x.ttft_p50, 2),
                num(x.itl_p50, 2)
            ));
        }
    }
    if let Some(why) = &r.interrupted {
        out.push_str(&format!("\nstopped early: {why}\n"));
    }
    out.push_str(&if !r.changed {
        "\nnothing was changed: the cluster and its serve are as they were\n".to_string()
    } else if r.restored {
        "\nthe cluster and its serve are back as configured\n".to_string()
    } else {
        format!(
            "\nthe cluster and its serve are NOT back as configured\n  hint: {}\n",
            restore_commands(&r.plan)
        )
    });
    out
}

/// Writes `r` to `dir/ab-transport.json`.
pub fn save(dir: &Path, r: &AbResults) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(AB_FILE), serde_json::to_string_pretty(r)? + "\n")?;
    Ok(())
}

/// Largest [`AB_FILE`] read.
const MAX_BYTES: u64 = 16 << 20;

/// Reads `dir/ab-transport.json`, every text in it made printable
/// ([`crate::remote::parse_json_lines`]): a saved run may hold anything.
pub fn load(dir: &Path) -> anyhow::Result<AbResults> {
    use anyhow::Context as _;
    let path = dir.join(AB_FILE);
    let bytes = crate::confine::read_regular(&path, true, MAX_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    crate::remote::parse_json_lines(&String::from_utf8_lossy(&bytes))
        .with_context(|| format!("{} is not a halobox --ab-transport record", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::request::Spec;

    fn serve(detached: bool, args: bool) -> ServeState {
        ServeState {
            cluster: "/c/cluster.toml".into(),
            engine: "vllm".into(),
            model: "Qwen/Qwen3-0.6B".into(),
            endpoint: "http://10.0.0.1:8000".into(),
            started: 0,
            pid: 7,
            container: "vllm".into(),
            api_key: true,
            detached,
            watcher: None,
            args: args.then(|| Spec {
                model: "Qwen/Qwen3-0.6B".into(),
                tp: Some(2),
                max_model_len: Some(2048),
                max_model_len_auto: false,
                gpu_memory_utilization: None,
                no_eager: false,
                host: None,
                port: 8000,
                no_api_key: false,
                nccl_debug: true,
                no_fit_check: false,
                timeout: 1800,
                restart: None,
                stall_timeout: None,
                extra: vec!["--seed".into(), "1".into()],
            }),
            kv_plan: None,
            kv_cache: None,
        }
    }

    fn facts(transport: Transport, s: Option<ServeState>, url: bool) -> Facts {
        Facts {
            cluster: "/c/cluster.toml".into(),
            engine: Engine::Vllm,
            transport,
            serve: s,
            url,
        }
    }

    #[test]
    fn what_cannot_be_compared_or_restarted_is_refused_with_a_hint() {
        for (f, says) in [
            (
                facts(Transport::Auto, Some(serve(true, true)), true),
                "cannot be restarted by halobox",
            ),
            (facts(Transport::Auto, None, false), "and none is"),
            (
                facts(Transport::Auto, Some(serve(false, true)), false),
                "runs in the foreground of another halobox",
            ),
            (
                facts(Transport::Auto, Some(serve(true, false)), false),
                "recorded without its arguments",
            ),
            (
                facts(Transport::Ethernet, Some(serve(true, true)), false),
                "sets transport = \"ethernet\"",
            ),
        ] {
            let e = plan(&f).unwrap_err();
            assert!(e.contains(says) && e.contains("\n  hint: "), "{says}: {e}");
        }
    }

    #[test]
    fn the_plan_runs_ethernet_then_the_configured_transport_and_restores() {
        let p = plan(&facts(Transport::Roce, Some(serve(true, true)), false)).unwrap();
        assert_eq!(
            p.legs
                .iter()
                .map(|l| (l.name.as_str(), l.transport))
                .collect::<Vec<_>>(),
            [
                ("ethernet", Transport::Ethernet),
                ("configured", Transport::Roce)
            ]
        );
        assert_eq!(
            p.serve_argv,
            [
                "serve",
                "Qwen/Qwen3-0.6B",
                "--cluster=/c/cluster.toml",
                "--tp=2",
                "--max-model-len=2048",
                "--port=8000",
                "--timeout=1800",
                "--nccl-debug",
                "--detach",
                "--",
                "--seed",
                "1"
            ]
        );
        let text = render(&p, "concurrency 1, 2\n");
        for said in [
            "first: ask vLLM's /metrics",
            "leg 1 (ethernet, TCP sockets):",
            "halobox cluster up with transport = \"ethernet\" in memory (cluster.toml is not changed)",
            "leg 2 (configured, as cluster.toml says; the state it ends in):",
            "halobox cluster up with transport = \"roce\" (each node",
            "4. halobox serve Qwen/Qwen3-0.6B --cluster=/c/cluster.toml --tp=2",
            "5. the benchmark (below)\nleg 2",
            "the benchmark, the same in both legs (saved in a folder per leg):\n  concurrency 1, 2\n",
            "halobox cluster down --cluster=/c/cluster.toml && halobox cluster up --cluster=/c/cluster.toml && halobox serve",
            "Nothing was done (--dry-run).",
        ] {
            assert!(text.contains(said), "{said}:\n{text}");
        }
        assert_eq!(text.matches("halobox serve stop").count(), 2, "{text}");
    }

    const METRICS: &str =
        "# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} RUN
vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0
vllm:num_requests_waiting_by_reason{engine=\"0\",reason=\"capacity\"} 9.0
vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} GEN
vllm:generation_tokens_created{engine=\"0\",model_name=\"m\"} 1.7e9
";

    fn m(run: &str, gen_: &str) -> String {
        METRICS.replace("RUN", run).replace("GEN", gen_)
    }

    #[test]
    fn vllm_is_in_use_when_requests_run_wait_or_tokens_come() {
        let idle = m("0.0", "120.0");
        assert_eq!(in_use(Engine::Vllm, &idle, &idle), Ok(None));
        let busy = in_use(Engine::Vllm, &idle, &m("2.0", "120.0"))
            .unwrap()
            .unwrap();
        assert!(
            busy.contains("2 request(s) running and 0 waiting"),
            "{busy}"
        );
        let moved = in_use(Engine::Vllm, &idle, &m("0.0", "136.0"))
            .unwrap()
            .unwrap();
        assert!(
            moved.contains("generated 16 token(s) within a second"),
            "{moved}"
        );
        let e = in_use(Engine::Vllm, "<html>", "<html>").unwrap_err();
        assert!(e.contains("has no vllm:num_requests_running"), "{e}");
    }

    #[test]
    fn llama_cpp_is_in_use_when_a_slot_processes_or_took_a_task() {
        let s = |task: i64, busy: bool| {
            format!(
                r#"[{{"id":0,"id_task":{task},"n_ctx":2048,"is_processing":{busy}}},{{"id":1,"id_task":-1,"is_processing":false}}]"#
            )
        };
        assert_eq!(
            in_use(Engine::LlamaCpp, &s(4, false), &s(4, false)),
            Ok(None)
        );
        let busy = in_use(Engine::LlamaCpp, &s(4, false), &s(5, true))
            .unwrap()
            .unwrap();
        assert!(busy.contains("slot(s) 0 are processing"), "{busy}");
        let moved = in_use(Engine::LlamaCpp, &s(4, false), &s(6, false))
            .unwrap()
            .unwrap();
        assert!(
            moved.contains("slot(s) 0 took a request within a second"),
            "{moved}"
        );
        assert!(
            in_use(Engine::LlamaCpp, "{}", "{}")
                .unwrap_err()
                .contains("not a list of slots")
        );
    }

    fn res(levels: &[(u32, f64, f64, f64)]) -> ServingResults {
        let spread = |p50| {
            Some(super::super::record::Spread {
                samples: 1,
                mean: p50,
                p50,
                p99: p50,
            })
        };
        ServingResults {
            schema_version: 1,
            kind: "serving".into(),
            started_utc: String::new(),
            endpoint: String::new(),
            model: "m".into(),
            server: "vllm".into(),
            input_tokens: 8,
            output_tokens: 8,
            prompt_lengths: String::new(),
            partial: None,
            levels: levels
                .iter()
                .map(|&(c, tps, ttft, itl)| LevelResult {
                    concurrency: c,
                    status: "ok".into(),
                    requests: 2,
                    completed: 2,
                    failed: 0,
                    duration_s: 1.0,
                    request_throughput: 1.0,
                    output_throughput: tps,
                    ttft_ms: spread(ttft),
                    itl_ms: spread(itl),
                    e2e_ms: None,
                    mean_output_tokens: 8.0,
                    note: None,
                })
                .collect(),
        }
    }

    #[test]
    fn the_ratio_is_configured_over_ethernet_per_level() {
        let eth = res(&[(1, 100.0, 40.0, 10.0), (4, 200.0, 80.0, 20.0)]);
        let rdma = res(&[(1, 150.0, 20.0, 5.0), (8, 1.0, 1.0, 1.0)]);
        let r = ratios(&eth, &rdma);
        assert_eq!(
            r,
            [Ratio {
                concurrency: 1,
                output_throughput: Some(1.5),
                ttft_p50: Some(0.5),
                itl_p50: Some(0.5)
            }]
        );
        let p = plan(&facts(Transport::Auto, Some(serve(true, true)), false)).unwrap();
        let doc = AbResults {
            kind: "bench serving --ab-transport".into(),
            plan: p,
            legs: vec![],
            ratios: r,
            changed: true,
            restored: false,
            interrupted: None,
        };
        let text = render_results(&doc);
        assert!(
            text.contains("      1        1.50x      0.50x      0.50x"),
            "{text}"
        );
        assert!(
            text.contains("NOT back as configured\n  hint: halobox cluster down"),
            "{text}"
        );
    }
}
