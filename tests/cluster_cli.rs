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
        stdout.contains("# per node (vLLM must not copy the head's): NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME NCCL_IB_HCA NCCL_IB_GID_INDEX NCCL_IB_DISABLE VLLM_HOST_IP NCCL_DEBUG\n"),
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
    // A key by default: the cluster's file, named and not made by a dry run.
    let keyfile = dir.path().join("cluster.api-key");
    assert!(
        stdout.contains(&format!(
            "# an API key is required (the cluster's, kept 0600 in {}",
            keyfile.display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("VLLM_API_KEY=********"), "{stdout}");
    assert!(!keyfile.exists());
    assert!(stdout.contains(
        "vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2 --distributed-executor-backend ray --gpu-memory-utilization 0.9 --host 192.168.100.1 --port 8000 --enforce-eager --middleware halobox_require_key.RequireKey --max-num-seqs 4\n"
    ), "{stdout}");
    assert!(!stdout.contains("--preflight"), "{stdout}");
}

/// `--preflight` puts the collective before vLLM in the plan; llama.cpp refuses it.
#[test]
fn serve_dry_run_with_the_collective_preflight() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(&dir, E810_PAIR);
    let o = halobox()
        .args(["serve", "m", "--cluster", &file, "--preflight"])
        .args(["--sysroot", &fixture("strix-e810"), "--dry-run"])
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("# before vLLM starts: `halobox bench collective --sizes 64K,1M --op all_reduce` across the 2 node(s) (--preflight); a FAIL refuses the serve"),
        "{stdout}"
    );
    let llama = cluster_file(&dir, &format!("engine = \"llama.cpp\"\n{E810_PAIR}"));
    let o = halobox()
        .args([
            "serve",
            "/models/m.gguf",
            "--cluster",
            &llama,
            "--preflight",
        ])
        .args(["--sysroot", &fixture("strix-e810"), "--dry-run"])
        .output()
        .unwrap();
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--preflight is vLLM's"), "{stderr}");
}

#[test]
fn serve_dry_run_from_a_machine_that_is_not_the_head() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(&dir, E810_PAIR);
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
        .env_remove("HF_TOKEN")
        .env_remove("VLLM_API_KEY")
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    // The split first: the model is not here, so plan cannot choose and
    // every node serves, as before.
    let (first, rest) = stdout.split_once('\n').unwrap();
    assert!(
        first.starts_with("# split: every node, as before: plan could not choose (cannot read the model: m@main is not in this machine's Hugging Face cache"),
        "{stdout}"
    );
    // The env is unknown off the head: only the key (masked) comes next.
    assert!(
        rest.starts_with(
            "VLLM_API_KEY=******** (passed on stdin)\nvllm serve m --tensor-parallel-size 2 --distributed-executor-backend ray"
        ),
        "{stdout}"
    );
    assert!(!stdout.lines().any(|l| l.starts_with("NCCL_")), "{stdout}");
    assert!(
        stdout.contains("# runs as: halobox enter vllm -- sh -c ")
            && stdout.contains(" halobox-serve vllm serve m "),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "# note: this machine does not hold the head's address 192.168.100.1 (root@n1)"
        ) && stdout.contains("(ssh root@n1 halobox serve m …)"),
        "{stdout}"
    );
    // Without --dry-run it still refuses: vLLM's driver runs on the head.
    let o = halobox()
        .args(["serve", "m", "--cluster", &file])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).1.contains("runs on the head"), "{}", out(&o).1);
}

fn serve_dry(file: &str, args: &[&str]) -> std::process::Output {
    halobox()
        .args(["serve", "m", "--cluster", file])
        .args(["--sysroot", &fixture("strix-e810"), "--dry-run"])
        .args(args)
        .env_remove("HF_TOKEN")
        .env_remove("VLLM_API_KEY")
        .output()
        .unwrap()
}

#[test]
fn serve_fits_pipeline_parallel_to_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(&dir, E810_PAIR);
    let o = serve_dry(&file, &["--", "--pipeline-parallel-size", "2"]);
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("vllm serve m --tensor-parallel-size 1 --distributed-executor-backend ray")
            && stdout.contains("--pipeline-parallel-size 2\n"),
        "{stdout}"
    );
    let o = serve_dry(&file, &["--tp", "2", "--", "-pp", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        out(&o).1.contains(
            "--tp 2 × --pipeline-parallel-size 2 = 4 GPU(s), the cluster has 2 node(s) with one GPU each"
        ),
        "{}",
        out(&o).1
    );
    let o = serve_dry(&file, &["--", "--pipeline-parallel-size", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        out(&o).1.contains("does not divide the 2 node(s)"),
        "{}",
        out(&o).1
    );
    let o = serve_dry(&file, &["--tp", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn serve_api_key_goes_on_stdin_and_is_masked() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(&dir, E810_PAIR);
    let o = serve_dry(&file, &["--no-api-key"]);
    assert!(o.status.success(), "{}", out(&o).1);
    assert!(!out(&o).0.contains("VLLM_API_KEY"), "{}", out(&o).0);
    assert!(
        out(&o).0.contains("# no API key (--no-api-key)"),
        "{}",
        out(&o).0
    );
    let key = "sk-local-very-secret-42";
    let token = "hf_anothersecret77";
    let o = halobox()
        .args(["serve", "m", "--cluster", &file])
        .args(["--sysroot", &fixture("strix-e810"), "--dry-run"])
        .args(["--host", "192.168.1.50", "--clear-cache"])
        .env("VLLM_API_KEY", key)
        .env("HF_TOKEN", token)
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    for secret in [key, token] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{stdout}"
        );
    }
    assert!(stdout.contains("HF_TOKEN=********"), "{stdout}");
    assert!(stdout.contains("VLLM_API_KEY=********"), "{stdout}");
    assert!(
        stdout.contains("# an API key is required (from VLLM_API_KEY in this environment)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("--gpu-memory-utilization 0.9 --host 192.168.1.50 --port 8000"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# first, in the head's container: rm -rf -- \"${VLLM_CACHE_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm}/torch_compile_cache\""),
        "{stdout}"
    );
    assert!(stdout.contains("IFS= read -r VLLM_API_KEY"), "{stdout}");
    // The key as an argument is refused: it would show in `ps`.
    let o = serve_dry(&file, &["--", "--api-key", key]);
    assert_eq!(o.status.code(), Some(2));
    assert!(out(&o).1.contains("export VLLM_API_KEY"), "{}", out(&o).1);
    let o = serve_dry(&file, &["--host", "not-an-address"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn join_json_on_a_snapshot_needs_no_engine() {
    let o = halobox()
        .args([
            "cluster",
            "join",
            "--head",
            "192.168.100.1",
            "--ip",
            "192.168.100.1",
        ])
        .args(["--sysroot", &fixture("strix-e810"), "--dry-run", "--json"])
        // No engine can be reached: the plan must not need one.
        .env("CONTAINER_HOST", "unix:///nonexistent/podman.sock")
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    assert!(o.status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["container"]["backend"], "toolbox");
    assert_eq!(r["container"]["found"], false);
    assert!(
        r["not_inspected"]
            .as_str()
            .unwrap()
            .contains("toolbox container vllm was not inspected"),
        "{stdout}"
    );
    assert_eq!(r["prefix_len"], 30);
    assert_eq!(r["port_free"], serde_json::Value::Null);
    assert_eq!(r["env"]["gid_index"], 1);
    let cmd: Vec<&str> = r["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(cmd[..5], ["halobox", "enter", "vllm", "--", "env"]);
}

#[test]
fn unsupported_topologies_in_cluster_toml_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (body, want) in [
        (
            E810_PAIR.replace("root@n2", "admin@n1"),
            "nodes root@n1 and admin@n1 are the same machine (n1)",
        ),
        (
            E810_PAIR.replace(
                "ip = \"192.168.100.2\"",
                "ip = [\"192.168.100.2\", \"192.168.101.2\"]",
            ),
            "[192.168.100.2, 192.168.101.2]",
        ),
    ] {
        let file = cluster_file(&dir, &body);
        let o = halobox()
            .args(["cluster", "up", "--dry-run", "--cluster", &file])
            .output()
            .unwrap();
        let err = out(&o).1;
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(want) && err.contains("one data-plane NIC per node"),
            "{err}"
        );
    }
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
fn timeouts_outside_one_second_to_one_day_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for t in ["0", "86401", "9223372036854775807"] {
        let file = cluster_file(&dir, &format!("timeout_s = {t}\n{E810_PAIR}"));
        let o = halobox()
            .args(["cluster", "up", "--dry-run", "--cluster", &file])
            .output()
            .unwrap();
        let err = out(&o).1;
        assert_eq!(o.status.code(), Some(2), "timeout_s = {t}: {err}");
        assert!(
            err.contains(&format!("timeout_s {t} is not a usable timeout"))
                && err.contains("1 day"),
            "{err}"
        );
    }
    let file = cluster_file(&dir, E810_PAIR);
    for t in [
        "0",
        "86401",
        "18446744073709551615",
        "99999999999999999999999",
    ] {
        let o = halobox()
            .args([
                "cluster",
                "up",
                "--dry-run",
                "--cluster",
                &file,
                "--timeout",
                t,
            ])
            .output()
            .unwrap();
        let err = out(&o).1;
        assert_eq!(o.status.code(), Some(2), "--timeout {t}: {err}");
        assert!(err.contains("--timeout") && err.contains("86400"), "{err}");
    }
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

/// An IPv4 address this machine holds (not loopback), from the same facts
/// halobox reads.
fn a_local_address() -> String {
    let facts = halobox::host::gather(
        halobox::host::HostRoot::live(),
        halobox::host::GatherOptions::default(),
    );
    facts
        .network
        .interfaces
        .iter()
        .flat_map(|i| i.ipv4.iter())
        .map(|a| a.address)
        .find(|a| !a.is_loopback())
        .expect("this machine has a non-loopback IPv4 address")
        .to_string()
}

#[test]
fn serve_on_the_head_hands_secrets_on_stdin_and_clears_the_cache() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ip = a_local_address();
    let file = cluster_file(
        &dir,
        &format!("[[node]]\nssh = \"head\"\nip = \"{ip}\"\nbackend = \"host\"\n"),
    );
    // A stand-in `vllm` that records what it was given, and an `ssh` that
    // answers the Ray query on the head: one alive node with a GPU.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let ssh = bin.join("ssh");
    std::fs::write(
        &ssh,
        format!("#!/bin/sh\necho '{{\"nodes\": [{{\"ip\": \"{ip}\", \"id\": \"n\", \"alive\": true, \"head\": true, \"resources\": {{\"GPU\": 1.0}}}}], \"error\": null}}'\n"),
    )
    .unwrap();
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let vllm = bin.join("vllm");
    std::fs::write(
        &vllm,
        "#!/bin/sh\n{ echo \"HF_TOKEN=$HF_TOKEN\"; echo \"VLLM_API_KEY=$VLLM_API_KEY\"; echo \"ARGS=$*\"; \
         ls \"$HOME/.cache/vllm\"; } > \"$SERVE_OUT\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&vllm, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".cache/vllm/torch_compile_cache/0a1b2c3d4e/rank_0_0"))
        .unwrap();
    std::fs::create_dir_all(home.join(".cache/vllm/modelinfos")).unwrap();
    let record = dir.path().join("record.txt");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let (token, key) = ("hf_livesecret1", "sk-livesecret2");
    let o = halobox()
        .args(["serve", "m", "--cluster", &file, "--clear-cache"])
        .args(["--host", &ip])
        .env("PATH", &path)
        .env("HOME", &home)
        .env_remove("VLLM_CACHE_ROOT")
        .env_remove("XDG_CACHE_HOME")
        .env("SERVE_OUT", &record)
        .env("HF_TOKEN", token)
        .env("VLLM_API_KEY", key)
        .output()
        .unwrap();
    let (stdout, stderr) = out(&o);
    // The stand-in exits at once: nothing may be reported as served.
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("vLLM exited before its API answered"),
        "{stderr}"
    );
    assert!(!stdout.contains("serving "), "{stdout}");
    assert!(
        !stdout.contains(token) && !stderr.contains(key) && !stderr.contains(token),
        "{stdout}{stderr}"
    );
    let got = std::fs::read_to_string(&record).unwrap();
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines[0], format!("HF_TOKEN={token}"));
    assert_eq!(lines[1], format!("VLLM_API_KEY={key}"));
    assert_eq!(
        lines[2],
        format!(
            "ARGS=serve m --tensor-parallel-size 1 --distributed-executor-backend ray --gpu-memory-utilization 0.9 --host {ip} --port 8000 --enforce-eager --middleware halobox_require_key.RequireKey"
        )
    );
    // The compile cache is gone, the rest of vLLM's cache stays.
    assert_eq!(lines[3..], ["modelinfos"]);
    assert!(stderr.contains("halobox: removed"), "{stderr}");
}

/// `cluster enable --dry-run` on a one-node cluster whose head is this
/// machine (an `ssh` that runs the command here): it refuses while the
/// halobox its root units would run, or the cluster file they read, can be
/// changed by another user (a 0777 binary, a file of uid 4242, a 0666 file,
/// a folder anyone writes), naming the path and the fix, and plans once
/// they are fixed.
#[test]
fn enable_refuses_a_halobox_or_cluster_file_others_can_change() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let ssh = bin.join("ssh");
    std::fs::write(
        &ssh,
        "#!/bin/sh\nfor a; do last=$a; done\nexec sh -c \"$last\"\n",
    )
    .unwrap();
    mode(&ssh, 0o755);
    let hb = bin.join("halobox");
    std::fs::write(&hb, "#!/bin/sh\nexit 0\n").unwrap();
    mode(&hb, 0o755);
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    let file = conf.join("cluster.toml");
    std::fs::write(
        &file,
        format!(
            "halobox = \"{}\"\n[[node]]\nssh = \"head\"\nip = \"{}\"\nbackend = \"host\"\n",
            hb.display(),
            a_local_address()
        ),
    )
    .unwrap();
    mode(&file, 0o644);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let enable = || {
        let o = halobox()
            .args(["cluster", "enable", "--dry-run", "--cluster"])
            .arg(&file)
            .env("PATH", &path)
            .env("HOME", &home)
            .env("XDG_STATE_HOME", home.join("state"))
            .output()
            .unwrap();
        let (stdout, stderr) = out(&o);
        (o.status.code(), stdout, stderr)
    };
    let (code, stdout, stderr) = enable();
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("Nothing was written (--dry-run)."),
        "{stdout}"
    );

    let refused = |what: &std::path::Path, why: &str, fix: &str| {
        let (code, stdout, stderr) = enable();
        assert_eq!(code, Some(2), "{}: {stdout}{stderr}", what.display());
        assert!(
            stderr.contains(&format!("{} {why}", what.display()))
                && stderr.contains("as root")
                && stderr.contains(fix),
            "{stderr}"
        );
        assert!(!stdout.contains("[Service]"), "{stdout}");
    };
    mode(&hb, 0o777);
    refused(&hb, "is writable by others (mode 0777)", "chmod go-w");
    mode(&hb, 0o755);
    std::os::unix::fs::chown(&file, Some(4242), Some(4242)).unwrap();
    refused(&file, "is owned by uid 4242", "chown root");
    std::os::unix::fs::chown(&file, Some(0), Some(0)).unwrap();
    mode(&file, 0o666);
    refused(&file, "is writable by others (mode 0666)", "chmod go-w");
    mode(&file, 0o644);
    mode(&conf, 0o777);
    refused(&conf, "is writable by others (mode 0777)", "chmod go-w");
    mode(&conf, 0o755);
    let (code, stdout, stderr) = enable();
    assert_eq!(code, Some(0), "{stdout}{stderr}");
}

/// Another user's folder made first at the name `serve` once used in the
/// shared `/tmp` (`$TMPDIR/halobox-serve-UID`, uid 4242's) blocks nothing:
/// `serve stop` and `serve status` of a head on this machine (backend
/// `host`: the programs run here) work, and leave it alone.
#[test]
fn a_serve_folder_another_user_made_first_blocks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(
        &dir,
        &format!(
            "[[node]]\nssh = \"head\"\nip = \"{}\"\nbackend = \"host\"\n",
            a_local_address()
        ),
    );
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let planted = tmp.join("halobox-serve-0");
    std::fs::create_dir(&planted).unwrap();
    std::os::unix::fs::chown(&planted, Some(4242), Some(4242)).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    for cmd in ["stop", "status"] {
        let o = halobox()
            .args(["serve", cmd, "--cluster", &file])
            .env("TMPDIR", &tmp)
            .env("HOME", &home)
            .env("XDG_STATE_HOME", home.join("state"))
            .output()
            .unwrap();
        let (stdout, stderr) = out(&o);
        if cmd == "stop" {
            assert!(o.status.success(), "serve stop: {stdout}{stderr}");
        } else {
            assert!(
                stdout.contains("serve: stopped"),
                "serve status: {stdout}{stderr}"
            );
        }
        assert!(!stderr.contains("not this user's own folder"), "{stderr}");
    }
    assert_eq!(std::fs::read_dir(&planted).unwrap().count(), 0);
}
