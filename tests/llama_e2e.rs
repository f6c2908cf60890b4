//! llama.cpp over RPC, live, served by `halobox serve` on test nodes of
//! this machine that each run their own engine (tests/common/serve.rs on
//! tests/common/netns.rs): `halobox refresh` on every node (llama.cpp's CPU
//! build and the model bound in), bad input refused, `cluster up` with the
//! RPC servers checked to listen on the data plane only, `serve --detach`,
//! a second head refused, status, logs, a greedy completion, `bench serving
//! --ab-transport` (refused while a request runs, both legs, SIGINT mid-run
//! naming the state and a restore that works), `serve stop`; with faults a
//! killed and a frozen worker named; `cluster down` with nothing left; the
//! tokens must equal llama-server alone on one node. (vLLM's twin:
//! tests/serve_e2e.rs.)
//!
//! Needs root, the engines of scripts/engines/start.sh and
//! scripts/llama-cpp.sh's build (scripts/test.sh installs both); a missing
//! piece fails. Each run takes minutes: one at a time. `bash
//! scripts/serve-e2e.sh llama_cpp` runs them by hand.

mod common;

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use common::serve::{
    HALOBOX, RPC_PORT, Ran, Serving, TOKENS, any_file_has, assert_same_tokens, mode, tokens_per_s,
};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What a llama.cpp run is given.
struct LlamaCase<'a> {
    backend: &'static str,
    nodes: usize,
    model: Option<&'a Path>,
    faults: bool,
}

/// Processes of a serve by llama.cpp.
const LLAMA_PROCESSES: &[&str] = &["llama-server", "rpc-server"];

/// The pid `serve status --json` shows for the serve.
fn serve_pid(s: &Serving) -> Value {
    let r = s.hb(&["serve", "status", "--cluster", &s.cfg(), "--json"]);
    let v: Value = serde_json::from_str(&r.out).unwrap_or_else(|e| panic!("{e}: {r}"));
    v["serve"]["pid"].clone()
}

/// A fake RPC server of protocol 3.0.0 on node `x`'s `port`.
const OLD_RPC: &str = "
import socket, struct, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], int(sys.argv[2]))); s.listen()
while True:
    c, _ = s.accept(); c.recv(64); c.sendall(struct.pack('<Q', 28) + bytes([3, 0, 0, 0]) + bytes(24)); c.close()";

/// The routes llama-server registers (tools/server/server.cpp of the
/// llama.cpp llama-cpp-python 0.3.36 vendors), as `METHOD PATH`.
const LLAMA_ROUTES: &[&str] = &[
    "GET /health",
    "GET /v1/health",
    "GET /metrics",
    "GET /props",
    "POST /props",
    "POST /api/show",
    "GET /models",
    "GET /v1/models",
    "GET /api/tags",
    "POST /completion",
    "POST /completions",
    "POST /v1/completions",
    "POST /chat/completions",
    "POST /v1/chat/completions",
    "POST /api/chat",
    "POST /v1/responses",
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
    "POST /infill",
    "POST /embedding",
    "POST /embeddings",
    "POST /v1/embeddings",
    "POST /rerank",
    "POST /reranking",
    "POST /v1/rerank",
    "POST /v1/reranking",
    "POST /tokenize",
    "POST /detokenize",
    "POST /apply-template",
    "GET /lora-adapters",
    "POST /lora-adapters",
    "GET /slots",
    "POST /slots/0",
    "GET /",
];

/// Every route llama-server registers answers 401 without the key but
/// `GET /health` and `/v1/health` (its own public ones: they say only
/// "ok") and `GET /` (no web UI in this build: 404); with the key every GET
/// Golden tokens: recorded when the serve first answered (its short prompts
/// and a long one near the context limit), shown by `serve status`; the
/// real engine gives them again; a recorded completion that is not what the
/// engine answers is named with its first differing token (exit 1), and
/// `--record` takes the engine's answers as the new set.
fn golden_tokens_hold_and_a_change_is_named(s: &Serving, serve: &Ran, status: &Ran) {
    let cfg = s.cfg();
    assert!(
        serve
            .err
            .contains("recorded 4 golden completions (greedy; short-1, short-2, short-3, long-"),
        "serve did not record its golden completions: {serve}"
    );
    assert!(
        status.out.contains("  golden:   4 prompts recorded ")
            && status.out.contains("not checked since"),
        "serve status does not show the golden set: {status}"
    );
    let same = s
        .hb(&["serve", "golden", "--cluster", &cfg])
        .expect_ok("serve golden");
    assert!(
        same.out
            .contains("4 of 4 prompts give the completions recorded"),
        "{same}"
    );
    let edit = "import glob, json, os\n\
d = os.environ.get('XDG_STATE_HOME') or os.path.expanduser('~/.local/state')\n\
p = glob.glob(d + '/halobox/serve/*.golden.json')[0]\n\
g = json.load(open(p))\n\
c = g['prompts'][0]\n\
c['text'] = c['text'][:2] + ' zebra' + c['text'][2:]\n\
c['tokens'] = None\n\
json.dump(g, open(p, 'w'))\n";
    s.run("golden-edit", s.on_node('a', &["python3", "-c", edit]))
        .expect_ok("editing the recorded golden set");
    let differ = s.hb(&["serve", "golden", "--cluster", &cfg]);
    assert_eq!(differ.code, Some(1), "{differ}");
    assert!(
        differ.out.contains("1 of 4 prompts differ")
            && differ
                .out
                .contains("short-1: first differing token #2: recorded \" zebra"),
        "{differ}"
    );
    let status = s
        .hb(&["serve", "status", "--cluster", &cfg])
        .expect_ok("serve status");
    assert!(
        status
            .out
            .contains("1 of 4 differ (the first: short-1 at token #2)"),
        "{status}"
    );
    s.hb(&["serve", "golden", "--record", "--cluster", &cfg])
        .expect_ok("serve golden --record");
    s.hb(&["serve", "golden", "--cluster", &cfg])
        .expect_ok("serve golden after --record");
}

/// one answers something else.
fn every_route_needs_the_key(s: &Serving, key: &std::path::Path) {
    let routes = s.route_codes('a', 8000, key, false, LLAMA_ROUTES);
    let open: Vec<_> = routes
        .iter()
        .filter(|(m, p, without, _)| match (m.as_str(), p.as_str()) {
            ("GET", "/health" | "/v1/health") => *without != 200,
            ("GET", "/") => *without == 200,
            _ => *without != 401,
        })
        .collect();
    assert!(
        open.is_empty(),
        "not as documented without the key: {open:?}"
    );
    let refused: Vec<_> = routes
        .iter()
        .filter(|(_, _, _, with)| *with == Some(401))
        .collect();
    assert!(refused.is_empty(), "refused with the key: {refused:?}");
    assert_eq!(routes.len(), LLAMA_ROUTES.len());
}

/// `serve status --json` carries llama.cpp's KV cache per token (its
/// `llama_kv_cache: size` over `n_ctx`, logged at the `-lv 4` halobox
/// gives): for the random GGUF 2 layers × 2 KV heads × (32 + 32) × 2 B;
/// plan's figure within 2% when plan could read the GGUF on the head.
fn kv_cache_as_llama_counts(s: &Serving, random: bool) {
    let r = s
        .hb(&["serve", "status", "--cluster", &s.cfg(), "--json"])
        .expect_ok("serve status --json");
    let doc: Value = serde_json::from_str(&r.out).unwrap_or_else(|e| panic!("{e}: {r}"));
    let kv = &doc["kv_cache"];
    let engine = kv["engine_bytes_per_token"]
        .as_f64()
        .unwrap_or_else(|| panic!("serve status --json has no engine KV figure: {r}"));
    if random {
        assert_eq!(engine, 512.0, "{kv}");
    }
    if let Some(plan) = kv["plan_bytes_per_token"].as_f64() {
        assert!((plan - engine).abs() / engine <= 0.02, "{kv}");
    }
    let text = s
        .hb(&["serve", "status", "--cluster", &s.cfg()])
        .expect_ok("serve status");
    assert!(
        text.out
            .contains(&format!("  KV cache: engine {engine:.0} B/token")),
        "{text}"
    );
}

fn llama_e2e(case: LlamaCase) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Serving::llama(case.backend, case.nodes, case.model, [2, 128, 4, 2]);
    let cfg = s.cfg();
    let model = s.model.clone();
    let all = s.names.clone();
    let workers = s.workers();
    let (ip_a, ip_b) = (s.ip('a'), s.ip('b'));
    let half = Duration::from_secs(30);
    let text = std::fs::read_to_string(&s.cfg).unwrap();

    s.refresh();

    // Bad input before cluster up: a worker without the RPC server, its port taken.
    let nobin = s.path("nobin.toml");
    std::fs::write(
        &nobin,
        text.lines()
            .map(|l| {
                if l.starts_with("llama_server = ") {
                    "llama_server = \"/opt/none/bin/llama-server\""
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    s.refused(
        "a worker without the RPC server",
        &format!("node b ({ip_b}): container vllm has no RPC server"),
        &["cluster", "up", "--cluster", nobin.to_str().unwrap()],
    );
    {
        let _holder = s.hold(
            'b',
            RPC_PORT,
            "import socket, sys, time; s = socket.socket(); s.bind((sys.argv[1], 50052)); s.listen(); time.sleep(300)",
            &[&ip_b],
        );
        s.refused(
            "a taken RPC port",
            &format!("node b ({ip_b}): the RPC server could not listen on {ip_b}:{RPC_PORT}"),
            &["cluster", "up", "--cluster", &cfg],
        );
    }
    s.hb(&["cluster", "down", "--cluster", &cfg])
        .expect_ok("cluster down after the refused cluster up");

    // cluster up: an RPC server on every worker, on its data-plane address only.
    s.hb(&["cluster", "up", "--cluster", &cfg])
        .expect_ok("cluster up");
    for &x in &workers {
        assert_eq!(
            s.listening(x, RPC_PORT),
            vec![format!("{}:{RPC_PORT}", s.ip(x))],
            "node {x}: the RPC server does not listen on its data-plane address only"
        );
    }
    let cstatus = s
        .hb(&["cluster", "status", "--cluster", &cfg])
        .expect_ok("cluster status");
    for &x in &workers {
        assert!(
            cstatus.out.lines().any(|l| l.starts_with(&format!("{x} "))
                && l.contains("running")
                && l.contains("protocol")),
            "cluster status does not show node {x}'s RPC server answering: {cstatus}"
        );
    }

    // Bad input for serve: each refused before anything starts.
    s.refused(
        "a missing GGUF",
        "/models/nope.gguf: no such file in container vllm on the head",
        &["serve", "/models/nope.gguf", "--cluster", &cfg],
    );
    s.refused(
        "a file that is not GGUF",
        "/models/bad.gguf: not a GGUF file",
        &["serve", "/models/bad.gguf", "--cluster", &cfg],
    );
    s.refused(
        "--engine that disagrees",
        "--engine vllm, but",
        &["serve", &model, "--engine", "vllm", "--cluster", &cfg],
    );
    let old = s.path("old.toml");
    std::fs::write(
        &old,
        text.replace(
            "engine = \"llama.cpp\"",
            "engine = \"llama.cpp\"\nrpc_port = 50099",
        ),
    )
    .unwrap();
    {
        let _fake = s.hold('b', 50099, OLD_RPC, &[&ip_b, "50099"]);
        s.refused(
            "an RPC server of another protocol",
            &format!("node b ({ip_b}): the RPC server on {ip_b}:50099 speaks RPC protocol 3.0.0"),
            &["serve", &model, "--cluster", old.to_str().unwrap()],
        );
    }

    // serve --detach, at a context of 1,024 tokens: the golden set's long
    // prompt then has 872 tokens (its length follows the context), which
    // SmolLM2 over three RPC nodes on this machine's 2 cores reads in
    // seconds, where the 4,608 of a default context took a minute a check.
    let t0 = Instant::now();
    let serve = s
        .hb(&[
            "serve",
            &model,
            "--detach",
            "--max-model-len",
            "1024",
            "--cluster",
            &cfg,
        ])
        .expect_ok("halobox serve --detach");
    let ready = t0.elapsed();
    assert!(
        serve
            .out
            .lines()
            .any(|l| l.starts_with(&format!("serving {model} at http://"))),
        "serve did not print the endpoint: {serve}"
    );
    let rpc_list = workers
        .iter()
        .map(|&x| format!("{}:{RPC_PORT}", s.ip(x)))
        .collect::<Vec<_>>()
        .join(",");
    let head = s.processes('a');
    assert!(
        head.iter()
            .any(|c| c.contains(&format!("--rpc {rpc_list}"))),
        "llama-server does not list every worker with --rpc {rpc_list}: {head:?}"
    );

    // A second head on the busy RPC servers is refused before it hangs.
    s.refused(
        "a second head",
        "another llama-server holds it",
        &["serve", &model, "--port", "8001", "--cluster", &cfg],
    );

    // serve status, serve logs.
    let status = s
        .hb(&["serve", "status", "--cluster", &cfg])
        .expect_ok("serve status");
    assert!(
        status.out.lines().any(|l| l.starts_with("serve: serving")),
        "serve status does not say serving: {status}"
    );
    assert!(
        status.out.contains("engine:   llama.cpp"),
        "serve status does not name the engine: {status}"
    );
    kv_cache_as_llama_counts(&s, case.model.is_none());
    golden_tokens_hold_and_a_change_is_named(&s, &serve, &status);
    let logs = s
        .hb(&["serve", "logs", "-n", "20", "--cluster", &cfg])
        .expect_ok("serve logs");
    assert!(!logs.out.is_empty(), "serve logs printed nothing: {logs}");

    // One greedy completion. Without LLAMA_API_KEY serve made the
    // cluster's key, 0600 beside cluster.toml.
    let key = s.path("cluster.api-key");
    assert_eq!(mode(&key), 0o600, "the cluster's API key file");
    let secret = std::fs::read_to_string(&key).unwrap().trim().to_string();
    assert_eq!(
        s.http_code(
            'a',
            8000,
            "/completion",
            Some(r#"{"prompt": "a", "n_predict": 1}"#)
        ),
        "401",
        "llama-server answered without the key"
    );
    every_route_needs_the_key(&s, &key);
    let cluster = s.complete('a', 8000, TOKENS, Some(&key));
    eprintln!("{cluster}");

    // bench serving --ab-transport is refused while requests run back to back,
    // and leaves the serve untouched.
    let pid_before = serve_pid(&s);
    let long = s.spawn_busy('a', 8000, 32, Some(&key));
    std::thread::sleep(Duration::from_secs(2));
    s.refused(
        "a serve in use",
        "is in use: llama-server's slot(s)",
        &["bench", "serving", "--ab-transport", "--cluster", &cfg],
    );
    assert_eq!(
        serve_pid(&s),
        pid_before,
        "the refused --ab-transport touched the serve"
    );
    long.kill_group();
    s.wait_slots_idle('a', 8000, &key);

    // --ab-transport: ethernet, then the configured transport; the serve
    // back at the same endpoint.
    let ab_dir = s.path("ab");
    let ab = s
        .hb(&[
            "bench",
            "serving",
            "--ab-transport",
            "--cluster",
            &cfg,
            "--concurrency",
            "1,2",
            "--requests",
            "2",
            "--input-tokens",
            "16",
            "--output-tokens",
            "8",
            "--save",
            ab_dir.to_str().unwrap(),
            "--json",
        ])
        .expect_ok("bench serving --ab-transport");
    let r: Value = serde_json::from_str(&ab.out).unwrap_or_else(|e| panic!("{e}: {ab}"));
    let legs = r["legs"].as_array().unwrap();
    assert_eq!(
        legs.iter().map(|l| l["name"].clone()).collect::<Vec<_>>(),
        ["ethernet", "configured"],
        "{r:#}"
    );
    for l in legs {
        assert!(l["error"].is_null(), "{l}");
        let nodes = l["nodes"].as_array().unwrap();
        assert!(
            !nodes.is_empty() && nodes.iter().all(|n| n["path"] == "sockets"),
            "{l}"
        );
        for v in l["results"]["levels"].as_array().unwrap() {
            assert_eq!(v["status"], "ok", "{v}");
            assert_eq!(v["mean_output_tokens"].as_f64(), Some(8.0), "{v}");
        }
    }
    assert_eq!(
        r["ratios"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["concurrency"].clone())
            .collect::<Vec<_>>(),
        [1, 2],
        "{r:#}"
    );
    assert!(
        r["changed"] == true && r["restored"] == true && r["interrupted"].is_null(),
        "{r:#}"
    );
    for f in [
        "ethernet/serving.json",
        "configured/serving.json",
        "ab-transport.json",
    ] {
        let len = std::fs::metadata(ab_dir.join(f)).map_or(0, |m| m.len());
        assert!(len > 0, "--ab-transport did not save {f}");
    }
    assert!(
        !ab.both().contains(&secret) && !any_file_has(&ab_dir, &secret),
        "--ab-transport printed or saved the API key"
    );
    let status = s
        .hb(&["serve", "status", "--cluster", &cfg])
        .expect_ok("serve status after --ab-transport");
    assert!(
        status.out.lines().any(|l| l.starts_with("serve: serving")),
        "the serve is not serving after --ab-transport: {status}"
    );
    assert_ne!(
        serve_pid(&s),
        pid_before,
        "--ab-transport did not restart the serve"
    );
    s.complete('a', 8000, 4, Some(&key));

    // --ab-transport stopped by SIGINT after leg 1's cluster up: the state
    // and the restore named, and the restore works.
    let mut abi = s.spawn(
        "ab-sigint",
        &mut s.hb_cmd(&[
            "bench",
            "serving",
            "--ab-transport",
            "--cluster",
            &cfg,
            "--concurrency",
            "1",
            "--requests",
            "2",
            "--input-tokens",
            "16",
            "--output-tokens",
            "8",
            "--save",
            s.path("ab-int").to_str().unwrap(),
        ]),
    );
    abi.wait_for("leg 1's cluster up", Duration::from_secs(300), |l| {
        l.contains("RPC server(s) listening")
    });
    abi.signal_halobox(Signal::SIGINT, false);
    let abi = abi.wait();
    assert_eq!(abi.code, Some(1), "--ab-transport after SIGINT: {abi}");
    assert!(
        abi.out.lines().any(
            |l| l.starts_with("stopped early: SIGINT during leg ethernet")
                && l.contains(": the cluster is up with transport = \"ethernet\"; no serve runs")
        ),
        "--ab-transport did not say where SIGINT left the cluster: {abi}"
    );
    let restore = abi
        .out
        .lines()
        .find_map(|l| {
            l.strip_prefix("  hint: ")
                .filter(|r| r.starts_with("halobox cluster down "))
        })
        .unwrap_or_else(|| panic!("--ab-transport did not print the restore after SIGINT: {abi}"))
        .to_string();
    // The printed line, run as printed with `halobox` this build.
    let mut run_restore = s.on_node(
        'a',
        &[
            "bash",
            "-c",
            "halobox() { \"$HB\" \"$@\"; }; eval \"$1\"",
            "restore",
            &restore,
        ],
    );
    run_restore.env("HB", HALOBOX);
    s.run("restore", run_restore)
        .expect_ok(&format!("the restore --ab-transport printed: {restore}"));
    s.complete('a', 8000, 4, Some(&key));

    // serve stop.
    let stop = s
        .hb(&["serve", "stop", "--cluster", &cfg])
        .expect_ok("serve stop");
    assert!(
        stop.out.contains("stopped llama.cpp's llama-server"),
        "serve stop: {stop}"
    );
    let after = s.hb(&["serve", "status", "--cluster", &cfg]);
    assert!(
        after.code == Some(3) && after.out.lines().any(|l| l.starts_with("serve: stopped")),
        "serve status after stop: {after}"
    );
    s.assert_none_left(&['a'], LLAMA_PROCESSES, half);

    if case.faults {
        // A foreground serve, requests running, node b's RPC server killed.
        let fg = s.foreground(
            &["serve", &model, "--cluster", &cfg],
            Duration::from_secs(300),
        );
        let long = s.spawn_busy('a', 8000, 32, Some(&key));
        std::thread::sleep(Duration::from_secs(2));
        let pid = s.rpc_pid('b');
        s.in_container('b', &["kill", "-KILL", &pid])
            .expect_ok("killing node b's RPC server");
        let fg = fg.wait();
        long.kill_group();
        assert_ne!(
            fg.code,
            Some(0),
            "serve exited 0 after node b's RPC server died: {fg}"
        );
        assert!(
            fg.err.contains(&format!("node b ({ip_b})")),
            "serve did not name node b: {fg}"
        );
        s.assert_none_left(&['a'], LLAMA_PROCESSES, half);
        s.hb(&["cluster", "up", "--cluster", &cfg])
            .expect_ok("cluster up again");

        // A foreground serve, node b's RPC server frozen (SIGSTOP): named.
        let fg = s.foreground(
            &["serve", &model, "--cluster", &cfg],
            Duration::from_secs(300),
        );
        let pid = s.rpc_pid('b');
        let t0 = Instant::now();
        s.in_container('b', &["kill", "-STOP", &pid])
            .expect_ok("freezing node b's RPC server");
        let long = s.spawn_complete('a', 8000, 1000, Some(&key));
        let fg = fg.wait();
        let frozen = t0.elapsed();
        long.kill();
        assert_ne!(fg.code, Some(0), "serve exited 0 with node b frozen: {fg}");
        assert!(
            fg.err.contains(&format!(
                "node b ({ip_b}): its RPC server (pid {pid}) is stopped (frozen"
            )),
            "serve did not name node b as frozen: {fg}"
        );
        eprintln!(
            "faults: frozen worker named after {:.1} s (information)",
            frozen.as_secs_f64()
        );
        s.assert_none_left(&['a'], LLAMA_PROCESSES, half);
    }

    // cluster down: nothing left.
    s.hb(&["cluster", "down", "--cluster", &cfg])
        .expect_ok("cluster down");
    s.assert_none_left(&all, LLAMA_PROCESSES, half);

    // The same model on one node by llama-server alone: the reference.
    s.start_reference(
        'a',
        &format!(
            "{}/bin/llama-server -m {model} --host {ip_a} --port 8001 -ngl 99",
            s.llama.display()
        ),
    );
    assert!(
        s.wait_api('a', 8001),
        "llama-server alone did not come up: {}",
        s.reference_log('a')
    );
    let single = s.complete('a', 8001, TOKENS, None);
    s.stop_reference('a');
    eprintln!("{single}");
    eprintln!(
        "ready: halobox serve over {} node(s) {:.1} s; decode {:.2} tokens/s (information)",
        case.nodes,
        ready.as_secs_f64(),
        tokens_per_s(&cluster)
    );
    assert_same_tokens(&cluster, &single);
}

/// llama.cpp over RPC: two podman nodes, a random-weight GGUF made now; the
/// RPC server listens on the data plane only, bad input and a second head
/// are refused, `--ab-transport` runs and survives SIGINT, a killed worker
/// and a frozen one are named, nothing is left after `cluster down`; tokens
/// equal llama-server alone on one node.
#[test]
fn llama_cpp_podman_nodes_random_gguf_identical_and_faults_named() {
    llama_e2e(LlamaCase {
        backend: "podman",
        nodes: 2,
        model: None,
        faults: true,
    });
}

/// llama.cpp over RPC: three docker nodes, the real SmolLM2-135M (Q4_1)
/// from scripts/llama-cpp.sh.
#[test]
fn llama_cpp_three_docker_nodes_smollm2_identical() {
    let model = common::serve::llama_dir().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    llama_e2e(LlamaCase {
        backend: "docker",
        nodes: 3,
        model: Some(&model),
        faults: false,
    });
}
