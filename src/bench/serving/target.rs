//! Which endpoint a serving bench loads: `--url`, else the serve recorded
//! for the cluster file (the one `serve status` shows), with where it came
//! from and the recorded serve (whose key the bench then uses).

use std::path::PathBuf;

use super::plan::Endpoint;
use crate::cluster::config;
use crate::error::UsageError;
use crate::serve::state::{self, ServeState};

/// The endpoint, where it came from, the recorded serve (when it is the
/// default endpoint) and the cluster file.
pub struct Target {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// `--url`, or `the serve of FILE (ENGINE MODEL)`.
    pub from: String,
    /// The recorded serve, when the endpoint is its.
    pub serve: Option<ServeState>,
    /// The cluster file, when there is one.
    pub cluster: Option<PathBuf>,
}

/// `url`, else the serve recorded for `cluster` (default: the usual file).
pub fn resolve(url: Option<&str>, cluster: Option<&std::path::Path>) -> anyhow::Result<Target> {
    if let Some(url) = url {
        return Ok(Target {
            endpoint: Endpoint::parse(url).map_err(UsageError)?,
            from: "--url".into(),
            serve: None,
            cluster: config::path(cluster),
        });
    }
    let (path, _) = config::open(cluster)?;
    let s = state::load(&path).ok_or_else(|| {
        UsageError(format!(
            "no serve is recorded for {}\n  hint: start one with `halobox serve MODEL --detach`, or pass --url http://HOST:PORT",
            path.display()
        ))
    })?;
    let from = format!(
        "the serve of {} ({} {})",
        path.display(),
        s.engine,
        crate::remote::printable(&s.model)
    );
    Ok(Target {
        endpoint: Endpoint::parse(&s.endpoint).map_err(UsageError)?,
        from,
        serve: Some(s),
        cluster: Some(path),
    })
}
