//! The results table in text, and the deltas between two runs.

use std::fmt::Write;

use super::results::{Results, Row};

/// The widest cell of each column, in characters.
fn column_widths<const N: usize>(table: &[[String; N]]) -> [usize; N] {
    let mut widths = [0; N];
    for row in table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    widths
}

fn num(v: Option<f64>, decimals: usize) -> String {
    v.map(|x| format!("{x:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

/// 65536 → `64 KiB`, 2 → `2 B`.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn test_label(r: &Row) -> String {
    if let Some(b) = r.message_bytes {
        format!("{} {}", r.test, size(b))
    } else if r.bandwidth_gbps.is_some()
        || (r.latency.is_none() && r.leg.contains("bw"))
        || r.leg.contains("iperf3")
    {
        format!("{} x{}", r.test, r.streams)
    } else {
        r.test.clone()
    }
}

/// Renders the results as a table with the context and every failure's fix.
pub fn human(res: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "halobox bench  {}  peer {}", res.started_utc, res.peer);
    if !res.ran_in.is_empty() {
        let _ = writeln!(out, "  ran in: {}", res.ran_in);
    }
    for c in &res.context {
        let _ = writeln!(out, "  {c}");
    }
    for c in &res.counters {
        let _ = writeln!(out, "  {}", super::counters::line(c));
    }
    let _ = writeln!(out);
    let header = [
        "path".to_string(),
        "test".into(),
        "lat median µs".into(),
        "lat p99 µs".into(),
        "Gb/s".into(),
        "% ceiling".into(),
        "status".into(),
    ];
    let mut table: Vec<[String; 7]> = vec![header];
    for r in &res.rows {
        table.push([
            r.path_label.clone(),
            test_label(r),
            num(r.latency.map(|l| l.median_us), 2),
            num(r.latency.and_then(|l| l.p99_us), 2),
            num(r.bandwidth_gbps, 2),
            num(r.percent_of_ceiling, 0),
            match (&r.status[..], &r.note) {
                ("ok", Some(n)) => format!("ok ({n})"),
                ("ok", None) => "ok".into(),
                ("warn", Some(n)) => format!("WARN ({n})"),
                (s, _) => s.to_uppercase(),
            },
        ]);
    }
    let widths = column_widths(&table);
    for row in &table {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if (2..=5).contains(&c) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                if c < 6 {
                    line.push_str(&" ".repeat(pad));
                }
            }
            if c < 6 {
                line.push_str("  ");
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let notes: Vec<&Row> = res.rows.iter().filter(|r| r.status != "ok").collect();
    if !notes.is_empty() {
        let _ = writeln!(out);
    }
    let mut seen = Vec::new();
    for r in notes {
        let text = match &r.diagnosis {
            Some(d) => format!("{}: {}\n    fix: {}", r.status.to_uppercase(), d.why, d.fix),
            None => format!(
                "{}: {}",
                r.status.to_uppercase(),
                r.note.as_deref().unwrap_or("")
            ),
        };
        if seen.contains(&text) {
            continue;
        }
        let _ = writeln!(out, "{} {}  {text}", r.path, test_label(r));
        seen.push(text);
    }
    if !res.link_notes.is_empty() {
        let _ = writeln!(out);
    }
    for n in &res.link_notes {
        let _ = writeln!(out, "{n}");
    }
    let _ = writeln!(
        out,
        "\nlatency is one way (half a round trip); Gb/s is decimal (10^9 bit/s); the ceiling is the slowest NIC line rate (a USB4 link's trained rate) or PCIe link of the two ends"
    );
    out
}

/// Renders the change from `a` to `b`, row by row (matched by path and leg).
pub fn compare(a: &Results, b: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {}  peer {}", a.started_utc, a.peer);
    let _ = writeln!(out, "B: {}  peer {}", b.started_utc, b.peer);
    let _ = writeln!(out);
    let mut table: Vec<[String; 5]> = vec![[
        "leg".into(),
        "measure".into(),
        "A".into(),
        "B".into(),
        "change".into(),
    ]];
    for ra in &a.rows {
        let key = |r: &Row| (r.path.clone(), r.leg.clone(), r.message_bytes);
        let Some(rb) = b.rows.iter().find(|r| key(r) == key(ra)) else {
            table.push([
                ra.leg.clone(),
                "-".into(),
                ra.status.clone(),
                "absent".into(),
                "-".into(),
            ]);
            continue;
        };
        let mut pair = |measure: &str, x: Option<f64>, y: Option<f64>| {
            let change = match (x, y) {
                (Some(x), Some(y)) if x != 0.0 => {
                    format!("{:+.2} ({:+.1} %)", y - x, 100.0 * (y - x) / x)
                }
                (Some(x), Some(y)) => format!("{:+.2}", y - x),
                _ => "-".into(),
            };
            let leg = match ra.message_bytes {
                Some(b) => format!("{} {}", ra.leg, size(b)),
                None => ra.leg.clone(),
            };
            table.push([leg, measure.into(), num(x, 2), num(y, 2), change]);
        };
        if ra.latency.is_some() || rb.latency.is_some() {
            pair(
                "lat median µs",
                ra.latency.map(|l| l.median_us),
                rb.latency.map(|l| l.median_us),
            );
            pair(
                "lat p99 µs",
                ra.latency.and_then(|l| l.p99_us),
                rb.latency.and_then(|l| l.p99_us),
            );
        }
        if ra.bandwidth_gbps.is_some() || rb.bandwidth_gbps.is_some() {
            pair("Gb/s", ra.bandwidth_gbps, rb.bandwidth_gbps);
        }
        if ra.status != rb.status {
            table.push([
                ra.leg.clone(),
                "status".into(),
                ra.status.clone(),
                rb.status.clone(),
                "-".into(),
            ]);
        }
    }
    for rb in &b.rows {
        if !a
            .rows
            .iter()
            .any(|r| r.path == rb.path && r.leg == rb.leg && r.message_bytes == rb.message_bytes)
        {
            table.push([
                rb.leg.clone(),
                "-".into(),
                "absent".into(),
                rb.status.clone(),
                "-".into(),
            ]);
        }
    }
    let widths = column_widths(&table);
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| format!("{cell:<w$}", w = widths[c]))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn message_sizes() {
        assert_eq!(size(2), "2 B");
        assert_eq!(size(1000), "1000 B");
        assert_eq!(size(65536), "64 KiB");
        assert_eq!(size(8 << 20), "8 MiB");
    }
}
