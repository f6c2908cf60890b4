//! One module per command: each turns parsed arguments into output and an
//! exit status.

pub mod bench;
pub mod build;
pub mod cluster;
pub mod completions;
pub mod detect;
pub mod doctor;
pub mod enter;
pub mod image;
pub mod list;
pub mod man;
pub mod publish;
pub mod refresh;
pub mod rm;
pub mod serve;

use std::io::IsTerminal;
use std::process::ExitCode;

use crate::cli::{Cli, ColorChoice, Command, SourceArgs};
use crate::host::{HostRoot, RootError};

/// Exit status for a usage error (bad flag, missing sysroot).
pub const EXIT_USAGE: u8 = 2;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let color = match cli.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    };
    match cli.command {
        Command::Detect(args) => detect::run(&args),
        Command::Doctor(args) => doctor::run(&args, color),
        Command::Completions { shell } => completions::run(shell),
        Command::Man { out_dir } => man::run(out_dir.as_deref()),
        Command::Refresh(args) => refresh::run(&args),
        Command::Enter(args) => enter::run(&args),
        Command::List(args) => list::run(&args),
        Command::Rm(args) => rm::run(&args),
        Command::Cluster(cmd) => cluster::run(cmd),
        Command::Serve(args) => serve::run(&args),
        Command::Build(args) => build::run(&args),
        Command::Image(cmd) => image::run(cmd),
        Command::Publish(args) => publish::run(&args),
        Command::Bench(cmd) => bench::run(cmd),
    }
}

/// The host root named by `--sysroot`, or the live host.
pub fn root(source: &SourceArgs) -> Result<HostRoot, RootError> {
    match &source.sysroot {
        Some(dir) => HostRoot::sysroot(dir),
        None => Ok(HostRoot::live()),
    }
}

/// A command line that cannot work (bad name, bad reference); exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Runs a future to completion on a single-threaded runtime. The runtime is
/// then shut down without waiting for blocking reads (an interactive
/// `enter` leaves one on the terminal that would otherwise hang the exit).
pub fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let out = rt.block_on(f);
    rt.shutdown_background();
    Ok(out)
}

/// The engine to use: `--engine`, else the config file's, else discovered.
pub async fn connect(flag: Option<&str>) -> anyhow::Result<crate::engine::Engine> {
    let cfg = crate::config::load(crate::config::path().as_deref())?;
    let explicit = flag.map(str::to_string).or(cfg.engine);
    let env = crate::engine::discover::DiscoveryEnv::from_process(explicit);
    Ok(crate::engine::Engine::connect(&env).await?)
}

/// The container name: the argument, else the config file's, else `vllm`.
pub fn container_name(arg: Option<&str>) -> anyhow::Result<String> {
    let cfg = crate::config::load(crate::config::path().as_deref())?;
    let name = arg
        .map(str::to_string)
        .or(cfg.name)
        .unwrap_or_else(|| crate::config::DEFAULT_NAME.to_string());
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if !valid {
        return Err(UsageError(format!(
            "{name:?} is not a container name: use letters, digits, '_', '.' and '-', starting with a letter or digit"
        ))
        .into());
    }
    Ok(name)
}

/// Maps an error to halobox's exit status: 2 for usage errors, else 1.
pub fn exit_code_for(err: &anyhow::Error) -> ExitCode {
    if err.downcast_ref::<RootError>().is_some() || err.downcast_ref::<UsageError>().is_some() {
        ExitCode::from(EXIT_USAGE)
    } else {
        ExitCode::FAILURE
    }
}
