//! `serve status`, `serve logs` and `serve stop`: the serve recorded for a
//! cluster file, looked at or stopped in the head's container.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::engine::{self, EngineState, Head};
use super::kv_check::{self, EngineKv, KvCheck};
use super::restart_policy::{self, Restarts};
use super::state::{self, ServeState};
use super::{log_lines, program};
use crate::cluster::config::ClusterConfig;
use crate::http;

/// What `serve status` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `serving`, `starting`, `unhealthy`, `exited` or `stopped`.
    pub state: String,
    /// The recorded serve, when there is one.
    pub serve: Option<ServeState>,
    /// Seconds since it started.
    pub uptime_s: Option<u64>,
    /// The nodes its Ray workers run on (from its log), by cluster.toml name;
    /// with llama.cpp, the head and every node's RPC server.
    pub nodes: Vec<String>,
    /// `/health` answered 200.
    pub healthy: bool,
    /// Whether the foreground halobox that watches it still runs (absent
    /// when detached, or not recorded).
    pub watched: Option<bool>,
    /// `--restart`: its supervisor's restarts (every event), and whether
    /// it gave up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts: Option<Restarts>,
    /// The supervisor that watches it under `--restart` (its pid), while it
    /// runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<u32>,
    /// The engine's KV-cache figures (from its log) against plan's bytes
    /// per token (absent when neither is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache: Option<KvCheck>,
    /// The golden completions recorded for it, and their last check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub golden: Option<super::golden::Summary>,
}

/// The status of the serve of `cfg` (whose file is `path`).
pub fn status(cfg: &ClusterConfig, path: &Path) -> anyhow::Result<Status> {
    let head = Head::of(cfg);
    let rec = state::load(path);
    let st = head.state()?;
    let kept = state::restarts(path);
    let supervisor = state::supervisor(path).map(|p| p.pid);
    let restarts = (kept.policy.is_some() || !kept.events.is_empty()).then_some(kept);
    let Some(rec) = rec else {
        let word = match st {
            EngineState::Running(_) => "running (not started by this cluster file's serve)",
            _ if restarts.as_ref().is_some_and(|r| r.gave_up.is_some()) => "gave up",
            _ if supervisor.is_some() => "restarting",
            _ => "stopped",
        };
        return Ok(Status {
            state: word.into(),
            serve: None,
            uptime_s: None,
            nodes: vec![],
            healthy: false,
            watched: None,
            restarts,
            supervisor,
            kv_cache: None,
            golden: None,
        });
    };
    let api = rec
        .endpoint
        .trim_start_matches("http://")
        .parse()
        .unwrap_or_else(|_| engine::api_addr(None, 8000));
    let healthy =
        http::get(api, "/health", None, Duration::from_secs(3)).is_ok_and(|r| r.status == 200);
    let log = head.log_tail(100_000).unwrap_or_default();
    let mut ips: Vec<std::net::Ipv4Addr> = log
        .lines()
        .filter_map(|l| log_lines::worker_ip(l, head.ip))
        .collect();
    ips.dedup();
    let llama = cfg.engine == crate::cluster::config::Engine::LlamaCpp;
    let mut nodes: Vec<String> = cfg
        .nodes
        .iter()
        .filter(|n| llama || n.ip == head.ip || ips.contains(&n.ip))
        .map(|n| format!("{} ({})", n.label(), n.ip))
        .collect();
    nodes.dedup();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let word = match st {
        EngineState::Running(p) if p == rec.pid && healthy => "serving",
        _ if supervisor.is_some() => "restarting",
        EngineState::Running(p) if p == rec.pid => "starting or unhealthy",
        EngineState::Running(_) => "another engine runs there",
        EngineState::Exited(_) => "exited",
        EngineState::None => "stopped",
    };
    let watched = watched(&rec);
    let kv_cache = kv_cache(&rec, &log);
    Ok(Status {
        kv_cache,
        watched,
        state: word.into(),
        uptime_s: Some(now.saturating_sub(rec.started)),
        serve: Some(rec),
        nodes,
        healthy,
        restarts,
        supervisor,
        golden: super::golden::load(path).map(|g| super::golden::summarize(&g)),
    })
}

/// The KV-cache check of `rec`: the engine's figures from `log` when it
/// still holds them, else the ones recorded when the engine became ready.
fn kv_cache(rec: &ServeState, log: &str) -> Option<KvCheck> {
    let engine = EngineKv::from_log(log);
    match (&rec.kv_cache, engine.bytes_per_token()) {
        (Some(kept), None) => Some(kept.clone()),
        (_, Some(_)) => Some(kv_check::judge(rec.kv_plan.as_ref(), &engine)),
        (None, None) => rec
            .kv_plan
            .as_ref()
            .map(|p| kv_check::judge(Some(p), &engine)),
    }
}

/// Whether the foreground halobox that watches `rec` still runs (its pid
/// and start time, as the engine's are checked); `None` when detached or
/// not recorded.
pub fn watched(rec: &ServeState) -> Option<bool> {
    if rec.detached {
        return None;
    }
    rec.watcher.map(|w| w.lives())
}

/// The status as text.
pub fn render(s: &Status) -> String {
    let restarts = s
        .restarts
        .as_ref()
        .and_then(restart_policy::summary)
        .map(|l| {
            format!(
                "  restarts: {l}{}\n",
                s.supervisor
                    .map(|p| format!(" (supervisor pid {p})"))
                    .unwrap_or_default()
            )
        })
        .unwrap_or_default();
    let Some(r) = &s.serve else {
        if let Some(g) = s.restarts.as_ref().and_then(|r| r.gave_up.as_ref()) {
            return format!("serve: gave up\n  {g}\n");
        }
        return format!(
            "serve: {}\n{restarts}  hint: `halobox serve MODEL` starts one\n",
            s.state
        );
    };
    let up = s.uptime_s.unwrap_or(0);
    restarts_after(
        format!(
            "serve: {}\n  model:    {}\n  endpoint: {}{}\n  uptime:   {}h{:02}m{:02}s\n  engine:   {} (pid {} in container {}, {})\n  nodes:    {}\n",
            s.state,
            r.model,
            r.endpoint,
            if r.api_key { " (API key required)" } else { "" },
            up / 3600,
            up / 60 % 60,
            up % 60,
            r.engine,
            r.pid,
            r.container,
            match (r.detached, s.watched, r.watcher) {
                (true, ..) => "detached".to_string(),
                (false, Some(false), Some(w)) => format!(
                    "its foreground halobox serve (pid {}) is gone: nothing watches it; `halobox serve stop` stops it",
                    w.pid
                ),
                (false, _, Some(w)) => format!(
                    "watched by a halobox serve in the foreground (pid {})",
                    w.pid
                ),
                (false, ..) => "watched by a halobox serve in the foreground".to_string(),
            },
            if s.nodes.is_empty() {
                "(none seen in its log)".into()
            } else {
                s.nodes.join(", ")
            },
        ),
        &format!(
            "{}{}{restarts}",
            s.kv_cache
                .as_ref()
                .map(|c| format!("  KV cache: {}\n", kv_check::render(c)))
                .unwrap_or_default(),
            s.golden
                .as_ref()
                .map(super::golden::summary)
                .unwrap_or_default()
        ),
    )
}

fn restarts_after(mut text: String, restarts: &str) -> String {
    text.push_str(restarts);
    text
}

/// Prints the engine's log (the last `lines`; with `follow`, then what it
/// writes until Ctrl-C), each line made safe for a terminal.
pub fn logs(cfg: &ClusterConfig, lines: usize, follow: bool) -> anyhow::Result<u8> {
    let head = Head::of(cfg);
    let mut args = vec![lines.to_string()];
    if follow {
        args.push("-f".into());
    }
    let argv = head.argv(&program::argv(program::logs(), &args));
    let mut p = crate::proc::Proc::spawn_with(&argv, engine::CAPTURE)?;
    loop {
        for l in p.lines(Duration::from_millis(500)) {
            println!("{l}");
        }
        if let Some(st) = p.try_status() {
            for l in p.lines(Duration::from_millis(100)) {
                println!("{l}");
            }
            return Ok(u8::try_from(st.code().unwrap_or(1).clamp(0, 255)).unwrap_or(1));
        }
    }
}

/// The stop program as run on the head over ssh (from any machine): what
/// `cluster down` runs first, so no vLLM outlives its Ray.
pub fn stop_argv(cfg: &ClusterConfig) -> Vec<String> {
    crate::cluster::run::node_argv(cfg, cfg.head(), &stop_in_container(cfg))
}

/// The stop program (20 s of grace) as run in the head's container; it
/// holds the serve (no supervisor restarts it).
fn stop_in_container(cfg: &ClusterConfig) -> Vec<String> {
    Head::of(cfg).argv(&program::argv(
        program::stop(),
        &["20".to_string(), "hold".to_string()],
    ))
}

/// Runs [`stop_argv`]: what the stop program said (`stopped PID`,
/// `gone PID`, `none`).
pub fn stop_over_ssh(cfg: &ClusterConfig) -> anyhow::Result<String> {
    let done = crate::cluster::run::remote_node(cfg, cfg.head()).run_ok(
        "the serve stop",
        &stop_in_container(cfg),
        Duration::from_secs(90),
    )?;
    Ok(done
        .stdout
        .lines()
        .last()
        .unwrap_or("none")
        .trim()
        .to_string())
}

/// Stops the serve of `cfg`: the engine in the head's container (its Ray
/// workers on the other nodes end with it), its shm segments, the record.
/// Under `--restart` its supervisor goes first (SIGTERM, SIGKILL after
/// 60 s), then the engine, held so that no restart follows.
pub fn stop(cfg: &ClusterConfig, path: &Path) -> anyhow::Result<String> {
    stop_supervisor(path);
    let head = Head::of(cfg);
    let said = head.stop(Duration::from_secs(20), true)?;
    state::remove(path);
    state::remove_restarts(path);
    Ok(said)
}

/// Stops the supervisor of `path`'s serve, when one runs: SIGTERM, then
/// SIGKILL after 60 s (a restart under way ends at its next step); true
/// when there was one.
pub fn stop_supervisor(path: &Path) -> bool {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let Some(p) = state::supervisor(path) else {
        return false;
    };
    let pid = Pid::from_raw(i32::try_from(p.pid).unwrap_or(i32::MAX));
    let _ = kill(pid, Signal::SIGTERM);
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while p.lives() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    if p.lives() {
        let _ = kill(pid, Signal::SIGKILL);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::state::Process;

    fn record(watcher: Option<Process>) -> ServeState {
        ServeState {
            cluster: "/c/cluster.toml".into(),
            engine: "vllm".into(),
            model: "m".into(),
            endpoint: "http://10.0.0.1:8000".into(),
            started: 0,
            pid: 42,
            container: "halobox".into(),
            api_key: false,
            detached: false,
            watcher,
            args: None,
            kv_plan: None,
            kv_cache: None,
        }
    }

    /// A foreground serve killed with `kill -9` (a real process, killed and
    /// reaped) no longer counts as watching: `serve status` says it is gone,
    /// as it does for a pid now another process's (another start time).
    #[test]
    fn a_killed_foreground_serve_watches_nothing() {
        let mut child = crate::proc::command("sleep").arg("300").spawn().unwrap();
        let me = Process::this().unwrap();
        // Field 22 of /proc/PID/stat, read here as the shell programs do.
        let text = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        let start = text
            .rsplit_once(") ")
            .unwrap()
            .1
            .split(' ')
            .nth(19)
            .unwrap();
        let w = Process {
            pid: child.id(),
            start: start.parse().unwrap(),
        };
        assert_eq!(Process::of(child.id()), Some(w));
        assert_eq!(watched(&record(Some(w))), Some(true));
        let status = |w| Status {
            state: "serving".into(),
            serve: Some(record(Some(w))),
            uptime_s: Some(1),
            nodes: vec![],
            healthy: true,
            watched: watched(&record(Some(w))),
            restarts: None,
            supervisor: None,
            kv_cache: None,
            golden: None,
        };
        assert!(render(&status(w)).contains(&format!(
            "watched by a halobox serve in the foreground (pid {})",
            w.pid
        )));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(watched(&record(Some(w))), Some(false));
        let text = render(&status(w));
        assert!(text.contains("is gone: nothing watches it"), "{text}");
        let reused = Process {
            start: me.start + 1,
            ..me
        };
        assert_eq!(watched(&record(Some(reused))), Some(false));
        assert_eq!(watched(&record(Some(me))), Some(true));
        let mut detached = record(Some(me));
        detached.detached = true;
        assert_eq!(watched(&detached), None);
    }

    #[test]
    fn kv_cache_line_from_the_log_else_the_record() {
        let kv = crate::model::kv::hf::from_config(&serde_json::json!({
            "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 2048
        }))
        .unwrap();
        let mut rec = record(None);
        rec.kv_plan = Some(kv_check::PlanKv::of(
            &kv,
            &crate::model::kv::KvOptions::default(),
            1,
            Some(512),
        ));
        let log = "(Worker pid=9) INFO 12-06 [cpu_worker.py:260] Explicitly set (1.0/23.59) GiB for KV cache on node 0.\n(EngineCore pid=8) INFO 12-06 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 512 tokens per request: 2048.00x\n";
        let c = kv_cache(&rec, log).unwrap();
        assert_eq!(c.engine_bytes_per_token, Some(1024.0));
        assert_eq!(c.plan_bytes_per_token, Some(1024.0));
        // Rotated out of the log: the figures recorded at the start.
        rec.kv_cache = Some(c.clone());
        assert_eq!(kv_cache(&rec, "INFO later lines\n"), Some(c.clone()));
        let status = Status {
            state: "serving".into(),
            serve: Some(rec),
            uptime_s: Some(1),
            nodes: vec![],
            healthy: true,
            watched: None,
            restarts: None,
            supervisor: None,
            kv_cache: Some(c),
            golden: None,
        };
        let text = render(&status);
        assert!(
            text.contains(
                "  KV cache: engine 1024 B/token, plan 1024 B/token (0.0% apart: they agree)"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["kv_cache"]["plan_bytes_per_token"], 1024.0);
        assert_eq!(json["kv_cache"]["verdict"], "agree");
    }
}
