//! `halobox cluster doctor` and `cluster bench` across three test nodes
//! (scripts/netns/nodes.sh: real sshd, c with MTU 1500), run from node a.
//! Needs root, iproute2, openssh-server, iputils-ping, iperf3 and perftest
//! (scripts/test.sh installs them); a missing piece fails the test.

use std::process::Output;

mod common;
use common::netns::Nodes;

/// Nodes a, b (MTU 9000) and c (MTU 1500) in one cluster file.
fn three() -> (Nodes, std::path::PathBuf) {
    let nodes = Nodes::up(&["9000", "9000", "1500"]);
    let file = nodes.path("cluster.toml");
    let mut text = format!(
        "halobox = \"{}\"\nssh_options = {}\n",
        env!("CARGO_BIN_EXE_halobox"),
        serde_json::to_string(&nodes.ssh_options()).unwrap()
    );
    for (i, x) in ["a", "b", "c"].iter().enumerate() {
        let ip = nodes.ip(i as u32 + 1);
        text.push_str(&format!(
            "[[node]]\nname = \"{x}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"host\"\n"
        ));
    }
    std::fs::write(&file, text).unwrap();
    (nodes, file)
}

/// The row `id` of `cluster doctor --json`'s table.
fn row<'a>(v: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no row {id}: {v:#}"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn doctor_across_three_nodes_names_the_mtu_mismatch() {
    let (nodes, file) = three();
    let f = file.to_str().unwrap();
    let out = nodes.halobox('a', &["cluster", "doctor", "--cluster", f]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("FAIL fleet.mtu: data-plane MTU differs: c 1500 (the others 9000)"),
        "{t}"
    );
    let header = t.lines().next().unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["CHECK", "a", "b", "c"]
    );
    let first = t.lines().nth(1).unwrap();
    assert!(first.contains("FAIL"), "worst first: {t}");
    let reach = t
        .lines()
        .find(|l| l.starts_with("fleet.reachable"))
        .unwrap();
    assert_eq!(
        reach.split_whitespace().collect::<Vec<_>>()[1..],
        ["PASS"; 3],
        "{t}"
    );

    let out = nodes.halobox('a', &["cluster", "doctor", "--json", "--cluster", f]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["failed"], true);
    let cells: Vec<&str> = row(&v, "fleet.mtu")["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(cells, ["PASS", "PASS", "FAIL"]);
    // Every test node FAILs checks of its own (no GPU): the exit code says
    // the mismatch only if fleet.mtu is among the failing rows and the
    // cross-node checks that hold pass.
    let worst = |v: &serde_json::Value, id: &str| -> String {
        row(v, id)["worst"].as_str().unwrap().to_string()
    };
    let failing_fleet: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["worst"] == "FAIL")
        .filter_map(|r| r["id"].as_str())
        .filter(|id| id.starts_with("fleet."))
        .collect();
    assert_eq!(failing_fleet, ["fleet.mtu"], "{v:#}");
    for id in [
        "fleet.reached",
        "fleet.reachable",
        "fleet.kernel",
        "fleet.halobox",
    ] {
        assert_eq!(worst(&v, id), "PASS", "{id}: {v:#}");
    }

    // Node c's halobox (at cluster.toml's path, in each node's own /root)
    // reports another version: fleet.halobox FAILs and names it.
    for x in ['a', 'b', 'c'] {
        let script = if x == 'c' {
            "printf '#!/bin/sh\\n[ \"$1\" = --version ] && { echo halobox 0.0.0-old; exit 0; }\\nexec %s \"$@\"\\n' \"$1\" >/root/bin/halobox && chmod +x /root/bin/halobox".to_string()
        } else {
            "ln -sf \"$1\" /root/bin/halobox".to_string()
        };
        let out = nodes
            .on_node(
                x,
                &[
                    "sh",
                    "-c",
                    &format!("mkdir -p /root/bin && {script}"),
                    "sh",
                    env!("CARGO_BIN_EXE_halobox"),
                ],
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    let versions = nodes.path("versions.toml");
    std::fs::write(
        &versions,
        std::fs::read_to_string(&file).unwrap().replacen(
            &format!("halobox = \"{}\"", env!("CARGO_BIN_EXE_halobox")),
            "halobox = \"/root/bin/halobox\"",
            1,
        ),
    )
    .unwrap();
    let out = nodes.halobox(
        'a',
        &[
            "cluster",
            "doctor",
            "--json",
            "--cluster",
            versions.to_str().unwrap(),
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let halobox = row(&v, "fleet.halobox");
    assert_eq!(halobox["worst"], "FAIL", "{halobox:#}");
    assert!(
        halobox["summary"]
            .as_str()
            .unwrap()
            .contains("halobox differs: c 0.0.0-old (the others "),
        "{halobox:#}"
    );
    assert_eq!(worst(&v, "fleet.reached"), "PASS", "{v:#}");

    // A node that cannot be reached is a named FAIL row, not a crash.
    let broken = nodes.path("broken.toml");
    let nobody = nodes.ip(99);
    std::fs::write(
        &broken,
        std::fs::read_to_string(&file).unwrap()
            + &format!("[[node]]\nname = \"gone\"\nssh = \"root@{nobody}\"\nip = \"{nobody}\"\nbackend = \"host\"\n"),
    )
    .unwrap();
    let out = nodes.halobox(
        'a',
        &["cluster", "doctor", "--cluster", broken.to_str().unwrap()],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("FAIL fleet.reached"), "{t}");
    assert!(
        t.contains(&format!(
            "gone FAIL: node gone (root@{nobody}): cannot reach it over ssh"
        )),
        "{t}"
    );
    assert!(t.contains(&format!("cannot ping gone ({nobody})")), "{t}");
}

#[test]
fn bench_across_three_nodes_prints_the_matrices() {
    let (nodes, file) = three();
    let save = nodes.path("runs");
    let out = nodes.halobox(
        'a',
        &[
            "cluster",
            "bench",
            "--duration",
            "1",
            "--save",
            save.to_str().unwrap(),
            "--cluster",
            file.to_str().unwrap(),
        ],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    for pair in ["a ↔ b", "a ↔ c", "b ↔ c"] {
        assert!(t.contains(&format!("{pair}: saved in")), "{pair}: {t}");
    }
    assert!(t.contains("TCP bandwidth, Gb/s"), "{t}");
    let matrix: Vec<&str> = t
        .lines()
        .skip_while(|l| !l.starts_with("TCP bandwidth"))
        .skip(2)
        .take(3)
        .collect();
    for (i, row) in matrix.iter().enumerate() {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), 4, "{t}");
        for (j, c) in cells[1..].iter().enumerate() {
            if i == j {
                assert_eq!(*c, "-");
            } else {
                assert!(c.parse::<f64>().is_ok_and(|v| v > 0.0), "{c}: {t}");
            }
        }
    }
    // No RDMA device here: the report says so for the RDMA legs.
    assert!(
        t.contains("RDMA bandwidth, Gb/s (ib_write_bw): no pair measured it"),
        "{t}"
    );
    assert!(
        t.contains("x a ↔ b: skipped") || t.contains("x a ↔ b: failed"),
        "{t}"
    );
    // Each pair's run reads back with `bench report`, so `bench compare` works.
    let dir = save.join("a--b");
    let rep = nodes.halobox(
        'a',
        &[
            "bench",
            "compare",
            dir.to_str().unwrap(),
            dir.to_str().unwrap(),
        ],
    );
    assert!(rep.status.success(), "{}", text(&rep));
}
