//! `halobox cluster init|up|join|status|down|tui`.

use std::io::IsTerminal;
use std::net::Ipv4Addr;
use std::process::ExitCode;

use crate::cli::{
    Channel, ClusterBenchArgs, ClusterCommand, ClusterDoctorArgs, ClusterDownArgs, ClusterFileArgs,
    ClusterInitArgs, ClusterInstallArgs, ClusterJoinArgs, ClusterRefreshArgs, ClusterStatusArgs,
    ClusterUpArgs, DryRunArgs, OutputArgs, PlanOutputArgs, SourceArgs, YesArgs,
};
use crate::cluster::auth;
use crate::cluster::config::{self, ClusterConfig, Engine, NodeConfig};
use crate::cluster::env::{self, EnvRequest};
use crate::cluster::join::{self, JoinRequest, RayAuth};
use crate::cluster::plan::{self, in_container, with_env};
use crate::cluster::{rpc, run};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::shell;

/// Runs a `cluster` subcommand.
pub fn run(cmd: ClusterCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ClusterCommand::Init(a) => init(&a),
        ClusterCommand::Up(a) => up(&a),
        ClusterCommand::Join(a) => join(&a),
        ClusterCommand::Status(a) => status(&a),
        ClusterCommand::Down(a) => down(&a),
        ClusterCommand::Refresh(a) => super::cluster_fleet::refresh(&a),
        ClusterCommand::Install(a) => super::cluster_fleet::install(&a),
        ClusterCommand::Doctor(a) => super::cluster_doctor::run(&a),
        ClusterCommand::Bench(a) => super::cluster_bench::run(&a),
        ClusterCommand::Tui(a) => tui(&a),
        ClusterCommand::Metrics(a) => metrics(&a),
    }
}

fn parse_node(spec: &str, a: &ClusterInitArgs) -> Result<NodeConfig, String> {
    let (ssh, ip) = spec.split_once(',').ok_or_else(|| {
        format!("--node {spec:?}: write SSH_TARGET,IP (root@node1,192.168.100.1)")
    })?;
    let ip: Ipv4Addr = ip
        .trim()
        .parse()
        .map_err(|_| format!("--node {spec:?}: {ip:?} is not an IPv4 address"))?;
    Ok(NodeConfig {
        name: None,
        ssh: ssh.trim().to_string(),
        ip,
        container: a.ray_node.container.clone(),
        backend: a.ray_node.backend,
        cpus: a.cpus,
        env: Default::default(),
    })
}

fn prompt_nodes(a: &ClusterInitArgs) -> anyhow::Result<Vec<NodeConfig>> {
    use dialoguer::Input;
    let mut nodes = Vec::new();
    loop {
        let role = if nodes.is_empty() { "head" } else { "worker" };
        let ssh: String = Input::new()
            .with_prompt(format!(
                "node {} ({role}) ssh target{}",
                nodes.len() + 1,
                if nodes.is_empty() {
                    ""
                } else {
                    " (empty: done)"
                }
            ))
            .allow_empty(!nodes.is_empty())
            .interact_text()?;
        if ssh.trim().is_empty() {
            return Ok(nodes);
        }
        let ip: Ipv4Addr = Input::new()
            .with_prompt(format!("node {} data-plane IPv4", nodes.len() + 1))
            .interact_text()?;
        nodes.push(parse_node(&format!("{ssh},{ip}"), a).map_err(UsageError)?);
    }
}

fn init(a: &ClusterInitArgs) -> anyhow::Result<ExitCode> {
    let nodes = if a.node.is_empty() {
        if !std::io::stdin().is_terminal() {
            return Err(UsageError(
                "no --node given and stdin is not a terminal: pass --node SSH_TARGET,IP for every node (the first is the head)".into(),
            )
            .into());
        }
        prompt_nodes(a)?
    } else {
        a.node
            .iter()
            .map(|n| parse_node(n, a))
            .collect::<Result<_, _>>()
            .map_err(UsageError)?
    };
    let mut cfg = ClusterConfig::new(nodes);
    cfg.transport = a.ray_node.transport;
    cfg.ray_port = a.ray_node.port;
    cfg.validate().map_err(UsageError)?;
    let text = cfg.to_toml();
    if a.print {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let path = config::path(a.file.cluster.as_deref())
        .ok_or_else(|| UsageError("no config directory: pass --cluster FILE".into()))?;
    if path.exists() && !a.force {
        return Err(UsageError(format!(
            "{} exists: pass --force to replace it, or --print to see the new one",
            path.display()
        ))
        .into());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, text)?;
    println!(
        "wrote {} ({} node(s), head {})",
        path.display(),
        cfg.nodes.len(),
        cfg.head().label()
    );
    Ok(ExitCode::SUCCESS)
}

fn up(a: &ClusterUpArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    up_with(
        &cfg,
        &path,
        a.plan.dry_run,
        a.timeout.unwrap_or(cfg.timeout_s),
        if a.insecure_ray {
            auth::Mode::Insecure
        } else {
            auth::Mode::Token
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `cluster up` of `cfg` (read from `path`, perhaps changed in memory):
/// Ray, or llama.cpp's RPC servers; each node's env as applied.
pub fn up_with(
    cfg: &ClusterConfig,
    path: &std::path::Path,
    dry_run: bool,
    timeout_s: u64,
    mode: auth::Mode,
) -> anyhow::Result<Vec<env::NodeEnv>> {
    if cfg.engine == Engine::LlamaCpp {
        return rpc::up(cfg, dry_run, &mut std::io::stdout());
    }
    run::up(cfg, path, dry_run, timeout_s, mode, &mut std::io::stdout())
}

fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1))
}

fn join(a: &ClusterJoinArgs) -> anyhow::Result<ExitCode> {
    if a.source.sysroot.is_some() && !a.mode.dry_run() {
        return Err(UsageError(
            "--sysroot reads a snapshot of another machine: Ray cannot be started from it; add --dry-run".into(),
        )
        .into());
    }
    if a.mode.json() && !a.mode.dry_run() {
        return Err(UsageError("--json goes with --dry-run".into()).into());
    }
    let root = match &a.source.sysroot {
        Some(dir) => HostRoot::sysroot(dir)?,
        None => HostRoot::live(),
    };
    let facts = host::gather(root, GatherOptions::default());
    // A snapshot's CPU count is its own, never this machine's.
    let cpus = match (a.num_cpus, &a.source.sysroot, facts.cpus_online) {
        (Some(n), _, _) => n,
        (None, Some(_), Some(n)) => n,
        (None, Some(dir), None) => {
            return Err(UsageError(format!(
                "{} has no sys/devices/system/cpu/online, so its CPU count is unknown\n  hint: pass --num-cpus N",
                dir.display()
            ))
            .into());
        }
        (None, None, _) => cpus(),
    };
    let parse = |list: &[String]| -> Result<Vec<env::EnvVar>, UsageError> {
        list.iter()
            .map(|s| env::parse_assignment(s).map_err(|e| UsageError(format!("--env {e}"))))
            .collect()
    };
    let req = JoinRequest {
        env: EnvRequest {
            ip: a.ip,
            head: a.head,
            port: a.ray_node.port,
            transport: a.ray_node.transport,
            cpus,
            ray: a.ray.clone(),
            ray_args: a.ray_arg.clone(),
            ray_head_args: a.ray_head_arg.clone(),
            env: parse(&a.env)?,
            node_env: parse(&a.node_env)?,
            cluster_node_env: a.per_node_name.clone(),
        },
        backend: a.ray_node.backend,
        container: a.ray_node.container.clone(),
        engine: a.engine.engine.clone(),
        halobox: "halobox".into(),
        check_port: a.source.sysroot.is_none(),
        auth: None,
    };
    let named = |e: String| anyhow::anyhow!("node {}: {e}", a.ip);
    if a.source.sysroot.is_some() && a.ray_node.backend.is_container() && !a.mode.json() {
        let env = env::plan(&facts, &req.env).map_err(|e| named(e.to_string()))?;
        print!("{}", plan::render_env(&env));
        let full = in_container(
            "halobox",
            a.ray_node.backend,
            &a.ray_node.container,
            &with_env(&env.vars, &env.ray_start),
        );
        println!("# runs as: {}", shell::line(&full));
        return Ok(ExitCode::SUCCESS);
    }
    let report =
        join::report(&facts, &req, a.mode.dry_run()).map_err(|e| named(format!("{e:#}")))?;
    if a.mode.dry_run() {
        if a.mode.json() {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print!("{}", plan::render_join(&report));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let req = JoinRequest {
        auth: if a.ray_token_stdin {
            Some(RayAuth::Token(auth::read_token_line(std::io::stdin())?))
        } else if a.insecure_ray {
            eprintln!("{}", auth::INSECURE_WARNING);
            Some(RayAuth::Insecure)
        } else {
            None
        },
        ..req
    };
    join::start(&report, &req).map_err(|e| named(format!("{e:#}")))?;
    Ok(ExitCode::SUCCESS)
}

fn status(a: &ClusterStatusArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    if cfg.engine == Engine::LlamaCpp {
        // The HELLO is said from the head only (the data plane may not be
        // reachable from elsewhere): this machine holds the head's address.
        let on_data_plane = std::net::UdpSocket::bind((cfg.head().ip, 0)).is_ok();
        let rows = rpc::status(&cfg, on_data_plane);
        if a.output.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            println!(
                "engine llama.cpp: RPC servers on port {} (head {} runs llama-server: `halobox serve status`)",
                cfg.rpc_port,
                cfg.head().label()
            );
            print!("{}", rpc::render_status(&rows));
        }
        return Ok(if rows.iter().all(|r| r.state == "running") {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let s = run::status(&cfg, &path)?;
    let healthy = s.error.is_none() && s.alive == cfg.nodes.len() && s.unknown.is_empty();
    if a.output.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", render_status(&s, cfg.nodes.len()));
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The status table.
pub fn render_status(s: &run::Status, n: usize) -> String {
    let mut out = format!("Ray GCS {}: {}/{n} node(s) alive\n", s.gcs, s.alive);
    if let Some(e) = &s.error {
        out.push_str(&format!(
            "  Ray is not answering: {e}\n  hint: `halobox cluster up`\n"
        ));
    }
    out.push_str(&format!(
        "{:<16} {:<15} {:<6} {:>3} {:>4}  {:<9} {}\n",
        "NODE", "IP", "RAY", "GPU", "CPU", "TRANSPORT", "ENV"
    ));
    for node in &s.nodes {
        let res = |k: &str| {
            node.ray
                .as_ref()
                .and_then(|r| r.resources.get(k))
                .map_or("-".into(), |v| format!("{v}"))
        };
        let (transport, env) = match &node.env {
            Some(e) => (e.transport.to_string(), e.assignments().join(" ")),
            None => ("-".into(), "(not started by `cluster up` from here)".into()),
        };
        out.push_str(&format!(
            "{:<16} {:<15} {:<6} {:>3} {:>4}  {:<9} {}\n",
            node.name,
            node.ip,
            if node.ray.is_some() {
                "alive"
            } else {
                "absent"
            },
            res("GPU"),
            res("CPU"),
            transport,
            env
        ));
    }
    for u in &s.unknown {
        out.push_str(&format!(
            "note: Ray also lists {} (not in cluster.toml)\n",
            u.ip
        ));
    }
    out
}

fn down(a: &ClusterDownArgs) -> anyhow::Result<ExitCode> {
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    if a.plan.dry_run {
        println!(
            "{} (first: a vLLM that halobox serve started, and its shm segments): {}",
            cfg.head().label(),
            shell::line(&crate::serve::control::stop_argv(&cfg))
        );
        if cfg.engine == Engine::LlamaCpp {
            for node in rpc::workers(&cfg) {
                println!(
                    "{}: {}",
                    node.label(),
                    shell::line(&run::node_argv(&cfg, node, &rpc::stop_command(&cfg, node)))
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        for node in &cfg.nodes {
            println!(
                "{}: {}",
                node.label(),
                shell::line(&run::node_argv(&cfg, node, &plan::stop_command(&cfg, node)))
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    Ok(if down_with(&cfg) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `cluster down` of `cfg`: the serve on the head first, then Ray or the
/// RPC servers; true when every node stopped.
pub fn down_with(cfg: &ClusterConfig) -> bool {
    match crate::serve::control::stop_over_ssh(cfg) {
        Ok(said) if said.starts_with("stopped ") => {
            println!(
                "{}: {} stopped first ({said})",
                cfg.head().label(),
                cfg.engine.title()
            );
        }
        Ok(_) => {}
        Err(e) => eprintln!(
            "warning: could not look for a running {} on the head first: {e}",
            cfg.engine.title()
        ),
    }
    if cfg.engine == Engine::LlamaCpp {
        let mut ok = true;
        for (name, r) in rpc::down(cfg) {
            match r {
                Ok(said) => println!("{name}: RPC server {said}"),
                Err(e) => {
                    ok = false;
                    println!("{name}: FAILED: {e}");
                }
            }
        }
        if !ok {
            eprintln!(
                "error: an RPC server was not stopped (see above); `halobox cluster status` shows them, then run `halobox cluster down` again"
            );
        }
        return ok;
    }
    let results = run::down(cfg);
    let mut ok = true;
    for r in &results {
        if r.outcome == "stopped" {
            println!("{}: stopped ({})", r.name, r.detail);
        } else {
            ok = false;
            println!("{}: {}: {}", r.name, r.outcome.to_uppercase(), r.detail);
        }
    }
    if !ok {
        eprintln!(
            "error: Ray was not stopped on every node (see above); stop it there by hand with `ray stop`, then run `halobox cluster down` again"
        );
    }
    ok
}

fn tui(a: &ClusterFileArgs) -> anyhow::Result<ExitCode> {
    use dialoguer::Select;
    if !std::io::stdin().is_terminal() {
        return Err(UsageError(
            "the menu needs a terminal: use `halobox cluster up|status|down` and `halobox serve` instead".into(),
        )
        .into());
    }
    let file = || ClusterFileArgs {
        cluster: a.cluster.clone(),
    };
    let items = [
        "status",
        "up (dry run: preflight and plan)",
        "up",
        "serve a model (vLLM on the head)",
        "down",
        "show cluster.toml",
        "doctor every node (one table, cross-node checks)",
        "benchmark every pair of nodes",
        "refresh every node's container (dry run: the plan)",
        "refresh every node's container",
        "install this halobox on every node",
        "quit",
    ];
    loop {
        let pick = Select::new()
            .with_prompt("halobox cluster")
            .items(items)
            .default(0)
            .interact()?;
        let outcome = match pick {
            0 => status(&ClusterStatusArgs {
                file: file(),
                output: OutputArgs { json: false },
            }),
            1 | 2 => up(&ClusterUpArgs {
                file: file(),
                plan: DryRunArgs { dry_run: pick == 1 },
                timeout: None,
                insecure_ray: false,
            }),
            3 => serve_menu(a),
            4 => down(&ClusterDownArgs {
                file: file(),
                plan: DryRunArgs { dry_run: false },
            }),
            5 => config::open(a.cluster.as_deref())
                .map(|(p, c)| {
                    println!("# {}\n{}", p.display(), c.to_toml());
                    ExitCode::SUCCESS
                })
                .map_err(anyhow::Error::from),
            6 => super::cluster_doctor::run(&ClusterDoctorArgs {
                file: file(),
                output: OutputArgs { json: false },
            }),
            7 => super::cluster_bench::run(&ClusterBenchArgs {
                file: file(),
                pairs: crate::fleet::bench::Pairs::All,
                save: None,
                duration: 10,
                rdma: false,
                no_rdma: false,
                collective: false,
                output: OutputArgs { json: false },
            }),
            8 | 9 => super::cluster_fleet::refresh(&ClusterRefreshArgs {
                channel: Channel::Latest,
                image: None,
                restart: false,
                memlock: None,
                pull: None,
                file: file(),
                mode: PlanOutputArgs {
                    plan: DryRunArgs { dry_run: pick == 8 },
                    output: OutputArgs { json: false },
                },
                confirm: YesArgs { yes: false },
            }),
            10 => super::cluster_fleet::install(&ClusterInstallArgs {
                halobox: None,
                timeout: crate::fleet::install::SEND_TIMEOUT_S,
                file: file(),
                plan: DryRunArgs { dry_run: false },
            }),
            _ => return Ok(ExitCode::SUCCESS),
        };
        if let Err(e) = outcome {
            eprintln!("error: {e:#}");
        }
    }
}

/// The menu's serve item: what the guides' launcher asks (model, tensor
/// parallel size, context length, eager mode, erase the compile cache),
/// then the plan (`serve --dry-run`) and, confirmed, `serve`.
fn serve_menu(a: &ClusterFileArgs) -> anyhow::Result<ExitCode> {
    use dialoguer::{Confirm, Input};
    let (_, cfg) = config::open(a.cluster.as_deref())?;
    let n = u32::try_from(cfg.nodes.len()).unwrap_or(u32::MAX);
    let model: String = Input::new().with_prompt("model").interact_text()?;
    let tp: u32 = Input::new()
        .with_prompt(format!("tensor parallel size (1..{n}, one GPU per node)"))
        .default(n)
        .validate_with(|v: &u32| {
            if (1..=n).contains(v) {
                Ok(())
            } else {
                Err(format!("use 1..{n}: the cluster has {n} node(s)"))
            }
        })
        .interact_text()?;
    let context: String = Input::new()
        .with_prompt("context length (--max-model-len; empty: the model's own)")
        .allow_empty(true)
        .validate_with(|v: &String| {
            let v = v.trim();
            if v.is_empty() || v.parse::<u32>().is_ok_and(|l| l > 0) {
                Ok(())
            } else {
                Err("a number of tokens (e.g. 131072), or empty")
            }
        })
        .interact_text()?;
    let eager = Confirm::new()
        .with_prompt("force eager mode (CUDA graphs can deadlock on distributed APUs)")
        .default(true)
        .interact()?;
    let clear_cache = Confirm::new()
        .with_prompt("erase vLLM's compile cache first (yes when restarting after a crash)")
        .default(false)
        .interact()?;
    let args = |dry_run| crate::cli::ServeArgs {
        action: None,
        engine: None,
        model: Some(model.clone()),
        file: ClusterFileArgs {
            cluster: a.cluster.clone(),
        },
        tp: Some(tp),
        max_model_len: context.trim().parse().ok(),
        gpu_memory_utilization: plan::SAFE_GPU_MEMORY,
        eager,
        no_eager: !eager,
        host: None,
        port: 8000,
        no_api_key: false,
        clear_cache,
        nccl_debug: false,
        detach: false,
        preflight: false,
        timeout: 1800,
        source: SourceArgs { sysroot: None },
        plan: DryRunArgs { dry_run },
        extra: vec![],
    };
    match super::serve::run(&args(true)) {
        Ok(_) if Confirm::new().with_prompt("start it?").interact()? => {
            super::serve::run(&args(false))
        }
        other => other,
    }
}

fn metrics(a: &crate::cli::ClusterMetricsArgs) -> anyhow::Result<ExitCode> {
    use crate::metrics::scrape_config;
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    if a.prometheus_config {
        print!(
            "{}",
            scrape_config::prometheus_config(
                &cfg,
                a.metrics_port,
                a.serve_port,
                &crate::serve::api_key::path(&path)
            )
        );
    } else {
        for e in scrape_config::endpoints(&cfg, a.metrics_port, a.serve_port) {
            println!("{:<8} {:<16} http://{}/metrics", e.job, e.node, e.target);
        }
    }
    Ok(ExitCode::SUCCESS)
}
