//! The saved runs under `tests/fixtures/bench-runs/` (what `tests/bench_html.rs`
//! and the README's picture draw), written by one ignored test:
//! `cargo test --lib bench::html::fixtures -- --ignored` writes them again.

use std::fs;
use std::path::{Path, PathBuf};

use crate::bench::collective::plan::{self as cplan, Op, test_report};
use crate::bench::collective::report::{RankRun, Record};
use crate::bench::plan::{BenchOptions, LegKind, PathSpec, RdmaMode};
use crate::bench::probe::NodeContext;
use crate::bench::results::{self, LegRecord, LegStatus, PathRecord, RunRecord};
use crate::bench::serving::ab::{AB_FILE, AbPlan, AbResults, Leg, LegResult};
use crate::bench::serving::plan::{Endpoint, ServingOptions};
use crate::bench::serving::record::{self, LevelRecord, RequestRecord, ServingRecord};
use crate::bench::tcp;
use crate::cluster::config::{ClusterConfig, Engine, NodeBackend, NodeConfig, Transport};
use crate::cluster::env::Resolved;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-runs")
}

/// A small deterministic spread in 0..1.
fn jitter(i: u64) -> f64 {
    ((i.wrapping_mul(2654435761) >> 7) % 1000) as f64 / 1000.0
}

fn end(ip: &str) -> NodeContext {
    serde_json::from_value(serde_json::json!({
        "ip": ip, "interface": "enp194s0np0", "mtu": 9000, "roce_mtu": 4096,
        "link_gbps": 100.0, "virtual_link": false, "pcie": null, "pcie_gbps": null,
        "rdma": {"device": "rocep194s0", "port": 1, "gid_index": 1, "port_up": true, "transport": "roce"},
        "rdma_devices": 1, "iperf3": true, "perftest": true
    }))
    .unwrap()
}

/// A `bench run --sweep`: TCP and RDMA latency and bandwidth, the size
/// sweep; `speed` scales the TCP figures (the "after" run is faster).
fn bench_run(dir: &Path, speed: f64, rdma_speed: f64) {
    fs::create_dir_all(dir).unwrap();
    let perftest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perftest");
    let rtts: Vec<u64> = (0..2000)
        .map(|i| {
            let base = 120_000.0 / speed + 30_000.0 * jitter(i);
            let tail = if i % 100 == 0 { 150_000.0 } else { 0.0 };
            (base + tail) as u64
        })
        .collect();
    fs::write(dir.join("p0-tcp-lat.txt"), tcp::format_latency_log(&rtts)).unwrap();
    let streams: Vec<tcp::StreamResult> = (0..4)
        .map(|_| tcp::StreamResult {
            bytes: (1.6e9 * speed) as u64,
            seconds: 1.0,
        })
        .collect();
    fs::write(
        dir.join("p0-tcp-bw-4.txt"),
        tcp::format_bandwidth_log(&streams),
    )
    .unwrap();
    fs::copy(
        perftest.join("write_lat_tabs.txt"),
        dir.join("p0-ib_write_lat.txt"),
    )
    .unwrap();
    // perftest's header, then rows as a 100 GbE link behind PCIe 4.0 x4 gives them.
    let sweep = fs::read_to_string(perftest.join("write_bw_gbits_sweep.txt")).unwrap();
    let header: String = sweep
        .lines()
        .take_while(|l| !l.contains("#bytes"))
        .chain(sweep.lines().filter(|l| l.contains("#bytes")))
        .map(|l| format!("{l}\n"))
        .collect();
    let gbps = |size: u64| 54.0 * rdma_speed * size as f64 / (size as f64 + 12288.0);
    let row = |size: u64, iters: u64| {
        let g = gbps(size);
        format!(
            " {size:<10} {iters:<14} {:<18.6} {g:<20.6} {:.6}\n",
            g * 1.01,
            g * 1e9 / 8.0 / size as f64 / 1e6
        )
    };
    let rows: String = (1..=23).map(|e| row(1u64 << e, 5000)).collect();
    let dashes = format!("{}\n", "-".repeat(87));
    fs::write(
        dir.join("p0-ib_write_bw-sweep.txt"),
        format!("{header}{rows}{dashes}"),
    )
    .unwrap();
    fs::write(
        dir.join("p0-ib_write_bw-4.txt"),
        format!("{header}{}{dashes}", row(65536, 8_000_000)),
    )
    .unwrap();
    let leg = |id: &str, kind, streams| LegRecord {
        id: id.into(),
        kind,
        streams,
        commands: vec![],
        status: LegStatus::Ran,
    };
    let rec = RunRecord {
        schema_version: results::SCHEMA_VERSION,
        started_utc: "2026-11-27T10:00:00Z".into(),
        options: BenchOptions {
            peer: "node2".into(),
            peer_from: None,
            peer_halobox: "halobox".into(),
            ssh_options: vec![],
            paths: vec![PathSpec {
                local_ip: "192.168.100.1".parse().unwrap(),
                peer_ip: "192.168.100.2".parse().unwrap(),
            }],
            rdma: RdmaMode::On,
            duration_s: 10,
            streams: 4,
            port: 5301,
            latency_samples: 2000,
            sweep: true,
            local_in: None,
            peer_container: None,
            host_why: None,
            link: None,
        },
        paths: vec![PathRecord {
            id: "p0".into(),
            local_ip: "192.168.100.1".parse().unwrap(),
            peer_ip: "192.168.100.2".parse().unwrap(),
            local: end("192.168.100.1"),
            peer: end("192.168.100.2"),
            legs: vec![
                leg("p0-tcp-lat", LegKind::TcpLatency, 1),
                leg("p0-tcp-bw-4", LegKind::TcpBandwidth, 4),
                leg("p0-ib_write_lat", LegKind::RdmaLatency, 1),
                leg("p0-ib_write_bw-4", LegKind::RdmaBandwidth, 4),
                leg("p0-ib_write_bw-sweep", LegKind::RdmaSweep, 1),
            ],
            rdma_counters: None,
        }],
    };
    fs::write(
        dir.join(results::RUN_FILE),
        serde_json::to_string_pretty(&rec).unwrap() + "\n",
    )
    .unwrap();
    let res = results::derive(&rec, dir);
    assert!(
        res.rows.iter().all(|r| r.status != "failed"),
        "{:#?}",
        res.rows
    );
    fs::write(
        dir.join(results::RESULTS_FILE),
        serde_json::to_string_pretty(&res).unwrap() + "\n",
    )
    .unwrap();
}

/// A `bench serving` record; `speed` scales its throughput.
fn serving_record(model: &str, speed: f64) -> ServingRecord {
    let levels = [1u32, 2, 4, 8]
        .iter()
        .map(|&c| {
            let c64 = f64::from(c);
            let requests = (0..32)
                .map(|i| {
                    let j = jitter(u64::from(c * 100 + i));
                    let ttft =
                        ((60.0 + 35.0 * c64) / speed * (1.0 + 0.4 * j) * 100.0).round() / 100.0;
                    let itl: Vec<f64> = (0..16)
                        .map(|k| {
                            let v =
                                (18.0 + 4.0 * c64) / speed * (1.0 + 0.5 * jitter(u64::from(k + i)));
                            (v * 100.0).round() / 100.0
                        })
                        .collect();
                    RequestRecord {
                        ttft_ms: Some(ttft),
                        latency_ms: ttft + itl.iter().sum::<f64>(),
                        itl_ms: itl,
                        output_tokens: 17,
                        prompt_tokens: Some(256),
                        error: None,
                    }
                })
                .collect::<Vec<_>>();
            let per_request_s = requests[0].latency_ms / 1000.0;
            LevelRecord {
                concurrency: c,
                duration_s: per_request_s * 32.0 / c64,
                requests,
            }
        })
        .collect();
    ServingRecord {
        schema_version: record::SCHEMA_VERSION,
        started_utc: "2026-11-27T11:00:00Z".into(),
        options: ServingOptions {
            endpoint: Endpoint {
                authority: "192.168.100.1:8000".into(),
            },
            endpoint_from: "the serve recorded for cluster.toml".into(),
            model: None,
            concurrency: vec![1, 2, 4, 8],
            requests: 32,
            input_tokens: 256,
            output_tokens: 17,
            seed: 1,
            timeout_s: 300,
            key: "none".into(),
        },
        model: model.into(),
        server: "vllm".into(),
        prompt_lengths: crate::bench::serving::prompts::EXACT.into(),
        levels,
        partial: None,
    }
}

/// A `bench collective` record of two nodes (gloo), all-reduce and
/// all-gather at four sizes; `speed` scales the bandwidth.
fn collective_record(speed: f64) -> Record {
    let nodes = (0..2)
        .map(|i| NodeConfig {
            name: Some(format!("node{}", i + 1)),
            ssh: format!("root@node{}", i + 1),
            ip: std::net::Ipv4Addr::new(192, 168, 100, i as u8 + 1),
            container: "vllm".into(),
            backend: NodeBackend::Podman,
            cpus: None,
            env: Default::default(),
            memory_bandwidth_gbs: None,
        })
        .collect();
    let cfg = ClusterConfig::new(nodes);
    let reports: Vec<_> = cfg
        .nodes
        .iter()
        .map(|n| test_report(n.ip, false, Resolved::Ethernet))
        .collect();
    let sizes = [4096u64, 65536, 1 << 20, 16 << 20];
    let opts = cplan::Options {
        sizes: sizes.to_vec(),
        ops: vec![Op::AllReduce, Op::AllGather],
        iters: 5,
        warmup: 1,
        port: 29511,
        backend: None,
        python: None,
        timeout_s: 60,
    };
    let lines = |rank: usize| {
        let mut s = format!(
            "{{\"event\": \"start\", \"rank\": {rank}, \"torch\": \"2.11.0\", \"backend\": \"gloo\", \"why\": \"no GPU\"}}\n"
        );
        for op in ["all_reduce", "all_gather"] {
            for size in sizes {
                // 40 µs of latency, then up to about 5.5 GB/s (44 Gb/s) of algorithm bandwidth.
                let factor = if op == "all_gather" { 0.8 } else { 1.0 };
                let t = 40.0 + size as f64 / (5.5e3 * speed * factor);
                let times: Vec<String> = (0..5)
                    .map(|i| format!("{:.2}", t * (1.0 + 0.05 * jitter(i + size))))
                    .collect();
                s.push_str(&format!(
                    "{{\"event\": \"result\", \"rank\": {rank}, \"op\": \"{op}\", \"size\": {size}, \"bytes\": {size}, \"elements\": {}, \"times_us\": [{}], \"correct\": true, \"wrong\": 0}}\n",
                    size / 4,
                    times.join(", ")
                ));
            }
        }
        s.push_str(&format!("{{\"event\": \"done\", \"rank\": {rank}}}\n"));
        s
    };
    Record {
        schema_version: crate::bench::collective::report::SCHEMA_VERSION,
        started_utc: "2026-11-27T12:00:00Z".into(),
        plan: cplan::build(&cfg, &reports, &opts).unwrap(),
        causes: vec![],
        ranks: (0..2)
            .map(|r| RankRun {
                exit_code: Some(0),
                error: None,
                output: lines(r),
                stdout: lines(r),
            })
            .collect(),
    }
}

#[test]
#[ignore = "writes tests/fixtures/bench-runs/"]
fn write_fixture_runs() {
    let root = root();
    bench_run(&root.join("rdma-before"), 1.0, 0.85);
    bench_run(&root.join("rdma-after"), 1.6, 1.0);
    for (name, speed) in [("serving-before", 1.0), ("serving-after", 1.3)] {
        let rec = serving_record("Qwen/Qwen3-8B", speed);
        record::save(&root.join(name), &rec).unwrap();
    }
    let rec = collective_record(1.0);
    let res = crate::bench::collective::report::derive(&rec);
    assert_eq!(res.status, "ok", "{:?}", res.failures);
    crate::bench::collective::run::save(&root.join("collective"), &rec, &res).unwrap();
    let legs = [
        ("ethernet", Transport::Ethernet, 1.0),
        ("configured", Transport::Roce, 1.5),
    ];
    let ab = AbResults {
        kind: "bench serving --ab-transport".into(),
        plan: AbPlan {
            cluster: "/root/.config/halobox/cluster.toml".into(),
            engine: Engine::Vllm,
            endpoint: "http://192.168.100.1:8000".into(),
            serve_argv: vec!["serve".into(), "Qwen/Qwen3-8B".into()],
            legs: legs
                .iter()
                .map(|(n, t, _)| Leg {
                    name: (*n).into(),
                    transport: *t,
                })
                .collect(),
        },
        legs: legs
            .iter()
            .map(|(n, t, speed)| LegResult {
                name: (*n).into(),
                transport: *t,
                nodes: vec![],
                results: Some(record::derive(&serving_record("Qwen/Qwen3-8B", *speed))),
                error: None,
                saved: None,
            })
            .collect(),
        ratios: vec![],
        changed: true,
        restored: true,
        interrupted: None,
    };
    let dir = root.join("ab");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(AB_FILE),
        serde_json::to_string_pretty(&ab).unwrap() + "\n",
    )
    .unwrap();
}
