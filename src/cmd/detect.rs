//! `halobox detect`: print every host fact.

use std::process::ExitCode;

use crate::cli::DetectArgs;
use crate::host::{self, GatherOptions};

/// Gathers facts and prints them as JSON or text.
pub fn run(args: &DetectArgs) -> anyhow::Result<ExitCode> {
    let root = args.source.root()?;
    let facts = host::gather(
        root,
        GatherOptions {
            tool_versions: !args.no_versions,
        },
    );
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&facts)?);
    } else {
        print!("{}", crate::doctor::facts_render::human(&facts));
    }
    Ok(ExitCode::SUCCESS)
}
