//! The refresh journal: one small JSON file per engine and container name
//! under `$XDG_STATE_HOME/halobox/refresh/` (else
//! `~/.local/state/halobox/refresh/`), written before each step that
//! changes containers and removed when the refresh ends. A run that dies
//! (SIGKILL, power loss) leaves it behind, and [`super::repair`] reads it
//! to know which container ids that run made and how far it got.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::lock::{LockError, check_private, key, private_dir};

/// How far a refresh got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Creating the new container (its id is not known yet).
    Creating,
    /// The new container exists under the temporary name.
    Created,
    /// Renaming: the old container may be aside, the new one may be named.
    Swapping,
    /// The new container has the name; the old one is being retired.
    Swapped,
    /// The new container ran its check and waits, under the temporary
    /// name, for the word of the `cluster refresh` that staged it (`refresh
    /// --stage`: swap it in or remove it); one left behind is removed by
    /// the next `--stage` or by `--discard-staged`.
    Staged,
}

/// The image a staged container was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedImage {
    /// The pinned reference.
    pub image: String,
    /// Its digest, when it has one.
    pub digest: Option<String>,
}

/// What a running refresh records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The engine address.
    pub engine: String,
    /// The container name.
    pub name: String,
    /// The pid of the run.
    pub pid: u32,
    /// How far it got.
    pub step: Step,
    /// The container that takes the name.
    pub new_id: Option<String>,
    /// Whether this run created `new_id` (a rollback reuses `NAME-prev`).
    pub new_created: bool,
    /// The container that had the name.
    pub old_id: Option<String>,
    /// The `NAME-prev` container the run deletes once it succeeded.
    pub prev_id: Option<String>,
    /// What a staged run made (with [`Step::Staged`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<StagedImage>,
}

/// The journal file of one engine and name.
#[derive(Debug, Clone)]
pub struct Journal {
    path: PathBuf,
}

/// Why the journal cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("refresh journal {}: {message}\n  hint: `export XDG_STATE_HOME=DIR` with a DIR you can write (e.g. `mkdir -p ~/.local/state`), then run it again", path.display())]
pub struct JournalError {
    /// The file or directory.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// `$XDG_STATE_HOME/halobox/refresh`, else `~/.local/state/halobox/refresh`
/// (not created here).
pub fn dir() -> Result<PathBuf, JournalError> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".local/state")))
        .ok_or_else(|| JournalError {
            path: PathBuf::from("$XDG_STATE_HOME"),
            message: "neither XDG_STATE_HOME nor HOME is set".into(),
        })?;
    Ok(base.join("halobox").join("refresh"))
}

/// Checks (`create`: first makes) the journal directory: this user's own,
/// writable by no one else, since a repair acts on what it says.
fn checked(dir: &Path, create: bool) -> Result<(), JournalError> {
    let uid = nix::unistd::geteuid().as_raw();
    let result = if create {
        private_dir(dir, uid)
    } else {
        check_private(dir, uid)
    };
    result.map_err(|e| match e {
        LockError::Unusable { path, message } => JournalError { path, message },
        other => JournalError {
            path: dir.to_path_buf(),
            message: other.to_string(),
        },
    })
}

impl Journal {
    /// The journal of `name` on `engine`.
    pub fn open(engine: &str, name: &str) -> Result<Journal, JournalError> {
        Ok(Journal {
            path: dir()?.join(format!("{}.json", key(engine, name))),
        })
    }

    /// Where it is kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn fail(&self, e: impl ToString) -> JournalError {
        JournalError {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    /// The entry a run left, if any.
    pub fn read(&self) -> Result<Option<Entry>, JournalError> {
        if let Some(dir) = self.path.parent().filter(|d| d.exists()) {
            checked(dir, false)?;
        }
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| self.fail(format!("unreadable ({e}); remove it to go on"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Records `entry` (a whole new file, renamed into place and synced).
    pub fn write(&self, entry: &Entry) -> Result<(), JournalError> {
        if let Some(dir) = self.path.parent() {
            checked(dir, true)?;
        }
        let body = serde_json::to_vec_pretty(entry).map_err(|e| self.fail(e))?;
        crate::confine::write_atomic(&self.path, &body, 0o666).map_err(|e| self.fail(e))
    }

    /// Removes the entry (the refresh ended, or was repaired).
    pub fn clear(&self) -> Result<(), JournalError> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.fail(e)),
            _ => Ok(()),
        }
    }
}

/// The names with a journal entry on `engine`.
pub fn names(engine: &str) -> Vec<String> {
    let prefix = key(engine, "");
    let Ok(dir) = dir() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            file.strip_prefix(&prefix)?
                .strip_suffix(".json")
                .map(str::to_string)
        })
        .collect();
    out.sort();
    out
}
