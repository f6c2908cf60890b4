//! One module per command: each turns parsed arguments into one call of
//! its library door (listed in `DOORS` in `tests/layering.rs`), output and
//! an exit status. A folder per command family: `bench/` (`run` in its
//! `mod.rs`, `ab.rs`, `collective.rs`, `serving.rs`, `html.rs` for
//! `report`/`compare --html`) and `cluster/` (the dispatch and the menu in
//! its `mod.rs`, `init.rs`, `lifecycle.rs` for up and down, `boot.rs` for
//! enable and disable, `join.rs`, `status.rs`, `menu.rs` for the menu's
//! serve item, `bench.rs`, `doctor.rs`, `fleet.rs` for refresh and install,
//! `metrics.rs`, `top.rs` for `cluster top`'s loop: the terminal in raw
//! mode, put back however it ends).

pub mod bench;
pub mod build;
pub mod check;
pub mod cluster;
pub mod completions;
pub mod detect;
pub mod doctor;
pub mod enter;
pub mod image;
pub mod list;
pub mod man;
pub mod metrics;
pub mod model;
pub mod plan;
pub mod publish;
pub mod refresh;
pub mod rm;
pub mod serve;
pub mod setup;
pub mod snapshot;
pub mod start;

use std::io::IsTerminal;
use std::process::ExitCode;

use crate::cli::{Cli, ColorChoice, Command};
use crate::error::UsageError;
use crate::host::RootError;

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
    let Some(command) = cli.command else {
        print!("{}", start::TEXT);
        return Ok(ExitCode::SUCCESS);
    };
    match command {
        Command::Detect(args) => detect::run(&args),
        Command::Doctor(args) => doctor::run(&args, color),
        Command::Snapshot(args) => snapshot::run(&args),
        Command::Metrics(args) => metrics::run(&args),
        Command::Setup(args) => setup::run(&args),
        Command::Completions { shell } => completions::run(shell),
        Command::Man { out_dir } => man::run(out_dir.as_deref()),
        Command::Refresh(args) => refresh::run(&args, color),
        Command::Enter(args) => enter::run(&args),
        Command::Check(args) => check::run(&args, color),
        Command::List(args) => list::run(&args),
        Command::Rm(args) => rm::run(&args),
        Command::Cluster(cmd) => cluster::run(cmd),
        Command::Serve(args) => serve::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Model(cmd) => model::run(cmd),
        Command::Build(args) => build::run(&args),
        Command::Image(cmd) => image::run(cmd),
        Command::Publish(args) => publish::run(&args),
        Command::Bench(cmd) => bench::run(cmd),
    }
}

/// Maps an error to halobox's exit status: 2 for usage errors, else 1.
pub fn exit_code_for(err: &anyhow::Error) -> ExitCode {
    if err.downcast_ref::<RootError>().is_some() || err.downcast_ref::<UsageError>().is_some() {
        ExitCode::from(EXIT_USAGE)
    } else {
        ExitCode::FAILURE
    }
}
