//! File access rooted at the live `/` or at a snapshot tree (`--sysroot`).
//!
//! Every host file halobox reads goes through [`Reader`], so a snapshot of
//! another machine is inspected exactly like the machine itself. Read failures
//! other than "not found" are recorded, not fatal: a host with an unreadable
//! file still gets a report, and the report says what could not be read.
//! Snapshot reads stay inside the snapshot ([`confine`]).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;

use crate::confine;

/// Why a sysroot cannot be used at all.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The directory does not exist.
    #[error(
        "sysroot {0} does not exist\n  hint: pass a directory that holds a snapshot of a host (sys/, proc/, dev/, etc/), e.g. `halobox doctor --sysroot tests/fixtures/hosts/strix-e810`"
    )]
    Missing(PathBuf),
    /// The path exists but is not a directory.
    #[error(
        "sysroot {0} is not a directory\n  hint: --sysroot takes the top folder of a host snapshot"
    )]
    NotADirectory(PathBuf),
}

/// A host file that exists but could not be read or understood.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReadIssue {
    /// Host path (as on the inspected host, e.g. `/proc/self/limits`).
    pub path: String,
    /// What went wrong.
    pub error: String,
}

/// Where host files come from.
#[derive(Debug, Clone)]
pub struct HostRoot {
    /// The snapshot directory as given (shown in reports).
    base: Option<PathBuf>,
    /// The same directory made absolute (used for file access).
    abs: Option<PathBuf>,
}

impl HostRoot {
    /// The running machine: paths are read as they are.
    pub fn live() -> Self {
        Self {
            base: None,
            abs: None,
        }
    }

    /// A snapshot tree: `/x/y` is read from `DIR/x/y`.
    pub fn sysroot(dir: &Path) -> Result<Self, RootError> {
        match std::fs::metadata(dir) {
            Err(_) => Err(RootError::Missing(dir.to_path_buf())),
            Ok(m) if !m.is_dir() => Err(RootError::NotADirectory(dir.to_path_buf())),
            Ok(_) => Ok(Self {
                base: Some(dir.to_path_buf()),
                abs: Some(std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())),
            }),
        }
    }

    /// The snapshot directory as given, or `None` for the live host.
    pub fn sysroot_dir(&self) -> Option<&Path> {
        self.base.as_deref()
    }

    /// The host path of a real path inside this root (`DIR/usr/bin/x` → `/usr/bin/x`).
    pub fn host_path_of(&self, real: &Path) -> String {
        match self.abs.as_deref().map(|abs| real.strip_prefix(abs)) {
            Some(Ok(rel)) => format!("/{}", rel.display()),
            _ => real.display().to_string(),
        }
    }

    /// True when reading the running machine.
    pub fn is_live(&self) -> bool {
        self.base.is_none()
    }

    /// The real (absolute, for a snapshot) filesystem path behind a host
    /// path, as written: for display. Reads go through [`HostRoot::resolve`].
    pub fn path(&self, host_path: &str) -> PathBuf {
        match &self.abs {
            None => PathBuf::from(host_path),
            Some(base) => base.join(host_path.trim_start_matches('/')),
        }
    }

    /// The real path to open for a host path. In a snapshot every symlink on
    /// the way is resolved inside it (the last one only with `follow_last`);
    /// one that is absolute or climbs out is refused, never followed into
    /// this machine.
    pub fn resolve(&self, host_path: &str, follow_last: bool) -> io::Result<PathBuf> {
        match &self.abs {
            None => Ok(PathBuf::from(host_path)),
            Some(base) => confine::resolve(base, host_path, follow_last),
        }
    }

    /// A regular file's bytes, size-capped; FIFOs, devices and sockets are
    /// refused before they are opened.
    fn read(&self, host_path: &str) -> io::Result<Vec<u8>> {
        let real = self.resolve(host_path, true)?;
        confine::read_regular(&real, !self.is_live(), confine::MAX_HOST_FILE_BYTES)
    }
}

/// Every host path a live [`Reader`] looked at, and the files that stand
/// for what it learnt without a file (command output, the kernel's answers):
/// what `halobox snapshot` stores so a snapshot reads the same.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accessed {
    /// Files whose content was read.
    pub read: BTreeSet<String>,
    /// Paths whose existence, type or mode was asked about.
    pub stat: BTreeSet<String>,
    /// Symlinks whose target was read.
    pub links: BTreeSet<String>,
    /// Host paths written in a snapshot's layout (`/captured/…`,
    /// `/proc/self/environ`), with their content.
    pub written: BTreeMap<String, Vec<u8>>,
    /// Empty executables a snapshot holds for tools found on `PATH` outside
    /// the directories a snapshot is searched in (`~/.local/bin/distrobox`
    /// is stored as `/usr/local/bin/distrobox`).
    pub executables: BTreeSet<String>,
}

/// Reads host files through a [`HostRoot`] and collects what could not be read.
#[derive(Debug)]
pub struct Reader {
    root: HostRoot,
    issues: RefCell<Vec<ReadIssue>>,
    accessed: Option<RefCell<Accessed>>,
}

impl Reader {
    /// A reader over `root`.
    pub fn new(root: HostRoot) -> Self {
        Self {
            root,
            issues: RefCell::new(Vec::new()),
            accessed: None,
        }
    }

    /// A reader of the live host that also records what it looks at.
    pub fn recording() -> Self {
        Self {
            accessed: Some(RefCell::new(Accessed::default())),
            ..Self::new(HostRoot::live())
        }
    }

    /// True when recording for a snapshot.
    pub fn is_recording(&self) -> bool {
        self.accessed.is_some()
    }

    /// What was recorded (empty when not recording).
    pub fn take_accessed(&self) -> Accessed {
        self.accessed
            .as_ref()
            .map(|a| std::mem::take(&mut *a.borrow_mut()))
            .unwrap_or_default()
    }

    fn touch(&self, pick: impl FnOnce(&mut Accessed) -> &mut BTreeSet<String>, host_path: &str) {
        if let Some(a) = &self.accessed {
            pick(&mut a.borrow_mut()).insert(host_path.to_string());
        }
    }

    /// Records that `host_path`'s content was used (for a fact read
    /// another way on the live host, e.g. `/proc/self/limits`).
    pub fn touch_read(&self, host_path: &str) {
        self.touch(|a| &mut a.read, host_path);
    }

    /// Records that `host_path` was looked up (an executable found on PATH).
    pub fn touch_stat(&self, host_path: &str) {
        self.touch(|a| &mut a.stat, host_path);
    }

    /// When recording, a snapshot gets an empty executable at `host_path`.
    pub fn write_executable(&self, host_path: &str) {
        self.touch(|a| &mut a.executables, host_path);
    }

    /// When recording, appends `bytes` to the snapshot file `host_path`
    /// (a command's output under `/captured/`).
    pub fn write(&self, host_path: &str, bytes: &[u8]) {
        if let Some(a) = &self.accessed {
            a.borrow_mut()
                .written
                .entry(host_path.to_string())
                .or_default()
                .extend_from_slice(bytes);
        }
    }

    /// The root this reader reads from.
    pub fn root(&self) -> &HostRoot {
        &self.root
    }

    /// Records a problem with a host file that was found but not usable.
    pub fn note(&self, host_path: &str, error: impl Into<String>) {
        self.issues.borrow_mut().push(ReadIssue {
            path: host_path.to_string(),
            error: error.into(),
        });
    }

    /// Everything recorded so far.
    pub fn take_issues(&self) -> Vec<ReadIssue> {
        std::mem::take(&mut self.issues.borrow_mut())
    }

    /// The whole file, or `None` when it does not exist or cannot be read
    /// (the latter is recorded).
    pub fn text(&self, host_path: &str) -> Option<String> {
        self.touch_read(host_path);
        match self.root.read(host_path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(s) => Some(s),
                Err(_) => {
                    self.note(host_path, "not valid UTF-8 text");
                    None
                }
            },
            Err(e) => {
                self.record_io(host_path, &e);
                None
            }
        }
    }

    /// Like [`Reader::text`] but for files whose absence or refusal is normal
    /// (sysfs returns EINVAL for unused GID attributes): only what halobox
    /// itself refused (a symlink out of the snapshot, a FIFO) is recorded.
    pub fn text_quiet(&self, host_path: &str) -> Option<String> {
        self.touch_read(host_path);
        match self.root.read(host_path) {
            Ok(bytes) => String::from_utf8(bytes).ok(),
            Err(e) => {
                if e.raw_os_error().is_none() && e.kind() != io::ErrorKind::NotFound {
                    self.note(host_path, e.to_string());
                }
                None
            }
        }
    }

    /// Raw bytes (for NUL-separated procfs files); absence is not recorded.
    pub fn bytes(&self, host_path: &str) -> Option<Vec<u8>> {
        self.touch_read(host_path);
        match self.root.read(host_path) {
            Ok(b) => Some(b),
            Err(e) => {
                self.record_io(host_path, &e);
                None
            }
        }
    }

    /// The file's content with surrounding whitespace removed.
    pub fn line(&self, host_path: &str) -> Option<String> {
        self.text(host_path).map(|s| s.trim().to_string())
    }

    /// The sorted names in a directory; `None` when it does not exist.
    pub fn dir(&self, host_path: &str) -> Option<Vec<String>> {
        self.touch_stat(host_path);
        match self
            .root
            .resolve(host_path, true)
            .and_then(std::fs::read_dir)
        {
            Ok(entries) => {
                let mut names: Vec<String> = entries
                    .filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect();
                names.sort_by(|a, b| natural_cmp(a, b));
                Some(names)
            }
            Err(e) => {
                self.record_io(host_path, &e);
                None
            }
        }
    }

    /// The host paths of the entries of `dir` whose names end in `suffix`,
    /// in byte order (a shell glob's order in the C locale, as drop-in
    /// directories are read); none when `dir` does not exist.
    pub fn files_ending(&self, dir: &str, suffix: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .dir(dir)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.ends_with(suffix))
            .collect();
        names.sort();
        names.into_iter().map(|n| format!("{dir}/{n}")).collect()
    }

    /// True when the host path exists (a file, directory or device node).
    pub fn exists(&self, host_path: &str) -> bool {
        self.touch_stat(host_path);
        match self.root.resolve(host_path, false) {
            Ok(real) => std::fs::symlink_metadata(real).is_ok(),
            Err(e) => {
                self.record_io(host_path, &e);
                false
            }
        }
    }

    /// The metadata of what the host path names (symlinks followed inside a
    /// snapshot); `None` when it does not exist or cannot be read (recorded).
    pub fn metadata(&self, host_path: &str) -> Option<std::fs::Metadata> {
        self.touch_stat(host_path);
        let got = self.root.resolve(host_path, true).and_then(|real| {
            if self.root.is_live() {
                std::fs::metadata(real)
            } else {
                std::fs::symlink_metadata(real)
            }
        });
        got.map_err(|e| self.record_io(host_path, &e)).ok()
    }

    /// The last path component a symlink points at (e.g. a driver name).
    pub fn link_name(&self, host_path: &str) -> Option<String> {
        self.touch(|a| &mut a.links, host_path);
        let real = self.root.resolve(host_path, false).ok()?;
        let target = std::fs::read_link(real).ok()?;
        target.file_name()?.to_str().map(str::to_string)
    }

    fn record_io(&self, host_path: &str, e: &io::Error) {
        if e.kind() != io::ErrorKind::NotFound {
            self.note(host_path, e.to_string());
        }
    }
}

/// Orders names so that `node10` comes after `node9`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |s: &str| {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, tail) = s.split_at(s.len() - digits);
        (head.to_string(), tail.parse::<u64>().ok())
    };
    let (ha, na) = split(a);
    let (hb, nb) = split(b);
    ha.cmp(&hb).then(na.cmp(&nb)).then(a.cmp(b))
}
