//! `halobox man`: man pages generated from the CLI definition.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::Cli;

/// Prints `halobox.1`, or writes every page into `out_dir`.
pub fn run(out_dir: Option<&Path>) -> anyhow::Result<ExitCode> {
    let cmd = Cli::command();
    match out_dir {
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?,
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
