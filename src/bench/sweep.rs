//! Size sweeps (`ib_write_bw -a`): bandwidth must not fall as messages
//! grow. A size whose bandwidth is under half of the best at any smaller
//! size has collapsed, the signature of an MTU mismatch (messages above the
//! path MTU are segmented and lost) or of flow control (pause/PFC storms,
//! drops once the NIC queues fill).

/// A size is collapsed when its bandwidth is below this share of the best
/// bandwidth measured at a smaller size.
pub const COLLAPSE_RATIO: f64 = 0.5;

/// One collapsed size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Collapse {
    /// The message size.
    pub bytes: u64,
    /// Its bandwidth, Gb/s.
    pub gbps: f64,
    /// The smaller size with the best bandwidth.
    pub best_bytes: u64,
    /// That bandwidth, Gb/s.
    pub best_gbps: f64,
}

/// The collapsed sizes of a sweep given as (bytes, Gb/s) in printed order.
pub fn collapses(rows: &[(u64, f64)]) -> Vec<Collapse> {
    let mut sorted: Vec<(u64, f64)> = rows.to_vec();
    sorted.sort_by_key(|r| r.0);
    let mut best: Option<(u64, f64)> = None;
    let mut out = Vec::new();
    for &(bytes, gbps) in &sorted {
        if let Some((best_bytes, best_gbps)) = best
            && gbps < COLLAPSE_RATIO * best_gbps
        {
            out.push(Collapse {
                bytes,
                gbps,
                best_bytes,
                best_gbps,
            });
        }
        if best.is_none_or(|(_, b)| gbps > b) {
            best = Some((bytes, gbps));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rising_sweeps_have_no_collapse() {
        let rows = [
            (2, 0.04),
            (4, 0.08),
            (8, 0.17),
            (65536, 52.0),
            (1 << 20, 53.0),
        ];
        assert!(collapses(&rows).is_empty());
        // Noise at the plateau is not a collapse.
        assert!(collapses(&[(4096, 50.0), (8192, 46.0), (16384, 51.0)]).is_empty());
    }

    #[test]
    fn a_dip_and_a_cliff() {
        let rows = [
            (2048, 30.0),
            (4096, 50.0),
            (8192, 12.0),
            (16384, 49.0),
            (32768, 6.0),
            (65536, 5.5),
        ];
        let c = collapses(&rows);
        let sizes: Vec<u64> = c.iter().map(|c| c.bytes).collect();
        assert_eq!(sizes, [8192, 32768, 65536]);
        assert_eq!((c[0].best_bytes, c[0].best_gbps), (4096, 50.0));
    }
}
