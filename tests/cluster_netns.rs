//! `halobox cluster up/status/down` end to end on three test nodes: network
//! namespaces on one bridge (MTU 9000, 9000 and 1500), each with its own
//! sshd (key-only), PID and mount namespace, and real Ray from PyPI through
//! the `host` backend. Needs root, iproute2, openssh-server and the Ray venv
//! (scripts/test.sh makes it: scripts/ray-venv.sh); a missing piece fails.
//! Traffic stays inside the namespaces; every process is killed at the end.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `ray` of the test venv (HALOBOX_TEST_RAY overrides it).
fn ray() -> String {
    let ray =
        std::env::var("HALOBOX_TEST_RAY").unwrap_or_else(|_| "/opt/halobox-ray/bin/ray".into());
    assert!(
        Path::new(&ray).exists(),
        "{ray} is missing: run `bash scripts/ray-venv.sh` (as root) or set HALOBOX_TEST_RAY"
    );
    ray
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster-netns.sh")
}

/// Test nodes a, b, c; removed (with every process in them) on drop.
struct Nodes {
    tag: String,
    n: u32,
    dir: tempfile::TempDir,
}

impl Nodes {
    fn up(mtus: &[&str]) -> Nodes {
        let tag = format!("{}", std::process::id() % 100_000);
        let n = std::process::id() % 250 + 1;
        let dir = tempfile::tempdir().expect("tempdir");
        let nodes = Nodes { tag, n, dir };
        let out = Command::new("bash")
            .arg(script())
            .args(["up", &nodes.tag, &n.to_string()])
            .arg(nodes.dir.path())
            .args(mtus)
            .output()
            .expect("run scripts/cluster-netns.sh");
        assert!(
            out.status.success(),
            "scripts/cluster-netns.sh failed (run the tests as root with iproute2 and openssh-server):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        nodes
    }

    fn ns(&self, side: char) -> String {
        format!("hbc-{}-{side}", self.tag)
    }

    fn ip(&self, i: u32) -> String {
        format!("10.78.{}.{i}", self.n)
    }

    /// A cluster file over the first `count` nodes.
    fn config(&self, count: u32, timeout_s: u32) -> PathBuf {
        let d = self.dir.path().display();
        let mut t = format!(
            "ray = \"{}\"\nhalobox = \"{}\"\ntimeout_s = {timeout_s}\n\
             ray_args = [\"--object-store-memory=80000000\"]\n\
             ray_head_args = [\"--include-dashboard=false\"]\n\
             ssh_options = [\"UserKnownHostsFile={d}/known_hosts\", \"IdentityFile={d}/client_key\", \"IdentitiesOnly=yes\"]\n",
            ray(),
            env!("CARGO_BIN_EXE_halobox")
        );
        for i in 1..=count {
            let name = char::from(b'a' + u8::try_from(i - 1).unwrap());
            t.push_str(&format!(
                "\n[[node]]\nname = \"{name}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"host\"\ncpus = 1\n",
                ip = self.ip(i)
            ));
        }
        let p = self.dir.path().join(format!("cluster{count}.toml"));
        std::fs::write(&p, t).unwrap();
        p
    }

    /// `halobox cluster ARGS --cluster FILE`, run on node a (the head).
    fn halobox(&self, args: &[&str], file: &Path) -> Output {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns('a'),
                env!("CARGO_BIN_EXE_halobox"),
                "cluster",
            ])
            .args(args)
            .arg("--cluster")
            .arg(file)
            .env_remove("SSH_AUTH_SOCK")
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .output()
            .expect("run halobox")
    }

    /// Command names of the processes on node `side` other than the node's
    /// own (unshare, bash, sshd), waited for (bounded) to go away.
    fn ray_processes(&self, side: char) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let out = Command::new("ip")
                .args(["netns", "pids", &self.ns(side)])
                .output()
                .unwrap();
            let left: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).ok())
                .map(|c| c.replace('\0', " ").trim().to_string())
                .filter(|c| !c.is_empty())
                .filter(|c| {
                    !c.starts_with("unshare") && !c.starts_with("bash") && !c.contains("sshd")
                })
                .collect();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills node `side`'s sshd (its listener and sessions).
    fn kill_sshd(&self, side: char) {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.ns(side)])
            .output()
            .unwrap();
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if cmd.contains("sshd") {
                let _ = Command::new("kill").arg(pid).status();
            }
        }
    }

    /// A process holding `port` on node a's address.
    fn hold_port(&self, port: u16) -> Child {
        let code = format!(
            "import socket,sys\ns=socket.socket()\ns.bind(('{}',{port}))\ns.listen()\nprint('ready',flush=True)\nsys.stdin.read()",
            self.ip(1)
        );
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns('a'),
                "/usr/bin/python3",
                "-c",
                &code,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("/usr/bin/python3");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "ready");
        child
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

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// One test so the scenarios share the nodes and never run Ray side by side.
#[test]
fn cluster_up_status_down_and_failures() {
    let nodes = Nodes::up(&["9000", "9000", "1500"]);
    let two = nodes.config(2, 60);
    let three = nodes.config(3, 60);

    // MTU 1500 on c against 9000 on the head: preflight names c, starts nothing.
    let out = nodes.halobox(&["up"], &three);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("FAIL mtu [c]: MTU 1500 on dp0"), "{all}");
    assert!(all.contains("preflight failed (c: mtu)"), "{all}");
    assert!(
        nodes.ray_processes('a').is_empty(),
        "nothing may start after a failed preflight"
    );

    // Dry run: every node's env and the exact commands, nothing started.
    let out = nodes.halobox(&["up", "--dry-run"], &two);
    assert!(out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("NCCL_SOCKET_IFNAME==dp0"), "{all}");
    assert!(all.contains("NCCL_IB_DISABLE=1"), "{all}");
    assert!(
        all.contains(&format!("VLLM_HOST_IP={}", nodes.ip(2))),
        "{all}"
    );
    assert!(
        all.contains("auto: Ethernet (TCP over dp0) because no RDMA device is behind dp0"),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "ray start --head --port=6379 --node-ip-address={}",
            nodes.ip(1)
        )),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "ray start --address={}:6379 --node-ip-address={}",
            nodes.ip(1),
            nodes.ip(2)
        )),
        "{all}"
    );
    assert!(nodes.ray_processes('a').is_empty());

    // Up for real: Ray's GCS lists both nodes, each with one GPU.
    let out = nodes.halobox(&["up"], &two);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Ray lists all 2 node(s)"),
        "{}",
        text(&out)
    );
    let out = nodes.halobox(&["status", "--json"], &two);
    assert!(out.status.success(), "{}", text(&out));
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["alive"], 2, "{s:#}");
    for (i, n) in s["nodes"].as_array().unwrap().iter().enumerate() {
        assert_eq!(n["ip"], nodes.ip(u32::try_from(i).unwrap() + 1));
        assert_eq!(n["ray"]["resources"]["GPU"], 1.0, "{n:#}");
        assert_eq!(n["ray"]["resources"]["CPU"], 1.0, "{n:#}");
        assert_eq!(n["env"]["transport"], "ethernet", "{n:#}");
    }
    assert_eq!(s["nodes"][0]["ray"]["head"], true);

    // A second `up` finds the head's port taken (by the running Ray).
    let out = nodes.halobox(&["up"], &two);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("FAIL port [a]: port 6379 on"),
        "{}",
        text(&out)
    );

    // Down stops Ray on every node; no Ray process is left.
    let out = nodes.halobox(&["down"], &two);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("a: stopped"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("b: stopped"));
    for side in ['a', 'b'] {
        let left = nodes.ray_processes(side);
        assert!(left.is_empty(), "left on {side}: {left:?}");
    }
    let out = nodes.halobox(&["status"], &two);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("0/2 node(s) alive"), "{}", text(&out));

    // Another process holds the head's port: a clear error naming the head.
    let mut holder = nodes.hold_port(6379);
    let out = nodes.halobox(&["up"], &two);
    drop(holder.stdin.take());
    let _ = holder.wait();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains(&format!(
            "FAIL port [a]: port 6379 on {} is already in use",
            nodes.ip(1)
        )),
        "{all}"
    );
    assert!(nodes.ray_processes('a').is_empty());

    // A worker's sshd is gone: the error names that node; down reports it.
    nodes.kill_sshd('b');
    let out = nodes.halobox(&["up"], &two);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains(&format!(
            "FAIL reach [b]: node b (root@{}): cannot reach it over ssh",
            nodes.ip(2)
        )),
        "{all}"
    );
    assert!(all.contains("preflight failed (b: reach)"), "{all}");
    let out = nodes.halobox(&["down"], &two);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("a: stopped"), "{all}");
    assert!(all.contains("b: UNREACHABLE: node b"), "{all}");
    for side in ['a', 'b', 'c'] {
        let left = nodes.ray_processes(side);
        assert!(left.is_empty(), "left on {side}: {left:?}");
    }
}
