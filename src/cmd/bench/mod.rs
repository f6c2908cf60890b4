//! `halobox bench`: run, serve, probe, report, compare.

pub mod ab;
pub mod collective;
pub mod serving;

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::bench::plan::{self, BenchOptions, RdmaMode};
use crate::bench::probe::{self, NodeContext};
use crate::bench::results::{self, Results};
use crate::bench::{peer as bench_peer, report, run as exec, tcp};
use crate::cli::{
    BenchClientArgs, BenchCommand, BenchCompareArgs, BenchExecArgs, BenchOn, BenchReportArgs,
    BenchRunArgs, BenchServeArgs,
};
use crate::cluster::config;
use crate::container::inside::{self, Inside};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};

/// Runs a `bench` subcommand.
pub fn run(cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Run(args) => bench_run(&args),
        BenchCommand::Serve(args) => serve(&args),
        BenchCommand::Probe(args) => {
            let root = match &args.source.sysroot {
                Some(dir) => HostRoot::sysroot(dir)?,
                None => HostRoot::live(),
            };
            println!("{}", serde_json::to_string(&probe::probe(root, args.ip))?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Client(args) => client(&args),
        BenchCommand::Exec(args) => exec_in(&args),
        BenchCommand::Serving(args) if args.ab_transport => ab::run(&args),
        BenchCommand::Serving(args) => serving::run(&args),
        BenchCommand::Collective(args) => collective::run_cmd(&args),
        BenchCommand::Report(args) => report_cmd(&args),
        BenchCommand::Compare(args) => compare(&args),
    }
}

fn serve(args: &BenchServeArgs) -> anyhow::Result<ExitCode> {
    let bind = match args.bind {
        Some(b) => b,
        None => {
            let facts = host::gather(HostRoot::live(), GatherOptions::default());
            tcp::default_bind(&facts).map_err(UsageError)?
        }
    };
    let opts = tcp::ServeOptions {
        bind,
        port: args.server.port,
        idle_timeout: Duration::from_secs(args.idle_timeout),
        io_timeout: Duration::from_secs(args.io_timeout),
        token: tcp::StopToken::generate().context("cannot read /dev/urandom")?,
    };
    tcp::serve(&opts, |addr| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", tcp::ready_line(addr, &opts.token));
        let _ = out.flush();
    })
    .with_context(|| format!("cannot serve on {bind}:{}", args.server.port))?;
    Ok(ExitCode::SUCCESS)
}

fn client(args: &BenchClientArgs) -> anyhow::Result<ExitCode> {
    let target = tcp::Target {
        peer: args.to,
        local: args.from,
    };
    let log = exec::tcp_client(
        &target,
        args.latency,
        args.streams.unwrap_or(1),
        Duration::from_secs(u64::from(args.duration)),
    )
    .with_context(|| format!("halobox TCP client to {}", args.to))?;
    print!("{log}");
    Ok(ExitCode::SUCCESS)
}

fn exec_in(args: &BenchExecArgs) -> anyhow::Result<ExitCode> {
    let name = default_container(args.container.as_deref())?;
    let inside = inside::find(&name, args.engine.engine.as_deref())?.ok_or_else(|| {
        UsageError(format!(
            "there is no container {name} on this node\n  hint: create it with `halobox refresh --name {name}`"
        ))
    })?;
    let argv = inside.argv(&args.command);
    let status = crate::proc::command(&argv[0])
        .args(&argv[1..])
        .status()
        .with_context(|| format!("cannot run {}: install its command-line tool", argv[0]))?;
    Ok(ExitCode::from(
        u8::try_from(status.code().unwrap_or(1).clamp(0, 255)).unwrap_or(1),
    ))
}

/// The peer as the flags and the cluster file give it.
struct Peer {
    ssh: String,
    peer_ips: Vec<Ipv4Addr>,
    iface_ips: Vec<Ipv4Addr>,
    halobox: String,
    ssh_options: Vec<String>,
    from: Option<String>,
    /// This node's container (`None`: the cluster file runs its Ray on the host).
    container: Option<String>,
    /// Why this node's end is expected in `container` (the cluster file
    /// runs this node's Ray there, or `--container`); `None` when the
    /// container is only the default name tried.
    expected: Option<String>,
    /// The peer's container (`None`: on its host).
    peer_container: Option<String>,
}

/// The container `--container`, else the config file's `name`, else vllm.
fn default_container(args_container: Option<&str>) -> anyhow::Result<String> {
    crate::container::name::resolve(args_container)
}

/// `--peer` with `--peer-ip` stand alone; otherwise the cluster file names
/// the peer (and fills in what the flags leave out).
fn resolve_peer(args: &BenchRunArgs, facts: &host::HostFacts) -> anyhow::Result<Peer> {
    if let (Some(ssh), false, None) = (&args.peer, args.peer_ip.is_empty(), &args.peer_node) {
        return Ok(Peer {
            ssh: ssh.clone(),
            peer_ips: args.peer_ip.clone(),
            iface_ips: args.iface_ip.clone(),
            halobox: args
                .peer_halobox
                .clone()
                .unwrap_or_else(|| "halobox".into()),
            ssh_options: args.ssh_option.clone(),
            from: None,
            container: Some(default_container(args.container.as_deref())?),
            expected: args.container.as_ref().map(|n| format!("--container {n}")),
            peer_container: Some(default_container(args.container.as_deref())?),
        });
    }
    let path = config::path(args.file.cluster.as_deref()).ok_or_else(|| {
        UsageError(
            "no config directory (HOME unset?): pass --cluster FILE, or --peer SSH_TARGET --peer-ip IP"
                .into(),
        )
    })?;
    let cfg = config::load(&path).map_err(|e| {
        UsageError(format!(
            "{e}\n  or name the peer without a cluster file: --peer SSH_TARGET --peer-ip IP"
        ))
    })?;
    let by_ip = args
        .peer_ip
        .first()
        .map(|ip| ip.to_string())
        .filter(|ip| bench_peer::find(&cfg, ip).is_some());
    let wanted = args.peer_node.clone().or(args.peer.clone()).or(by_ip);
    let choice =
        bench_peer::choose(&cfg, &path, &facts.network, wanted.as_deref()).map_err(UsageError)?;
    let from_config = args.peer_ip.is_empty();
    let iface_ips = match (&choice.this, from_config && args.iface_ip.is_empty()) {
        (Some(t), true) => vec![t.ip],
        _ => args.iface_ip.clone(),
    };
    let mut ssh_options = cfg.ssh_options.clone();
    ssh_options.extend(args.ssh_option.iter().cloned());
    let in_container = |n: &config::NodeConfig| {
        n.backend.is_container().then(|| {
            args.container
                .clone()
                .unwrap_or_else(|| n.container.clone())
        })
    };
    let this = choice
        .this
        .as_ref()
        .and_then(|t| cfg.nodes.iter().find(|n| n.ip == t.ip));
    let container = match this {
        Some(n) => in_container(n),
        None => Some(default_container(args.container.as_deref())?),
    };
    let expected = match (this, &args.container) {
        (_, Some(n)) => Some(format!("--container {n}")),
        (Some(n), None) if n.backend.is_container() => Some(format!(
            "{} runs this node's Ray in its {} container {}",
            path.display(),
            n.backend,
            n.container
        )),
        _ => None,
    };
    Ok(Peer {
        container,
        expected,
        peer_container: in_container(&choice.node),
        ssh: args.peer.clone().unwrap_or_else(|| choice.node.ssh.clone()),
        peer_ips: if from_config {
            vec![choice.node.ip]
        } else {
            args.peer_ip.clone()
        },
        iface_ips,
        halobox: args
            .peer_halobox
            .clone()
            .unwrap_or_else(|| cfg.halobox.clone()),
        ssh_options,
        from: Some(choice.why),
    })
}

/// Where the ends run: `--on`, else this node's container when it has one
/// (and then the peer's), else the hosts. A container the cluster file or
/// `--container` names must be there: host numbers instead would be
/// measured where RCCL does not run, so its engine unreachable or the
/// container missing is an error that says `--on host`. When the container
/// is only the default name tried, the hosts it is, and the report says why.
fn placement(args: &BenchRunArgs, peer: &Peer) -> anyhow::Result<Placement> {
    let engine = args.engine.engine.as_deref();
    let on_host = |why: Option<String>| Placement {
        local_in: None,
        peer_container: None,
        host_why: why,
    };
    match (args.on, &peer.container) {
        (Some(BenchOn::Host), _) => Ok(on_host(None)),
        (Some(BenchOn::Container), None) => Err(UsageError(
            "--on container, but the cluster file runs this node's Ray on the host: pass --container NAME".into(),
        )
        .into()),
        (Some(BenchOn::Container), Some(name)) => {
            let inside = inside::find(name, engine)?.ok_or_else(|| {
                UsageError(format!(
                    "there is no container {name} on this node\n  hint: create it with `halobox refresh --name {name}`, or pass --on host"
                ))
            })?;
            Ok(Placement {
                local_in: Some(inside),
                peer_container: peer.peer_container.clone().or(Some(name.clone())),
                host_why: None,
            })
        }
        (None, None) => Ok(on_host(None)),
        (None, Some(name)) => {
            let connected = match crate::engine::block_on(crate::engine::connect(engine)) {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) | Err(e) => Err(e),
            };
            if let Err(e) = connected {
                return match &peer.expected {
                    Some(why) => Err(anyhow::anyhow!(
                        "this node's end would run in container {name} ({why}), but no container engine can be reached: {e:#}\n  or pass --on host to measure the hosts instead (not what RCCL sees in the container)"
                    )),
                    None => Ok(on_host(Some("no container engine here".into()))),
                };
            }
            match (inside::find(name, engine)?, &peer.expected) {
                (Some(i), _) => Ok(Placement {
                    local_in: Some(i),
                    peer_container: peer.peer_container.clone(),
                    host_why: None,
                }),
                (None, Some(why)) => Err(UsageError(format!(
                    "there is no container {name} on this node ({why})\n  hint: create it with `halobox refresh --name {name}`, or pass --on host to measure the hosts instead"
                ))
                .into()),
                (None, None) => Ok(on_host(Some(format!("no container {name} here")))),
            }
        }
    }
}

/// Where the ends run, as [`placement`] decided.
struct Placement {
    local_in: Option<Inside>,
    peer_container: Option<String>,
    /// Why the hosts, when a container was tried and not there.
    host_why: Option<String>,
}

fn options(
    args: &BenchRunArgs,
    peer: Peer,
    paths: Vec<plan::PathSpec>,
) -> anyhow::Result<BenchOptions> {
    crate::ssh::check_target(&peer.ssh).map_err(|e| anyhow::anyhow!("the peer {e}"))?;
    crate::ssh::check_options(&peer.ssh_options).map_err(anyhow::Error::msg)?;
    let Placement {
        local_in,
        peer_container,
        host_why,
    } = placement(args, &peer)?;
    Ok(BenchOptions {
        local_in,
        peer_container,
        host_why,
        peer: peer.ssh,
        peer_from: peer.from,
        peer_halobox: peer.halobox,
        ssh_options: peer.ssh_options,
        paths,
        rdma: if args.no_rdma {
            RdmaMode::Off
        } else if args.rdma {
            RdmaMode::On
        } else {
            RdmaMode::Auto
        },
        duration_s: args.duration,
        streams: args.streams,
        port: args.server.port,
        latency_samples: args.samples,
        sweep: args.sweep,
    })
}

fn bench_run(args: &BenchRunArgs) -> anyhow::Result<ExitCode> {
    let facts = host::gather(HostRoot::live(), GatherOptions::default());
    let peer = resolve_peer(args, &facts)?;
    let paths = exec::paths(&peer.peer_ips, &peer.iface_ips)?;
    let opts = options(args, peer, paths)?;
    let locals: Vec<NodeContext> = opts
        .paths
        .iter()
        .map(|p| exec::local_context(&opts, &facts, p.local_ip))
        .collect::<anyhow::Result<_>>()?;
    if args.mode.dry_run() {
        let ends: Vec<(NodeContext, Option<NodeContext>)> =
            locals.into_iter().map(|l| (l, None)).collect();
        let plan = plan::build(&opts, &ends);
        if args.mode.json() {
            println!("{}", serde_json::to_string_pretty(&plan)?);
        } else {
            print!("{}", plan::render(&opts, &plan));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut ends = Vec::new();
    for (spec, local) in opts.paths.iter().zip(locals) {
        let peer = exec::peer_context(&opts, spec)?;
        ends.push((local, peer));
    }
    let with_peer: Vec<(NodeContext, Option<NodeContext>)> = ends
        .iter()
        .map(|(l, p)| (l.clone(), Some(p.clone())))
        .collect();
    let plan = plan::build(&opts, &with_peer);
    let (started, stamp) = exec::utc_now();
    let dir = match &args.save {
        Some(d) => d.clone(),
        None => exec::default_save_dir(&stamp)?,
    };
    let rec = exec::execute(&opts, &plan, &ends, started, &dir)?;
    let res = results::derive(&rec, &dir);
    std::fs::write(
        dir.join(results::RESULTS_FILE),
        serde_json::to_string_pretty(&res)? + "\n",
    )?;
    print_results(&res, args.mode.json())?;
    if !args.mode.json() {
        println!("saved in {}", dir.display());
    }
    Ok(status(&res))
}

fn print_results(res: &Results, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(res)?);
    } else {
        print!("{}", report::human(res));
    }
    Ok(())
}

/// 0 when nothing failed (skips are fine), else 1.
fn status(res: &Results) -> ExitCode {
    if res.rows.iter().any(|r| r.status == "failed") {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn derive_dir(dir: &Path) -> anyhow::Result<Results> {
    let rec = results::load(dir)?;
    Ok(results::derive(&rec, dir))
}

fn report_cmd(args: &BenchReportArgs) -> anyhow::Result<ExitCode> {
    if args.dir.join(crate::bench::serving::ab::AB_FILE).is_file() {
        return ab::report(&args.dir, args.output.json);
    }
    if crate::bench::serving::record::is_saved(&args.dir) {
        return serving::report(&args.dir, args.output.json);
    }
    if let Some(done) = collective::report_saved(&args.dir, args.output.json) {
        return done;
    }
    let res = derive_dir(&args.dir)?;
    print_results(&res, args.output.json)?;
    Ok(status(&res))
}

fn compare(args: &BenchCompareArgs) -> anyhow::Result<ExitCode> {
    if [&args.a, &args.b]
        .iter()
        .any(|d| crate::bench::serving::record::is_saved(d))
    {
        return serving::compare(&args.a, &args.b);
    }
    if let Some(done) = collective::compare_saved(&args.a, &args.b) {
        return done;
    }
    let a = derive_dir(&args.a)?;
    let b = derive_dir(&args.b)?;
    print!("{}", report::compare(&a, &b));
    Ok(ExitCode::SUCCESS)
}
