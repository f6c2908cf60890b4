//! A saved soak: `soak.json` holds what was asked, every request as it
//! ended and every GTT reading; it is rewritten as the soak goes, so a
//! halobox that dies keeps what ran.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::plan::SoakOptions;

/// Version of `soak.json`.
pub const SCHEMA_VERSION: u32 = 1;
/// Name of the record in a results folder.
pub const SOAK_FILE: &str = "soak.json";
/// Largest record that is read.
const MAX_BYTES: u64 = 256 << 20;

/// One request, as it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakRequest {
    /// Its number, from 1, in the order requests started.
    pub n: u64,
    /// When it started, seconds from the start of the load.
    pub start_s: f64,
    /// A long-context request (`--context` prompt tokens).
    pub long: bool,
    /// Time to the first token, ms.
    pub ttft_ms: Option<f64>,
    /// Time to the end of the stream (or to the failure), ms.
    pub latency_ms: f64,
    /// Output tokens (the server's usage, else the token chunks counted).
    pub output_tokens: u64,
    /// Why it failed (`None`: it finished).
    pub error: Option<String>,
    /// It failed because no byte came for `stall_s`.
    pub stalled: bool,
}

/// One reading of a node's GTT in use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GttSample {
    /// The node.
    pub node: String,
    /// When, seconds from the start of the load.
    pub at_s: f64,
    /// GTT in use, bytes (`None`: the node reports no GTT, or did not answer).
    pub used_bytes: Option<f64>,
    /// Why there is no figure.
    pub why: Option<String>,
}

/// `soak.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Start time, UTC, RFC 3339.
    pub started_utc: String,
    /// What was asked.
    pub options: SoakOptions,
    /// The model soaked.
    pub model: String,
    /// The server (`owned_by`).
    pub server: String,
    /// How prompt lengths were made (exact through `/tokenize`, or about).
    pub prompt_lengths: String,
    /// The requests, in the order they ended.
    pub requests: Vec<SoakRequest>,
    /// The GTT readings.
    pub gtt: Vec<GttSample>,
    /// Seconds the load ran so far.
    pub elapsed_s: f64,
    /// Why the load ended early (a stall, the endpoint gone, Ctrl-C).
    pub ended_early: Option<String>,
    /// The load is over.
    pub finished: bool,
}

/// Whether `dir` holds a saved soak.
pub fn is_saved(dir: &Path) -> bool {
    dir.join(SOAK_FILE).is_file()
}

/// Writes the record to `dir` (made when missing), replacing it atomically.
pub fn save(dir: &Path, rec: &SoakRecord) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(SOAK_FILE);
    let text = serde_json::to_string_pretty(rec)? + "\n";
    crate::confine::write_atomic(&path, text.as_bytes(), 0o666)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Reads `soak.json` from `dir`.
pub fn load(dir: &Path) -> anyhow::Result<SoakRecord> {
    let kind = crate::bench::saved::Kind {
        file: SOAK_FILE,
        made_by: "halobox bench soak",
        what: "soak record",
        max_bytes: MAX_BYTES,
        schema_version: SCHEMA_VERSION,
    };
    crate::bench::saved::load(dir, &kind, |r: &SoakRecord| r.schema_version)
}
