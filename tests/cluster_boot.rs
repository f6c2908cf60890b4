//! `cluster enable` / `cluster disable` against the real parts.
//!
//! - Every unit the plan writes (podman, docker and host nodes; root's
//!   system units and a user's) passes `systemd-analyze verify`.
//! - On two podman namespace nodes (tests/common/serve.rs) with a real
//!   vLLM serve recorded: `--dry-run` prints every file and command, no
//!   secret, and changes nothing; a foreign file of the same name is refused
//!   and left alone; `enable` writes and enables the units (each passes
//!   `systemd-analyze verify` where it was written); then a boot: every
//!   container stopped (Ray and vLLM with them), and on each node a real
//!   systemd manager started over the node's unit folder, which runs
//!   multi-user.target as `enable` left it (node b 20 s late): with no
//!   halobox command typed, the containers run again, Ray lists both nodes,
//!   the serve answers with the same greedy tokens; SIGTERM to each manager
//!   (a shutdown) stops the serve and the containers through the units.
//!   `disable` leaves a foreign file of the same name alone and removes
//!   every file `enable` wrote.
//!
//! These machines run no systemd as PID 1 (and podman 4.3 has no Quadlet):
//! the managers are `systemd --user` run as root, each in a mount namespace
//! of its own where `/run/systemd/system` exists, with stand-ins for the
//! system targets the units name (multi-user, network-online, ...).
//! Needs root, the engines of scripts/engines/start.sh and
//! scripts/vllm-venv.sh's venv; a missing piece fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use halobox::cluster::config::{ClusterConfig, NodeBackend, NodeConfig};
use halobox::fleet::boot::plan::{self, NodeFacts, Options};
use halobox::serve::request::Spec;

use common::serve::{HALOBOX, Serving, tiny_vllm_serve};

fn spec() -> Spec {
    Spec {
        model: "/models/m".into(),
        tp: Some(2),
        max_model_len: Some(512),
        max_model_len_auto: false,
        gpu_memory_utilization: None,
        no_eager: false,
        host: None,
        port: 8000,
        no_api_key: false,
        nccl_debug: false,
        timeout: 600,
        no_fit_check: false,
        restart: Some("on-failure".parse().unwrap()),
        stall_timeout: None,
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
        memory_bandwidth_gbs: None,
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
                guards: vec![],
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

/// A systemd manager running on a node as its init would: in a mount
/// namespace of its own where `/run/systemd/system` exists (systemd's "booted
/// with systemd" check), its units from the node's `/etc/systemd/system`
/// (where `enable` wrote them) and stand-in targets, in a cgroup of its
/// own. It runs as a user-mode manager (`systemd --user`, as root): PID 1
/// belongs to the node. Killed on drop.
struct Boot {
    run: Option<common::serve::Running>,
    cgroups: Vec<PathBuf>,
}

impl Boot {
    fn start(s: &Serving, x: char, stubs: &Path) -> Boot {
        let name = format!("hb-boot-{}-{x}", s.nodes().tag);
        let cgroups: Vec<PathBuf> = ["systemd", "unified"]
            .iter()
            .map(|h| Path::new("/sys/fs/cgroup").join(h).join(&name))
            .collect();
        let script = format!(
            "set -e\nmkdir -p /run/systemd\nmount -t tmpfs tmpfs /run/systemd\nmkdir -p /run/systemd/system /run/systemd/hbu\nchmod 700 /run/systemd/hbu\nfor g in {0} {1}; do mkdir -p \"$g\" && echo $$ >\"$g/cgroup.procs\" || true; done\nexport XDG_RUNTIME_DIR=/run/systemd/hbu SYSTEMD_UNIT_PATH=/etc/systemd/system:{2} HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin\nexec /lib/systemd/systemd --user --unit=multi-user.target --log-target=console --log-level=info",
            cgroups[0].display(),
            cgroups[1].display(),
            stubs.display()
        );
        let mut cmd = s.on_node(
            x,
            &[
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ],
        );
        let run = s.spawn(&format!("systemd-{x}"), &mut cmd);
        Boot {
            run: Some(run),
            cgroups,
        }
    }

    fn log(&self) -> String {
        self.run
            .as_ref()
            .map(|r| format!("{}{}", r.out(), r.err()))
            .unwrap_or_default()
    }

    fn manager(&self) -> Option<u32> {
        let r = self.run.as_ref()?;
        common::serve::descendants(r.child.id(), "systemd")
            .first()
            .copied()
    }

    /// SIGTERM to the manager (what a shutdown sends it), waited for.
    fn shutdown(&mut self) {
        let pid = self.manager().expect("the systemd manager runs");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(180);
        let run = self.run.as_mut().unwrap();
        while run.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "the manager did not stop its units within 3 min:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        self.run.take();
        for g in &self.cgroups {
            remove_cgroup(g);
        }
    }
}

/// Removes the cgroup `dir` and those systemd made below it (deepest
/// first: a cgroup folder goes only by `rmdir`, once empty).
fn remove_cgroup(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup(&e.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

impl Drop for Boot {
    fn drop(&mut self) {
        if let Some(pid) = self.manager() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if let Some(r) = self.run.take() {
            r.kill();
        }
        for g in &self.cgroups {
            remove_cgroup(g);
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
    let serve = s.hb(&tiny_vllm_serve(
        &model,
        "2",
        &cfg,
        &["--detach", "--restart", "on-failure"],
    ));
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

    // The "reboot": every process ends, the detached supervisor on the
    // head first (as power loss would: left running, it would heal the
    // stops below by starting the containers again), then every container
    // (Ray and vLLM with them).
    let k = s.run(
        "kill-supervisor",
        s.on_node('a', &["pkill", "-KILL", "-f", "serve supervise"]),
    );
    assert!(k.ok(), "no supervisor to kill on node a: {k}");
    for x in ['a', 'b'] {
        let r = s.engine_cli(x, &["stop", "-t", "2", "vllm"]);
        assert!(r.ok(), "podman stop on node {x}: {r}");
    }
    // The "boot": a real systemd manager on each node, started with the
    // node's unit folder, runs multi-user.target as enable left it; node b
    // boots 20 s late, so the head's first `cluster up` may fail and be
    // tried again.
    let t = Instant::now();
    let stubs = s.path("sd-stubs");
    std::fs::create_dir_all(&stubs).unwrap();
    // The system targets the units name, as stand-ins; and how a user-mode
    // manager ends (exit.target, as systemd's own user units define it).
    for (name, text) in [
        ("multi-user.target", ""),
        ("basic.target", ""),
        ("sysinit.target", ""),
        ("network-online.target", ""),
        (
            "shutdown.target",
            "DefaultDependencies=no\nRefuseManualStart=yes\n",
        ),
        (
            "exit.target",
            "DefaultDependencies=no\nRequires=systemd-exit.service\nAfter=systemd-exit.service\nAllowIsolate=yes\n",
        ),
    ] {
        std::fs::write(
            stubs.join(name),
            format!("[Unit]\nDescription=stand-in for {name}\n{text}"),
        )
        .unwrap();
    }
    std::fs::copy(
        "/usr/lib/systemd/user/systemd-exit.service",
        stubs.join("systemd-exit.service"),
    )
    .expect("systemd's own user unit systemd-exit.service");
    let mut a = Boot::start(&s, 'a', &stubs);
    std::thread::sleep(Duration::from_secs(20));
    let mut b = Boot::start(&s, 'b', &stubs);
    assert!(
        s.wait_api('a', 8000),
        "no API after the boot:\nnode a's manager:\n{}\nnode b's:\n{}",
        a.log(),
        b.log()
    );
    for x in ['a', 'b'] {
        let state = s.engine_cli(x, &["inspect", "-f", "{{.State.Status}}", "vllm"]);
        assert_eq!(state.out.trim(), "running", "node {x}: {state}");
    }
    let st = s.hb(&["cluster", "status", "--json", "--cluster", &cfg]);
    let doc: serde_json::Value =
        serde_json::from_str(&st.out).unwrap_or_else(|e| panic!("{e}: {st}"));
    assert_eq!(doc["alive"], 2, "Ray after the boot: {st}");
    let status = s.hb(&["serve", "status", "--cluster", &cfg]);
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut status = status;
    while !status.ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(2));
        status = s.hb(&["serve", "status", "--cluster", &cfg]);
    }
    assert!(
        status.ok(),
        "serve status after the boot: {status}\n{}",
        a.log()
    );
    eprintln!(
        "serving again after the boot: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let after = s.complete('a', 8000, 8, Some(&key));
    common::serve::assert_same_tokens(&before, &after);
    // The shutdown: SIGTERM to each manager stops its units (the serve
    // first, then the containers by their ExecStop).
    a.shutdown();
    b.shutdown();
    for x in ['a', 'b'] {
        let state = s.engine_cli(x, &["inspect", "-f", "{{.State.Status}}", "vllm"]);
        assert_ne!(
            state.out.trim(),
            "running",
            "node {x} after the shutdown: {state}"
        );
    }

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
