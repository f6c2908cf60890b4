//! A real Prometheus (Debian's `prometheus` package) scrapes `halobox
//! metrics` on two namespace test nodes (tests/common/netns.rs): its HTTP
//! query API returns every series with the node label of the node that
//! exported it, and the data-plane netdev's byte counter rises while the
//! nodes ping each other. Everything stays inside the nodes' namespaces;
//! Prometheus runs in node a's, on its loopback.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::netns::{Nodes, sigkill};
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
