//! `halobox doctor`: host facts → checks → report.

use std::process::ExitCode;

use crate::cli::DoctorArgs;
use crate::doctor::{self, DoctorOptions, render};
use crate::host::{self, GatherOptions};

/// Gathers facts, diagnoses them and prints the report.
pub fn run(args: &DoctorArgs, color: bool) -> anyhow::Result<ExitCode> {
    let root = super::root(&args.source)?;
    let facts = host::gather(root, GatherOptions::default());
    let report = doctor::diagnose(&facts, DoctorOptions { ip: args.ip });
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render::human(&report, render::Style { color }));
    }
    Ok(if report.has_failures() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
