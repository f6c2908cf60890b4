//! `halobox metrics`: serve this node's figures on `GET /metrics`, or print
//! one scrape (`--print`, also of a `--sysroot` snapshot).

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::MetricsArgs;
use crate::cluster::config::NodeBackend;
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot, Reader};
use crate::metrics::{self, Target, node, serve};

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
        print!(
            "{}",
            scrape(&root, &Target { node, interface }, &Asks::of(args))
        );
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
    let asks = Asks::of(args);
    serve::serve(&listener, || scrape(&root, &target, &asks)).context("halobox metrics stopped")?;
    Ok(ExitCode::SUCCESS)
}

/// What a scrape asks about beyond the host's figures (`cluster up` names
/// them: the container, Ray, and on the head the serve).
struct Asks {
    container: Option<(String, NodeBackend)>,
    ray: bool,
    serve: Option<(SocketAddr, Option<PathBuf>)>,
}

impl Asks {
    fn of(args: &MetricsArgs) -> Asks {
        Asks {
            container: args
                .container
                .clone()
                .map(|c| (c, args.backend.unwrap_or_default()))
                .filter(|(_, b)| b.is_container()),
            ray: args.ray,
            serve: args.serve_endpoint.map(|a| (a, args.serve_record.clone())),
        }
    }

    fn seen(&self, r: &Reader) -> node::Seen {
        node::Seen {
            container: self
                .container
                .as_ref()
                .map(|(c, b)| (c.clone(), *b, node::container_running(c))),
            ray: self.ray.then(|| node::ray_running(r)),
            serve: self.serve.as_ref().map(|(given, record)| {
                // The record (when this host has one) names the endpoint.
                let recorded = record
                    .as_deref()
                    .and_then(crate::serve::state::load)
                    .map(|s| s.endpoint);
                let addr = recorded
                    .as_deref()
                    .and_then(node::endpoint_addr)
                    .unwrap_or(*given);
                node::ServeState::of(recorded.is_some(), node::healthy(addr))
            }),
            restarts: self.serve.as_ref().and_then(|(_, record)| {
                let cluster = record.as_deref()?;
                Some(crate::serve::state::restarts(cluster).made())
            }),
        }
    }
}

fn scrape(root: &HostRoot, target: &Target, asks: &Asks) -> String {
    let r = Reader::new(root.clone());
    let mut families = metrics::collect(&r, target);
    families.extend(node::families(&asks.seen(&r)));
    metrics::render(&target.node, &families)
}
