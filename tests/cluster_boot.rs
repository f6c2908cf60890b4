//! `cluster enable` / `cluster disable` against the real parts.
//!
//! - Every unit the plan writes (podman, docker and host nodes; root's
//!   system units and a user's) passes `systemd-analyze verify`.
//! - On two podman namespace nodes (tests/common/serve.rs) with a real
//!   vLLM serve recorded: `--dry-run` prints every file and command, no
//!   secret, and changes nothing; a foreign file of the same name is refused
//!   and left alone; `enable` writes and enables the units (each passes
//!   `systemd-analyze verify` where it was written); then a "boot": every
//!   container stopped and Ray gone, and the `Exec*=` lines of the written
//!   units run exactly as systemd would run them (their `Environment=`, a
//!   `-` prefix ignoring failure, in the order their `After=` gives), with
//!   no other halobox command: the containers run again, Ray lists both
//!   nodes, the serve answers a completion; SIGTERM (`systemctl stop`) ends
//!   it cleanly. `disable` leaves a foreign file of the same name alone and
//!   removes every file `enable` wrote.
//!
//! These machines run no systemd as PID 1 (and podman 4.3 has no Quadlet),
//! so the boot is the units' own lines run by this test, not by systemd.
//! Needs root, the engines of scripts/engines/start.sh and
//! scripts/vllm-venv.sh's venv; a missing piece fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use halobox::cluster::boot::plan::{self, NodeFacts, Options};
use halobox::cluster::config::{ClusterConfig, NodeBackend, NodeConfig};
use halobox::serve::request::Spec;

use common::serve::{HALOBOX, Serving};

fn spec() -> Spec {
    Spec {
        model: "/models/m".into(),
        tp: Some(2),
        max_model_len: Some(512),
        gpu_memory_utilization: None,
        no_eager: false,
        host: None,
        port: 8000,
        no_api_key: false,
        nccl_debug: false,
        timeout: 600,
        no_fit_check: false,
        extra: vec!["--dtype".into(), "float32".into()],
    }
}

fn node(name: &str, ip: &str, backend: NodeBackend) -> NodeConfig {
    NodeConfig {
        name: Some(name.into()),
        ssh: format!("root@{ip}"),
        ip: ip.parse().unwrap(),
        container: "vllm".into(),
        backend,
        cpus: None,
        env: Default::default(),
    }
}

/// `systemd-analyze verify` of every file in `dir` (`--user` for user
/// units); panics with what it said unless it passes.
fn verify(dir: &Path, user: bool) {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "service"))
        .collect();
    assert!(!files.is_empty(), "no unit in {}", dir.display());
    let rt = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("/usr/bin/systemd-analyze");
    if user {
        cmd.arg("--user").env("XDG_RUNTIME_DIR", rt.path());
    }
    let out = cmd
        .args(["verify", "--man=no"])
        .args(&files)
        .output()
        .expect("/usr/bin/systemd-analyze (Debian's systemd package)");
    let said = common::text(&out);
    assert!(
        out.status.success() && !said.contains(".service"),
        "systemd-analyze verify {files:?}:\n{said}"
    );
}

#[test]
fn every_unit_enable_writes_passes_systemd_analyze_verify() {
    let t0 = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    for backend in [NodeBackend::Podman, NodeBackend::Docker, NodeBackend::Host] {
        let engine = match backend {
            NodeBackend::Docker => "/usr/bin/docker",
            _ => "/usr/bin/podman",
        };
        assert!(Path::new(engine).exists(), "{engine} is missing");
        let cfg = ClusterConfig::new(vec![
            node("a", "10.0.0.1", backend),
            node("b", "10.0.0.2", backend),
        ]);
        for uid in [0u32, 1000] {
            let home = tmp.path().join(format!("{backend}-{uid}"));
            let facts = NodeFacts {
                uid,
                user: "u".into(),
                home: home.display().to_string(),
                systemd: true,
                linger: true,
                systemctl: "/usr/bin/systemctl".into(),
                engine: engine.into(),
                halobox: HALOBOX.into(),
                files: vec![],
            };
            let opts = Options {
                cluster: "/etc/halobox/my cluster%.toml".into(),
                env: vec![
                    ("HOME".into(), home.display().to_string()),
                    ("XDG_STATE_HOME".into(), "/var/lib/a \"b\"$c".into()),
                ],
                serve: Some(spec()),
                on_head: true,
                uid,
            };
            let plans = plan::plan(&cfg, &[facts.clone(), facts], &opts).unwrap();
            for (i, p) in plans.iter().enumerate() {
                let dir = home.join(format!("node{i}"));
                std::fs::create_dir_all(&dir).unwrap();
                for f in &p.files {
                    std::fs::write(dir.join(&f.unit), &f.content).unwrap();
                }
                if !p.files.is_empty() {
                    verify(&dir, uid != 0);
                }
            }
        }
    }
    eprintln!("verified in {:.1} s", t0.elapsed().as_secs_f64());
}

/// One `Exec*=` line of a unit: whether a failure is ignored (`-`), and
/// its words as systemd splits them (double quotes with backslash escapes;
/// `%%` and `$$` unescaped).
fn exec_words(line: &str) -> (bool, Vec<String>) {
    let (ignore, rest) = match line.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, line),
    };
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut started = false;
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            '\\' if quoted => cur.push(chars.next().unwrap()),
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            c => {
                cur.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(cur);
    }
    let words = words
        .into_iter()
        .map(|w| w.replace("%%", "%").replace("$$", "$"))
        .collect();
    (ignore, words)
}

/// A unit file's `Environment=` pairs and its `KEY=` lines.
struct Unit {
    env: Vec<(String, String)>,
    text: String,
}

impl Unit {
    fn read(path: &Path) -> Unit {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let env = text
            .lines()
            .filter_map(|l| l.strip_prefix("Environment="))
            .map(|v| {
                let (_, w) = exec_words(v);
                let (k, v) = w[0].split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        Unit { env, text }
    }

    fn lines(&self, key: &str) -> Vec<(bool, Vec<String>)> {
        self.text
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(exec_words)
            .collect()
    }

    /// An `Exec*=` line as systemd runs it on node `x`: a clean
    /// environment (systemd's PATH and the unit's `Environment=`).
    fn command(&self, s: &Serving, x: char, argv: &[String]) -> Command {
        let mut all: Vec<String> = vec![
            "env".into(),
            "-i".into(),
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin".into(),
        ];
        all.extend(self.env.iter().map(|(k, v)| format!("{k}={v}")));
        all.extend(argv.iter().cloned());
        let words: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut c = s.on_node(x, &words);
        c.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        c
    }

    /// Runs its `ExecStartPre=` and `ExecStart=` lines on node `x` as a
    /// `Type=oneshot` start does: in order, each to its end; a failure
    /// fails the start unless the line has `-`.
    fn start_oneshot(&self, s: &Serving, x: char, name: &str) {
        for key in ["ExecStartPre", "ExecStart"] {
            for (ignore, argv) in self.lines(key) {
                let r = s.run(name, self.command(s, x, &argv));
                assert!(ignore || r.ok(), "{name} on node {x}: {argv:?}: {r}");
            }
        }
    }
}

/// The files under `dir` (a node's unit folder as this machine sees it),
/// symlinks included, relative.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            if e.file_type().unwrap().is_dir() {
                walk(base, &p, out);
            } else {
                out.push(rel);
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn podman_nodes_enable_boot_and_disable() {
    let t0 = Instant::now();
    let s = Serving::vllm("podman", 2, None, [2, 256, 4, 2]);
    let cfg = s.cfg();
    let model = s.model.clone();
    s.refresh();
    // Each node's unit folder is its own (the nodes share this machine's
    // /etc otherwise).
    let units = |x: char| {
        PathBuf::from(format!(
            "/proc/{}/root/etc/systemd/system",
            s.nodes().pid(x)
        ))
    };
    for x in ['a', 'b'] {
        let r = s.run(
            "tmpfs",
            s.on_node(x, &["mount", "-t", "tmpfs", "tmpfs", "/etc/systemd/system"]),
        );
        assert!(r.ok(), "mount on node {x}: {r}");
        assert!(tree(&units(x)).is_empty());
    }
    s.hb(&["cluster", "up", "--cluster", &cfg])
        .expect_ok("cluster up");
    let serve = s.hb(&[
        "serve",
        &model,
        "--tp",
        "2",
        "--detach",
        "--cluster",
        &cfg,
        "--max-model-len",
        "512",
        "--",
        "--dtype",
        "float32",
    ]);
    serve.expect_ok("serve --detach");
    let key = s.path("cluster.api-key");
    let before = s.complete('a', 8000, 8, Some(&key));

    // --dry-run with secrets in the environment: every file in full, no
    // secret, nothing written.
    let hf = format!("hf_secret{}", std::process::id());
    let api = format!("api-secret-{}", std::process::id());
    let dry = s.hb_env(
        &["cluster", "enable", "--dry-run", "--cluster", &cfg],
        &[("HF_TOKEN", &hf), ("VLLM_API_KEY", &api)],
    );
    assert!(dry.ok(), "enable --dry-run: {dry}");
    for want in [
        "node a (system units):",
        "write /etc/systemd/system/halobox-container-vllm.service (0644):",
        "write /etc/systemd/system/halobox-cluster.service (0644):",
        "write /etc/systemd/system/halobox-serve.service (0644):",
        "| ExecStart=/usr/bin/podman start vllm",
        "serve --recorded --cluster",
        "run: systemctl enable halobox-container-vllm.service halobox-cluster.service halobox-serve.service",
        "node b (system units):",
        "Nothing was written (--dry-run).",
    ] {
        assert!(dry.out.contains(want), "--dry-run lacks {want:?}: {dry}");
    }
    assert!(
        !dry.both().contains(&hf) && !dry.both().contains(&api),
        "a secret in --dry-run: {dry}"
    );
    for x in ['a', 'b'] {
        assert!(tree(&units(x)).is_empty(), "--dry-run wrote on node {x}");
    }
    assert!(
        !common::serve::any_file_has(&s.path("state"), "\"nodes\""),
        "--dry-run kept a manifest"
    );

    // A foreign file of the same name: refused, left alone, nothing written.
    let foreign = "[Unit]\nDescription=somebody else's\n";
    let b_unit = units('b').join("halobox-container-vllm.service");
    std::fs::write(&b_unit, foreign).unwrap();
    let r = s.hb(&["cluster", "enable", "--cluster", &cfg]);
    assert!(
        !r.ok() && r.err.contains("node b") && r.err.contains("hint:"),
        "enable over a foreign file: {r}"
    );
    assert_eq!(std::fs::read_to_string(&b_unit).unwrap(), foreign);
    assert!(tree(&units('a')).is_empty());
    std::fs::remove_file(&b_unit).unwrap();

    // enable, with the secrets set: none lands in a file.
    let t = Instant::now();
    let en = s.hb_env(
        &["cluster", "enable", "--cluster", &cfg],
        &[("HF_TOKEN", &hf), ("VLLM_API_KEY", &api)],
    );
    assert!(en.ok(), "cluster enable: {en}");
    eprintln!("enable: {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(
        tree(&units('a')),
        [
            "halobox-cluster.service",
            "halobox-container-vllm.service",
            "halobox-serve.service",
            "multi-user.target.wants/halobox-cluster.service",
            "multi-user.target.wants/halobox-container-vllm.service",
            "multi-user.target.wants/halobox-serve.service",
        ]
    );
    assert_eq!(
        tree(&units('b')),
        [
            "halobox-container-vllm.service",
            "multi-user.target.wants/halobox-container-vllm.service",
        ]
    );
    for x in ['a', 'b'] {
        assert!(!common::serve::any_file_has(&units(x), &hf));
        assert!(!common::serve::any_file_has(&units(x), &api));
        assert!(!common::serve::any_file_has(
            &units(x),
            std::fs::read_to_string(&key).unwrap().trim()
        ));
        // Verified where it was written (the node's view of its files).
        let v = s.run(
            "verify",
            s.on_node(
                x,
                &[
                    "sh",
                    "-c",
                    "/usr/bin/systemd-analyze verify --man=no /etc/systemd/system/*.service 2>&1; echo rc=$?",
                ],
            ),
        );
        assert!(
            v.out.trim_end().ends_with("rc=0") && !v.out.contains(".service:"),
            "systemd-analyze verify on node {x}: {v}"
        );
    }

    // The "reboot": every container stopped (Ray and vLLM with them).
    for x in ['a', 'b'] {
        let r = s.engine_cli(x, &["stop", "-t", "2", "vllm"]);
        assert!(r.ok(), "podman stop on node {x}: {r}");
    }
    // The "boot": the units' own lines, containers first (the head's
    // cluster unit is After= its container), then cluster up, then the serve.
    let t = Instant::now();
    for x in ['a', 'b'] {
        Unit::read(&units(x).join("halobox-container-vllm.service")).start_oneshot(
            &s,
            x,
            "container-unit",
        );
        let state = s.engine_cli(x, &["inspect", "-f", "{{.State.Status}}", "vllm"]);
        assert_eq!(state.out.trim(), "running", "node {x}: {state}");
    }
    Unit::read(&units('a').join("halobox-cluster.service")).start_oneshot(&s, 'a', "cluster-unit");
    let st = s.hb(&["cluster", "status", "--json", "--cluster", &cfg]);
    let doc: serde_json::Value =
        serde_json::from_str(&st.out).unwrap_or_else(|e| panic!("{e}: {st}"));
    assert_eq!(doc["alive"], 2, "Ray after the boot: {st}");
    eprintln!(
        "containers and cluster up: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let serve_unit = Unit::read(&units('a').join("halobox-serve.service"));
    let (_, argv) = serve_unit.lines("ExecStart").remove(0);
    let mut fg = s.spawn("serve-unit", &mut serve_unit.command(&s, 'a', &argv));
    fg.wait_for(
        "a line starting `serving `",
        Duration::from_secs(900),
        |l| l.starts_with("serving "),
    );
    eprintln!("serving again: {:.1} s", t.elapsed().as_secs_f64());
    let after = s.complete('a', 8000, 8, Some(&key));
    common::serve::assert_same_tokens(&before, &after);
    // `systemctl stop`: SIGTERM to the unit's process.
    fg.signal_halobox(nix::sys::signal::Signal::SIGTERM, true);
    let ended = fg.wait();
    assert!(
        ended.ok(),
        "the serve unit's process after SIGTERM: {ended}"
    );

    // disable leaves a foreign file of the same name alone.
    std::fs::write(&b_unit, foreign).unwrap();
    let dis = s.hb(&["cluster", "disable", "--cluster", &cfg]);
    assert!(dis.ok(), "cluster disable: {dis}");
    assert!(
        tree(&units('a')).is_empty(),
        "left on node a: {:?}",
        tree(&units('a'))
    );
    assert_eq!(std::fs::read_to_string(&b_unit).unwrap(), foreign);
    assert!(dis.out.contains("left alone"), "{dis}");
    // ... and without one, nothing is left anywhere.
    std::fs::remove_file(&b_unit).unwrap();
    std::fs::remove_file(units('b').join("multi-user.target.wants/halobox-container-vllm.service"))
        .unwrap();
    s.hb(&["cluster", "enable", "--cluster", &cfg])
        .expect_ok("enable again");
    let dry = s.hb(&["cluster", "disable", "--dry-run", "--cluster", &cfg]);
    assert!(dry.ok() && dry.out.contains("Nothing was removed"), "{dry}");
    assert_eq!(
        tree(&units('b')).len(),
        2,
        "disable --dry-run removed something"
    );
    s.hb(&["cluster", "disable", "--cluster", &cfg])
        .expect_ok("disable");
    for x in ['a', 'b'] {
        assert!(
            tree(&units(x)).is_empty(),
            "left on node {x}: {:?}",
            tree(&units(x))
        );
    }
    let again = s.hb(&["cluster", "disable", "--cluster", &cfg]);
    assert!(
        again.ok() && again.out.contains("nothing is enabled"),
        "{again}"
    );
    s.hb(&["cluster", "down", "--cluster", &cfg]);
    eprintln!("whole test: {:.1} s", t0.elapsed().as_secs_f64());
}
