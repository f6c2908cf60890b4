//! `halobox doctor`: host facts → checks → report.

use std::process::ExitCode;

use crate::cli::DoctorArgs;
use crate::cluster::config;
use crate::doctor::{self, DoctorOptions, Peer, render};
use crate::host::{self, GatherOptions, HostFacts};

/// `--ip` and `--peer`, plus this user's cluster.toml on the live host (a
/// snapshot is another machine: this host's cluster file says nothing of it).
fn options(args: &DoctorArgs, facts: &HostFacts) -> DoctorOptions {
    let opts = DoctorOptions {
        ip: args.ip,
        peers: args
            .peer
            .iter()
            .map(|ip| Peer {
                ip: *ip,
                from: "--peer".into(),
            })
            .collect(),
        cluster_error: None,
        jumbo: Vec::new(),
    };
    if args.source.sysroot.is_some() {
        return opts;
    }
    let Some(path) = config::path(None).filter(|p| p.exists()) else {
        return opts;
    };
    match config::load(&path) {
        Ok(cfg) => {
            let nodes: Vec<_> = cfg
                .nodes
                .iter()
                .map(|n| (n.label().to_string(), n.ip))
                .collect();
            opts.with_cluster(facts, &nodes)
        }
        Err(e) => DoctorOptions {
            cluster_error: Some(e.to_string()),
            ..opts
        },
    }
}

/// Gathers facts, diagnoses them and prints the report.
pub fn run(args: &DoctorArgs, color: bool) -> anyhow::Result<ExitCode> {
    let root = args.source.root()?;
    let facts = host::gather(root, GatherOptions::default());
    let mut opts = options(args, &facts);
    let peers: Vec<_> = opts.peers.iter().map(|p| p.ip).collect();
    opts.jumbo = host::jumbo::prove(&facts, &peers);
    let report = doctor::diagnose(&facts, opts);
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
