//! `halobox bench run` from start to end, as one library entry point
//! ([`run()`]): the peer as the flags and the cluster file give it, where
//! each end runs (a container or the host), the plan (a dry run) or the
//! run itself, its results saved and reported. Also the report and the
//! comparison of saved runs ([`report()`], [`compare()`]).

use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use super::plan::{self, BenchOptions, Link, RdmaMode};
use super::probe::NodeContext;
use super::results::{self, Results};
use super::usb4;
use super::{peer as bench_peer, report as render, run as exec, tcp};
use crate::cluster::config;
use crate::container::inside::{self, Inside};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::reporter::{Out, Reporter};
use anyhow::Context as _;

/// Where the ends run (`--on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    /// In the nodes' halobox containers.
    Container,
    /// On the hosts.
    Host,
}

/// One `halobox bench run`: the flags as given.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--peer`: the peer's ssh target.
    pub peer: Option<String>,
    /// `--peer-ip`: the peer's data-plane addresses.
    pub peer_ip: Vec<Ipv4Addr>,
    /// `--cluster`: the cluster file (`None`: the default one).
    pub cluster: Option<PathBuf>,
    /// `--peer-node`: the peer by its name in the cluster file.
    pub peer_node: Option<String>,
    /// `--iface-ip`: this node's addresses.
    pub iface_ip: Vec<Ipv4Addr>,
    /// `--peer-halobox`: halobox on the peer.
    pub peer_halobox: Option<String>,
    /// `--ssh-option`.
    pub ssh_option: Vec<String>,
    /// `--save`: where the run goes (`None`: a dated folder).
    pub save: Option<PathBuf>,
    /// Report the plan, run nothing.
    pub dry_run: bool,
    /// JSON instead of text.
    pub json: bool,
    /// `--rdma`.
    pub rdma: bool,
    /// `--no-rdma`.
    pub no_rdma: bool,
    /// Seconds per bandwidth test.
    pub duration: u32,
    /// TCP streams.
    pub streams: u32,
    /// The port of halobox's TCP server.
    pub port: u16,
    /// `--sweep`.
    pub sweep: bool,
    /// Latency samples.
    pub samples: u32,
    /// `--on`.
    pub on: Option<On>,
    /// `--container`.
    pub container: Option<String>,
    /// The engine's address (`None`: discovered).
    pub engine: Option<String>,
    /// `--link`: measure this link alone (its addresses on both ends).
    pub link: Option<Link>,
}

/// Runs `halobox bench run` as `o` asks; `Ok(true)` when nothing failed
/// (skips are fine).
pub fn run(o: &Options, r: &mut dyn Reporter) -> anyhow::Result<bool> {
    let facts = host::gather(HostRoot::live(), GatherOptions::default());
    let peer = resolve_peer(o, &facts)?;
    let paths = match o.link {
        Some(Link::Usb4) => vec![usb4::path(&facts.network, &peer.peer_ips).map_err(UsageError)?],
        None => exec::paths(&peer.peer_ips, &peer.iface_ips)?,
    };
    let opts = options(o, peer, paths)?;
    let locals: Vec<NodeContext> = opts
        .paths
        .iter()
        .map(|p| exec::local_context(&opts, &facts, p.local_ip))
        .collect::<anyhow::Result<_>>()?;
    if o.dry_run {
        let ends: Vec<(NodeContext, Option<NodeContext>)> =
            locals.into_iter().map(|l| (l, None)).collect();
        let plan = plan::build(&opts, &ends);
        if o.json {
            writeln!(Out(r), "{}", serde_json::to_string_pretty(&plan)?)?;
        } else {
            r.out(&plan::render(&opts, &plan));
        }
        return Ok(true);
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
    let dir = match &o.save {
        Some(d) => d.clone(),
        None => exec::default_save_dir(&stamp)?,
    };
    let rec = exec::execute(&opts, &plan, &ends, started, &dir)?;
    let res = results::derive(&rec, &dir);
    std::fs::write(
        dir.join(results::RESULTS_FILE),
        serde_json::to_string_pretty(&res)? + "\n",
    )?;
    show(&res, o.json, r)?;
    if !o.json {
        writeln!(Out(r), "saved in {}", dir.display())?;
    }
    Ok(passed(&res))
}

/// Runs `halobox bench serve`: halobox's TCP server on `bind` (`None`:
/// this node's data-plane address) and `port`, with `(idle, io)` timeouts;
/// its ready line goes to `r`'s output as soon as it listens.
pub fn tcp_server(
    bind: Option<std::net::IpAddr>,
    port: u16,
    (idle, io): (std::time::Duration, std::time::Duration),
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    let bind = match bind {
        Some(b) => b,
        None => {
            let facts = host::gather(HostRoot::live(), GatherOptions::default());
            tcp::default_bind(&facts).map_err(UsageError)?
        }
    };
    let opts = tcp::ServeOptions {
        bind,
        port,
        idle_timeout: idle,
        io_timeout: io,
        token: tcp::StopToken::generate().context("cannot read /dev/urandom")?,
    };
    tcp::serve(&opts, |addr| {
        r.out(&format!("{}\n", tcp::ready_line(addr, &opts.token)))
    })
    .with_context(|| format!("cannot serve on {bind}:{port}"))?;
    Ok(())
}

/// Reports a saved run in `dir` (text or JSON); `Ok(true)` when nothing
/// in it failed.
pub fn report(dir: &Path, json: bool, r: &mut dyn Reporter) -> anyhow::Result<bool> {
    let res = derive_dir(dir)?;
    show(&res, json, r)?;
    Ok(passed(&res))
}

/// Compares two saved runs.
pub fn compare(a: &Path, b: &Path, r: &mut dyn Reporter) -> anyhow::Result<()> {
    let (a, b) = (derive_dir(a)?, derive_dir(b)?);
    r.out(&render::compare(&a, &b));
    Ok(())
}

fn show(res: &Results, json: bool, r: &mut dyn Reporter) -> anyhow::Result<()> {
    if json {
        writeln!(Out(r), "{}", serde_json::to_string_pretty(res)?)?;
    } else {
        r.out(&render::human(res));
    }
    Ok(())
}

/// Nothing failed (skips are fine).
fn passed(res: &Results) -> bool {
    !res.rows.iter().any(|r| r.status == "failed")
}

fn derive_dir(dir: &Path) -> anyhow::Result<Results> {
    let rec = results::load(dir)?;
    Ok(results::derive(&rec, dir))
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
fn default_container(container: Option<&str>) -> anyhow::Result<String> {
    crate::container::name::resolve(container)
}

/// `--peer` with `--peer-ip` stand alone; otherwise the cluster file names
/// the peer (and fills in what the flags leave out).
fn resolve_peer(o: &Options, facts: &host::HostFacts) -> anyhow::Result<Peer> {
    if let (Some(ssh), false, None) = (&o.peer, o.peer_ip.is_empty(), &o.peer_node) {
        return Ok(Peer {
            ssh: ssh.clone(),
            peer_ips: o.peer_ip.clone(),
            iface_ips: o.iface_ip.clone(),
            halobox: o.peer_halobox.clone().unwrap_or_else(|| "halobox".into()),
            ssh_options: o.ssh_option.clone(),
            from: None,
            container: Some(default_container(o.container.as_deref())?),
            expected: o.container.as_ref().map(|n| format!("--container {n}")),
            peer_container: Some(default_container(o.container.as_deref())?),
        });
    }
    let path = config::path(o.cluster.as_deref()).ok_or_else(|| {
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
    let by_ip = o
        .peer_ip
        .first()
        .map(|ip| ip.to_string())
        .filter(|ip| bench_peer::find(&cfg, ip).is_some());
    let wanted = o.peer_node.clone().or(o.peer.clone()).or(by_ip);
    let choice =
        bench_peer::choose(&cfg, &path, &facts.network, wanted.as_deref()).map_err(UsageError)?;
    let from_config = o.peer_ip.is_empty();
    let iface_ips = match (&choice.this, from_config && o.iface_ip.is_empty()) {
        (Some(t), true) => vec![t.ip],
        _ => o.iface_ip.clone(),
    };
    let mut ssh_options = cfg.ssh_options.clone();
    ssh_options.extend(o.ssh_option.iter().cloned());
    let in_container = |n: &config::NodeConfig| {
        n.backend
            .is_container()
            .then(|| o.container.clone().unwrap_or_else(|| n.container.clone()))
    };
    let this = choice
        .this
        .as_ref()
        .and_then(|t| cfg.nodes.iter().find(|n| n.ip == t.ip));
    let container = match this {
        Some(n) => in_container(n),
        None => Some(default_container(o.container.as_deref())?),
    };
    let expected = match (this, &o.container) {
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
        ssh: o.peer.clone().unwrap_or_else(|| choice.node.ssh.clone()),
        peer_ips: if from_config {
            vec![choice.node.ip]
        } else {
            o.peer_ip.clone()
        },
        iface_ips,
        halobox: o
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
fn placement(o: &Options, peer: &Peer) -> anyhow::Result<Placement> {
    let engine = o.engine.as_deref();
    let on_host = |why: Option<String>| Placement {
        local_in: None,
        peer_container: None,
        host_why: why,
    };
    match (o.on, &peer.container) {
        (Some(On::Host), _) => Ok(on_host(None)),
        (Some(On::Container), None) => Err(UsageError(
            "--on container, but the cluster file runs this node's Ray on the host: pass --container NAME".into(),
        )
        .into()),
        (Some(On::Container), Some(name)) => {
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

fn options(o: &Options, peer: Peer, paths: Vec<plan::PathSpec>) -> anyhow::Result<BenchOptions> {
    crate::ssh::check_target(&peer.ssh).map_err(|e| anyhow::anyhow!("the peer {e}"))?;
    crate::ssh::check_options(&peer.ssh_options).map_err(anyhow::Error::msg)?;
    let Placement {
        local_in,
        peer_container,
        host_why,
    } = placement(o, &peer)?;
    Ok(BenchOptions {
        local_in,
        peer_container,
        host_why,
        peer: peer.ssh,
        peer_from: peer.from,
        peer_halobox: peer.halobox,
        ssh_options: peer.ssh_options,
        paths,
        link: o.link,
        rdma: if o.no_rdma || o.link.is_some() {
            RdmaMode::Off
        } else if o.rdma {
            RdmaMode::On
        } else {
            RdmaMode::Auto
        },
        duration_s: o.duration,
        streams: o.streams,
        port: o.port,
        latency_samples: o.samples,
        sweep: o.sweep,
    })
}
