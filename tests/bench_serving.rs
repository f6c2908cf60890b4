//! `halobox bench serving` against real endpoints: llama.cpp's own
//! llama-server (the CPU build scripts/llama-cpp.sh makes in
//! /opt/halobox-llama-cpp, a 135M model) on loopback with an API key; a
//! real HTTP server that is not an OpenAI one; a port nothing listens on;
//! a llama-server killed during the run. The plan and the flags without a
//! server. The key never shows in the output, the saved run or any
//! process's arguments. `halobox bench soak` against the same server: a
//! short soak PASSes with its windows and the GTT a real `halobox metrics`
//! reports, and FAILs naming the stall when the server freezes half-way.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BUILT: &str = "/opt/halobox-llama-cpp";
const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A random key, as `serve` makes them.
fn new_key() -> String {
    let mut b = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A real llama-server on loopback, its key from LLAMA_API_KEY (not an
/// argument), stopped (by its pid) when dropped.
struct Llama {
    child: Child,
    port: u16,
    key: String,
}

impl Llama {
    /// Waits (up to 2 min) until no slot is processing a request.
    fn wait_idle(&self) {
        let mut last = String::new();
        for _ in 0..240 {
            let o = Command::new("curl")
                .args(["-s", "--max-time", "2", "-H"])
                .arg(format!("Authorization: Bearer {}", self.key))
                .arg(format!("{}/slots", self.url()))
                .output()
                .unwrap();
            last = String::from_utf8_lossy(&o.stdout).into_owned();
            if last.starts_with('[') && !last.contains(r#""is_processing":true"#) {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("llama-server's slots still busy after 2 min: {last}");
    }

    fn start() -> Llama {
        let bin = Path::new(BUILT).join("bin/llama-server");
        let model = Path::new(BUILT).join(MODEL);
        assert!(
            bin.exists() && model.exists(),
            "{} or {} is missing: run `scripts/llama-cpp.sh {BUILT}` (scripts/test.sh does)",
            bin.display(),
            model.display()
        );
        let port = free_port();
        let key = new_key();
        let child = Command::new(&bin)
            .args(["-m", &model.display().to_string()])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-c", "2048", "-np", "4", "-t", "1", "-tb", "1"])
            .env("LLAMA_API_KEY", &key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let l = Llama { child, port, key };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let ok = Command::new("curl")
                .args(["-sf", "-o", "/dev/null", &format!("{}/health", l.url())])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                break;
            }
            assert!(Instant::now() < deadline, "llama-server did not come up");
            std::thread::sleep(Duration::from_millis(300));
        }
        l
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Llama {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `halobox bench serving ARGS` with `env`, LLAMA_API_KEY and VLLM_API_KEY
/// otherwise removed; while it runs, every process's arguments are read
/// and must not hold `secret`.
fn serving(args: &[&str], env: &[(&str, &str)], secret: Option<&str>) -> Output {
    let child = spawn_serving(args, env);
    let out = std::thread::spawn(move || child.wait_with_output().unwrap());
    let Some(secret) = secret else {
        return out.join().unwrap();
    };
    while !out.is_finished() {
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            if let Ok(argv) = std::fs::read(p.path().join("cmdline")) {
                let argv = String::from_utf8_lossy(&argv);
                assert!(
                    !argv.contains(secret),
                    "the key is in the arguments of {:?}: {argv}",
                    p.file_name()
                );
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = out.join().unwrap();
    let all = common::text(&o);
    assert!(!all.contains(secret), "the key is in the output:\n{all}");
    o
}

/// `halobox bench serving ARGS` started with `env` (the keys' variables
/// otherwise removed), its output piped.
fn spawn_serving(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_halobox"));
    cmd.args(["bench", "serving"])
        .args(args)
        .env_remove("LLAMA_API_KEY")
        .env_remove("VLLM_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}):\n{}", common::text(o)))
}

fn saved_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("serving.json")).unwrap()
}

/// A cluster file, its key file holding `key`, and the serve state that
/// `serve` records for it (endpoint `url`), under a state folder.
fn recorded_serve(dir: &Path, url: &str, key: &str) -> (PathBuf, PathBuf) {
    use sha2::Digest as _;
    let cluster = dir.join("cluster.toml");
    std::fs::write(
        &cluster,
        "engine = \"llama.cpp\"\n[[node]]\nname = \"n1\"\nssh = \"root@n1.invalid\"\nip = \"10.77.252.1\"\n",
    )
    .unwrap();
    let key_file = dir.join("cluster.api-key");
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let state = dir.join("state");
    let name = hex(&sha2::Sha256::digest(cluster.display().to_string().as_bytes())[..8]);
    let serve = state.join("halobox/serve");
    std::fs::create_dir_all(&serve).unwrap();
    std::fs::write(
        serve.join(format!("{name}.json")),
        serde_json::json!({
            "cluster": cluster.display().to_string(), "engine": "llama.cpp",
            "model": "/models/smol.gguf", "endpoint": url, "started": 0, "pid": 1,
            "container": "vllm", "api_key": true, "detached": true
        })
        .to_string(),
    )
    .unwrap();
    (cluster, state)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const SMALL: [&str; 8] = [
    "--concurrency",
    "1,2",
    "--requests",
    "2",
    "--input-tokens",
    "16",
    "--output-tokens",
    "8",
];

/// Every level runs with exact lengths, twice (by --url with the key from
/// the environment; by the recorded serve with the cluster's key file),
/// and `bench report` and `bench compare` read both runs.
#[test]
fn a_real_llama_server_is_measured_saved_reported_and_compared() {
    let llama = Llama::start();
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    let url = llama.url();
    let mut args = vec!["--url", &url, "--json", "--save", a.to_str().unwrap()];
    args.extend(SMALL);
    let o = serving(&args, &[("LLAMA_API_KEY", &llama.key)], Some(&llama.key));
    assert!(o.status.success(), "{}", common::text(&o));
    let r = json(&o);
    assert_eq!(r["kind"], "serving");
    assert_eq!(r["server"], "llamacpp");
    assert!(
        r["prompt_lengths"].as_str().unwrap().starts_with("exact"),
        "{r:#}"
    );
    assert!(r["partial"].is_null());
    for (l, c) in r["levels"].as_array().unwrap().iter().zip([1, 2]) {
        assert_eq!(l["concurrency"], c);
        assert_eq!(
            (l["status"].as_str(), l["completed"].as_u64()),
            (Some("ok"), Some(2)),
            "{l:#}"
        );
        assert_eq!(
            l["mean_output_tokens"], 8.0,
            "ignore_eos: every output is 8 tokens"
        );
        assert!(l["output_throughput"].as_f64().unwrap() > 0.0);
        assert!(l["ttft_ms"]["p50"].as_f64().unwrap() > 0.0);
        assert_eq!(
            l["itl_ms"]["samples"],
            2 * 7,
            "7 gaps between 8 tokens, 2 requests"
        );
        assert!(l["itl_ms"]["p99"].as_f64().unwrap() >= l["itl_ms"]["p50"].as_f64().unwrap());
    }
    let rec: Value = serde_json::from_str(&saved_text(&a)).unwrap();
    for req in rec["levels"][0]["requests"].as_array().unwrap() {
        assert_eq!(
            req["prompt_tokens"], 16,
            "the server counted exactly 16 prompt tokens"
        );
    }

    // The recorded serve: its endpoint and the cluster's key file.
    let (cluster, state) = recorded_serve(tmp.path(), &url, &llama.key);
    let mut args = vec![
        "--cluster",
        cluster.to_str().unwrap(),
        "--save",
        b.to_str().unwrap(),
    ];
    args.extend(SMALL);
    let o = serving(
        &args,
        &[("XDG_STATE_HOME", state.to_str().unwrap())],
        Some(&llama.key),
    );
    let text = common::ok(&o);
    assert!(text.contains("saved in") && text.contains("ok"), "{text}");
    assert!(saved_text(&b).contains("cluster.api-key"));

    let rep = common::run(&["bench", "report", a.to_str().unwrap(), "--json"]);
    assert_eq!(json(&rep), r, "the report re-derives the same results");
    let cmp = common::run(&["bench", "compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    let cmp = common::ok(&cmp);
    assert!(
        cmp.contains("out tok/s A → B") && cmp.lines().count() >= 5,
        "{cmp}"
    );
    for d in [&a, &b] {
        assert!(!saved_text(d).contains(&llama.key));
    }
    let mixed = common::run(&[
        "bench",
        "compare",
        a.to_str().unwrap(),
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(mixed.status.code(), Some(2), "{}", common::text(&mixed));
    assert!(String::from_utf8_lossy(&mixed.stderr).contains("is a `bench serving` run but"));
}

/// A wrong key, a server that is not an OpenAI one, nothing listening:
/// each a clear error, before any load.
#[test]
fn endpoints_that_cannot_be_benchmarked_are_named() {
    let llama = Llama::start();
    let url = llama.url();
    let wrong = new_key();
    let o = serving(&["--url", &url], &[("LLAMA_API_KEY", &wrong)], Some(&wrong));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    assert!(
        err.contains("refused the API key")
            && err.contains("from LLAMA_API_KEY")
            && err.contains("hint:"),
        "{err}"
    );
    let o = serving(&["--url", &url], &[], Some(&llama.key));
    assert!(String::from_utf8_lossy(&o.stderr).contains("refused the API key"));

    // A real web server that is not OpenAI's.
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut web = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
        ])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let web_url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let err = loop {
        let o = serving(&["--url", &web_url], &[], None);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        if !err.contains("nothing answers") || Instant::now() > deadline {
            assert_eq!(o.status.code(), Some(1));
            break err;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = web.kill();
    let _ = web.wait();
    assert!(
        err.contains(&format!("{web_url} is not an OpenAI API server")) && err.contains("HTTP 404"),
        "{err}"
    );

    let o = serving(
        &["--url", &format!("http://127.0.0.1:{}", free_port())],
        &[],
        None,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nothing answers at") && err.contains("halobox serve status"),
        "{err}"
    );
}

/// llama-server killed during the run: halobox stops, says so, exits 1,
/// and keeps the levels that ran, marked partial, in the saved run.
#[test]
fn a_serve_that_dies_during_the_run_leaves_partial_results() {
    let mut llama = Llama::start();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let url = llama.url();
    let save = dir.to_str().unwrap().to_string();
    let key = llama.key.clone();
    let bench = std::thread::spawn(move || {
        serving(
            &[
                "--url",
                &url,
                "--concurrency",
                "1,2",
                "--requests",
                "2",
                "--input-tokens",
                "16",
                "--output-tokens",
                "32",
                "--save",
                &save,
                "--timeout",
                "30",
            ],
            &[("LLAMA_API_KEY", &key)],
            Some(&key),
        )
    });
    // Kill it once the first level is saved.
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let levels = std::fs::read_to_string(dir.join("serving.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .map_or(0, |v| v["levels"].as_array().map_or(0, Vec::len));
        if levels >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline && !bench.is_finished(),
            "the first level never ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    llama.kill();
    let o = bench.join().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("PARTIAL: the run stopped early (request"),
        "{out}"
    );
    assert!(
        out.contains(&format!("saved in {}", dir.display())),
        "{out}"
    );
    let rep = common::run(&["bench", "report", dir.to_str().unwrap(), "--json"]);
    assert_eq!(rep.status.code(), Some(1));
    let r = json(&rep);
    assert!(
        r["partial"].as_str().unwrap().contains("at concurrency 2"),
        "{r:#}"
    );
    assert_eq!(r["levels"][0]["status"], "ok", "{r:#}");
    assert_eq!(r["levels"][0]["completed"], 2);
    assert_eq!(r["levels"][1]["status"], "partial", "{r:#}");
    assert!(r["levels"][1]["failed"].as_u64().unwrap() >= 1, "{r:#}");
}

/// llama-server frozen (SIGSTOP) during the run: after --timeout the run
/// stops, says why, and keeps what finished.
#[test]
fn a_frozen_serve_ends_the_run_after_the_timeout() {
    let llama = Llama::start();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let (url, save, key) = (
        llama.url(),
        dir.to_str().unwrap().to_string(),
        llama.key.clone(),
    );
    let bench = std::thread::spawn(move || {
        let args = [
            "--url",
            &url,
            "--concurrency",
            "1",
            "--requests",
            "4",
            "--input-tokens",
            "16",
            "--output-tokens",
            "32",
            "--save",
            &save,
            "--timeout",
            "3",
        ];
        serving(&args, &[("LLAMA_API_KEY", &key)], Some(&key))
    });
    // serving.json is first written after the warm-up request.
    let deadline = Instant::now() + Duration::from_secs(300);
    while !dir.join("serving.json").exists() {
        assert!(
            Instant::now() < deadline && !bench.is_finished(),
            "no warm-up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = llama.child.id().to_string();
    let signal = |s: &str| Command::new("kill").args([s, &pid]).status().unwrap();
    assert!(signal("-STOP").success());
    let o = bench.join().unwrap();
    assert!(signal("-CONT").success());
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    let r = json(&common::run(&[
        "bench",
        "report",
        dir.to_str().unwrap(),
        "--json",
    ]));
    assert!(
        r["partial"].as_str().unwrap().contains("no answer for 3 s"),
        "{r:#}"
    );
    assert_eq!(r["levels"][0]["status"], "partial", "{r:#}");
}

/// Ctrl-C (SIGINT) during the run: it stops, keeps what finished and says
/// it was interrupted.
#[test]
fn ctrl_c_stops_the_run_and_keeps_what_ran() {
    let llama = Llama::start();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let url = llama.url();
    let args = [
        "--url",
        &url,
        "--concurrency",
        "1,2",
        "--requests",
        "6",
        "--input-tokens",
        "16",
        "--output-tokens",
        "32",
        "--save",
        dir.to_str().unwrap(),
    ];
    let child = spawn_serving(&args, &[("LLAMA_API_KEY", &llama.key)]);
    let deadline = Instant::now() + Duration::from_secs(300);
    while !dir.join("serving.json").exists() {
        assert!(Instant::now() < deadline, "no warm-up");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("PARTIAL: the run stopped early (interrupted (Ctrl-C) at concurrency 1)"),
        "{out}"
    );
    let r = json(&common::run(&[
        "bench",
        "report",
        dir.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(r["levels"][0]["status"], "partial", "{r:#}");
    assert_eq!(r["levels"][1]["status"], "not run", "{r:#}");
}

/// The plan, from flags and the recorded serve, without a server; bad
/// flags named.
#[test]
fn the_plan_and_bad_flags_need_no_server() {
    let tmp = tempfile::tempdir().unwrap();
    let key = new_key();
    let (cluster, state) = recorded_serve(tmp.path(), "http://10.77.252.1:8080", &key);
    let c = cluster.to_str().unwrap();
    let st = state.to_str().unwrap();
    let o = serving(
        &["--cluster", c, "--dry-run"],
        &[("XDG_STATE_HOME", st)],
        Some(&key),
    );
    let plan = common::ok(&o);
    assert!(
        plan.contains("http://10.77.252.1:8080 (the serve of"),
        "{plan}"
    );
    assert!(
        plan.contains("from ") && plan.contains("cluster.api-key"),
        "{plan}"
    );
    assert!(plan.contains("concurrency 1, 4, 8, 32 streamed"), "{plan}");
    let o = serving(
        &["--cluster", c, "--dry-run", "--json"],
        &[("XDG_STATE_HOME", st), ("LLAMA_API_KEY", &key)],
        Some(&key),
    );
    let v = json(&o);
    assert_eq!(
        v["key"],
        "sent as a bearer token, from LLAMA_API_KEY in this environment"
    );
    assert_eq!(v["endpoint"]["authority"], "10.77.252.1:8080");

    let empty = tmp.path().join("empty-state");
    let o = serving(
        &["--cluster", c],
        &[("XDG_STATE_HOME", empty.to_str().unwrap())],
        None,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no serve is recorded for")
            && err.contains("hint: start one with `halobox serve"),
        "{err}"
    );

    for (args, says) in [
        (vec!["--url", "https://h:1"], "https is not supported"),
        (vec!["--url", "h:8000"], "not an http:// URL"),
        (
            vec!["--url", "http://h:1", "--concurrency", "1,0"],
            "out of range",
        ),
        (
            vec![
                "--url",
                "http://h:1",
                "--concurrency",
                "8",
                "--requests",
                "4",
            ],
            "below --concurrency 8",
        ),
    ] {
        let o = serving(&args, &[], None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A serve recorded as this halobox records it (with its arguments), for
/// a cluster file of `engine` and `transport` whose head is a node that
/// does not exist; the cluster's key file holds `key`.
fn recorded_ab(
    dir: &Path,
    url: &str,
    key: &str,
    engine: &str,
    transport: &str,
) -> (PathBuf, PathBuf) {
    let (cluster, state) = recorded_serve(dir, url, key);
    std::fs::write(
        &cluster,
        format!("engine = \"{engine}\"\ntransport = \"{transport}\"\n[[node]]\nname = \"n1\"\nssh = \"root@n1.invalid\"\nip = \"10.77.252.1\"\n"),
    )
    .unwrap();
    let serve = state.join("halobox/serve");
    let file = std::fs::read_dir(&serve)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["engine"] = engine.into();
    v["args"] = serde_json::json!({"model": "/models/smol.gguf", "port": 8080, "timeout": 600, "max_model_len": 2048});
    std::fs::write(&file, v.to_string()).unwrap();
    (cluster, state)
}

/// `--ab-transport --dry-run` prints both legs and the restore without a
/// server; what cannot be compared or restarted is refused with a hint.
#[test]
fn ab_transport_plans_and_refuses_without_a_server() {
    let tmp = tempfile::tempdir().unwrap();
    let key = new_key();
    for (engine, probe) in [
        ("llama.cpp", "llama-server's /slots"),
        ("vllm", "vLLM's /metrics"),
    ] {
        let dir = tmp.path().join(engine);
        std::fs::create_dir_all(&dir).unwrap();
        let (cluster, state) = recorded_ab(&dir, "http://10.77.252.1:8080", &key, engine, "auto");
        let (c, st) = (cluster.to_str().unwrap(), state.to_str().unwrap());
        let o = serving(
            &[
                "--ab-transport",
                "--cluster",
                c,
                "--dry-run",
                "--concurrency",
                "1,2",
                "--requests",
                "2",
            ],
            &[("XDG_STATE_HOME", st)],
            Some(&key),
        );
        let plan = common::ok(&o);
        for said in [
            probe,
            "leg 1 (ethernet, TCP sockets):",
            "halobox cluster up with transport = \"ethernet\" in memory (cluster.toml is not changed)",
            "leg 2 (configured, as cluster.toml says; the state it ends in):",
            "halobox cluster up with transport = \"auto\"",
            &format!(
                "4. halobox serve /models/smol.gguf --cluster={c} --max-model-len=2048 --port=8080 --timeout=600 --detach"
            ),
            "concurrency 1, 2, 2 streamed",
            &format!(
                "halobox cluster down --cluster={c} && halobox cluster up --cluster={c} && halobox serve"
            ),
            "Nothing was done (--dry-run).",
        ] {
            assert!(plan.contains(said), "{engine}: {said}:\n{plan}");
        }
        let o = serving(
            &["--ab-transport", "--cluster", c, "--dry-run", "--json"],
            &[
                ("XDG_STATE_HOME", st),
                ("LLAMA_API_KEY", &key),
                ("VLLM_API_KEY", &key),
            ],
            Some(&key),
        );
        let v = json(&o);
        assert_eq!(v["ab_transport"]["legs"][0]["transport"], "ethernet");
        assert_eq!(v["ab_transport"]["legs"][1]["transport"], "auto");
        assert_eq!(v["bench"]["endpoint"]["authority"], "10.77.252.1:8080");
    }
    let dir = tmp.path().join("refusals");
    std::fs::create_dir_all(&dir).unwrap();
    let (cluster, state) = recorded_ab(
        &dir,
        "http://10.77.252.1:8080",
        &key,
        "llama.cpp",
        "ethernet",
    );
    let (c, st) = (cluster.to_str().unwrap(), state.to_str().unwrap());
    let refused = |args: &[&str], st: &str, says: &str| {
        let mut all = vec!["--ab-transport", "--cluster", c];
        all.extend(args);
        let o = serving(&all, &[("XDG_STATE_HOME", st)], Some(&key));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{says}: {}", common::text(&o));
        assert!(
            err.contains(says) && err.contains("\n  hint: "),
            "{says}: {err}"
        );
    };
    refused(
        &[],
        st,
        "sets transport = \"ethernet\": both legs would run on TCP sockets",
    );
    refused(
        &["--url", "http://10.77.252.1:8080"],
        st,
        "cannot be restarted by halobox",
    );
    let empty = tmp.path().join("empty-state");
    refused(&[], empty.to_str().unwrap(), "and none is");
    let (_, old) = recorded_serve(
        &tmp.path().join("refusals"),
        "http://10.77.252.1:8080",
        &key,
    );
    refused(
        &[],
        old.to_str().unwrap(),
        "recorded without its arguments (by an older halobox)",
    );
}

/// Against a real llama-server: a long request in flight makes
/// `--ab-transport` refuse before it touches anything (the server keeps
/// running); idle, it starts, and a first leg that fails (the head cannot
/// be reached) still tries the restore and says nothing was changed.
#[test]
fn ab_transport_refuses_a_serve_in_use_and_reports_a_failed_leg() {
    let mut llama = Llama::start();
    let tmp = tempfile::tempdir().unwrap();
    let (cluster, state) = recorded_ab(tmp.path(), &llama.url(), &llama.key, "llama.cpp", "auto");
    let (c, st) = (cluster.to_str().unwrap(), state.to_str().unwrap());
    let body_file = tmp.path().join("long.json");
    std::fs::write(
        &body_file,
        r#"{"prompt": "once upon a time", "n_predict": 100000}"#,
    )
    .unwrap();
    let header = tmp.path().join("auth");
    std::fs::write(&header, format!("Authorization: Bearer {}\n", llama.key)).unwrap();
    // Requests back to back, so the server is never idle for a second
    // however fast it generates (one request ends when its slot is full).
    let mut long = Command::new("sh");
    long.args([
        "-c",
        r#"while :; do curl -s -o /dev/null -H "$1" -d "$2" "$3"; done"#,
        "busy",
    ])
    .arg(format!("@{}", header.display()))
    .arg(format!("@{}", body_file.display()))
    .arg(format!("{}/completion", llama.url()));
    std::os::unix::process::CommandExt::process_group(&mut long, 0);
    let mut long = long.spawn().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let save = tmp.path().join("run");
    let mut args = vec![
        "--ab-transport",
        "--cluster",
        c,
        "--save",
        save.to_str().unwrap(),
    ];
    args.extend(SMALL);
    let o = serving(&args, &[("XDG_STATE_HOME", st)], Some(&llama.key));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    assert!(
        err.contains("is in use: llama-server's slot(s)")
            && err.contains("are processing a request (/slots is_processing)")
            && err.contains("hint: run it again when they are done"),
        "{err}"
    );
    assert!(
        llama.child.try_wait().unwrap().is_none(),
        "the serve was touched"
    );
    assert!(!save.exists(), "a refused run saved something");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(-(long.id() as i32)),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = long.wait();
    llama.wait_idle();

    let mut args = vec![
        "--ab-transport",
        "--cluster",
        c,
        "--save",
        save.to_str().unwrap(),
        "--json",
    ];
    args.extend(SMALL);
    let o = serving(&args, &[("XDG_STATE_HOME", st)], Some(&llama.key));
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    let r = json(&o);
    let legs = r["legs"].as_array().unwrap();
    assert_eq!(legs.len(), 2, "{r:#}");
    for (leg, name) in legs.iter().zip(["ethernet", "configured"]) {
        assert_eq!(leg["name"], name);
        assert!(
            leg["error"].as_str().unwrap().starts_with("serve stop: "),
            "{r:#}"
        );
    }
    assert_eq!(
        (r["changed"].as_bool(), r["restored"].as_bool()),
        (Some(false), Some(true))
    );
    let saved = std::fs::read_to_string(save.join("ab-transport.json")).unwrap();
    assert!(!saved.contains(&llama.key));
    let o = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["bench", "report", save.to_str().unwrap()])
        .output()
        .unwrap();
    let text = common::ok(&o);
    assert!(
        text.contains("leg ethernet (transport = \"ethernet\"):\n  FAILED: serve stop: ")
            && text.contains("nothing was changed: the cluster and its serve are as they were"),
        "{text}"
    );
    assert!(llama.child.try_wait().unwrap().is_none());
    llama.kill();
}

/// What a hostile endpoint or a planted saved run names things: OSC 52
/// (write the clipboard), CSI 2J (clear the screen), a right-to-left
/// override, an 8-bit CSI.
const HOSTILE: &str = "evil\u{1b}]52;c;aGFsb2JveA==\u{7}\u{1b}[2J\u{202e}txt\u{9b}31m";

/// No escape, bell or bidirectional override reached the terminal.
fn printable(what: &str, o: &Output) {
    for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        let t = String::from_utf8_lossy(bytes);
        for bad in ['\u{1b}', '\u{7}', '\u{202e}', '\u{9b}'] {
            assert!(!t.contains(bad), "{what}: {bad:?} reached {stream}: {t:?}");
        }
    }
}

/// A tiny OpenAI endpoint that names its model [`HOSTILE`] (also its
/// `owned_by`, with `max_model_len` 20), has no `/tokenize`, and streams
/// 8 tokens for every completion. Answers until the test ends.
fn hostile_endpoint() -> String {
    use std::io::{BufRead, BufReader, Write};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut first = String::new();
                r.read_line(&mut first).unwrap();
                let mut len = 0;
                loop {
                    let mut h = String::new();
                    r.read_line(&mut h).unwrap();
                    if h.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                let mut s = s;
                let answer = if first.starts_with("GET /v1/models") {
                    let b = serde_json::json!({"object": "list", "data": [
                        {"id": HOSTILE, "owned_by": HOSTILE, "max_model_len": 20}
                    ]})
                    .to_string();
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                        b.len()
                    )
                } else if first.starts_with("POST /v1/completions") {
                    let mut b = String::new();
                    for _ in 0..8 {
                        b.push_str(
                            "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\n",
                        );
                    }
                    b.push_str("data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":8,\"prompt_tokens\":8}}\n\ndata: [DONE]\n\n");
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{b}"
                    )
                } else {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .into()
                };
                let _ = s.write_all(answer.as_bytes());
            });
        }
    });
    url
}

/// `halobox ARGS`, its output.
fn hb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(args)
        .env_remove("LLAMA_API_KEY")
        .env_remove("VLLM_API_KEY")
        .output()
        .unwrap()
}

/// Everything a hostile endpoint names is cleaned before it is printed:
/// the live lines and the report of `bench serving`, text and JSON, its
/// refusal, and `bench report`/`bench compare` of the saved run; so is
/// everything in planted saved serving and `--ab-transport` runs.
#[test]
fn a_hostile_endpoint_or_saved_run_cannot_reach_the_terminal() {
    let url = hostile_endpoint();
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    let small = [
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--input-tokens",
        "8",
        "--output-tokens",
        "8",
    ];
    let mut args = vec![
        "bench",
        "serving",
        "--url",
        &url,
        "--save",
        a.to_str().unwrap(),
    ];
    args.extend(small);
    let o = hb(&args);
    assert!(o.status.success(), "{}", common::text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("evil"),
        "{}",
        common::text(&o)
    );
    printable("bench serving", &o);
    args[5] = b.to_str().unwrap();
    args.push("--json");
    let o = hb(&args);
    assert!(o.status.success(), "{}", common::text(&o));
    printable("bench serving --json", &o);
    // 16 + 8 tokens is more than the model's max_model_len: the refusal
    // names the model.
    let o = hb(&[
        "bench",
        "serving",
        "--url",
        &url,
        "--save",
        tmp.path().join("c").to_str().unwrap(),
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--input-tokens",
        "16",
        "--output-tokens",
        "8",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("max_model_len"),
        "{}",
        common::text(&o)
    );
    printable("bench serving over max_model_len", &o);
    let (sa, sb) = (a.to_str().unwrap(), b.to_str().unwrap());
    for args in [
        vec!["bench", "report", sa],
        vec!["bench", "report", sa, "--json"],
        vec!["bench", "compare", sa, sb],
    ] {
        let o = hb(&args);
        assert!(o.status.success(), "{args:?}: {}", common::text(&o));
        printable(&format!("{args:?}"), &o);
    }

    // A planted serving run: every text in it hostile.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-runs");
    let mut rec: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures.join("serving-after/serving.json")).unwrap(),
    )
    .unwrap();
    for k in [
        "started_utc",
        "model",
        "server",
        "prompt_lengths",
        "partial",
    ] {
        rec[k] = HOSTILE.into();
    }
    rec["options"]["endpoint"]["authority"] = HOSTILE.into();
    rec["levels"][0]["requests"][0]["error"] = HOSTILE.into();
    let planted = tmp.path().join("planted");
    std::fs::create_dir(&planted).unwrap();
    std::fs::write(planted.join("serving.json"), rec.to_string()).unwrap();
    // A planted --ab-transport run.
    let mut ab: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures.join("ab/ab-transport.json")).unwrap(),
    )
    .unwrap();
    ab["plan"]["cluster"] = HOSTILE.into();
    ab["plan"]["endpoint"] = HOSTILE.into();
    ab["interrupted"] = HOSTILE.into();
    let leg = &mut ab["legs"][0];
    leg["error"] = HOSTILE.into();
    leg["saved"] = HOSTILE.into();
    leg["nodes"] = serde_json::json!([{
        "ip": HOSTILE, "resolved": "roce", "path": HOSTILE, "reason": HOSTILE, "vars": [HOSTILE]
    }]);
    leg["results"]["model"] = HOSTILE.into();
    leg["results"]["levels"][0]["status"] = HOSTILE.into();
    let planted_ab = tmp.path().join("planted-ab");
    std::fs::create_dir(&planted_ab).unwrap();
    std::fs::write(planted_ab.join("ab-transport.json"), ab.to_string()).unwrap();
    let (p, pa) = (planted.to_str().unwrap(), planted_ab.to_str().unwrap());
    let html = tmp.path().join("page.html");
    let html = html.to_str().unwrap();
    for args in [
        vec!["bench", "report", p],
        vec!["bench", "report", p, "--json"],
        vec!["bench", "compare", sa, p],
        vec!["bench", "compare", p, sa],
        vec!["bench", "report", pa],
        vec!["bench", "report", pa, "--json"],
        vec!["bench", "report", p, pa, "--html", html],
        vec!["bench", "compare", p, sa, "--html", html],
    ] {
        let o = hb(&args);
        printable(&format!("{args:?}"), &o);
        let all = common::text(&o);
        assert!(
            all.contains("evil") || all.contains(html),
            "{args:?}: {all}"
        );
    }
    let page = std::fs::read_to_string(html).unwrap();
    assert!(
        !page.contains('\u{1b}') && !page.contains('\u{202e}'),
        "the page holds escapes"
    );
}

/// `halobox bench soak ARGS` against `llama`, with its key in the
/// environment (never an argument), the output and stderr piped.
fn spawn_soak(llama: &Llama, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["bench", "soak", "--url", &llama.url()])
        .args([
            "--context",
            "256",
            "--short-tokens",
            "16",
            "--output-tokens",
            "16",
        ])
        .args(["--concurrency", "2", "--long-every", "2", "--sample", "1"])
        .args(args)
        .env_remove("VLLM_API_KEY")
        .env("LLAMA_API_KEY", &llama.key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A Strix Halo snapshot's scrape (`halobox metrics --sysroot … --print`,
/// GTT in use), served at `/metrics` by a real HTTP server on loopback
/// (`halobox metrics` serves only the live host).
fn snapshot_metrics(dir: &Path) -> (Child, u16) {
    let scrape = common::ok(&common::run(&[
        "metrics",
        "--sysroot",
        "tests/fixtures/metrics/strix-e810",
        "--print",
        "--node",
        "strix",
    ]));
    assert!(scrape.contains("halobox_gpu_gtt_used_bytes"), "{scrape}");
    std::fs::write(dir.join("metrics"), scrape).unwrap();
    let port = free_port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
        ])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the scrape's HTTP server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

#[test]
fn a_soak_passes_and_a_frozen_serve_fails_it_naming_the_stall() {
    let llama = Llama::start();
    let tmp = tempfile::tempdir().unwrap();
    let (mut metrics, port) = snapshot_metrics(tmp.path());
    let (good, frozen) = (tmp.path().join("good"), tmp.path().join("frozen"));
    let watched = format!("127.0.0.1:{port}");
    let dead = format!("127.0.0.1:{}", free_port());
    let o = spawn_soak(
        &llama,
        &[
            "--duration",
            "6s",
            "--window",
            "2",
            "--metrics",
            &watched,
            "--metrics",
            &dead,
            "--save",
            good.to_str().unwrap(),
        ],
    )
    .wait_with_output()
    .unwrap();
    let out = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(!out.contains(&llama.key), "the key was printed:\n{out}");
    assert!(out.contains("\nPASS\n"), "{out}");
    assert!(
        out.contains(&format!("GTT {watched}: ")) && out.contains("GiB at start"),
        "{out}"
    );
    assert!(out.contains(&format!("GTT on {dead} not judged")), "{out}");
    let r = json(&common::run(&[
        "bench",
        "report",
        good.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(r["verdict"], "PASS", "{r:#}");
    assert!(r["long_requests"].as_u64().unwrap() >= 1, "{r:#}");
    assert!(r["windows"].as_array().unwrap().len() >= 3, "{r:#}");
    assert!(
        r["windows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["output_tokens_per_s"].as_f64().unwrap() > 0.0),
        "{r:#}"
    );
    assert!(
        r["gtt"][0]["points"].as_array().unwrap().len() >= 2,
        "{r:#}"
    );
    let page = tmp.path().join("soak.html");
    common::ok(&common::run(&[
        "bench",
        "report",
        good.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("Soak (bench soak)") && html.contains("GTT in use over the soak"),
        "{html}"
    );

    let child = spawn_soak(
        &llama,
        &[
            "--duration",
            "5m",
            "--stall-timeout",
            "3",
            "--save",
            frozen.to_str().unwrap(),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while !frozen.join("soak.json").exists() {
        assert!(Instant::now() < deadline, "no warm-up");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    let pid = llama.child.id().to_string();
    let signal = |s: &str| Command::new("kill").args([s, &pid]).status().unwrap();
    assert!(signal("-STOP").success());
    let o = child.wait_with_output().unwrap();
    assert!(signal("-CONT").success());
    let out = common::text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("\nFAIL\n") && out.contains("got no byte for 3 s"),
        "{out}"
    );
    let r = json(&common::run(&[
        "bench",
        "report",
        frozen.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(r["verdict"], "FAIL", "{r:#}");
    assert!(
        r["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("stall: request"),
        "{r:#}"
    );
    let _ = metrics.kill();
    let _ = metrics.wait();
}

/// A listener of another user's: a raw TCP server run as `nobody` (uid
/// 65534, through `setpriv`) on a free loopback port that answers like an
/// OpenAI server (`/v1/models` lists a model, a completion streams a token)
/// and appends every byte each connection sent it, then `|`, to `seen`
/// (in a folder it may write) before it answers, so a client that got its
/// answer finds its request recorded. Stopped when dropped.
struct Squatter {
    child: Child,
    port: u16,
    seen: PathBuf,
    _dir: tempfile::TempDir,
}

impl Squatter {
    fn start() -> Squatter {
        use std::io::BufRead as _;
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let seen = dir.path().join("seen");
        let code = r#"
import json, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(64)
models = json.dumps({'object': 'list', 'data': [{'id': 'squat', 'object': 'model', 'owned_by': 'squat'}]}).encode()
token = b'data: ' + json.dumps({'choices': [{'index': 0, 'text': 'x'}]}).encode() + b'\n\n'
print('ready', flush=True)
while True:
    c, _ = s.accept(); c.settimeout(2); got = b''; head = b''
    try:
        while b'\r\n\r\n' not in got:
            b = c.recv(4096)
            if not b: break
            got += b
        head, _, body = got.partition(b'\r\n\r\n')
        n = max([int(l.split(b':')[1]) for l in head.split(b'\r\n') if l.lower().startswith(b'content-length:')] or [0])
        while len(body) < n:
            b = c.recv(4096)
            if not b: break
            body += b; got += b
    except OSError:
        pass
    with open(sys.argv[2], 'ab') as f: f.write(got + b'|')
    try:
        if head.startswith(b'GET /v1/models'):
            c.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' % len(models) + models)
        elif head.startswith(b'POST /v1/completions'):
            c.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n' + token * 4 + b'data: [DONE]\n\n')
        elif head:
            c.sendall(b'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
    except OSError:
        pass
    c.close()
"#;
        let port = free_port();
        let mut child = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["/usr/bin/python3", "-c", code, &port.to_string()])
            .arg(&seen)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("setpriv");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "the squatter did not start");
        Squatter {
            child,
            port,
            seen,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Everything it was sent so far (each connection ended by `|`).
    fn heard(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.seen).unwrap_or_default()).into_owned()
    }
}

impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Another user's listener on the serve's port (a squatter that answers
/// like an OpenAI server and records every byte): `bench soak` and `bench
/// serving` with a key send it no byte of a request, exit 1, and name
/// whose the port is and what to do, without the key. A request without a
/// key reaches it, so it does record what it is sent.
#[test]
fn a_squatter_on_the_port_gets_no_key() {
    if !Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n")
    {
        eprintln!("skipped: needs root to run a listener as uid 65534");
        return;
    }
    let squatter = Squatter::start();
    let url = squatter.url();
    let plain = Command::new("curl")
        .args(["-s", "--max-time", "10", &format!("{url}/v1/models")])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&plain.stdout).contains("\"squat\""),
        "the squatter answers like an OpenAI server: {}",
        common::text(&plain)
    );
    assert!(squatter.heard().starts_with("GET /v1/models HTTP/1.1\r\n"));
    let key = new_key();
    let soak = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["bench", "soak", "--url", &url, "--duration", "5s"])
        .args([
            "--context",
            "64",
            "--short-tokens",
            "8",
            "--output-tokens",
            "4",
        ])
        .env_remove("VLLM_API_KEY")
        .env("LLAMA_API_KEY", &key)
        .output()
        .unwrap();
    let serving = serving(
        &["--url", &url, "--requests", "2", "--concurrency", "1"],
        &[("LLAMA_API_KEY", &key)],
        Some(&key),
    );
    let heard = squatter.heard();
    assert!(!heard.contains(&key), "the squatter got the key: {heard}");
    assert!(
        !heard.to_lowercase().contains("authorization"),
        "the squatter got an Authorization header: {heard}"
    );
    assert!(
        heard.ends_with("||") && heard.matches("GET ").count() == 1 && !heard.contains("POST "),
        "the squatter was sent a request after the keyless one: {heard}"
    );
    for (what, o) in [("bench soak", &soak), ("bench serving", &serving)] {
        let all = common::text(o);
        assert_eq!(o.status.code(), Some(1), "{what}: {all}");
        assert!(!all.contains(&key), "{what} printed the key: {all}");
        assert!(
            all.contains(&format!(
                "{url}: the API key was not sent: not ours: 127.0.0.1:{} is a socket of uid 65534 (nobody), not of this user (uid 0) nor root",
                squatter.port
            )),
            "{what}: {all}"
        );
        assert!(
            all.contains(&format!(
                "hint: another process holds the serve's port: `ss -ltnp 'sport = :{}'` shows it",
                squatter.port
            )),
            "{what}: {all}"
        );
    }
}
