//! `cluster bench`'s effects: one pair's `bench run` at a time on the
//! pair's first node over ssh (the one remote runner), its saved folder
//! unpacked here.

use std::io::{Read, Write};
use std::path::{Component, Path};
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

/// Most entries accepted in a saved run (a run writes a few dozen).
const MAX_RUN_ENTRIES: usize = 1024;

/// Unpacks a saved run's gzip'd tar into `dir` (created): the run's own
/// folder (`.`) and, directly in it, regular files with the names a run
/// writes ([`results::is_run_file`]), each once; at most
/// [`MAX_RUN_ENTRIES`] entries and [`MAX_RUN_BYTES`] in all.
fn unpack(tar_gz: &[u8], dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tar_gz));
    let mut total = 0u64;
    for (n, entry) in archive.entries()?.enumerate() {
        if n >= MAX_RUN_ENTRIES {
            anyhow::bail!("more than {MAX_RUN_ENTRIES} entries");
        }
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let shown = crate::remote::printable(&path.display().to_string());
        let mut names = Vec::new();
        for c in path.components() {
            match c {
                Component::Normal(p) => names.push(p.to_string_lossy().into_owned()),
                Component::CurDir => {}
                _ => anyhow::bail!("refused {shown}: not a path inside the run"),
            }
        }
        let kind = entry.header().entry_type();
        let name = match names.as_slice() {
            [] if kind.is_dir() => continue,
            [name] if kind.is_file() && results::is_run_file(name) => name.clone(),
            [_] if kind.is_file() => anyhow::bail!("refused {shown}: not a file a run writes"),
            _ if kind.is_file() || kind.is_dir() => {
                anyhow::bail!("refused {shown}: a run's files sit in its folder, not below")
            }
            _ => anyhow::bail!("refused {shown}: not a regular file"),
        };
        total += entry.size();
        if total > MAX_RUN_BYTES {
            anyhow::bail!("more than {MAX_RUN_BYTES} bytes");
        }
        let mut data = Vec::new();
        entry.by_ref().take(MAX_RUN_BYTES).read_to_end(&mut data)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(&name))
            .map_err(|e| anyhow::anyhow!("refused {shown}: {e}"))?;
        file.write_all(&data)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A gzip'd tar of `entries`: (path, type, content), paths written raw
    /// into the header as a hostile node would.
    fn tar_gz(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        for (path, kind, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn a_saved_run_is_unpacked_and_a_hostile_one_refused() {
        use tar::EntryType::{Directory, Regular, Symlink};
        let t = tempfile::tempdir().unwrap();
        let good = t.path().join("good");
        let run = tar_gz(&[
            ("./", Directory, b""),
            ("./run.json", Regular, b"{}"),
            ("./p0-tcp-latency.txt", Regular, b"x"),
            ("./p0-iperf3-1.json", Regular, b"{}"),
            ("./p1-ib_write_bw-1.server.txt", Regular, b"s"),
            ("./p0-tcp.server.txt", Regular, b"s"),
        ]);
        unpack(&run, &good).unwrap();
        assert_eq!(
            files(&good),
            [
                "p0-iperf3-1.json",
                "p0-tcp-latency.txt",
                "p0-tcp.server.txt",
                "p1-ib_write_bw-1.server.txt",
                "run.json"
            ]
        );
        let many: Vec<(String, tar::EntryType, &[u8])> = (0..MAX_RUN_ENTRIES + 1)
            .map(|i| (format!("./p{i}-tcp-latency.txt"), Regular, &b""[..]))
            .collect();
        let many: Vec<(&str, tar::EntryType, &[u8])> =
            many.iter().map(|(p, k, d)| (p.as_str(), *k, *d)).collect();
        let deep = "./a/".repeat(20) + "run.json";
        let cases: [(&str, Vec<u8>, &str); 8] = [
            ("many", tar_gz(&many), "more than 1024 entries"),
            ("deep", tar_gz(&[(&deep, Regular, b"{}")]), "not below"),
            ("dirs", tar_gz(&[("./a/", Directory, b"")]), "not below"),
            (
                "ssh",
                tar_gz(&[("./authorized_keys", Regular, b"ssh-ed25519 AAAA")]),
                "refused ./authorized_keys: not a file a run writes",
            ),
            (
                "dot",
                tar_gz(&[("./.bashrc", Regular, b"curl x|sh")]),
                "not a file a run writes",
            ),
            (
                "up",
                tar_gz(&[("../run.json", Regular, b"{}")]),
                "not a path inside the run",
            ),
            (
                "link",
                tar_gz(&[("./run.json", Symlink, b"")]),
                "not a regular file",
            ),
            (
                "twice",
                tar_gz(&[
                    ("./run.json", Regular, b"{}"),
                    ("./run.json", Regular, b"[]"),
                ]),
                "refused ./run.json: File exists",
            ),
        ];
        for (name, archive, want) in cases {
            let dir = t.path().join(name);
            let err = format!("{:#}", unpack(&archive, &dir).unwrap_err());
            assert!(err.contains(want), "{name}: {err}");
            assert!(
                files(&dir).iter().all(|f| results::is_run_file(f)),
                "{name}: {:?}",
                files(&dir)
            );
        }
        assert!(results::is_run_file("p12-rdma-sweep.txt"));
        for bad in [
            "p-x.txt",
            "px-y.txt",
            "p1-.txt",
            "p1-A.txt",
            "p1-x.sh",
            "run.json.bak",
        ] {
            assert!(!results::is_run_file(bad), "{bad}");
        }
    }
}
