//! `halobox completions SHELL`.

use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::Cli;

/// Prints the completion script for `shell`.
pub fn run(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "halobox", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
