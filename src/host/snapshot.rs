//! `halobox snapshot`: what `detect`/`doctor` read on this host, laid out as
//! a sysroot (tests/fixtures/hosts/README.md) and packed into a `.tar.gz`,
//! so `doctor --sysroot` on the unpacked tree judges as `doctor` did here.
//!
//! [`collect`] turns a recording ([`Accessed`]) into entries, [`super::redact`]
//! may rewrite them, and [`write_archive`] writes them atomically.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::reader::Accessed;
use crate::confine;

/// What one snapshot path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// A regular file (device nodes, sockets and files only looked up are
    /// stored empty).
    File(Vec<u8>),
    /// A directory.
    Dir,
    /// A symlink and its target, as on the host (`device/driver`).
    Link(PathBuf),
}

/// One path of the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Permission bits.
    pub mode: u32,
    /// Modification time, seconds since the epoch.
    pub mtime: u64,
    /// Content.
    pub body: Body,
}

/// The snapshot's paths (host paths, `/sys/...`) in order, parents first.
pub type Tree = BTreeMap<String, Entry>;

/// Reads every recorded path from the live host. Processes are kept only
/// when halobox read more than their name (the ones it looks for), and the
/// files written during the recording (`captured/`, the kept environment)
/// stand for themselves.
pub fn collect(acc: &Accessed) -> Tree {
    let mut tree = Tree::new();
    let wanted = |p: &str| match pid_of(p) {
        Some(pid) => acc.read.contains(&format!("/proc/{pid}/cmdline")),
        None => true,
    };
    for path in acc.read.iter().filter(|p| wanted(p)) {
        if !acc.written.contains_key(path)
            && let Some(e) = live_entry(path, true)
        {
            tree.insert(path.clone(), e);
        }
    }
    for path in acc.stat.iter().filter(|p| wanted(p)) {
        if !tree.contains_key(path)
            && !acc.written.contains_key(path)
            && let Some(e) = live_entry(path, false)
        {
            tree.insert(path.clone(), e);
        }
    }
    for path in acc.links.iter().filter(|p| wanted(p)) {
        if let Ok(target) = fs::read_link(path) {
            let mtime = fs::symlink_metadata(path).map_or(0, |m| m.mtime().max(0) as u64);
            tree.insert(
                path.clone(),
                Entry {
                    mode: 0o777,
                    mtime,
                    body: Body::Link(target),
                },
            );
        }
    }
    for path in &acc.executables {
        tree.insert(
            path.clone(),
            Entry {
                mode: 0o755,
                mtime: now(),
                body: Body::File(Vec::new()),
            },
        );
    }
    for (path, bytes) in &acc.written {
        tree.insert(
            path.clone(),
            Entry {
                mode: 0o644,
                mtime: now(),
                body: Body::File(bytes.clone()),
            },
        );
    }
    add_parents(&mut tree);
    tree
}

/// `/proc/123/limits` → `123`.
fn pid_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/proc/")?;
    let pid = rest.split('/').next()?;
    pid.bytes().all(|b| b.is_ascii_digit()).then_some(pid)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The live path as an entry (symlinks followed); its content only when
/// `content` (a file only looked up is stored empty, with its mode).
fn live_entry(path: &str, content: bool) -> Option<Entry> {
    let meta = fs::metadata(path).ok()?;
    let mtime = meta.mtime().max(0) as u64;
    if meta.is_dir() {
        return Some(Entry {
            mode: 0o755,
            mtime,
            body: Body::Dir,
        });
    }
    let bytes = if content && meta.is_file() {
        confine::read_regular(Path::new(path), false, confine::MAX_HOST_FILE_BYTES).ok()?
    } else {
        Vec::new()
    };
    Some(Entry {
        // Readable by whoever unpacks it; executables stay executable.
        mode: (meta.permissions().mode() & 0o755) | 0o600,
        mtime,
        body: Body::File(bytes),
    })
}

/// Every ancestor of an entry is a directory (a symlink there, e.g.
/// `/sys/class/net/X`, becomes a plain directory, as in the fixtures).
fn add_parents(tree: &mut Tree) {
    let paths: Vec<String> = tree.keys().cloned().collect();
    for path in paths {
        let mut p = Path::new(&path).parent();
        while let Some(dir) = p.filter(|d| *d != Path::new("/")) {
            let key = dir.to_string_lossy().into_owned();
            match tree.get(&key) {
                Some(Entry {
                    body: Body::Dir, ..
                }) => {}
                _ => {
                    tree.insert(
                        key,
                        Entry {
                            mode: 0o755,
                            mtime: now(),
                            body: Body::Dir,
                        },
                    );
                }
            }
            p = dir.parent();
        }
    }
}

/// The name of the top folder inside the archive: the file name without
/// `.tar.gz`/`.tgz` (`node1.tar.gz` → `node1`).
pub fn top_folder(out: &Path) -> String {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .strip_suffix(".tar.gz")
        .or_else(|| name.strip_suffix(".tgz"))
        .unwrap_or(&name);
    if stem.is_empty() || stem.starts_with('.') {
        "snapshot".into()
    } else {
        stem.to_string()
    }
}

/// Why the archive was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The archive asked for.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Stopped by a signal; nothing was left behind.
    #[error("interrupted: {0} was not written")]
    Interrupted(PathBuf),
}

/// The temporary file beside `out`, removed unless kept.
struct Partial {
    path: PathBuf,
    keep: bool,
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Writes `tree` under `top/` into `out`: a temporary file beside it,
/// renamed over it only when complete; removed on any error, or when
/// `stop` is raised (Ctrl-C) between entries.
pub fn write_archive(
    tree: &Tree,
    top: &str,
    out: &Path,
    stop: &AtomicBool,
) -> Result<(), WriteError> {
    let io_err = |source| WriteError::Io {
        path: out.to_path_buf(),
        source,
    };
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "snapshot.tar.gz".into());
    let mut partial = Partial {
        path: dir.join(format!(".{name}.partial-{}", std::process::id())),
        keep: false,
    };
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&partial.path)
        .map_err(io_err)?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Complete);
    for (path, entry) in tree {
        if stop.load(Ordering::SeqCst) {
            return Err(WriteError::Interrupted(out.to_path_buf()));
        }
        append(&mut tar, &format!("{top}{path}"), entry).map_err(io_err)?;
    }
    let gz = tar.into_inner().map_err(io_err)?;
    let mut file = gz.finish().map_err(io_err)?;
    file.flush().map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    if stop.load(Ordering::SeqCst) {
        return Err(WriteError::Interrupted(out.to_path_buf()));
    }
    fs::rename(&partial.path, out).map_err(io_err)?;
    partial.keep = true;
    Ok(())
}

fn append<W: Write>(tar: &mut tar::Builder<W>, path: &str, entry: &Entry) -> io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_mode(entry.mode);
    h.set_mtime(entry.mtime);
    h.set_uid(0);
    h.set_gid(0);
    match &entry.body {
        Body::Dir => {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            tar.append_data(&mut h, format!("{path}/"), io::empty())
        }
        Body::File(bytes) => {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(bytes.len() as u64);
            tar.append_data(&mut h, path, bytes.as_slice())
        }
        Body::Link(target) => {
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            tar.append_link(&mut h, path, target)
        }
    }
}

/// Refuses an `out` that is not a `.tar.gz`, that exists (unless `force`)
/// or whose folder does not.
pub fn check_out(out: &Path, force: bool) -> anyhow::Result<()> {
    let name = out.to_string_lossy();
    if !(name.ends_with(".tar.gz") || name.ends_with(".tgz")) {
        return Err(crate::error::UsageError(format!(
            "{name}: the snapshot is a gzip-compressed tar archive\n  hint: name it with .tar.gz, e.g. `halobox snapshot node1.tar.gz`"
        ))
        .into());
    }
    if out.is_dir() || (out.exists() && !force) {
        return Err(crate::error::UsageError(format!(
            "{name} already exists\n  hint: choose another name, or `halobox snapshot --force {name}` to replace it"
        ))
        .into());
    }
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir.filter(|d| !d.is_dir()) {
        return Err(crate::error::UsageError(format!(
            "{}: no such directory for {name}\n  hint: mkdir -p {}",
            dir.display(),
            dir.display()
        ))
        .into());
    }
    Ok(())
}

/// The files and links in `tree` (folders aside).
pub fn files(tree: &Tree) -> usize {
    tree.values()
        .filter(|e| !matches!(e.body, Body::Dir))
        .count()
}

/// One line per file (`top/path  size`), directories left out.
pub fn listing(tree: &Tree, top: &str, out: &Path) -> String {
    let mut s = String::new();
    for (path, e) in tree {
        match &e.body {
            Body::Dir => {}
            Body::File(b) => s.push_str(&format!("{top}{path}  {} bytes\n", b.len())),
            Body::Link(t) => s.push_str(&format!("{top}{path} -> {}\n", t.display())),
        }
    }
    s.push_str(&format!(
        "would write {} files to {}\n",
        files(tree),
        out.display()
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_and_names() {
        assert_eq!(pid_of("/proc/123/limits"), Some("123"));
        assert_eq!(pid_of("/proc/self/limits"), None);
        assert_eq!(pid_of("/sys/class/net"), None);
        assert_eq!(top_folder(Path::new("/tmp/node1.tar.gz")), "node1");
        assert_eq!(top_folder(Path::new("x.tgz")), "x");
        assert_eq!(top_folder(Path::new(".tar.gz")), "snapshot");
    }

    #[test]
    fn parents_become_directories() {
        let mut tree = Tree::new();
        tree.insert(
            "/sys/class/net/eth0/mtu".into(),
            Entry {
                mode: 0o644,
                mtime: 0,
                body: Body::File(b"1500\n".to_vec()),
            },
        );
        add_parents(&mut tree);
        let dirs: Vec<&str> = tree
            .iter()
            .filter(|(_, e)| e.body == Body::Dir)
            .map(|(p, _)| p.as_str())
            .collect();
        assert_eq!(
            dirs,
            [
                "/sys",
                "/sys/class",
                "/sys/class/net",
                "/sys/class/net/eth0"
            ]
        );
    }
}
