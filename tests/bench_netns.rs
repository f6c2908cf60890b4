//! `halobox bench run` end to end between two network namespaces on this
//! machine (veth, MTU 9000, private addresses that exist only inside the
//! namespaces), with the peer's side started over a real sshd in the peer
//! namespace. Needs root, iproute2, openssh-server, iperf3 and perftest
//! (scripts/test.sh installs them); a missing piece fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Two namespaces with sshd, removed on drop.
struct Hosts {
    tag: String,
    n: u32,
    dir: tempfile::TempDir,
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scripts/netns")
        .join(name)
}

impl Hosts {
    fn up() -> Hosts {
        let k = NEXT.fetch_add(1, Ordering::SeqCst);
        let tag = format!("{}{k}", std::process::id() % 100_000);
        let n = (std::process::id() * 7 + k) % 250 + 1;
        let dir = tempfile::tempdir().expect("tempdir");
        let hosts = Hosts { tag, n, dir };
        let out = Command::new("bash")
            .arg(script("up.sh"))
            .args([&hosts.tag, &n.to_string()])
            .arg(hosts.dir.path())
            .output()
            .expect("run scripts/netns/up.sh");
        assert!(
            out.status.success(),
            "scripts/netns/up.sh failed (run the tests as root with iproute2 and openssh-server installed):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        hosts
    }

    fn ns(&self, side: char) -> String {
        format!("hb-{}-{side}", self.tag)
    }

    fn ip(&self, host: u32) -> String {
        format!("10.77.{}.{host}", self.n)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `halobox bench run …` from namespace a against the sshd in b.
    fn bench(&self, peer_ip: &str, extra: &[&str]) -> Output {
        let halobox = env!("CARGO_BIN_EXE_halobox");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns('a'), halobox, "bench", "run"])
            .args(["--peer", &format!("root@{peer_ip}"), "--peer-ip", peer_ip])
            .args(["--peer-halobox", halobox])
            .arg("--ssh-option")
            .arg(format!(
                "UserKnownHostsFile={}",
                self.path("known_hosts").display()
            ))
            .arg("--ssh-option")
            .arg(format!(
                "IdentityFile={}",
                self.path("client_key").display()
            ))
            .args(["--ssh-option", "IdentitiesOnly=yes"])
            .args(extra)
            .env_remove("SSH_AUTH_SOCK");
        cmd.output().expect("run halobox")
    }

    /// `halobox bench run --cluster FILE …` from namespace a: both nodes in
    /// a cluster file, the peer (b) and this machine (a) found from it.
    fn bench_via_cluster(&self, extra: &[&str]) -> Output {
        let halobox = env!("CARGO_BIN_EXE_halobox");
        let file = self.path("cluster.toml");
        std::fs::write(
            &file,
            format!(
                "halobox = \"{halobox}\"\nssh_options = [\"UserKnownHostsFile={}\", \"IdentityFile={}\", \"IdentitiesOnly=yes\"]\n\
                 [[node]]\nname = \"a\"\nssh = \"root@{a}\"\nip = \"{a}\"\n\
                 [[node]]\nname = \"b\"\nssh = \"root@{b}\"\nip = \"{b}\"\n",
                self.path("known_hosts").display(),
                self.path("client_key").display(),
                a = self.ip(1),
                b = self.ip(2),
            ),
        )
        .unwrap();
        Command::new("ip")
            .args(["netns", "exec", &self.ns('a'), halobox, "bench", "run"])
            .arg("--cluster")
            .arg(&file)
            .args(extra)
            .env_remove("SSH_AUTH_SOCK")
            .output()
            .expect("run halobox")
    }

    /// Processes in namespace b other than its sshd listener, waited for
    /// (bounded) to go away.
    fn leftovers_in_peer(&self) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = Command::new("ip")
                .args(["netns", "pids", &self.ns('b')])
                .output()
                .unwrap();
            let sshd = std::fs::read_to_string(self.path("sshd_b.pid")).unwrap_or_default();
            let left: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter(|p| *p != sshd.trim())
                .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).ok())
                .map(|c| c.replace('\0', " "))
                .collect();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script("down.sh"))
            .arg(&self.tag)
            .arg(self.dir.path())
            .output();
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

fn halobox(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(args)
        .output()
        .unwrap()
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
    assert!(
        med < 5_000.0,
        "median one-way latency over a veth: {med} µs"
    );
    assert!(lat["samples"].as_u64().unwrap() >= 100);

    // Bandwidth with 1 and 2 streams, and iperf3 as a cross-check.
    for leg in ["tcp-bw-1", "tcp-bw-2", "iperf3-1", "iperf3-2"] {
        let r = &rows(&res, leg)[0];
        assert_eq!(r["status"], "ok", "{leg}: {r}");
        let g = r["bandwidth_gbps"].as_f64().unwrap();
        assert!(g > 0.1 && g < 1000.0, "{leg}: {g} Gb/s");
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
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(save.join("results.json")).unwrap()).unwrap();
    assert_eq!(saved, res);
    let again = halobox(&["bench", "report", save_s, "--json"]);
    assert_eq!(json(&again), res);
    let t1 = halobox(&["bench", "report", save_s]);
    let t2 = halobox(&["bench", "report", save_s]);
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
            && from.contains(&format!(
                "this machine is a: hb{}a holds {}",
                hosts.tag,
                hosts.ip(1)
            )),
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

    let cmp = halobox(&["bench", "compare", save_s, save2.to_str().unwrap()]);
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
    let t = Instant::now();
    let out = hosts.bench(&nobody, &["--save", hosts.path("none").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("cannot reach the peer root@{nobody} over ssh")),
        "{err}"
    );
    assert!(
        err.contains("hint:") && err.contains("BatchMode=yes"),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(60));
    assert!(
        !Path::new(&hosts.path("none")).exists(),
        "nothing is saved when the peer is unreachable"
    );
}
