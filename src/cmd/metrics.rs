//! `halobox metrics`: serve this node's figures on `GET /metrics`, or print
//! one scrape (`--print`, also of a `--sysroot` snapshot); the library's
//! [`crate::fleet::exporter::run`].

use std::process::ExitCode;

use crate::cli::MetricsArgs;
use crate::reporter::Terminal;

/// Prints one scrape or serves until killed.
pub fn run(args: &MetricsArgs) -> anyhow::Result<ExitCode> {
    crate::fleet::exporter::run(&args.request()?, &mut Terminal)?;
    Ok(ExitCode::SUCCESS)
}
