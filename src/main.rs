use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = halobox::cli::Cli::parse();
    let result = halobox::cmd::run(cli);
    halobox::image::cleanup::wait_if_interrupted();
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            halobox::cmd::exit_code_for(&err)
        }
    }
}
