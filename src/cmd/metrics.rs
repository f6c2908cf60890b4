//! `halobox metrics`: serve this node's figures on `GET /metrics`, or print
//! one scrape (`--print`, also of a `--sysroot` snapshot).

use std::net::TcpListener;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::MetricsArgs;
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot, Reader};
use crate::metrics::{self, Target, serve};

/// Prints one scrape or serves until killed.
pub fn run(args: &MetricsArgs) -> anyhow::Result<ExitCode> {
    let root = args.source.root()?;
    if !root.is_live() && !args.print {
        return Err(UsageError(
            "--sysroot goes with --print: a snapshot is scraped once, not served".into(),
        )
        .into());
    }
    let facts = host::gather(
        root.clone(),
        GatherOptions {
            tool_versions: false,
        },
    );
    let node = match &args.node {
        Some(n) => n.clone(),
        None => metrics::collect::hostname(&Reader::new(root.clone()))
            .unwrap_or_else(|| "localhost".into()),
    };
    if args.print {
        let interface = match args.listen {
            Some(addr) => serve::interface_for(&facts, addr.ip()),
            None => serve::listen_address(&facts, None)
                .ok()
                .and_then(|a| serve::interface_for(&facts, a.ip())),
        };
        print!("{}", scrape(&root, &Target { node, interface }));
        return Ok(ExitCode::SUCCESS);
    }
    let addr = serve::listen_address(&facts, args.listen).map_err(|e| UsageError(e.to_string()))?;
    let target = Target {
        interface: serve::interface_for(&facts, addr.ip()),
        node,
    };
    let listener = TcpListener::bind(addr).with_context(|| {
        format!("cannot listen on {addr}\n  hint: is another `halobox metrics` running there? choose another with --listen ADDR:PORT")
    })?;
    eprintln!(
        "halobox metrics: serving http://{addr}/metrics (node {}, interface {})",
        target.node,
        target.interface.as_deref().unwrap_or("-")
    );
    serve::serve(&listener, || scrape(&root, &target)).context("halobox metrics stopped")?;
    Ok(ExitCode::SUCCESS)
}

fn scrape(root: &HostRoot, target: &Target) -> String {
    let r = Reader::new(root.clone());
    metrics::render(&target.node, &metrics::collect(&r, target))
}
