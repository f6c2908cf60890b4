//! `serve --restart on-failure[:MAX]`, live, on the test nodes of
//! tests/common/serve.rs: faults made for real in the nodes' containers
//! (`kill -9` of the engine on the head, an RPC server killed, one frozen
//! with SIGSTOP while requests run), each followed by the supervisor's
//! restart at the same endpoint with the same greedy tokens and one event
//! naming the cause; a restart loop that stops at MAX with nothing left
//! running; `serve stop` and `cluster down` that stop the supervisor and
//! are never followed by a restart. No assertion on time: every wait has a
//! generous bound and the outcome is asserted.
//!
//! Needs root, the engines of scripts/engines/start.sh and
//! scripts/llama-cpp.sh's build (a missing piece fails). One at a time.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::serve::{RPC_PORT, Serving, TOKENS, assert_same_tokens, tiny_vllm_serve};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Processes of a serve by llama.cpp.
const LLAMA: &[&str] = &["llama-server"];

/// `serve status --json`.
fn status(s: &Serving) -> Value {
    let r = s.hb(&["serve", "status", "--cluster", &s.cfg(), "--json"]);
    serde_json::from_str(&r.out).unwrap_or_else(|e| panic!("{e}: {r}"))
}

/// The restart events `serve status --json` lists.
fn events(v: &Value) -> Vec<Value> {
    v["restarts"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits (up to `within`) until `serve status --json` passes `done`;
/// panics with the last status and the supervisor's log.
fn wait_status(s: &Serving, what: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let v = status(s);
        if done(&v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} within {within:?}: {v:#}\nsupervisor log:\n{}",
            supervisor_log(s)
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The supervisor's log on the head (every `*.supervisor.log` in the state
/// folder).
fn supervisor_log(s: &Serving) -> String {
    s.run(
        "supervisor-log",
        s.on_node(
            'a',
            &[
                "sh",
                "-c",
                "cat ${XDG_STATE_HOME:-$HOME/.local/state}/halobox/serve/*.supervisor.log 2>/dev/null | tail -n 60",
            ],
        ),
    )
    .out
}

/// `n` events, the last serving again, and the serve serving.
fn serving_again(s: &Serving, n: usize) -> Value {
    wait_status(
        s,
        &format!("restart {n} serving again"),
        Duration::from_secs(300),
        |v| {
            let e = events(v);
            v["state"] == "serving" && e.len() == n && e[n - 1]["outcome"] == "serving"
        },
    )
}

/// The engine's pid in the head's container.
fn engine_pid(s: &Serving) -> String {
    status(s)["serve"]["pid"].to_string()
}

/// The supervisor processes on the head.
fn supervisors(s: &Serving) -> String {
    s.run(
        "pgrep",
        s.on_node('a', &["pgrep", "-a", "-f", "serve supervise"]),
    )
    .out
}

/// Waits (up to 1 min) until no supervisor runs on the head.
fn assert_no_supervisor(s: &Serving, after: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = supervisors(s);
        if left.trim().is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "a supervisor still runs after {after}: {left}\n{}",
            supervisor_log(s)
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// No llama-server runs on the head for `quiet` (no restart came), and
/// none is left.
fn stays_stopped(s: &Serving, quiet: Duration, after: &str) {
    let until = Instant::now() + quiet;
    while Instant::now() < until {
        let running: Vec<String> = s
            .processes('a')
            .into_iter()
            .filter(|c| c.contains("llama-server"))
            .collect();
        assert!(
            running.is_empty(),
            "llama-server runs again after {after}: {running:?}\n{}",
            supervisor_log(s)
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// llama.cpp on two podman nodes with a random-weight GGUF, served with
/// `--restart on-failure:3 --stall-timeout 20`: llama-server `kill -9`ed,
/// node b's RPC server killed, then frozen while requests run (SIGCONT once
/// the supervisor saw it): each restarted at the same endpoint with the
/// same greedy tokens and one event naming the check (and node b); a
/// fourth failure in the window gives up (said in `serve status`, nothing
/// left running, no supervisor); `serve stop` and `cluster down` end the
/// supervisor and no restart follows them.
#[test]
fn llama_cpp_restarts_after_kill_rpc_loss_and_freeze_then_gives_up() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Serving::llama("podman", 2, None, [2, 128, 4, 2]);
    let cfg = s.cfg();
    let model = s.model.clone();
    let ip_b = s.ip('b');
    s.refresh();
    s.hb(&["cluster", "up", "--cluster", &cfg])
        .expect_ok("cluster up");
    let key = s.path("cluster.api-key");
    let serve_args = [
        "serve",
        model.as_str(),
        "--detach",
        "--restart",
        "on-failure:3",
        "--stall-timeout",
        "20",
        "--cluster",
        cfg.as_str(),
    ];

    // --dry-run shows the policy.
    let mut dry = serve_args.to_vec();
    dry.push("--dry-run");
    let d = s.hb(&dry).expect_ok("serve --restart --dry-run");
    assert!(
        d.out
            .contains("# --restart on-failure:3: a supervisor restarts the serve")
            && d.out.contains("no token for 20 s"),
        "--dry-run does not show the restart policy: {d}"
    );

    // serve --detach --restart: a supervisor keeps it.
    let t = Instant::now();
    let serve = s.hb(&serve_args).expect_ok("serve --detach --restart");
    eprintln!(
        "serve --detach --restart: {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    assert!(
        serve
            .out
            .contains("kept running by a supervisor on this machine (pid "),
        "serve did not name its supervisor: {serve}"
    );
    let v = status(&s);
    assert!(
        v["supervisor"].is_u64() && events(&v).is_empty(),
        "status does not show a supervisor and no event: {v:#}"
    );
    let first = s.complete('a', 8000, TOKENS, Some(&key));

    // 1. llama-server killed with kill -9 in the head's container.
    let t = Instant::now();
    let pid = engine_pid(&s);
    s.in_container('a', &["kill", "-KILL", &pid])
        .expect_ok("kill -9 of llama-server");
    let v = serving_again(&s, 1);
    eprintln!(
        "fault 1 (kill -9 llama-server): serving again after {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    let e = &events(&v)[0];
    assert!(
        ["exited", "health"].contains(&e["check"].as_str().unwrap_or(""))
            && e["serving_again_s"].is_f64(),
        "the event does not name the check: {e}"
    );
    assert_ne!(
        engine_pid(&s),
        pid,
        "the same llama-server pid after a restart"
    );
    let text = s
        .hb(&["serve", "status", "--cluster", &cfg])
        .expect_ok("serve status after a restart");
    assert!(
        text.out
            .contains("restarts: 1 (--restart on-failure:3); last: "),
        "serve status does not show the restart: {text}"
    );
    assert_same_tokens(&first, &s.complete('a', 8000, TOKENS, Some(&key)));

    // 2. Node b's RPC server killed: restarted once it is back.
    let t = Instant::now();
    let rpid = s.rpc_pid('b');
    s.in_container('b', &["kill", "-KILL", &rpid])
        .expect_ok("killing node b's RPC server");
    let v = serving_again(&s, 2);
    eprintln!(
        "fault 2 (RPC server killed): serving again after {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    let e = &events(&v)[1];
    assert!(
        e["node"]
            .as_str()
            .is_some_and(|n| n.contains(&format!("node b ({ip_b})")))
            && e["check"] == "rpc",
        "the event does not name node b and the RPC port check: {e}"
    );
    assert_ne!(
        s.rpc_pid('b'),
        rpid,
        "node b's RPC server was not started again"
    );
    assert_same_tokens(&first, &s.complete('a', 8000, TOKENS, Some(&key)));

    // 3. Node b's RPC server frozen while requests run: seen (the 1-token
    // probe or the progress probe), and restarted once it runs again.
    let t = Instant::now();
    let rpid = s.rpc_pid('b');
    let busy = s.spawn_busy('a', 8000, 100_000, Some(&key));
    std::thread::sleep(Duration::from_secs(2));
    s.in_container('b', &["kill", "-STOP", &rpid])
        .expect_ok("freezing node b's RPC server");
    let v = wait_status(&s, "the freeze seen", Duration::from_secs(180), |v| {
        events(v).len() == 3
    });
    eprintln!(
        "fault 3 (RPC server frozen): seen after {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    busy.kill_group();
    let e = &events(&v)[2];
    assert!(
        ["probe", "stall"].contains(&e["check"].as_str().unwrap_or(""))
            && e["node"].as_str().is_some_and(|n| n.contains("node b")),
        "the freeze's event does not name node b and the probe: {e}"
    );
    s.in_container('b', &["kill", "-CONT", &rpid])
        .expect_ok("thawing node b's RPC server");
    serving_again(&s, 3);
    eprintln!(
        "fault 3 (RPC server frozen): serving again after {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    assert_same_tokens(&first, &s.complete('a', 8000, TOKENS, Some(&key)));

    // 4. A fourth failure in the window: gives up, nothing left running.
    let pid = engine_pid(&s);
    s.in_container('a', &["kill", "-KILL", &pid])
        .expect_ok("kill -9 of llama-server again");
    let v = wait_status(&s, "the give-up", Duration::from_secs(120), |v| {
        v["state"] == "gave up"
    });
    assert!(
        v["restarts"]["gave_up"]
            .as_str()
            .is_some_and(|g| g.contains("gave up: 3 restart(s) in the last 10 minutes")),
        "{v:#}"
    );
    let text = s.hb(&["serve", "status", "--cluster", &cfg]);
    assert!(
        text.code == Some(3) && text.out.starts_with("serve: gave up\n"),
        "serve status after the give-up: {text}"
    );
    assert!(
        supervisor_log(&s).contains("gave up: 3 restart(s)"),
        "the supervisor's log does not say it gave up"
    );
    assert_no_supervisor(&s, "the give-up");
    s.assert_none_left(&['a'], LLAMA, Duration::from_secs(30));
    stays_stopped(&s, Duration::from_secs(10), "the give-up");

    // serve stop stops the supervisor first, and nothing restarts.
    s.hb(&serve_args)
        .expect_ok("serve --detach --restart again");
    let v = status(&s);
    assert!(
        events(&v).is_empty(),
        "a new serve starts with no event: {v:#}"
    );
    s.hb(&["serve", "stop", "--cluster", &cfg])
        .expect_ok("serve stop");
    assert_no_supervisor(&s, "serve stop");
    s.assert_none_left(&['a'], LLAMA, Duration::from_secs(30));
    stays_stopped(&s, Duration::from_secs(15), "serve stop");

    // cluster down while a supervisor keeps the serve: held, no restart,
    // the supervisor ends.
    s.hb(&serve_args)
        .expect_ok("serve --detach --restart for cluster down");
    s.hb(&["cluster", "down", "--cluster", &cfg])
        .expect_ok("cluster down");
    assert_no_supervisor(&s, "cluster down");
    stays_stopped(&s, Duration::from_secs(15), "cluster down");
    assert!(
        s.listening('b', RPC_PORT).is_empty(),
        "the supervisor brought node b's RPC server back after cluster down"
    );
}

/// vLLM's CPU build over Ray on two podman nodes (TP 2), served with
/// `--restart on-failure:3 --stall-timeout 20` and `VLLM_API_KEY` from the
/// environment: vLLM `kill -9`ed in the head's container; node b's whole
/// container killed (the supervisor's `cluster up` starts it again and it
/// rejoins the Ray that still runs on the head); node b's worker process
/// frozen with SIGSTOP while requests run (seen by the progress probe).
/// Each is served again at the same endpoint with the same key and the
/// same greedy tokens, with one event naming the check (and node b); the
/// key is in no process argument, log or event; `serve stop` ends the
/// supervisor and nothing is left.
#[test]
fn vllm_restarts_after_kill_9_worker_loss_and_freeze() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Serving::vllm("podman", 2, None, [2, 256, 4, 2]);
    let cfg = s.cfg();
    let model = s.model.clone();
    s.refresh();
    s.hb(&["cluster", "up", "--cluster", &cfg])
        .expect_ok("cluster up");
    let key = format!("restart-{:x}-{}", std::process::id(), s.net());
    let key_file = s.path("vllm.key");
    std::fs::write(&key_file, &key).unwrap();
    let t = Instant::now();
    let serve = s
        .hb_env(
            &tiny_vllm_serve(
                &model,
                "2",
                &cfg,
                &[
                    "--detach",
                    "--restart",
                    "on-failure:3",
                    "--stall-timeout",
                    "20",
                ],
            ),
            &[("VLLM_API_KEY", &key)],
        )
        .expect_ok("serve --detach --restart");
    eprintln!(
        "vLLM serve --detach --restart: {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    assert!(
        serve.out.contains("kept running by a supervisor"),
        "{serve}"
    );
    let first = s.complete('a', 8000, TOKENS, Some(&key_file));
    eprintln!("vLLM's first completion: {} s (information)", first["secs"]);

    let t = Instant::now();
    let pid = engine_pid(&s);
    s.in_container('a', &["kill", "-KILL", &pid])
        .expect_ok("kill -9 of vLLM");
    let v = wait_status(&s, "vLLM serving again", Duration::from_secs(900), |v| {
        let e = events(v);
        v["state"] == "serving" && e.len() == 1 && e[0]["outcome"] == "serving"
    });
    eprintln!(
        "vLLM kill -9: serving again after {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    let e = &events(&v)[0];
    assert!(
        ["exited", "health", "log"].contains(&e["check"].as_str().unwrap_or("")),
        "the event does not name the check: {e}"
    );
    assert_ne!(engine_pid(&s), pid, "the same vLLM pid after a restart");
    assert_same_tokens(&first, &s.complete('a', 8000, TOKENS, Some(&key_file)));
    assert_eq!(
        s.http_code('a', 8000, "/v1/models", None),
        "401",
        "the restarted vLLM answered without the key"
    );
    let ip_b = s.ip('b');
    let on_b = |e: &Value| {
        e["node"]
            .as_str()
            .is_some_and(|n| n.contains(&format!("node b ({ip_b})")))
    };

    // 2. Node b's whole container killed while vLLM is idle: seen (Ray
    // lists b dead, or vLLM's own worker monitor ends it), the container
    // started again by the supervisor's `cluster up`, b rejoins the Ray
    // that still runs on the head.
    let t = Instant::now();
    s.engine_cli('b', &["kill", "vllm"])
        .expect_ok("killing node b's container");
    let v = wait_status(
        &s,
        "vLLM serving again after node b's loss",
        Duration::from_secs(900),
        |v| {
            let e = events(v);
            v["state"] == "serving" && e.len() == 2 && e[1]["outcome"] == "serving"
        },
    );
    eprintln!(
        "vLLM node b's container killed: serving again after {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    let e = &events(&v)[1];
    assert!(
        ["ray", "log", "exited", "health"].contains(&e["check"].as_str().unwrap_or("")),
        "the event does not name the check: {e}"
    );
    let log = supervisor_log(&s);
    assert!(
        on_b(e) || log.contains(&format!("node b ({ip_b})")),
        "neither the event nor the supervisor's log names node b: {e}\n{log}"
    );
    assert!(
        log.contains("container vllm was exited: started")
            && log.contains("Ray already runs on the head a"),
        "the supervisor's `cluster up` did not start b's container and keep the head's Ray:\n{log}"
    );
    let state = s.engine_cli('b', &["inspect", "-f", "{{.State.Status}}", "vllm"]);
    assert_eq!(state.out.trim(), "running", "{state}");
    assert_same_tokens(&first, &s.complete('a', 8000, TOKENS, Some(&key_file)));

    // 3. Node b's worker frozen while requests run: the progress probe
    // sees no token for --stall-timeout; thawed once seen.
    let t = Instant::now();
    let busy = s.spawn_busy('a', 8000, 32, Some(&key_file));
    std::thread::sleep(Duration::from_secs(3));
    let pids = s
        .in_container('b', &["pgrep", "-f", "^ray::RayWorker"])
        .expect_ok("the worker on b");
    let pids: Vec<&str> = pids.out.split_whitespace().collect();
    assert!(!pids.is_empty(), "no vLLM worker process on node b");
    let mut stop = vec!["kill", "-STOP"];
    stop.extend(&pids);
    s.in_container('b', &stop)
        .expect_ok("freezing node b's worker");
    let v = wait_status(&s, "the freeze seen", Duration::from_secs(240), |v| {
        events(v).len() == 3
    });
    eprintln!(
        "vLLM node b's worker frozen: seen after {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    busy.kill_group();
    let mut cont = vec!["kill", "-CONT"];
    cont.extend(&pids);
    let _ = s.in_container('b', &cont);
    let e = &events(&v)[2];
    assert!(
        e["check"] == "stall",
        "the freeze's event does not name the progress probe: {e}"
    );
    let v = wait_status(
        &s,
        "vLLM serving again after the freeze",
        Duration::from_secs(600),
        |v| {
            let e = events(v);
            v["state"] == "serving" && e.len() == 3 && e[2]["outcome"] == "serving"
        },
    );
    eprintln!(
        "vLLM node b's worker frozen: serving again after {:.1} s (information)",
        t.elapsed().as_secs_f64()
    );
    assert_same_tokens(&first, &s.complete('a', 8000, TOKENS, Some(&key_file)));

    let ps = s.run("ps", s.on_node('a', &["ps", "-eo", "args"])).out;
    assert!(
        !ps.contains(&key) && !supervisor_log(&s).contains(&key) && !v.to_string().contains(&key),
        "the API key is in a process argument, the supervisor's log or an event"
    );

    s.hb(&["serve", "stop", "--cluster", &cfg])
        .expect_ok("serve stop");
    assert_no_supervisor(&s, "serve stop");
    s.hb(&["cluster", "down", "--cluster", &cfg])
        .expect_ok("cluster down");
    s.assert_none_left(
        &s.names.clone(),
        &["vllm serve", "RayWorkerProc", "EngineCore"],
        Duration::from_secs(60),
    );
}
