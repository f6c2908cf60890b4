//! `halobox bench soak`: the endpoint and its key as `bench serving` finds
//! them, the nodes whose GTT is read (`--metrics`, else every node of the
//! cluster file), then the soak ([`crate::bench::soak`]), saved, printed and
//! judged: exit 0 on PASS, 1 on FAIL.

use std::path::Path;
use std::process::ExitCode;

use crate::bench::serving::key::{is_set, key_from, load_key};
use crate::bench::serving::target;
use crate::bench::soak::{self, judge, plan, record};
use crate::cli::BenchSoakArgs;
use crate::cluster::config;
use crate::error::UsageError;
use crate::reporter::Terminal;

/// `--metrics`, else every node of the cluster file (when there is one).
fn watched(args: &BenchSoakArgs, cluster: Option<&Path>) -> anyhow::Result<Vec<plan::Watched>> {
    if !args.metrics.is_empty() {
        return Ok(args
            .metrics
            .iter()
            .map(|a| plan::Watched {
                name: a.to_string(),
                addr: *a,
            })
            .collect());
    }
    let Some(path) = cluster.filter(|p| p.is_file()) else {
        return Ok(Vec::new());
    };
    let cfg = config::load(path).map_err(|e| UsageError(e.to_string()))?;
    Ok(cfg
        .nodes
        .iter()
        .map(|n| plan::Watched {
            name: n.label().to_string(),
            addr: (n.ip, args.metrics_port).into(),
        })
        .collect())
}

/// Runs `bench soak`.
pub fn run(args: &BenchSoakArgs) -> anyhow::Result<ExitCode> {
    let t = target::resolve(args.url.as_deref(), args.file.cluster.as_deref())?;
    let from = key_from(
        args.no_api_key,
        t.serve.as_ref(),
        t.cluster.as_deref(),
        is_set,
    );
    let duration_s =
        plan::parse_duration(&args.duration).map_err(|e| UsageError(format!("--duration {e}")))?;
    let opts = plan::SoakOptions {
        watched: watched(args, t.cluster.as_deref())?,
        endpoint: t.endpoint,
        endpoint_from: t.from,
        model: args.model.clone(),
        concurrency: args.concurrency,
        context: args.context,
        short_tokens: args.short_tokens,
        long_every: args.long_every,
        output_tokens: args.output_tokens,
        duration_s,
        window_s: args
            .window
            .unwrap_or_else(|| plan::default_window(duration_s)),
        stall_s: args.stall_timeout,
        max_gtt_growth_mib: args.max_gtt_growth_mib,
        sample_s: args.sample,
        seed: args.seed,
        key: from.describe(),
    };
    if args.mode.dry_run() {
        if args.mode.json() {
            println!("{}", serde_json::to_string_pretty(&opts)?);
        } else {
            print!("{}", plan::render(&opts));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let key = load_key(&from)?;
    let (_, stamp) = crate::bench::run::utc_now();
    let dir = match &args.save {
        Some(d) => d.clone(),
        None => crate::bench::run::default_save_dir(&stamp)?,
    };
    let res = soak::measure(&opts, key.as_ref(), &dir, &mut Terminal)?;
    print(&res, args.mode.json())?;
    if !args.mode.json() {
        println!("saved in {}", dir.display());
    }
    Ok(status(&res))
}

fn print(res: &judge::SoakResults, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(res)?);
    } else {
        print!("{}", judge::render(res));
    }
    Ok(())
}

fn status(res: &judge::SoakResults) -> ExitCode {
    if res.verdict == "PASS" {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `bench report DIR` of a saved soak (`None`: `dir` holds none).
pub fn report(dir: &Path, json: bool) -> Option<anyhow::Result<ExitCode>> {
    if !record::is_saved(dir) {
        return None;
    }
    Some(record::load(dir).and_then(|rec| {
        let res = judge::derive(&rec);
        print(&res, json)?;
        Ok(status(&res))
    }))
}
