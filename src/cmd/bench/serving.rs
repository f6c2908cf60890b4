//! `halobox bench serving`: the endpoint (`--url`, else the serve recorded
//! for the cluster file) and its key (the engine's variable, else the
//! cluster's key file; never in an argument or the output), then the run
//! ([`crate::bench::serving`]), saved and printed.

use std::path::Path;
use std::process::ExitCode;

use crate::bench::serving;
use crate::bench::serving::key::{is_set, key_from, load_key};
use crate::bench::serving::plan;
use crate::bench::serving::record::{self, ServingResults};
use crate::bench::serving::target;
use crate::cli::BenchServingArgs;
use crate::error::UsageError;
use crate::reporter::Terminal;

/// Runs `bench serving` (without `--ab-transport`).
pub fn run(args: &BenchServingArgs) -> anyhow::Result<ExitCode> {
    plan::parse_levels(&args.concurrency).map_err(UsageError)?;
    let t = target::resolve(args.url.as_deref(), args.file.cluster.as_deref())?;
    let from = key_from(
        args.no_api_key,
        t.serve.as_ref(),
        t.cluster.as_deref(),
        is_set,
    );
    let opts = args.options(t.endpoint, t.from, &from)?;
    if args.mode.dry_run() {
        if args.mode.json() {
            println!("{}", serde_json::to_string_pretty(&opts)?);
        } else {
            print!("{}", plan::render(&opts));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let key = load_key(&from)?;
    let dir = args.save_dir()?;
    let res = serving::measure(&opts, key.as_ref(), &dir, &mut Terminal)?;
    print(&res, args.mode.json())?;
    if !args.mode.json() {
        println!("saved in {}", dir.display());
    }
    Ok(status(&res))
}

/// Prints the results as text or JSON.
pub fn print(res: &ServingResults, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(res)?);
    } else {
        print!("{}", record::render(res));
    }
    Ok(())
}

/// 0 when every level ran and every request finished, else 1.
pub fn status(res: &ServingResults) -> ExitCode {
    if serving::passed(res) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `bench report DIR` of a serving run.
pub fn report(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let res = record::derive(&record::load(dir)?);
    print(&res, json)?;
    Ok(status(&res))
}

/// `bench compare A B` of two serving runs.
pub fn compare(a: &Path, b: &Path) -> anyhow::Result<ExitCode> {
    let (sa, sb) = (record::is_saved(a), record::is_saved(b));
    if sa != sb {
        let (s, l) = if sa { (a, b) } else { (b, a) };
        return Err(UsageError(format!(
            "{} is a `bench serving` run but {} is not: compare two runs of the same kind",
            s.display(),
            l.display()
        ))
        .into());
    }
    let ra = record::derive(&record::load(a)?);
    let rb = record::derive(&record::load(b)?);
    print!("{}", record::compare(&ra, &rb));
    Ok(ExitCode::SUCCESS)
}
