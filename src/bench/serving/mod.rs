//! `halobox bench serving`: load against a running OpenAI endpoint (what
//! `halobox serve` brings up: vLLM or llama.cpp's llama-server), in what a
//! user feels: time to first token, inter-token latency, output tokens
//! and requests per second, at several concurrency levels.
//!
//! [`plan`] decides from the flags (pure); [`prompts`] makes fixed-length
//! random prompts; [`client`] speaks HTTP and times streams ([`sse`] reads
//! them); [`run`] runs the levels; [`record`] saves, derives and renders;
//! [`key`] finds the API's key; [`target`] which endpoint (`--url` or the
//! recorded serve); [`measure`] runs and saves a benchmark;
//! [`ab`] plans and judges `--ab-transport`, [`crate::fleet::serving_ab`] runs it.

pub mod ab;
pub mod client;
pub mod key;
pub mod plan;
pub mod prompts;
pub mod record;
pub mod run;
pub mod sse;
pub mod target;

use std::path::Path;

use client::Key;
use plan::ServingOptions;
use record::ServingResults;

use crate::reporter::Reporter;

/// Runs the benchmark, saved in `dir` after every level (progress as
/// notes); the results derived from the saved file, as `bench report`
/// derives them.
pub fn measure(
    opts: &ServingOptions,
    key: Option<&Key>,
    dir: &Path,
    r: &mut dyn Reporter,
) -> anyhow::Result<ServingResults> {
    let (started, _) = crate::bench::run::utc_now();
    let rec = crate::engine::block_on(run::run(
        opts,
        key,
        started,
        |line| r.note(&format!("{line}\n")),
        |rec| record::save(dir, rec),
    ))??;
    Ok(record::derive(&record::load(dir).unwrap_or(rec)))
}

/// Whether every level ran and every request finished.
pub fn passed(res: &ServingResults) -> bool {
    res.partial.is_none() && res.levels.iter().all(|l| l.status == "ok")
}
