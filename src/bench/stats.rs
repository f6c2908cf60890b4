//! Latency statistics from samples: min, median, p99, p99.9, max.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Summary of latency samples in microseconds (a column a tool did not
/// print is `None`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencySummary {
    /// Number of samples.
    pub samples: u64,
    /// Smallest sample.
    pub min_us: Option<f64>,
    /// 50th percentile.
    pub median_us: f64,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// 99.9th percentile, when measured.
    pub p999_us: Option<f64>,
    /// Largest sample.
    pub max_us: Option<f64>,
}

/// The nearest-rank percentile `p` (0..=100) of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of no samples");
    // The epsilon keeps 99.9 % of 1000 at rank 999 despite binary rounding.
    let rank = ((p / 100.0) * sorted.len() as f64 - 1e-9).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Summarises samples (any order); `None` when there are none.
pub fn summarise(samples_us: &[f64]) -> Option<LatencySummary> {
    if samples_us.is_empty() {
        return None;
    }
    let mut s: Vec<f64> = samples_us.to_vec();
    s.sort_by(f64::total_cmp);
    Some(LatencySummary {
        samples: s.len() as u64,
        min_us: Some(s[0]),
        median_us: percentile(&s, 50.0),
        p99_us: Some(percentile(&s, 99.0)),
        p999_us: Some(percentile(&s, 99.9)),
        max_us: Some(s[s.len() - 1]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let s: Vec<f64> = (1..=1000).map(f64::from).collect();
        let sum = summarise(&s).unwrap();
        assert_eq!(sum.min_us, Some(1.0));
        assert_eq!(sum.median_us, 500.0);
        assert_eq!(sum.p99_us, Some(990.0));
        assert_eq!(sum.p999_us, Some(999.0));
        assert_eq!(sum.max_us, Some(1000.0));
        assert_eq!(summarise(&[]), None);
        let one = summarise(&[7.0]).unwrap();
        assert_eq!(
            (one.min_us, one.median_us, one.max_us),
            (Some(7.0), 7.0, Some(7.0))
        );
    }
}
