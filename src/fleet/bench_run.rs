//! `cluster bench`'s effects: one pair's `bench run` at a time on the
//! pair's first node over ssh (the one remote runner), its saved folder
//! unpacked here.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use super::bench::{self, PairOptions, PairResult};
use crate::bench::results;
use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::run::remote_node;

/// Largest saved run accepted back from a node (unpacked).
const MAX_RUN_BYTES: u64 = 256 << 20;

/// `bench run` on `from` against `to`, its run saved in `dir` here.
pub fn bench_pair(
    cfg: &ClusterConfig,
    from: &NodeConfig,
    to: &NodeConfig,
    o: &PairOptions,
    dir: &Path,
) -> PairResult {
    let mut result = PairResult {
        from: from.label().to_string(),
        to: to.label().to_string(),
        saved: None,
        results: None,
        error: None,
        run: None,
    };
    let remote = remote_node(cfg, from);
    // Latency, bandwidth (1 and N), iperf3 and RDMA legs, plus setup.
    let timeout = Duration::from_secs(u64::from(o.duration) * 8 + 240);
    let cmd = bench::pair_command(cfg, from, to, o);
    let out = match remote.run(&cmd, timeout) {
        Err(e) => Err(e.message),
        Ok(done) if done.timed_out.is_some() || done.status.is_none_or(|s| !s.success()) => {
            Err(remote.error("`halobox bench run`", &done).message)
        }
        Ok(done) => bench::parse_pair(&done.stdout).map_err(|e| format!("{}: {e}", remote.label())),
    };
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            result.error = Some(e);
            return result;
        }
    };
    let Some(tar_gz) = out.tar_gz else {
        result.error = Some(format!(
            "{}: `halobox bench run` (exit {}) saved nothing: {}",
            remote.label(),
            out.exit.map_or("?".into(), |c| c.to_string()),
            crate::remote::tail(&out.stderr, 3)
        ));
        return result;
    };
    if let Err(e) = unpack(&tar_gz, dir) {
        result.error = Some(format!(
            "{}: its saved run could not be kept in {}: {e:#}",
            remote.label(),
            dir.display()
        ));
        return result;
    }
    match results::load(dir) {
        Ok(rec) => {
            let res = results::derive(&rec, dir);
            if let Ok(text) = serde_json::to_string_pretty(&res) {
                let _ = std::fs::write(dir.join(results::RESULTS_FILE), text + "\n");
            }
            result.saved = Some(dir.display().to_string());
            result.results = Some(res);
            result.run = Some(rec);
            if out.exit != Some(0) && !out.stderr.trim().is_empty() {
                result.error = Some(crate::remote::tail(&out.stderr, 2));
            }
        }
        Err(e) => result.error = Some(format!("{e:#}")),
    }
    result
}

/// Unpacks a saved run's gzip'd tar into `dir` (created): regular files
/// and folders under it only, at most [`MAX_RUN_BYTES`] in all.
fn unpack(tar_gz: &[u8], dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tar_gz));
    let mut total = 0u64;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let mut rel = PathBuf::new();
        for c in path.components() {
            match c {
                Component::Normal(p) => rel.push(p),
                Component::CurDir => {}
                _ => anyhow::bail!("refused {}: not a path inside the run", path.display()),
            }
        }
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            std::fs::create_dir_all(dir.join(&rel))?;
            continue;
        }
        if !kind.is_file() || rel.as_os_str().is_empty() {
            anyhow::bail!("refused {}: not a regular file", path.display());
        }
        total += entry.size();
        if total > MAX_RUN_BYTES {
            anyhow::bail!("more than {MAX_RUN_BYTES} bytes");
        }
        let mut data = Vec::new();
        entry.by_ref().take(MAX_RUN_BYTES).read_to_end(&mut data)?;
        let target = dir.join(&rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(target, data)?;
    }
    Ok(())
}

/// Every pair of `pairs` (indices into the nodes), one at a time, each
/// saved under `root`; `progress` hears of each before it starts.
pub fn bench(
    cfg: &ClusterConfig,
    pairs: &[(usize, usize)],
    o: &PairOptions,
    root: &Path,
    mut progress: impl FnMut(&NodeConfig, &NodeConfig),
) -> Vec<PairResult> {
    pairs
        .iter()
        .map(|&(i, j)| {
            let (from, to) = (&cfg.nodes[i], &cfg.nodes[j]);
            progress(from, to);
            let dir = root.join(bench::pair_dir(from.label(), to.label()));
            bench_pair(cfg, from, to, o, &dir)
        })
        .collect()
}
