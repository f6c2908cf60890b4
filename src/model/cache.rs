//! The Hugging Face hub cache as `huggingface_hub` lays it out, read and
//! written in place: `HUB/models--ORG--NAME/{blobs/BLOB, snapshots/REV/PATH
//! -> ../../blobs/BLOB, refs/REF}` (REV a 40-hex commit; BLOB the sha256 of
//! the content for LFS files, the git blob id for the others).

use std::path::{Component, Path, PathBuf};

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
        let part_ok = |p: &str| {
            !p.is_empty()
                && !p.starts_with(['.', '-'])
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        };
        let id_ok = match id.split_once('/') {
            Some((org, name)) => part_ok(org) && part_ok(name) && !name.contains('/'),
            None => false,
        };
        let rev_ok = part_ok(rev) || (rev.contains('/') && rev.split('/').all(part_ok));
        if !id_ok || !rev_ok {
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

/// A 40-hex commit id.
pub fn is_commit(rev: &str) -> bool {
    rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit())
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
        let tmp = dest.with_extension("halobox-tmp");
        std::fs::write(&tmp, commit)?;
        std::fs::rename(&tmp, &dest)
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
    }
}
