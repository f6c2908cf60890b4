//! perftest's text tables (`ib_write_bw`, `ib_write_lat` and relatives).
//!
//! Bandwidth header: ` #bytes #iterations BW peak[U] BW average[U]
//! MsgRate[Mpps]` where `U` is `Gb/sec` (`--report_gbits`), `MiB/sec`, or
//! `MB/sec` in older builds, which also means MiB. Latency header:
//! ` #bytes #iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec]
//! t_stdev[usec] 99% percentile[usec] 99.9% percentile[usec]` (older builds
//! print fewer columns). Columns are separated by spaces and tabs; other
//! lines (warnings) may sit between the header and the rows.

use serde::{Deserialize, Serialize};

use crate::units::mib_per_s_to_gbps;

/// The unit a bandwidth table was printed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BwUnit {
    /// `Gb/sec` (decimal).
    Gbps,
    /// `MiB/sec`, or `MB/sec` from older builds (also MiB).
    MiBps,
}

/// One bandwidth row, converted to Gb/s (decimal).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BwRow {
    /// Message size.
    pub bytes: u64,
    /// Iterations.
    pub iterations: u64,
    /// Peak bandwidth (0 when perftest did not measure it).
    pub peak_gbps: f64,
    /// Average bandwidth.
    pub average_gbps: f64,
    /// Message rate in millions per second, when printed.
    pub msg_rate_mpps: Option<f64>,
}

/// One latency row in microseconds; columns an older build does not print are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatRow {
    /// Message size.
    pub bytes: u64,
    /// Iterations.
    pub iterations: u64,
    /// `t_min`.
    pub min_us: Option<f64>,
    /// `t_max`.
    pub max_us: Option<f64>,
    /// `t_typical`: the median.
    pub typical_us: Option<f64>,
    /// `t_avg`.
    pub avg_us: Option<f64>,
    /// `t_stdev`.
    pub stdev_us: Option<f64>,
    /// `99% percentile`.
    pub p99_us: Option<f64>,
    /// `99.9% percentile`.
    pub p999_us: Option<f64>,
}

/// A parsed perftest result table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Table {
    /// A bandwidth test's rows.
    Bandwidth {
        /// The unit of the header.
        unit: BwUnit,
        /// Rows in printed order.
        rows: Vec<BwRow>,
    },
    /// A latency test's rows.
    Latency {
        /// Rows in printed order.
        rows: Vec<LatRow>,
    },
}

const LAT_COLUMNS: [&str; 7] = [
    "t_min[",
    "t_max[",
    "t_typical[",
    "t_avg[",
    "t_stdev[",
    "99% percentile[",
    "99.9% percentile[",
];

/// Finds the result table in perftest's output; `None` when there is no
/// header or no row under it (a failed run).
pub fn parse(text: &str) -> Option<Table> {
    let lines: Vec<&str> = text.lines().collect();
    let (at, header) = lines
        .iter()
        .enumerate()
        .rev()
        .find(|(_, l)| l.trim_start().starts_with("#bytes"))?;
    let rows = lines[at + 1..]
        .iter()
        .take_while(|l| !l.trim_start().starts_with("---"))
        .filter_map(|l| numbers(l));
    if header.contains("BW average[") {
        let unit = if header.contains("BW average[Gb/sec]") {
            BwUnit::Gbps
        } else if header.contains("BW average[MiB/sec]") || header.contains("BW average[MB/sec]") {
            BwUnit::MiBps
        } else {
            return None;
        };
        let to_gbps = |v: f64| match unit {
            BwUnit::Gbps => v,
            BwUnit::MiBps => mib_per_s_to_gbps(v),
        };
        let rows: Vec<BwRow> = rows
            .filter(|n| n.len() >= 4)
            .map(|n| BwRow {
                bytes: n[0] as u64,
                iterations: n[1] as u64,
                peak_gbps: to_gbps(n[2]),
                average_gbps: to_gbps(n[3]),
                msg_rate_mpps: n.get(4).copied(),
            })
            .collect();
        (!rows.is_empty()).then_some(Table::Bandwidth { unit, rows })
    } else {
        // Which latency columns this build prints, in header order.
        let mut cols: Vec<(usize, usize)> = LAT_COLUMNS
            .iter()
            .enumerate()
            .filter_map(|(i, name)| header.find(name).map(|pos| (pos, i)))
            .collect();
        cols.sort();
        if cols.is_empty() {
            return None;
        }
        let rows: Vec<LatRow> = rows
            .filter(|n| n.len() == 2 + cols.len())
            .map(|n| {
                let mut v = [None; 7];
                for (k, (_, col)) in cols.iter().enumerate() {
                    v[*col] = Some(n[2 + k]);
                }
                LatRow {
                    bytes: n[0] as u64,
                    iterations: n[1] as u64,
                    min_us: v[0],
                    max_us: v[1],
                    typical_us: v[2],
                    avg_us: v[3],
                    stdev_us: v[4],
                    p99_us: v[5],
                    p999_us: v[6],
                }
            })
            .collect();
        (!rows.is_empty()).then_some(Table::Latency { rows })
    }
}

/// A row of numbers whose first two are whole (bytes, iterations); `None`
/// for any other line.
fn numbers(line: &str) -> Option<Vec<f64>> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    if toks.len() < 3 {
        return None;
    }
    toks[0].parse::<u64>().ok()?;
    toks[1].parse::<u64>().ok()?;
    toks.iter()
        .map(|t| t.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mib_header_converts_to_gbps() {
        let t = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 65536      5000             6000.00            6000.00\t\t   0.096000\n";
        let Some(Table::Bandwidth { unit, rows }) = parse(t) else {
            panic!()
        };
        assert_eq!(unit, BwUnit::MiBps);
        assert!((rows[0].average_gbps - 50.331648).abs() < 1e-6);
    }

    #[test]
    fn no_table() {
        assert_eq!(parse(" Did not detect devices \n"), None);
        assert_eq!(
            parse(" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]\n----\n"),
            None
        );
    }
}
