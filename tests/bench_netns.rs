//! `halobox bench run` end to end between two test nodes on this machine
//! (scripts/netns/nodes.sh: network namespaces on a bridge, MTU 9000,
//! private addresses that exist only inside the namespaces), with the
//! peer's side started over a real sshd on the peer node; and what every
//! remote command gets from the remote runner: host keys checked, output
//! stripped and bounded, the remote side stopped when halobox goes away. Needs root, iproute2, openssh-server, iperf3 and perftest
//! (scripts/test.sh installs them); a missing piece fails the test.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::netns::{Nodes, sigkill, write_script};

/// Nodes a (this side) and b (the peer).
struct Hosts {
    nodes: Nodes,
}

impl Hosts {
    fn up() -> Hosts {
        Hosts {
            nodes: Nodes::up(&["9000", "9000"]),
        }
    }

    fn ip(&self, host: u32) -> String {
        self.nodes.ip(host)
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.nodes.path(name)
    }

    /// `halobox bench run …` from node a against `peer_ip`, with `options`
    /// as --ssh-option and `halobox` on the peer.
    fn bench_cmd(
        &self,
        peer_ip: &str,
        options: &[String],
        halobox: &str,
        extra: &[&str],
    ) -> Command {
        let peer = format!("root@{peer_ip}");
        // These nodes have no container engine of their own: both ends on the hosts.
        let mut args = vec![
            "bench",
            "run",
            "--on",
            "host",
            "--peer",
            &peer,
            "--peer-ip",
            peer_ip,
        ];
        args.extend(["--peer-halobox", halobox]);
        for o in options {
            args.extend(["--ssh-option", o]);
        }
        args.extend(extra);
        self.nodes.spawn_halobox('a', &args)
    }

    /// `halobox bench run …` from node a against the sshd at `peer_ip`.
    fn bench(&self, peer_ip: &str, extra: &[&str]) -> Output {
        self.bench_cmd(
            peer_ip,
            &self.nodes.ssh_options(),
            env!("CARGO_BIN_EXE_halobox"),
            extra,
        )
        .output()
        .expect("run halobox")
    }

    /// A cluster file with both nodes and `ssh_options`.
    fn cluster_file(&self, name: &str, ssh_options: &[String]) -> std::path::PathBuf {
        let file = self.path(name);
        std::fs::write(
            &file,
            format!(
                "halobox = \"{}\"\nssh_options = {}\n\
                 [[node]]\nname = \"a\"\nssh = \"root@{a}\"\nip = \"{a}\"\nbackend = \"host\"\n\
                 [[node]]\nname = \"b\"\nssh = \"root@{b}\"\nip = \"{b}\"\nbackend = \"host\"\n",
                env!("CARGO_BIN_EXE_halobox"),
                serde_json::to_string(ssh_options).unwrap(),
                a = self.ip(1),
                b = self.ip(2),
            ),
        )
        .unwrap();
        file
    }

    /// `halobox bench run --cluster FILE …` from node a: both nodes in
    /// a cluster file, the peer (b) and this machine (a) found from it.
    fn bench_via_cluster(&self, extra: &[&str]) -> Output {
        let file = self.cluster_file("cluster.toml", &self.nodes.ssh_options());
        let mut args = vec!["bench", "run", "--cluster", file.to_str().unwrap()];
        args.extend(extra);
        self.nodes.halobox('a', &args)
    }

    /// Processes left on the peer (b), waited for (bounded) to go away.
    fn leftovers_in_peer(&self) -> Vec<String> {
        self.nodes.leftovers('b', Duration::from_secs(10))
    }
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}):\nstdout:\n{}\nstderr:\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

fn rows<'a>(res: &'a Value, leg_part: &str) -> Vec<&'a Value> {
    res["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["leg"].as_str().unwrap().contains(leg_part))
        .collect()
}

#[test]
fn tcp_leg_between_namespaces_over_real_sshd() {
    let hosts = Hosts::up();
    let peer = hosts.ip(2);
    let save = hosts.path("run1");
    let save_s = save.to_str().unwrap();
    let out = hosts.bench(
        &peer,
        &[
            "--save",
            save_s,
            "--duration",
            "2",
            "--streams",
            "2",
            "--samples",
            "3000",
            "--json",
        ],
    );
    let res = json(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr:\n{}\n{res:#}",
        text(&out.stderr)
    );

    // Latency: half round trips, ordered percentiles, sane for a veth.
    let l = &rows(&res, "tcp-latency")[0];
    assert_eq!(l["status"], "ok");
    let lat = &l["latency"];
    let get = |k: &str| lat[k].as_f64().unwrap_or_else(|| panic!("{k} in {lat}"));
    let (min, med, p99, p999, max) = (
        get("min_us"),
        get("median_us"),
        get("p99_us"),
        get("p999_us"),
        get("max_us"),
    );
    assert!(
        min > 0.0 && min <= med && med <= p99 && p99 <= p999 && p999 <= max,
        "{lat}"
    );
    assert!(lat["samples"].as_u64().unwrap() >= 100);

    // Bandwidth with 1 and 2 streams, and iperf3 as a cross-check.
    for leg in ["tcp-bw-1", "tcp-bw-2", "iperf3-1", "iperf3-2"] {
        let r = &rows(&res, leg)[0];
        assert_eq!(r["status"], "ok", "{leg}: {r}");
        let g = r["bandwidth_gbps"].as_f64().unwrap();
        assert!(g.is_finite() && g > 0.0, "{leg}: {g} Gb/s");
    }
    // No RDMA device here: the RDMA leg is skipped with the reason.
    for r in rows(&res, "ib_write") {
        assert_eq!(r["status"], "skipped", "{r}");
        assert!(
            r["note"].as_str().unwrap().contains("no RDMA device"),
            "{r}"
        );
    }
    // The raw logs are there, and a re-render gives the same results.
    for f in [
        "run.json",
        "results.json",
        "p0-tcp-latency.txt",
        "p0-tcp-bw-2.txt",
        "p0-iperf3-1.json",
        "p0-tcp.server.txt",
    ] {
        assert!(save.join(f).is_file(), "{f} not saved");
    }
    // The server listened on the peer's address only, and its stop token
    // (read from its ready line) is not kept in the saved log.
    let server_log = std::fs::read_to_string(save.join("p0-tcp.server.txt")).unwrap();
    assert!(server_log.contains(" stop-token ********"), "{server_log}");
    assert!(!server_log.contains("listening on 0.0.0.0"), "{server_log}");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(save.join("results.json")).unwrap()).unwrap();
    assert_eq!(saved, res);
    let again = common::run(&["bench", "report", save_s, "--json"]);
    assert_eq!(json(&again), res);
    let t1 = common::run(&["bench", "report", save_s]);
    let t2 = common::run(&["bench", "report", save_s]);
    assert_eq!(t1.stdout, t2.stdout);
    assert!(
        text(&t1.stdout).contains("tcp iperf3 x2"),
        "{}",
        text(&t1.stdout)
    );

    // Nothing left running on the peer.
    assert_eq!(hosts.leftovers_in_peer(), Vec::<String>::new());

    // Forcing the RDMA leg runs the real perftest on both ends over ssh and
    // diagnoses the missing device instead of printing 0.00. This run takes
    // the peer from a cluster file instead of flags.
    let save2 = hosts.path("run2");
    let out = hosts.bench_via_cluster(&[
        "--save",
        save2.to_str().unwrap(),
        "--duration",
        "1",
        "--streams",
        "1",
        "--samples",
        "200",
        "--rdma",
        "--json",
    ]);
    let res2 = json(&out);
    assert_eq!(out.status.code(), Some(1), "{res2:#}");
    assert_eq!(res2["peer"], format!("root@{peer}"));
    let run2: Value =
        serde_json::from_str(&std::fs::read_to_string(save2.join("run.json")).unwrap()).unwrap();
    let from = run2["options"]["peer_from"].as_str().unwrap();
    assert!(
        from.contains("node b of")
            && from.contains(&format!("this machine is a: dp0 holds {}", hosts.ip(1))),
        "{from}"
    );
    assert_eq!(run2["paths"][0]["local_ip"], hosts.ip(1));
    // No RDMA device: the counters around the RDMA leg are "not present" on
    // both ends, which is no failure of its own.
    let counters = res2["counters"].as_array().unwrap();
    assert_eq!(counters.len(), 2, "{res2:#}");
    for c in counters {
        assert_eq!(c["present"], false, "{c}");
        assert_eq!(c["diagnosis"], "counters: not present", "{c}");
    }
    let rdma = rows(&res2, "ib_write");
    assert_eq!(rdma.len(), 2);
    for r in rdma {
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(r["diagnosis"]["cause"], "no_device", "{r}");
        assert!(r["bandwidth_gbps"].is_null() && r["latency"].is_null());
    }
    assert_eq!(hosts.leftovers_in_peer(), Vec::<String>::new());

    let cmp = common::run(&["bench", "compare", save_s, save2.to_str().unwrap()]);
    assert!(cmp.status.success());
    let cmp = text(&cmp.stdout);
    assert!(
        cmp.contains("p0-tcp-latency") && cmp.contains("lat median µs") && cmp.contains('%'),
        "{cmp}"
    );
}

#[test]
fn unreachable_peer_is_named_with_the_fix() {
    let hosts = Hosts::up();
    // In the namespace's /24 but nobody has it: ssh fails, halobox says so.
    let nobody = hosts.ip(3);
    let out = hosts.bench(&nobody, &["--save", hosts.path("none").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("the peer root@{nobody}: cannot reach it over ssh")),
        "{err}"
    );
    assert!(
        err.contains("hint:") && err.contains("BatchMode=yes"),
        "{err}"
    );
    assert!(
        !Path::new(&hosts.path("none")).exists(),
        "nothing is saved when the peer is unreachable"
    );
}

/// A cluster file that runs this node's Ray in a podman container asks for
/// the container's numbers: with its engine unreachable `bench run` stops
/// and says so (host numbers would be measured where RCCL does not run),
/// `--on host` measures the hosts and the plan says so. Without a cluster
/// file naming a container, the hosts are measured and the plan says why.
#[test]
fn an_unreachable_engine_is_an_error_not_host_numbers() {
    let hosts = Hosts::up();
    let file = hosts.path("containers.toml");
    std::fs::write(
        &file,
        format!(
            "halobox = \"{}\"\nssh_options = {}\n\
             [[node]]\nname = \"a\"\nssh = \"root@{a}\"\nip = \"{a}\"\nbackend = \"podman\"\n\
             [[node]]\nname = \"b\"\nssh = \"root@{b}\"\nip = \"{b}\"\nbackend = \"podman\"\n",
            env!("CARGO_BIN_EXE_halobox"),
            serde_json::to_string(&hosts.nodes.ssh_options()).unwrap(),
            a = hosts.ip(1),
            b = hosts.ip(2),
        ),
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let nowhere = format!("unix://{}", hosts.path("no-engine.sock").display());
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "run", "--cluster", file, "--engine", &nowhere];
        args.extend(extra);
        hosts.nodes.halobox('a', &args)
    };
    let out = run(&["--dry-run"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "this node's end would run in container vllm ({file} runs this node's Ray in its podman container vllm), but no container engine can be reached: no container engine API answered"
        )) && err.contains(&nowhere)
            && err.contains("or pass --on host to measure the hosts instead"),
        "{err}"
    );
    let out = run(&["--dry-run", "--on", "host"]);
    let plan = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        plan.contains("runs in: this node: host; peer: host\n"),
        "{plan}"
    );
    // No cluster file: the default container is only tried.
    let out = hosts.nodes.halobox(
        'a',
        &[
            "bench",
            "run",
            "--peer",
            &format!("root@{}", hosts.ip(2)),
            "--peer-ip",
            &hosts.ip(2),
            "--engine",
            &nowhere,
            "--dry-run",
        ],
    );
    let plan = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        plan.contains("runs in: this node: host (no container engine here); peer: host\n"),
        "{plan}"
    );
}

/// Lines of noise the peer prints in [`remote_output_arrives_stripped_and_bounded`].
const NOISE_LINES: u64 = 48_000_010 / 17;

#[test]
fn remote_output_arrives_stripped_and_bounded() {
    let hosts = Hosts::up();
    // The peer's "halobox" prints 48 MB of coloured noise with carriage
    // returns and bells, then a last line full of escapes, and fails.
    let noisy = write_script(
        hosts.nodes.dir.path(),
        "noisy-halobox",
        // 17 bytes a line: NOISE_LINES (2823530) whole lines.
        r"yes $(printf '\033[31mnoise\033[0m\r\007') | head -c 48000010
printf '\033[2J\033]0;title\007last \033[1mwords\033[0m\r\302\205done\n'
exit 1",
    );
    let mut cmd = hosts.bench_cmd(
        &hosts.ip(2),
        &hosts.nodes.ssh_options(),
        noisy.to_str().unwrap(),
        &["--no-rdma", "--save", hosts.path("none").to_str().unwrap()],
    );
    let out = cmd.output().expect("run halobox");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "the peer root@{}: `halobox bench probe` failed (exit 1):",
            hosts.ip(2)
        )),
        "{err}"
    );
    assert!(err.contains("noise / last wordsdone"), "{err:?}");
    assert!(
        !err.contains(|c: char| c.is_control() && c != '\n'),
        "control characters reached the terminal: {err:?}"
    );
    // What was not kept is said, and the message stays short.
    assert!(err.contains("bytes of output not kept]"), "{err}");
    assert!(err.len() < 2000, "{} bytes: {err}", err.len());
    // 48 MB went by; halobox kept at most OUTPUT_LIMIT bytes of it, the
    // newest lines, and counted the rest. Each noise line is "noise\n" once
    // cleaned, the last "last wordsdone\n": what was kept is the total less
    // what the message says was not. (Its peak memory with this output is
    // measured by scripts/bench-remote-output.sh, which prints it.)
    let total = NOISE_LINES * "noise\n".len() as u64 + "last wordsdone\n".len() as u64;
    let not_kept: u64 = err
        .split("[halobox: ")
        .nth(1)
        .and_then(|rest| rest.split(" bytes of output not kept]").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of the bytes not kept: {err}"));
    let kept = total
        .checked_sub(not_kept)
        .unwrap_or_else(|| panic!("{not_kept} bytes not kept of {total}: {err}"));
    let limit = halobox::remote::OUTPUT_LIMIT as u64;
    eprintln!("halobox kept {kept} of {total} bytes of remote output (limit {limit})");
    assert!(
        kept <= limit && kept > limit / 2,
        "kept {kept} bytes of {total} (limit {limit}): {err}"
    );
}

#[test]
fn killing_halobox_stops_what_it_started_on_the_peer() {
    let hosts = Hosts::up();
    let mut run = hosts
        .bench_cmd(
            &hosts.ip(2),
            &hosts.nodes.ssh_options(),
            env!("CARGO_BIN_EXE_halobox"),
            &[
                "--no-rdma",
                "--duration",
                "60",
                "--save",
                hosts.path("run").to_str().unwrap(),
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        hosts
            .nodes
            .wait_for_process('b', "bench serve", Duration::from_secs(30)),
        "the halobox server never started on the peer"
    );
    sigkill(&mut run);
    assert_eq!(hosts.leftovers_in_peer(), Vec::<String>::new());
}

#[test]
fn unknown_host_keys_are_refused_whatever_the_options_say() {
    let hosts = Hosts::up();
    let peer = hosts.ip(2);
    let empty = hosts.path("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let key = format!("IdentityFile={}", hosts.path("client_key").display());
    let unknown = vec![
        format!("UserKnownHostsFile={}", empty.display()),
        key.clone(),
        "IdentitiesOnly=yes".to_string(),
    ];

    // ~/.ssh/config says StrictHostKeyChecking no: ssh still refuses the
    // peer's key, which is in no known_hosts file. (ssh reads the home of
    // the passwd entry, so a home of our own is bind-mounted over it.)
    let home = hosts.path("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(
        home.join(".ssh/config"),
        "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n",
    )
    .unwrap();
    let pw_home = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .dir;
    let inner = hosts.bench_cmd(
        &peer,
        &unknown,
        env!("CARGO_BIN_EXE_halobox"),
        &["--no-rdma", "--save", hosts.path("none").to_str().unwrap()],
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$1" "$2" && shift 2 && exec "$@""#)
        .arg("with-home")
        .arg(&home)
        .arg(&pw_home)
        .arg(inner.get_program())
        .args(inner.get_args())
        .env_remove("SSH_AUTH_SOCK")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("the peer root@{peer}: cannot reach it over ssh"))
            && err.contains("Host key verification failed"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&empty).unwrap(),
        "",
        "a key was recorded"
    );

    // A cluster file (or --ssh-option) cannot lower it either, however the
    // option is spelled; nor point known_hosts at /dev/null.
    for bad in [
        "StrictHostKeyChecking\tno",
        "stricthostkeychecking = accept-new",
        "UserKnownHostsFile=/dev//null",
        "ProxyCommand=nc %h %p",
    ] {
        let mut opts = unknown.clone();
        opts.push(bad.to_string());
        let file = hosts.cluster_file("bad.toml", &opts);
        let out = hosts.nodes.halobox(
            'a',
            &[
                "bench",
                "run",
                "--cluster",
                file.to_str().unwrap(),
                "--no-rdma",
            ],
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(&format!("ssh option {bad:?}")), "{bad}: {err}");
        assert!(err.contains("hint:"), "{bad}: {err}");
        let out = hosts
            .bench_cmd(&peer, &opts, env!("CARGO_BIN_EXE_halobox"), &["--no-rdma"])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad}: {err}");
        assert!(err.contains(&format!("ssh option {bad:?}")), "{bad}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&empty).unwrap(), "");
    assert!(!Path::new(&hosts.path("none")).exists());
}
