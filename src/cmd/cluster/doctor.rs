//! `halobox cluster doctor`: every node's doctor at once, one table.

use std::process::ExitCode;

use crate::cli::ClusterDoctorArgs;
use crate::cluster::config;
use crate::fleet::{doctor, doctor_run};

/// Probes every node, checks across them and prints the table (or JSON);
/// exit 1 when anything FAILs.
pub fn run(a: &ClusterDoctorArgs) -> anyhow::Result<ExitCode> {
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    let report = doctor::report(&doctor_run::doctor(&cfg));
    if a.output.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", doctor::render(&report));
    }
    Ok(if report.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
