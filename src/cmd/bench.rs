//! `halobox bench`: run, serve, probe, report, compare.

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::bench::plan::{self, BenchOptions, RdmaMode};
use crate::bench::probe::{self, NodeContext};
use crate::bench::results::{self, Results};
use crate::bench::{report, run as exec, tcp};
use crate::cli::{BenchCommand, BenchCompareArgs, BenchReportArgs, BenchRunArgs, BenchServeArgs};
use crate::host::{self, GatherOptions, HostRoot, Reader};

/// Runs a `bench` subcommand.
pub fn run(cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Run(args) => bench_run(&args),
        BenchCommand::Serve(args) => serve(&args),
        BenchCommand::Probe(args) => {
            println!("{}", serde_json::to_string(&probe::probe(args.ip))?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Report(args) => report_cmd(&args),
        BenchCommand::Compare(args) => compare(&args),
    }
}

fn serve(args: &BenchServeArgs) -> anyhow::Result<ExitCode> {
    let opts = tcp::ServeOptions {
        bind: args.bind,
        port: args.port,
        idle_timeout: Duration::from_secs(args.idle_timeout),
    };
    tcp::serve(&opts, |addr| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}{addr}", tcp::READY_PREFIX);
        let _ = out.flush();
    })
    .with_context(|| format!("cannot serve on {}:{}", args.bind, args.port))?;
    Ok(ExitCode::SUCCESS)
}

fn options(args: &BenchRunArgs, paths: Vec<plan::PathSpec>) -> anyhow::Result<BenchOptions> {
    if let Some(bad) = args.ssh_option.iter().find(|o| plan::unsafe_ssh_option(o)) {
        bail!(
            "--ssh-option {bad} would turn off host key checking; halobox does not do that (add the peer's key to known_hosts instead)"
        );
    }
    Ok(BenchOptions {
        peer: args.peer.clone(),
        peer_halobox: args.peer_halobox.clone(),
        ssh_options: args.ssh_option.clone(),
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
        port: args.port,
        latency_samples: args.samples,
    })
}

fn local_contexts(ips: impl Iterator<Item = Ipv4Addr>) -> Vec<NodeContext> {
    let facts = host::gather(HostRoot::live(), GatherOptions::default());
    let reader = Reader::new(HostRoot::live());
    ips.map(|ip| probe::context(&facts, &reader, ip)).collect()
}

fn bench_run(args: &BenchRunArgs) -> anyhow::Result<ExitCode> {
    let paths = exec::paths(&args.peer_ip, &args.iface_ip)?;
    let opts = options(args, paths)?;
    let locals = local_contexts(opts.paths.iter().map(|p| p.local_ip));
    if args.dry_run {
        let ends: Vec<(NodeContext, Option<NodeContext>)> =
            locals.into_iter().map(|l| (l, None)).collect();
        let plan = plan::build(&opts, &ends);
        if args.json {
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
    print_results(&res, args.json)?;
    if !args.json {
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
    let res = derive_dir(&args.dir)?;
    print_results(&res, args.json)?;
    Ok(status(&res))
}

fn compare(args: &BenchCompareArgs) -> anyhow::Result<ExitCode> {
    let a = derive_dir(&args.a)?;
    let b = derive_dir(&args.b)?;
    print!("{}", report::compare(&a, &b));
    Ok(ExitCode::SUCCESS)
}
