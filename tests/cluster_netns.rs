//! `halobox cluster up/status/down` end to end on three test nodes
//! (scripts/netns/nodes.sh): network namespaces on one bridge (MTU 9000,
//! 9000 and 1500), each with its own sshd (key-only), PID and mount
//! namespace, and real Ray from PyPI through the `host` backend; and the
//! remote runner under the cluster commands (output stripped and bounded,
//! the nodes' side stopped when halobox is killed); and, on a and b's
//! links made thunderbolt-net's, `bench run --link usb4` over that link
//! alone. Needs root, iproute2, openssh-server and the Ray venv
//! (scripts/test.sh makes it: scripts/ray-venv.sh); a missing piece fails.
//! Traffic stays inside the namespaces; every process is killed at the end.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::netns::{self, sigkill, write_script};
use common::text;

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

/// Waits for `child`'s first line, which must be `ready`.
fn await_ready(child: &mut Child) {
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
}

/// Test nodes a, b, c (scripts/netns/nodes.sh).
struct Nodes {
    nodes: netns::Nodes,
}

impl Nodes {
    fn up(mtus: &[&str]) -> Nodes {
        Nodes {
            nodes: netns::Nodes::up(mtus),
        }
    }

    fn ns(&self, side: char) -> String {
        self.nodes.ns(side)
    }

    fn ip(&self, i: u32) -> String {
        self.nodes.ip(i)
    }

    /// A cluster file over the first `count` nodes, `halobox` on them.
    fn config_with(&self, count: u32, timeout_s: u32, halobox: &str, name: &str) -> PathBuf {
        let mut t = format!(
            "ray = \"{}\"\nhalobox = \"{halobox}\"\ntimeout_s = {timeout_s}\n\
             ray_args = [\"--object-store-memory=80000000\"]\n\
             ray_head_args = [\"--include-dashboard=false\"]\n\
             ssh_options = {}\n",
            ray(),
            serde_json::to_string(&self.nodes.ssh_options()).unwrap(),
        );
        for i in 1..=count {
            let name = char::from(b'a' + u8::try_from(i - 1).unwrap());
            t.push_str(&format!(
                "\n[[node]]\nname = \"{name}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"host\"\ncpus = 1\n",
                ip = self.ip(i)
            ));
        }
        let p = self.nodes.path(name);
        std::fs::write(&p, t).unwrap();
        p
    }

    /// A cluster file over the first `count` nodes.
    fn config(&self, count: u32, timeout_s: u32) -> PathBuf {
        self.config_with(
            count,
            timeout_s,
            env!("CARGO_BIN_EXE_halobox"),
            &format!("cluster{count}.toml"),
        )
    }

    /// `halobox cluster ARGS --cluster FILE`, on node a (the head), not waited for.
    fn spawn(&self, args: &[&str], file: &Path) -> Command {
        let mut all = vec!["cluster"];
        all.extend(args);
        all.extend(["--cluster", file.to_str().unwrap()]);
        self.nodes.spawn_halobox('a', &all)
    }

    /// `halobox cluster ARGS --cluster FILE`, run on node a (the head).
    fn halobox(&self, args: &[&str], file: &Path) -> Output {
        self.spawn(args, file).output().expect("run halobox")
    }

    /// Command lines of the processes on node `side` other than the node's
    /// own, waited for (bounded) to go away.
    fn ray_processes(&self, side: char) -> Vec<String> {
        self.nodes.leftovers(side, Duration::from_secs(15))
    }

    /// Kills node `side`'s sshd (its listener and sessions).
    fn kill_sshd(&self, side: char) {
        self.nodes.kill_sshd(side);
    }

    /// A process holding `port` on node a's address.
    fn hold_port(&self, port: u16) -> Child {
        let code = format!(
            "import socket,sys\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('{}',{port}))\ns.listen()\nprint('ready',flush=True)\nsys.stdin.read()",
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
        await_ready(&mut child);
        child
    }
}

impl Nodes {
    /// A gRPC server (grpcio) run as `nobody` (uid 65534) on node a's `port` that
    /// prints every call's method and metadata: a local user squatting on
    /// the head's Ray port. It answers a probe call first (so a test that
    /// finds no token in its log knows it logs calls).
    fn squat_grpc(&self, port: u16) -> Child {
        let code = r#"
import sys, grpc
from concurrent import futures
class H(grpc.GenericRpcHandler):
    def service(self, d):
        print('call', d.method, list(d.invocation_metadata), flush=True)
s = grpc.server(futures.ThreadPoolExecutor(4))
s.add_generic_rpc_handlers((H(),))
s.add_insecure_port(sys.argv[1])
s.start()
print('ready', flush=True)
sys.stdin.read()
"#;
        // grpcio comes with vLLM's venv (scripts/vllm-venv.sh), not Ray's.
        let python = PathBuf::from("/opt/halobox-vllm/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run `bash scripts/vllm-venv.sh` (as root)",
            python.display()
        );
        let addr = format!("{}:{port}", self.ip(1));
        let mut child = self
            .nodes
            .on_node(
                'a',
                &[
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    python.to_str().unwrap(),
                    "-c",
                    code,
                    &addr,
                ],
            )
            .env("HOME", "/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("nsenter");
        await_ready(&mut child);
        let probe = r#"
import sys, grpc
ch = grpc.insecure_channel(sys.argv[1])
try:
    ch.unary_unary('/probe.P/Call')(b'', metadata=(('x-probe', 'yes'),), timeout=5)
except grpc.RpcError:
    pass
"#;
        let out = self
            .nodes
            .on_node('a', &[python.to_str().unwrap(), "-c", probe, &addr])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        child
    }

    /// Everything the squatter printed, once it is stopped.
    fn squatter_log(mut child: Child) -> String {
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A Ray head run by uid 4242 on node a's port 6379, with this
    /// cluster's token (a copy that user can read), in its own temp folder;
    /// `stop` ends it.
    fn foreign_ray_head(&self, config: &Path) -> ForeignRay {
        use std::os::unix::fs::PermissionsExt;
        let dir = PathBuf::from(format!("/tmp/hb-ray-4242-{}", self.nodes.tag));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let token = dir.join("token");
        std::fs::copy(
            config.with_file_name(format!(
                "{}.ray-token",
                config.file_stem().unwrap().to_str().unwrap()
            )),
            &token,
        )
        .unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let chown = Command::new("chown")
            .args(["-R", "4242:4242"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(chown.status.success(), "{}", text(&chown));
        let r = ForeignRay {
            dir,
            ray: ray(),
            ip: self.ip(1),
        };
        let out = r
            .run(
                self,
                &[
                    "start",
                    "--head",
                    "--port=6379",
                    "--num-gpus=1",
                    "--include-dashboard=false",
                    "--disable-usage-stats",
                    "--object-store-memory=80000000",
                ],
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "uid 4242's ray start: {}", text(&out));
        r
    }
}

/// A Ray head of uid 4242's ([`Nodes::foreign_ray_head`]).
struct ForeignRay {
    dir: PathBuf,
    ray: String,
    ip: String,
}

impl ForeignRay {
    /// `ray ARGS` on node a as uid 4242, with the token and its folders.
    fn run(&self, nodes: &Nodes, args: &[&str]) -> Command {
        let mut argv = vec![
            "setpriv",
            "--reuid=4242",
            "--regid=4242",
            "--clear-groups",
            self.ray.as_str(),
        ];
        argv.extend(args);
        let temp = format!("--temp-dir={}", self.dir.join("ray").display());
        let ip = format!("--node-ip-address={}", self.ip);
        if args.first() == Some(&"start") {
            argv.push(&temp);
            argv.push(&ip);
        }
        let mut cmd = nodes.nodes.on_node('a', &argv);
        cmd.env("HOME", &self.dir)
            .env("RAY_AUTH_MODE", "token")
            .env("RAY_AUTH_TOKEN_PATH", self.dir.join("token"))
            .env("TMPDIR", &self.dir);
        cmd
    }

    /// Stops it and removes its folder.
    fn stop(self, nodes: &Nodes) {
        let out = self.run(nodes, &["stop", "--force"]).output().unwrap();
        assert!(out.status.success(), "uid 4242's ray stop: {}", text(&out));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Nodes {
    /// After `up`: the cluster's token is in one 0600 file next to the
    /// cluster file and in a 0600 file on each node, in no process's
    /// arguments and in none of `outputs`; a Ray client on the head without
    /// it is refused, one with it lists the nodes.
    fn ray_needs_the_token(&self, config: &Path, outputs: &[&str]) {
        use std::os::unix::fs::PermissionsExt;
        let kept = config.with_file_name(format!(
            "{}.ray-token",
            config.file_stem().unwrap().to_str().unwrap()
        ));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&kept), 0o600);
        let token = std::fs::read_to_string(&kept).unwrap().trim().to_string();
        assert_eq!(token.len(), 64, "{token}");
        for x in ['a', 'b'] {
            let on_node = self
                .nodes
                .path(&format!("node_{x}/root/.config/halobox/ray-auth-token"));
            assert_eq!(mode(&on_node), 0o600, "{}", on_node.display());
            assert_eq!(std::fs::read_to_string(&on_node).unwrap().trim(), token);
            let argv = self.nodes.processes_now(x);
            assert!(!argv.iter().any(|c| c.contains(&token)), "{argv:?}");
            assert!(argv.iter().any(|c| c.contains("raylet")), "{argv:?}");
        }
        for o in outputs {
            assert!(!o.contains(&token), "the token was printed: {o}");
        }
        let client = |token_file: Option<&Path>| {
            let home = self.nodes.path("client-home");
            std::fs::create_dir_all(&home).unwrap();
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &self.ns('a')])
                .arg(Path::new(&ray()).with_file_name("python"))
                .args([
                    "-c",
                    "import sys\nfrom ray._raylet import GcsClient\nn = GcsClient(address=sys.argv[1]).get_all_node_info(timeout=20)\nprint('accepted', len(n))",
                    &format!("{}:6379", self.ip(1)),
                ])
                .env("HOME", &home)
                .env_remove("RAY_AUTH_MODE")
                .env_remove("RAY_AUTH_TOKEN")
                .env_remove("RAY_AUTH_TOKEN_PATH");
            if let Some(f) = token_file {
                cmd.env("RAY_AUTH_MODE", "token")
                    .env("RAY_AUTH_TOKEN_PATH", f);
            }
            cmd.output().unwrap()
        };
        let out = client(None);
        assert!(!out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("AuthenticationError"), "{}", text(&out));
        let wrong = self.nodes.path("wrong-token");
        std::fs::write(&wrong, "0".repeat(64)).unwrap();
        let out = client(Some(&wrong));
        assert!(!out.status.success(), "{}", text(&out));
        let out = client(Some(&kept));
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("accepted 2"),
            "{}",
            text(&out)
        );
    }
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
    assert!(
        all.contains("Ray token authentication: RAY_AUTH_MODE=token")
            && all.contains("cluster2.ray-token (0600")
            && all.contains("--ray-token-stdin"),
        "{all}"
    );
    assert!(nodes.ray_processes('a').is_empty());

    // --insecure-ray is loud: a warning and a preflight finding.
    let out = nodes.halobox(&["up", "--dry-run", "--insecure-ray"], &two);
    assert!(out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("warning: --insecure-ray: Ray starts WITHOUT token authentication"),
        "{all}"
    );
    assert!(all.contains("WARN ray-auth: --insecure-ray"), "{all}");
    assert!(
        all.contains("--insecure-ray") && !all.contains("--ray-token-stdin"),
        "{all}"
    );

    // Up for real: Ray's GCS lists both nodes, each with one GPU.
    let out = nodes.halobox(&["up"], &two);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Ray lists all 2 node(s)"),
        "{}",
        text(&out)
    );
    let up_said = text(&out);
    // `status` asks Ray as a driver with the node's token.
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
    nodes.ray_needs_the_token(&two, &[&up_said, &text(&out)]);

    // A second `up` keeps the running Ray (its GCS answers this cluster's
    // token) and starts nothing.
    let out = nodes.halobox(&["up"], &two);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "Ray already runs on the head a ({}:6379) and is kept; every node is in it already",
            nodes.ip(1)
        )) && text(&out).contains("Ray lists all 2 node(s)"),
        "{}",
        text(&out)
    );
    // Node b's Ray stopped: `up` brings back only b.
    let stop = nodes
        .nodes
        .on_node('b', &[&ray(), "stop"])
        .output()
        .expect("ray stop on b");
    assert!(stop.status.success(), "{}", text(&stop));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = nodes.halobox(&["status", "--json"], &two);
        let s: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if s["alive"] == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Ray still lists b alive after `ray stop` there: {}",
            text(&out)
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    // `up` (and its dry run) keeps a's Ray and joins b alone.
    let keeps_a = |args: &[&str]| {
        let out = nodes.halobox(args, &two);
        assert!(out.status.success(), "{}", text(&out));
        let all = text(&out);
        let kept = format!("and is kept; 1 node(s) join it: b ({})", nodes.ip(2));
        assert!(
            all.contains(&kept) && !all.contains("ray start --head"),
            "{all}"
        );
        all
    };
    keeps_a(&["up", "--dry-run"]);
    let all = keeps_a(&["up"]);
    assert!(
        all.contains("1 worker(s) started") && all.contains("Ray lists all 2 node(s)"),
        "{all}"
    );

    // The head's GCS dies (its raylet and agents outlive it for a while):
    // `up` stops those stale processes on each node and starts the cluster
    // again, rather than failing on "already running".
    let kill = nodes
        .nodes
        .on_node('a', &["pkill", "-KILL", "-x", "gcs_server"])
        .output()
        .expect("pkill on a");
    assert!(kill.status.success(), "{}", text(&kill));
    let out = nodes.halobox(&["up"], &two);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("Ray's processes of a cluster that is gone still run here (raylet")
            && all.contains("Ray lists all 2 node(s)"),
        "{all}"
    );
    let out = nodes.halobox(&["status", "--json"], &two);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(s["alive"], 2, "{}", text(&out));

    // Node b's raylet dies (its container stays): `up` starts b's Ray again
    // and returns only once the GCS has marked the old raylet dead, so an
    // engine started next never reads that node's death (the GCS lists b
    // alive once, not twice).
    let kill = nodes
        .nodes
        .on_node('b', &["pkill", "-KILL", "-x", "raylet"])
        .output()
        .expect("pkill on b");
    assert!(kill.status.success(), "{}", text(&kill));
    let out = nodes.halobox(&["up"], &two);
    assert!(out.status.success(), "{}", text(&out));
    let alive_at_b = nodes
        .nodes
        .on_node(
            'a',
            &[
                "env",
                "RAY_AUTH_MODE=token",
                "RAY_AUTH_TOKEN_PATH=/root/.config/halobox/ray-auth-token",
                &Path::new(&ray()).with_file_name("python").to_string_lossy(),
                "-c",
                "import sys\nfrom ray._raylet import GcsClient\nfrom ray.core.generated import gcs_pb2\nalive = gcs_pb2.GcsNodeInfo.GcsNodeState.Value('ALIVE')\nn = GcsClient(address=sys.argv[1]).get_all_node_info(timeout=20).values()\nprint('alive at b:', sum(1 for x in n if x.state == alive and x.node_manager_address == sys.argv[2]))",
                &format!("{}:6379", nodes.ip(1)),
                &nodes.ip(2),
            ],
        )
        .output()
        .expect("the GCS's table");
    assert!(
        text(&alive_at_b).contains("alive at b: 1"),
        "{}\n(up said: {})",
        text(&alive_at_b),
        text(&out)
    );

    // The head's Ray is gone and uid 4242 starts a Ray head of its own on
    // the port, even with this cluster's token: `up` has a record (with
    // its session) but neither keeps that Ray nor sends it the token; it
    // names the holder and its user.
    let record = nodes.nodes.path("state/halobox/cluster-up.json");
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert!(
        recorded["ray_session"]
            .as_str()
            .is_some_and(|s| s.starts_with("session_")),
        "{recorded:#}"
    );
    let stop = nodes
        .nodes
        .on_node('a', &[&ray(), "stop"])
        .output()
        .expect("ray stop on a");
    assert!(stop.status.success(), "{}", text(&stop));
    let foreign = nodes.foreign_ray_head(&two);
    let out = nodes.halobox(&["up"], &two);
    let all = text(&out);
    foreign.stop(&nodes);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&format!(
            "the head a's port {}:6379 is not proven this cluster's Ray: Ray's token was not sent: port 6379 on {} is held by pid",
            nodes.ip(1),
            nodes.ip(1)
        )) && all.contains("(gcs_server, uid 4242), not by a gcs_server of this user (uid 0)"),
        "{all}"
    );
    assert!(!all.contains("is kept"), "{all}");

    // Down stops Ray on every node; no Ray process is left, nor the record
    // of the `up` that started it.
    let out = nodes.halobox(&["down"], &two);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("a: stopped"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("b: stopped"));
    for side in ['a', 'b'] {
        let left = nodes.ray_processes(side);
        assert!(left.is_empty(), "left on {side}: {left:?}");
    }
    assert!(!record.exists(), "`down` left {}", record.display());
    let out = nodes.halobox(&["status"], &two);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("0/2 node(s) alive"), "{}", text(&out));

    // A local user (nobody) squats on the head's Ray port with a gRPC
    // server that logs every call's metadata: neither `status` nor `up`
    // sends it the token (a Ray client puts it in its first call).
    let token = std::fs::read_to_string(two.with_file_name("cluster2.ray-token")).unwrap();
    let token = token.trim();
    let squatter = nodes.squat_grpc(6379);
    let status = nodes.halobox(&["status"], &two);
    let up = nodes.halobox(&["up"], &two);
    let log = Nodes::squatter_log(squatter);
    assert!(log.contains("x-probe"), "the squatter logs calls: {log}");
    assert!(
        !log.contains(token) && !log.to_lowercase().contains("authorization"),
        "the squatter got the token: {log}"
    );
    let held = format!(
        "Ray's token was not sent: port 6379 on {} is held by pid",
        nodes.ip(1)
    );
    let all = text(&status);
    assert_eq!(status.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&held) && all.contains(", uid 65534), not by a gcs_server of this user"),
        "{all}"
    );
    assert!(
        all.contains("hint: see what holds the port on the head"),
        "{all}"
    );
    let all = text(&up);
    assert_eq!(up.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&held)
            && all.contains(&format!(
                "FAIL port [a]: port 6379 on {} is already in use",
                nodes.ip(1)
            )),
        "{all}"
    );

    usb4_link_by_its_driver(&nodes, &two);

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

/// Nodes a and b's `dp0` as thunderbolt-net sees it: in each node's own
/// mount namespace, `/sys/devices/virtual/net/dp0` is covered by a copy
/// whose `device` is an XDomain service driven by `thunderbolt-net` (the
/// layout of tests/fixtures/hosts/strix-usb4). The name stays `dp0`: the
/// driver, not the name, makes it USB4. The veths keep their real MTUs, so
/// the DF-bit ping is real: 9000 holds from a to b, not to c (1500).
fn usb4_link_by_its_driver(nodes: &Nodes, two: &Path) {
    for side in ['a', 'b'] {
        let fake = nodes.nodes.path(&format!("tb-{side}"));
        let script = format!(
            "set -e; f={f}; real=/sys/devices/virtual/net/dp0; mkdir -p $f/net $f/0-1.0
             for a in mtu operstate ifindex address type; do cat $real/$a > $f/net/$a; done
             ln -s ../../bus/thunderbolt/drivers/thunderbolt-net $f/0-1.0/driver
             ln -s $f/0-1.0 $f/net/device
             mount --bind $f/net $real",
            f = fake.display()
        );
        let out = nodes
            .nodes
            .on_node(side, &["sh", "-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    let doctor = |peers: &[u32]| {
        let mut args: Vec<String> = [env!("CARGO_BIN_EXE_halobox"), "doctor", "--json", "--ip"]
            .map(String::from)
            .to_vec();
        args.push(nodes.ip(1));
        for p in peers {
            args.push("--peer".into());
            args.push(nodes.ip(*p));
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = nodes.nodes.on_node('a', &argv).output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)))
    };
    let r = doctor(&[2]);
    let check = |r: &Value, id: &str| {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(
        r["data_plane"]["usb4"]["xdomain"], "0-1",
        "{:#}",
        r["data_plane"]
    );
    assert_eq!(
        check(&r, "net.usb4")["status"],
        "PASS",
        "{:#}",
        check(&r, "net.usb4")
    );
    let jumbo = check(&r, "net.jumbo");
    assert_eq!(jumbo["status"], "PASS", "{jumbo:#}");
    assert!(
        jumbo["summary"]
            .as_str()
            .unwrap()
            .contains("ping -M do -s 8972"),
        "{jumbo:#}"
    );
    let jumbo = check(&doctor(&[2, 3]), "net.jumbo");
    assert_eq!(jumbo["status"], "FAIL", "{jumbo:#}");
    assert!(
        jumbo["summary"].as_str().unwrap().contains(&nodes.ip(3)),
        "{jumbo:#}"
    );

    // transport = "usb4": every node gets TCP sockets on its USB4 link.
    let usb4 = nodes.nodes.path("usb4.toml");
    let body = std::fs::read_to_string(two).unwrap();
    std::fs::write(&usb4, format!("transport = \"usb4\"\n{body}")).unwrap();
    let out = nodes.halobox(&["up", "--dry-run"], &usb4);
    assert!(out.status.success(), "{}", text(&out));
    let all = text(&out);
    for want in [
        "transport usb4 asked for: TCP sockets over the USB4 link dp0",
        "NCCL_SOCKET_IFNAME==dp0",
        "NCCL_IB_DISABLE=1",
    ] {
        assert!(all.contains(want), "{want} not in {all}");
    }
    assert!(!all.contains("NCCL_IB_HCA="), "{all}");
    let out = nodes.halobox(&["up"], &usb4);
    assert!(out.status.success(), "{}", text(&out));
    let out = nodes.halobox(&["status", "--json"], &usb4);
    assert!(out.status.success(), "{}", text(&out));
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["alive"], 2, "{s:#}");
    for n in s["nodes"].as_array().unwrap() {
        assert_eq!(n["env"]["transport"], "usb4", "{n:#}");
        assert_eq!(n["env"]["interface"], "dp0", "{n:#}");
    }
    let out = nodes.halobox(&["down"], &usb4);
    assert!(out.status.success(), "{}", text(&out));
    assert!(nodes.ray_processes('a').is_empty());
    bench_the_usb4_link_alone(nodes, &usb4);
    for side in ['a', 'b'] {
        let out = nodes
            .nodes
            .on_node(side, &["umount", "/sys/devices/virtual/net/dp0"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
}

/// `bench run --link usb4` from a (in its mount namespace, where dp0 is
/// thunderbolt-net's) to b over ssh: the thunderbolt-net addresses of both
/// ends, TCP legs only, the link named USB4 and judged against the public
/// figures. Shapes and units only: no rate is asserted.
fn bench_the_usb4_link_alone(nodes: &Nodes, file: &Path) {
    let save = nodes.nodes.path("bench-usb4");
    let file = file.to_str().unwrap();
    let base = [
        env!("CARGO_BIN_EXE_halobox"),
        "bench",
        "run",
        "--link",
        "usb4",
        "--cluster",
        file,
        "--on",
        "host",
        "--duration",
        "1",
        "--samples",
        "200",
        "--streams",
        "1",
    ];
    let dry: Vec<&str> = base.iter().copied().chain(["--dry-run"]).collect();
    let out = nodes.nodes.on_node('a', &dry).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains(&format!("path p0: {} → {}", nodes.ip(1), nodes.ip(2))),
        "{all}"
    );
    assert!(
        all.contains("link usb4: the thunderbolt-net addresses of both ends"),
        "{all}"
    );
    let run: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--json", "--save", save.to_str().unwrap()])
        .collect();
    let out = nodes.nodes.on_node('a', &run).output().unwrap();
    let res: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    let rows = res["rows"].as_array().unwrap();
    let latency = rows
        .iter()
        .find(|r| r["leg"] == "p0-tcp-latency")
        .unwrap_or_else(|| panic!("{res:#}"));
    assert_eq!(latency["status"], "ok", "{latency:#}");
    assert!(
        latency["latency"]["median_us"].as_f64().unwrap() > 0.0,
        "{latency:#}"
    );
    let bw = rows
        .iter()
        .find(|r| r["leg"] == "p0-tcp-bw-1")
        .unwrap_or_else(|| panic!("{res:#}"));
    assert_eq!(bw["status"], "ok", "{bw:#}");
    assert!(bw["bandwidth_gbps"].as_f64().unwrap() > 0.0, "{bw:#}");
    for r in rows
        .iter()
        .filter(|r| r["test"].as_str().unwrap().starts_with("rdma"))
    {
        assert_eq!(r["status"], "skipped", "{r:#}");
    }
    let context = res["context"][0].as_str().unwrap();
    assert!(
        context.contains("local dp0") && context.matches("USB4 (thunderbolt-net)").count() == 2,
        "{context}"
    );
    let notes: Vec<&str> = res["link_notes"]
        .as_array()
        .unwrap_or_else(|| panic!("{res:#}"))
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes[0].starts_with(
            "p0 is a USB4 link (thunderbolt-net, TCP): its rate is not in sysfs; public figures"
        ),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("p0 latency: ") && n.contains(" µs round trip (median); ")),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("p0 bandwidth: ") && n.contains(" Gb/s (the best TCP leg); ")),
        "{notes:#?}"
    );
    // Saved: the report of the folder says the same.
    let out = nodes
        .nodes
        .on_node(
            'a',
            &[
                env!("CARGO_BIN_EXE_halobox"),
                "bench",
                "report",
                save.to_str().unwrap(),
            ],
        )
        .output()
        .unwrap();
    assert!(text(&out).contains("p0 is a USB4 link"), "{}", text(&out));
}

#[test]
fn node_output_is_stripped_and_a_killed_halobox_stops_the_nodes_side() {
    let nodes = Nodes::up(&["9000", "9000"]);
    let dir = nodes.nodes.dir.path();

    // Each node's "halobox" prints 3 MB of coloured noise (1 MB without the
    // escapes, just above what is kept), then escapes, and fails: preflight
    // names the node with clean, short words.
    let noisy = write_script(
        dir,
        "noisy-halobox",
        // 17 bytes a line: 176471 whole lines.
        r"yes $(printf '\033[31mnoise\033[0m\r\007') | head -c 3000007
printf '\033]0;title\007last \033[1mwords\033[0m\r\302\205done\n'
exit 1",
    );
    let file = nodes.config_with(2, 60, noisy.to_str().unwrap(), "noisy.toml");
    let out = nodes.halobox(&["up"], &file);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    for (x, i) in [('a', 1), ('b', 2)] {
        assert!(
            all.contains(&format!(
                "FAIL reach [{x}]: node {x} (root@{}): `halobox cluster join --dry-run` failed (exit 1): noise / noise / noise / last wordsdone [halobox: ",
                nodes.ip(i)
            )),
            "{all:?}"
        );
    }
    assert!(
        !all.contains(|c: char| c.is_control() && c != '\n'),
        "control characters reached the terminal: {all:?}"
    );
    assert!(all.len() < 4000, "{} bytes: {all}", all.len());

    // A node command that hangs, and ignores SIGTERM: killing halobox
    // stops it on every node (TERM, then KILL after the grace).
    let stubborn = write_script(dir, "stubborn-halobox", "trap '' TERM\nsleep 3171 &\nwait");
    let file = nodes.config_with(2, 60, stubborn.to_str().unwrap(), "stubborn.toml");
    let mut up = nodes
        .spawn(&["up"], &file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for x in ['a', 'b'] {
        assert!(
            nodes
                .nodes
                .wait_for_process(x, "sleep 3171", Duration::from_secs(30)),
            "the command never started on {x}"
        );
    }
    sigkill(&mut up);
    for x in ['a', 'b'] {
        let left = nodes.nodes.leftovers(x, Duration::from_secs(15));
        assert!(left.is_empty(), "left on {x}: {left:?}");
    }
}

/// `sh -c SCRIPT` in node `x`'s own mounts; its stdout, after it exited 0.
fn in_mounts(nodes: &Nodes, x: char, script: &str) -> String {
    let pid = nodes.nodes.pid(x).to_string();
    let out = Command::new("nsenter")
        .args(["-t", &pid, "-m", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `cluster install` on real sshd nodes: stage, verify, keep or go back. A
/// node where the staged binary cannot run (its folder mounted noexec)
/// changes no node; then both swap (the old file kept) and `--rollback`
/// puts the old one back. A folder as the destination is refused (a rename
/// would have put the file inside it), and a node whose receiving side
/// never reads cannot hold the transfer past `--timeout`.
#[test]
fn install_refuses_a_folder_and_gives_up_on_a_node_that_stops_reading() {
    let nodes = Nodes::up(&["9000", "9000"]);
    let two = nodes.config(2, 60);
    let old = "mkdir -p /root/hb && printf '#!/bin/sh\\necho halobox old\\n' >/root/hb/halobox && chmod 755 /root/hb/halobox";
    in_mounts(&nodes, 'a', old);
    in_mounts(
        &nodes,
        'b',
        &format!("mkdir -p /root/hb && mount -t tmpfs -o noexec tmpfs /root/hb && {old}"),
    );
    let dest = ["install", "--halobox", "/root/hb/halobox"];
    let out = nodes.halobox(&dest, &two);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("verify: /root/hb/halobox.halobox-new does not run there")
            && said.contains("its old /root/hb/halobox is kept, the staged one removed: b failed")
            && said.contains("no node keeps a new one"),
        "{said}"
    );
    for x in ['a', 'b'] {
        let there = in_mounts(&nodes, x, "cat /root/hb/halobox; ls /root/hb");
        assert!(
            there.contains("echo halobox old") && !there.contains("halobox-new"),
            "{x}: {there}"
        );
    }
    in_mounts(&nodes, 'b', &format!("umount /root/hb && {old}"));
    let out = nodes.halobox(&dest, &two);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert_eq!(said.matches(" installed ").count(), 2, "{said}");
    let ours = std::fs::read(env!("CARGO_BIN_EXE_halobox")).unwrap();
    for x in ['a', 'b'] {
        assert!(
            in_mounts(&nodes, x, "cat /root/hb/halobox.halobox-prev").contains("echo halobox old")
        );
        assert_eq!(
            in_mounts(&nodes, x, "sha256sum </root/hb/halobox")
                .split(' ')
                .next(),
            Some(sha256_hex(&ours).as_str())
        );
    }
    let out = nodes.halobox(
        &["install", "--halobox", "/root/hb/halobox", "--rollback"],
        &two,
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert_eq!(said.matches(" rolled back ").count(), 2, "{said}");
    for x in ['a', 'b'] {
        assert!(in_mounts(&nodes, x, "cat /root/hb/halobox").contains("echo halobox old"));
    }

    let file = nodes.config(1, 60);
    let folder = nodes.nodes.path("node_a/root/bin");
    std::fs::create_dir_all(&folder).unwrap();
    let out = nodes.halobox(&["install", "--halobox", "/root/bin"], &file);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(
            "/root/bin is a folder there: give the file's path (--halobox /root/bin/halobox)"
        ),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);

    // The node's `head` (what receives the bytes) never reads: a tmpfs on
    // /usr/local/sbin, first in sshd's PATH, in the node's own mounts.
    let pid = nodes.nodes.pid('a').to_string();
    let ok = Command::new("nsenter")
        .args(["-t", &pid, "-m", "--", "sh", "-c"])
        .arg("mount -t tmpfs tmpfs /usr/local/sbin && printf '#!/bin/sh\\nexec sleep 3600\\n' >/usr/local/sbin/head && chmod 755 /usr/local/sbin/head")
        .status()
        .unwrap();
    assert!(ok.success());
    let t = std::time::Instant::now();
    let mut child = nodes
        .spawn(
            &[
                "install",
                "--halobox",
                "/root/bin/halobox",
                "--timeout",
                "5",
            ],
            &file,
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut waited = None;
    while t.elapsed() < Duration::from_secs(60) {
        if let Some(s) = child.try_wait().unwrap() {
            waited = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if waited.is_none() {
        sigkill(&mut child);
        panic!("cluster install still ran after 60 s with --timeout 5");
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("installing halobox did not finish within 5 s"),
        "{}",
        text(&out)
    );
    assert!(!nodes.nodes.path("node_a/root/bin/halobox").exists());
}

fn sha256_hex(bytes: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(bytes)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split(' ')
        .next()
        .unwrap()
        .to_string()
}
