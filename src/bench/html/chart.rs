//! The charts as data: series of points on two axes with their units,
//! built from a run's results (pure; [`super::svg`] draws them).

use crate::bench::collective::report::Results as CollectiveResults;
use crate::bench::results::Results;
use crate::bench::serving::record::{LevelResult, ServingResults, Spread};
use crate::bench::soak::judge::SoakResults;

/// How an axis places its values.
#[derive(Debug, Clone, PartialEq)]
pub enum AxisKind {
    /// Linear from zero.
    Linear,
    /// Powers of two, ticks labelled as byte sizes (`4 KiB`, `1 MiB`).
    Log2Bytes,
    /// Powers of two, ticks labelled as plain numbers (concurrency).
    Log2Count,
    /// Named places, evenly spaced; a point's x is its index.
    Categories(Vec<String>),
}

/// One axis: its title, its unit and how it places values.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// What it measures (`Latency`).
    pub title: String,
    /// Its unit (`µs`, `Gb/s`, `bytes`, `ms`).
    pub unit: String,
    /// How values are placed.
    pub kind: AxisKind,
}

impl Axis {
    fn new(title: &str, unit: &str, kind: AxisKind) -> Axis {
        Axis {
            title: title.into(),
            unit: unit.into(),
            kind,
        }
    }

    /// `Latency (µs)`, `Message size (bytes, log scale)`.
    pub fn label(&self) -> String {
        match self.kind {
            AxisKind::Log2Bytes | AxisKind::Log2Count => {
                format!("{} ({}, log scale)", self.title, self.unit)
            }
            _ => format!("{} ({})", self.title, self.unit),
        }
    }
}

/// A line of points, with its legend entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// Dashed (a second percentile, or the earlier run).
    pub dashed: bool,
    /// `(x, y)` in the axes' units, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A horizontal line across the chart (a ceiling, a line rate, a figure
/// measured without a size), with its legend entry.
#[derive(Debug, Clone, PartialEq)]
pub struct RefLine {
    /// The legend entry.
    pub name: String,
    /// Its height, in the y axis' unit.
    pub y: f64,
}

/// One chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// A stable name (`bench-latency`, `serving-ttft`): the SVG's id.
    pub id: String,
    /// The heading.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis (linear from zero).
    pub y: Axis,
    /// The lines.
    pub series: Vec<Series>,
    /// The horizontal lines.
    pub refs: Vec<RefLine>,
    /// Lines of text under the chart.
    pub notes: Vec<String>,
}

impl Chart {
    fn new(id: &str, title: &str, x: Axis, y: Axis) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            x,
            y,
            series: Vec::new(),
            refs: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Something to draw.
    pub fn has_data(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }
}

/// A run's name in a legend: nothing for a page of one run, else
/// `before ` / `after ` / the folder's name and a space.
fn named(label: &str, what: &str) -> String {
    if label.is_empty() {
        what.to_string()
    } else {
        format!("{label} {what}")
    }
}

/// The latency percentiles a chart shows, in order.
const PERCENTILES: [&str; 5] = ["min", "p50", "p99", "p99.9", "max"];

/// `bench run`: TCP against RDMA latency by percentile, and bandwidth by
/// message size (the size sweep's rows; the fixed-size tests and the
/// path's ceiling as horizontal lines).
pub fn bench(runs: &[(&str, &Results)]) -> Vec<Chart> {
    let mut lat = Chart::new(
        "bench-latency",
        "Latency percentiles: TCP against RDMA (one-way)",
        Axis::new(
            "Percentile",
            "of samples",
            AxisKind::Categories(PERCENTILES.iter().map(|s| s.to_string()).collect()),
        ),
        Axis::new("Latency", "µs", AxisKind::Linear),
    );
    let mut bw = Chart::new(
        "bench-bandwidth",
        "Bandwidth by message size: TCP against RDMA",
        Axis::new("Message size", "bytes", AxisKind::Log2Bytes),
        Axis::new("Bandwidth", "Gb/s", AxisKind::Linear),
    );
    for (label, res) in runs {
        let paths: Vec<&str> = res.rows.iter().map(|r| r.path.as_str()).collect();
        let many_paths = paths.iter().any(|p| *p != paths[0]);
        let name = |r: &crate::bench::results::Row, extra: &str| {
            let mut n = named(label, &r.test);
            if many_paths {
                n = format!("{n} {}", r.path);
            }
            n + extra
        };
        for r in res.rows.iter().filter(|r| r.status != "failed") {
            if let Some(l) = r.latency {
                let values = [l.min_us, Some(l.median_us), l.p99_us, l.p999_us, l.max_us];
                let points = values
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.filter(|v| v.is_finite()).map(|v| (i as f64, v)))
                    .collect();
                lat.series.push(Series {
                    name: name(r, ""),
                    dashed: false,
                    points,
                });
            }
        }
        // The sweep: a series per test and path.
        let mut sweep: Vec<Series> = Vec::new();
        for r in res.rows.iter().filter(|r| r.status != "failed") {
            match (r.message_bytes, r.bandwidth_gbps) {
                (Some(b), Some(g)) if g.is_finite() => {
                    let n = name(r, " (size sweep)");
                    match sweep.iter_mut().find(|s| s.name == n) {
                        Some(s) => s.points.push((b as f64, g)),
                        None => sweep.push(Series {
                            name: n,
                            dashed: false,
                            points: vec![(b as f64, g)],
                        }),
                    }
                }
                (None, Some(g)) if g.is_finite() => bw.refs.push(RefLine {
                    name: name(r, &format!(" x{} ({g:.1} Gb/s)", r.streams)),
                    y: g,
                }),
                _ => {}
            }
        }
        for s in &mut sweep {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        bw.series.extend(sweep);
        let mut ceilings: Vec<f64> = res.rows.iter().filter_map(|r| r.ceiling_gbps).collect();
        ceilings.sort_by(f64::total_cmp);
        ceilings.dedup();
        for c in ceilings.into_iter().filter(|c| c.is_finite()) {
            bw.refs.push(RefLine {
                name: named(label, &format!("path ceiling ({c:.0} Gb/s)")),
                y: c,
            });
        }
    }
    if !bw.has_data() && !bw.refs.is_empty() {
        bw.title = "Bandwidth: TCP against RDMA".into();
        bw.notes.push(
            "No size sweep in this run (`halobox bench run --sweep` adds one): the lines are the fixed-size tests.".into(),
        );
    }
    [lat, bw]
        .into_iter()
        .filter(|c| c.has_data() || !c.refs.is_empty())
        .collect()
}

/// `bench collective`: bus bandwidth (Gb/s) and latency by message size,
/// a series per operation, the link's line rate as a horizontal line.
pub fn collective(runs: &[(&str, &CollectiveResults)], line_rate_gbps: Option<f64>) -> Vec<Chart> {
    let mut bus = Chart::new(
        "collective-busbw",
        "Collective bus bandwidth by message size",
        Axis::new("Message size", "bytes", AxisKind::Log2Bytes),
        Axis::new("Bus bandwidth", "Gb/s", AxisKind::Linear),
    );
    let mut lat = Chart::new(
        "collective-latency",
        "Collective latency by message size (p50, slowest rank)",
        Axis::new("Message size", "bytes", AxisKind::Log2Bytes),
        Axis::new("Latency", "µs", AxisKind::Linear),
    );
    for (label, res) in runs {
        let mut ops: Vec<&str> = res.rows.iter().map(|r| r.op.as_str()).collect();
        ops.dedup();
        for op in ops {
            let rows = || res.rows.iter().filter(move |r| r.op == op);
            let what = format!("{op} ({}, {} ranks)", res.backend, res.world);
            let mut pts: Vec<(f64, f64)> = rows()
                .filter_map(|r| r.busbw_gbs.map(|g| (r.bytes as f64, g * 8.0)))
                .filter(|p| p.1.is_finite())
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            bus.series.push(Series {
                name: named(label, &what),
                dashed: false,
                points: pts,
            });
            let mut pts: Vec<(f64, f64)> = rows()
                .filter_map(|r| r.latency.map(|l| (r.bytes as f64, l.median_us)))
                .filter(|p| p.1.is_finite())
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            lat.series.push(Series {
                name: named(label, &what),
                dashed: false,
                points: pts,
            });
        }
    }
    match line_rate_gbps.filter(|g| g.is_finite() && *g > 0.0) {
        Some(g) => bus.refs.push(RefLine {
            name: format!("line rate ({g:.0} Gb/s)"),
            y: g,
        }),
        None => bus.notes.push(
            "The link's line rate is not in a collective run: give it with --line-rate GBPS to draw it.".into(),
        ),
    }
    [bus, lat].into_iter().filter(Chart::has_data).collect()
}

/// `bench serving` (and each leg of `--ab-transport`): time to first
/// token, inter-token latency and output tokens/s by concurrency. `title`
/// names the charts' group (`A/B transport: `, or empty).
pub fn serving(runs: &[(&str, &ServingResults)], title: &str, id: &str) -> Vec<Chart> {
    let conc = || Axis::new("Concurrency", "requests in flight", AxisKind::Log2Count);
    let mut ttft = Chart::new(
        &format!("{id}-ttft"),
        &format!("{title}Time to first token by concurrency"),
        conc(),
        Axis::new("Time to first token", "ms", AxisKind::Linear),
    );
    let mut itl = Chart::new(
        &format!("{id}-itl"),
        &format!("{title}Inter-token latency by concurrency"),
        conc(),
        Axis::new("Inter-token latency", "ms", AxisKind::Linear),
    );
    let mut tps = Chart::new(
        &format!("{id}-throughput"),
        &format!("{title}Output tokens/s by concurrency"),
        conc(),
        Axis::new("Output throughput", "tokens/s", AxisKind::Linear),
    );
    for (label, res) in runs {
        let levels: Vec<_> = res
            .levels
            .iter()
            .filter(|l| l.status != "not run" && l.concurrency > 0)
            .collect();
        let spread = |f: fn(&LevelResult) -> Option<Spread>, p99: bool| {
            levels
                .iter()
                .filter_map(|l| {
                    f(l).map(|s| (f64::from(l.concurrency), if p99 { s.p99 } else { s.p50 }))
                })
                .filter(|p| p.1.is_finite())
                .collect::<Vec<_>>()
        };
        for (chart, f) in [
            (
                &mut ttft,
                (|l: &LevelResult| l.ttft_ms) as fn(&LevelResult) -> Option<Spread>,
            ),
            (&mut itl, |l: &LevelResult| l.itl_ms),
        ] {
            for p99 in [false, true] {
                chart.series.push(Series {
                    name: named(label, if p99 { "p99" } else { "p50" }),
                    dashed: p99,
                    points: spread(f, p99),
                });
            }
        }
        tps.series.push(Series {
            name: named(label, "output tokens/s"),
            dashed: false,
            points: levels
                .iter()
                .filter(|l| l.completed > 0 && l.output_throughput.is_finite())
                .map(|l| (f64::from(l.concurrency), l.output_throughput))
                .collect(),
        });
    }
    [ttft, itl, tps]
        .into_iter()
        .filter(Chart::has_data)
        .collect()
}

/// `bench soak`: output tokens/s and time to first token per window over
/// the soak, and each node's GTT in use over the soak (its verdict and
/// reasons as notes).
pub fn soak(runs: &[(&str, &SoakResults)]) -> Vec<Chart> {
    let time = || Axis::new("Time into the soak", "s", AxisKind::Linear);
    let mut tps = Chart::new(
        "soak-throughput",
        "Output tokens/s over the soak",
        time(),
        Axis::new("Output throughput", "tokens/s", AxisKind::Linear),
    );
    let mut ttft = Chart::new(
        "soak-ttft",
        "Time to first token over the soak (median per window)",
        time(),
        Axis::new("Time to first token", "ms", AxisKind::Linear),
    );
    let mut gtt = Chart::new(
        "soak-gtt",
        "GTT in use over the soak",
        time(),
        Axis::new("GTT in use", "GiB", AxisKind::Linear),
    );
    for (label, res) in runs {
        let mid = |w: &crate::bench::soak::judge::Window| (w.start_s + w.end_s) / 2.0;
        tps.series.push(Series {
            name: named(label, "output tokens/s"),
            dashed: false,
            points: res
                .windows
                .iter()
                .map(|w| (mid(w), w.output_tokens_per_s))
                .collect(),
        });
        for (long, what) in [(false, "short prompts"), (true, "long prompts")] {
            ttft.series.push(Series {
                name: named(label, what),
                dashed: long,
                points: res
                    .windows
                    .iter()
                    .filter_map(|w| {
                        let v = if long {
                            w.ttft_long_p50_ms
                        } else {
                            w.ttft_short_p50_ms
                        };
                        v.map(|v| (mid(w), v))
                    })
                    .collect(),
            });
        }
        for g in &res.gtt {
            gtt.series.push(Series {
                name: named(label, &g.node),
                dashed: false,
                points: g.points.clone(),
            });
        }
        let verdict = std::iter::once(named(label, res.verdict)).chain(res.reasons.iter().cloned());
        tps.notes.push(verdict.collect::<Vec<_>>().join("; "));
        gtt.notes.extend(res.notes.iter().cloned());
    }
    [tps, ttft, gtt]
        .into_iter()
        .filter(Chart::has_data)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::html::{Run, load};

    fn fixture(name: &str) -> Run {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/bench-runs")
            .join(name);
        load(&dir).unwrap()
    }

    fn bench_results(name: &str) -> Results {
        match fixture(name) {
            Run::Bench(r) => r,
            other => panic!("{name} is a {}", other.kind()),
        }
    }

    #[test]
    fn a_bench_run_is_latency_by_percentile_and_bandwidth_by_size() {
        let res = bench_results("rdma-before");
        let charts = bench(&[("", &res)]);
        assert_eq!(charts.len(), 2);
        let lat = &charts[0];
        assert_eq!(lat.y.label(), "Latency (µs)");
        let names: Vec<&str> = lat.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["tcp halobox", "rdma ib_write_lat"]);
        // min, p50, p99, p99.9 and max, in order and rising.
        let tcp = &lat.series[0].points;
        assert_eq!(
            tcp.iter().map(|p| p.0).collect::<Vec<_>>(),
            [0.0, 1.0, 2.0, 3.0, 4.0]
        );
        assert!(tcp.windows(2).all(|w| w[0].1 <= w[1].1), "{tcp:?}");
        let bw = &charts[1];
        assert_eq!(bw.x.label(), "Message size (bytes, log scale)");
        assert_eq!(bw.series.len(), 1);
        let sweep = &bw.series[0].points;
        assert_eq!(sweep.len(), 23);
        assert_eq!((sweep[0].0, sweep[22].0), (2.0, 8388608.0));
        let refs: Vec<&str> = bw.refs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            refs,
            [
                "tcp halobox x4 (51.2 Gb/s)",
                "rdma ib_write_bw x4 (38.7 Gb/s)",
                "path ceiling (100 Gb/s)"
            ]
        );
    }

    #[test]
    fn without_a_sweep_the_bandwidths_are_lines_and_a_note_says_why() {
        let mut res = bench_results("rdma-before");
        res.rows.retain(|r| r.message_bytes.is_none());
        let charts = bench(&[("before", &res)]);
        let bw = &charts[1];
        assert!(!bw.has_data());
        assert_eq!(bw.refs.len(), 3);
        assert!(bw.refs[0].name.starts_with("before tcp halobox"));
        assert!(bw.notes[0].contains("--sweep"));
        // Failed rows draw nothing.
        for r in &mut res.rows {
            r.status = "failed".into();
        }
        assert_eq!(bench(&[("", &res)])[0].series.len(), 0);
    }

    #[test]
    fn collective_bus_bandwidth_is_in_gbps_against_the_line_rate() {
        let Run::Collective(res) = fixture("collective") else {
            panic!("not a collective run")
        };
        let charts = collective(&[("", &res)], Some(100.0));
        let bus = &charts[0];
        assert_eq!(bus.y.label(), "Bus bandwidth (Gb/s)");
        assert_eq!(bus.series.len(), 2);
        let row = &res.rows[3];
        assert_eq!(
            bus.series[0].points[3],
            (row.bytes as f64, row.busbw_gbs.unwrap() * 8.0)
        );
        assert_eq!(bus.refs[0].y, 100.0);
        assert!(bus.notes.is_empty());
        let charts = collective(&[("", &res)], None);
        assert!(charts[0].refs.is_empty());
        assert!(charts[0].notes[0].contains("--line-rate"));
    }

    #[test]
    fn serving_levels_that_did_not_run_draw_nothing() {
        let Run::Serving(mut res) = fixture("serving-before") else {
            panic!("not a serving run")
        };
        res.levels[3].status = "not run".into();
        let charts = serving(&[("", &res)], "", "serving");
        assert_eq!(charts.len(), 3);
        let ttft = &charts[0];
        assert_eq!(ttft.series.len(), 2);
        assert!(
            !ttft.series[0].dashed && ttft.series[1].dashed,
            "p99 dashed"
        );
        assert_eq!(
            ttft.series[0]
                .points
                .iter()
                .map(|p| p.0)
                .collect::<Vec<_>>(),
            [1.0, 2.0, 4.0]
        );
        assert_eq!(charts[2].y.label(), "Output throughput (tokens/s)");
        // Nothing ran: no chart at all.
        for l in &mut res.levels {
            l.status = "not run".into();
        }
        assert!(serving(&[("", &res)], "", "serving").is_empty());
    }
}
