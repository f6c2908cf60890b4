//! `bench report --html` and `bench compare --html`: saved runs as one
//! self-contained HTML page of inline SVG charts (no script, no network).
//!
//! [`load()`] reads any saved run (`bench run`, `bench serving`, its
//! `--ab-transport`, `bench collective`, `bench soak`); [`chart`] turns results into
//! charts (series, axes with units; pure), [`svg`] draws one (pure), [`page`]
//! assembles the page (pure: no script, no outside resource) and
//! [`write()`] puts it in place atomically. The SVG has ticks, a legend and
//! every string escaped; charts have horizontal lines. `fixtures.rs` writes
//! `tests/fixtures/bench-runs/` (an ignored test).

pub mod chart;
pub mod page;
pub mod svg;

use std::path::Path;

use super::collective::report::Results as CollectiveResults;
use super::results::Results;
use super::serving::ab::{AB_FILE, AbResults};
use super::serving::record::ServingResults;
use super::soak::judge::SoakResults;
use crate::error::UsageError;

/// A saved run of any kind, derived.
#[derive(Debug, Clone)]
pub enum Run {
    /// `bench run`: TCP against RDMA.
    Bench(Results),
    /// `bench serving`.
    Serving(ServingResults),
    /// `bench collective`.
    Collective(CollectiveResults),
    /// `bench serving --ab-transport`.
    Ab(AbResults),
    /// `bench soak`.
    Soak(SoakResults),
}

impl Run {
    /// What made it (`bench run`, `bench serving`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Run::Bench(_) => "bench run",
            Run::Serving(_) => "bench serving",
            Run::Collective(_) => "bench collective",
            Run::Ab(_) => "bench serving --ab-transport",
            Run::Soak(_) => "bench soak",
        }
    }
}

/// Reads and derives the saved run in `dir`, whatever made it.
pub fn load(dir: &Path) -> anyhow::Result<Run> {
    if dir.join(AB_FILE).is_file() {
        return Ok(Run::Ab(super::serving::ab::load(dir)?));
    }
    if super::serving::record::is_saved(dir) {
        let rec = super::serving::record::load(dir)?;
        return Ok(Run::Serving(super::serving::record::derive(&rec)));
    }
    if super::soak::record::is_saved(dir) {
        let rec = super::soak::record::load(dir)?;
        return Ok(Run::Soak(super::soak::judge::derive(&rec)));
    }
    if super::collective::run::is_saved(dir) {
        let rec = super::collective::run::load(dir)?;
        return Ok(Run::Collective(super::collective::report::derive(&rec)));
    }
    let rec = super::results::load(dir)?;
    Ok(Run::Bench(super::results::derive(&rec, dir)))
}

/// Writes `html` to `path` atomically ([`crate::confine::write_atomic`]: a
/// new temporary file beside it, then a rename): a reader sees the old page
/// or the whole new one.
pub fn write(path: &Path, html: &str) -> anyhow::Result<()> {
    let hint = "give --html a file path in a folder you can write, e.g. --html ./bench.html";
    path.file_name().ok_or_else(|| {
        UsageError(format!(
            "--html {}: not a file name\n  hint: {hint}",
            path.display()
        ))
    })?;
    if path.is_dir() {
        return Err(UsageError(format!(
            "--html {}: is a folder\n  hint: {hint}",
            path.display()
        ))
        .into());
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(UsageError(format!(
            "--html {}: its folder {} does not exist\n  hint: create it (mkdir -p {}) or {hint}",
            path.display(),
            parent.display(),
            crate::shell::quote(&parent.to_string_lossy())
        ))
        .into());
    }
    if let Err(e) = crate::confine::write_atomic(path, html.as_bytes(), 0o666) {
        return Err(UsageError(format!(
            "--html {}: cannot write it: {e}\n  hint: {hint}",
            path.display()
        ))
        .into());
    }
    Ok(())
}

/// A run's name on the page: its folder's last component.
fn name_of(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `bench report RUN... --html OUT`: loads every run and writes their page.
pub fn report_file(dirs: &[&Path], out: &Path, opts: page::Options) -> anyhow::Result<()> {
    let runs = dirs
        .iter()
        .map(|d| load(d))
        .collect::<anyhow::Result<Vec<Run>>>()?;
    let named: Vec<page::Named<'_>> = dirs
        .iter()
        .zip(&runs)
        .map(|(d, run)| page::Named {
            name: name_of(d),
            run,
        })
        .collect();
    write(out, &page::report(&named, opts))
}

/// `bench compare BEFORE AFTER --html OUT`: both runs on the same charts.
pub fn compare_file(
    before: &Path,
    after: &Path,
    out: &Path,
    opts: page::Options,
) -> anyhow::Result<()> {
    let (a, b) = (load(before)?, load(after)?);
    let html = page::compare(
        page::Named {
            name: before.display().to_string(),
            run: &a,
        },
        page::Named {
            name: after.display().to_string(),
            run: &b,
        },
        opts,
    )
    .map_err(UsageError)?;
    write(out, &html)
}

#[cfg(test)]
mod fixtures;
