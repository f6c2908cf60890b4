use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = halobox::cli::Cli::parse();
    match halobox::cmd::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            halobox::cmd::exit_code_for(&err)
        }
    }
}
