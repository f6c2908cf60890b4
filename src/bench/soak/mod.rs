//! `halobox bench soak`: a bounded soak of a running serve. Requests mixed
//! long (a prompt of `--context` tokens, exact through the server's own
//! tokenizer) and short go out at a set concurrency for `--duration`, while
//! each node's GTT in use is read from its `halobox metrics`; the verdict is
//! PASS or FAIL against explicit limits (no error, no stall, GTT growth
//! under a bound).
//!
//! [`plan`] turns the flags into options (pure); [`run`] sends the load and
//! samples GTT; [`record`] is `soak.json`, saved as the run goes; [`judge`]
//! derives the windows over time and the verdict from a record (pure), the
//! same right after a run and later (`bench report`, `bench report --html`).

pub mod judge;
pub mod plan;
pub mod record;
pub mod run;

use std::path::Path;

use crate::bench::serving::client::Key;
use crate::reporter::Reporter;

/// Runs the soak, saved in `dir` as it goes (progress as notes); the
/// results derived from the saved record.
pub fn measure(
    opts: &plan::SoakOptions,
    key: Option<&Key>,
    dir: &Path,
    r: &mut dyn Reporter,
) -> anyhow::Result<judge::SoakResults> {
    let (started, _) = crate::bench::run::utc_now();
    let rec = crate::engine::block_on(run::run(
        opts,
        key,
        started,
        |line| r.note(&format!("{line}\n")),
        |rec| record::save(dir, rec),
    ))??;
    Ok(judge::derive(&record::load(dir).unwrap_or(rec)))
}
