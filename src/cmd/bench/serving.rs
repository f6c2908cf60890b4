//! `halobox bench serving`: the endpoint (`--url`, else the serve recorded
//! for the cluster file) and its key (the engine's variable, else the
//! cluster's key file; never in an argument or the output), then the run
//! ([`crate::bench::serving`]), saved and printed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::bench::serving;
use crate::bench::serving::key::{is_set, key_from, load_key};
use crate::bench::serving::plan::{self, Endpoint};
use crate::bench::serving::record::{self, ServingResults};
use crate::cli::BenchServingArgs;
use crate::cluster::config;
use crate::error::UsageError;
use crate::reporter::Terminal;
use crate::serve::state;

/// The endpoint, where it came from, and the recorded serve (when it is
/// the default endpoint).
fn endpoint(
    args: &BenchServingArgs,
) -> anyhow::Result<(Endpoint, String, Option<state::ServeState>, Option<PathBuf>)> {
    if let Some(url) = &args.url {
        let e = Endpoint::parse(url).map_err(UsageError)?;
        let cluster = config::path(args.file.cluster.as_deref());
        return Ok((e, "--url".into(), None, cluster));
    }
    let (path, _) = config::open(args.file.cluster.as_deref())?;
    let s = state::load(&path).ok_or_else(|| {
        UsageError(format!(
            "no serve is recorded for {}\n  hint: start one with `halobox serve MODEL --detach`, or pass --url http://HOST:PORT",
            path.display()
        ))
    })?;
    let e = Endpoint::parse(&s.endpoint).map_err(UsageError)?;
    let from = format!(
        "the serve of {} ({} {})",
        path.display(),
        s.engine,
        crate::remote::printable(&s.model)
    );
    Ok((e, from, Some(s), Some(path)))
}

/// Runs `bench serving` (without `--ab-transport`).
pub fn run(args: &BenchServingArgs) -> anyhow::Result<ExitCode> {
    plan::parse_levels(&args.concurrency).map_err(UsageError)?;
    let (endpoint, endpoint_from, serve, cluster) = endpoint(args)?;
    let from = key_from(args.no_api_key, serve.as_ref(), cluster.as_deref(), is_set);
    let opts = args.options(endpoint, endpoint_from, &from)?;
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
