//! `halobox bench collective`: every node's report, the plan, the ranks
//! over ssh, the results (printed and saved); `bench report`/`compare` of
//! a saved collective run.

use std::path::Path;
use std::process::ExitCode;

use crate::bench::collective::plan::{self, Op, Options};
use crate::bench::collective::report::{self, Results};
use crate::bench::collective::run;
use crate::cli::BenchCollectiveArgs;
use crate::cluster::config;
use crate::error::UsageError;
use crate::reporter::Terminal;

/// The options the flags ask for.
pub fn options(a: &BenchCollectiveArgs) -> anyhow::Result<Options> {
    let sizes = plan::parse_sizes(&a.sizes).map_err(|e| {
        UsageError(format!(
            "{e}\n  hint: halobox bench collective --sizes {}",
            plan::DEFAULT_SIZES
        ))
    })?;
    let mut ops = Vec::new();
    for o in &a.ops {
        if !ops.contains(o) {
            ops.push(*o);
        }
    }
    if ops.is_empty() {
        ops = vec![Op::AllReduce, Op::AllGather];
    }
    Ok(Options {
        sizes,
        ops,
        iters: a.iters,
        warmup: a.warmup,
        port: a.port,
        backend: a.backend,
        python: a.python.clone(),
        timeout_s: a.timeout,
    })
}

/// `halobox bench collective`.
pub fn run_cmd(a: &BenchCollectiveArgs) -> anyhow::Result<ExitCode> {
    let opts = options(a)?;
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    if cfg.nodes.len() < 2 {
        return Err(UsageError(
            "cluster.toml has one node: a collective needs two or more\n  hint: add the other nodes with `halobox cluster init --node …`".into(),
        )
        .into());
    }
    match crate::bench::collective::run(
        &cfg,
        &opts,
        a.save.as_deref(),
        a.mode.dry_run(),
        a.mode.json(),
        &mut Terminal,
    )? {
        None => Ok(ExitCode::SUCCESS),
        Some((res, dir)) => {
            print_results(&res, a.mode.json())?;
            if !a.mode.json() {
                println!("saved in {}", dir.display());
            }
            Ok(status(&res))
        }
    }
}

/// Prints the results (text or JSON).
pub fn print_results(res: &Results, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(res)?);
    } else {
        print!("{}", report::human(res));
    }
    Ok(())
}

/// 0 when everything passed, else 1.
pub fn status(res: &Results) -> ExitCode {
    if res.status == "ok" {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `bench report DIR` of a saved collective run (`None`: not one).
pub fn report_saved(dir: &Path, json: bool) -> Option<anyhow::Result<ExitCode>> {
    if !run::is_saved(dir) {
        return None;
    }
    Some(run::load(dir).and_then(|rec| {
        let res = report::derive(&rec);
        print_results(&res, json)?;
        Ok(status(&res))
    }))
}

/// `bench compare A B` when either is a saved collective run (`None`:
/// neither is).
pub fn compare_saved(a: &Path, b: &Path) -> Option<anyhow::Result<ExitCode>> {
    match (run::is_saved(a), run::is_saved(b)) {
        (false, false) => None,
        (true, true) => Some((|| {
            let ra = report::derive(&run::load(a)?);
            let rb = report::derive(&run::load(b)?);
            print!("{}", report::compare(&ra, &rb));
            Ok(ExitCode::SUCCESS)
        })()),
        _ => Some(Err(UsageError(format!(
            "{} and {} are not the same kind of run (one is a `bench collective` run): compare two collective runs, or two `bench run` runs",
            a.display(),
            b.display()
        ))
        .into())),
    }
}
