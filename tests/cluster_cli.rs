//! The cluster and serve commands through the real binary, on host
//! snapshots and cluster files: exact output, usage errors, secrets masked.

mod common;

use common::{fixture, halobox};

fn out(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn join_dry_run_prints_env_lines_and_ray_start() {
    let o = halobox()
        .args([
            "cluster",
            "join",
            "--head",
            "192.168.100.1",
            "--ip",
            "192.168.100.1",
        ])
        .args([
            "--sysroot",
            &fixture("strix-e810"),
            "--num-cpus",
            "16",
            "--env",
            "NCCL_IB_TC=106",
            "--node-env",
            "NCCL_DEBUG=INFO",
            "--dry-run",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        [
            "NCCL_SOCKET_IFNAME==enp194s0np0",
            "GLOO_SOCKET_IFNAME=enp194s0np0",
            "NCCL_IB_HCA==rocep194s0:1",
            "NCCL_IB_GID_INDEX=1",
            "NCCL_NET_GDR_LEVEL=0",
            "VLLM_HOST_IP=192.168.100.1",
            "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1",
            "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES=1",
            "NCCL_IB_TC=106",
            "NCCL_DEBUG=INFO",
            "ray start --head --port=6379 --node-ip-address=192.168.100.1 --num-gpus=1 --num-cpus=16 --disable-usage-stats",
        ]
    );
    assert!(
        stdout.starts_with("# node 192.168.100.1 (head): transport roce: auto:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# runs as: halobox enter vllm -- env NCCL_SOCKET_IFNAME==enp194s0np0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# this node's own (vLLM must not copy the head's): NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME NCCL_IB_HCA NCCL_IB_GID_INDEX VLLM_HOST_IP NCCL_DEBUG\n"),
        "{stdout}"
    );
    // A per-node data-plane variable cannot be set by hand.
    let o = halobox()
        .args([
            "cluster",
            "join",
            "--head",
            "192.168.100.1",
            "--ip",
            "192.168.100.1",
        ])
        .args(["--sysroot", &fixture("strix-e810"), "--dry-run"])
        .args(["--env", "NCCL_IB_GID_INDEX=3"])
        .output()
        .unwrap();
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--env NCCL_IB_GID_INDEX is computed on each node from its own facts"),
        "{stderr}"
    );
}

#[test]
fn join_json_on_a_snapshot_with_the_host_backend() {
    let o = halobox()
        .args([
            "cluster",
            "join",
            "--head",
            "10.0.0.2",
            "--ip",
            "10.0.0.1",
            "--backend",
            "host",
        ])
        .args([
            "--sysroot",
            &fixture("strix-cx5"),
            "--num-cpus",
            "8",
            "--dry-run",
            "--json",
        ])
        .args(["--ray-arg=--object-store-memory=1000000"])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["env"]["gid_index"], 3);
    assert_eq!(r["env"]["rdma_device"], "mlx5_0");
    assert_eq!(r["env"]["transport"], "roce");
    assert_eq!(r["port_free"], serde_json::Value::Null);
    assert_eq!(r["container"]["backend"], "host");
    let cmd: Vec<&str> = r["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(cmd[0], "env");
    assert!(cmd.ends_with(&[
        "--num-cpus=8",
        "--disable-usage-stats",
        "--object-store-memory=1000000"
    ]));
}

#[test]
fn join_errors_name_the_node_and_the_fix() {
    let o = halobox()
        .args([
            "cluster",
            "join",
            "--head",
            "192.168.100.1",
            "--ip",
            "192.168.100.2",
        ])
        .args([
            "--sysroot",
            &fixture("broken-e810"),
            "--transport",
            "roce",
            "--dry-run",
        ])
        .output()
        .unwrap();
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr.contains("node 192.168.100.2: no interface on this node holds 192.168.100.2"),
        "{stderr}"
    );
    let o = halobox()
        .args([
            "cluster",
            "join",
            "--head",
            "192.168.100.1",
            "--ip",
            "192.168.100.1",
        ])
        .args(["--sysroot", &fixture("strix-e810")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(out(&o).1.contains("add --dry-run"), "{}", out(&o).1);
}

fn cluster_file(dir: &tempfile::TempDir, body: &str) -> String {
    let p = dir.path().join("cluster.toml");
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

const E810_PAIR: &str = "transport = \"auto\"\n[[node]]\nssh = \"root@n1\"\nip = \"192.168.100.1\"\n[[node]]\nssh = \"root@n2\"\nip = \"192.168.100.2\"\n";

#[test]
fn serve_dry_run_masks_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(&dir, E810_PAIR);
    let secret = "hf_supersecretvalue123";
    let o = halobox()
        .args(["serve", "Qwen/Qwen3-30B-A3B", "--cluster", &file])
        .args([
            "--sysroot",
            &fixture("strix-e810"),
            "--dry-run",
            "--",
            "--max-num-seqs",
            "4",
        ])
        .env("HF_TOKEN", secret)
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(!stdout.contains(secret) && !stderr.contains(secret));
    assert!(stdout.contains("HF_TOKEN=********"), "{stdout}");
    assert!(stdout.contains("NCCL_IB_GID_INDEX=1\n"), "{stdout}");
    assert!(stdout.contains(
        "vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2 --distributed-executor-backend ray --gpu-memory-utilization 0.9 --port 8000 --enforce-eager --max-num-seqs 4\n"
    ), "{stdout}");
    // Not on the head: say where to run it.
    let o = halobox()
        .args([
            "serve",
            "m",
            "--cluster",
            &file,
            "--sysroot",
            &fixture("strix-cx5"),
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).1.contains("runs on the head"), "{}", out(&o).1);
}

#[test]
fn config_errors_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (body, want) in [
        ("transport = \"rdma\"\n", "unknown transport \"rdma\""),
        ("", "the head is missing"),
        (
            &E810_PAIR.replace("192.168.100.2", "192.168.100.1"),
            "same address 192.168.100.1",
        ),
    ] {
        let file = cluster_file(&dir, body);
        let o = halobox()
            .args(["cluster", "up", "--cluster", &file])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{body}");
        assert!(out(&o).1.contains(want), "{}", out(&o).1);
    }
    let o = halobox()
        .args([
            "cluster",
            "status",
            "--cluster",
            &dir.path().join("none.toml").display().to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(out(&o).1.contains("halobox cluster init"), "{}", out(&o).1);
}

#[test]
fn init_writes_a_file_that_loads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml").display().to_string();
    let o = halobox()
        .args([
            "cluster",
            "init",
            "--cluster",
            &file,
            "--backend",
            "host",
            "--transport",
            "roce",
        ])
        .args([
            "--node",
            "root@n1,192.168.100.1",
            "--node",
            "n2,192.168.100.2",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", out(&o).1);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("transport = \"roce\""), "{text}");
    let cfg = halobox::cluster::config::load(std::path::Path::new(&file)).unwrap();
    assert_eq!(cfg.nodes.len(), 2);
    assert_eq!(cfg.head().ssh, "root@n1");
    // No overwrite without --force; bad node specs are usage errors.
    let o = halobox()
        .args([
            "cluster",
            "init",
            "--cluster",
            &file,
            "--node",
            "n3,10.0.0.3",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = halobox()
        .args(["cluster", "init", "--print", "--node", "n3"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(out(&o).1.contains("SSH_TARGET,IP"));
}

#[test]
fn down_dry_run_prints_ssh_commands() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(&dir, E810_PAIR);
    let o = halobox()
        .args(["cluster", "down", "--dry-run", "--cluster", &file])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("root@n1: ssh -o StrictHostKeyChecking=yes -o BatchMode=yes"),
        "{stdout}"
    );
    // `ray stop` runs under the guard that stops it when halobox goes away.
    assert!(
        stdout.contains("-- root@n2 'setsid -w sh -c ")
            && stdout.contains("halobox-guard halobox enter vllm -- ray stop'"),
        "{stdout}"
    );
    assert!(!stdout.contains("StrictHostKeyChecking=no"));
}
