//! `halobox metrics`: one scrape of the snapshot hosts in
//! tests/fixtures/metrics/ in the units its names say, checked by
//! Prometheus's own `promtool check metrics` (Debian's `prometheus`
//! package; a missing promtool fails the test); a hostile snapshot cannot
//! break the output; the HTTP server answers only `GET /metrics`, bounded,
//! and never listens on every interface.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ok, run, text};

fn scrape(host: &str, extra: &[&str]) -> String {
    let dir = format!("tests/fixtures/metrics/{host}");
    let mut args = vec!["metrics", "--sysroot", &dir, "--print", "--node", host];
    args.extend_from_slice(extra);
    ok(&run(&args))
}

/// `promtool check metrics` on `text`: its exit status and everything it said.
fn promtool(text: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; scripts/test.sh installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// The value of the one sample whose line starts with `series` (name and labels).
fn value(text: &str, series: &str) -> f64 {
    let hits: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .collect();
    assert_eq!(hits.len(), 1, "one sample {series} in:\n{text}");
    hits[0].rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn every_snapshot_passes_promtool_without_a_warning() {
    for host in ["strix-cx5", "strix-e810", "hostile"] {
        let out = scrape(host, &[]);
        let (passed, said) = promtool(&out);
        assert!(
            passed && said.trim().is_empty(),
            "promtool on {host}: {said}\n{out}"
        );
    }
}

#[test]
fn mlx5_values_are_in_the_units_their_names_say() {
    let out = scrape("strix-cx5", &[]);
    let card = "{node=\"strix-cx5\",card=\"card1\"}";
    assert_eq!(
        value(&out, &format!("halobox_gpu_gtt_total_bytes{card}")),
        137438953472.0
    );
    assert_eq!(
        value(&out, &format!("halobox_gpu_gtt_used_bytes{card}")),
        68719476736.0
    );
    assert_eq!(
        value(&out, &format!("halobox_gpu_vram_used_bytes{card}")),
        41943040.0
    );
    assert_eq!(value(&out, &format!("halobox_gpu_busy_ratio{card}")), 0.87);
    assert_eq!(
        value(
            &out,
            "halobox_gpu_temperature_celsius{node=\"strix-cx5\",card=\"card1\",sensor=\"edge\"}"
        ),
        61.0
    );
    assert_eq!(
        value(
            &out,
            "halobox_gpu_power_watts{node=\"strix-cx5\",card=\"card1\",sensor=\"PPT\"}"
        ),
        95.0
    );
    let port = "{node=\"strix-cx5\",device=\"mlx5_0\",port=\"1\"}";
    // port_xmit_data counts 4-octet words.
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_port_transmit_bytes_total{port}")
        ),
        2500000000.0 * 4.0
    );
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_port_receive_bytes_total{port}")
        ),
        2400000000.0 * 4.0
    );
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_port_transmit_packets_total{port}")
        ),
        9000000.0
    );
    assert_eq!(
        value(&out, &format!("halobox_rdma_cnp_sent_total{port}")),
        120.0
    );
    assert_eq!(
        value(&out, &format!("halobox_rdma_cnp_handled_total{port}")),
        118.0
    );
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_ecn_marked_packets_total{port}")
        ),
        130.0
    );
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_out_of_sequence_packets_total{port}")
        ),
        7.0
    );
    assert_eq!(
        value(&out, &format!("halobox_rdma_retransmits_total{port}")),
        2.0
    );
    assert_eq!(value(&out, &format!("halobox_rdma_port_active{port}")), 1.0);
    assert_eq!(
        value(
            &out,
            "halobox_rdma_port_active{node=\"strix-cx5\",device=\"mlx5_1\",port=\"1\"}"
        ),
        0.0
    );
    // 100 Gb/sec in bytes per second.
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_port_rate_bytes_per_second{port}")
        ),
        12.5e9
    );
    // The data-plane interface (the only address on an RDMA interface).
    let nd = "{node=\"strix-cx5\",interface=\"enp1s0f0np0\"}";
    assert_eq!(
        value(&out, &format!("halobox_netdev_receive_bytes_total{nd}")),
        123456789.0
    );
    assert_eq!(
        value(&out, &format!("halobox_netdev_receive_drops_total{nd}")),
        3.0
    );
    assert!(
        out.contains("# TYPE halobox_rdma_port_transmit_bytes_total counter\n")
            && out.contains("# TYPE halobox_gpu_gtt_used_bytes gauge\n"),
        "{out}"
    );
}

#[test]
fn irdma_counters_are_mapped_and_octets_not_multiplied() {
    let out = scrape("strix-e810", &[]);
    let port = "{node=\"strix-e810\",device=\"rocep194s0\",port=\"1\"}";
    // ip4OutOctets + ip6OutOctets: octets, no 4x.
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_port_transmit_bytes_total{port}")
        ),
        8000002000.0
    );
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_port_receive_bytes_total{port}")
        ),
        9000001000.0
    );
    assert_eq!(
        value(&out, &format!("halobox_rdma_cnp_sent_total{port}")),
        40.0
    );
    assert_eq!(
        value(&out, &format!("halobox_rdma_cnp_handled_total{port}")),
        41.0
    );
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_ecn_marked_packets_total{port}")
        ),
        42.0
    );
    assert_eq!(
        value(
            &out,
            &format!("halobox_rdma_out_of_sequence_packets_total{port}")
        ),
        6.0
    );
    assert_eq!(
        value(&out, &format!("halobox_rdma_retransmits_total{port}")),
        5.0
    );
    // --listen chooses the interface whose netdev counters are exported.
    let other = scrape("strix-e810", &["--listen", "127.0.0.1:9837"]);
    assert!(
        other.contains("interface=\"lo\"") && !other.contains("enp194s0np0"),
        "{other}"
    );
}

#[test]
fn hostile_values_are_left_out_and_labels_escaped() {
    let out = scrape("hostile", &[]);
    // 250 %, -5, text, 2^64 and "+Inf" are not numbers a gauge or counter can take.
    for gone in [
        "halobox_gpu_busy_ratio{",
        "halobox_gpu_gtt_used_bytes{",
        "halobox_gpu_gtt_total_bytes{",
        "halobox_gpu_vram_used_bytes{",
        "halobox_rdma_cnp_sent_total{",
        "halobox_rdma_cnp_handled_total{",
        "halobox_rdma_out_of_sequence_packets_total{",
        "halobox_rdma_port_rate_bytes_per_second{",
        "halobox_netdev_receive_bytes_total{",
        "halobox_netdev_transmit_bytes_total{",
        "halobox_netdev_receive_drops_total{",
    ] {
        assert!(!out.contains(gone), "{gone} in:\n{out}");
    }
    assert!(
        out.contains("sensor=\"ed\\\"ge\\\\\\nx}\"} 50\n"),
        "escaped label:\n{out}"
    );
    assert!(
        out.contains("device=\"evil\\\"dev\\\\x\""),
        "escaped device name:\n{out}"
    );
    // Two channels labelled `edge` (one reads "hot"): one sample, not a duplicate series.
    assert_eq!(out.matches("sensor=\"edge\"").count(), 1, "{out}");
    assert!(out.contains("sensor=\"edge\"} 40\n"), "{out}");
    for line in out.lines().filter(|l| !l.starts_with('#')) {
        let v = line.rsplit(' ').next().unwrap();
        assert!(
            v.parse::<f64>().is_ok_and(f64::is_finite),
            "not a finite number: {line}"
        );
    }
}

/// `halobox metrics --listen 127.0.0.1:PORT`, running.
struct Server(Child, u16);

impl Server {
    fn start() -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_halobox"))
            .args([
                "metrics",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--node",
                "here",
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "halobox metrics did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Server(child, port)
    }

    fn request(&self, raw: &[u8]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.1)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(raw).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serves_get_metrics_only_bounded() {
    let server = Server::start();
    let resp = server.request(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    assert!(
        resp.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
        "{resp}"
    );
    let body = resp.split_once("\r\n\r\n").unwrap().1;
    assert!(
        body.contains("halobox_netdev_transmit_bytes_total{node=\"here\",interface=\"lo\"}"),
        "{body}"
    );
    let (passed, said) = promtool(body);
    assert!(passed && said.trim().is_empty(), "promtool: {said}\n{body}");

    let post = server.request(b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    assert!(post.contains("Allow: GET\r\n"), "{post}");
    let other = server.request(b"GET /debug/pprof HTTP/1.1\r\n\r\n");
    assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
    let junk = server.request(b"\x16\x03\x01\x02\x00\r\n\r\n");
    assert!(junk.starts_with("HTTP/1.1 400 "), "{junk}");
    // A head that never ends is cut at 8 KiB, not read forever.
    let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 64 * 1024));
    let mut s = TcpStream::connect(("127.0.0.1", server.1)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(&huge);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    // A client that connects and says nothing does not stop the next one.
    let _idle = TcpStream::connect(("127.0.0.1", server.1)).unwrap();
    let after = server.request(b"GET /metrics HTTP/1.0\r\n\r\n");
    assert!(after.starts_with("HTTP/1.1 200 OK\r\n"), "{after}");
}

/// A client that trickles its request head (a byte a second) neither holds
/// a scrape back while it is connected nor keeps its connection: it is
/// answered 408 once the head's deadline passes.
#[test]
fn a_trickling_client_does_not_hold_a_scrape_back() {
    let server = Server::start();
    let mut slow = TcpStream::connect(("127.0.0.1", server.1)).unwrap();
    slow.set_read_timeout(Some(Duration::from_millis(10)))
        .unwrap();
    let (done, trickled) = std::sync::mpsc::channel::<String>();
    let trickler = std::thread::spawn(move || {
        let mut out = Vec::new();
        for b in b"GET /metrics HTTP/1.1\r\nX-Slow: ".iter().cycle().take(40) {
            if slow.write_all(&[*b]).is_err() {
                break;
            }
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(1) {
                let mut buf = [0u8; 256];
                match slow.read(&mut buf) {
                    Ok(0) => {
                        let _ = done.send(String::from_utf8_lossy(&out).into_owned());
                        return;
                    }
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(_) => {}
                }
            }
        }
        let _ = done.send(String::from_utf8_lossy(&out).into_owned());
    });
    // The trickler is connected and has sent its first bytes.
    std::thread::sleep(Duration::from_millis(1500));
    let (tx, rx) = std::sync::mpsc::channel();
    let port = server.1;
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let _ = tx.send(String::from_utf8_lossy(&out).into_owned());
    });
    let scraped = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("no answer to a scrape within 20 s while a client trickled its head");
    assert!(scraped.starts_with("HTTP/1.1 200 OK\r\n"), "{scraped}");
    let answered = trickled
        .recv_timeout(Duration::from_secs(30))
        .expect("the trickling client kept its connection for 30 s");
    assert!(answered.starts_with("HTTP/1.1 408 "), "{answered}");
    trickler.join().unwrap();
}

#[test]
fn never_every_interface_and_snapshots_only_print() {
    let out = run(&["metrics", "--listen", "0.0.0.0:9837"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("every interface") && err.contains("--listen"),
        "{err}"
    );
    let out = run(&["metrics", "--listen", "[::]:9837"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // 0.0.0.0 in its IPv6 forms is every IPv4 address too.
    for every in ["[::ffff:0.0.0.0]", "[::ffff:0:0]"] {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen = format!("{every}:{port}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_halobox"))
            .args(["metrics", "--listen", &listen])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("halobox metrics --listen {listen} listened (every IPv4 address)");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{listen}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("every interface"), "{listen}: {err}");
    }
    let out = run(&["metrics", "--sysroot", "tests/fixtures/metrics/strix-cx5"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--print"),
        "{}",
        text(&out)
    );
}

/// `promtool check config` on `yaml` written to a file in `dir`.
fn promtool_config(dir: &std::path::Path, yaml: &str) -> (bool, String) {
    let path = dir.join("prometheus.yml");
    std::fs::write(&path, yaml).unwrap();
    let out = Command::new("promtool")
        .args(["check", "config"])
        .arg(&path)
        .output()
        .expect("promtool (Debian package prometheus)");
    (out.status.success(), text(&out))
}

#[test]
fn cluster_metrics_prints_a_scrape_config_promtool_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        "[[node]]\nname = \"n1\"\nssh = \"root@n1\"\nip = \"192.168.100.1\"\n[[node]]\nssh = \"root@n2\"\nip = \"192.168.100.2\"\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let list = ok(&run(&["cluster", "metrics", "--cluster", f]));
    assert_eq!(
        list,
        "halobox  n1               http://192.168.100.1:9837/metrics\nhalobox  root@n2          http://192.168.100.2:9837/metrics\nengine   n1               http://192.168.100.1:8000/metrics\n"
    );
    // vLLM's /metrics is behind the key too (halobox's middleware).
    let key = dir.path().join("cluster.api-key");
    std::fs::write(&key, "sk-secret-never-printed\n").unwrap();
    let yaml = ok(&run(&[
        "cluster",
        "metrics",
        "--cluster",
        f,
        "--prometheus-config",
    ]));
    let (passed, said) = promtool_config(dir.path(), &yaml);
    assert!(passed, "promtool check config: {said}\n{yaml}");
    let engine_job = format!(
        "  - job_name: \"halobox-engine\"\n    metrics_path: /metrics\n    authorization:\n      type: Bearer\n      credentials_file: \"{}\"\n",
        key.display()
    );
    assert!(!yaml.contains("sk-secret"), "{yaml}");
    for want in [
        "      - targets: [\"192.168.100.1:9837\"]\n        labels:\n          node: \"n1\"\n",
        "      - targets: [\"192.168.100.2:9837\"]\n        labels:\n          node: \"root@n2\"\n",
        engine_job.as_str(),
        "    static_configs:\n      - targets: [\"192.168.100.1:8000\"]\n",
    ] {
        assert!(yaml.contains(want), "{want} in:\n{yaml}");
    }

    // The engine's /metrics is behind the API key: the key file's path, never the key.
    std::fs::write(
        &file,
        "engine = \"llama.cpp\"\n[[node]]\nssh = \"root@n1\"\nip = \"192.168.100.1\"\n[[node]]\nssh = \"root@n2\"\nip = \"192.168.100.2\"\n",
    )
    .unwrap();
    let yaml = ok(&run(&[
        "cluster",
        "metrics",
        "--cluster",
        f,
        "--prometheus-config",
        "--serve-port",
        "8080",
    ]));
    let (passed, said) = promtool_config(dir.path(), &yaml);
    assert!(passed, "promtool check config: {said}\n{yaml}");
    assert!(
        yaml.contains(&format!("credentials_file: \"{}\"", key.display()))
            && yaml.contains("\"192.168.100.1:8080\"")
            && yaml.contains("--metrics")
            && !yaml.contains("sk-secret"),
        "{yaml}"
    );
}

/// Every metric name a PromQL expression names (`halobox_…`, `vllm:…`).
fn names_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_braces = false;
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            cur.push(c);
            continue;
        }
        if !in_braces && (cur.starts_with("halobox_") || cur.starts_with("vllm:")) {
            out.push(cur.clone());
        }
        cur.clear();
        match c {
            '{' => in_braces = true,
            '}' => in_braces = false,
            _ => {}
        }
    }
    out
}

#[test]
fn every_grafana_query_names_an_exported_series() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/grafana/halobox.json"
    );
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut exprs: Vec<String> = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for v in dash["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["definition"].as_str() {
            exprs.push(q.to_string());
        }
    }
    // What halobox exports: the sample names of the two snapshots' scrapes.
    let scraped = format!("{}{}", scrape("strix-cx5", &[]), scrape("strix-e810", &[]));
    let exported: std::collections::BTreeSet<&str> = scraped
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split('{').next())
        .collect();
    // What vLLM exports: the metric names in the installed vLLM's own source
    // (prometheus_client adds `_total` to counters, `_bucket`/`_sum`/`_count`
    // to histograms).
    let find = Command::new("/opt/halobox-vllm/bin/python")
        .args([
            "-c",
            "import importlib.util as u; print(u.find_spec('vllm').submodule_search_locations[0])",
        ])
        .output()
        .expect("the vLLM CPU build in /opt/halobox-vllm (scripts/engines installs it)");
    let vllm_dir = ok(&find).trim().to_string();
    let loggers =
        std::fs::read_to_string(format!("{vllm_dir}/v1/metrics/loggers.py")).expect("loggers.py");
    let mut checked = 0;
    for e in &exprs {
        let names = names_in(e);
        assert!(!names.is_empty(), "no series in {e}");
        for n in names {
            if n.starts_with("halobox_") {
                assert!(
                    exported.contains(n.as_str()),
                    "{n} (in {e}) is not exported"
                );
            } else {
                let base = ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| n.strip_suffix(s))
                    .unwrap_or(&n);
                assert!(
                    loggers.contains(&format!("\"{base}\"")),
                    "{n} (in {e}) is not a vLLM metric"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} names checked");
}

/// `halobox_serve_restarts_total` on the head: the restarts the serve's
/// supervisor recorded in the state folder (`KEY.restarts.json` of the
/// cluster file `--serve-record` names), 0 without the file; promtool
/// accepts it.
#[test]
fn serve_restarts_are_a_counter_from_the_supervisors_events() {
    use sha2::Digest as _;
    let state = tempfile::tempdir().unwrap();
    let cluster = state.path().join("cluster.toml");
    let key = hex::encode(&sha2::Sha256::digest(cluster.display().to_string().as_bytes())[..8]);
    let folder = state.path().join("halobox/serve");
    let scrape = || {
        let out = Command::new(env!("CARGO_BIN_EXE_halobox"))
            .args([
                "metrics",
                "--sysroot",
                "tests/fixtures/metrics/strix-cx5",
                "--print",
                "--node",
                "n1",
                "--serve-endpoint",
                "127.0.0.1:9",
                "--serve-record",
            ])
            .arg(&cluster)
            .env("XDG_STATE_HOME", state.path())
            .output()
            .unwrap();
        ok(&out)
    };
    let none = scrape();
    assert_eq!(
        value(&none, "halobox_serve_restarts_total{node=\"n1\"}"),
        0.0
    );
    std::fs::create_dir_all(&folder).unwrap();
    let event = |at: u64, outcome: serde_json::Value| serde_json::json!({"at": at, "check": "health", "node": null, "cause": "x", "outcome": outcome});
    let events = serde_json::json!({
        "policy": null,
        "events": [event(100, "serving".into()), event(200, serde_json::json!({"failed": "y"})), event(300, "gave-up".into())],
        "gave_up": "past the limit"
    });
    std::fs::write(
        folder.join(format!("{key}.restarts.json")),
        events.to_string(),
    )
    .unwrap();
    let text = scrape();
    assert!(
        text.contains("# TYPE halobox_serve_restarts_total counter\n"),
        "{text}"
    );
    assert_eq!(
        value(&text, "halobox_serve_restarts_total{node=\"n1\"}"),
        2.0
    );
    let (passed, said) = promtool(&text);
    assert!(passed && said.trim().is_empty(), "promtool: {said}\n{text}");
}
