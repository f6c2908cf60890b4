//! Plan-level tests of the cluster: each node's env from the host snapshots
//! in tests/fixtures/hosts, the preflight verdict, and the `vllm serve`
//! command and env that would run (vLLM itself cannot run here).

use std::path::PathBuf;

use halobox::cluster::config::{ClusterConfig, NodeBackend, NodeConfig, Transport};
use halobox::cluster::env::{self, EnvError, EnvRequest, NodeEnv, Resolved};
use halobox::cluster::plan::{self, ContainerReport, JoinReport, Level, ServeRequest};
use halobox::cluster::view::{DeviceAccess, RuntimeView};
use halobox::host::{self, GatherOptions, HostFacts, HostRoot};

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
    assert_eq!(
        e.per_node,
        [
            "NCCL_SOCKET_IFNAME",
            "GLOO_SOCKET_IFNAME",
            "NCCL_IB_HCA",
            "NCCL_IB_GID_INDEX",
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
    }
}

fn report(env: NodeEnv, digest: &str) -> JoinReport {
    JoinReport {
        halobox_version: "0.1.0".into(),
        command: vec![],
        port_free: env.is_head.then_some(true),
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

fn fails(findings: &[plan::Finding]) -> Vec<(String, Option<String>)> {
    findings
        .iter()
        .filter(|f| f.level == Level::Fail)
        .map(|f| (f.check.clone(), f.node.clone()))
        .collect()
}

#[test]
fn preflight_passes_a_consistent_cluster() {
    let (cfg, reports) = two_e810s();
    let f = plan::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
    );
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].level, Level::Pass);
    assert!(f[0].message.contains("transport roce"));
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
    let f = plan::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
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
    let f = plan::preflight(&cfg, &rs, "0.1.0");
    assert_eq!(fails(&f), [("reach".to_string(), Some("n2".to_string()))]);
    assert!(
        f.iter()
            .any(|x| x.level == Level::Warn && x.check == "devices")
    );
}

fn serve_req() -> ServeRequest {
    ServeRequest {
        model: "Qwen/Qwen3-30B-A3B".into(),
        tp: 2,
        max_model_len: Some(32768),
        gpu_memory_utilization: 0.90,
        eager: true,
        port: 8000,
        nccl_debug: true,
        extra: vec!["--max-num-seqs".into(), "8".into()],
        hf_token: true,
    }
}

#[test]
fn serve_command_and_env() {
    let (cfg, reports) = two_e810s();
    let p = plan::serve(&serve_req(), &reports[0].env, 2).unwrap();
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
    let argv = plan::serve_argv("halobox", cfg.head(), &p);
    assert_eq!(argv[..6], ["halobox", "enter", "vllm", "--", "sh", "-c"]);
    assert_eq!(argv[6], plan::TOKEN_FROM_STDIN);
    let mut podman = cfg.head().clone();
    podman.backend = NodeBackend::Podman;
    assert_eq!(
        plan::serve_argv("halobox", &podman, &p)[..4],
        ["podman", "exec", "-i", "vllm"]
    );
    let text = plan::render_serve(&p, &argv);
    assert!(text.contains("HF_TOKEN=********"), "{text}");
    assert!(
        text.contains("\nvllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2"),
        "{text}"
    );
}

#[test]
fn serve_refuses_what_cannot_work() {
    let (_, reports) = two_e810s();
    let mut r = serve_req();
    r.tp = 3;
    assert!(
        plan::serve(&r, &reports[0].env, 2)
            .unwrap_err()
            .contains("--tp 3 needs 3 GPU(s)")
    );
    let mut r = serve_req();
    r.extra = vec!["--distributed-executor-backend=mp".into()];
    assert!(plan::serve(&r, &reports[0].env, 2).is_err());
    let mut r = serve_req();
    r.gpu_memory_utilization = 0.95;
    r.eager = false;
    let p = plan::serve(&r, &reports[0].env, 2).unwrap();
    assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
    assert!(!p.command.contains(&"--enforce-eager".to_string()));
    r.gpu_memory_utilization = 1.5;
    assert!(plan::serve(&r, &reports[0].env, 2).is_err());
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
    assert!(
        !plan::join_command(&cfg, &cfg.nodes[0], true)
            .iter()
            .any(|a| a.starts_with("--node-env"))
    );
    let mut r = req("192.168.100.1", "192.168.100.1", Transport::Auto);
    r.env = env::vars(&cfg.env);
    r.node_env = env::vars(&cfg.nodes[1].env);
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
        text.contains("# this node's own (vLLM must not copy the head's): NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME NCCL_IB_HCA NCCL_IB_GID_INDEX VLLM_HOST_IP NCCL_DEBUG"),
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
        "--dry-run",
        "--json",
    ] {
        assert!(
            inside.contains(&want.to_string()),
            "{want} not in {inside:?}"
        );
    }
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

fn findings_for(change: impl Fn(&mut JoinReport), transport: Resolved) -> Vec<plan::Finding> {
    let (cfg, reports) = two_e810s();
    let mut reports: Vec<JoinReport> = reports.into_iter().map(viewed).collect();
    for r in &mut reports {
        r.env.transport = transport;
    }
    change(&mut reports[1]);
    plan::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
    )
    .into_iter()
    .filter(|f| f.level != Level::Pass)
    .collect()
}

fn one(f: &[plan::Finding]) -> (Level, String, String) {
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
    assert_eq!((l, c.as_str()), (Level::Fail, "container"));
    assert!(
        m.contains(
            "container vllm is exited, not running: start it with `halobox enter vllm -- true`"
        ),
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
    let f = plan::preflight(
        &cfg,
        &reports.into_iter().map(Ok).collect::<Vec<_>>(),
        "0.1.0",
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
