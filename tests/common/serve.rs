//! The serving path's end-to-end harness (tests/serve_e2e.rs): test nodes
//! that each run their own podman or dockerd ([`Nodes::up_with_engine`]),
//! halobox's containers on them with vLLM's CPU build
//! (scripts/vllm-venv.sh) or llama.cpp's (scripts/llama-cpp.sh) bound in
//! read-only, a random-weight model made on the spot (or one given), a
//! cluster file, and the steps the tests assert on: halobox on the head, a
//! command in a node's container, a greedy completion, the processes left.
//! Every command's output goes to a file in the nodes' folder (a daemon it
//! starts holds no pipe of the test's). A missing engine or venv fails.
//! `SERVE_E2E_KEEP=1` keeps the nodes after a failure, to look at them.

use std::cell::Cell;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::netns::Nodes;

/// The halobox under test.
pub const HALOBOX: &str = env!("CARGO_BIN_EXE_halobox");
/// vLLM's CPU venv (scripts/vllm-venv.sh).
pub const VENV: &str = "/opt/halobox-vllm";
/// torch inductor's cache of compiled CPU kernels, kept on this machine and
/// bound into every vLLM node container at the folder torch uses by default
/// (`/tmp/torchinductor_root`): vLLM's CPU build compiles its kernels and a
/// precompiled header with g++ at every start, most of a minute of both
/// cores per node, and a new container starts with an empty /tmp. The cache
/// is keyed by each kernel's source, so what it holds is what a compile
/// would make.
pub const INDUCTOR_CACHE: &str = "/var/cache/halobox-engines/torchinductor";
/// The prompt of every completion compared.
pub const PROMPT: &str = "The capital of France is";
/// Tokens generated for the comparison.
pub const TOKENS: u32 = 24;
/// llama.cpp's RPC port on the workers.
pub const RPC_PORT: u16 = 50052;

/// The tiny random-weight model's vLLM serve line the live tests share:
/// `serve MODEL --tp TP FLAGS… --cluster CFG --max-model-len 512 -- --dtype
/// float32` (float32: the CPU build's kernels for the random weights).
pub fn tiny_vllm_serve<'a>(
    model: &'a str,
    tp: &'a str,
    cfg: &'a str,
    flags: &[&'a str],
) -> Vec<&'a str> {
    let mut a = vec!["serve", model, "--tp", tp];
    a.extend_from_slice(flags);
    a.extend([
        "--cluster",
        cfg,
        "--max-model-len",
        "512",
        "--",
        "--dtype",
        "float32",
    ]);
    a
}

/// Which server the nodes run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Engine {
    /// vLLM over Ray.
    Vllm,
    /// llama.cpp over RPC.
    Llama,
}

/// llama.cpp's CPU build: `HALOBOX_LLAMA_CPP`, else /opt/halobox-llama-cpp.
pub fn llama_dir() -> PathBuf {
    std::env::var_os("HALOBOX_LLAMA_CPP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/halobox-llama-cpp"))
}

/// A file of this checkout.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A finished command: its exit code and what it printed.
pub struct Ran {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Its stdout.
    pub out: String,
    /// Its stderr.
    pub err: String,
}

impl Ran {
    /// Whether it exited 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// stdout then stderr.
    pub fn both(&self) -> String {
        format!("{}{}", self.out, self.err)
    }

    /// Itself, after a panic naming `what` unless it exited 0.
    pub fn expect_ok(self, what: &str) -> Ran {
        assert!(self.ok(), "{what} failed: {self}");
        self
    }
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.out, self.err
        )
    }
}

/// A command left running, its output going to files.
pub struct Running {
    /// The process (nsenter or `ip netns exec`, halobox below it).
    pub child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Running {
    /// What it printed to stdout so far.
    pub fn out(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// What it printed to stderr so far.
    pub fn err(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits (up to `within`) until a line of its stdout or stderr passes
    /// `line` (`what` names it); panics with what it printed if it ends first.
    pub fn wait_for(&mut self, what: &str, within: Duration, line: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + within;
        loop {
            let (out, err) = (self.out(), self.err());
            if out.lines().chain(err.lines()).any(&line) {
                return;
            }
            if let Some(s) = self.child.try_wait().unwrap() {
                panic!("ended ({s}) before printing {what}:\nstdout:\n{out}\nstderr:\n{err}");
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {within:?}:\nstdout:\n{out}\nstderr:\n{err}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The halobox processes below it (nsenter and `ip netns exec` pass no
    /// signal on).
    pub fn halobox_pids(&self) -> Vec<u32> {
        let pids = descendants(self.child.id(), "halobox");
        assert!(!pids.is_empty(), "no halobox below {}", self.child.id());
        pids
    }

    /// Sends `signal` to every halobox below it (`top`: only to those not
    /// started by another halobox).
    pub fn signal_halobox(&self, signal: nix::sys::signal::Signal, top: bool) {
        let pids = self.halobox_pids();
        for &pid in &pids {
            if top && parent(pid).is_some_and(|p| pids.contains(&p)) {
                continue;
            }
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
        }
    }

    /// Waits for its end.
    pub fn wait(mut self) -> Ran {
        let status = self.child.wait().unwrap();
        Ran {
            code: status.code(),
            out: self.out(),
            err: self.err(),
        }
    }

    /// Kills it and waits for it (a request left running).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills its whole process group (it was started as a group leader)
    /// and reaps it.
    pub fn kill_group(mut self) {
        let pgid = nix::unistd::Pid::from_raw(-(self.child.id() as i32));
        let _ = nix::sys::signal::kill(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// The parent of `pid`.
pub fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Every process below `top` whose command name is `comm`.
pub fn descendants(top: u32, comm: &str) -> Vec<u32> {
    let mut parent = std::collections::HashMap::new();
    let mut name = std::collections::HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …: comm may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent.insert(pid, ppid);
            name.insert(pid, stat[open + 1..close].to_string());
        }
    }
    let below = |mut p: u32| {
        while let Some(&up) = parent.get(&p) {
            if up == top {
                return true;
            }
            if up <= 1 {
                return false;
            }
            p = up;
        }
        false
    };
    let mut found: Vec<u32> = name
        .iter()
        .filter(|(pid, n)| n.as_str() == comm && below(**pid))
        .map(|(pid, _)| *pid)
        .collect();
    found.sort_unstable();
    found
}

/// A process on a node that holds a port (or plays a server), killed on drop.
pub struct Held(Child);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Test nodes serving through halobox, removed on drop.
pub struct Serving {
    nodes: Option<Nodes>,
    /// vLLM or llama.cpp.
    pub engine: Engine,
    /// podman or docker.
    pub backend: String,
    /// The nodes, a first (the head).
    pub names: Vec<char>,
    /// The node image refreshed from.
    pub image: String,
    /// The model's path in the containers.
    pub model: String,
    /// The model on this machine (a folder for vLLM, `models/` for llama.cpp).
    pub model_host: PathBuf,
    /// The cluster file.
    pub cfg: PathBuf,
    /// llama.cpp's CPU build (llama.cpp only).
    pub llama: PathBuf,
    runs: Cell<u32>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let Some(nodes) = self.nodes.take() else {
            return;
        };
        if std::thread::panicking() && std::env::var_os("SERVE_E2E_KEEP").is_some() {
            eprintln!(
                "SERVE_E2E_KEEP: nodes kept; remove them with: bash scripts/netns/nodes.sh down {} {}",
                nodes.tag,
                nodes.dir.path().display()
            );
            std::mem::forget(nodes);
        }
    }
}

impl Serving {
    /// `count` nodes with `backend` for vLLM: the model folder `given`, or a
    /// random-weight Llama of `shape` (layers, hidden, heads, kv heads) made
    /// by scripts/serve/make-llama.py.
    pub fn vllm(backend: &str, count: usize, given: Option<&Path>, shape: [u32; 4]) -> Serving {
        let vllm = Path::new(VENV).join("bin/vllm");
        assert!(
            vllm.exists(),
            "{} is missing: bash scripts/vllm-venv.sh {VENV} (scripts/test.sh runs it)",
            vllm.display()
        );
        let mut s = Serving::start(Engine::Vllm, backend, count);
        s.model_host = match given {
            Some(dir) => {
                assert!(
                    dir.join("config.json").is_file(),
                    "{}: no config.json there (a Hugging Face model folder)",
                    dir.display()
                );
                dir.canonicalize().unwrap()
            }
            None => {
                let dir = s.nodes().path("model");
                let [layers, hidden, heads, kv] = shape.map(|n| n.to_string());
                let made = Command::new(Path::new(VENV).join("bin/python"))
                    .arg(repo("scripts/serve/make-llama.py"))
                    .arg(&dir)
                    .args(["--layers", &layers, "--hidden", &hidden])
                    .args(["--heads", &heads, "--kv-heads", &kv])
                    .env("HF_HUB_OFFLINE", "1")
                    .output()
                    .unwrap();
                assert!(
                    made.status.success(),
                    "make-llama.py: {}",
                    super::text(&made)
                );
                dir
            }
        };
        s.model = format!(
            "/models/{}",
            s.model_host.file_name().unwrap().to_string_lossy()
        );
        let mut cfg = format!(
            "ray = \"{VENV}/bin/ray\"\nvllm = \"{VENV}/bin/vllm\"\nhalobox = \"{HALOBOX}\"\n\
             timeout_s = 180\nray_args = [\"--object-store-memory=200000000\"]\n\
             ray_head_args = [\"--include-dashboard=false\"]\nssh_options = {}\n\n\
             [env]\nHF_HUB_OFFLINE = \"1\"\nVLLM_CPU_KVCACHE_SPACE = \"1\"\n",
            serde_json::to_string(&s.nodes().ssh_options()).unwrap()
        );
        cfg.push_str(&s.node_tables(Some("cpus = 1")));
        std::fs::write(&s.cfg, cfg).unwrap();
        s
    }

    /// `count` nodes with `backend` for llama.cpp: the GGUF `given` (copied
    /// to `models/`), or a random-weight Llama GGUF of `shape` made by
    /// scripts/serve/make-gguf.py.
    pub fn llama(backend: &str, count: usize, given: Option<&Path>, shape: [u32; 4]) -> Serving {
        let llama = llama_dir();
        assert!(
            llama.join("bin/llama-server").exists(),
            "{}/bin/llama-server is missing: bash scripts/llama-cpp.sh (scripts/test.sh runs it)",
            llama.display()
        );
        let mut s = Serving::start(Engine::Llama, backend, count);
        s.llama = llama.clone();
        s.model_host = s.nodes().path("models");
        std::fs::create_dir_all(&s.model_host).unwrap();
        let name = match given {
            Some(file) => {
                assert!(file.is_file(), "{}: no such file", file.display());
                let name = file.file_name().unwrap().to_string_lossy().into_owned();
                std::fs::copy(file, s.model_host.join(&name)).unwrap();
                name
            }
            None => {
                let [layers, hidden, heads, kv] = shape.map(|n| n.to_string());
                let made = Command::new(llama.join("venv/bin/python"))
                    .arg(repo("scripts/serve/make-gguf.py"))
                    .arg(s.model_host.join("random.gguf"))
                    .args(["--layers", &layers, "--hidden", &hidden])
                    .args(["--heads", &heads, "--kv-heads", &kv])
                    .output()
                    .unwrap();
                assert!(
                    made.status.success(),
                    "make-gguf.py: {}",
                    super::text(&made)
                );
                "random.gguf".into()
            }
        };
        std::fs::write(s.model_host.join("bad.gguf"), "not a gguf file\n").unwrap();
        for e in std::fs::read_dir(&s.model_host).unwrap().flatten() {
            std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        std::fs::set_permissions(&s.model_host, std::fs::Permissions::from_mode(0o755)).unwrap();
        s.model = format!("/models/{name}");
        let mut cfg = format!(
            "engine = \"llama.cpp\"\nllama_server = \"{}/bin/llama-server\"\nhalobox = \"{HALOBOX}\"\n\
             ssh_options = {}\n",
            llama.display(),
            serde_json::to_string(&s.nodes().ssh_options()).unwrap()
        );
        cfg.push_str(&s.node_tables(None));
        std::fs::write(&s.cfg, cfg).unwrap();
        s
    }

    fn start(engine: Engine, backend: &str, count: usize) -> Serving {
        assert!(
            ["podman", "docker"].contains(&backend),
            "backend {backend}: podman or docker"
        );
        assert!((1..=4).contains(&count), "{count} nodes: 1 to 4");
        let specs = vec!["9000"; count];
        let nodes = if backend == "docker" {
            let template = docker_template();
            Nodes::up_docker_from(&specs, &template)
        } else {
            Nodes::up_with_engine(&specs, backend)
        };
        let image = nodes
            .make_images("node-image.sh", HALOBOX)
            .last()
            .cloned()
            .unwrap_or_default();
        assert!(image.starts_with(&nodes.registry()), "node image: {image}");
        for d in ["state", "tmp", "logs"] {
            std::fs::create_dir_all(nodes.path(d)).unwrap();
        }
        let cfg = nodes.path("cluster.toml");
        Serving {
            nodes: Some(nodes),
            engine,
            backend: backend.into(),
            names: "abcd".chars().take(count).collect(),
            image,
            model: String::new(),
            model_host: PathBuf::new(),
            cfg,
            llama: PathBuf::new(),
            runs: Cell::new(0),
        }
    }

    /// The nodes (there until drop).
    pub fn nodes(&self) -> &Nodes {
        self.nodes.as_ref().expect("the nodes")
    }

    /// The cluster file's `[[node]]` tables, each ending in `line` if given.
    pub fn node_tables(&self, line: Option<&str>) -> String {
        let mut t = String::new();
        for &x in &self.names {
            let ip = self.ip(x);
            t.push_str(&format!(
                "\n[[node]]\nname = \"{x}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"{}\"\n",
                self.backend
            ));
            if let Some(l) = line {
                t.push_str(l);
                t.push('\n');
            }
        }
        t
    }

    /// The nodes' folder: a file in it.
    pub fn path(&self, name: &str) -> PathBuf {
        self.nodes().path(name)
    }

    /// The cluster file as an argument.
    pub fn cfg(&self) -> String {
        self.cfg.display().to_string()
    }

    /// The third byte of the nodes' addresses.
    pub fn net(&self) -> u32 {
        self.nodes().n
    }

    /// Node `x`'s data-plane address.
    pub fn ip(&self, x: char) -> String {
        self.nodes().ip(x as u32 - 'a' as u32 + 1)
    }

    /// The worker nodes (all but the head).
    pub fn workers(&self) -> Vec<char> {
        self.names[1..].to_vec()
    }

    /// `argv` on node `x` as a login there would run it (its own /root,
    /// state and temporary folders).
    pub fn on_node(&self, x: char, argv: &[&str]) -> Command {
        let mut c = self.nodes().on_node(x, argv);
        c.env("TMPDIR", self.path("tmp")).stdin(Stdio::null());
        c
    }

    /// `argv` in node `x`'s network namespace only.
    pub fn in_netns(&self, x: char, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.nodes().ns(x)])
            .args(argv)
            .stdin(Stdio::null());
        c
    }

    /// `halobox ARGS` on the head.
    pub fn hb_cmd(&self, args: &[&str]) -> Command {
        let mut argv = vec![HALOBOX];
        argv.extend_from_slice(args);
        self.on_node('a', &argv)
    }

    fn log_files(&self, name: &str) -> (PathBuf, PathBuf) {
        let k = self.runs.get() + 1;
        self.runs.set(k);
        let name: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let base = self.path("logs").join(format!("{k:03}-{name}"));
        (base.with_extension("out"), base.with_extension("err"))
    }

    /// Runs `cmd` to its end, its output in files (`logs/NNN-NAME.out`, `.err`).
    pub fn run(&self, name: &str, mut cmd: Command) -> Ran {
        self.spawn(name, &mut cmd).wait()
    }

    /// Starts `cmd`, its output in files.
    pub fn spawn(&self, name: &str, cmd: &mut Command) -> Running {
        let (out, err) = self.log_files(name);
        let child = cmd
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        Running { child, out, err }
    }

    /// The pid `cluster status` shows for node `x`'s running RPC server.
    pub fn rpc_pid(&self, x: char) -> String {
        let status = self.hb(&["cluster", "status", "--cluster", &self.cfg()]);
        status
            .out
            .lines()
            .find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.first() == Some(&x.to_string().as_str()) && w.get(2) == Some(&"running"))
                    .then(|| w.get(4).map(|p| p.trim_end_matches(',').to_string()))
                    .flatten()
            })
            .unwrap_or_else(|| {
                panic!("no pid for node {x}'s RPC server in cluster status: {status}")
            })
    }

    /// `halobox ARGS` on the head, to its end.
    pub fn hb(&self, args: &[&str]) -> Ran {
        self.run(
            args[..2.min(args.len())].join("-").as_str(),
            self.hb_cmd(args),
        )
    }

    /// `halobox ARGS` on the head with `env` set, to its end.
    pub fn hb_env(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let mut cmd = self.hb_cmd(args);
        cmd.envs(env.iter().copied());
        self.run(args[..2.min(args.len())].join("-").as_str(), cmd)
    }

    /// `halobox ARGS` on the head must fail, naming `pattern`, with a hint.
    pub fn refused(&self, what: &str, pattern: &str, args: &[&str]) {
        let r = self.hb(args);
        assert!(!r.ok(), "halobox {} accepted {what}: {r}", args[0]);
        let said = r.both();
        assert!(
            said.contains(pattern),
            "halobox {} refused {what} without naming it ({pattern:?}): {r}",
            args[0]
        );
        assert!(
            said.contains("hint:"),
            "halobox {} refused {what} without a fix: {r}",
            args[0]
        );
    }

    /// `halobox refresh` on every node at once: the engine's build and the model
    /// bound in read-only, the container named vllm.
    pub fn refresh(&self) {
        let (engine, models) = match self.engine {
            Engine::Vllm => (
                format!("{VENV}:{VENV}:ro"),
                format!("{}:{}:ro", self.model_host.display(), self.model),
            ),
            Engine::Llama => (
                format!("{0}:{0}:ro", self.llama.display()),
                format!("{}:/models:ro", self.model_host.display()),
            ),
        };
        let inductor = format!("{INDUCTOR_CACHE}:/tmp/torchinductor_root");
        let mut args = vec![
            HALOBOX,
            "refresh",
            "--backend",
            &self.backend,
            "--image",
            &self.image,
            "--memlock",
            "8M",
            "--name",
            "vllm",
            "--volume",
            &engine,
            "--volume",
            &models,
            "--yes",
        ];
        if self.engine == Engine::Vllm {
            std::fs::create_dir_all(INDUCTOR_CACHE).unwrap();
            args.extend(["--volume", &inductor]);
        }
        // Every node at once: a docker node pulls and unpacks the image
        // into its own store, which takes a loaded machine half a minute.
        let mut running = Vec::new();
        for &x in &self.names {
            let mut cmd = self.on_node(x, &args);
            running.push((x, self.spawn(&format!("refresh-{x}"), &mut cmd)));
        }
        for (x, r) in running {
            r.wait().expect_ok(&format!("refresh on node {x}"));
        }
    }

    /// `argv` in node `x`'s halobox container (`halobox enter vllm`).
    pub fn in_container(&self, x: char, argv: &[&str]) -> Ran {
        let mut all = vec![HALOBOX, "enter", "vllm", "--"];
        all.extend_from_slice(argv);
        self.run(&format!("enter-{x}"), self.on_node(x, &all))
    }

    /// The engine's own CLI against node `x`'s engine.
    pub fn engine_cli(&self, x: char, args: &[&str]) -> Ran {
        let pid = self.nodes().pid(x);
        let mut cmd = match self.backend.as_str() {
            "podman" => {
                let mut c = Command::new("podman");
                c.arg("--url")
                    .arg(format!("unix:///proc/{pid}/root/run/podman/podman.sock"));
                c
            }
            _ => {
                let mut c = Command::new("docker");
                c.arg("-H")
                    .arg(format!("unix:///proc/{pid}/root/run/docker.sock"));
                c
            }
        };
        cmd.args(args).stdin(Stdio::null());
        self.run(&format!("{}-{x}", self.backend), cmd)
    }

    /// A greedy completion from node `x`'s API on `port` (scripts/serve/
    /// complete.py for vLLM, complete-llama.py for llama-server), not
    /// waited for.
    pub fn spawn_complete(&self, x: char, port: u16, tokens: u32, key: Option<&Path>) -> Running {
        let argv = self.complete_argv(x, port, tokens, key);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        self.spawn("complete", &mut self.in_netns(x, &argv))
    }

    /// Completions of `tokens` from node `x`'s API on `port`, one after the
    /// other until killed: the engine is never idle for a second, however
    /// fast it generates (a single request ends when the context is full).
    /// Keep `tokens` small: llama-server finishes a request whose client
    /// left, so the last one must end soon after the kill.
    pub fn spawn_busy(&self, x: char, port: u16, tokens: u32, key: Option<&Path>) -> Running {
        let mut argv: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            r#"while :; do "$@" >/dev/null 2>&1; done"#.into(),
            "busy".into(),
        ];
        argv.extend(self.complete_argv(x, port, tokens, key));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut cmd = self.in_netns(x, &argv);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        self.spawn("busy", &mut cmd)
    }

    /// Waits (up to 2 min) until llama-server on node `x`'s `port` lists no
    /// slot processing a request, so a killed client's request is over.
    pub fn wait_slots_idle(&self, x: char, port: u16, key: &Path) {
        let url = format!("http://{}:{port}/slots", self.ip(x));
        let auth = format!(
            "Authorization: Bearer {}",
            std::fs::read_to_string(key).unwrap().trim()
        );
        let mut last = String::new();
        for _ in 0..240 {
            last = self
                .run(
                    "slots",
                    self.in_netns(x, &["curl", "-s", "--max-time", "2", "-H", &auth, &url]),
                )
                .out;
            if last.starts_with('[') && !last.contains(r#""is_processing":true"#) {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("llama-server's slots still busy after 2 min: {last}");
    }

    /// The completion client's argv for node `x`'s API on `port`.
    fn complete_argv(&self, x: char, port: u16, tokens: u32, key: Option<&Path>) -> Vec<String> {
        let url = format!("http://{}:{port}", self.ip(x));
        let n = tokens.to_string();
        let mut argv: Vec<String> = match self.engine {
            Engine::Vllm => vec![
                "python3".into(),
                repo("scripts/serve/complete.py").display().to_string(),
                url,
                self.model.clone(),
                PROMPT.into(),
                n,
            ],
            Engine::Llama => vec![
                "python3".into(),
                repo("scripts/serve/complete-llama.py")
                    .display()
                    .to_string(),
                url,
                PROMPT.into(),
                n,
            ],
        };
        if let Some(k) = key {
            argv.push(k.display().to_string());
        }
        argv
    }

    /// A greedy completion of `tokens` from node `x`'s API on `port`: its
    /// JSON (text, tokens, completion_tokens, secs).
    pub fn complete(&self, x: char, port: u16, tokens: u32, key: Option<&Path>) -> Value {
        let r = self.spawn_complete(x, port, tokens, key).wait();
        assert!(r.ok(), "the completion from node {x}:{port}: {r}");
        serde_json::from_str(r.out.trim()).unwrap_or_else(|e| panic!("{e}: {r}"))
    }

    /// The HTTP status of a request to node `x`'s `url_path` without a key
    /// (`body`: POST it).
    pub fn http_code(&self, x: char, port: u16, url_path: &str, body: Option<&str>) -> String {
        let url = format!("http://{}:{port}{url_path}", self.ip(x));
        let mut argv = vec!["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"];
        if let Some(b) = body {
            argv.extend(["-d", b]);
        }
        argv.push(&url);
        self.run("curl", self.in_netns(x, &argv)).out
    }

    /// Every route `routes` names (`METHOD PATH`) and, with `openapi`, every
    /// one the API's `/openapi.json` lists, asked on node `x`'s API on `port`
    /// without the key and (GET only) with the one in `key`
    /// (scripts/serve/routes.py): `(method, path, without, with)`.
    pub fn route_codes(
        &self,
        x: char,
        port: u16,
        key: &Path,
        openapi: bool,
        routes: &[&str],
    ) -> Vec<(String, String, u64, Option<u64>)> {
        let url = format!("http://{}:{port}", self.ip(x));
        let script = repo("scripts/serve/routes.py").display().to_string();
        let key = key.display().to_string();
        let mut argv = vec!["python3", script.as_str(), url.as_str(), key.as_str()];
        if openapi {
            argv.push("--openapi");
        }
        argv.extend_from_slice(routes);
        let r = self.run("routes", self.in_netns(x, &argv));
        assert!(r.ok(), "asking the routes of {url}: {r}");
        r.out
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                (
                    v["method"].as_str().unwrap_or_default().to_string(),
                    v["path"].as_str().unwrap_or_default().to_string(),
                    v["without"].as_u64().unwrap_or_default(),
                    v["with"].as_u64(),
                )
            })
            .collect()
    }

    /// Waits (up to 10 min) until node `x`'s API on `port` answers /health.
    pub fn wait_api(&self, x: char, port: u16) -> bool {
        let url = format!("http://{}:{port}/health", self.ip(x));
        for _ in 0..600 {
            let ok = self
                .in_netns(
                    x,
                    &["curl", "-sf", "-o", "/dev/null", "--max-time", "2", &url],
                )
                .status()
                .unwrap()
                .success();
            if ok {
                return true;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        false
    }

    /// The local addresses listening on TCP `port` in node `x`.
    pub fn listening(&self, x: char, port: u16) -> Vec<String> {
        let out = self
            .in_netns(x, &["ss", "-ltnH", &format!("sport = :{port}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().nth(3).map(str::to_string))
            .collect()
    }

    /// Waits (up to 10 s) until something listens on TCP `port` in node `x`.
    pub fn wait_listen(&self, x: char, port: u16) -> bool {
        for _ in 0..50 {
            if !self.listening(x, port).is_empty() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    /// A Python `script` (argv[1..] = `args`) on node `x`'s network, kept
    /// running until dropped; waited for to listen on `port`.
    pub fn hold(&self, x: char, port: u16, script: &str, args: &[&str]) -> Held {
        let mut argv = vec!["python3", "-c", script];
        argv.extend_from_slice(args);
        let child = self
            .in_netns(x, &argv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let held = Held(child);
        assert!(
            self.wait_listen(x, port),
            "the holder of port {port} on node {x} did not listen"
        );
        held
    }

    /// The command lines in node `x`'s container.
    pub fn processes(&self, x: char) -> Vec<String> {
        self.in_container(x, &["ps", "-eo", "args"])
            .out
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Panics unless, within `within`, no process in the containers of
    /// `xs` has any of `names` in its command line.
    pub fn assert_none_left(&self, xs: &[char], names: &[&str], within: Duration) {
        for &x in xs {
            let deadline = Instant::now() + within;
            loop {
                let left: Vec<String> = self
                    .processes(x)
                    .into_iter()
                    .filter(|c| names.iter().any(|n| c.contains(n)))
                    .collect();
                if left.is_empty() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "processes left on node {x}: {left:?}"
                );
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }

    /// `sh -c SCRIPT` in node `x`'s container, started in the background
    /// there (setsid) with its output in /tmp/halobox-e2e/ref.log and its
    /// pid in ref.pid: the reference server.
    pub fn start_reference(&self, x: char, command: &str) {
        let script = format!(
            "mkdir -p /tmp/halobox-e2e; setsid {command} </dev/null >/tmp/halobox-e2e/ref.log 2>&1 & echo $! >/tmp/halobox-e2e/ref.pid"
        );
        self.in_container(x, &["sh", "-c", &script])
            .expect_ok("starting the reference server");
    }

    /// The reference server's log tail.
    pub fn reference_log(&self, x: char) -> String {
        self.in_container(x, &["tail", "-n", "20", "/tmp/halobox-e2e/ref.log"])
            .out
    }

    /// Stops the reference server (its process group), then its shared memory.
    pub fn stop_reference(&self, x: char) {
        self.in_container(
            x,
            &[
                "sh",
                "-c",
                "p=$(cat /tmp/halobox-e2e/ref.pid); kill -TERM \"-$p\" 2>/dev/null; for i in $(seq 100); do kill -0 \"$p\" 2>/dev/null || break; sleep 0.2; done; kill -KILL \"-$p\" 2>/dev/null; rm -f /dev/shm/psm_*; true",
            ],
        );
    }

    /// A foreground `halobox ARGS` on the head, waited for until it prints
    /// a line starting `serving ` (within `within`).
    pub fn foreground(&self, args: &[&str], within: Duration) -> Running {
        let mut fg = self.spawn("foreground", &mut self.hb_cmd(args));
        fg.wait_for("a line starting `serving `", within, |l| {
            l.starts_with("serving ")
        });
        fg
    }
}

/// The docker data root holding the node image unpacked
/// (scripts/netns/docker-template.sh: made once, before the tests, by
/// scripts/test.sh).
fn docker_template() -> String {
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/netns/docker-template.sh"))
        .env("HALOBOX_BIN", HALOBOX)
        .output()
        .expect("run scripts/netns/docker-template.sh");
    super::ok(&out).trim().to_string()
}

/// The completions `a` and `b` gave the same tokens and text, and some.
pub fn assert_same_tokens(a: &Value, b: &Value) {
    assert!(
        a["tokens"].as_array().is_some_and(|t| !t.is_empty()),
        "no tokens: {a}"
    );
    assert_eq!(
        (&a["tokens"], &a["text"]),
        (&b["tokens"], &b["text"]),
        "different tokens:\n{a}\n{b}"
    );
}

/// Decode tokens per second of a completion (information, not asserted).
pub fn tokens_per_s(c: &Value) -> f64 {
    c["completion_tokens"].as_f64().unwrap_or(0.0) / c["secs"].as_f64().unwrap_or(f64::NAN)
}

/// Whether any file under `dir` (or `dir` itself) contains `secret`.
pub fn any_file_has(dir: &Path, secret: &str) -> bool {
    if dir.is_file() {
        return std::fs::read(dir)
            .map(|b| String::from_utf8_lossy(&b).contains(secret))
            .unwrap_or(false);
    }
    std::fs::read_dir(dir)
        .map(|d| d.flatten().any(|e| any_file_has(&e.path(), secret)))
        .unwrap_or(false)
}

/// The mode bits of `path`.
pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}
