//! The Hugging Face hub cache as `huggingface_hub` lays it out, read and
//! written in place: `HUB/models--ORG--NAME/{blobs/BLOB, snapshots/REV/PATH
//! -> ../../blobs/BLOB, refs/REF}` (REV a 40-hex commit; BLOB the sha256 of
//! the content for LFS files, the git blob id for the others).

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, Flock, FlockArg, OFlag};
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};

/// `HF_HUB_CACHE` when set, else `HF_HOME/hub`, else
/// `HOME/.cache/huggingface/hub` (as `huggingface_hub` decides).
pub fn hub_dir(
    hf_hub_cache: Option<&str>,
    hf_home: Option<&str>,
    home: Option<&str>,
) -> Option<PathBuf> {
    if let Some(h) = hf_hub_cache.filter(|v| v.starts_with('/')) {
        return Some(PathBuf::from(h.trim_end_matches('/')));
    }
    crate::container::binds::hf_home(hf_home, home).map(|h| Path::new(&h).join("hub"))
}

/// The hub cache of this process's environment.
pub fn hub_dir_from_env() -> Option<PathBuf> {
    let var = |k: &str| std::env::var(k).ok();
    let home = var("HOME").or_else(|| dirs::home_dir().map(|h| h.display().to_string()));
    hub_dir(
        var("HF_HUB_CACHE").as_deref(),
        var("HF_HOME").as_deref(),
        home.as_deref(),
    )
}

/// A model id and the revision asked for: `ORG/NAME[@REV]` (REV a branch,
/// a tag or a commit; `main` when left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRef {
    /// `ORG/NAME`.
    pub id: String,
    /// Branch, tag or commit.
    pub revision: String,
}

impl ModelRef {
    /// Parses `ORG/NAME[@REV]`; an error says what a model id looks like.
    pub fn parse(s: &str) -> Result<ModelRef, String> {
        let (id, rev) = match s.split_once('@') {
            Some((i, r)) => (i, r),
            None => (s, "main"),
        };
        if !is_model_id(id) || !is_revision(rev) {
            return Err(format!(
                "{s:?} is not a model of the form ORG/NAME[@REVISION] (letters, digits, '.', '-', '_')\n  hint: e.g. `Qwen/Qwen3-0.6B` or `Qwen/Qwen3-0.6B@main`; `halobox model ls` lists what the nodes hold"
            ));
        }
        Ok(ModelRef {
            id: id.to_string(),
            revision: rev.to_string(),
        })
    }

    /// The repo folder's name: `models--ORG--NAME`.
    pub fn folder(&self) -> String {
        folder_of(&self.id)
    }
}

/// `models--ORG--NAME` for `ORG/NAME`.
pub fn folder_of(id: &str) -> String {
    format!("models--{}", id.replace('/', "--"))
}

/// `ORG/NAME` for a `models--ORG--NAME` folder.
pub fn id_of(folder: &str) -> Option<String> {
    let rest = folder.strip_prefix("models--")?;
    let (org, name) = rest.split_once("--")?;
    Some(format!("{org}/{name}"))
}

/// One part of a model id or revision: letters, digits, `.`, `-`, `_`,
/// not starting with `.` or `-`.
fn part_ok(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 96
        && !p.starts_with(['.', '-'])
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// `ORG/NAME` as [`ModelRef::parse`] takes it.
pub fn is_model_id(id: &str) -> bool {
    id.split_once('/')
        .is_some_and(|(org, name)| part_ok(org) && part_ok(name) && !name.contains('/'))
}

/// A branch, tag or commit as [`ModelRef::parse`] takes it: parts joined
/// by `/`, none of them `..` or hidden (so `refs/REV` stays under `refs/`).
pub fn is_revision(rev: &str) -> bool {
    rev.len() <= 256 && rev.split('/').all(part_ok)
}

/// A blob name as it may appear in `blobs/`: one file name (the hub's are
/// hex digests: a sha256 or a git blob id) of letters, digits, `.`, `-`
/// and `_`, not hidden and not one of halobox's own working names. Every
/// name a node reports is checked against this before it names a file.
pub fn is_blob(blob: &str) -> bool {
    part_ok(blob) && !blob.contains(".halobox-")
}

/// A snapshot path: relative, normal parts only, no control characters.
pub fn is_snapshot_path(path: &str) -> bool {
    path.len() <= 4096 && !path.chars().any(char::is_control) && safe_rel(path).is_some()
}

/// `value` for an error message: quoted with control characters escaped,
/// long values cut.
pub fn shown(value: &str) -> String {
    let cut: String = value.chars().take(96).collect();
    let more = if cut.len() < value.len() { "…" } else { "" };
    format!("{cut:?}{more}")
}

/// A 40-hex commit id.
pub fn is_commit(rev: &str) -> bool {
    rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit())
}

/// The first thing wrong with a snapshot file a node named (its path,
/// blob and sha256), as the field, its value and the rule it breaks.
pub fn file_fault<'a>(
    path: &'a str,
    blob: &'a str,
    sha256: Option<&'a str>,
) -> Option<(String, &'a str, &'static str)> {
    if !is_snapshot_path(path) {
        return Some((
            "path".into(),
            path,
            "not a relative path inside the snapshot",
        ));
    }
    if !is_blob(blob) {
        return Some((
            format!("blob for {path}"),
            blob,
            "not one file name in blobs/ (the hub names blobs by hex digests)",
        ));
    }
    match sha256 {
        Some(s) if !is_sha256(s) => Some((format!("sha256 of {path}"), s, "not 64 hex digits")),
        _ => None,
    }
}

/// A blob named by its sha256 (an LFS file: safetensors, GGUF, …).
pub fn is_sha256(blob: &str) -> bool {
    blob.len() == 64 && blob.chars().all(|c| c.is_ascii_hexdigit())
}

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotFile {
    /// Path inside the snapshot (`model-00001-of-00004.safetensors`).
    pub path: String,
    /// Blob name it links to.
    pub blob: String,
    /// Size of the blob; `None` when the blob is missing (dangling link).
    pub size: Option<u64>,
}

/// One model repo in a hub cache.
#[derive(Debug, Clone)]
pub struct Repo {
    /// `HUB/models--ORG--NAME`.
    pub dir: PathBuf,
}

impl Repo {
    /// The repo of `id` under `hub` (it may not exist).
    pub fn new(hub: &Path, id: &str) -> Repo {
        Repo {
            dir: hub.join(folder_of(id)),
        }
    }

    /// `blobs/`.
    pub fn blobs(&self) -> PathBuf {
        self.dir.join("blobs")
    }

    /// `blobs/BLOB`.
    pub fn blob(&self, blob: &str) -> PathBuf {
        self.blobs().join(blob)
    }

    /// `snapshots/REV`.
    pub fn snapshot(&self, commit: &str) -> PathBuf {
        self.dir.join("snapshots").join(commit)
    }

    /// The commit `revision` names here: a commit with a snapshot, or
    /// what `refs/REV` holds.
    pub fn resolve(&self, revision: &str) -> Option<String> {
        if is_commit(revision) && self.snapshot(revision).is_dir() {
            return Some(revision.to_string());
        }
        let r = std::fs::read_to_string(self.dir.join("refs").join(revision)).ok()?;
        let r = r.trim();
        is_commit(r).then(|| r.to_string())
    }

    /// Refs and the commits they name.
    pub fn refs(&self) -> Vec<(String, String)> {
        let mut out = vec![];
        walk(&self.dir.join("refs"), "", &mut |rel, p| {
            if let Ok(c) = std::fs::read_to_string(p) {
                out.push((rel.to_string(), c.trim().to_string()));
            }
        });
        out.sort();
        out
    }

    /// The commits that have a snapshot folder.
    pub fn commits(&self) -> Vec<String> {
        let mut c: Vec<String> = std::fs::read_dir(self.dir.join("snapshots"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| is_commit(n))
            .collect();
        c.sort();
        c
    }

    /// Every file of snapshot `commit`: each must be a link into
    /// `../../blobs` (as the cache makes them).
    pub fn files(&self, commit: &str) -> Result<Vec<SnapshotFile>, String> {
        let root = self.snapshot(commit);
        let mut out = vec![];
        let mut bad = None;
        walk(&root, "", &mut |rel, p| match std::fs::read_link(p)
            .ok()
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
        {
            Some(blob) => {
                let size = std::fs::metadata(self.blob(&blob)).ok().map(|m| m.len());
                out.push(SnapshotFile {
                    path: rel.to_string(),
                    blob,
                    size,
                });
            }
            None => bad = Some(rel.to_string()),
        });
        if let Some(b) = bad {
            return Err(format!(
                "{}: {b} is not a link into blobs/, as the Hugging Face cache makes them",
                root.display()
            ));
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Makes `snapshots/COMMIT/PATH` link to `../../blobs/BLOB` (one more
    /// `..` per folder in PATH), replacing what is there.
    pub fn link(&self, commit: &str, path: &str, blob: &str) -> std::io::Result<()> {
        if !is_commit(commit) || !is_blob(blob) {
            return Err(std::io::Error::other(format!(
                "bad commit {} or blob {}",
                shown(commit),
                shown(blob)
            )));
        }
        let rel =
            safe_rel(path).ok_or_else(|| std::io::Error::other(format!("bad path {path:?}")))?;
        let dest = self.snapshot(commit).join(&rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let depth = rel.components().count() + 1;
        let mut target = PathBuf::new();
        for _ in 0..depth {
            target.push("..");
        }
        target.push("blobs");
        target.push(blob);
        if std::fs::read_link(&dest).ok().as_deref() == Some(target.as_path()) {
            return Ok(());
        }
        let tmp = dest.with_file_name(format!(
            ".{}.halobox-link",
            dest.file_name().unwrap_or_default().to_string_lossy()
        ));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&target, &tmp)?;
        std::fs::rename(&tmp, &dest)
    }

    /// Writes `refs/REF` = `commit`.
    pub fn set_ref(&self, name: &str, commit: &str) -> std::io::Result<()> {
        let rel =
            safe_rel(name).ok_or_else(|| std::io::Error::other(format!("bad ref {name:?}")))?;
        let dest = self.dir.join("refs").join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if std::fs::read_to_string(&dest).ok().as_deref() == Some(commit) {
            return Ok(());
        }
        crate::confine::write_atomic(&dest, commit.as_bytes(), 0o666)
    }
}

/// The suffix of a file being received into `blobs/`.
pub const PARTIAL: &str = ".halobox-partial";

/// The `blobs/` folder of one repo, held open: every name is resolved
/// relative to it, never through a link (the folder itself is opened with
/// `O_NOFOLLOW`, each file with `O_NOFOLLOW` or `AT_SYMLINK_NOFOLLOW`, and
/// renamed with `renameat` on the folder), and each name must be one file
/// name of it (no `/`, no `..`): a name a node supplied cannot reach
/// outside the folder whatever it holds.
#[derive(Debug)]
pub struct BlobDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// One file name in a folder: not empty, no `/`, not `.` or `..`, no NUL.
fn one_name(name: &str) -> std::io::Result<&str> {
    if name.is_empty()
        || name.len() > 255
        || name == "."
        || name == ".."
        || name.contains(['/', '\0'])
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not one file name in blobs/", shown(name)),
        ));
    }
    Ok(name)
}

impl BlobDir {
    /// Opens `blobs/` of `repo`; an error when it is a link.
    pub fn open(repo: &Repo) -> std::io::Result<BlobDir> {
        let path = repo.blobs();
        let fd = nix::fcntl::open(
            &path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::ELOOP | Errno::ENOTDIR => std::io::Error::other(format!(
                "{} is a link or not a folder: halobox writes only into a real blobs folder",
                path.display()
            )),
            e => std::io::Error::from(e),
        })?;
        Ok(BlobDir { fd, path })
    }

    /// Where `name` is, for messages.
    pub fn path(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Creates `name`, which must not exist (no link followed), for
    /// reading and writing.
    pub fn create_new(&self, name: &str) -> std::io::Result<File> {
        let fd = nix::fcntl::openat(
            &self.fd,
            one_name(name)?,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o644),
        )?;
        Ok(File::from(fd))
    }

    /// Opens `name` for reading; an error when it is a link.
    pub fn open_file(&self, name: &str) -> std::io::Result<File> {
        let fd = nix::fcntl::openat(
            &self.fd,
            one_name(name)?,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(File::from(fd))
    }

    /// Renames `from` to `to` inside the folder (replacing `to`, and never
    /// following a link either name may be).
    pub fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        nix::fcntl::renameat(&self.fd, one_name(from)?, &self.fd, one_name(to)?)?;
        Ok(())
    }

    /// Removes `name` (a link is removed, not followed).
    pub fn remove(&self, name: &str) -> std::io::Result<()> {
        nix::unistd::unlinkat(
            &self.fd,
            one_name(name)?,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        )?;
        Ok(())
    }

    /// Device, inode and size of `name` when it is a regular file (a
    /// link is not followed: `None`, as for a missing file).
    pub fn regular(&self, name: &str) -> Option<(u64, u64, u64)> {
        let st =
            nix::sys::stat::fstatat(&self.fd, one_name(name).ok()?, AtFlags::AT_SYMLINK_NOFOLLOW)
                .ok()?;
        let regular = (st.st_mode & nix::libc::S_IFMT) == nix::libc::S_IFREG;
        regular.then(|| (st.st_dev, st.st_ino, u64::try_from(st.st_size).unwrap_or(0)))
    }

    /// Removes every `*.halobox-partial` file in the folder (what killed
    /// receivers left); call it only under the receive lock.
    pub fn sweep_partials(&self) -> std::io::Result<usize> {
        let mut n = 0;
        for e in std::fs::read_dir(&self.path)?.flatten() {
            if let Some(name) = e.file_name().to_str()
                && name.ends_with(PARTIAL)
            {
                self.remove(name)?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// The receive lock of one repo in one cache: an `flock` on
/// `HUB/.locks/models--ORG--NAME/halobox-receive.lock` (the folder
/// `huggingface_hub` keeps its own download locks in), held while a sync
/// writes into the repo, so two syncs never write one cache's copy at once.
#[derive(Debug)]
pub struct ReceiveLock {
    _file: Flock<File>,
}

impl ReceiveLock {
    /// Takes the lock of `id` in `hub`, or says who holds it.
    pub fn take(hub: &Path, id: &str) -> Result<ReceiveLock, String> {
        let dir = hub.join(".locks").join(folder_of(id));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join("halobox-receive.lock");
        let fd = nix::fcntl::open(
            &path,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o644),
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
        match Flock::lock(File::from(fd), FlockArg::LockExclusiveNonblock) {
            Ok(f) => Ok(ReceiveLock { _file: f }),
            Err((_, Errno::EWOULDBLOCK)) => Err(format!(
                "another `halobox model sync` is receiving {id} into {} on this node now (it holds {})\n  hint: let that sync finish, then run `halobox model sync` again: it sends only what is still missing",
                hub.display(),
                path.display()
            )),
            Err((_, e)) => Err(format!("{}: {e}", path.display())),
        }
    }
}

/// Model repos (`ORG/NAME`) in `hub`.
pub fn models(hub: &Path) -> Vec<String> {
    let mut m: Vec<String> = std::fs::read_dir(hub)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| id_of(&n))
        .collect();
    m.sort();
    m
}

/// `path` as a relative path with only normal parts (no `..`, no root).
pub fn safe_rel(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    (!path.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_))))
        .then(|| p.to_path_buf())
}

/// Calls `f(relative path, path)` for every non-folder under `dir`.
fn walk(dir: &Path, prefix: &str, f: &mut dyn FnMut(&str, &Path)) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, &rel, f),
            Ok(_) => f(&rel, &p),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_refs_parse() {
        assert_eq!(
            ModelRef::parse("Qwen/Qwen3-0.6B").unwrap(),
            ModelRef {
                id: "Qwen/Qwen3-0.6B".into(),
                revision: "main".into()
            }
        );
        assert_eq!(ModelRef::parse("a/b@v1.0").unwrap().revision, "v1.0");
        for bad in ["Qwen", "a/b/c", "../x", "a/b@", "a/ b", "-a/b", "a/b@../x"] {
            assert!(ModelRef::parse(bad).unwrap_err().contains("hint:"), "{bad}");
        }
        assert_eq!(ModelRef::parse("a/b").unwrap().folder(), "models--a--b");
        assert_eq!(id_of("models--a--b-c").as_deref(), Some("a/b-c"));
    }

    #[test]
    fn hub_dir_follows_huggingface_hub() {
        assert_eq!(hub_dir(Some("/h/"), Some("/x"), None), Some("/h".into()));
        assert_eq!(hub_dir(None, Some("/x"), None), Some("/x/hub".into()));
        assert_eq!(
            hub_dir(None, None, Some("/root")),
            Some("/root/.cache/huggingface/hub".into())
        );
    }

    #[test]
    fn a_snapshot_is_read_and_linked() {
        let d = tempfile::tempdir().unwrap();
        let repo = Repo::new(d.path(), "a/b");
        let commit = "0123456789abcdef0123456789abcdef01234567";
        std::fs::create_dir_all(repo.blobs()).unwrap();
        std::fs::write(repo.blob("x1"), b"hello").unwrap();
        repo.link(commit, "sub/w.safetensors", "x1").unwrap();
        repo.link(commit, "config.json", "gone").unwrap();
        repo.set_ref("main", commit).unwrap();
        assert_eq!(repo.resolve("main").as_deref(), Some(commit));
        assert_eq!(repo.resolve(commit).as_deref(), Some(commit));
        assert_eq!(repo.resolve("v2"), None);
        let files = repo.files(commit).unwrap();
        assert_eq!(
            files,
            vec![
                SnapshotFile {
                    path: "config.json".into(),
                    blob: "gone".into(),
                    size: None
                },
                SnapshotFile {
                    path: "sub/w.safetensors".into(),
                    blob: "x1".into(),
                    size: Some(5)
                },
            ]
        );
        assert_eq!(
            std::fs::read(repo.snapshot(commit).join("sub/w.safetensors")).unwrap(),
            b"hello"
        );
        assert_eq!(models(d.path()), ["a/b"]);
        assert!(safe_rel("../x").is_none() && safe_rel("/x").is_none());
        assert!(repo.link(commit, "x", "../../x").is_err());
        assert!(repo.link("../../x", "x", "x1").is_err());
    }

    #[test]
    fn node_supplied_names_are_one_file_name() {
        for ok in [
            "0123456789abcdef0123456789abcdef01234567",
            "c0ffee",
            "a.b_c-d",
        ] {
            assert!(is_blob(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "/root/.ssh/authorized_keys",
            "a/b",
            ".hidden",
            "-x",
            "x.halobox-partial",
            "a\u{1b}b",
            &"f".repeat(200),
        ] {
            assert!(!is_blob(bad), "{bad}");
        }
        assert!(is_revision("main") && is_revision("refs/pr/1") && is_revision("v1.0"));
        assert!(!is_revision("../x") && !is_revision("a//b") && !is_revision("/x"));
        assert!(is_snapshot_path("sub/w.safetensors"));
        assert!(!is_snapshot_path("../w") && !is_snapshot_path("/w") && !is_snapshot_path("a\nb"));
        assert_eq!(shown("a\u{1b}"), "\"a\\u{1b}\"");
    }

    #[test]
    fn blobs_are_reached_only_inside_their_folder() {
        let d = tempfile::tempdir().unwrap();
        let repo = Repo::new(d.path(), "a/b");
        assert!(BlobDir::open(&repo).is_err(), "no blobs/ yet");
        std::fs::create_dir_all(repo.blobs()).unwrap();
        let blobs = BlobDir::open(&repo).unwrap();
        for bad in ["../x", "/x", "", ".."] {
            assert!(blobs.create_new(bad).is_err(), "{bad}");
            assert!(blobs.rename("x", bad).is_err(), "{bad}");
        }
        let mut f = blobs.create_new("x.1.halobox-partial").unwrap();
        std::io::Write::write_all(&mut f, b"abc").unwrap();
        assert!(
            blobs.create_new("x.1.halobox-partial").is_err(),
            "created twice"
        );
        blobs.rename("x.1.halobox-partial", "x").unwrap();
        assert_eq!(blobs.regular("x").map(|r| r.2), Some(3));
        // A link in blobs/ is never followed: not opened, not written through.
        let outside = d.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        std::os::unix::fs::symlink(&outside, repo.blobs().join("l")).unwrap();
        assert!(blobs.open_file("l").is_err() && blobs.create_new("l").is_err());
        assert_eq!(blobs.regular("l"), None);
        std::fs::write(repo.blobs().join("y.9.halobox-partial"), b"").unwrap();
        assert_eq!(blobs.sweep_partials().unwrap(), 1);
        blobs.rename("x", "l").unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        // A blobs folder that is a link is refused.
        let other = Repo::new(d.path(), "c/d");
        std::fs::create_dir_all(&other.dir).unwrap();
        std::os::unix::fs::symlink(d.path(), other.blobs()).unwrap();
        assert!(BlobDir::open(&other).is_err());
    }

    #[test]
    fn one_receiver_at_a_time_per_repo() {
        let d = tempfile::tempdir().unwrap();
        let held = ReceiveLock::take(d.path(), "a/b").unwrap();
        let e = ReceiveLock::take(d.path(), "a/b").unwrap_err();
        assert!(
            e.contains("another `halobox model sync` is receiving a/b"),
            "{e}"
        );
        ReceiveLock::take(d.path(), "a/c").unwrap();
        drop(held);
        ReceiveLock::take(d.path(), "a/b").unwrap();
    }
}
