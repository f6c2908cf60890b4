//! What `setup` changed, so `setup --undo` can put it back: every file it
//! wrote (with its backup, or "created"), every directory it created and
//! every command it ran. Saved after each change, so a run that stops half
//! way is still undone exactly.
//!
//! Files are reached through [`Tree`]: on the live host paths are used as
//! they are; in a snapshot every write stays inside it ([`confine`]).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::confine;

/// Where the journal lives (host path) when halobox runs as root or writes
/// a snapshot.
pub const JOURNAL: &str = "/var/lib/halobox/setup-journal.json";

/// The tree setup writes: `/` or a snapshot.
#[derive(Debug, Clone)]
pub struct Tree {
    base: Option<PathBuf>,
}

impl Tree {
    /// The live host.
    pub fn live() -> Self {
        Self { base: None }
    }

    /// A snapshot tree.
    pub fn sysroot(dir: &Path) -> io::Result<Self> {
        Ok(Self {
            base: Some(std::path::absolute(dir)?),
        })
    }

    /// True for a snapshot.
    pub fn is_sysroot(&self) -> bool {
        self.base.is_some()
    }

    /// The real path of `host_path`, its last component never followed (a
    /// symlink there is replaced, not written through).
    pub fn real(&self, host_path: &str) -> io::Result<PathBuf> {
        match &self.base {
            None => Ok(PathBuf::from(host_path)),
            Some(base) => confine::resolve(base, host_path, false),
        }
    }
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// A directory that did not exist (recorded before it is created).
    Dir {
        /// Host path.
        path: String,
        /// The user (uid, gid) root created it as, in their home.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<(u32, u32)>,
    },
    /// A file written: `backup` holds what was there (`None`: it was created).
    File {
        /// Host path.
        path: String,
        /// Host path of the backup.
        backup: Option<String>,
        /// What setup wrote.
        written: String,
        /// The user (uid, gid) root wrote it as, in their home.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<(u32, u32)>,
        /// Recorded, not yet known to be done: the run stopped between
        /// recording the write and finishing it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pending: bool,
    },
    /// A command that ran (`pending`: recorded before it ran, and the run
    /// stopped before it finished).
    Command {
        /// The command.
        #[serde(flatten)]
        cmd: super::Cmd,
        /// See [`Entry::File`]'s `pending`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pending: bool,
    },
}

/// Every change of every run not yet undone.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Journal {
    /// Directories created to hold the journal itself.
    pub own_dirs: Vec<String>,
    /// Changes, oldest first.
    pub entries: Vec<Entry>,
}

/// The journal of `tree` at host path `path`, and where it is kept.
pub struct Store {
    tree: Tree,
    path: String,
    /// The journal.
    pub journal: Journal,
}

impl Store {
    /// Opens the journal at host path `path` (empty when absent).
    pub fn open(tree: Tree, path: &str) -> anyhow::Result<Self> {
        let real = tree.real(path)?;
        let journal = match fs::read(&real) {
            Ok(b) => serde_json::from_slice(&b).with_context(|| {
                format!(
                    "setup journal {} is damaged\n  hint: it lists what setup changed; restore the FILE.halobox-bak.* backups by hand, then `sudo rm {}`",
                    real.display(),
                    real.display()
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Journal::default(),
            Err(e) => return Err(e).context(format!("cannot read {}", real.display())),
        };
        Ok(Self {
            tree,
            path: path.to_string(),
            journal,
        })
    }

    /// The tree written.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Where the journal is (real path).
    pub fn location(&self) -> PathBuf {
        self.tree
            .real(&self.path)
            .unwrap_or_else(|_| PathBuf::from(&self.path))
    }

    fn save(&mut self) -> anyhow::Result<()> {
        if self.journal.entries.is_empty() {
            return self.remove();
        }
        let body = serde_json::to_string_pretty(&self.journal)?;
        let real = self.tree.real(&self.path)?;
        if self.journal.own_dirs.is_empty() {
            let parent = parent_of(&self.path);
            let missing = missing_dirs(&self.tree, &parent)?;
            if !missing.is_empty() {
                self.journal.own_dirs = missing.clone();
                let body = serde_json::to_string_pretty(&self.journal)?;
                let published = publish_dirs(&self.tree, &missing, &real, body.as_bytes());
                if published.is_err() {
                    self.journal.own_dirs.clear();
                }
                return published
                    .with_context(|| format!("cannot write the setup journal {}", self.path));
            }
        }
        write_atomic(&real, body.as_bytes(), None)
            .with_context(|| format!("cannot write the setup journal {}", self.path))
    }

    fn remove(&mut self) -> anyhow::Result<()> {
        let real = self.tree.real(&self.path)?;
        match fs::remove_file(&real) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).context(format!("cannot remove {}", real.display())),
        }
        remove_stale_temps(&real)?;
        for d in std::mem::take(&mut self.journal.own_dirs).iter().rev() {
            let _ = fs::remove_dir(self.tree.real(d)?);
        }
        Ok(())
    }

    /// Removes what runs killed while writing the journal left: temporary
    /// files and trees beside the journal and each of its folders.
    pub fn tidy(&self) -> anyhow::Result<()> {
        let mut cur = self.path.clone();
        while cur != "/" {
            remove_stale_temps(&self.tree.real(&cur)?)?;
            cur = parent_of(&cur);
        }
        Ok(())
    }

    /// Writes `content` to host path `path`: missing directories created,
    /// an existing file first copied to `FILE.halobox-bak.<date>`, the new
    /// content written to a temporary file and renamed over it. Each change
    /// is recorded in the journal before it is made (the file as pending
    /// until it is written), so a run killed at any point is undone
    /// exactly. `mode` (default 0644) is given to a created file; a
    /// replaced one keeps its owner and mode. With `owner`, root on the
    /// live host does all of it as that user (setfsuid): what it creates is
    /// theirs, and a symlink of theirs cannot lead it where they may not
    /// write.
    pub fn write_file(
        &mut self,
        path: &str,
        content: &str,
        owner: Option<(u32, u32)>,
        mode: Option<u32>,
    ) -> anyhow::Result<()> {
        let owner = owner.filter(|_| !self.tree.is_sysroot() && nix::unistd::geteuid().is_root());
        let dirs = AsUser::run(owner, || missing_dirs(&self.tree, &parent_of(path)))?;
        for d in dirs {
            self.journal.entries.push(Entry::Dir {
                path: d.clone(),
                owner,
            });
            self.save()?;
            let real = self.tree.real(&d)?;
            AsUser::run(owner, || {
                fs::create_dir(&real).with_context(|| format!("cannot create {}", real.display()))
            })?;
        }
        let real = self.tree.real(path)?;
        let existing = AsUser::run(owner, || match fs::symlink_metadata(&real) {
            Ok(m) if m.is_file() => Ok(Some(m)),
            Ok(_) => bail!(
                "{path} exists and is not a regular file\n  hint: setup replaces only regular files: `sudo mv {path} {path}.orig`, then `sudo halobox setup` again"
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).context(format!("cannot inspect {}", real.display())),
        })?;
        let backup_real = existing.as_ref().map(|_| backup_name(&real));
        self.journal.entries.push(Entry::File {
            path: path.to_string(),
            backup: backup_real.as_ref().map(|b| self.tree_path(path, b)),
            written: content.to_string(),
            owner,
            pending: true,
        });
        self.save()?;
        AsUser::run(owner, || {
            if let (Some(meta), Some(b)) = (&existing, &backup_real) {
                copy_new(&real, b).with_context(|| format!("cannot back up {path}"))?;
                keep_owner(b, meta)?;
            }
            let meta = existing
                .as_ref()
                .map(|m| (m.mode() & 0o7777, m.uid(), m.gid()));
            let keep = meta.unwrap_or((mode.unwrap_or(0o644), u32::MAX, u32::MAX));
            write_atomic(&real, content.as_bytes(), Some(keep))
                .with_context(|| format!("cannot write {path}"))
        })?;
        if let Some(Entry::File { pending, .. }) = self.journal.entries.last_mut() {
            *pending = false;
        }
        self.save()
    }

    /// Runs a command through `run`, recorded before it runs (pending) and
    /// marked done after.
    pub fn run(
        &mut self,
        cmd: &super::Cmd,
        run: &dyn Fn(&[String]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.journal.entries.push(Entry::Command {
            cmd: cmd.clone(),
            pending: true,
        });
        self.save()?;
        if let Err(e) = run(&cmd.argv) {
            // It failed: nothing to undo for it.
            self.journal.entries.pop();
            self.save()?;
            return Err(e);
        }
        if let Some(Entry::Command { pending, .. }) = self.journal.entries.last_mut() {
            *pending = false;
        }
        self.save()
    }

    fn tree_path(&self, path: &str, real: &Path) -> String {
        let name = real.file_name().unwrap_or_default().to_string_lossy();
        format!("{}/{name}", parent_of(path))
    }

    /// Undoes every change, newest first: files restored from their backups
    /// (byte for byte) or removed, directories removed, commands reversed;
    /// reload commands run once more at the end. What was written as a user
    /// is undone as that user (their symlinks cannot lead root elsewhere).
    /// Returns one line per change.
    pub fn undo(
        &mut self,
        run: &dyn Fn(&[String]) -> anyhow::Result<()>,
    ) -> anyhow::Result<Vec<String>> {
        self.tidy()?;
        let mut done = Vec::new();
        let mut reloads: Vec<Vec<String>> = Vec::new();
        while let Some(entry) = self.journal.entries.last().cloned() {
            let held = super::hold::Held::start()?;
            match &entry {
                Entry::Dir { path, owner } => {
                    let real = self.tree.real(path)?;
                    match AsUser::run(*owner, || Ok(fs::remove_dir(&real)))? {
                        Ok(()) => done.push(format!("removed directory {path}")),
                        // Recorded, then the run stopped before creating it.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => done.push(format!("kept directory {path}: {e}")),
                    }
                }
                Entry::File {
                    path,
                    backup,
                    written,
                    owner,
                    pending,
                } => done.push(AsUser::run(*owner, || {
                    self.restore(path, backup.as_deref(), written, *pending)
                })?),
                Entry::Command { cmd, pending } => match &cmd.undo {
                    Some(undo) if *pending => {
                        // It may or may not have run: its undo is tried.
                        let how = match run(undo) {
                            Ok(()) => "ran",
                            Err(_) => "tried",
                        };
                        done.push(format!(
                            "{how} {} (setup stopped while running {})",
                            crate::shell::line(undo),
                            cmd.line()
                        ));
                    }
                    Some(undo) => {
                        run(undo)?;
                        done.push(format!("ran {}", crate::shell::line(undo)));
                    }
                    None => {
                        if !reloads.contains(&cmd.argv) {
                            reloads.insert(0, cmd.argv.clone());
                        }
                    }
                },
            }
            self.journal.entries.pop();
            self.save()?;
            drop(held);
        }
        for argv in reloads {
            run(&argv)?;
            done.push(format!("ran {}", crate::shell::line(&argv)));
        }
        self.remove()?;
        Ok(done)
    }

    fn restore(
        &self,
        path: &str,
        backup: Option<&str>,
        written: &str,
        pending: bool,
    ) -> anyhow::Result<String> {
        let real = self.tree.real(path)?;
        remove_stale_temps(&real)?;
        let now = fs::read(&real).ok();
        if pending && now.as_deref() != Some(written.as_bytes()) {
            // Recorded, then the run stopped before the new content was in
            // place: the file is as it was; its backup copy goes.
            if let Some(b) = backup {
                match fs::remove_file(self.tree.real(b)?) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(e).context(format!("cannot remove {b}"));
                    }
                    _ => {}
                }
            }
            return Ok(format!("kept {path} (setup stopped before writing it)"));
        }
        let mut note = String::new();
        if now.is_some() && now.as_deref() != Some(written.as_bytes()) {
            let keep = PathBuf::from(format!("{}.halobox-changed", real.display()));
            fs::rename(&real, &keep)
                .with_context(|| format!("cannot keep {path} (changed after setup) aside"))?;
            note = format!(
                " (it was changed after setup; that version is kept as {})",
                keep.display()
            );
        }
        match backup {
            Some(b) => {
                fs::rename(self.tree.real(b)?, &real)
                    .with_context(|| format!("cannot restore {path} from {b}"))?;
                Ok(format!("restored {path}{note}"))
            }
            None => {
                match fs::remove_file(&real) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e).context(format!("cannot remove {path}")),
                }
                Ok(format!("removed {path}{note}"))
            }
        }
    }
}

fn parent_of(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".into(),
        Some(i) => path[..i].to_string(),
    }
}

/// The missing directories of host path `dir`, outermost first.
fn missing_dirs(tree: &Tree, dir: &str) -> anyhow::Result<Vec<String>> {
    let mut missing = Vec::new();
    let mut cur = dir.to_string();
    while cur != "/" && fs::symlink_metadata(tree.real(&cur)?).is_err() {
        missing.push(cur.clone());
        cur = parent_of(&cur);
    }
    missing.reverse();
    Ok(missing)
}

/// Creates the directories `missing` (outermost first) holding the file
/// `real` with `bytes`, all at once: they are made under a temporary name
/// beside the outermost one, which is then renamed into place, so a run
/// killed half way leaves only that temporary tree (removed by the next).
fn publish_dirs(tree: &Tree, missing: &[String], real: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let top = tree.real(&missing[0])?;
    remove_stale_temps(&top)?;
    let tmp = temp_name(&top);
    fs::create_dir(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let rel = real.strip_prefix(&top).unwrap_or(real);
    let file = tmp.join(rel);
    let result = (|| -> anyhow::Result<()> {
        if let Some(parent) = file.parent() {
            fs::create_dir_all(parent)?;
        }
        write_atomic(&file, bytes, None)?;
        fs::rename(&tmp, &top)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// Root acting on the files of another user: this thread's filesystem uid
/// and gid switched to theirs (setfsuid(2)), which also drops root's power
/// to override file permissions, and its supplementary groups to theirs
/// (root's group 0 left behind), until dropped.
struct AsUser {
    uid: u32,
    gid: u32,
    groups: Vec<nix::libc::gid_t>,
}

impl AsUser {
    /// Runs `f` as `owner` when given, else as the caller.
    fn run<T>(
        owner: Option<(u32, u32)>,
        f: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let _guard = match owner {
            Some((uid, gid)) => Some(Self::assume(uid, gid)?),
            None => None,
        };
        f()
    }

    fn assume(uid: u32, gid: u32) -> anyhow::Result<Self> {
        use nix::unistd::{Gid, Uid, User, getgrouplist, getgroups, setfsgid, setfsuid};
        // Their groups as /etc/group lists them; only their own group
        // when the account is gone (an undo after userdel).
        let theirs: Vec<nix::libc::gid_t> = match User::from_uid(Uid::from_raw(uid)).ok().flatten()
        {
            Some(user) => getgrouplist(
                &std::ffi::CString::new(user.name.as_str())?,
                Gid::from_raw(gid),
            )
            .with_context(|| format!("cannot read the groups of {}", user.name))?
            .iter()
            .map(|g| g.as_raw())
            .collect(),
            None => vec![gid],
        };
        let ours: Vec<nix::libc::gid_t> = getgroups()?.iter().map(|g| g.as_raw()).collect();
        set_thread_groups(&theirs)
            .with_context(|| format!("cannot take the groups of uid {uid} to write their files"))?;
        let guard = Self {
            uid: setfsuid(Uid::from_raw(uid)).as_raw(),
            gid: setfsgid(Gid::from_raw(gid)).as_raw(),
            groups: ours,
        };
        // Both calls return the previous id, even when they fail: asking
        // again tells whether the switch happened.
        let now = (
            setfsuid(Uid::from_raw(uid)).as_raw(),
            setfsgid(Gid::from_raw(gid)).as_raw(),
        );
        if now != (uid, gid) {
            bail!("cannot act as uid {uid} gid {gid} to write their files (setfsuid refused)");
        }
        Ok(guard)
    }
}

impl Drop for AsUser {
    fn drop(&mut self) {
        nix::unistd::setfsgid(nix::unistd::Gid::from_raw(self.gid));
        nix::unistd::setfsuid(nix::unistd::Uid::from_raw(self.uid));
        // Failing to restore them would leave root with the user's groups:
        // stop rather than go on.
        if set_thread_groups(&self.groups).is_err() {
            std::process::abort();
        }
    }
}

/// Sets the supplementary groups of this thread alone, as setfsuid does
/// (glibc's setgroups changes every thread of the process).
fn set_thread_groups(groups: &[nix::libc::gid_t]) -> io::Result<()> {
    // SAFETY: the kernel reads `groups.len()` gids from a slice we own.
    let rc = unsafe { nix::libc::syscall(nix::libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `FILE.halobox-bak.<date>`, numbered when that exists already.
fn backup_name(real: &Path) -> PathBuf {
    let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S");
    let base = format!("{}.halobox-bak.{stamp}", real.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while fs::symlink_metadata(&candidate).is_ok() {
        candidate = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    candidate
}

fn keep_owner(path: &Path, meta: &fs::Metadata) -> anyhow::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(path, Some(meta.uid()), Some(meta.gid()))?;
    }
    Ok(())
}

/// `.NAME.halobox-tmp.<pid>` beside `real`: this process's own temporary name.
fn temp_name(real: &Path) -> PathBuf {
    let name = real.file_name().unwrap_or_default().to_string_lossy();
    real.with_file_name(format!(".{name}.halobox-tmp.{}", std::process::id()))
}

/// Removes the temporary files (or trees) of `real` that runs which are
/// gone left behind (`.NAME.halobox-tmp` of older versions, and
/// `.NAME.halobox-tmp.<pid>` whose process has ended or is this one); a
/// running process's own is left alone. Symlinks are removed, never
/// followed.
fn remove_stale_temps(real: &Path) -> io::Result<()> {
    let name = real.file_name().unwrap_or_default().to_string_lossy();
    let prefix = format!(".{name}.halobox-tmp");
    let Some(dir) = real.parent() else {
        return Ok(());
    };
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for e in entries {
        let e = e?;
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = file.strip_prefix(&prefix) else {
            continue;
        };
        let stale = match rest.strip_prefix('.').map(str::parse::<i32>) {
            None if rest.is_empty() => true,
            Some(Ok(pid)) => pid as u32 == std::process::id() || !alive(pid),
            _ => false,
        };
        if !stale {
            continue;
        }
        let path = e.path();
        let is_dir = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        let removed = if is_dir {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// True while process `pid` exists.
fn alive(pid: i32) -> bool {
    pid > 0
        && !matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        )
}

/// Copies `from` to `to`, which must not exist yet (never written through).
fn copy_new(from: &Path, to: &Path) -> io::Result<()> {
    let mut src = fs::File::open(from)?;
    let mut dst = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
    io::copy(&mut src, &mut dst)?;
    dst.sync_all()
}

/// Writes `bytes` to this process's own temporary file beside `real` and
/// renames it over `real`; `mode_owner` is applied before the rename
/// (owner only as root). Temporary files of runs that are gone are removed
/// first (a symlink there is removed, never followed); the new one is
/// created exclusively, so nothing put there meanwhile is written through.
fn write_atomic(real: &Path, bytes: &[u8], mode_owner: Option<(u32, u32, u32)>) -> io::Result<()> {
    remove_stale_temps(real)?;
    let tmp = temp_name(real);
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        let (mode, uid, gid) = mode_owner.unwrap_or((0o644, u32::MAX, u32::MAX));
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
        if uid != u32::MAX && nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&tmp, Some(uid), Some(gid))?;
        }
        fs::rename(&tmp, real)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Runs a command to completion (10 minutes at most), failing with its output.
pub fn run_command(argv: &[String]) -> anyhow::Result<()> {
    let done = crate::proc::run(argv, Duration::from_secs(600))
        .with_context(|| format!("cannot run {}", crate::shell::line(argv)))?;
    match done.status {
        Some(s) if s.success() => Ok(()),
        _ => bail!(
            "{} failed: {}\n  hint: what ran before it is in the setup journal; `halobox setup --undo` reverts it",
            crate::shell::line(argv),
            done.output.trim()
        ),
    }
}
