//! `bench report --html` and `bench compare --html`: one library call
//! writes the page; the path written goes to stdout.

use std::path::Path;
use std::process::ExitCode;

use crate::bench::html::{self, page};
use crate::cli::{BenchCompareArgs, BenchReportArgs, ChartArgs};

fn options(chart: &ChartArgs) -> page::Options {
    page::Options {
        line_rate_gbps: chart.line_rate,
    }
}

/// `bench report RUN... --html OUT` (`None`: no --html).
pub fn report(args: &BenchReportArgs) -> Option<anyhow::Result<ExitCode>> {
    let out = args.html.as_deref()?;
    let dirs: Vec<&Path> = std::iter::once(args.dir.as_path())
        .chain(args.more.iter().map(|d| d.as_path()))
        .collect();
    Some(done(
        html::report_file(&dirs, out, options(&args.chart)),
        out,
    ))
}

/// `bench compare BEFORE AFTER --html OUT` (`None`: no --html).
pub fn compare(args: &BenchCompareArgs) -> Option<anyhow::Result<ExitCode>> {
    let out = args.html.as_deref()?;
    let written = html::compare_file(&args.a, &args.b, out, options(&args.chart));
    Some(done(written, out))
}

fn done(written: anyhow::Result<()>, out: &Path) -> anyhow::Result<ExitCode> {
    written?;
    println!("wrote {}", out.display());
    Ok(ExitCode::SUCCESS)
}
