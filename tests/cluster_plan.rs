//! Plan-level tests of the cluster: each node's env from the host snapshots
//! in tests/fixtures/hosts, the preflight verdict, and the `vllm serve`
//! command and env that would run (vLLM itself cannot run here).

use std::path::PathBuf;

use halobox::cluster::auth;
use halobox::cluster::config::{ClusterConfig, NodeBackend, NodeConfig, Transport};
use halobox::cluster::env::{self, EnvError, EnvRequest, NodeEnv, Resolved};
use halobox::cluster::plan::{self, ContainerReport, JoinReport};
use halobox::cluster::preflight::{self, Level};
use halobox::cluster::view::{DeviceAccess, PortView, RuntimeView};
use halobox::host::{self, GatherOptions, HostFacts, HostRoot};
use halobox::serve::engine::Head;
use halobox::serve::plan::{self as splan, ServeRequest};

fn facts(name: &str) -> HostFacts {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts")
        .join(name);
    host::gather(HostRoot::sysroot(&dir).unwrap(), GatherOptions::default())
}

fn req(ip: &str, head: &str, transport: Transport) -> EnvRequest {
    EnvRequest {
        ip: ip.parse().unwrap(),
        head: head.parse().unwrap(),
        port: 6379,
        transport,
        cpus: 16,
        ray: "ray".into(),
        ray_args: vec![],
        ray_head_args: vec!["--include-dashboard=false".into()],
        env: vec![],
        node_env: vec![],
        cluster_node_env: vec![],
    }
}

fn var<'a>(e: &'a NodeEnv, name: &str) -> Option<&'a str> {
    e.vars
        .iter()
        .find(|v| v.name == name)
        .map(|v| v.value.as_str())
}

#[test]
fn e810_uses_roce_with_gid_index_1() {
    let e = env::plan(
        &facts("strix-e810"),
        &req("192.168.100.1", "192.168.100.1", Transport::Auto),
    )
    .unwrap();
    assert_eq!(e.transport, Resolved::Roce);
    assert!(e.is_head);
    assert_eq!(
        e.assignments(),
        [
            "NCCL_SOCKET_IFNAME==enp194s0np0",
            "GLOO_SOCKET_IFNAME=enp194s0np0",
            "NCCL_IB_HCA==rocep194s0:1",
            "NCCL_IB_GID_INDEX=1",
            "NCCL_NET_GDR_LEVEL=0",
            "VLLM_HOST_IP=192.168.100.1",
            "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1",
            "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES=1",
        ]
    );
    // Every per-node data-plane name, set here or not: a worker on
    // Ethernet has NCCL_IB_DISABLE, which the head's list must keep out.
    assert_eq!(
        e.per_node,
        [
            "NCCL_SOCKET_IFNAME",
            "GLOO_SOCKET_IFNAME",
            "NCCL_IB_HCA",
            "NCCL_IB_GID_INDEX",
            "NCCL_IB_DISABLE",
            "VLLM_HOST_IP"
        ]
    );
    assert_eq!(
        e.ray_start,
        [
            "ray",
            "start",
            "--head",
            "--port=6379",
            "--node-ip-address=192.168.100.1",
            "--num-gpus=1",
            "--num-cpus=16",
            "--disable-usage-stats",
            "--include-dashboard=false",
        ]
    );
    assert!(
        e.reason
            .starts_with("auto: rocep194s0:1 behind enp194s0np0 is an ACTIVE RoCE v2 port"),
        "{}",
        e.reason
    );
    assert_eq!(e.mtu, Some(9000));
}

#[test]
fn cx5_uses_gid_index_3_and_never_the_down_port() {
    let f = facts("strix-cx5");
    let e = env::plan(&f, &req("10.0.0.1", "10.0.0.2", Transport::Roce)).unwrap();
    assert_eq!(var(&e, "NCCL_IB_HCA"), Some("=mlx5_0:1"));
    assert_eq!(var(&e, "NCCL_IB_GID_INDEX"), Some("3"));
    assert_eq!(var(&e, "NCCL_SOCKET_IFNAME"), Some("=enp1s0f0np0"));
    assert_eq!(var(&e, "NCCL_IB_DISABLE"), None);
    assert!(!e.is_head);
    assert_eq!(
        e.ray_start[..3],
        ["ray", "start", "--address=10.0.0.2:6379"]
    );
    assert!(
        !e.ray_start
            .contains(&"--include-dashboard=false".to_string())
    );
    assert!(e.assignments().iter().all(|a| !a.contains("mlx5_1")));
    // The LAN address has no RDMA port behind it: auto says so and uses TCP.
    let lan = env::plan(&f, &req("192.168.1.60", "10.0.0.2", Transport::Auto)).unwrap();
    assert_eq!(lan.transport, Resolved::Ethernet);
    assert_eq!(var(&lan, "NCCL_IB_DISABLE"), Some("1"));
    assert_eq!(var(&lan, "NCCL_IB_HCA"), None);
    assert!(
        lan.reason.contains("no RDMA device is behind enp191s0"),
        "{}",
        lan.reason
    );
}

#[test]
fn a_down_port_falls_back_under_auto_and_fails_under_roce() {
    let f = facts("broken-e810");
    let e = env::plan(&f, &req("192.168.100.1", "192.168.100.2", Transport::Auto)).unwrap();
    assert_eq!(e.transport, Resolved::Ethernet);
    assert!(
        e.reason
            .contains("rocep194s0 port 1 (behind enp194s0np0) is not ACTIVE/LinkUp"),
        "{}",
        e.reason
    );
    assert_eq!(var(&e, "NCCL_IB_GID_INDEX"), None);
    let err = env::plan(&f, &req("192.168.100.1", "192.168.100.2", Transport::Roce)).unwrap_err();
    assert!(matches!(err, EnvError::NoRdma { .. }));
    assert!(err.to_string().contains("hint: check the cable"), "{err}");
}

#[test]
fn iwarp_is_not_roce() {
    let f = facts("strix-e810-iwarp");
    let e = env::plan(&f, &req("192.168.100.1", "192.168.100.1", Transport::Auto)).unwrap();
    assert_eq!(e.transport, Resolved::Ethernet);
    assert!(e.reason.contains("is iWARP"), "{}", e.reason);
    let err = env::plan(&f, &req("192.168.100.1", "192.168.100.1", Transport::Roce)).unwrap_err();
    assert!(err.to_string().contains("enable_roce"), "{err}");
}

#[test]
fn ethernet_disables_ib_even_with_a_roce_port() {
    let e = env::plan(
        &facts("strix-e810"),
        &req("192.168.100.1", "192.168.100.1", Transport::Ethernet),
    )
    .unwrap();
    assert_eq!(e.transport, Resolved::Ethernet);
    assert_eq!(var(&e, "NCCL_IB_DISABLE"), Some("1"));
    assert_eq!(var(&e, "NCCL_IB_HCA"), None);
    assert_eq!(var(&e, "NCCL_NET_GDR_LEVEL"), Some("0"));
}

#[test]
fn an_address_no_interface_holds_is_an_error_not_a_guess() {
    let f = facts("strix-e810");
    // Same /24 as the LAN address, but nothing holds it: no prefix guess.
    let err = env::plan(&f, &req("192.168.1.51", "192.168.1.51", Transport::Auto)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("no interface on this node holds 192.168.1.51"),
        "{msg}"
    );
    assert!(msg.contains("192.168.1.50/24 on enp191s0"), "{msg}");
    let none = env::plan(
        &facts("no-gpu-no-rdma"),
        &req("10.88.0.5", "10.88.0.5", Transport::Auto),
    )
    .unwrap();
    assert_eq!(none.transport, Resolved::Ethernet);
}

fn node(name: &str, ip: &str, backend: NodeBackend) -> NodeConfig {
    NodeConfig {
        name: Some(name.into()),
        ssh: format!("root@{name}"),
        ip: ip.parse().unwrap(),
        container: "vllm".into(),
        backend,
        cpus: None,
        env: Default::default(),
        memory_bandwidth_gbs: None,
    }
}

fn report(env: NodeEnv, digest: &str) -> JoinReport {
    JoinReport {
        halobox_version: "0.1.0".into(),
        command: vec![],
        port_free: env.is_head.then_some(true),
        // strix-e810's data plane: 192.168.100.1/30, back to back.
        prefix_len: Some(30),
        not_inspected: None,
        env,
        container: ContainerReport {
            backend: NodeBackend::Toolbox,
            name: Some("vllm".into()),
            found: true,
            image_digest: Some(digest.into()),
            memlock: Some(-1),
            kfd: true,
            state: Some("running".into()),
            node_kfd: true,
            node_infiniband: vec!["/dev/infiniband/uverbs0".into()],
            halobox: Some("/run/host/usr/bin/halobox".into()),
        },
        view: None,
        inside_version: Some("0.1.0".into()),
        inside_error: None,
        carry_over: None,
        ray_version: Some("2.60.0".into()),
        ray_error: None,
    }
}

fn two_e810s() -> (ClusterConfig, Vec<JoinReport>) {
    let cfg = ClusterConfig::new(vec![
        node("n1", "192.168.100.1", NodeBackend::Toolbox),
        node("n2", "192.168.100.2", NodeBackend::Toolbox),
    ]);
    let f = facts("strix-e810");
    let head = env::plan(&f, &req("192.168.100.1", "192.168.100.1", Transport::Auto)).unwrap();
    // The worker's snapshot is the same machine: only the address differs.
    let mut worker = head.clone();
    worker.is_head = false;
    worker.ip = "192.168.100.2".parse().unwrap();
    (
        cfg,
        vec![report(head, "sha256:aaa"), report(worker, "sha256:aaa")],
    )
}

fn fails(findings: &[preflight::Finding]) -> Vec<(String, Option<String>)> {
    findings
        .iter()
        .filter(|f| f.level == Level::Fail)
        .map(|f| (f.check.clone(), f.node.clone()))
        .collect()
}

#[test]
fn preflight_passes_a_consistent_cluster() {
    let (cfg, reports) = two_e810s();
    let f = preflight::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
        auth::Mode::Token,
    );
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].level, Level::Pass);
    assert!(f[0].message.contains("transport roce"));
}

/// A node whose Ray predates token authentication fails preflight, named
/// with the fix; `--insecure-ray` lets it through with a warning.
#[test]
fn preflight_fails_a_ray_without_token_auth_unless_insecure() {
    let (cfg, mut reports) = two_e810s();
    reports[1].ray_version = Some("2.51.1".into());
    reports[0].ray_version = None;
    reports[0].ray_error = Some(
        "cannot tell Ray's version with python3 (the Python of ray): No module named ray".into(),
    );
    let all: Vec<_> = reports.into_iter().map(Ok).collect();
    let f = preflight::preflight(&cfg, &all, "0.1.0", auth::Mode::Token);
    let auth: Vec<_> = f.iter().filter(|f| f.check == "ray-auth").collect();
    assert_eq!(auth.len(), 2, "{f:#?}");
    assert!(auth.iter().all(|f| f.level == Level::Fail));
    assert_eq!(auth[0].node.as_deref(), Some("n1"));
    assert!(auth[0].message.contains("No module named ray"), "{auth:#?}");
    assert_eq!(auth[1].node.as_deref(), Some("n2"));
    assert!(
        auth[1]
            .message
            .contains("Ray 2.51.1 in container vllm has no token authentication")
            && auth[1].message.contains("--insecure-ray"),
        "{auth:#?}"
    );
    let f = preflight::preflight(&cfg, &all, "0.1.0", auth::Mode::Insecure);
    assert!(!f.iter().any(|f| f.level == Level::Fail), "{f:#?}");
    let warn: Vec<_> = f.iter().filter(|f| f.check == "ray-auth").collect();
    assert_eq!(warn.len(), 1, "{f:#?}");
    assert_eq!(warn[0].level, Level::Warn);
    assert!(warn[0].message.contains("WITHOUT token authentication"));
}

#[test]
fn preflight_names_each_failing_node() {
    let (cfg, mut reports) = two_e810s();
    reports[1].env.mtu = Some(1500);
    reports[1].env.transport = Resolved::Ethernet;
    reports[1].container.image_digest = Some("sha256:bbb".into());
    reports[1].container.memlock = Some(8 << 20);
    reports[1].halobox_version = "0.0.9".into();
    reports[1].inside_version = Some("0.0.9".into());
    reports[0].port_free = Some(false);
    let f = preflight::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
        auth::Mode::Token,
    );
    let n2 = Some("n2".to_string());
    assert_eq!(
        fails(&f),
        [
            ("port".to_string(), Some("n1".to_string())),
            ("version".to_string(), n2.clone()),
            ("memlock".to_string(), n2.clone()),
            ("image".to_string(), n2.clone()),
            ("mtu".to_string(), n2.clone()),
            ("transport".to_string(), n2),
        ]
    );
    let mtu = f.iter().find(|x| x.check == "mtu").unwrap();
    assert!(
        mtu.message
            .contains("MTU 1500 on enp194s0np0 (192.168.100.2), but 9000"),
        "{}",
        mtu.message
    );
}

#[test]
fn preflight_reports_an_unreachable_node_and_host_backend_only_warns() {
    let (cfg, mut reports) = two_e810s();
    reports[0].container.backend = NodeBackend::Host;
    reports[0].container.kfd = false;
    let rs = vec![
        Ok(reports.remove(0)),
        Err("node n2 (root@n2): cannot reach it over ssh".to_string()),
    ];
    let f = preflight::preflight(&cfg, &rs, "0.1.0", auth::Mode::Token);
    assert_eq!(fails(&f), [("reach".to_string(), Some("n2".to_string()))]);
    assert!(
        f.iter()
            .any(|x| x.level == Level::Warn && x.check == "devices")
    );
}

fn serve_req() -> ServeRequest {
    ServeRequest {
        model: "Qwen/Qwen3-30B-A3B".into(),
        tp: None,
        max_model_len: Some(32768),
        gpu_memory_utilization: 0.90,
        eager: true,
        host: None,
        port: 8000,
        nccl_debug: true,
        clear_cache: false,
        extra: vec!["--max-num-seqs".into(), "8".into()],
        hf_token: true,
        api_key: false,
    }
}

#[test]
fn serve_command_and_env() {
    let (cfg, reports) = two_e810s();
    let p = splan::serve(&serve_req(), Some(&reports[0].env), 2).unwrap();
    assert_eq!(
        p.command,
        [
            "vllm",
            "serve",
            "Qwen/Qwen3-30B-A3B",
            "--tensor-parallel-size",
            "2",
            "--distributed-executor-backend",
            "ray",
            "--gpu-memory-utilization",
            "0.9",
            "--port",
            "8000",
            "--max-model-len",
            "32768",
            "--enforce-eager",
            "--max-num-seqs",
            "8",
        ]
    );
    assert!(
        p.env
            .iter()
            .any(|v| v.name == "NCCL_IB_GID_INDEX" && v.value == "1")
    );
    assert!(
        p.env
            .iter()
            .any(|v| v.name == "NCCL_DEBUG" && v.value == "INFO")
    );
    assert!(p.env.iter().all(|v| v.name != "HF_TOKEN"));
    assert_eq!(p.secrets, ["HF_TOKEN"]);
    let cmd = plan::with_env(&p.env, &p.command);
    let head = Head::of(&cfg);
    let argv = head.start_argv(&cmd, &p.secrets, None, None);
    assert_eq!(argv[..6], ["halobox", "enter", "vllm", "--", "sh", "-c"]);
    assert!(argv[6].contains("IFS= read -r HF_TOKEN || exit 97; export HF_TOKEN;"));
    assert_eq!(
        argv[7..],
        [&["halobox-serve".to_string()][..], &cmd].concat()
    );
    // On podman too the secret goes through `halobox enter` (halobox's own
    // engine connection), never the engine's CLI.
    let mut podman = head.clone();
    podman.backend = NodeBackend::Podman;
    assert_eq!(
        podman.start_argv(&cmd, &p.secrets, None, None)[..4],
        ["halobox", "enter", "vllm", "--"]
    );
    let text = splan::render_serve(&p, &cmd);
    assert!(text.contains("HF_TOKEN=********"), "{text}");
    assert!(
        text.contains("\nvllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2"),
        "{text}"
    );
}

#[test]
fn serve_refuses_what_cannot_work() {
    let (_, reports) = two_e810s();
    let head = Some(&reports[0].env);
    let mut r = serve_req();
    r.tp = Some(3);
    assert!(
        splan::serve(&r, head, 2)
            .unwrap_err()
            .contains("--tp 3 needs 3 GPU(s)")
    );
    let mut r = serve_req();
    r.extra = vec!["--distributed-executor-backend=mp".into()];
    assert!(splan::serve(&r, head, 2).is_err());
    let mut r = serve_req();
    r.gpu_memory_utilization = 0.95;
    r.eager = false;
    let p = splan::serve(&r, head, 2).unwrap();
    assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
    assert!(!p.command.contains(&"--enforce-eager".to_string()));
    assert!(!p.command.contains(&"--middleware".to_string()));
    let keyed = splan::serve(
        &ServeRequest {
            api_key: true,
            ..serve_req()
        },
        None,
        2,
    )
    .unwrap();
    let at = keyed
        .command
        .iter()
        .position(|a| a == "--middleware")
        .unwrap();
    assert_eq!(keyed.command[at + 1], "halobox_require_key.RequireKey");
    assert!(keyed.secrets.contains(&"VLLM_API_KEY".to_string()));
    r.gpu_memory_utilization = 1.5;
    assert!(splan::serve(&r, head, 2).is_err());
}

fn tp_of(p: &splan::ServePlan) -> &str {
    let i = p
        .command
        .iter()
        .position(|a| a == "--tensor-parallel-size")
        .unwrap();
    &p.command[i + 1]
}

#[test]
fn serve_fits_tensor_times_pipeline_parallel_to_the_nodes() {
    let (_, reports) = two_e810s();
    let head = Some(&reports[0].env);
    let with = |tp: Option<u32>, extra: &[&str]| {
        let mut r = serve_req();
        r.tp = tp;
        r.extra = extra.iter().map(|s| s.to_string()).collect();
        r
    };
    // 2 nodes, pp 2: tp defaults to 2 / 2 = 1, never 2 (that asks for 4 GPUs).
    for pp in [
        &["--pipeline-parallel-size", "2"][..],
        &["--pipeline-parallel-size=2"],
        &["-pp", "2"],
        &["--pipeline_parallel_size", "2"],
    ] {
        let p = splan::serve(&with(None, pp), head, 2).unwrap();
        assert_eq!((tp_of(&p), p.tp, p.pp), ("1", 1, 2), "{pp:?}");
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }
    let e = splan::serve(&with(Some(2), &["-pp", "2"]), head, 2).unwrap_err();
    assert!(
        e.contains("--tp 2 × --pipeline-parallel-size 2 = 4 GPU(s), the cluster has 2 node(s)")
            && e.contains("--tp 1"),
        "{e}"
    );
    let e = splan::serve(&with(None, &["--pipeline-parallel-size", "2"]), head, 3).unwrap_err();
    assert!(
        e.contains("--pipeline-parallel-size 2 does not divide the 3 node(s)"),
        "{e}"
    );
    let e = splan::serve(&with(None, &["--pipeline-parallel-size", "x"]), head, 2).unwrap_err();
    assert!(e.contains("not a pipeline-parallel size"), "{e}");
    let e = splan::serve(&with(None, &["--tensor-parallel-size", "2"]), head, 2).unwrap_err();
    assert!(e.contains("--tp N"), "{e}");
    // 4 nodes, tp 1 × pp 2: two stay idle, and the plan says so.
    let p = splan::serve(&with(Some(1), &["-pp", "2"]), head, 4).unwrap();
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("uses 2 of the 4 node(s): 2 stay idle")),
        "{:?}",
        p.notes
    );
}

#[test]
fn serve_api_key_host_and_clear_cache() {
    let (cfg, reports) = two_e810s();
    let mut r = serve_req();
    r.api_key = true;
    r.clear_cache = true;
    r.host = Some("127.0.0.1".parse().unwrap());
    let p = splan::serve(&r, Some(&reports[0].env), 2).unwrap();
    assert_eq!(p.secrets, ["HF_TOKEN", "VLLM_API_KEY"]);
    let i = p.command.iter().position(|a| a == "--host").unwrap();
    assert_eq!(p.command[i + 1], "127.0.0.1");
    assert!(!p.command.iter().any(|a| a.contains("api-key")));
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("clears the head's compile cache only")),
        "{:?}",
        p.notes
    );
    let cmd = plan::with_env(&p.env, &p.command);
    let argv = Head::of(&cfg).start_argv(&cmd, &p.secrets, Some(splan::COMPILE_CACHE), None);
    assert!(argv[6].contains(&format!(
        "rm -rf -- \"{c}\" || exit 96; echo \"halobox: removed {c}\" >&2; IFS= read -r HF_TOKEN || exit 97; export HF_TOKEN; IFS= read -r VLLM_API_KEY || exit 97; export VLLM_API_KEY;",
        c = splan::COMPILE_CACHE
    )));
    let text = splan::render_serve(&p, &cmd);
    assert!(
        text.contains("VLLM_API_KEY=******** (passed on stdin)"),
        "{text}"
    );
    assert!(
        text.contains("# first, in the head's container: rm -rf -- \"${VLLM_CACHE_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm}/torch_compile_cache\""),
        "{text}"
    );
    // Only the cache to clear, no secret: podman goes through `enter`.
    r.hf_token = false;
    r.api_key = false;
    let p = splan::serve(&r, Some(&reports[0].env), 2).unwrap();
    let mut podman = Head::of(&cfg);
    podman.backend = NodeBackend::Podman;
    let argv = podman.start_argv(
        &plan::with_env(&p.env, &p.command),
        &p.secrets,
        Some(splan::COMPILE_CACHE),
        None,
    );
    assert_eq!(argv[..6], ["halobox", "enter", "vllm", "--", "sh", "-c"]);
    // Keys in the arguments, and a second --host, are refused.
    for extra in [&["--api-key", "k"][..], &["--api-key=k"], &["--host", "::"]] {
        let mut r = serve_req();
        r.extra = extra.iter().map(|s| s.to_string()).collect();
        assert!(splan::serve(&r, None, 2).is_err(), "{extra:?}");
    }
}

#[test]
fn serve_plan_without_the_head_env() {
    let p = splan::serve(&serve_req(), None, 2).unwrap();
    assert!(p.env.iter().all(|v| v.name == "NCCL_DEBUG"), "{:?}", p.env);
    assert_eq!(tp_of(&p), "2");
}

fn three_in_a_chain() -> (ClusterConfig, Vec<JoinReport>) {
    let (mut cfg, mut reports) = two_e810s();
    cfg.nodes
        .push(node("n3", "192.168.100.5", NodeBackend::Toolbox));
    let mut third = reports[1].clone();
    third.env.ip = "192.168.100.5".parse().unwrap();
    reports.push(third);
    (cfg, reports)
}

#[test]
fn preflight_refuses_a_switchless_chain_and_names_the_node() {
    // Two nodes back to back on one /30: supported.
    let (cfg, reports) = two_e810s();
    let f = preflight::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
        auth::Mode::Token,
    );
    assert!(fails(&f).is_empty(), "{f:#?}");
    // A third node on the next link (its own /30): a daisy chain.
    let (cfg, reports) = three_in_a_chain();
    let f = preflight::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
        auth::Mode::Token,
    );
    assert_eq!(
        fails(&f),
        [("topology".to_string(), Some("n3".to_string()))]
    );
    let m = &f.iter().find(|x| x.check == "topology").unwrap().message;
    assert!(
        m.contains("192.168.100.5 (enp194s0np0) is outside the head's subnet 192.168.100.0/30 (enp194s0np0 on n1)")
            && m.contains("switchless chain of 3+ nodes")
            && m.contains("one data-plane NIC per node")
            && m.contains("exactly 2 nodes back to back"),
        "{m}"
    );
    // One switch, one /24: three nodes are fine.
    let (cfg, mut reports) = three_in_a_chain();
    for r in &mut reports {
        r.prefix_len = Some(24);
    }
    let f = preflight::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
        auth::Mode::Token,
    );
    assert!(fails(&f).is_empty(), "{f:#?}");
    // The head's prefix unknown (an address known only from a GID): not judged.
    let (cfg, mut reports) = three_in_a_chain();
    reports[0].prefix_len = None;
    let f = preflight::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
        auth::Mode::Token,
    );
    assert!(fails(&f).is_empty(), "{f:#?}");
}

#[test]
fn preflight_fails_a_container_that_was_not_inspected() {
    let (cfg, mut reports) = two_e810s();
    reports[1].not_inspected = Some(plan::snapshot_not_inspected(NodeBackend::Toolbox, "vllm"));
    let f = preflight::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
        auth::Mode::Token,
    );
    assert_eq!(
        fails(&f),
        [("container".to_string(), Some("n2".to_string()))]
    );
}

#[test]
fn prefix_len_comes_from_the_interface() {
    let f = facts("strix-e810");
    assert_eq!(
        plan::prefix_len(&f, "192.168.100.1".parse().unwrap()),
        Some(30)
    );
    assert_eq!(
        plan::prefix_len(&f, "192.168.1.50".parse().unwrap()),
        Some(24)
    );
    assert_eq!(plan::prefix_len(&f, "10.1.1.1".parse().unwrap()), None);
}

#[test]
fn join_command_carries_the_cluster_settings() {
    let mut cfg = ClusterConfig::new(vec![
        node("n1", "10.0.0.1", NodeBackend::Host),
        node("n2", "10.0.0.2", NodeBackend::Toolbox),
    ]);
    cfg.ray_args = vec!["--object-store-memory=80000000".into()];
    cfg.ray_head_args = vec!["--include-dashboard=false".into()];
    cfg.nodes[1].cpus = Some(8);
    let head = plan::join_command(&cfg, &cfg.nodes[0], true);
    assert!(head.contains(&"--ray-head-arg=--include-dashboard=false".to_string()));
    assert!(head.ends_with(&["--dry-run".to_string(), "--json".to_string()]));
    let w = plan::join_command(&cfg, &cfg.nodes[1], false);
    assert_eq!(
        w[..5],
        [
            "halobox",
            "cluster",
            "join",
            "--head=10.0.0.1",
            "--ip=10.0.0.2"
        ]
    );
    assert!(w.contains(&"--num-cpus=8".to_string()));
    assert!(w.contains(&"--backend=toolbox".to_string()));
    assert!(!w.iter().any(|a| a.starts_with("--ray-head-arg")));
    assert_eq!(
        plan::stop_command(&cfg, &cfg.nodes[1]),
        ["halobox", "enter", "vllm", "--", "ray", "stop"]
    );
}

const WITH_ENV: &str = r#"
[env]
NCCL_IB_TC = "106"
NCCL_NET_GDR_LEVEL = "1"
RAY_memory_monitor_refresh_ms = "0"

[[node]]
name = "n1"
ssh = "root@n1"
ip = "192.168.100.1"

[[node]]
name = "n2"
ssh = "root@n2"
ip = "192.168.100.2"
env = { NCCL_DEBUG = "INFO" }
"#;

#[test]
fn env_table_reaches_every_node_and_node_env_stays_its_own() {
    let cfg = halobox::cluster::config::parse(WITH_ENV).unwrap();
    assert_eq!(cfg.env["NCCL_IB_TC"], "106");
    assert_eq!(cfg.nodes[1].env["NCCL_DEBUG"], "INFO");
    assert_eq!(
        halobox::cluster::config::parse(&cfg.to_toml()).unwrap(),
        cfg
    );
    let w = plan::join_command(&cfg, &cfg.nodes[1], true);
    for want in [
        "--env=NCCL_IB_TC=106",
        "--env=RAY_memory_monitor_refresh_ms=0",
        "--node-env=NCCL_DEBUG=INFO",
    ] {
        assert!(w.contains(&want.to_string()), "{want} not in {w:?}");
    }
    let head = plan::join_command(&cfg, &cfg.nodes[0], true);
    assert!(
        !head.iter().any(|a| a.starts_with("--node-env")),
        "{head:?}"
    );
    // The head sets no NCCL_DEBUG of its own, but vLLM reads the head's
    // list: it names n2's own variable too.
    assert!(
        head.contains(&"--per-node-name=NCCL_DEBUG".to_string()),
        "{head:?}"
    );
    let mut r = req("192.168.100.1", "192.168.100.1", Transport::Auto);
    r.env = env::vars(&cfg.env);
    r.node_env = env::vars(&cfg.nodes[1].env);
    r.cluster_node_env = cfg.node_env_names();
    let e = env::plan(&facts("strix-e810"), &r).unwrap();
    // A cluster-wide setting replaces halobox's default in place; the others follow.
    assert_eq!(var(&e, "NCCL_NET_GDR_LEVEL"), Some("1"));
    assert_eq!(var(&e, "NCCL_IB_TC"), Some("106"));
    assert_eq!(var(&e, "NCCL_DEBUG"), Some("INFO"));
    assert_eq!(var(&e, "NCCL_IB_GID_INDEX"), Some("1"));
    assert!(e.per_node.contains(&"NCCL_DEBUG".to_string()));
    assert!(!e.per_node.contains(&"NCCL_IB_TC".to_string()));
    let text = plan::render_env(&e);
    assert!(
        text.contains("# per node (vLLM must not copy the head's): NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME NCCL_IB_HCA NCCL_IB_GID_INDEX NCCL_IB_DISABLE VLLM_HOST_IP NCCL_DEBUG\n"),
        "{text}"
    );
    // What the node's halobox runs inside its container.
    let inside = plan::inside_join("/run/halobox/bin/halobox", &r, true);
    assert_eq!(
        inside[..4],
        [
            "/run/halobox/bin/halobox",
            "cluster",
            "join",
            "--head=192.168.100.1"
        ]
    );
    for want in [
        "--backend=host",
        "--num-cpus=16",
        "--env=NCCL_IB_TC=106",
        "--node-env=NCCL_DEBUG=INFO",
        "--per-node-name=NCCL_DEBUG",
        "--dry-run",
        "--json",
    ] {
        assert!(
            inside.contains(&want.to_string()),
            "{want} not in {inside:?}"
        );
    }
}

/// `[env]` sets NCCL_DEBUG for all, n2 overrides it for itself; n3 sets a
/// Ray variable of its own. The head is the E810 snapshot, n2 and n3 the
/// CX-5 one (its RoCE address and its LAN address).
const OVERRIDDEN: &str = r#"
[env]
NCCL_DEBUG = "WARN"
NCCL_IB_TC = "106"

[[node]]
name = "n1"
ssh = "root@n1"
ip = "192.168.100.1"
backend = "host"
cpus = 4

[[node]]
name = "n2"
ssh = "root@n2"
ip = "10.0.0.1"
backend = "podman"
cpus = 4
env = { NCCL_DEBUG = "INFO" }

[[node]]
name = "n3"
ssh = "root@n3"
ip = "192.168.1.60"
backend = "host"
cpus = 4
env = { RAY_memory_monitor_refresh_ms = "0" }
"#;

/// vLLM reads `ray_non_carry_over_env_vars.json` where its driver runs
/// (the head) and copies every other driver variable to the workers: the
/// head's list must name what any node sets for itself, or n2 would get
/// the head's NCCL_DEBUG=WARN instead of its own INFO. Each node's join, as
/// `cluster up` runs it (the real binary, on each node's snapshot), says
/// so in its report; `--dry-run` shows the list.
#[test]
fn every_nodes_list_names_what_any_node_sets_for_itself() {
    let cfg = halobox::cluster::config::parse(OVERRIDDEN).unwrap();
    assert_eq!(
        cfg.node_env_names(),
        ["NCCL_DEBUG", "RAY_memory_monitor_refresh_ms"]
    );
    let snapshot = |n: usize| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hosts")
            .join(if n == 0 { "strix-e810" } else { "strix-cx5" })
    };
    let mut envs = Vec::new();
    for (i, node) in cfg.nodes.iter().enumerate() {
        let argv = plan::join_command(&cfg, node, true);
        for want in [
            "--per-node-name=NCCL_DEBUG",
            "--per-node-name=RAY_memory_monitor_refresh_ms",
        ] {
            assert!(argv.contains(&want.to_string()), "{want} not in {argv:?}");
        }
        assert!(!argv.iter().any(|a| a == "--per-node-name=NCCL_IB_TC"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_halobox"))
            .args(&argv[1..])
            .arg("--sysroot")
            .arg(snapshot(i))
            .env("HOME", "/nonexistent-home")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{argv:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: JoinReport = serde_json::from_slice(&out.stdout).unwrap();
        envs.push(report.env);
    }
    for e in &envs {
        assert_eq!(
            e.per_node,
            [
                "NCCL_SOCKET_IFNAME",
                "GLOO_SOCKET_IFNAME",
                "NCCL_IB_HCA",
                "NCCL_IB_GID_INDEX",
                "NCCL_IB_DISABLE",
                "VLLM_HOST_IP",
                "NCCL_DEBUG",
                "RAY_memory_monitor_refresh_ms",
            ],
            "node {}",
            e.ip
        );
        assert_eq!(var(e, "NCCL_IB_TC"), Some("106"));
    }
    assert!(envs[0].is_head);
    assert_eq!(var(&envs[0], "NCCL_DEBUG"), Some("WARN"));
    assert_eq!(var(&envs[1], "NCCL_DEBUG"), Some("INFO"));
    assert_eq!(var(&envs[2], "NCCL_DEBUG"), Some("WARN"));
    assert_eq!(var(&envs[0], "RAY_memory_monitor_refresh_ms"), None);
    assert_eq!(var(&envs[2], "RAY_memory_monitor_refresh_ms"), Some("0"));
    // The text form of the head's dry run shows the list.
    let mut argv = plan::join_command(&cfg, cfg.head(), true);
    argv.retain(|a| a != "--json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(&argv[1..])
        .arg("--sysroot")
        .arg(snapshot(0))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("# per node (vLLM must not copy the head's): NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME NCCL_IB_HCA NCCL_IB_GID_INDEX NCCL_IB_DISABLE VLLM_HOST_IP NCCL_DEBUG RAY_memory_monitor_refresh_ms\n")
            && text.contains("NCCL_DEBUG=WARN\n"),
        "{text}"
    );
    // A name that is not a variable's is refused before anything runs.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["cluster", "join", "--head=10.0.0.1", "--ip=10.0.0.1"])
        .arg("--per-node-name=NCCL DEBUG")
        .args(["--dry-run", "--sysroot"])
        .arg(snapshot(1))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"NCCL DEBUG\" is not a variable name"),
        "{err}"
    );
}

/// `serve --nccl-debug` sets INFO in the driver's env; when a node sets
/// NCCL_DEBUG for itself vLLM keeps each worker's own, and the plan says so.
#[test]
fn nccl_debug_on_serve_says_when_nodes_keep_their_own() {
    let cfg = halobox::cluster::config::parse(OVERRIDDEN).unwrap();
    let mut r = req("192.168.100.1", "192.168.100.1", Transport::Auto);
    r.env = env::vars(&cfg.env);
    r.cluster_node_env = cfg.node_env_names();
    let head = env::plan(&facts("strix-e810"), &r).unwrap();
    let mut s = serve_req();
    s.nccl_debug = true;
    let p = splan::serve(&s, Some(&head), 3).unwrap();
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("--nccl-debug sets INFO on the head only")),
        "{:?}",
        p.notes
    );
    r.cluster_node_env.clear();
    let head = env::plan(&facts("strix-e810"), &r).unwrap();
    let p = splan::serve(&s, Some(&head), 3).unwrap();
    assert!(
        !p.notes.iter().any(|n| n.contains("--nccl-debug")),
        "{:?}",
        p.notes
    );
}

#[test]
fn env_table_refuses_per_node_variables_and_secrets() {
    let bad = |table: &str| {
        halobox::cluster::config::parse(&WITH_ENV.replace("NCCL_IB_TC = \"106\"", table))
            .unwrap_err()
    };
    let e = bad("NCCL_SOCKET_IFNAME = \"eth0\"");
    assert!(
        e.contains("[env]: NCCL_SOCKET_IFNAME is computed on each node from its own facts"),
        "{e}"
    );
    let e = bad("NCCL_IB_DISABLE = \"1\"");
    assert!(e.contains("transport = \"ethernet\""), "{e}");
    let e = bad("HF_TOKEN = \"hf_abc\"");
    assert!(
        e.contains("HF_TOKEN is a secret") && !e.contains("hf_abc"),
        "{e}"
    );
    // Every secret-like name, with the hint to export it instead.
    for name in [
        "HUGGING_FACE_HUB_TOKEN",
        "VLLM_API_KEY",
        "HALOBOX_REGISTRY_PASSWORD",
        "RAY_AUTH_TOKEN",
        "GITHUB_TOKEN",
        "WANDB_API_KEY",
        "db_password",
        "AWS_SECRET_ACCESS_KEY",
        "OPENAI_KEY",
        "HF_HUB_SECRET",
        "LLAMA_API_KEY",
        "TOKENIZERS_PARALLELISM",
        "OPENAI_API_KEYS",
        "DB_PASSWD",
        "AWS_CREDENTIALS",
        "GITHUB_PAT",
        "my_service_token_v2",
        "GCP_CREDENTIAL_JSON",
    ] {
        let e = bad(&format!("{name} = \"s3cret\""));
        assert!(
            e.contains(&format!("[env]: {name} is a secret"))
                && e.contains(&format!("hint: export {name}"))
                && !e.contains("s3cret"),
            "{e}"
        );
        let e = halobox::cluster::config::parse(
            &WITH_ENV.replace("NCCL_DEBUG = \"INFO\"", &format!("{name} = \"s3cret\"")),
        )
        .unwrap_err();
        assert!(
            e.contains(&format!("node n2: env: {name} is a secret")),
            "{e}"
        );
    }
    let e = bad("RAY_AUTH_MODE = \"disabled\"");
    assert!(
        e.contains("RAY_AUTH_MODE is set by halobox") && e.contains("--insecure-ray"),
        "{e}"
    );
    // A name that only looks like a secret's is refused with the way to
    // pass it: cluster.toml's `not_secret` list, which clears it ([env] and
    // a node's env) but never a known secret.
    let e = bad("TOKENIZERS_PARALLELISM = \"false\"");
    assert!(
        e.contains("not_secret = [\"TOKENIZERS_PARALLELISM\"]"),
        "{e}"
    );
    let listed = |table: &str, list: &str| {
        halobox::cluster::config::parse(&format!(
            "not_secret = [{list}]\n{}",
            WITH_ENV.replace("NCCL_IB_TC = \"106\"", table)
        ))
    };
    let cfg = listed(
        "TOKENIZERS_PARALLELISM = \"false\"",
        "\"TOKENIZERS_PARALLELISM\"",
    )
    .unwrap();
    assert_eq!(cfg.env["TOKENIZERS_PARALLELISM"], "false");
    // `up` clears it for the node's `cluster join` too.
    let join = halobox::cluster::plan::join_command(&cfg, &cfg.nodes[1], false);
    let at = |w: &str| join.iter().position(|a| a == w).unwrap_or(usize::MAX);
    assert!(
        at("--not-secret=TOKENIZERS_PARALLELISM") < at("--env=TOKENIZERS_PARALLELISM=false"),
        "{join:?}"
    );
    let e = listed("HF_TOKEN = \"hf_abc\"", "\"HF_TOKEN\"").unwrap_err();
    assert!(
        e.contains("not_secret: HF_TOKEN holds a secret") && !e.contains("hf_abc"),
        "{e}"
    );
    // Names that contain none of the words, and the look-alikes that hold
    // a file's path.
    for name in [
        "NCCL_IB_TIMEOUT",
        "KEYBOARD",
        "NCCL_KEY_X",
        "NCCL_IB_PKEY",
        "PATH",
        "AWS_SHARED_CREDENTIALS_FILE",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ] {
        assert!(
            halobox::cluster::config::parse(
                &WITH_ENV.replace("NCCL_IB_TC = \"106\"", &format!("{name} = \"1\""))
            )
            .is_ok(),
            "{name}"
        );
    }
    let e = bad("\"1BAD\" = \"x\"");
    assert!(e.contains("\"1BAD\" is not a variable name"), "{e}");
    let e = bad("NCCL_DEBUG = \"a\\nb\"");
    assert!(e.contains("line break"), "{e}");
    let e = halobox::cluster::config::parse(
        &WITH_ENV.replace("NCCL_DEBUG = \"INFO\"", "VLLM_HOST_IP = \"10.0.0.9\""),
    )
    .unwrap_err();
    assert!(
        e.contains("node n2: env: VLLM_HOST_IP is computed on each node"),
        "{e}"
    );
}

fn viewed(mut r: JoinReport) -> JoinReport {
    r.view = Some(RuntimeView {
        user: "root".into(),
        memlock: Some(-1),
        groups: vec![0],
        kfd: Some(DeviceAccess {
            path: "/dev/kfd".into(),
            mode: Some("0660".into()),
            gid: Some(992),
            usable: true,
        }),
        render: vec![],
        infiniband: vec![DeviceAccess {
            path: "/dev/infiniband/uverbs0".into(),
            mode: Some("0666".into()),
            gid: Some(0),
            usable: true,
        }],
        rdma_ports: vec![],
    });
    r
}

fn findings_for(change: impl Fn(&mut JoinReport), transport: Resolved) -> Vec<preflight::Finding> {
    let (cfg, reports) = two_e810s();
    let mut reports: Vec<JoinReport> = reports.into_iter().map(viewed).collect();
    for r in &mut reports {
        r.env.transport = transport;
    }
    change(&mut reports[1]);
    preflight::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
        auth::Mode::Token,
    )
    .into_iter()
    .filter(|f| f.level != Level::Pass)
    .collect()
}

fn one(f: &[preflight::Finding]) -> (Level, String, String) {
    assert_eq!(f.len(), 1, "{f:#?}");
    (f[0].level, f[0].check.clone(), f[0].message.clone())
}

#[test]
fn preflight_reads_what_the_container_sees() {
    let roce = Resolved::Roce;
    let (l, c, m) = one(&findings_for(
        |r| r.container.state = Some("exited".into()),
        roce,
    ));
    assert_eq!((l, c.as_str()), (Level::Warn, "container"));
    assert!(
        m.contains(
            "container vllm is exited: `halobox cluster up` starts it first (by hand: `halobox enter vllm -- true` on that node)"
        ),
        "{m}"
    );
    let (l, c, m) = one(&findings_for(
        |r| {
            r.container.state = Some("paused".into());
        },
        roce,
    ));
    assert_eq!((l, c.as_str()), (Level::Fail, "container"));
    assert!(
        m.contains("container vllm is paused, not running: start it with"),
        "{m}"
    );
    let (l, c, m) = one(&findings_for(|r| r.container.halobox = None, roce));
    assert_eq!((l, c.as_str()), (Level::Fail, "halobox"));
    assert!(m.contains("`halobox refresh --name vllm`"), "{m}");
    let (l, c, m) = one(&findings_for(
        |r| r.inside_error = Some("halobox does not run inside container vllm".into()),
        roce,
    ));
    assert_eq!((l, c.as_str()), (Level::Fail, "inside"));
    assert!(m.contains("does not run inside"), "{m}");
    let (l, c, m) = one(&findings_for(
        |r| r.inside_version = Some("0.0.1".into()),
        roce,
    ));
    assert_eq!((l, c.as_str()), (Level::Fail, "version"));
    assert!(m.contains("halobox in container vllm"), "{m}");
    // Made without devices: no /dev/kfd inside although the node has one.
    let (l, c, m) = one(&findings_for(|r| r.view.as_mut().unwrap().kfd = None, roce));
    assert_eq!((l, c.as_str()), (Level::Fail, "devices"));
    assert!(
        m.contains("/dev/kfd is not in container vllm (made without the GPU devices?)")
            && m.contains("`halobox refresh --name vllm` on that node"),
        "{m}"
    );
    // There, but the container's user cannot open it.
    let (l, c, m) = one(&findings_for(
        |r| {
            let v = r.view.as_mut().unwrap();
            v.user = "halo".into();
            v.kfd.as_mut().unwrap().usable = false;
        },
        roce,
    ));
    assert_eq!((l, c.as_str()), (Level::Fail, "devices"));
    assert!(
        m.contains("user halo in container vllm cannot open /dev/kfd (mode 0660, group 992)"),
        "{m}"
    );
    // RDMA devices and memlock: failures with RDMA, warnings over TCP.
    let no_ib = |r: &mut JoinReport| r.view.as_mut().unwrap().infiniband.clear();
    let (l, c, m) = one(&findings_for(no_ib, roce));
    assert_eq!((l, c.as_str()), (Level::Fail, "rdma"));
    assert!(
        m.contains("/dev/infiniband/uverbs0 of the node not in container vllm"),
        "{m}"
    );
    let (l, _, _) = one(&findings_for(no_ib, Resolved::Ethernet));
    assert_eq!(l, Level::Warn);
    let low = |r: &mut JoinReport| r.view.as_mut().unwrap().memlock = Some(8 << 20);
    let (l, c, m) = one(&findings_for(low, Resolved::Ethernet));
    assert_eq!((l, c.as_str()), (Level::Warn, "memlock"));
    assert!(
        m.contains("memlock is 8388608 bytes in container vllm"),
        "{m}"
    );
    assert_eq!(one(&findings_for(low, roce)).0, Level::Fail);
    // The node has no GPU at all: named as such.
    let (_, _, m) = one(&findings_for(
        |r| {
            r.view.as_mut().unwrap().kfd = None;
            r.container.node_kfd = false;
        },
        roce,
    ));
    assert!(m.contains("the node has no /dev/kfd"), "{m}");
}

/// With RoCE asked for, a container that sees no ACTIVE RDMA port (the
/// data plane's) in its /sys/class/infiniband fails preflight with the fix;
/// under `auto` it is no failure (TCP is chosen).
#[test]
fn preflight_fails_a_container_without_an_active_rdma_port_under_roce() {
    let port = |state: &str| PortView {
        device: "rocep194s0".into(),
        port: 1,
        state: Some(state.into()),
        netdevs: vec!["enp194s0np0".into()],
    };
    let run = |transport: Transport, ports: Vec<PortView>| {
        let (mut cfg, reports) = two_e810s();
        cfg.transport = transport;
        let mut reports: Vec<JoinReport> = reports.into_iter().map(viewed).collect();
        reports[0].view.as_mut().unwrap().rdma_ports = vec![port("ACTIVE")];
        reports[1].view.as_mut().unwrap().rdma_ports = ports;
        preflight::preflight(
            &cfg,
            &reports.into_iter().map(Ok).collect::<Vec<_>>(),
            "0.1.0",
            auth::Mode::Token,
        )
        .into_iter()
        .filter(|f| f.level != Level::Pass)
        .collect::<Vec<_>>()
    };
    assert_eq!(run(Transport::Roce, vec![port("ACTIVE")]), vec![]);
    let f = run(Transport::Roce, vec![]);
    assert_eq!(fails(&f), [("rdma".to_string(), Some("n2".to_string()))]);
    assert!(
        f[0].message.contains("transport roce asked for, but container vllm sees no RDMA port in /sys/class/infiniband (it needs rocep194s0 port 1 (the data plane's) ACTIVE)")
            && f[0].message.contains("`halobox refresh --name vllm` on that node"),
        "{}",
        f[0].message
    );
    let mut other = port("ACTIVE");
    other.device = "mlx5_0".into();
    let f = run(Transport::Roce, vec![port("DOWN"), other]);
    assert_eq!(fails(&f), [("rdma".to_string(), Some("n2".to_string()))]);
    assert!(
        f[0].message
            .contains("sees rocep194s0:1 DOWN, mlx5_0:1 ACTIVE in /sys/class/infiniband, not rocep194s0 port 1 (the data plane's) ACTIVE")
            && f[0].message.contains("check the cable"),
        "{}",
        f[0].message
    );
    assert_eq!(run(Transport::Auto, vec![]), vec![]);
    assert_eq!(run(Transport::Ethernet, vec![]), vec![]);
}

#[test]
fn view_from_facts_says_who_can_open_what() {
    let ok = halobox::cluster::view::from_facts(&facts("strix-e810"));
    assert_eq!(ok.user, "halo");
    assert!(ok.groups.contains(&105), "{:?}", ok.groups);
    let kfd = ok.kfd.as_ref().unwrap();
    assert_eq!((kfd.path.as_str(), kfd.usable), ("/dev/kfd", true));
    assert_eq!(ok.render.len(), 1);
    assert_eq!(
        ok.infiniband
            .iter()
            .map(|d| d.path.as_str())
            .collect::<Vec<_>>(),
        ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"]
    );
    assert!(
        ok.rdma_ports
            .iter()
            .any(|p| p.device == "rocep194s0" && p.state.as_deref() == Some("ACTIVE"))
    );
    // render group 992 owns /dev/kfd 0660; this user is not in it.
    let broken = halobox::cluster::view::from_facts(&facts("broken-e810"));
    let kfd = broken.kfd.as_ref().unwrap();
    assert!(!kfd.usable && kfd.gid == Some(992), "{kfd:?}");
    let (cfg, reports) = two_e810s();
    let mut reports: Vec<JoinReport> = reports;
    reports[1].view = Some(broken);
    let f = preflight::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
        auth::Mode::Token,
    );
    let devices = f.iter().find(|x| x.check == "devices").unwrap();
    assert_eq!(devices.level, Level::Fail);
    assert!(
        devices
            .message
            .contains("cannot open /dev/kfd (mode 0660, group 992), /dev/dri/renderD128 (mode 0660, group 992)"),
        "{}",
        devices.message
    );
}

#[test]
fn usb4_gives_tcp_sockets_on_the_thunderbolt_interface() {
    let usb4 = facts("strix-usb4");
    for asked in [Transport::Usb4, Transport::Auto] {
        let e = env::plan(&usb4, &req("10.0.0.1", "10.0.0.1", asked)).unwrap();
        assert_eq!(e.transport, env::Resolved::Usb4, "{asked}: {}", e.reason);
        assert!(!e.transport.is_rdma());
        assert_eq!(e.interface, "thunderbolt0");
        assert_eq!(var(&e, "NCCL_SOCKET_IFNAME"), Some("=thunderbolt0"));
        assert_eq!(var(&e, "GLOO_SOCKET_IFNAME"), Some("thunderbolt0"));
        assert_eq!(var(&e, "NCCL_IB_DISABLE"), Some("1"));
        assert_eq!(var(&e, "NCCL_IB_HCA"), None);
        assert_eq!(var(&e, "VLLM_HOST_IP"), Some("10.0.0.1"));
        assert!(
            e.ray_start
                .contains(&"--node-ip-address=10.0.0.1".to_string())
        );
    }
    let e = env::plan(&usb4, &req("10.0.0.1", "10.0.0.1", Transport::Usb4)).unwrap();
    assert!(e.reason.contains("at 40 Gb/s"), "{}", e.reason);
    // An RDMA NIC's address is no USB4 link.
    let err = env::plan(
        &facts("strix-e810"),
        &req("192.168.100.1", "192.168.100.1", Transport::Usb4),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("enp194s0np0 (which holds 192.168.100.1) is not a USB4/Thunderbolt interface"),
        "{err}"
    );
    assert!(env::Resolved::Roce.is_rdma() && env::Resolved::Ib.is_rdma());
    assert_eq!("usb4".parse::<Transport>().unwrap(), Transport::Usb4);
}

/// strix-usb4 copied, with `extra` files (empty) added: the USB4 net
/// plugin in the image and its device node on the host.
fn usb4_with(extra: &[&str]) -> (tempfile::TempDir, HostFacts) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/strix-usb4");
    let d = tempfile::tempdir().unwrap();
    let copy = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(d.path().join("h"))
        .status()
        .unwrap();
    assert!(copy.success());
    for f in extra {
        let p = d.path().join("h").join(f.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    let facts = host::gather(
        HostRoot::sysroot(&d.path().join("h")).unwrap(),
        GatherOptions::default(),
    );
    (d, facts)
}

#[test]
fn usb4_uses_the_net_plugin_only_with_its_library_and_its_device() {
    let plugin = "/opt/rocm/lib/librccl-net-ODL_TB5.so";
    let (_d, both) = usb4_with(&[plugin, "/dev/odl_tb5_0"]);
    let e = env::plan(&both, &req("10.0.0.1", "10.0.0.1", Transport::Usb4)).unwrap();
    assert_eq!(e.transport, Resolved::Usb4);
    assert_eq!(e.net_plugin.as_deref(), Some("ODL_TB5"));
    assert_eq!(var(&e, "NCCL_NET_PLUGIN"), Some("ODL_TB5"));
    assert_eq!(var(&e, "NCCL_SOCKET_IFNAME"), Some("=thunderbolt0"));
    assert_eq!(var(&e, "NCCL_IB_DISABLE"), Some("1"));
    assert!(
        e.reason.contains(&format!(
            "RCCL loads the USB4 net plugin {plugin} (OdinLink-Five)"
        )),
        "{}",
        e.reason
    );
    // The user's own value wins (`NCCL_NET_PLUGIN=none` turns it off).
    let mut own = req("10.0.0.1", "10.0.0.1", Transport::Usb4);
    own.env = env::vars(&[("NCCL_NET_PLUGIN".to_string(), "none".to_string())].into());
    let e = env::plan(&both, &own).unwrap();
    assert_eq!(var(&e, "NCCL_NET_PLUGIN"), Some("none"));
    assert_eq!(e.net_plugin, None);
    // Another transport never loads it.
    let e = env::plan(&both, &req("10.0.0.1", "10.0.0.1", Transport::Ethernet)).unwrap();
    assert_eq!(var(&e, "NCCL_NET_PLUGIN"), None);

    // The library without the device: TCP, and the reason says what is missing.
    let (_d, lib_only) = usb4_with(&[plugin]);
    let e = env::plan(&lib_only, &req("10.0.0.1", "10.0.0.1", Transport::Usb4)).unwrap();
    assert_eq!(e.net_plugin, None);
    assert_eq!(var(&e, "NCCL_NET_PLUGIN"), None);
    assert!(
        e.reason
            .contains("no /dev/odl_tb5_* device is (load the odl_tb5 kernel module"),
        "{}",
        e.reason
    );
    // The device without the library.
    let (_d, dev_only) = usb4_with(&["/dev/odl_tb5_0"]);
    let e = env::plan(&dev_only, &req("10.0.0.1", "10.0.0.1", Transport::Usb4)).unwrap();
    assert_eq!(var(&e, "NCCL_NET_PLUGIN"), None);
    assert!(
        e.reason
            .contains("/dev/odl_tb5_0 is here but no USB4 net plugin"),
        "{}",
        e.reason
    );
    // Neither: the plain TCP env, the plain reason.
    let e = env::plan(
        &facts("strix-usb4"),
        &req("10.0.0.1", "10.0.0.1", Transport::Usb4),
    )
    .unwrap();
    assert_eq!(e.net_plugin, None);
    assert!(!e.reason.contains("plugin"), "{}", e.reason);
}

/// One node with the USB4 net plugin, the head without: RCCL's ranks would
/// pick different networks, so preflight fails naming both.
#[test]
fn preflight_fails_a_usb4_plugin_on_one_node_only() {
    let (l, c, m) = one(&findings_for(
        |r| r.env.net_plugin = Some("ODL_TB5".into()),
        Resolved::Usb4,
    ));
    assert_eq!((l, c.as_str()), (Level::Fail, "net_plugin"));
    assert!(
        m.contains("RCCL would use the USB4 net plugin (NCCL_NET_PLUGIN=ODL_TB5) there, no net plugin (TCP sockets) on the head"),
        "{m}"
    );
}
