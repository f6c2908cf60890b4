//! A real Prometheus (Debian's `prometheus` package) scrapes `halobox
//! metrics` on two namespace test nodes (tests/common/netns.rs): its HTTP
//! query API returns every series with the node label of the node that
//! exported it, and the data-plane netdev's byte counter rises while the
//! nodes ping each other. Everything stays inside the nodes' namespaces;
//! Prometheus runs in node a's, on its loopback. And `cluster up` (real Ray
//! from PyPI, the `host` backend) starts `halobox metrics` on every node,
//! `cluster down` stops it, `cluster up --no-metrics` starts none.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::netns::{Nodes, sigkill};

/// llama.cpp's CPU build (scripts/llama-cpp.sh) and its small model.
const LLAMA_CPP: &str = "/opt/halobox-llama-cpp";
const LLAMA_MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
use serde_json::Value;

/// Kills the children (halobox metrics, Prometheus) when the test ends.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            sigkill(c);
        }
    }
}

/// A Prometheus API query run from node a: the `data.result` array.
fn query(nodes: &Nodes, promql: &str) -> Vec<Value> {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &nodes.ns('a'),
            "curl",
            "-sfG",
            "--max-time",
            "5",
        ])
        .arg("http://127.0.0.1:9090/api/v1/query")
        .arg("--data-urlencode")
        .arg(format!("query={promql}"))
        .output()
        .expect("curl");
    if !out.status.success() {
        return Vec::new();
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn wait_for(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    false
}

fn sample_value(v: &Value) -> f64 {
    v["value"][1].as_str().unwrap().parse().unwrap()
}

#[test]
fn prometheus_scrapes_every_node_and_a_counter_rises() {
    let nodes = Nodes::up(&["1500", "1500"]);
    let mut procs = Procs(Vec::new());
    for (x, i) in [('a', 1), ('b', 2)] {
        let listen = format!("{}:9837", nodes.ip(i));
        let child = nodes
            .spawn_halobox(
                x,
                &["metrics", "--listen", &listen, "--node", &x.to_string()],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start halobox metrics");
        procs.0.push(child);
    }
    let config = nodes.path("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: halobox\n    static_configs:\n      - targets: ['{}:9837', '{}:9837']\n",
            nodes.ip(1),
            nodes.ip(2)
        ),
    )
    .unwrap();
    let prometheus = Command::new("ip")
        .args(["netns", "exec", &nodes.ns('a'), "prometheus"])
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            nodes.path("tsdb").display()
        ))
        .arg("--web.listen-address=127.0.0.1:9090")
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(nodes.path("prometheus.log")).unwrap(),
        ))
        .spawn()
        .expect("prometheus (Debian package prometheus; scripts/test.sh installs it)");
    procs.0.push(prometheus);

    let log = || std::fs::read_to_string(nodes.path("prometheus.log")).unwrap_or_default();
    let both_up = wait_for(Duration::from_secs(60), || {
        let up = query(&nodes, "up{job=\"halobox\"} == 1");
        let tx = query(&nodes, "halobox_netdev_transmit_bytes_total");
        up.len() == 2 && tx.len() == 2
    });
    assert!(both_up, "Prometheus did not scrape both nodes:\n{}", log());

    // Every halobox series carries the node label of the address it came from.
    let all = query(&nodes, "{__name__=~\"halobox_.+\"}");
    for (x, i) in [("a", 1), ("b", 2)] {
        let instance = format!("{}:9837", nodes.ip(i));
        let names: std::collections::BTreeSet<String> = all
            .iter()
            .filter(|s| s["metric"]["instance"] == instance.as_str())
            .map(|s| {
                assert_eq!(s["metric"]["node"], x, "{s}");
                s["metric"]["__name__"].as_str().unwrap().to_string()
            })
            .collect();
        for want in [
            "halobox_netdev_receive_bytes_total",
            "halobox_netdev_transmit_bytes_total",
            "halobox_netdev_receive_packets_total",
            "halobox_netdev_transmit_packets_total",
            "halobox_netdev_receive_drops_total",
            "halobox_netdev_transmit_drops_total",
            "halobox_metrics_read_issues",
        ] {
            assert!(names.contains(want), "{want} of node {x}: {names:?}");
        }
    }

    // Traffic from a to b: a's transmit bytes rise in Prometheus.
    let series = "halobox_netdev_transmit_bytes_total{node=\"a\"}";
    let before = sample_value(&query(&nodes, series)[0]);
    let ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            &nodes.ns('a'),
            "ping",
            "-q",
            "-c",
            "200",
            "-i",
            "0.01",
            "-s",
            "1200",
        ])
        .arg(nodes.ip(2))
        .output()
        .expect("ping");
    assert!(ping.status.success(), "{}", common::text(&ping));
    let rose = wait_for(Duration::from_secs(30), || {
        query(&nodes, series)
            .first()
            .is_some_and(|s| sample_value(s) >= before + 200.0 * 1200.0)
    });
    assert!(
        rose,
        "{series} did not rise by 200 pings of 1200 bytes from {before}:\n{:?}",
        query(&nodes, series)
    );
}

/// The `ray` of the test venv (HALOBOX_TEST_RAY overrides it).
fn ray() -> String {
    let ray =
        std::env::var("HALOBOX_TEST_RAY").unwrap_or_else(|_| "/opt/halobox-ray/bin/ray".into());
    assert!(
        std::path::Path::new(&ray).exists(),
        "{ray} is missing: run `bash scripts/ray-venv.sh` (as root) or set HALOBOX_TEST_RAY"
    );
    ray
}

/// `GET http://ADDR/metrics` from node a: the body, or curl's exit code.
fn scrape(nodes: &Nodes, addr: &str) -> Result<String, Option<i32>> {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &nodes.ns('a'),
            "curl",
            "-sf",
            "--max-time",
            "5",
        ])
        .arg(format!("http://{addr}/metrics"))
        .output()
        .expect("curl");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(out.status.code())
    }
}

/// `halobox cluster ARGS --cluster FILE` on node a (the head).
fn cluster(nodes: &Nodes, args: &[&str], file: &std::path::Path) -> std::process::Output {
    let mut all = vec!["cluster"];
    all.extend(args);
    all.extend(["--cluster", file.to_str().unwrap()]);
    nodes.halobox('a', &all)
}

#[test]
fn cluster_up_starts_metrics_on_every_node_and_down_stops_them() {
    let nodes = Nodes::up(&["1500", "1500"]);
    let mut t = format!(
        "ray = \"{}\"\nhalobox = \"{}\"\ntimeout_s = 120\n\
         ray_args = [\"--object-store-memory=80000000\"]\n\
         ray_head_args = [\"--include-dashboard=false\"]\n\
         ssh_options = {}\n",
        ray(),
        env!("CARGO_BIN_EXE_halobox"),
        serde_json::to_string(&nodes.ssh_options()).unwrap(),
    );
    for (x, i) in [('a', 1), ('b', 2)] {
        t.push_str(&format!(
            "\n[[node]]\nname = \"{x}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"host\"\ncpus = 1\n",
            ip = nodes.ip(i)
        ));
    }
    let file = nodes.path("cluster.toml");
    std::fs::write(&file, t).unwrap();
    let addr = |i: u32| format!("{}:9837", nodes.ip(i));

    // A stand-in serve on the head: its API answers GET /health with 200.
    let www = nodes.path("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("health"), "ok").unwrap();
    let mut procs = Procs(vec![
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &nodes.ns('a'),
                "python3",
                "-m",
                "http.server",
            ])
            .args(["8000", "--bind", &nodes.ip(1), "--directory"])
            .arg(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3"),
    ]);

    let up = cluster(&nodes, &["up"], &file);
    let said = common::text(&up);
    assert!(up.status.success(), "{said}");
    for (x, i) in [('a', 1), ('b', 2)] {
        assert!(
            said.contains(&format!("halobox metrics on http://{}/metrics", addr(i))),
            "{said}"
        );
        let body = scrape(&nodes, &addr(i)).unwrap_or_else(|e| {
            panic!("node {x}'s endpoint does not answer (curl {e:?}):\n{said}")
        });
        assert!(
            body.contains(&format!("halobox_ray_running{{node=\"{x}\"}} 1\n")),
            "{body}"
        );
        assert!(
            body.contains("halobox_netdev_transmit_bytes_total{"),
            "{body}"
        );
    }
    let head = scrape(&nodes, &addr(1)).unwrap();
    let ready = wait_for(Duration::from_secs(20), || {
        scrape(&nodes, &addr(1))
            .is_ok_and(|b| b.contains("halobox_serve_state{node=\"a\",state=\"serving\"} 1\n"))
    });
    assert!(ready, "{head}");
    assert!(
        !scrape(&nodes, &addr(2))
            .unwrap()
            .contains("halobox_serve_state")
    );
    // promtool finds nothing to say about the head's scrape.
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus)");
    std::io::Write::write_all(check.stdin.as_mut().unwrap(), head.as_bytes()).unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success() && checked.stdout.is_empty() && checked.stderr.is_empty(),
        "{}\n{head}",
        common::text(&checked)
    );
    // The stand-in serve stops: the head says so.
    for c in &mut procs.0 {
        sigkill(c);
    }
    let gone = wait_for(Duration::from_secs(20), || {
        scrape(&nodes, &addr(1))
            .is_ok_and(|b| b.contains("halobox_serve_state{node=\"a\",state=\"none\"} 1\n"))
    });
    assert!(gone, "{:?}", scrape(&nodes, &addr(1)));

    let before: Vec<Vec<String>> = ['a', 'b'].map(|x| nodes.processes_now(x)).into();
    let down = cluster(&nodes, &["down"], &file);
    let said = common::text(&down);
    let log = |x: char, i: u32| {
        let cat = format!(
            "cat \"{}\"/metrics-$0.log",
            halobox::fleet::metrics_nodes::DIR
        );
        let out = nodes
            .on_node(x, &["sh", "-c", &cat, &nodes.ip(i)])
            .output()
            .unwrap();
        common::text(&out)
    };
    assert!(down.status.success(), "{said}");
    assert!(
        said.contains("a: halobox metrics stopped "),
        "{said}\nbefore: {before:?}\nlog a: {}\nnow: {:?}",
        log('a', 1),
        nodes.processes_now('a')
    );
    assert!(said.contains("b: halobox metrics stopped "), "{said}");
    for (x, i) in [('a', 1), ('b', 2)] {
        // curl exit 7: nothing listens.
        assert_eq!(scrape(&nodes, &addr(i)), Err(Some(7)), "node {x}");
        let left = nodes.leftovers(x, Duration::from_secs(15));
        assert!(left.is_empty(), "node {x}: {left:?}");
    }

    let up = cluster(&nodes, &["up", "--no-metrics"], &file);
    let said = common::text(&up);
    assert!(up.status.success(), "{said}");
    assert!(
        said.contains("halobox metrics: not started (--no-metrics)"),
        "{said}"
    );
    for i in [1, 2] {
        assert_eq!(scrape(&nodes, &addr(i)), Err(Some(7)), "{said}");
    }
    let down = cluster(&nodes, &["down"], &file);
    assert!(down.status.success(), "{}", common::text(&down));
    assert!(!common::text(&down).contains("halobox metrics stopped"));
}

/// Ends the tmux server of a test.
struct Tmux(String);

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.0]);
        c
    }

    fn pane(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "top"])
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

#[test]
fn cluster_top_shows_every_node_and_a_dead_ones_reason_and_ends_on_q() {
    let nodes = Nodes::up(&["1500", "1500", "1500"]);
    let mut procs = Procs(Vec::new());
    for (x, i) in [('a', 1), ('b', 2)] {
        let listen = format!("{}:9837", nodes.ip(i));
        let child = nodes
            .spawn_halobox(
                x,
                &["metrics", "--listen", &listen, "--node", &x.to_string()],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start halobox metrics");
        procs.0.push(child);
    }
    // Node c runs no exporter. Node a, the head, serves a real llama-server
    // whose /metrics, like its API, needs the cluster's key.
    let key: String = std::fs::read("/proc/sys/kernel/random/uuid")
        .map(|b| String::from_utf8_lossy(&b).replace(['-', '\n'], ""))
        .unwrap();
    let key_file = nodes.path("cluster.api-key");
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    std::fs::set_permissions(
        &key_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let llama = std::path::Path::new(LLAMA_CPP);
    let (server, model) = (llama.join("bin/llama-server"), llama.join(LLAMA_MODEL));
    assert!(
        server.exists() && model.exists(),
        "{} or {} is missing: run `scripts/llama-cpp.sh {LLAMA_CPP}` (scripts/test.sh does)",
        server.display(),
        model.display()
    );
    let ip_a = nodes.ip(1);
    procs.0.push(
        Command::new("ip")
            .args(["netns", "exec", &nodes.ns('a')])
            .arg(&server)
            .args(["-m", &model.display().to_string(), "--metrics"])
            .args(["--host", &ip_a, "--port", "8000"])
            .args(["-c", "512", "-np", "1", "-t", "1", "-tb", "1"])
            .env("LLAMA_API_KEY", &key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start llama-server"),
    );
    let metrics_url = format!("http://{ip_a}:8000/metrics");
    let llama_up = wait_for(Duration::from_secs(120), || {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &nodes.ns('a'),
                "curl",
                "-s",
                "-o",
                "/dev/null",
            ])
            .args(["-w", "%{http_code}", &metrics_url])
            .output()
            .is_ok_and(|o| o.stdout == b"401")
    });
    assert!(
        llama_up,
        "llama-server did not answer 401 (key needed) on {metrics_url}"
    );
    let mut t = String::from("engine = \"llama.cpp\"\n");
    for (x, i) in [('a', 1), ('b', 2), ('c', 3)] {
        t.push_str(&format!(
            "[[node]]\nname = \"{x}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"host\"\n",
            ip = nodes.ip(i)
        ));
    }
    let file = nodes.path("cluster.toml");
    std::fs::write(&file, t).unwrap();
    let exit = nodes.path("top.exit");
    let tmux = Tmux(format!("hb-top-{}", nodes.tag));
    let line = format!(
        "ip netns exec {} {} cluster top --cluster {}; echo exit=$? > {}; sleep 60",
        nodes.ns('a'),
        env!("CARGO_BIN_EXE_halobox"),
        file.display(),
        exit.display()
    );
    let started = tmux
        .cmd()
        .args([
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "200",
            "-y",
            "20",
            &line,
        ])
        .status()
        .expect("tmux (Debian package tmux)");
    assert!(started.success());
    let all_rows = wait_for(Duration::from_secs(30), || {
        let p = tmux.pane();
        p.lines().any(|l| l.starts_with("a ") && l.contains('-'))
            && p.lines().any(|l| l.starts_with("b ") && l.contains('-'))
            && p.lines()
                .any(|l| l.starts_with("c ") && l.contains("not answering:") && l.contains(":9837"))
    });
    let pane = tmux.pane();
    assert!(all_rows, "{pane}");
    assert!(pane.contains("RDMA in Gb/s"), "{pane}");
    // The head's row has the engine's figures: its /metrics was read with
    // the key (requests running: 0; tokens/s once two readings exist).
    let engine_read = wait_for(Duration::from_secs(10), || {
        tmux.pane()
            .lines()
            .any(|l| l.starts_with("a ") && l.trim_end().ends_with(" 0"))
    });
    assert!(engine_read, "{}", tmux.pane());
    // Rows go on refreshing: still every node after another second.
    std::thread::sleep(Duration::from_millis(1500));
    let pane = tmux.pane();
    for x in ['a', 'b', 'c'] {
        assert!(
            pane.lines().any(|l| l.starts_with(&format!("{x} "))),
            "{pane}"
        );
    }
    let sent = tmux
        .cmd()
        .args(["send-keys", "-t", "top", "q"])
        .status()
        .unwrap();
    assert!(sent.success());
    let ended = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&exit).is_ok_and(|s| s.trim() == "exit=0")
    });
    assert!(
        ended,
        "{:?}\n{}",
        std::fs::read_to_string(&exit),
        tmux.pane()
    );
    // The terminal is back: the alternate screen left.
    assert!(!tmux.pane().contains("RDMA in Gb/s"), "{}", tmux.pane());

    // Ctrl-C ends it the same way.
    std::fs::remove_file(&exit).unwrap();
    let started = tmux
        .cmd()
        .args([
            "new-session",
            "-d",
            "-s",
            "top2",
            "-x",
            "200",
            "-y",
            "20",
            &line,
        ])
        .status()
        .unwrap();
    assert!(started.success());
    let shown = wait_for(Duration::from_secs(30), || {
        let out = tmux
            .cmd()
            .args(["capture-pane", "-p", "-t", "top2"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("RDMA in Gb/s")
    });
    assert!(shown);
    let sent = tmux
        .cmd()
        .args(["send-keys", "-t", "top2", "C-c"])
        .status()
        .unwrap();
    assert!(sent.success());
    let ended = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&exit).is_ok_and(|s| s.trim() == "exit=0")
    });
    assert!(ended, "{:?}", std::fs::read_to_string(&exit));
}
