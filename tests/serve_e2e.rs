//! vLLM, live, served by `halobox serve` on test nodes of this machine
//! that each run their own engine (tests/common/serve.rs on
//! tests/common/netns.rs): `halobox refresh` on every node (vLLM's CPU build
//! and a random-weight Llama bound in), `cluster up`, bad input refused,
//! `serve --tp N --detach --preflight` (its API key on stdin), status, logs,
//! a greedy completion, `bench serving`, `serve stop`; with faults a
//! foreground serve stopped by SIGINT and one whose worker node is killed
//! mid-request; `cluster down` with nothing left; the tokens must equal
//! those of plain `vllm serve` on one node in the same container.
//! (llama.cpp's twin: tests/llama_e2e.rs.)
//!
//! Needs root, the engines of scripts/engines/start.sh and
//! scripts/vllm-venv.sh's venv (scripts/test.sh installs both); a missing
//! piece fails. Each run takes minutes and about 7.5 GB of memory: one at a
//! time. `bash scripts/serve-e2e.sh [NAME]` runs them by hand.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use common::serve::{
    Serving, TOKENS, VENV, any_file_has, assert_same_tokens, mode, tiny_vllm_serve, tokens_per_s,
};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What a vLLM run is given.
struct VllmCase {
    backend: &'static str,
    nodes: usize,
    shape: [u32; 4],
    faults: bool,
    /// Serve without `--tp`: the split is `plan`'s choice, said first.
    plan_split: bool,
}

/// Processes of a serve by vLLM.
const VLLM_PROCESSES: &[&str] = &[
    "vllm serve",
    "RayWorkerProc",
    "RayWorkerWrapper",
    "EngineCore",
    "VllmWorker",
];

/// Routes of vLLM v0.32.0's app named besides those its `/openapi.json`
/// lists: its mounted `/metrics`, the docs, the SageMaker router's (always
/// registered) and the others its own key left open (tests/vllm_routes.rs
/// asks every one of the app), and a CORS preflight.
const VLLM_UNLISTED: &[&str] = &[
    "POST /invocations",
    "GET /ping",
    "POST /ping",
    "GET /metrics",
    "GET /openapi.json",
    "GET /docs",
    "GET /redoc",
    "GET /docs/oauth2-redirect",
    "GET /load",
    "GET /version",
    "POST /tokenize",
    "POST /detokenize",
    "OPTIONS /v1/models",
];

/// Every route the running vLLM registers (its `/openapi.json`, asked with
/// the key, and [`VLLM_UNLISTED`]) answers 401 without the key, but
/// `GET /health`; every GET one answers something else with it. vLLM's own
/// `--api-key` left `/invocations` (inference) and the rest open: halobox's
/// middleware closes them.
fn every_route_needs_the_key(s: &Serving, key: &std::path::Path) {
    let routes = s.route_codes('a', 8000, key, true, VLLM_UNLISTED);
    let open: Vec<_> = routes
        .iter()
        .filter(|(m, p, without, _)| *without != 401 && !(m == "GET" && p == "/health"))
        .collect();
    assert!(open.is_empty(), "answered without the key: {open:?}");
    assert!(
        routes
            .iter()
            .any(|(m, p, w, _)| m == "GET" && p == "/health" && *w == 200),
        "/health is not open: {routes:?}"
    );
    let refused: Vec<_> = routes
        .iter()
        .filter(|(_, _, _, with)| *with == Some(401))
        .collect();
    assert!(refused.is_empty(), "refused with the key: {refused:?}");
    assert!(
        routes.len() > 15 && routes.iter().any(|(_, p, _, _)| p == "/v1/completions"),
        "too few routes asked: {routes:?}"
    );
    eprintln!(
        "{} route(s) of vLLM asked: 401 without the key",
        routes.len()
    );
}

/// `serve status` says the KV cache vLLM allocated per token on one rank
/// (`VLLM_CPU_KVCACHE_SPACE` over its `KV cache size`): the model's layers ×
/// its KV heads per rank × (K + V) × 4 B (`--dtype float32`); and, when
/// plan could count the model on the head, plan's figure within 2%.
fn kv_cache_as_the_engine_counts(s: &Serving, cfg: &str, case: &VllmCase, text: &str) {
    let [layers, hidden, heads, kv] = case.shape.map(f64::from);
    let per_rank = (kv / case.nodes as f64).max(1.0);
    let expected = layers * per_rank * 2.0 * (hidden / heads) * 4.0;
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("  KV cache: engine {expected:.0} B/token"))),
        "serve status does not say the engine's {expected} B/token: {text}"
    );
    let json = s
        .hb(&["serve", "status", "--json", "--cluster", cfg])
        .expect_ok("serve status --json");
    let doc: Value = serde_json::from_str(&json.out).unwrap();
    let kv = &doc["kv_cache"];
    // vLLM sizes the space in whole blocks: a few bytes per token above
    // the shape's (1398016 tokens of 768 B in 1 GiB, not 1398101).
    let engine = kv["engine_bytes_per_token"].as_f64().unwrap();
    assert!((engine - expected).abs() / expected < 0.001, "{kv}");
    assert_eq!(kv["context"], 512, "{kv}");
    assert!(kv["max_concurrency"].as_f64().unwrap() >= 1.0, "{kv}");
    match kv["plan_bytes_per_token"].as_f64() {
        Some(plan) => {
            assert!((plan - expected).abs() / expected <= 0.02, "{kv}");
            assert_eq!(kv["verdict"], "agree", "{kv}");
        }
        None => eprintln!("plan did not count the model on the head: {kv}"),
    }
}

fn vllm_e2e(case: VllmCase) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Serving::vllm(case.backend, case.nodes, None, case.shape);
    let n = case.nodes.to_string();
    let cfg = s.cfg();
    let model = s.model.clone();
    let all = s.names.clone();
    let minute = Duration::from_secs(60);

    s.refresh();
    s.hb(&["cluster", "up", "--cluster", &cfg])
        .expect_ok("cluster up");

    // Bad input: each refused before anything starts, naming the thing and the fix.
    s.refused(
        "a model folder missing on the nodes",
        &format!("missing in the container on node a ({})", s.ip('a')),
        &["serve", "/models/nope", "--cluster", &cfg],
    );
    let novllm = s.path("novllm.toml");
    let text = std::fs::read_to_string(&s.cfg).unwrap();
    std::fs::write(
        &novllm,
        text.replace(
            &format!("vllm = \"{VENV}/bin/vllm\""),
            "vllm = \"/opt/no-vllm/bin/vllm\"",
        ),
    )
    .unwrap();
    s.refused(
        "an image without vLLM",
        "has no `/opt/no-vllm/bin/vllm`",
        &["serve", &model, "--cluster", novllm.to_str().unwrap()],
    );
    let more = s.path("more.toml");
    let z = format!("10.77.{}.99", s.net());
    std::fs::write(
        &more,
        format!(
            "{text}\n[[node]]\nname = \"z\"\nssh = \"root@{z}\"\nip = \"{z}\"\nbackend = \"{}\"\ncpus = 1\n",
            s.backend
        ),
    )
    .unwrap();
    s.refused(
        "--tp larger than Ray's GPUs",
        "not in Ray: node z",
        &[
            "serve",
            &model,
            "--tp",
            &(case.nodes + 1).to_string(),
            "--cluster",
            more.to_str().unwrap(),
        ],
    );
    {
        let _holder = s.hold(
            'a',
            8000,
            "import socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', 8000)); s.listen(); time.sleep(300)",
            &[],
        );
        s.refused(
            "a port already taken",
            "port 8000 is already taken",
            &["serve", &model, "--cluster", &cfg],
        );
    }

    // serve --detach --preflight, VLLM_API_KEY set: it goes on stdin.
    let key = format!("e2e-{:x}-{}", std::process::id(), s.net());
    let t0 = Instant::now();
    let mut args = tiny_vllm_serve(&model, &n, &cfg, &["--detach", "--preflight"]);
    if case.plan_split {
        let at = args.iter().position(|a| *a == "--tp").unwrap();
        args.drain(at..at + 2);
    }
    let serve = s
        .hb_env(&args, &[("VLLM_API_KEY", &key)])
        .expect_ok("halobox serve --detach");
    let ready = t0.elapsed();
    let first = serve.out.lines().next().unwrap_or_default();
    if case.plan_split {
        // The nodes have no GPU memory to judge a split by (no amdgpu GTT
        // here): plan chooses none, and serve says so and takes every node.
        assert!(
            first.starts_with("split: every node, as before: plan c"),
            "serve without --tp did not say plan's split first: {serve}"
        );
    } else {
        assert!(
            first.starts_with("split: as given (--tp or --pipeline-parallel-size), not plan's"),
            "serve --tp did not say its split first: {serve}"
        );
    }
    assert!(
        serve
            .err
            .lines()
            .any(|l| l.starts_with(&format!("collective over {n} node(s), backend gloo"))),
        "serve --preflight did not run the collective: {serve}"
    );
    eprintln!(
        "preflight: {} all-reduce row(s) before vLLM started",
        serve
            .err
            .lines()
            .filter(|l| l.starts_with("all_reduce"))
            .count()
    );
    assert!(
        serve
            .out
            .lines()
            .any(|l| l.starts_with(&format!("serving {model} at http://"))),
        "serve did not print the endpoint: {serve}"
    );
    assert!(
        serve.out.contains("Authorization: Bearer $VLLM_API_KEY"),
        "serve's curl line lacks the key header: {serve}"
    );
    assert!(!serve.both().contains(&key), "serve printed the API key");
    assert_eq!(
        s.http_code('a', 8000, "/v1/models", None),
        "401",
        "the API answered without the key"
    );
    let key_file = s.path("api_key");
    std::fs::write(&key_file, &key).unwrap();
    every_route_needs_the_key(&s, &key_file);
    for &x in &all {
        assert!(
            serve.out.contains(&format!("{x} ({})", s.ip(x))),
            "serve did not name node {x} among its workers: {serve}"
        );
    }

    // serve status, serve logs.
    let status = s
        .hb(&["serve", "status", "--cluster", &cfg])
        .expect_ok("serve status");
    assert!(
        status.out.lines().any(|l| l.starts_with("serve: serving")),
        "serve status does not say serving: {status}"
    );
    kv_cache_as_the_engine_counts(&s, &cfg, &case, &status.out);
    let logs = s
        .hb(&["serve", "logs", "-n", "20", "--cluster", &cfg])
        .expect_ok("serve logs");
    assert!(!logs.out.is_empty(), "serve logs printed nothing: {logs}");

    // One greedy completion over the nodes.
    let cluster = s.complete('a', 8000, TOKENS, Some(&key_file));
    eprintln!("{cluster}");

    // bench serving against the recorded serve, its key from VLLM_API_KEY.
    let saved = s.path("serving");
    let bench = s
        .hb_env(
            &[
                "bench",
                "serving",
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
                saved.to_str().unwrap(),
                "--json",
            ],
            &[("VLLM_API_KEY", &key)],
        )
        .expect_ok("bench serving");
    let r: Value = serde_json::from_str(&bench.out).unwrap_or_else(|e| panic!("{e}: {bench}"));
    assert_eq!(r["server"], "vllm", "{r:#}");
    assert!(
        r["prompt_lengths"]
            .as_str()
            .is_some_and(|p| p.starts_with("exact")),
        "{r:#}"
    );
    for l in r["levels"].as_array().unwrap() {
        assert_eq!(l["status"], "ok", "{l}");
        assert_eq!(l["mean_output_tokens"].as_f64(), Some(8.0), "{l}");
    }
    assert!(
        !bench.both().contains(&key) && !any_file_has(&saved, &key),
        "bench serving printed or saved the API key"
    );

    // serve stop.
    let stop = s
        .hb(&["serve", "stop", "--cluster", &cfg])
        .expect_ok("serve stop");
    assert!(stop.out.contains("stopped vLLM"), "serve stop: {stop}");
    let after = s.hb(&["serve", "status", "--cluster", &cfg]);
    assert!(
        after.code == Some(3) && after.out.lines().any(|l| l.starts_with("serve: stopped")),
        "serve status after stop: {after}"
    );
    s.assert_none_left(&all, VLLM_PROCESSES, minute);

    let fg_args = tiny_vllm_serve(&model, &n, &cfg, &[]);
    if case.faults {
        // A foreground serve, then SIGINT: exit 0, nothing left.
        let fg = s.foreground(&fg_args, Duration::from_secs(900));
        fg.signal_halobox(Signal::SIGINT, true);
        let fg = fg.wait();
        assert_eq!(fg.code, Some(0), "serve stopped by SIGINT: {fg}");
        assert!(
            fg.err.contains("vLLM stopped"),
            "serve did not say it stopped vLLM: {fg}"
        );
        s.assert_none_left(&all, VLLM_PROCESSES, minute);
        if case.nodes >= 2 {
            // A foreground serve, a long request, node b killed.
            let fg = s.foreground(&fg_args, Duration::from_secs(900));
            // Without VLLM_API_KEY serve made the cluster's key, 0600 beside cluster.toml.
            let cluster_key = s.path("cluster.api-key");
            assert_eq!(mode(&cluster_key), 0o600, "the cluster's API key file");
            assert!(
                fg.out()
                    .contains(&format!("Bearer $(cat {})", cluster_key.display())),
                "serve's curl line does not read the cluster's key file: {}",
                fg.out()
            );
            let long = s.spawn_complete('a', 8000, 2000, Some(&cluster_key));
            std::thread::sleep(Duration::from_secs(3));
            s.engine_cli('b', &["kill", "vllm"])
                .expect_ok("killing node b's container");
            let fg = fg.wait();
            long.kill();
            assert_ne!(
                fg.code,
                Some(0),
                "serve exited 0 after its worker died: {fg}"
            );
            assert!(
                fg.err.contains(&format!("node b ({})", s.ip('b'))),
                "serve did not name node b: {fg}"
            );
            s.assert_none_left(&['a'], VLLM_PROCESSES, minute);
        }
    }

    // cluster down (after a killed worker it may report that node's loss).
    let down = s.hb(&["cluster", "down", "--cluster", &cfg]);
    assert!(down.ok() || case.faults, "cluster down: {down}");
    s.assert_none_left(
        &all,
        &["raylet", "gcs_server", "vllm serve"],
        Duration::ZERO,
    );
    s.refused(
        "serve while the cluster is down",
        "the cluster is down",
        &["serve", &model, "--cluster", &cfg],
    );

    // The same model on one node by plain vllm serve: the reference.
    s.start_reference(
        'a',
        &format!(
            "env HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 {VENV}/bin/vllm serve {model} --port 8001 --max-model-len 512 --enforce-eager --dtype float32"
        ),
    );
    assert!(
        s.wait_api('a', 8001),
        "plain vllm serve did not come up: {}",
        s.reference_log('a')
    );
    let single = s.complete('a', 8001, TOKENS, None);
    s.stop_reference('a');
    eprintln!("{single}");
    eprintln!(
        "ready: halobox serve over {n} node(s) {:.1} s; decode {:.2} tokens/s (information)",
        ready.as_secs_f64(),
        tokens_per_s(&cluster)
    );
    assert_same_tokens(&cluster, &single);
}

/// Two podman nodes, TP 2, the default shape; and the faults: SIGINT stops
/// it cleanly, a killed worker node is named and nothing is left behind.
#[test]
fn podman_nodes_serve_identical_tokens_and_name_a_lost_worker() {
    vllm_e2e(VllmCase {
        backend: "podman",
        nodes: 2,
        shape: [2, 256, 4, 2],
        faults: true,
        plan_split: false,
    });
}

/// Two docker nodes, another shape (3 layers, 6 heads, 2 KV heads), served
/// without `--tp`: the split `plan` chose (every node here), said first.
#[test]
fn docker_nodes_serve_identical_tokens_for_another_shape() {
    vllm_e2e(VllmCase {
        backend: "docker",
        nodes: 2,
        shape: [3, 192, 6, 2],
        faults: false,
        plan_split: true,
    });
}
