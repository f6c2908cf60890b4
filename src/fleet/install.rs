//! `cluster install`: this halobox binary onto every node over ssh, so
//! `cluster up`'s same-version preflight holds, in three steps for the
//! whole cluster: stage, verify, then keep or go back.
//!
//! - **Stage**, per node: the file there is checked first (same sha256:
//!   nothing is sent); else the bytes go over ssh's stdin into a temporary
//!   file beside the destination, the node checks its size and sha256
//!   against this side's, and renames it to `DEST.halobox-new`; the
//!   destination is not touched.
//! - **Verify**, per staged node: the staged file runs there
//!   (`DEST.halobox-new --version`) and says this binary's version line.
//! - **Keep or go back**: only when every node staged and verified does
//!   each swap (the old file kept as `DEST.halobox-prev`, the new one
//!   renamed into place: a running halobox keeps its old file), and the
//!   sha256 at the destination is checked; else every staged file is
//!   removed and no node changed. A swap that fails on one node after
//!   others swapped puts those back. [`rollback`] puts every node back on
//!   its `DEST.halobox-prev` (`cluster install --rollback`).
//!
//! A folder as the destination is refused (a rename would put the file
//! inside it), and the transfer is bounded in time: a node that stops
//! reading is given up on (and its side stopped) when the time is up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::run::{each_node, remote_node};

/// How long the check on a node may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long sending the binary to a node may take by default (seconds).
pub const SEND_TIMEOUT_S: u64 = 900;

/// Exit code of the node-side commands when the destination is a folder.
const IS_A_FOLDER: i32 = 3;

/// Prints the sha256 of `$1` there, or nothing when it is missing; exits
/// [`IS_A_FOLDER`] when it is a folder.
const CHECK: &str = "if [ -d \"$1\" ]; then echo \"$1 is a folder\" >&2; exit 3; fi; if [ -f \"$1\" ]; then sha256sum \"$1\" | cut -d' ' -f1; fi";

/// Reads `$2` bytes from stdin into a temporary file beside `$1`, checks
/// the size and that the sha256 is `$3`, makes it executable and renames it
/// to `$1.halobox-new` (the destination untouched), then prints its sha256;
/// the temporary file is removed on any failure.
const RECEIVE: &str = r#"set -e
dest=$1; size=$2; sum=$3
if [ -d "$dest" ]; then echo "$dest is a folder" >&2; exit 3; fi
dir=$(dirname "$dest")
mkdir -p "$dir"
tmp=$(mktemp "$dir/.halobox-install.XXXXXX")
trap 'rm -f "$tmp"' EXIT
head -c "$size" >"$tmp"
got=$(wc -c <"$tmp")
[ "$got" -eq "$size" ] || { echo "received $got of $size bytes" >&2; exit 1; }
have=$(sha256sum "$tmp" | cut -d' ' -f1)
[ "$have" = "$sum" ] || { echo "sha256 there is $have, not $sum" >&2; exit 1; }
chmod 0755 "$tmp"
mv -f "$tmp" "$dest.halobox-new"
trap - EXIT
sha256sum "$dest.halobox-new" | cut -d' ' -f1"#;

/// Runs the staged `$1.halobox-new --version` there.
const VERIFY: &str = r#""$1.halobox-new" --version"#;

/// Keeps the old `$1` as `$1.halobox-prev` (when there is one), renames the
/// staged file into place and prints the sha256 of `$1` itself.
const SWAP: &str = r#"set -e
dest=$1
[ -f "$dest.halobox-new" ] || { echo "nothing is staged at $dest.halobox-new" >&2; exit 1; }
if [ -d "$dest" ]; then echo "$dest is a folder" >&2; exit 3; fi
if [ -f "$dest" ]; then cp -p "$dest" "$dest.halobox-prev"; else rm -f "$dest.halobox-prev"; fi
mv -f "$dest.halobox-new" "$dest"
sha256sum "$dest" | cut -d' ' -f1"#;

/// Removes what a stage left (`$1.halobox-new`).
const DISCARD: &str = r#"rm -f "$1.halobox-new""#;

/// Puts `$1.halobox-prev` back in place; exits 4 when there is none.
const BACK: &str = r#"set -e
dest=$1
[ -f "$dest.halobox-prev" ] || { echo "there is no $dest.halobox-prev to go back to" >&2; exit 4; }
mv -f "$dest.halobox-prev" "$dest"
sha256sum "$dest" | cut -d' ' -f1"#;

/// The binary to send.
#[derive(Debug, Clone)]
pub struct Binary {
    /// Where it is here.
    pub source: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Their sha256 (hex).
    pub sha256: String,
}

impl Binary {
    /// Reads `path`.
    pub fn read(path: &Path) -> std::io::Result<Binary> {
        let bytes = std::fs::read(path)?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        Ok(Binary {
            source: path.to_path_buf(),
            bytes,
            sha256,
        })
    }
}

/// A node-side command: `sh -c SCRIPT halobox-install DEST ARGS…`.
fn script(body: &str, dest: &str, args: &[String]) -> Vec<String> {
    ["sh", "-c", body, "halobox-install", dest]
        .map(String::from)
        .into_iter()
        .chain(args.iter().cloned())
        .collect()
}

/// The node-side commands: the check, then the receive (the stage).
pub fn commands(dest: &str, bin: &Binary) -> (Vec<String>, Vec<String>) {
    let receive = script(
        RECEIVE,
        dest,
        &[bin.bytes.len().to_string(), bin.sha256.clone()],
    );
    (script(CHECK, dest, &[]), receive)
}

/// What `--dry-run` prints.
pub fn render_plan(cfg: &ClusterConfig, dest: &str, bin: &Binary, rollback: bool) -> String {
    if rollback {
        let mut out =
            "halobox cluster install --rollback plan (dry run: nothing was changed)\n".to_string();
        for n in &cfg.nodes {
            out.push_str(&format!(
                "  {}: {dest}.halobox-prev renamed to {dest} (a node without one is named and left alone)\n",
                remote_node(cfg, n).label()
            ));
        }
        return out;
    }
    let mut out = format!(
        "halobox cluster install plan (dry run: nothing was changed)\n  binary   {} ({} bytes, sha256 {})\n",
        bin.source.display(),
        bin.bytes.len(),
        bin.sha256
    );
    for n in &cfg.nodes {
        out.push_str(&format!("  {}: {dest}\n", remote_node(cfg, n).label()));
    }
    out.push_str("  stage, per node: skipped when the file there has the same sha256; else sent over ssh into a temporary file beside it, its size and sha256 checked there, renamed to DEST.halobox-new\n");
    out.push_str("  verify, per staged node: DEST.halobox-new --version runs there and says this binary's version\n");
    out.push_str("  then, only when every node staged and verified: each keeps its old file as DEST.halobox-prev and swaps the new one in (else every staged file is removed and no node changes); `cluster install --rollback` goes back\n");
    if let Some(note) = config_note(cfg, dest) {
        out.push_str(&format!("  note: {note}\n"));
    }
    out
}

/// A note when cluster.toml's `halobox` is not the installed path.
pub fn config_note(cfg: &ClusterConfig, dest: &str) -> Option<String> {
    (cfg.halobox != dest).then(|| {
        format!(
            "cluster.toml's `halobox` is {:?}: the cluster commands run that on the nodes; set `halobox = \"{dest}\"` there to use what was installed",
            cfg.halobox
        )
    })
}

/// One node's result.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    /// Node name.
    pub node: String,
    /// `installed`, `unchanged`, `kept` (its old one: another node
    /// failed), `rolled back`, or `failed`.
    pub outcome: String,
    /// The sha256 the node computed.
    pub sha256: Option<String>,
    /// What went wrong, or what happened.
    pub detail: String,
}

impl Installed {
    fn new(node: &NodeConfig, outcome: &str, sha256: Option<String>, detail: String) -> Installed {
        Installed {
            node: node.label().into(),
            outcome: outcome.into(),
            sha256,
            detail,
        }
    }
}

/// Where a node stands after the stage.
enum Staged {
    /// The file there is this one already.
    Same(Installed),
    /// Staged at `DEST.halobox-new`.
    Ready,
    /// The stage failed: why.
    Failed(Installed),
}

fn refused(dest: &str) -> String {
    format!(
        "{dest} is a folder there: give the file's path (--halobox {}/halobox)",
        dest.trim_end_matches('/')
    )
}

fn why(dest: &str, e: &crate::remote::RemoteError) -> String {
    if e.failure == crate::remote::Failure::Failed(Some(IS_A_FOLDER)) {
        refused(dest)
    } else {
        e.to_string()
    }
}

/// Checks, then stages `bin` on `node`.
fn stage(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    dest: &str,
    bin: &Binary,
    timeout: Duration,
) -> Staged {
    let rn = remote_node(cfg, node);
    let (check, receive) = commands(dest, bin);
    let failed = |detail: String| Staged::Failed(Installed::new(node, "failed", None, detail));
    let have = match rn.run_ok("reading the installed halobox", &check, CHECK_TIMEOUT) {
        Ok(d) => d.stdout.trim().to_string(),
        Err(e) => return failed(why(dest, &e)),
    };
    if have == bin.sha256 {
        let detail = format!("{dest} is already this one");
        return Staged::Same(Installed::new(node, "unchanged", Some(have), detail));
    }
    match rn.run_with_input("installing halobox", &receive, &bin.bytes, timeout) {
        Ok(d) if d.stdout.trim() == bin.sha256 => Staged::Ready,
        Ok(d) => failed(format!(
            "the node reported sha256 {} for what it received",
            d.stdout.trim()
        )),
        Err(e) => failed(why(dest, &e)),
    }
}

/// Runs the staged file on `node`: `Err` says why it is not this binary.
fn verify(cfg: &ClusterConfig, node: &NodeConfig, dest: &str, version: &str) -> Result<(), String> {
    let rn = remote_node(cfg, node);
    let said = rn
        .run_ok(
            "running the staged halobox",
            &script(VERIFY, dest, &[]),
            CHECK_TIMEOUT,
        )
        .map_err(|e| format!("verify: {dest}.halobox-new does not run there: {e}"))?;
    let line = said.stdout.lines().next().unwrap_or("").trim().to_string();
    if line == version {
        return Ok(());
    }
    Err(format!(
        "verify: {dest}.halobox-new there says {:?}, not {version:?}",
        crate::remote::printable(&line)
    ))
}

/// Runs `body` on `node` (a swap, a discard, a going back); its stdout.
fn on(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    what: &str,
    body: &str,
    dest: &str,
) -> Result<String, String> {
    remote_node(cfg, node)
        .run_ok(what, &script(body, dest, &[]), CHECK_TIMEOUT)
        .map(|d| d.stdout.trim().to_string())
        .map_err(|e| why(dest, &e))
}

/// Stages `bin` at `dest` on every node at once (each transfer within
/// `timeout`), verifies that each staged file runs and says `version`
/// (this binary's `--version` line), then swaps every node, or none.
pub fn run(
    cfg: &ClusterConfig,
    dest: &str,
    bin: &Binary,
    version: &str,
    timeout: Duration,
) -> Vec<Installed> {
    let staged = each_node(&cfg.nodes, |n| {
        let st = stage(cfg, n, dest, bin, timeout);
        match st {
            Staged::Ready => match verify(cfg, n, dest, version) {
                Ok(()) => Staged::Ready,
                Err(e) => Staged::Failed(Installed::new(n, "failed", Some(bin.sha256.clone()), e)),
            },
            other => other,
        }
    });
    if staged.iter().any(|s| matches!(s, Staged::Failed(_))) {
        return discard_all(cfg, dest, staged);
    }
    let swapped = each_node(&cfg.nodes, |n| {
        on(cfg, n, "swapping in the new halobox", SWAP, dest)
    });
    let all_ok = staged.iter().zip(&swapped).all(|(st, sw)| match (st, sw) {
        (Staged::Ready, Ok(sum)) => *sum == bin.sha256,
        (Staged::Ready, Err(_)) => false,
        _ => true,
    });
    let results = cfg.nodes.iter().zip(staged).zip(swapped).map(|((n, st), sw)| match (st, sw) {
        (Staged::Same(i), _) => i,
        (Staged::Ready, Ok(sum)) if sum == bin.sha256 => {
            let detail = format!("{dest} written; verified: it says {version:?} there; the old one is {dest}.halobox-prev");
            Installed::new(n, "installed", Some(sum), detail)
        }
        (_, Ok(sum)) => Installed::new(n, "failed", Some(sum.clone()), format!("the sha256 of {dest} after the swap is {sum}")),
        (_, Err(e)) => Installed::new(n, "failed", None, e),
    });
    let results: Vec<Installed> = results.collect();
    if all_ok {
        return results;
    }
    back_after_a_failed_swap(cfg, dest, results)
}

/// Removes every staged file after a failed stage or verify: no node changed.
fn discard_all(cfg: &ClusterConfig, dest: &str, staged: Vec<Staged>) -> Vec<Installed> {
    let failed: Vec<String> = staged
        .iter()
        .filter_map(|s| match s {
            Staged::Failed(i) => Some(i.node.clone()),
            _ => None,
        })
        .collect();
    cfg.nodes
        .iter()
        .zip(staged)
        .map(|(n, s)| {
            let gone = on(cfg, n, "removing the staged halobox", DISCARD, dest);
            match s {
                Staged::Failed(i) => i,
                Staged::Same(i) => i,
                Staged::Ready => Installed::new(
                    n,
                    "kept",
                    None,
                    format!(
                        "its old {dest} is kept, the staged one {}: {} failed",
                        if gone.is_ok() {
                            "removed"
                        } else {
                            "could not be removed"
                        },
                        failed.join(", ")
                    ),
                ),
            }
        })
        .collect()
}

/// After a swap failed on some node: every node that swapped goes back to
/// its `DEST.halobox-prev`.
fn back_after_a_failed_swap(
    cfg: &ClusterConfig,
    dest: &str,
    results: Vec<Installed>,
) -> Vec<Installed> {
    cfg.nodes
        .iter()
        .zip(results)
        .map(|(n, r)| {
            if r.outcome != "installed" {
                return r;
            }
            match on(cfg, n, "going back to the old halobox", BACK, dest) {
                Ok(sum) => Installed::new(
                    n,
                    "rolled back",
                    Some(sum),
                    format!("another node's swap failed: its old {dest} is back"),
                ),
                Err(e) => Installed::new(
                    n,
                    "failed",
                    r.sha256,
                    format!("another node's swap failed, and going back failed too: {e}"),
                ),
            }
        })
        .collect()
}

/// `cluster install --rollback`: every node back on its `DEST.halobox-prev`.
pub fn rollback(cfg: &ClusterConfig, dest: &str) -> Vec<Installed> {
    each_node(&cfg.nodes, |n| {
        match on(cfg, n, "going back to the old halobox", BACK, dest) {
            Ok(sum) => Installed::new(
                n,
                "rolled back",
                Some(sum),
                format!("{dest}.halobox-prev is {dest} again"),
            ),
            Err(e) => Installed::new(n, "failed", None, e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin() -> Binary {
        Binary {
            source: "/x/halobox".into(),
            bytes: b"abc".to_vec(),
            sha256: hex::encode(Sha256::digest(b"abc")),
        }
    }

    fn run(argv: &[String], input: &[u8]) -> crate::proc::Finished {
        let mut p = crate::proc::Proc::spawn(argv).unwrap();
        let _ = p.send(input);
        p.wait(Duration::from_secs(10))
    }

    #[test]
    fn receive_stages_beside_the_destination_after_checking_size_and_sum() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("bin/halobox").display().to_string();
        let b = bin();
        let (check, receive) = commands(&dest, &b);
        assert_eq!(run(&check, b"").stdout.trim(), "");
        let bad = run(&receive, b"abd");
        assert!(!bad.status.unwrap().success());
        assert!(bad.output.contains("not "), "{}", bad.output);
        let short = run(&receive, b"ab");
        assert!(
            short.output.contains("received 2 of 3 bytes"),
            "{}",
            short.output
        );
        assert!(!Path::new(&format!("{dest}.halobox-new")).exists());
        let ok = run(&receive, b"abc");
        assert_eq!(ok.stdout.trim(), b.sha256);
        assert!(
            !Path::new(&dest).exists(),
            "staging leaves the destination alone"
        );
        assert_eq!(
            std::fs::read(format!("{dest}.halobox-new")).unwrap(),
            b"abc"
        );
        // A folder as the destination: refused, nothing put inside it.
        let folder = dir.path().join("bin").display().to_string();
        let (check, receive) = commands(&folder, &b);
        let c = run(&check, b"");
        assert_eq!(c.status.unwrap().code(), Some(IS_A_FOLDER), "{}", c.output);
        let r = run(&receive, b"abc");
        assert_eq!(r.status.unwrap().code(), Some(IS_A_FOLDER), "{}", r.output);
    }

    #[test]
    fn a_swap_keeps_the_old_file_and_going_back_restores_it() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("halobox").display().to_string();
        std::fs::write(&dest, b"old").unwrap();
        std::fs::write(format!("{dest}.halobox-new"), b"abc").unwrap();
        let swap = run(&script(SWAP, &dest, &[]), b"");
        assert_eq!(swap.stdout.trim(), bin().sha256, "{}", swap.output);
        assert_eq!(std::fs::read(&dest).unwrap(), b"abc");
        assert_eq!(
            std::fs::read(format!("{dest}.halobox-prev")).unwrap(),
            b"old"
        );
        assert!(
            !run(&script(SWAP, &dest, &[]), b"")
                .status
                .unwrap()
                .success(),
            "nothing staged"
        );
        let back = run(&script(BACK, &dest, &[]), b"");
        assert!(back.status.unwrap().success(), "{}", back.output);
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        let none = run(&script(BACK, &dest, &[]), b"");
        assert_eq!(none.status.unwrap().code(), Some(4), "{}", none.output);
        assert!(
            none.output.contains("halobox-prev to go back to"),
            "{}",
            none.output
        );
        std::fs::write(format!("{dest}.halobox-new"), b"x").unwrap();
        assert!(
            run(&script(DISCARD, &dest, &[]), b"")
                .status
                .unwrap()
                .success()
        );
        assert!(!Path::new(&format!("{dest}.halobox-new")).exists());
    }
}
