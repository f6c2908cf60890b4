//! `halobox check [NAME]`: the container checked from inside, as its user;
//! exit 1 when a check FAILs.

use std::process::ExitCode;

use crate::check::{self, Report};
use crate::cli::CheckArgs;
use crate::container::name;
use crate::doctor::render::Style;
use crate::engine::{block_on, connect};
use crate::host::{self, GatherOptions, HostRoot};

/// Checks the container and prints the report.
pub fn run(args: &CheckArgs, color: bool) -> anyhow::Result<ExitCode> {
    let name = name::resolve(args.name.as_deref())?;
    let facts = host::gather(HostRoot::live(), GatherOptions::default());
    let report = block_on(async {
        let engine = connect(args.engine.engine.as_deref()).await?;
        check::run::check(&engine, &name, Some(&facts)).await
    })??;
    print(&report, args.output.json, color)?;
    Ok(if report.has_failures() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints `report` as JSON or text.
pub fn print(report: &Report, json: bool, color: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", check::human(report, Style { color }));
    }
    Ok(())
}
