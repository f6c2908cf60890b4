//! The link's costs for `plan`'s speed estimate, from the cluster's own
//! saved runs instead of the per-transport defaults: the all-reduce latency
//! and bus bandwidth of the newest `bench collective` run, the one-way
//! latency (a pipeline hop) and bandwidth of the newest `bench run`, each
//! for the cluster's transport. [`measured`] is pure (saved results in, the
//! costs and their sources out); [`newest`] finds and loads the runs in
//! halobox's bench folder (each through its one loader).

use std::path::{Path, PathBuf};

use super::collective::report::Results as Collective;
use super::results::Results as Run;
use crate::model::speed::{Link, MeasuredLink};

/// A saved run and the folder it came from.
pub struct Saved<T> {
    /// The results, derived from the saved record.
    pub results: T,
    /// Its folder (named in the plan).
    pub dir: PathBuf,
}

fn name(dir: &Path) -> String {
    dir.file_name()
        .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into())
}

/// Whether `link` is RDMA (the bench run's `rdma` rows), else TCP sockets.
fn rdma(link: Link) -> bool {
    matches!(link, Link::Roce | Link::Usb4Rdma)
}

/// The costs of `link` with what the saved runs measured: the smallest
/// all-reduce's median time as the all-reduce latency and the largest one's
/// bus bandwidth (a collective of 2 nodes or more whose rows are ok); the
/// one-way latency of the bench run's single-stream latency row for the
/// link's kind as the hop, and its multi-stream bandwidth when no
/// collective said one. `None` when neither run gives a figure.
pub fn measured(
    link: Link,
    collective: Option<&Saved<Collective>>,
    run: Option<&Saved<Run>>,
) -> Option<MeasuredLink> {
    let mut cost = link.cost();
    let mut said = Vec::new();
    if let Some(c) = collective.filter(|c| c.results.world >= 2) {
        let mut rows: Vec<_> = c
            .results
            .rows
            .iter()
            .filter(|r| r.op == "all_reduce" && r.status == "ok" && r.correct)
            .collect();
        rows.sort_by_key(|r| r.bytes);
        let at = name(&c.dir);
        if let Some((r, us)) = rows
            .first()
            .and_then(|r| Some((r, r.latency.as_ref()?.median_us)))
        {
            cost.allreduce_s = us * 1e-6;
            said.push(format!(
                "all-reduce {us:.0} µs ({} B, {} over {} nodes, bench collective {at})",
                r.bytes, c.results.backend, c.results.world
            ));
        }
        if let Some((r, gbs)) = rows
            .last()
            .and_then(|r| Some((r, r.busbw_gbs.filter(|b| *b > 0.0)?)))
        {
            cost.bytes_per_s = gbs * 1e9;
            said.push(format!(
                "bus bandwidth {gbs:.2} GB/s ({} B all-reduce, bench collective {at})",
                r.bytes
            ));
        }
    }
    if let Some(b) = run {
        let kind = if rdma(link) { "rdma" } else { "tcp" };
        let at = name(&b.dir);
        let ok = |r: &&super::results::Row| {
            r.status == "ok" && r.test.starts_with(kind) && r.message_bytes.is_none()
        };
        if let Some((r, us)) = b
            .results
            .rows
            .iter()
            .filter(ok)
            .find_map(|r| Some((r, r.latency.as_ref()?.median_us)))
        {
            cost.hop_s = us * 1e-6;
            said.push(format!("hop {us:.1} µs ({}, bench run {at})", r.test));
        }
        let bw = b
            .results
            .rows
            .iter()
            .filter(ok)
            .filter_map(|r| Some((r, r.bandwidth_gbps.filter(|g| *g > 0.0)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((r, gbps)) = bw
            && !said.iter().any(|s| s.starts_with("bus bandwidth"))
        {
            cost.bytes_per_s = gbps * 1e9 / 8.0;
            said.push(format!(
                "bandwidth {gbps:.1} Gb/s ({}, {} stream(s), bench run {at})",
                r.test, r.streams
            ));
        }
    }
    if said.is_empty() {
        return None;
    }
    let n = said.len();
    if n < 4 {
        said.push(format!("the rest: {link}'s defaults"));
    }
    Some(MeasuredLink {
        cost,
        source: said.join("; "),
    })
}

/// The newest saved `bench collective` and `bench run` in `root` (halobox's
/// bench folder: `$XDG_STATE_HOME/halobox/bench`), whose runs were made
/// over `transport` (a collective records the cluster's transport; a bench
/// run, the link it measured, so it is taken as is). Folders are named by
/// their UTC stamp: the newest sorts last. A folder that does not load is
/// passed over.
pub fn newest(root: &Path, transport: &str) -> (Option<Saved<Collective>>, Option<Saved<Run>>) {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    let collective = dirs.iter().rev().find_map(|d| {
        if !super::collective::run::is_saved(d) {
            return None;
        }
        let rec = super::collective::run::load(d).ok()?;
        let results = super::collective::report::derive(&rec);
        (results.status == "ok" && results.cluster_transport == transport).then(|| Saved {
            results,
            dir: d.clone(),
        })
    });
    let run = dirs.iter().rev().find_map(|d| {
        if !d.join(super::results::RUN_FILE).is_file() {
            return None;
        }
        let rec = super::results::load(d).ok()?;
        Some(Saved {
            results: super::results::derive(&rec, d),
            dir: d.clone(),
        })
    });
    (collective, run)
}

/// halobox's bench folder (`None`: neither XDG_STATE_HOME nor HOME is set).
pub fn root() -> Option<PathBuf> {
    super::run::default_save_dir("x")
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/bench-runs")
            .join(name)
    }

    fn collective() -> Saved<Collective> {
        let dir = fixtures("collective");
        let rec = super::super::collective::run::load(&dir).unwrap();
        Saved {
            results: super::super::collective::report::derive(&rec),
            dir,
        }
    }

    fn run() -> Saved<Run> {
        let dir = fixtures("rdma-after");
        let rec = super::super::results::load(&dir).unwrap();
        Saved {
            results: super::super::results::derive(&rec, &dir),
            dir,
        }
    }

    #[test]
    fn the_saved_runs_replace_the_defaults_and_say_so() {
        let m = measured(Link::Roce, Some(&collective()), Some(&run())).unwrap();
        // The fixture's smallest all-reduce (4096 B) took 41.7 µs; its
        // 16 MiB one, the bus bandwidth; ib_write_lat's median, 1.11 µs.
        assert!((m.cost.allreduce_s - 41.7e-6).abs() < 1e-9, "{m:?}");
        assert!((m.cost.hop_s - 1.11e-6).abs() < 1e-12, "{m:?}");
        assert_ne!(m.cost.bytes_per_s, Link::Roce.cost().bytes_per_s);
        assert!(
            m.source.starts_with("all-reduce 42 µs (4096 B, gloo over 2 nodes, bench collective collective); bus bandwidth"),
            "{}",
            m.source
        );
        assert!(
            m.source
                .contains("hop 1.1 µs (rdma ib_write_lat, bench run rdma-after)"),
            "{}",
            m.source
        );
        // Over TCP the bench run's tcp rows count: 45 µs, 81.9 Gb/s.
        let t = measured(Link::Tcp, None, Some(&run())).unwrap();
        assert!((t.cost.hop_s - 45.045e-6).abs() < 1e-9, "{t:?}");
        assert!((t.cost.bytes_per_s - 81.92e9 / 8.0).abs() < 1.0, "{t:?}");
        assert_eq!(t.cost.allreduce_s, Link::Tcp.cost().allreduce_s);
        assert!(
            t.source.ends_with("the rest: tcp's defaults"),
            "{}",
            t.source
        );
        assert!(measured(Link::Roce, None, None).is_none());
    }

    #[test]
    fn the_newest_run_of_the_transport_is_taken() {
        let root = tempfile::tempdir().unwrap();
        let copy = |from: &str, to: &str| {
            let d = root.path().join(to);
            std::fs::create_dir_all(&d).unwrap();
            for e in std::fs::read_dir(fixtures(from)).unwrap().flatten() {
                std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
            }
        };
        copy("rdma-before", "20261201T000000Z");
        copy("rdma-after", "20261202T000000Z");
        copy("collective", "20261203T000000Z-collective");
        std::fs::create_dir_all(root.path().join("20261204T000000Z-broken")).unwrap();
        std::fs::write(
            root.path()
                .join("20261204T000000Z-broken/collective-run.json"),
            "{",
        )
        .unwrap();
        let (c, r) = newest(root.path(), "auto");
        assert_eq!(name(&c.unwrap().dir), "20261203T000000Z-collective");
        assert_eq!(name(&r.unwrap().dir), "20261202T000000Z");
        let (c, _) = newest(root.path(), "roce");
        assert!(
            c.is_none(),
            "a collective over another transport is not taken"
        );
    }
}
