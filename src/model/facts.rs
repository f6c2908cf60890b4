//! What one node holds, read on that node (`halobox model node-facts`,
//! run over ssh) and printed as one JSON line: its hub cache folder, free
//! disk there, and one model's snapshot at a revision, each file with its
//! size and, where asked, its sha256 (from the [`super::record`] when the
//! file is unchanged since it was hashed, else hashed now and recorded).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cache::{self, ModelRef, Repo};
use super::record::{self, Record};

/// Which files to hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HashMode {
    /// None: sizes and recorded hashes only.
    None,
    /// Files with no fresh record, but not LFS files (checked against
    /// their names where they arrive).
    Small,
    /// Files with no fresh record (new or changed since hashed).
    New,
    /// Every file, the record ignored (`--verify`).
    All,
}

impl HashMode {
    /// The word `--hash` takes.
    pub fn word(self) -> &'static str {
        match self {
            HashMode::None => "none",
            HashMode::Small => "small",
            HashMode::New => "new",
            HashMode::All => "all",
        }
    }
}

/// One file of the snapshot on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileFacts {
    /// Path in the snapshot.
    pub path: String,
    /// Blob it links to.
    pub blob: String,
    /// The blob's size; `None`: missing.
    pub size: Option<u64>,
    /// sha256 of its content, when recorded fresh or hashed now.
    pub sha256: Option<String>,
}

impl FileFacts {
    /// The hash the content must have when the cache names it (LFS).
    pub fn hub_sha256(&self) -> Option<&str> {
        cache::is_sha256(&self.blob).then_some(self.blob.as_str())
    }
}

/// One model on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFacts {
    /// The commit the revision names here; `None`: no such ref or snapshot.
    #[serde(default, deserialize_with = "some_commit")]
    pub commit: Option<String>,
    /// Refs and their commits.
    pub refs: Vec<(String, String)>,
    /// Commits with a snapshot.
    pub commits: Vec<String>,
    /// The snapshot's files (empty without a commit).
    pub files: Vec<FileFacts>,
}

/// What a node holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFacts {
    /// Its hub cache folder.
    pub hub: String,
    /// Bytes free for an unprivileged user on the hub's file system.
    pub free: u64,
    /// The model asked for; `None`: its folder is not there.
    pub model: Option<ModelFacts>,
}

impl NodeFacts {
    /// Every name in these facts is one this halobox may use as a file
    /// name or print (they come from another node): the hub an absolute
    /// path, commits 40-hex, refs revisions, snapshot paths relative with
    /// normal parts, blobs one file name, hashes 64-hex. The error names
    /// the field and its value.
    pub fn check(&self) -> Result<(), String> {
        if !self.hub.starts_with('/') || self.hub.chars().any(char::is_control) {
            return Err(format!(
                "reported hub {}: not an absolute folder",
                cache::shown(&self.hub)
            ));
        }
        let Some(m) = &self.model else { return Ok(()) };
        let bad = |field: &str, value: &str, rule: &str| {
            Err(format!("reported {field} {}: {rule}", cache::shown(value)))
        };
        const COMMIT: &str = "a commit is 40 hex digits";
        if let Some(c) = &m.commit
            && !cache::is_commit(c)
        {
            return bad("commit", c, COMMIT);
        }
        for c in &m.commits {
            if !cache::is_commit(c) {
                return bad("commit", c, COMMIT);
            }
        }
        for (r, c) in &m.refs {
            if !cache::is_revision(r) {
                return bad("ref", r, "not a branch or tag name");
            }
            if !cache::is_commit(c) {
                return bad(&format!("commit of ref {r}"), c, COMMIT);
            }
        }
        for f in &m.files {
            if let Some((field, value, rule)) =
                cache::file_fault(&f.path, &f.blob, f.sha256.as_deref())
            {
                return bad(&field, value, rule);
            }
        }
        if crate::units::total_bytes(m.files.iter().filter_map(|f| f.size)).is_none() {
            return Err(format!(
                "reported file sizes that add up to more than {} bytes: no cache holds that",
                u64::MAX
            ));
        }
        Ok(())
    }
}

/// Free bytes on the file system of `dir` (or of its nearest existing parent).
pub fn free_bytes(dir: &Path) -> u64 {
    let mut p = dir.to_path_buf();
    loop {
        if p.exists() {
            return nix::sys::statvfs::statvfs(&p)
                .map(|s| s.blocks_available().saturating_mul(s.fragment_size()))
                .unwrap_or(0);
        }
        if !p.pop() {
            return 0;
        }
    }
}

/// Reads `model` in `hub`, hashing as `mode` says.
pub fn read(hub: &Path, model: &ModelRef, mode: HashMode) -> Result<NodeFacts, String> {
    let repo = Repo::new(hub, &model.id);
    let free = free_bytes(hub);
    let hub_s = hub.display().to_string();
    if !repo.dir.is_dir() {
        return Ok(NodeFacts {
            hub: hub_s,
            free,
            model: None,
        });
    }
    let commit = repo.resolve(&model.revision);
    let mut files = vec![];
    if let Some(c) = &commit {
        let rec_path = record::path(hub, &model.folder());
        let mut rec = Record::load(&rec_path);
        let mut changed = false;
        for f in repo.files(c)? {
            let blob = repo.blob(&f.blob);
            let recorded = if mode == HashMode::All || f.size.is_none() {
                None
            } else {
                rec.fresh(&f.blob, &blob)
            };
            let sha256 = match recorded {
                Some(s) => Some(s),
                None if f.size.is_some()
                    && (mode == HashMode::New
                        || mode == HashMode::All
                        || (mode == HashMode::Small && !cache::is_sha256(&f.blob))) =>
                {
                    let s =
                        record::hash_file(&blob).map_err(|e| format!("{}: {e}", blob.display()))?;
                    rec.note(&f.blob, &blob, &s)
                        .map_err(|e| format!("{}: {e}", blob.display()))?;
                    changed = true;
                    Some(s)
                }
                None => None,
            };
            files.push(FileFacts {
                path: f.path,
                blob: f.blob,
                size: f.size,
                sha256,
            });
        }
        if changed {
            rec.save(&rec_path)
                .map_err(|e| format!("{}: {e}", rec_path.display()))?;
        }
    }
    Ok(NodeFacts {
        hub: hub_s,
        free,
        model: Some(ModelFacts {
            commit,
            refs: repo.refs(),
            commits: repo.commits(),
            files,
        }),
    })
}

/// One model copy as `model ls` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// `ORG/NAME`.
    pub id: String,
    /// The snapshot's commit (40 hex digits: checked when a node's report
    /// is read).
    #[serde(deserialize_with = "commit")]
    pub commit: String,
    /// Refs naming it.
    pub refs: Vec<String>,
    /// Bytes of its blobs present.
    pub size: u64,
    /// Files in the snapshot.
    pub files: usize,
    /// Every file's blob is there.
    pub complete: bool,
    /// Every file has a fresh hash in the record, and LFS files' hashes
    /// match their names.
    pub verified: bool,
}

/// A node's `commit`, refused unless it is 40 hex digits (what is shown of
/// it is sliced from the start).
fn commit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let c = String::deserialize(d)?;
    if cache::is_commit(&c) {
        Ok(c)
    } else {
        Err(serde::de::Error::custom(format!(
            "commit {:?} is not a 40-hex commit id",
            c.chars().take(64).collect::<String>()
        )))
    }
}

/// [`commit`], or none.
fn some_commit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct C(#[serde(deserialize_with = "commit")] String);
    Ok(Option::<C>::deserialize(d)?.map(|c| c.0))
}

/// Every model snapshot in a node's hub, for `model ls`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holdings {
    /// Its hub cache folder.
    pub hub: String,
    /// Free bytes there.
    pub free: u64,
    /// One entry per model and snapshot.
    pub models: Vec<Held>,
}

/// Lists every model snapshot in `hub` (no hashing: the record says what
/// is verified).
pub fn holdings(hub: &Path) -> Holdings {
    let mut models = vec![];
    for id in cache::models(hub) {
        let repo = Repo::new(hub, &id);
        let rec = Record::load(&record::path(hub, &cache::folder_of(&id)));
        let refs = repo.refs();
        for commit in repo.commits() {
            let files = repo.files(&commit).unwrap_or_default();
            let complete = files.iter().all(|f| f.size.is_some());
            let verified = complete
                && files.iter().all(|f| {
                    rec.fresh(&f.blob, &repo.blob(&f.blob)).is_some_and(|s| {
                        !cache::is_sha256(&f.blob) || s.eq_ignore_ascii_case(&f.blob)
                    })
                });
            models.push(Held {
                id: id.clone(),
                refs: refs
                    .iter()
                    .filter(|(_, c)| *c == commit)
                    .map(|(r, _)| r.clone())
                    .collect(),
                size: files.iter().filter_map(|f| f.size).sum(),
                files: files.len(),
                complete,
                verified,
                commit,
            });
        }
    }
    Holdings {
        hub: hub.display().to_string(),
        free: free_bytes(hub),
        models,
    }
}

/// The hub of this node's environment, or an error with the fix.
pub fn local_hub() -> Result<PathBuf, String> {
    cache::hub_dir_from_env().ok_or_else(|| {
        "no HF_HUB_CACHE, HF_HOME or home folder here: cannot find the Hugging Face cache\n  hint: `export HF_HOME=/path` for the account halobox logs in with (in ~/.ssh/environment or /etc/environment)".to_string()
    })
}

/// What `node-rm` freed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// Bytes of blobs removed.
    pub freed: u64,
}

/// Removes one revision of model `id` from `hub`: first the refs naming
/// it (so nothing resolves to it any more), then its snapshot, then the
/// blobs no other snapshot links; the whole model with its record when it
/// was the last. A hub without that revision frees nothing.
pub fn remove_revision(hub: &Path, id: &str, revision: &str) -> Result<Removed, String> {
    let repo = Repo::new(hub, id);
    let Some(commit) = repo.resolve(revision) else {
        return Ok(Removed { freed: 0 });
    };
    let others: Vec<String> = repo
        .commits()
        .into_iter()
        .filter(|c| *c != commit)
        .collect();
    if others.is_empty() {
        return remove(hub, id);
    }
    let mut linked = std::collections::BTreeSet::new();
    for c in &others {
        linked.extend(repo.files(c)?.into_iter().map(|f| f.blob));
    }
    let mine = repo.files(&commit)?;
    for (name, c) in repo.refs() {
        if c == commit {
            let r = repo.dir.join("refs").join(&name);
            std::fs::remove_file(&r).map_err(|e| format!("{}: {e}", r.display()))?;
        }
    }
    let snap = repo.snapshot(&commit);
    std::fs::remove_dir_all(&snap).map_err(|e| format!("{}: {e}", snap.display()))?;
    let mut freed = 0;
    for f in mine {
        if linked.insert(f.blob.clone()) {
            let b = repo.blob(&f.blob);
            if let Ok(m) = std::fs::metadata(&b) {
                std::fs::remove_file(&b).map_err(|e| format!("{}: {e}", b.display()))?;
                freed += m.len();
            }
        }
    }
    Ok(Removed { freed })
}

/// Removes model `id` (every revision) and its record from `hub`.
pub fn remove(hub: &Path, id: &str) -> Result<Removed, String> {
    let repo = Repo::new(hub, id);
    let freed = std::fs::read_dir(repo.blobs())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    if repo.dir.exists() {
        std::fs::remove_dir_all(&repo.dir).map_err(|e| format!("{}: {e}", repo.dir.display()))?;
    }
    let _ = std::fs::remove_file(record::path(hub, &cache::folder_of(id)));
    Ok(Removed { freed })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node's `node-list` report with a short `commit` (which `model ls`
    /// sliced to 12 characters, and panicked) is refused when it is read,
    /// with the value named; a well-formed one reads.
    #[test]
    fn a_nodes_short_commit_is_refused_when_read() {
        let held = |commit: &str| {
            format!(
                r#"{{"hub": "/h", "free": 1, "models": [{{"id": "a/b", "commit": "{commit}", "refs": [], "size": 1, "files": 1, "complete": true, "verified": true}}]}}"#
            )
        };
        let e = crate::remote::parse_json::<Holdings>(&held("abc")).unwrap_err();
        assert!(
            e.to_string().contains("\"abc\" is not a 40-hex commit id"),
            "{e}"
        );
        assert!(crate::remote::parse_json::<Holdings>(&held("../x/y")).is_err());
        let good = "0123456789abcdef0123456789abcdef01234567";
        let h: Holdings = crate::remote::parse_json(&held(good)).unwrap();
        assert_eq!(h.models[0].commit, good);
        let facts = |commit: &str| {
            format!(
                r#"{{"hub": "/h", "free": 1, "model": {{"commit": {commit}, "refs": [], "commits": [], "files": []}}}}"#
            )
        };
        assert!(crate::remote::parse_json::<NodeFacts>(&facts("\"abc\"")).is_err());
        let none: NodeFacts = crate::remote::parse_json(&facts("null")).unwrap();
        assert_eq!(none.model.unwrap().commit, None);
        let some: NodeFacts = crate::remote::parse_json(&facts(&format!("\"{good}\""))).unwrap();
        assert_eq!(some.model.unwrap().commit.as_deref(), Some(good));
    }
}
