//! The HTML page around the charts (pure): a heading, a line per run and
//! a section per kind of result the runs hold. No script and no outside
//! resource: its Content-Security-Policy allows neither.

use std::fmt::Write;

use super::Run;
use super::chart::{self, Chart};
use super::svg::{escape, render};
use crate::bench::collective::report::Results as CollectiveResults;
use crate::bench::results::Results;
use crate::bench::serving::record::ServingResults;
use crate::bench::soak::judge::SoakResults;

/// What the page is drawn with beyond the runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// The link's line rate, Gb/s, for the collective charts (default: the
    /// highest path ceiling of a `bench run` on the page).
    pub line_rate_gbps: Option<f64>,
}

/// A run with the name the page gives it (its folder's name).
pub struct Named<'a> {
    /// The name.
    pub name: String,
    /// The run.
    pub run: &'a Run,
}

/// Every chart for `runs`, each with its label in the legends, grouped by
/// kind: a section title and its charts.
pub fn sections(runs: &[(&str, &Run)], opts: Options) -> Vec<(String, Vec<Chart>)> {
    let bench: Vec<(&str, &Results)> = runs
        .iter()
        .filter_map(|(l, r)| match r {
            Run::Bench(b) => Some((*l, b)),
            _ => None,
        })
        .collect();
    let serving: Vec<(&str, &ServingResults)> = runs
        .iter()
        .filter_map(|(l, r)| match r {
            Run::Serving(s) => Some((*l, s)),
            _ => None,
        })
        .collect();
    let collective: Vec<(&str, &CollectiveResults)> = runs
        .iter()
        .filter_map(|(l, r)| match r {
            Run::Collective(c) => Some((*l, c)),
            _ => None,
        })
        .collect();
    let soak: Vec<(&str, &SoakResults)> = runs
        .iter()
        .filter_map(|(l, r)| match r {
            Run::Soak(s) => Some((*l, s)),
            _ => None,
        })
        .collect();
    let mut ab_names: Vec<String> = Vec::new();
    let mut ab_results: Vec<&ServingResults> = Vec::new();
    for (l, r) in runs {
        if let Run::Ab(a) = r {
            for leg in &a.legs {
                if let Some(res) = &leg.results {
                    let what = format!("{} ({})", leg.name, leg.transport);
                    ab_names.push(if l.is_empty() {
                        what
                    } else {
                        format!("{l} {what}")
                    });
                    ab_results.push(res);
                }
            }
        }
    }
    let ab: Vec<(&str, &ServingResults)> = ab_names
        .iter()
        .map(String::as_str)
        .zip(ab_results)
        .collect();
    let line_rate = opts.line_rate_gbps.or_else(|| {
        bench
            .iter()
            .flat_map(|(_, b)| b.rows.iter().filter_map(|r| r.ceiling_gbps))
            .filter(|g| g.is_finite())
            .reduce(f64::max)
    });
    let mut out = Vec::new();
    let mut add = |title: &str, charts: Vec<Chart>| {
        if !charts.is_empty() {
            out.push((title.to_string(), charts));
        }
    };
    add("RoCE benchmark (bench run)", chart::bench(&bench));
    add(
        "Collectives (bench collective)",
        chart::collective(&collective, line_rate),
    );
    add(
        "Serving (bench serving)",
        chart::serving(&serving, "", "serving"),
    );
    add(
        "A/B transport (bench serving --ab-transport)",
        chart::serving(&ab, "A/B transport: ", "ab"),
    );
    add("Soak (bench soak)", chart::soak(&soak));
    out
}

/// One line about a run: what made it, when, against what.
fn about(name: &str, run: &Run) -> String {
    let what = match run {
        Run::Bench(b) => format!("{}, peer {}", b.started_utc, b.peer),
        Run::Serving(s) => format!(
            "{}, model {} at {} ({}), prompts {} tokens, outputs {} tokens",
            s.started_utc, s.model, s.endpoint, s.server, s.input_tokens, s.output_tokens
        ),
        Run::Collective(c) => format!(
            "{}, backend {}, {} ranks, cluster transport {}, {}",
            c.started_utc, c.backend, c.world, c.cluster_transport, c.status
        ),
        Run::Soak(s) => format!(
            "{}, model {} at {} ({}), {:.0} s, {} requests ({} long), {} failed: {}",
            s.started_utc,
            s.model,
            s.endpoint,
            s.server,
            s.elapsed_s,
            s.requests,
            s.long_requests,
            s.failed,
            s.verdict
        ),
        Run::Ab(a) => format!(
            "cluster {}, endpoint {}, legs {}",
            a.plan.cluster,
            a.plan.endpoint,
            a.legs
                .iter()
                .map(|l| format!("{} ({})", l.name, l.transport))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let label = if name.is_empty() {
        String::new()
    } else {
        format!("<b>{}</b>: ", escape(name))
    };
    format!("<li>{label}{} — {}</li>", escape(run.kind()), escape(&what))
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}\
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}\
figure{margin:12px 0}figcaption{font-size:13px;color:#555;max-width:900px}\
ul.runs{font-size:14px}";

/// The page: `title`, the runs (each a name and its label in the legends)
/// and their charts.
fn page(title: &str, runs: &[(Named<'_>, &str)], opts: Options) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
<title>{t}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n<ul class=\"runs\">\n",
        t = escape(title)
    );
    for (n, _) in runs {
        s.push_str(&about(&n.name, n.run));
        s.push('\n');
    }
    s.push_str("</ul>\n");
    let labelled: Vec<(&str, &Run)> = runs.iter().map(|(n, l)| (*l, n.run)).collect();
    let sections = sections(&labelled, opts);
    if sections.is_empty() {
        s.push_str("<p>These runs hold no results to draw.</p>\n");
    }
    for (heading, charts) in sections {
        let _ = writeln!(s, "<section>\n<h2>{}</h2>", escape(&heading));
        for c in charts {
            s.push_str("<figure>\n");
            s.push_str(&render(&c));
            s.push('\n');
            for n in &c.notes {
                let _ = writeln!(s, "<figcaption>{}</figcaption>", escape(n));
            }
            s.push_str("</figure>\n");
        }
        s.push_str("</section>\n");
    }
    s.push_str("</body>\n</html>\n");
    s
}

/// `bench report --html`: one run's charts; several runs drawn together,
/// each series named by its run's folder.
pub fn report(runs: &[Named<'_>], opts: Options) -> String {
    let one = runs.len() == 1;
    let runs: Vec<(Named<'_>, &str)> = runs
        .iter()
        .map(|n| {
            (
                Named {
                    name: n.name.clone(),
                    run: n.run,
                },
                if one { "" } else { n.name.as_str() },
            )
        })
        .collect();
    page("halobox bench report", &runs, opts)
}

/// `bench compare --html`: the two runs' series on the same charts,
/// `before` and `after`; `Err` when they are not the same kind of run.
pub fn compare(before: Named<'_>, after: Named<'_>, opts: Options) -> Result<String, String> {
    if before.run.kind() != after.run.kind() {
        return Err(format!(
            "{} is a `{}` run but {} is a `{}` run: compare two runs of the same kind",
            before.name,
            before.run.kind(),
            after.name,
            after.run.kind()
        ));
    }
    Ok(page(
        "halobox bench compare",
        &[(before, "before"), (after, "after")],
        opts,
    ))
}
