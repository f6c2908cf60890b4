//! One chart as an SVG element (pure: a string out). Every text from a
//! run (node, model, test names) goes through [`escape`].

use std::fmt::Write;

use super::chart::{AxisKind, Chart};

/// The series colours, in order (distinct for colour-blind readers too).
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The horizontal lines' colours, apart from the series' (greys and olive).
pub const REF_PALETTE: [&str; 4] = ["#444444", "#8a8a8a", "#bcbd22", "#6b4c9a"];

const WIDTH: f64 = 1040.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 650.0;
const TOP: f64 = 44.0;
const PLOT_HEIGHT: f64 = 280.0;
const LEGEND_X: f64 = 668.0;
const LEGEND_ROW: f64 = 18.0;
/// Longest legend entry, in characters (the rest becomes `…`).
const LEGEND_CHARS: usize = 50;

/// Text for HTML and SVG: `&`, `<`, `>`, `"`, `'` as entities, control
/// characters dropped (XML has no place for them).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// `s` cut to `n` characters, `…` at the end when cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(['…']).collect()
    }
}

/// 4096 → `4 KiB`, 1572864 → `1.5 MiB`, 2 → `2 B`.
pub fn bytes_label(v: f64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("GiB", 1073741824.0),
        ("MiB", 1048576.0),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    let (unit, div) = UNITS
        .iter()
        .find(|(_, d)| v >= *d)
        .copied()
        .unwrap_or(("B", 1.0));
    format!("{} {unit}", number(v / div))
}

/// A tick's number: no decimals when whole, else at most two.
fn number(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A step of 1, 2 or 5 times a power of ten giving about five ticks up to `max`.
fn nice_step(max: f64) -> f64 {
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let f = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    f * mag
}

/// The x axis' domain (in its own space: log2 for the log kinds) and its
/// ticks as (position, label).
fn x_axis(chart: &Chart) -> ((f64, f64), Vec<(f64, String)>) {
    let xs: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    match &chart.x.kind {
        AxisKind::Categories(names) => {
            let n = names.len().max(1) as f64;
            (
                (-0.5, n - 0.5),
                names
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (i as f64, s.clone()))
                    .collect(),
            )
        }
        AxisKind::Linear => {
            let max = xs.iter().copied().fold(0.0, f64::max);
            let step = nice_step(if max > 0.0 { max } else { 1.0 });
            let top = (max / step).ceil().max(1.0) * step;
            let ticks = (0..=((top / step).round() as usize))
                .map(|i| (i as f64 * step, number(i as f64 * step)))
                .collect();
            ((0.0, top), ticks)
        }
        kind => {
            let bytes = *kind == AxisKind::Log2Bytes;
            let label = |v: f64| if bytes { bytes_label(v) } else { number(v) };
            let logs: Vec<f64> = xs.iter().filter(|x| **x > 0.0).map(|x| x.log2()).collect();
            if logs.is_empty() {
                let (lo, hi) = if bytes { (10, 23) } else { (0, 6) };
                let ticks = (lo..=hi)
                    .step_by(if bytes { 3 } else { 1 })
                    .map(|e| (f64::from(e), label(2f64.powi(e))))
                    .collect();
                return ((f64::from(lo), f64::from(hi)), ticks);
            }
            let min = logs.iter().copied().fold(f64::INFINITY, f64::min);
            let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let (mut lo, mut hi) = (min.floor(), max.ceil());
            if hi - lo < 1.0 {
                lo -= 1.0;
                hi += 1.0;
            }
            let mut distinct: Vec<f64> = xs.iter().copied().filter(|x| *x > 0.0).collect();
            distinct.sort_by(f64::total_cmp);
            distinct.dedup();
            let ticks = if distinct.len() <= 10 {
                distinct.iter().map(|v| (v.log2(), label(*v))).collect()
            } else {
                // Every power of two, or every 2nd, 4th, 5th or 10th
                // (aligned: 1 KiB, 1 MiB fall on ticks), at most ten.
                let span = hi - lo;
                let every = [1.0, 2.0, 4.0, 5.0, 10.0]
                    .into_iter()
                    .find(|e| span / e <= 10.0)
                    .unwrap_or(10.0);
                let first = (lo / every).ceil() as i64;
                let last = (hi / every).floor() as i64;
                (first..=last)
                    .map(|k| {
                        let e = k as f64 * every;
                        (e, label(2f64.powf(e)))
                    })
                    .collect()
            };
            ((lo - 0.3, hi + 0.3), ticks)
        }
    }
}

/// A value's place on the x axis' own scale.
fn x_of(kind: &AxisKind, v: f64) -> f64 {
    match kind {
        AxisKind::Log2Bytes | AxisKind::Log2Count => v.max(f64::MIN_POSITIVE).log2(),
        _ => v,
    }
}

/// The chart as an `<svg>` element, with its id, title, axes, ticks,
/// lines and legend.
pub fn render(chart: &Chart) -> String {
    let drawn: Vec<_> = chart
        .series
        .iter()
        .filter(|s| !s.points.is_empty())
        .collect();
    let entries = drawn.len() + chart.refs.len();
    let height = (TOP + PLOT_HEIGHT + 60.0).max(TOP + 10.0 + LEGEND_ROW * entries as f64 + 10.0);
    let bottom = TOP + PLOT_HEIGHT;
    let ((x_lo, x_hi), x_ticks) = x_axis(chart);
    let px = |v: f64| LEFT + (v - x_lo) / (x_hi - x_lo) * (RIGHT - LEFT);
    let y_max = drawn
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(chart.refs.iter().map(|r| r.y))
        .fold(0.0, f64::max)
        * 1.08;
    let step = nice_step(if y_max > 0.0 { y_max } else { 1.0 });
    let y_top = (y_max / step).ceil().max(1.0) * step;
    let py = |v: f64| bottom - (v / y_top) * PLOT_HEIGHT;

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" id="chart-{id}" class="chart" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{title}" font-family="sans-serif" font-size="12">"#,
        id = escape(&chart.id),
        title = escape(&chart.title),
    );
    let _ = write!(
        s,
        r##"<title>{t}</title><rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/><text x="{LEFT}" y="24" font-size="15" font-weight="bold" fill="#222">{t}</text>"##,
        t = escape(&chart.title)
    );
    // Grid and y ticks.
    let mut v = 0.0;
    while v <= y_top + step / 2.0 {
        let y = py(v);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{RIGHT}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{tx}" y="{ty:.1}" text-anchor="end" fill="#333">{label}</text>"##,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            label = escape(&number(v)),
        );
        v += step;
    }
    for (pos, label) in &x_ticks {
        let x = px(*pos);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{bottom}" x2="{x:.1}" y2="{y2}" stroke="#555"/><text x="{x:.1}" y="{ty}" text-anchor="middle" fill="#333">{label}</text>"##,
            y2 = bottom + 5.0,
            ty = bottom + 18.0,
            label = escape(label),
        );
    }
    // Axes and their titles.
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#555"/><line x1="{LEFT}" y1="{bottom}" x2="{RIGHT}" y2="{bottom}" stroke="#555"/><text class="axis-x" x="{cx}" y="{xy}" text-anchor="middle" fill="#222">{xt}</text><text class="axis-y" transform="translate(20 {cy}) rotate(-90)" text-anchor="middle" fill="#222">{yt}</text>"##,
        cx = (LEFT + RIGHT) / 2.0,
        xy = bottom + 40.0,
        xt = escape(&chart.x.label()),
        cy = TOP + PLOT_HEIGHT / 2.0,
        yt = escape(&chart.y.label()),
    );
    // Reference lines, then the series over them.
    let mut ref_legend: Vec<(String, &str, &str)> = Vec::new();
    for (i, r) in chart.refs.iter().enumerate() {
        let c = REF_PALETTE[i % REF_PALETTE.len()];
        let y = py(r.y);
        let _ = write!(
            s,
            r#"<line class="ref" x1="{LEFT}" y1="{y:.1}" x2="{RIGHT}" y2="{y:.1}" stroke="{c}" stroke-width="2" stroke-dasharray="2 4"/>"#
        );
        ref_legend.push((r.name.clone(), c, "2 4"));
    }
    let mut legend: Vec<(String, &str, &str)> = Vec::new();
    for (i, ser) in drawn.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let dash = if ser.dashed { "7 4" } else { "none" };
        let pts: Vec<String> = ser
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(x_of(&chart.x.kind, *x)), py(*y)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline class="series" points="{}" fill="none" stroke="{c}" stroke-width="2.5" stroke-dasharray="{dash}"/>"#,
            pts.join(" ")
        );
        for p in &pts {
            let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = write!(s, r#"<circle cx="{x}" cy="{y}" r="3.5" fill="{c}"/>"#);
        }
        legend.push((ser.name.clone(), c, dash));
    }
    // The legend: the series, then the horizontal lines.
    legend.extend(ref_legend);
    for (i, (name, c, dash)) in legend.iter().enumerate() {
        let y = TOP + 6.0 + i as f64 * LEGEND_ROW;
        let _ = write!(
            s,
            r##"<g class="legend-entry"><title>{full}</title><line x1="{LEGEND_X}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="{c}" stroke-width="3" stroke-dasharray="{dash}"/><text x="{tx}" y="{ty:.1}" fill="#222">{name}</text></g>"##,
            x2 = LEGEND_X + 26.0,
            tx = LEGEND_X + 32.0,
            ty = y + 4.0,
            name = escape(&cut(name, LEGEND_CHARS)),
            full = escape(name),
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::html::chart::{Axis, RefLine, Series};

    fn chart(kind: AxisKind, xs: &[f64]) -> Chart {
        Chart {
            id: "t".into(),
            title: "T <b>".into(),
            x: Axis {
                title: "Message size".into(),
                unit: "bytes".into(),
                kind,
            },
            y: Axis {
                title: "Bandwidth".into(),
                unit: "Gb/s".into(),
                kind: AxisKind::Linear,
            },
            series: vec![Series {
                name: "a & b".into(),
                dashed: true,
                points: xs.iter().map(|x| (*x, 3.0)).collect(),
            }],
            refs: vec![RefLine {
                name: "line rate".into(),
                y: 100.0,
            }],
            notes: vec![],
        }
    }

    #[test]
    fn text_is_escaped_and_control_characters_dropped() {
        assert_eq!(
            escape("<a href=\"x\">'&'\u{1b}[2J</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;[2J&lt;/a&gt;"
        );
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
    }

    #[test]
    fn sizes_and_numbers_read_as_people_write_them() {
        assert_eq!(bytes_label(2.0), "2 B");
        assert_eq!(bytes_label(4096.0), "4 KiB");
        assert_eq!(bytes_label(1572864.0), "1.5 MiB");
        assert_eq!(bytes_label(1073741824.0), "1 GiB");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(40.0), "40");
        assert_eq!(nice_step(104.0), 50.0);
        assert_eq!(nice_step(0.9), 0.2);
    }

    #[test]
    fn a_long_sweep_gets_aligned_power_of_two_ticks() {
        let xs: Vec<f64> = (1..=23).map(|e| 2f64.powi(e)).collect();
        let (_, ticks) = x_axis(&chart(AxisKind::Log2Bytes, &xs));
        let labels: Vec<&str> = ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["16 B", "256 B", "4 KiB", "64 KiB", "1 MiB"]);
        // A few sizes: a tick at each.
        let (_, ticks) = x_axis(&chart(AxisKind::Log2Bytes, &[4096.0, 1048576.0]));
        let labels: Vec<&str> = ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["4 KiB", "1 MiB"]);
        let (_, ticks) = x_axis(&chart(AxisKind::Log2Count, &[1.0, 4.0, 8.0]));
        assert_eq!(
            ticks.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            ["1", "4", "8"]
        );
    }

    #[test]
    fn the_svg_has_its_axes_legend_and_lines() {
        let svg = render(&chart(AxisKind::Log2Bytes, &[4096.0, 65536.0]));
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"chart-t\""));
        assert!(svg.ends_with("</svg>"));
        for t in [
            "<title>T &lt;b&gt;</title>",
            "Message size (bytes, log scale)",
            "Bandwidth (Gb/s)",
            ">a &amp; b<",
            ">line rate<",
            "stroke-dasharray=\"7 4\"",
            "class=\"ref\"",
            ">100<",
        ] {
            assert!(svg.contains(t), "{t} not in {svg}");
        }
        assert_eq!(svg.matches("<circle").count(), 2);
        assert_eq!(svg.matches("class=\"legend-entry\"").count(), 2);
    }
}
