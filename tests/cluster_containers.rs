//! The main user path, live, on test nodes that behave like machines
//! (scripts/netns/nodes.sh with an engine per node: each node's podman or
//! dockerd runs inside its namespaces, so host networking there is that
//! node's network): `halobox refresh` on every node through its own engine
//! -> `cluster up` with that backend -> Ray's GCS lists every node, whose
//! raylet runs in its container -> a Ray task pinned to each node sees that
//! node's own interface and address -> `cluster status` -> `bench run`
//! between the containers -> `cluster down` leaves no Ray process in any
//! container; and preflight naming a node whose container is missing, made
//! by hand, or stopped. For the podman, docker and toolbox backends
//! (toolbox on podman nodes). Where toolbox differs the test says so:
//! halobox is seen at /run/host/<its path> instead of a bound folder, the
//! bench ends run as the host's user (`exec -i --user 0`), the container
//! shares the node's process table (its processes are those in its
//! cgroup), and a container made by hand is `toolbox create`'s own (every
//! toolbox container has the node's /dev). The image (Debian with python3, iperf3,
//! perftest and the pinned Ray venv put in by `halobox image add-layer`) is
//! made by scripts/netns/node-image.sh. Needs root, the engines of
//! scripts/engines/start.sh, the Ray venv and the tools scripts/test.sh
//! installs; a missing piece fails.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

mod common;
use common::netns::Nodes;
use common::{ok, text};

const RAY: &str = "/opt/halobox-ray/bin/ray";
const PYTHON: &str = "/opt/halobox-ray/bin/python";
const HALOBOX: &str = env!("CARGO_BIN_EXE_halobox");

/// The test nodes and what runs on them.
struct Cluster {
    nodes: Nodes,
    /// What `refresh` makes the containers with and cluster.toml names.
    backend: &'static str,
    /// The engine of every node (toolbox runs on podman).
    engine: &'static str,
    image: String,
}

impl Cluster {
    /// Nodes a, b, c with the engine `backend` needs and different
    /// interface names; the test image in their registry.
    fn up(backend: &'static str) -> Cluster {
        let engine = if backend == "toolbox" {
            "podman"
        } else {
            backend
        };
        let nodes = Nodes::up_with_engine(&["9000", "9000:ens2", "9000:eth7"], engine);
        let lines = nodes.make_images("node-image.sh", HALOBOX);
        let image = lines.last().cloned().unwrap_or_default();
        assert!(image.starts_with(&nodes.registry()), "{lines:?}");
        if backend == "toolbox" {
            let out = nodes
                .on_node('a', &["toolbox", "--version"])
                .output()
                .expect("run toolbox on node a");
            assert!(
                out.status.success(),
                "toolbox does not run on the nodes (scripts/engines/install.sh installs podman-toolbox): {}",
                text(&out)
            );
        }
        Cluster {
            nodes,
            backend,
            engine,
            image,
        }
    }

    /// Where halobox is inside the containers: its folder bound at
    /// /run/halobox/bin (podman, docker), or the node's `/` seen at
    /// /run/host (toolbox).
    fn halobox_inside(&self) -> String {
        if self.backend == "toolbox" {
            format!(
                "/run/host{}",
                std::fs::canonicalize(HALOBOX).unwrap().display()
            )
        } else {
            "/run/halobox/bin/halobox".into()
        }
    }

    /// `podman`/`docker ARGS` (the engine's own CLI) against node `x`'s engine.
    fn engine_cli(&self, x: char, args: &[&str]) -> String {
        let pid = self.nodes.pid(x);
        let (flag, sock) = match self.engine {
            "podman" => (
                "--url",
                format!("unix:///proc/{pid}/root/run/podman/podman.sock"),
            ),
            _ => ("-H", format!("unix:///proc/{pid}/root/run/docker.sock")),
        };
        ok(&std::process::Command::new(self.engine)
            .args([flag, &sock])
            .args(args)
            .output()
            .unwrap())
    }

    /// `halobox ARGS` on node `x`.
    fn halobox(&self, x: char, args: &[&str]) -> Output {
        let mut argv = vec![HALOBOX];
        argv.extend_from_slice(args);
        self.nodes
            .on_node(x, &argv)
            .env("HF_HOME", self.nodes.path("hf"))
            .output()
            .expect("run halobox on a node")
    }

    /// `CMD` in node `x`'s container.
    fn inside(&self, x: char, cmd: &[&str]) -> Output {
        let mut args = vec!["enter", "vllm", "--"];
        args.extend_from_slice(cmd);
        self.halobox(x, &args)
    }

    fn refresh(&self, x: char) -> String {
        ok(&self.halobox(
            x,
            &[
                "refresh",
                "--backend",
                self.backend,
                "--image",
                &self.image,
                "--memlock",
                "8M",
                "--name",
                "vllm",
                "--yes",
            ],
        ))
    }

    /// A cluster file over the first `count` nodes.
    fn config(&self, count: u32) -> std::path::PathBuf {
        let mut t = format!(
            "ray = \"{RAY}\"\nhalobox = \"{HALOBOX}\"\ntimeout_s = 90\n\
             ray_args = [\"--object-store-memory=80000000\"]\n\
             ray_head_args = [\"--include-dashboard=false\"]\n\
             ssh_options = {}\n\n[env]\nNCCL_IB_TC = \"106\"\nNCCL_DEBUG = \"WARN\"\n",
            serde_json::to_string(&self.nodes.ssh_options()).unwrap(),
        );
        for i in 1..=count {
            let name = char::from(b'a' + u8::try_from(i - 1).unwrap());
            t.push_str(&format!(
                "\n[[node]]\nname = \"{name}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"{}\"\ncpus = 1\n",
                self.backend,
                ip = self.nodes.ip(i)
            ));
            // b's own NCCL_DEBUG over [env]'s: vLLM must not copy the
            // head's WARN to it.
            if name == 'b' {
                t.push_str("env = { NCCL_DEBUG = \"INFO\" }\n");
            }
        }
        let p = self.nodes.path(&format!("cluster{count}.toml"));
        std::fs::write(&p, t).unwrap();
        p
    }

    /// `halobox cluster ARGS --cluster FILE` on node a, with its own
    /// temporary directory ([`Cluster::tmp`]).
    fn cluster(&self, args: &[&str], file: &std::path::Path) -> Output {
        let mut a = vec![HALOBOX, "cluster"];
        a.extend_from_slice(args);
        a.push("--cluster");
        let f = file.display().to_string();
        a.push(&f);
        std::fs::create_dir_all(self.tmp()).unwrap();
        self.nodes
            .on_node('a', &a)
            .env("HF_HOME", self.nodes.path("hf"))
            .env("TMPDIR", self.tmp())
            .output()
            .expect("run halobox on a node")
    }

    /// The temporary directory of the `cluster` commands.
    fn tmp(&self) -> std::path::PathBuf {
        self.nodes.path("tmp")
    }

    /// Command lines of the processes in node `x`'s container. podman and
    /// docker containers have a process table of their own (`ps` there); a
    /// toolbox container shares the node's (`--pid host`), so there they
    /// are the processes in the container's cgroup, where an exec (`toolbox
    /// run`, `podman exec`) puts a command and whatever it daemonizes.
    fn container_processes(&self, x: char) -> Vec<String> {
        let out = if self.backend == "toolbox" {
            let id = self.engine_cli(x, &["container", "inspect", "--format", "{{.Id}}", "vllm"]);
            ok(&self.inside(x, &["sh", "-c", IN_CGROUP, "sh", id.trim()]))
        } else {
            ok(&self.inside(x, &["ps", "-eo", "args"]))
        };
        out.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// The Ray processes in node `x`'s container.
    fn ray_processes(&self, x: char) -> Vec<String> {
        ray_only(self.container_processes(x))
    }
}

/// The command lines of the processes whose cgroup names the container `$1`.
const IN_CGROUP: &str = r#"for p in /proc/[0-9]*; do grep -qs -- "$1" "$p/cgroup" && tr '\0' ' ' <"$p/cmdline" 2>/dev/null && echo; done; exit 0"#;

/// The lines of `lines` that are Ray's processes.
fn ray_only(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .filter(|l| {
            [
                "raylet",
                "gcs_server",
                "ray::",
                "default_worker",
                "ray/_private",
                "dashboard",
            ]
            .iter()
            .any(|k| l.contains(k))
        })
        .collect()
}

/// No ssh master connection and no socket directory of `up` is left once
/// it returned (it owns one master per node while it runs).
fn no_masters_left(c: &Cluster, after: &str) {
    let dirs: Vec<String> = std::fs::read_dir(c.tmp())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("halobox-ssh-"))
        .collect();
    assert!(dirs.is_empty(), "left after {after}: {dirs:?}");
    // `-O exit` has been asked for; the master ends a moment later.
    let list = || -> Vec<String> {
        let ps = std::process::Command::new("ps")
            .args(["-eo", "args"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&ps.stdout)
            .lines()
            .filter(|l| {
                l.contains("ControlMaster=")
                    && (1..=3).any(|i| l.contains(&format!("root@{}", c.nodes.ip(i))))
            })
            .map(str::to_string)
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let mut masters = list();
    while !masters.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        masters = list();
    }
    assert!(masters.is_empty(), "left after {after}: {masters:?}");
}

/// Run on the head with the head's env (as `halobox serve` runs vLLM):
/// one task pinned to each alive node returns the env it runs with, three
/// times: with nothing carried from the driver ("own": what that node's
/// own join gave its raylet), with the driver's env carried the way vLLM
/// does it ("vllm": everything but the names in the head's
/// ray_non_carry_over_env_vars.json, which vLLM reads where its driver
/// runs), and carrying everything ("carry-all": vLLM without the file).
const PINNED_PY: &str = r#"
import json, os, sys, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
NAMES = ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "VLLM_HOST_IP", "NCCL_IB_TC", "NCCL_DEBUG",
         "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES"]
path = os.path.expanduser("~/.config/vllm/ray_non_carry_over_env_vars.json")
skip = set(json.load(open(path)))
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
@ray.remote(num_cpus=0)
def env():
    return dict({k: os.environ.get(k) for k in NAMES}, ip=ray.util.get_node_ip_address())
out = {}
for mode in ("own", "vllm", "carry-all"):
    out[mode] = []
    for n in ray.nodes():
        if not n["Alive"]:
            continue
        opts = dict(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
        if mode != "own":
            opts["runtime_env"] = {"env_vars": {k: os.environ[k] for k in NAMES
                                                if k in os.environ and (mode == "carry-all" or k not in skip)}}
        out[mode].append(ray.get(env.options(**opts).remote()))
print(json.dumps(out))
"#;

fn var<'a>(node_env: &'a Value, name: &str) -> &'a str {
    node_env["vars"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .and_then(|v| v["value"].as_str())
        .unwrap_or_else(|| panic!("no {name} in {node_env:#}"))
}

/// The whole path with containers of `backend` (podman, docker, toolbox).
fn main_path(backend: &'static str) {
    let c = Cluster::up(backend);
    let nodes = &c.nodes;
    let inside = c.halobox_inside();
    for x in ['a', 'b'] {
        c.refresh(x);
    }
    if backend == "toolbox" {
        // The container shares node b's process table (`ps` there shows
        // the node's sshd); its cgroup holds only its own processes
        // (toolbx's init-container), which is what "in the container"
        // means below.
        let table = ok(&c.inside('b', &["ps", "-eo", "args"]));
        assert!(table.contains("sshd"), "{table}");
        let own = c.container_processes('b');
        assert!(own.iter().any(|p| p.contains("init-container")), "{own:?}");
        assert!(!own.iter().any(|p| p.contains("sshd")), "{own:?}");
    }
    // Host networking on node b is node b's network: only its interface
    // and address, seen by halobox inside the container.
    let out = ok(&c.inside('b', &["ls", "/sys/class/net"]));
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["ens2", "lo"]);
    let out = ok(&c.inside('b', &[&inside, "bench", "probe", "--ip", &nodes.ip(2)]));
    let probe: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(probe["interface"], "ens2", "{probe:#}");
    assert_eq!(probe["iperf3"], true);
    assert_eq!(probe["perftest"], true);

    let two = c.config(2);
    let three = c.config(3);
    // What join will do on b, as the container sees it.
    let out = c.halobox(
        'b',
        &[
            "cluster",
            "join",
            "--head",
            &nodes.ip(1),
            "--ip",
            &nodes.ip(2),
            "--backend",
            backend,
            "--container",
            "vllm",
            "--ray",
            RAY,
            "--env",
            "NCCL_IB_TC=106",
            "--env",
            "NCCL_DEBUG=WARN",
            "--node-env",
            "NCCL_DEBUG=INFO",
            "--per-node-name",
            "NCCL_DEBUG",
            "--dry-run",
        ],
    );
    let dry = ok(&out);
    for want in [
        "NCCL_SOCKET_IFNAME==ens2\n",
        "GLOO_SOCKET_IFNAME=ens2\n",
        "NCCL_IB_DISABLE=1\n",
        "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1\n",
        "NCCL_IB_TC=106\n",
        "NCCL_DEBUG=INFO\n",
        "# per node (vLLM must not copy the head's): NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME NCCL_IB_HCA NCCL_IB_GID_INDEX NCCL_IB_DISABLE VLLM_HOST_IP NCCL_DEBUG\n",
        format!("halobox inside: {inside}").as_str(),
        "# in vllm: GPU: /dev/kfd (0666); render: /dev/dri/renderD128 (0666)\n",
        "# in vllm: RDMA: /dev/infiniband/uverbs0 (0666)\n",
        "# in vllm: RDMA ports: none in /sys/class/infiniband\n",
        "# vLLM's list of per-node variables: /root/.config/vllm/ray_non_carry_over_env_vars.json\n",
        format!("-- {inside} cluster join").as_str(),
    ] {
        assert!(dry.contains(want), "{want:?} not in:\n{dry}");
    }
    assert!(dry.contains("memlock 8192 KiB"), "{dry}");
    assert!(!dry.contains("NCCL_DEBUG=WARN\n"), "b's own wins: {dry}");

    // Up: preflight from inside every container, then Ray in them.
    let out = c.cluster(&["up"], &two);
    let up = ok(&out);
    assert!(up.contains("Ray lists all 2 node(s)"), "{up}");
    no_masters_left(&c, "up");
    // Made with a memlock limit below unlimited: named with the fix (a
    // warning over TCP; a failure when the cluster uses RDMA).
    for x in ['a', 'b'] {
        assert!(
            up.contains(&format!("WARN memlock [{x}]: memlock is 8388608 bytes in container vllm: RDMA needs it unlimited (`halobox refresh --name vllm` on that node sets it)")),
            "{up}"
        );
    }
    for x in ['a', 'b'] {
        let ray = c.ray_processes(x);
        assert!(
            ray.iter().any(|p| p.contains("raylet")),
            "no raylet in node {x}'s container: {ray:?}"
        );
        let list = ok(&c.inside(
            x,
            &["cat", "/root/.config/vllm/ray_non_carry_over_env_vars.json"],
        ));
        let names: Vec<String> = serde_json::from_str(&list).unwrap();
        // The head's list too names b's own NCCL_DEBUG: vLLM reads the
        // list where its driver runs.
        for n in [
            "NCCL_SOCKET_IFNAME",
            "GLOO_SOCKET_IFNAME",
            "VLLM_HOST_IP",
            "NCCL_DEBUG",
        ] {
            assert!(names.contains(&n.to_string()), "{x}: {names:?}");
        }
        assert!(!names.contains(&"NCCL_IB_TC".to_string()), "{x}: {names:?}");
    }
    // The head's Ray is in node a's container only: node a's host has none.
    let out = c.cluster(&["status", "--json"], &two);
    let status: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(status["alive"], 2, "{status:#}");
    let head_env = &status["nodes"][0]["env"];
    assert_eq!(var(head_env, "NCCL_SOCKET_IFNAME"), "=dp0");
    assert_eq!(
        var(&status["nodes"][1]["env"], "NCCL_SOCKET_IFNAME"),
        "=ens2"
    );

    // A task pinned to each node sees that node's own values; carrying the
    // head's env without vLLM's list would have overwritten them.
    // It is a Ray driver like vLLM: with the token `cluster up` left in the
    // container.
    let mut driver: Vec<String> = vec!["env".into()];
    driver.extend(head_env["vars"].as_array().unwrap().iter().map(|v| {
        format!(
            "{}={}",
            v["name"].as_str().unwrap(),
            v["value"].as_str().unwrap()
        )
    }));
    driver.extend([
        PYTHON.to_string(),
        "-c".into(),
        PINNED_PY.into(),
        format!("{}:6379", nodes.ip(1)),
    ]);
    let mut argv: Vec<String> = vec!["enter".into(), "vllm".into(), "--".into()];
    argv.extend(halobox::cluster::auth::driver_argv(&driver, None));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = ok(&c.halobox('a', &argv));
    let seen: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let by_ip = |mode: &str, i: u32| -> Value {
        seen[mode]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["ip"] == nodes.ip(i))
            .cloned()
            .unwrap_or_else(|| panic!("no task ran on {}: {seen:#}", nodes.ip(i)))
    };
    // Nothing carried: what each node's own join gave its raylet, [env]
    // (NCCL_IB_TC, the head's NCCL_DEBUG) and halobox's switches included.
    let (a, b) = (by_ip("own", 1), by_ip("own", 2));
    for (e, ifname, ip, debug) in [
        (&a, "dp0", nodes.ip(1), "WARN"),
        (&b, "ens2", nodes.ip(2), "INFO"),
    ] {
        assert_eq!(e["NCCL_SOCKET_IFNAME"], format!("={ifname}"), "{seen:#}");
        assert_eq!(e["GLOO_SOCKET_IFNAME"], ifname, "{seen:#}");
        assert_eq!(e["VLLM_HOST_IP"], ip, "{seen:#}");
        assert_eq!(e["NCCL_DEBUG"], debug, "{seen:#}");
        assert_eq!(e["NCCL_IB_TC"], "106", "{seen:#}");
        assert_eq!(
            e["RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"], "1",
            "{seen:#}"
        );
        assert_eq!(
            e["RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES"], "1",
            "{seen:#}"
        );
    }
    // As vLLM carries the head's env: every name on the head's list keeps
    // each node's own value, b's NCCL_DEBUG included. (NCCL_IB_TC and the
    // NOSET switches are not on the list: here b gets the head's values,
    // so they are checked above, not here.)
    let (a, b) = (by_ip("vllm", 1), by_ip("vllm", 2));
    for (e, ifname, ip, debug) in [
        (&a, "dp0", nodes.ip(1), "WARN"),
        (&b, "ens2", nodes.ip(2), "INFO"),
    ] {
        assert_eq!(e["NCCL_SOCKET_IFNAME"], format!("={ifname}"), "{seen:#}");
        assert_eq!(e["GLOO_SOCKET_IFNAME"], ifname, "{seen:#}");
        assert_eq!(e["VLLM_HOST_IP"], ip, "{seen:#}");
        assert_eq!(e["NCCL_DEBUG"], debug, "{seen:#}");
    }
    // Without the list the head's values reach b.
    let carried = by_ip("carry-all", 2);
    for (name, head) in [
        ("NCCL_SOCKET_IFNAME", "=dp0".to_string()),
        ("GLOO_SOCKET_IFNAME", "dp0".to_string()),
        ("VLLM_HOST_IP", nodes.ip(1)),
        ("NCCL_DEBUG", "WARN".to_string()),
    ] {
        assert_eq!(
            carried[name], head,
            "without the list the head's {name} reaches b: {seen:#}"
        );
    }

    // A short bench run from a to b, saved in `save`, and the commands its
    // legs ran (run.json).
    let bench_ab = |save: &std::path::Path, more: &[&str]| -> Output {
        let mut a = vec![
            "bench",
            "run",
            "--cluster",
            two.to_str().unwrap(),
            "--peer-node",
            "b",
            "--duration",
            "1",
            "--streams",
            "2",
            "--samples",
            "200",
            "--save",
            save.to_str().unwrap(),
        ];
        a.extend_from_slice(more);
        c.halobox('a', &a)
    };
    let leg_commands = |save: &std::path::Path| -> String {
        let run: Value =
            serde_json::from_str(&std::fs::read_to_string(save.join("run.json")).unwrap()).unwrap();
        run["paths"][0]["legs"].to_string()
    };

    // bench run from a to b: by default both ends run in the containers;
    // TCP and iperf3 there, and the RDMA leg's real no-device diagnosis.
    let save = nodes.path("bench");
    let out = bench_ab(&save, &["--rdma", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "only the RDMA legs fail: {}",
        text(&out)
    );
    let res: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    assert_eq!(
        res["ran_in"],
        format!("this node: container vllm ({backend}); peer: container vllm"),
        "{res:#}"
    );
    for r in res["rows"].as_array().unwrap() {
        let leg = r["leg"].as_str().unwrap();
        if leg.contains("ib_write") {
            assert_eq!(r["status"], "failed", "{r}");
            assert_eq!(r["diagnosis"]["cause"], "no_device", "{r}");
        } else {
            assert_eq!(r["status"], "ok", "{r}");
        }
    }
    // The report says so too.
    let out = c.halobox('a', &["bench", "report", save.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!(
            "\n  ran in: this node: container vllm ({backend}); peer: container vllm\n"
        )),
        "{}",
        text(&out)
    );
    let commands = leg_commands(&save);
    for want in [
        "bench exec --container vllm -- halobox bench serve",
        "bench exec --container vllm -- iperf3 -s",
        "bench exec --container vllm -- ib_write_lat",
        // In a toolbox container the bench ends run as the host's user
        // (uid 0 here), as `toolbox run` would run them.
        if backend == "toolbox" {
            "exec -i --user 0 vllm setsid -w sh -c"
        } else {
            "exec -i vllm setsid -w sh -c"
        },
        format!("{inside} bench client --to").as_str(),
    ] {
        assert!(commands.contains(want), "{want:?} not in {commands}");
    }
    for x in ['a', 'b'] {
        let left: Vec<String> = c
            .container_processes(x)
            .into_iter()
            .filter(|l| {
                ["iperf3", "ib_write", "bench serve", "bench client"]
                    .iter()
                    .any(|k| l.contains(k))
            })
            .collect();
        assert!(left.is_empty(), "left in {x}'s container: {left:?}");
    }

    // --on host: both ends on the hosts although the containers are there,
    // and the report says so.
    let host_save = nodes.path("bench-host");
    let report = ok(&bench_ab(&host_save, &["--on", "host", "--no-rdma"]));
    assert!(
        report.contains("\n  ran in: this node: host; peer: host\n"),
        "{report}"
    );
    let commands = leg_commands(&host_save);
    assert!(
        commands.contains(&format!("{HALOBOX} bench serve"))
            && !commands.contains("bench exec")
            && !commands.contains(" exec -i "),
        "{commands}"
    );

    // A second up finds the head's port taken from inside the container,
    // by this cluster's Ray (its GCS answers the node's token): kept.
    let out = c.cluster(&["up"], &two);
    let all = ok(&out);
    assert!(
        all.contains("and is kept; every node is in it already")
            && all.contains("Ray lists all 2 node(s)"),
        "{all}"
    );

    // Down: no Ray process is left in any container, nor anywhere else on
    // the node.
    let out = c.cluster(&["down"], &two);
    let down = ok(&out);
    assert!(
        down.contains("a: stopped") && down.contains("b: stopped"),
        "{down}"
    );
    for x in ['a', 'b'] {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut left = c.ray_processes(x);
        while !left.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            left = c.ray_processes(x);
        }
        assert!(left.is_empty(), "left in {x}'s container: {left:?}");
        let left = ray_only(nodes.processes_now(x));
        assert!(left.is_empty(), "left on node {x}: {left:?}");
    }

    // Preflight names node c: no container, then one made by hand, then
    // that one stopped. Nothing starts.
    let out = c.cluster(&["up"], &three);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("FAIL container [c]: there is no container vllm: create it with `halobox refresh --name vllm` on that node"),
        "{}",
        text(&out)
    );
    // bench run on node c, whose Ray cluster.toml puts in a container it
    // does not have: an error with the fix, not the hosts' numbers.
    let out = c.halobox(
        'c',
        &[
            "bench",
            "run",
            "--cluster",
            three.to_str().unwrap(),
            "--peer-node",
            "a",
            "--dry-run",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "there is no container vllm on this node ({} runs this node's Ray in its {backend} container vllm)\n  hint: create it with `halobox refresh --name vllm`, or pass --on host"
        , three.display())),
        "{}",
        text(&out)
    );
    if backend == "toolbox" {
        by_hand_toolbox(&c);
    } else {
        by_hand_without_devices(&c);
    }
    no_masters_left(&c, "a failed preflight");
    // That container stopped: `up --dry-run` says it starts it first (and
    // does not); `up` starts it, then its preflight names the same fault.
    c.engine_cli('c', &["stop", "-t", "0", "vllm"]);
    let out = c.cluster(&["up", "--dry-run"], &three);
    let all = text(&out);
    assert!(
        all.contains(
            "WARN container [c]: container vllm is exited: `halobox cluster up` starts it first"
        ) && all.contains(&format!(
            "node c ({}): container vllm is exited: started first",
            c.nodes.ip(3)
        )),
        "{all}"
    );
    assert_eq!(
        c.engine_cli('c', &["inspect", "-f", "{{.State.Status}}", "vllm"])
            .trim(),
        "exited"
    );
    let out = c.cluster(&["up"], &three);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains(&format!(
            "node c ({}): container vllm was exited: started",
            c.nodes.ip(3)
        )) && all.contains(if backend == "toolbox" {
            "FAIL image [c]"
        } else {
            "FAIL devices [c]"
        }),
        "{all}"
    );
    assert_eq!(
        c.engine_cli('c', &["inspect", "-f", "{{.State.Status}}", "vllm"])
            .trim(),
        "running"
    );
    for x in ['a', 'b'] {
        assert!(
            c.ray_processes(x).is_empty(),
            "a failed preflight started Ray on {x}"
        );
    }
}

/// A podman/docker container made by hand on node c with halobox bound in
/// but no devices or memlock: preflight names the devices.
fn by_hand_without_devices(c: &Cluster) {
    let bin_dir = std::fs::canonicalize(HALOBOX)
        .unwrap()
        .parent()
        .unwrap()
        .display()
        .to_string();
    c.engine_cli(
        'c',
        &[
            "run",
            "-d",
            "--name",
            "vllm",
            "--network",
            "host",
            "--label",
            "dev.halobox.managed=true",
            "--label",
            "dev.halobox.halobox=/run/halobox/bin/halobox",
            "-v",
            &format!("{bin_dir}:/run/halobox/bin:ro"),
            &c.image,
            "sleep",
            "infinity",
        ],
    );
    let out = c.cluster(&["up"], &c.config(3));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("FAIL devices [c]: /dev/kfd is not in container vllm (made without the GPU devices?): vLLM will not see the GPU; `halobox refresh --name vllm` on that node"),
        "{all}"
    );
    assert!(
        all.contains("WARN rdma [c]: /dev/infiniband/uverbs0 of the node not in container vllm"),
        "{all}"
    );
    assert!(all.contains("preflight failed (c: devices"), "{all}");
}

/// A toolbox container made by hand on node c: every toolbox container
/// binds the node's whole /dev and sees halobox at /run/host, so the one a
/// user makes with `toolbox create` itself (as the community scripts do)
/// is the case: created but not started, then started, without halobox's
/// image label and with the node's own memlock limit.
fn by_hand_toolbox(c: &Cluster) {
    c.engine_cli('c', &["pull", "-q", &c.image]);
    // `toolbox create` takes the user's shell from $SHELL, which a login
    // session has and a CI job may not.
    ok(&c
        .nodes
        .on_node(
            'c',
            &["toolbox", "-y", "create", "-c", "vllm", "-i", &c.image],
        )
        .env("SHELL", "/bin/bash")
        .output()
        .unwrap());
    let three = c.config(3);
    let out = c.cluster(&["up"], &three);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains(&format!(
            "node c ({}): container vllm was created: started",
            c.nodes.ip(3)
        )),
        "{all}"
    );
    assert!(
        all.contains(
            "FAIL image [c]: its container runs image without a digest label, a runs sha256:"
        ),
        "{all}"
    );
    assert!(all.contains("preflight failed (c: image)"), "{all}");
}

#[test]
fn podman_nodes_refresh_up_status_down() {
    main_path("podman");
}

#[test]
fn docker_nodes_refresh_up_status_down() {
    main_path("docker");
}

/// toolbox runs on podman nodes (toolbx needs podman).
#[test]
fn toolbox_nodes_refresh_up_status_down() {
    main_path("toolbox");
}
