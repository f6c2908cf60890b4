//! `cluster install`: this halobox binary onto every node over ssh, so
//! `cluster up`'s same-version preflight holds. Per node: the file there is
//! checked first (same sha256: nothing is sent); else the bytes go over
//! ssh's stdin into a temporary file beside the destination, the node
//! checks its size and sha256 against this side's, and only then renames
//! it into place (atomic: a running halobox keeps its old file), then
//! checks the sha256 of the file at the destination itself. A folder as
//! the destination is refused (a rename would put the file inside it), and
//! the whole transfer is bounded in time: a node that stops reading is
//! given up on (and its side stopped) when the time is up.

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
/// the size and that the sha256 is `$3`, makes it executable, renames it
/// to `$1` (never into a folder there) and prints the sha256 of `$1`
/// itself; the temporary file is removed on any failure.
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
if [ -d "$dest" ]; then echo "$dest is a folder" >&2; exit 3; fi
mv -f "$tmp" "$dest"
trap - EXIT
final=$(sha256sum "$dest" | cut -d' ' -f1)
[ "$final" = "$sum" ] || { echo "sha256 of $dest is $final after the rename, not $sum" >&2; exit 1; }
echo "$final""#;

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

/// The node-side commands: the check, then the receive.
pub fn commands(dest: &str, bin: &Binary) -> (Vec<String>, Vec<String>) {
    let check = ["sh", "-c", CHECK, "halobox-install", dest]
        .map(String::from)
        .to_vec();
    let receive = vec![
        "sh".into(),
        "-c".into(),
        RECEIVE.into(),
        "halobox-install".into(),
        dest.into(),
        bin.bytes.len().to_string(),
        bin.sha256.clone(),
    ];
    (check, receive)
}

/// What `--dry-run` prints.
pub fn render_plan(cfg: &ClusterConfig, dest: &str, bin: &Binary) -> String {
    let mut out = format!(
        "halobox cluster install plan (dry run: nothing was changed)\n  binary   {} ({} bytes, sha256 {})\n",
        bin.source.display(),
        bin.bytes.len(),
        bin.sha256
    );
    for n in &cfg.nodes {
        out.push_str(&format!("  {}: {dest}\n", remote_node(cfg, n).label()));
    }
    out.push_str("  per node: skipped when the file there has the same sha256; else sent over ssh into a temporary file beside it, its size and sha256 checked there, then renamed into place\n");
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
    /// `installed`, `unchanged` or `failed`.
    pub outcome: String,
    /// The sha256 the node computed.
    pub sha256: Option<String>,
    /// What went wrong.
    pub detail: String,
}

fn one(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    dest: &str,
    bin: &Binary,
    timeout: Duration,
) -> Installed {
    let rn = remote_node(cfg, node);
    let (check, receive) = commands(dest, bin);
    let result = |outcome: &str, sha256: Option<String>, detail: String| Installed {
        node: node.label().into(),
        outcome: outcome.into(),
        sha256,
        detail,
    };
    let folder = |e: &crate::remote::RemoteError| {
        e.failure == crate::remote::Failure::Failed(Some(IS_A_FOLDER))
    };
    let refused = || {
        format!(
            "{dest} is a folder there: give the file's path (--halobox {}/halobox)",
            dest.trim_end_matches('/')
        )
    };
    let have = match rn.run_ok("reading the installed halobox", &check, CHECK_TIMEOUT) {
        Ok(d) => d.stdout.trim().to_string(),
        Err(e) if folder(&e) => return result("failed", None, refused()),
        Err(e) => return result("failed", None, e.to_string()),
    };
    if have == bin.sha256 {
        return result(
            "unchanged",
            Some(have),
            format!("{dest} is already this one"),
        );
    }
    match rn.run_with_input("installing halobox", &receive, &bin.bytes, timeout) {
        Ok(d) => {
            let got = d.stdout.trim().to_string();
            if got == bin.sha256 {
                result("installed", Some(got), format!("{dest} written"))
            } else {
                result(
                    "failed",
                    Some(got),
                    "the node reported another sha256".into(),
                )
            }
        }
        Err(e) if folder(&e) => result("failed", None, refused()),
        Err(e) => result("failed", None, e.to_string()),
    }
}

/// Installs `bin` at `dest` on every node at once, each transfer within
/// `timeout`.
pub fn run(cfg: &ClusterConfig, dest: &str, bin: &Binary, timeout: Duration) -> Vec<Installed> {
    each_node(&cfg.nodes, |n| one(cfg, n, dest, bin, timeout))
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

    #[test]
    fn receive_checks_size_and_sum_then_renames() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("bin/halobox").display().to_string();
        let b = bin();
        let (check, receive) = commands(&dest, &b);
        let run = |argv: &[String], input: &[u8]| {
            let mut p = crate::proc::Proc::spawn(argv).unwrap();
            let _ = p.send(input);
            p.wait(Duration::from_secs(10))
        };
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
        assert!(!Path::new(&dest).exists());
        let ok = run(&receive, b"abc");
        assert_eq!(ok.stdout.trim(), b.sha256);
        assert_eq!(std::fs::read(&dest).unwrap(), b"abc");
        assert_eq!(run(&check, b"").stdout.trim(), b.sha256);
        let left: Vec<_> = std::fs::read_dir(dir.path().join("bin"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
        // A folder as the destination: refused, nothing put inside it.
        let folder = dir.path().join("bin").display().to_string();
        let (check, receive) = commands(&folder, &b);
        let c = run(&check, b"");
        assert_eq!(c.status.unwrap().code(), Some(IS_A_FOLDER), "{}", c.output);
        let r = run(&receive, b"abc");
        assert_eq!(r.status.unwrap().code(), Some(IS_A_FOLDER), "{}", r.output);
        assert_eq!(
            std::fs::read_dir(dir.path().join("bin")).unwrap().count(),
            1
        );
    }
}
