//! `halobox metrics` on a node of the fleet (as `cluster up` starts it on
//! every node, [`super::metrics_nodes`]): the host's figures
//! ([`crate::metrics::collect()`]) and what the node runs (its container,
//! Ray's daemons, and on the head the serve its record names), printed once
//! or served on `GET /metrics` until killed.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

use anyhow::Context;

use crate::cluster::config::NodeBackend;
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot, Reader};
use crate::metrics::{self, Target, node, serve};
use crate::reporter::Reporter;

/// What `halobox metrics` was asked.
#[derive(Debug, Clone)]
pub struct Request {
    /// The host, or a `--sysroot` snapshot (scraped once only).
    pub root: HostRoot,
    /// Print one scrape instead of serving.
    pub print: bool,
    /// Where to listen (default: the data-plane address).
    pub listen: Option<SocketAddr>,
    /// The node's name in the labels (default: the hostname).
    pub node: Option<String>,
    /// The node's container and its backend, when it has one.
    pub container: Option<(String, NodeBackend)>,
    /// Whether Ray's daemons are looked for.
    pub ray: bool,
    /// The serve's API address on the head, and the cluster file its
    /// record belongs to.
    pub serve: Option<(SocketAddr, Option<PathBuf>)>,
}

/// Prints one scrape to `r`, or serves until killed (its address said to
/// `r` first).
pub fn run(req: &Request, r: &mut dyn Reporter) -> anyhow::Result<()> {
    if !req.root.is_live() && !req.print {
        return Err(UsageError(
            "--sysroot goes with --print: a snapshot is scraped once, not served".into(),
        )
        .into());
    }
    let facts = host::gather(
        req.root.clone(),
        GatherOptions {
            tool_versions: false,
        },
    );
    let node = match &req.node {
        Some(n) => n.clone(),
        None => metrics::collect::hostname(&Reader::new(req.root.clone()))
            .unwrap_or_else(|| "localhost".into()),
    };
    if req.print {
        let interface = match req.listen {
            Some(addr) => serve::interface_for(&facts, addr.ip()),
            None => serve::listen_address(&facts, None)
                .ok()
                .and_then(|a| serve::interface_for(&facts, a.ip())),
        };
        r.out(&scrape(req, &Target { node, interface }));
        return Ok(());
    }
    let addr = serve::listen_address(&facts, req.listen).map_err(|e| UsageError(e.to_string()))?;
    let target = Target {
        interface: serve::interface_for(&facts, addr.ip()),
        node,
    };
    let listener = TcpListener::bind(addr).with_context(|| {
        format!("cannot listen on {addr}\n  hint: is another `halobox metrics` running there? choose another with --listen ADDR:PORT")
    })?;
    r.note(&format!(
        "halobox metrics: serving http://{addr}/metrics (node {}, interface {})\n",
        target.node,
        target.interface.as_deref().unwrap_or("-")
    ));
    serve::serve(&listener, || scrape(req, &target)).context("halobox metrics stopped")
}

/// One scrape: the host's families and what the node runs.
fn scrape(req: &Request, target: &Target) -> String {
    let r = Reader::new(req.root.clone());
    let mut families = metrics::collect(&r, target);
    families.extend(node::families(&seen(req, &r)));
    metrics::render(&target.node, &families)
}

/// What runs on the node, as a scrape asks it now.
fn seen(req: &Request, r: &Reader) -> node::Seen {
    node::Seen {
        container: req
            .container
            .as_ref()
            .map(|(c, b)| (c.clone(), *b, node::container_running(c))),
        ray: req.ray.then(|| node::ray_running(r)),
        serve: req.serve.as_ref().map(|(given, record)| {
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
        restarts: req.serve.as_ref().and_then(|(_, record)| {
            let cluster = record.as_deref()?;
            Some(crate::serve::state::restarts(cluster).made())
        }),
    }
}
