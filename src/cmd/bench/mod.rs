//! `halobox bench`: run, serve, probe, serving, soak, report, compare.

pub mod ab;
pub mod collective;
pub mod html;
pub mod serving;
pub mod soak;

use std::{process::ExitCode, time::Duration};

use anyhow::Context;

use crate::bench::{flow, probe, run as exec, tcp};
use crate::cli::{
    BenchClientArgs, BenchCommand, BenchCompareArgs, BenchExecArgs, BenchReportArgs, BenchRunArgs,
    BenchServeArgs,
};
use crate::container::inside;
use crate::error::UsageError;
use crate::host::HostRoot;
use crate::reporter::Terminal;

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
        BenchCommand::Soak(args) => soak::run(&args),
        BenchCommand::Collective(args) => collective::run_cmd(&args),
        BenchCommand::Report(args) => html::report(&args).unwrap_or_else(|| report_cmd(&args)),
        BenchCommand::Compare(args) => html::compare(&args).unwrap_or_else(|| compare(&args)),
    }
}

fn serve(args: &BenchServeArgs) -> anyhow::Result<ExitCode> {
    let timeouts = (
        Duration::from_secs(args.idle_timeout),
        Duration::from_secs(args.io_timeout),
    );
    flow::tcp_server(args.bind, args.server.port, timeouts, &mut Terminal)?;
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
    let name = crate::container::name::resolve(args.container.as_deref())?;
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

fn bench_run(args: &BenchRunArgs) -> anyhow::Result<ExitCode> {
    Ok(status(flow::run(&args.options(), &mut Terminal)?))
}

/// 0 when nothing failed (skips are fine), else 1.
fn status(passed: bool) -> ExitCode {
    ExitCode::from(u8::from(!passed))
}

fn report_cmd(args: &BenchReportArgs) -> anyhow::Result<ExitCode> {
    if args.dir.join(crate::bench::serving::ab::AB_FILE).is_file() {
        return ab::report(&args.dir, args.output.json);
    }
    if crate::bench::serving::record::is_saved(&args.dir) {
        return serving::report(&args.dir, args.output.json);
    }
    if let Some(done) = collective::report_saved(&args.dir, args.output.json)
        .or_else(|| soak::report(&args.dir, args.output.json))
    {
        return done;
    }
    Ok(status(flow::report(
        &args.dir,
        args.output.json,
        &mut Terminal,
    )?))
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
    flow::compare(&args.a, &args.b, &mut Terminal)?;
    Ok(ExitCode::SUCCESS)
}
