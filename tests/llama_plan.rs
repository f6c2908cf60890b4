//! The llama.cpp engine's plan without an engine running: llama-server's
//! argv (every worker's RPC server, every layer offloaded, the split by
//! memory), each RPC server's start bound to its node's data-plane address
//! only, RDMA from the data-plane facts, and the CLI's dry runs and usage
//! errors through the real binary.

mod common;

use common::halobox;
use halobox::cluster::config::{self, ClusterConfig, Engine};
use halobox::cluster::env::{NodeEnv, Resolved};
use halobox::serve::llama::{self, LlamaRequest};
use halobox::serve::rpc_servers as rpc;

const THREE: &str = r#"
engine = "llama.cpp"
llama_server = "/opt/halobox-llama-cpp/bin/llama-server"
[[node]]
name = "a"
ssh = "root@n1"
ip = "10.0.0.1"
[[node]]
name = "b"
ssh = "root@n2"
ip = "10.0.0.2"
[[node]]
name = "c"
ssh = "root@n3"
ip = "10.0.0.3"
backend = "podman"
"#;

fn cfg() -> ClusterConfig {
    config::parse(THREE).unwrap()
}

fn req(extra: &[&str]) -> LlamaRequest {
    LlamaRequest {
        model: "/models/m.gguf".into(),
        host: None,
        port: 8000,
        ctx: Some(4096),
        extra: extra.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn llama_server_lists_every_worker_and_splits_by_memory() {
    let c = cfg();
    assert_eq!(c.engine, Engine::LlamaCpp);
    let split = llama::split(&[64 << 30, 128 << 30], Some(96 << 30));
    assert_eq!(split, vec![65536, 131072, 98304]);
    let argv = llama::command(&c, &req(&["--threads", "8"]), &split).unwrap();
    assert_eq!(
        argv.join(" "),
        "/opt/halobox-llama-cpp/bin/llama-server -m /models/m.gguf --alias /models/m.gguf --host 0.0.0.0 --port 8000 -ngl 99 --rpc 10.0.0.2:50052,10.0.0.3:50052 --tensor-split 65536,131072,98304 -c 4096 -lv 4 --threads 8"
    );
}

#[test]
fn one_node_has_no_rpc_servers() {
    let mut c = cfg();
    c.nodes.truncate(1);
    assert!(rpc::workers(&c).is_empty());
    let argv = llama::command(&c, &req(&[]), &llama::split(&[], Some(1 << 30))).unwrap();
    assert!(!argv.iter().any(|a| a == "--rpc" || a == "--tensor-split"));
}

#[test]
fn flags_halobox_sets_and_models_that_are_not_files_are_refused() {
    let c = cfg();
    for f in ["--rpc", "-ngl", "--tensor-split=1,1", "--host", "--api-key"] {
        let e = llama::command(&c, &req(&[f, "x"]), &[]).unwrap_err();
        assert!(e.starts_with(f.split('=').next().unwrap()), "{e}");
    }
    let mut r = req(&[]);
    r.model = "Qwen/Qwen3-0.6B".into();
    let e = llama::command(&c, &r, &[]).unwrap_err();
    assert!(e.contains("GGUF file"), "{e}");
}

#[test]
fn rpc_servers_bind_the_data_plane_address_only() {
    let c = cfg();
    for n in rpc::workers(&c) {
        let argv = rpc::start_command(&c, n, &[]);
        let tail: Vec<&str> = argv.iter().rev().take(4).map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "/opt/halobox-llama-cpp/bin/llama-server",
                "",
                "50052",
                n.ip.to_string().as_str()
            ]
        );
        let program = argv.iter().find(|a| a.contains("trap")).unwrap();
        assert!(program.contains("-H \"$1\" -p \"$2\" -c"), "{program}");
        assert!(program.contains("trap \"\" PIPE"), "{program}");
        assert!(!argv.iter().any(|a| a.contains("0.0.0.0")));
    }
    // podman: through `halobox enter`
    let c3 = &rpc::workers(&c)[1];
    assert_eq!(
        &rpc::start_command(&c, c3, &[])[..4],
        ["halobox", "enter", "vllm", "--"]
    );
}

fn node_env(transport: Resolved) -> NodeEnv {
    serde_json::from_value(serde_json::json!({
        "ip": "10.0.0.2", "is_head": false, "interface": "enp1s0", "mtu": 9000,
        "transport": transport.to_string(), "reason": "test",
        "rdma_device": "rocep1s0", "rdma_port": 1, "gid_index": 3,
        "vars": [], "per_node": [], "ray_start": []
    }))
    .unwrap()
}

#[test]
fn rdma_from_the_data_plane_facts() {
    let v = rpc::rdma_env(&node_env(Resolved::Roce));
    let words: Vec<String> = v
        .iter()
        .map(|e| format!("{}={}", e.name, e.value))
        .collect();
    assert_eq!(words, ["GGML_RDMA_DEV=rocep1s0", "GGML_RDMA_GID=3"]);
    assert!(rpc::rdma_env(&node_env(Resolved::Ethernet)).is_empty());
    let c = cfg();
    let argv = rpc::start_command(&c, &c.nodes[1], &v);
    assert!(
        argv.windows(3)
            .any(|w| w == ["env", "GGML_RDMA_DEV=rocep1s0", "GGML_RDMA_GID=3"]),
        "{argv:?}"
    );
}

#[test]
fn an_iwarp_port_is_warned_about() {
    let c = cfg();
    let mut env = node_env(Resolved::Ethernet);
    env.reason = "auto: Ethernet (TCP over enp1s0) because irdma0 (behind enp1s0) is iWARP".into();
    let w = rpc::iwarp_warning(&c.nodes[1], &env).unwrap();
    assert!(
        w.contains("node b (10.0.0.2)") && w.contains("over TCP"),
        "{w}"
    );
    assert!(rpc::iwarp_warning(&c.nodes[1], &node_env(Resolved::Roce)).is_none());
}

fn file(dir: &tempfile::TempDir, body: &str) -> String {
    let p = dir.path().join("cluster.toml");
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

#[test]
fn serve_dry_run_and_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir, THREE);
    let o = halobox()
        .args(["serve", "/models/m.gguf", "--dry-run", "--cluster", &f])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout.starts_with("/opt/halobox-llama-cpp/bin/llama-server -m /models/m.gguf --alias /models/m.gguf --host 10.0.0.1 --port 8000 -ngl 99 --rpc 10.0.0.2:50052,10.0.0.3:50052 -lv 4\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("b on 10.0.0.2:50052, c on 10.0.0.3:50052"),
        "{stdout}"
    );
    let o = halobox()
        .args([
            "serve",
            "/models/m.gguf",
            "--engine",
            "vllm",
            "--dry-run",
            "--cluster",
            &f,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--engine vllm, but") && stderr.contains("hint:"),
        "{stderr}"
    );
    let o = halobox()
        .args([
            "serve",
            "/models/m.gguf",
            "--tp",
            "2",
            "--dry-run",
            "--cluster",
            &f,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("--tp is vLLM's"), "{stderr}");
    let o = halobox()
        .args(["cluster", "down", "--dry-run", "--cluster", &f])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        stdout.lines().filter(|l| l.contains("rpc.pid")).count(),
        2,
        "{stdout}"
    );
    assert!(!stdout.contains("ray stop"), "{stdout}");
}

#[test]
fn serve_help_says_rpc_replaced_mpi() {
    let o = halobox().args(["serve", "--help"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("MPI backend was removed upstream"),
        "{stdout}"
    );
    assert!(stdout.contains("PR #7395"), "{stdout}");
}

#[test]
fn a_data_plane_address_is_never_unspecified() {
    let e = config::parse(&THREE.replace("10.0.0.2", "0.0.0.0")).unwrap_err();
    assert!(e.contains("0.0.0.0"), "{e}");
}
