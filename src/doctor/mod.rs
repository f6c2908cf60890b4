//! Diagnosis: turns [`HostFacts`] into checks, each PASS / WARN / FAIL / SKIP
//! with one line of why and, for every non-pass, the exact fix.
//!
//! Everything here is pure: the same facts always give the same report.

mod gpu;
mod kernel;
mod memlock;
mod network;
mod rdma;
pub mod render;
mod system;

use std::net::Ipv4Addr;

use schemars::JsonSchema;
use serde::Serialize;

use crate::dataplane::{self, Selection};
use crate::host::HostFacts;

pub use memlock::RDMA_MIN_BYTES;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Fine.
    Pass,
    /// Works, but worse than it should, or cannot be confirmed.
    Warn,
    /// Will not work until fixed.
    Fail,
    /// Does not apply to this host.
    Skip,
}

impl Status {
    /// `PASS`, `WARN`, `FAIL`, `SKIP`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// One diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Check {
    /// Stable identifier (`gpu.present`, `rdma.gid`, …).
    pub id: String,
    /// The outcome.
    pub status: Status,
    /// One line saying why.
    pub summary: String,
    /// The exact fix (commands or file contents) for a non-pass.
    pub fix: Option<String>,
}

impl Check {
    fn new(id: &str, status: Status, summary: impl Into<String>) -> Self {
        Self {
            id: id.to_string(),
            status,
            summary: summary.into(),
            fix: None,
        }
    }

    /// A passing check.
    pub fn pass(id: &str, summary: impl Into<String>) -> Self {
        Self::new(id, Status::Pass, summary)
    }

    /// A check that does not apply; the summary says why.
    pub fn skip(id: &str, summary: impl Into<String>) -> Self {
        Self::new(id, Status::Skip, summary)
    }

    /// A warning with its fix.
    pub fn warn(id: &str, summary: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(id, Status::Warn, summary).with_fix(fix)
    }

    /// A failure with its fix.
    pub fn fail(id: &str, summary: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(id, Status::Fail, summary).with_fix(fix)
    }

    fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// Counts per status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Summary {
    /// PASS checks.
    pub pass: usize,
    /// WARN checks.
    pub warn: usize,
    /// FAIL checks.
    pub fail: usize,
    /// SKIP checks.
    pub skip: usize,
}

impl Summary {
    /// Counts the statuses of `checks`.
    pub fn of(checks: &[Check]) -> Self {
        let mut s = Summary::default();
        for c in checks {
            match c.status {
                Status::Pass => s.pass += 1,
                Status::Warn => s.warn += 1,
                Status::Fail => s.fail += 1,
                Status::Skip => s.skip += 1,
            }
        }
        s
    }
}

/// The whole diagnosis of a host.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report {
    /// Schema version of this document (1).
    pub schema_version: u32,
    /// The snapshot read, or `null` for the live host.
    pub sysroot: Option<String>,
    /// How the data plane was resolved.
    pub data_plane: Selection,
    /// Every check, in a fixed order.
    pub checks: Vec<Check>,
    /// Counts per status.
    pub summary: Summary,
}

impl Report {
    /// True when any check failed.
    pub fn has_failures(&self) -> bool {
        self.summary.fail > 0
    }
}

/// What the user told doctor.
#[derive(Debug, Clone, Copy, Default)]
pub struct DoctorOptions {
    /// The data-plane address (`--ip`).
    pub ip: Option<Ipv4Addr>,
}

/// Runs every check against `facts`.
pub fn diagnose(facts: &HostFacts, opts: DoctorOptions) -> Report {
    let selection = dataplane::select(facts, opts.ip);
    let plane = match &selection {
        Selection::Chosen(p) => Some(p),
        _ => None,
    };
    let mut checks = Vec::new();
    checks.extend(gpu::checks(facts));
    checks.extend(memlock::checks(facts));
    checks.push(network::data_plane(facts, &selection));
    checks.extend(rdma::checks(facts, plane));
    checks.extend(network::checks(facts, plane));
    checks.extend(kernel::checks(facts));
    checks.extend(system::checks(facts));
    Report {
        schema_version: crate::host::SCHEMA_VERSION,
        sysroot: facts.sysroot.clone(),
        data_plane: selection,
        summary: Summary::of(&checks),
        checks,
    }
}

/// True when the host has any RDMA device.
fn has_rdma(facts: &HostFacts) -> bool {
    !facts.rdma.devices.is_empty()
}

/// True when the host has an AMD GPU agent in the KFD topology.
fn has_gpu(facts: &HostFacts) -> bool {
    facts.gpu.nodes.iter().any(|n| n.is_gpu())
}
