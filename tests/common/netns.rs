//! Test nodes on this machine from `scripts/netns/nodes.sh`: network
//! namespaces on one bridge, each with its own sshd, PID and mount
//! namespace, removed (with every process in them) on drop. Needs root,
//! iproute2 and openssh-server; a missing piece fails the test.

use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The harness script.
pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/netns/nodes.sh")
}

/// Nodes a, b, c, … (one per MTU given to [`Nodes::up`]).
pub struct Nodes {
    /// Names the namespaces (`hb-TAG-a`, …).
    pub tag: String,
    /// The third byte of the addresses (`10.77.N.i`).
    pub n: u32,
    /// Keys, known_hosts, sshd logs, and the tests' own files.
    pub dir: tempfile::TempDir,
}

/// Where the node registry keeps its images between runs (so the test
/// image is pushed once).
pub const REGISTRY_DATA: &str = "/var/cache/halobox-engines/node-registry";

impl Nodes {
    /// One node per MTU (`&["9000", "9000"]`: a and b).
    pub fn up(mtus: &[&str]) -> Nodes {
        Nodes::start(mtus, None, None)
    }

    /// One node per `MTU[:IFNAME]`, each a machine with its own `engine`
    /// (`podman` or `docker`), stand-in GPU and RDMA device nodes, and a
    /// registry on the bridge ([`Nodes::registry`]).
    pub fn up_with_engine(specs: &[&str], engine: &str) -> Nodes {
        Nodes::start(specs, Some(engine), None)
    }

    /// [`Nodes::up_with_engine`] with docker nodes whose data roots start
    /// as hard links to `template` (scripts/netns/docker-template.sh: the
    /// node image unpacked once), so refreshing from the node image
    /// unpacks nothing.
    pub fn up_docker_from(specs: &[&str], template: &str) -> Nodes {
        Nodes::start(specs, Some("docker"), Some(template))
    }

    fn start(specs: &[&str], engine: Option<&str>, template: Option<&str>) -> Nodes {
        let k = NEXT.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let nodes = Nodes {
            tag: format!("{}{k}", pid % 100_000),
            n: (pid * 7 + k) % 250 + 1,
            dir: tempfile::tempdir().expect("tempdir"),
        };
        let mut cmd = Command::new("bash");
        cmd.arg(script())
            .args(["up", &nodes.tag, &nodes.n.to_string()])
            .arg(nodes.dir.path())
            .args(specs);
        if let Some(e) = engine {
            cmd.env("HB_NODE_ENGINE", e)
                .env("HB_NODE_REGISTRY_DATA", REGISTRY_DATA);
        }
        if let Some(t) = template {
            cmd.env("HB_NODE_DOCKER_TEMPLATE", t);
        }
        let out = cmd.output().expect("run scripts/netns/nodes.sh");
        assert!(
            out.status.success(),
            "scripts/netns/nodes.sh failed (run the tests as root with iproute2 and openssh-server installed):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        nodes
    }

    /// Node `x`'s network namespace.
    pub fn ns(&self, x: char) -> String {
        format!("hb-{}-{x}", self.tag)
    }

    /// The address of node `i` (1 = a).
    pub fn ip(&self, i: u32) -> String {
        format!("10.77.{}.{i}", self.n)
    }

    /// A file in the nodes' folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The node registry (`HOST:PORT`), with [`Nodes::up_with_engine`].
    pub fn registry(&self) -> String {
        format!("10.77.{}.254:5000", self.n)
    }

    /// Runs `scripts/netns/SCRIPT TAG N` (an image maker for these nodes'
    /// registry) with `halobox` as the binary it packs; the lines it printed.
    pub fn make_images(&self, script: &str, halobox: &str) -> Vec<String> {
        self.make_images_with(script, halobox, &[])
    }

    /// [`Nodes::make_images`] with `more` arguments after `TAG N`.
    pub fn make_images_with(&self, script: &str, halobox: &str, more: &[&str]) -> Vec<String> {
        let out = Command::new("bash")
            .arg(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("scripts/netns")
                    .join(script),
            )
            .args([self.tag.as_str(), &self.n.to_string()])
            .args(more)
            .env("HALOBOX_BIN", halobox)
            .output()
            .unwrap_or_else(|e| panic!("run scripts/netns/{script}: {e}"));
        super::ok(&out).lines().map(str::to_string).collect()
    }

    /// Node `x`'s PID 1 as this machine sees it.
    pub fn pid(&self, x: char) -> u32 {
        std::fs::read_to_string(self.path(&format!("node_{x}.pid")))
            .expect("node pid file")
            .trim()
            .parse()
            .expect("a pid")
    }

    /// `argv` run on node `x`: in its network, mount and PID namespaces, as
    /// a login there would (its own /root, /run and engine), not waited for.
    pub fn on_node(&self, x: char, argv: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &self.pid(x).to_string(), "-m", "-p", "-n", "--"])
            .args(argv)
            .env_remove("SSH_AUTH_SOCK")
            .env_remove("CONTAINER_HOST")
            .env_remove("DOCKER_HOST")
            .env_remove("XDG_RUNTIME_DIR")
            .env("HOME", "/root")
            .env("XDG_STATE_HOME", self.path("state"));
        cmd
    }

    /// The ssh options that reach the nodes (their known_hosts and key).
    pub fn ssh_options(&self) -> Vec<String> {
        vec![
            format!("UserKnownHostsFile={}", self.path("known_hosts").display()),
            format!("IdentityFile={}", self.path("client_key").display()),
            "IdentitiesOnly=yes".into(),
        ]
    }

    /// `halobox ARGS` run on node `x` (its network only), not waited for.
    pub fn spawn_halobox(&self, x: char, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns(x), env!("CARGO_BIN_EXE_halobox")])
            .args(args)
            .env_remove("SSH_AUTH_SOCK")
            .env("XDG_STATE_HOME", self.path("state"));
        cmd
    }

    /// `halobox ARGS` run on node `x`.
    pub fn halobox(&self, x: char, args: &[&str]) -> Output {
        self.spawn_halobox(x, args).output().expect("run halobox")
    }

    /// Command lines of the processes in node `x` now, but the node's own
    /// (its PID 1 and sshd listener).
    pub fn processes_now(&self, x: char) -> Vec<String> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.ns(x)])
            .output()
            .unwrap();
        let listener = format!("{}/sshd_{x}.conf", self.dir.path().display());
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).ok())
            .map(|c| c.replace('\0', " ").trim().to_string())
            .filter(|c| {
                !c.is_empty()
                    && !c.starts_with("unshare ")
                    && !c.contains("hb-node-init")
                    && !c.contains(&listener)
            })
            .collect()
    }

    /// The processes left in node `x`, waited for (up to `within`) to go away.
    pub fn leftovers(&self, x: char, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        loop {
            let left = self.processes_now(x);
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (up to `within`) until a process on node `x` has `needle` in
    /// its command line.
    pub fn wait_for_process(&self, x: char, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.processes_now(x).iter().any(|c| c.contains(needle)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Kills node `x`'s sshd (its listener and sessions).
    pub fn kill_sshd(&self, x: char) {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.ns(x)])
            .output()
            .unwrap();
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if cmd.contains("sshd") && !cmd.contains("hb-node-init") {
                let _ = Command::new("kill").arg(pid).status();
            }
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["down", &self.tag])
            .arg(self.dir.path())
            .output();
    }
}

/// Writes an executable script `name` in `dir` that runs `body` (sh).
pub fn write_script(dir: &std::path::Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// SIGKILLs `child` (the halobox process itself: `ip netns exec` execs it).
pub fn sigkill(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
