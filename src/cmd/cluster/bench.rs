//! `halobox cluster bench`: `bench run` for every pair, one at a time;
//! with `--collective`, then `bench collective` across every node.

use std::process::ExitCode;

use crate::bench::run::{default_save_dir, utc_now};
use crate::cli::ClusterBenchArgs;
use crate::cluster::config;
use crate::error::UsageError;
use crate::fleet::bench::{self, PairOptions};
use crate::fleet::bench_run;

/// Measures the pairs, prints the matrices and the flagged links (or
/// JSON); exit 1 when a pair could not be measured at all, or the
/// collective failed.
pub fn run(a: &ClusterBenchArgs) -> anyhow::Result<ExitCode> {
    let (_, cfg) = config::open(a.file.cluster.as_deref())?;
    let pairs = bench::pairs(cfg.nodes.len(), a.pairs);
    if pairs.is_empty() {
        return Err(UsageError(
            "cluster.toml has one node: a benchmark needs a pair\n  hint: add the other nodes with `halobox cluster init --node …`".into(),
        )
        .into());
    }
    let root = match &a.save {
        Some(d) => d.clone(),
        None => default_save_dir(&format!("{}-cluster", utc_now().1))?,
    };
    let o = PairOptions {
        duration: a.duration,
        rdma: match (a.rdma, a.no_rdma) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
    };
    let n = pairs.len();
    let mut k = 0;
    let results = bench_run::bench(&cfg, &pairs, &o, &root, |from, to| {
        k += 1;
        eprintln!(
            "[{k}/{n}] {} ↔ {}: bench run on {}",
            from.label(),
            to.label(),
            from.label()
        );
    });
    let names: Vec<String> = cfg.nodes.iter().map(|n| n.label().to_string()).collect();
    let mut measured = results.iter().all(|p| p.results.is_some());
    let collective = match a.collective {
        true => {
            eprintln!("bench collective across the {} nodes", cfg.nodes.len());
            let opts = crate::bench::collective::plan::Options::defaults();
            crate::bench::collective::run(
                &cfg,
                &opts,
                Some(&root.join("collective")),
                false,
                false,
                &mut crate::reporter::Terminal,
            )?
            .map(|(r, _)| r)
        }
        false => None,
    };
    if let Some(r) = &collective {
        measured &= r.status == "ok";
    }
    if a.output.json {
        let mut v = serde_json::to_value(bench::report(names, results))?;
        if let Some(r) = &collective {
            v["collective"] = serde_json::to_value(r)?;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", bench::render(&names, &results));
        if let Some(r) = &collective {
            print!("\n{}", crate::bench::collective::report::human(r));
        }
    }
    Ok(if measured {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
