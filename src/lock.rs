//! One run at a time per engine and container name (refresh, `rm`; setup
//! builds its own lock on [`lock_dir`]): an `flock` on a
//! file under `/run/user/UID/halobox/` (else `halobox/locks` in the
//! user's state folder under the home directory the password database
//! names; a 0700 directory this user owns). Neither depends on the
//! environment, so two runs always meet at the same file, and no other user
//! can make it first, as under a predictable `/tmp` path. The engine is
//! named by what it is, not how its address is spelled
//! ([`engine_identity`]: `unix:///var/run/podman/podman.sock` and
//! `unix:///run/podman/podman.sock` are one engine). The file holds the
//! pid of the run that has it, so a second run can name it. The lock goes
//! away with its process, however that process ends.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};

/// A held refresh lock; dropping it releases it.
#[derive(Debug)]
pub struct RefreshLock {
    _file: Flock<File>,
}

/// Why the lock could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another run holds it.
    #[error(
        "another halobox run{} is changing container {name} on {engine}; lock {}\n  hint: let it finish{}",
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        path.display(),
        if *waitable { ", or pass --wait to wait for it" } else { ", then try again" }
    )]
    Busy {
        /// The container name.
        name: String,
        /// The engine address.
        engine: String,
        /// The pid the holder wrote, if it wrote one yet.
        holder: Option<u32>,
        /// The lock file.
        path: PathBuf,
        /// The command offers `--wait`.
        waitable: bool,
    },
    /// The lock directory or file cannot be used.
    #[error("cannot use the refresh lock {}: {message}", path.display())]
    Unusable {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Takes the lock for `name` on `engine` for `refresh`; with `wait`, blocks
/// until the holder lets go (calling `waiting` once with its pid first).
pub fn acquire(
    engine: &str,
    name: &str,
    wait: bool,
    waiting: &mut dyn FnMut(Option<u32>),
) -> Result<RefreshLock, LockError> {
    match try_acquire(engine, name)? {
        Ok(lock) => Ok(lock),
        Err(LockError::Busy {
            name,
            engine,
            holder,
            path,
            ..
        }) if !wait => Err(LockError::Busy {
            name,
            engine,
            holder,
            path,
            waitable: true,
        }),
        Err(LockError::Busy { holder, path, .. }) => {
            waiting(holder);
            let file = open(&path)?;
            let file = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| {
                LockError::Unusable {
                    path: path.clone(),
                    message: e.to_string(),
                }
            })?;
            Ok(RefreshLock {
                _file: own(file, &path)?,
            })
        }
        Err(other) => Err(other),
    }
}

/// Takes the lock if it is free: `Ok(Err(Busy))` names the holder.
pub fn try_acquire(engine: &str, name: &str) -> Result<Result<RefreshLock, LockError>, LockError> {
    let path = lock_dir()?.join(format!("refresh-{}.lock", key(engine, name)));
    let file = open(&path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(file) => Ok(Ok(RefreshLock {
            _file: own(file, &path)?,
        })),
        Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => Ok(Err(LockError::Busy {
            name: name.to_string(),
            engine: engine.to_string(),
            holder: holder(&mut file),
            path,
            waitable: false,
        })),
        Err((_, e)) => Err(LockError::Unusable {
            path,
            message: e.to_string(),
        }),
    }
}

fn open(path: &Path) -> Result<File, LockError> {
    open_file(path).map_err(|e| LockError::Unusable {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Opens (or makes, 0600) the lock file at `path`, never through a symlink.
pub fn open_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

/// The pid a busy lock's holder wrote into it, when it reads as one.
pub fn holder(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    text.trim().parse().ok()
}

/// Writes this process's pid into a freshly taken lock.
pub fn write_pid(file: &mut Flock<File>) -> std::io::Result<()> {
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| write!(file, "{}", std::process::id()))
}

/// Writes this process's pid into a freshly taken lock.
fn own(mut file: Flock<File>, path: &Path) -> Result<Flock<File>, LockError> {
    write_pid(&mut file).map_err(|e| LockError::Unusable {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(file)
}

/// The directory the locks live in, created 0700 and checked to be this
/// user's own (not a symlink, nobody else can write it): `/run/user/UID`
/// when the system made it for this user, else the user's state folder
/// under the home directory of the password database (never the
/// environment's `XDG_RUNTIME_DIR`, `HOME` or `TMPDIR`, which two runs may
/// not share).
pub fn lock_dir() -> Result<PathBuf, LockError> {
    let uid = nix::unistd::geteuid();
    let runtime = PathBuf::from(format!("/run/user/{}", uid.as_raw()));
    let dir = if runtime
        .symlink_metadata()
        .is_ok_and(|m| m.is_dir() && m.uid() == uid.as_raw())
    {
        runtime.join("halobox")
    } else {
        let home = nix::unistd::User::from_uid(uid)
            .ok()
            .flatten()
            .map(|u| u.dir)
            .filter(|d| d.is_absolute())
            .ok_or_else(|| LockError::Unusable {
                path: runtime.clone(),
                message: format!(
                    "there is no /run/user/{} and uid {} has no home directory in the password database",
                    uid.as_raw(),
                    uid.as_raw()
                ),
            })?;
        let state = home.join(".local/state");
        let dir = state.join("halobox/locks");
        for d in [state.as_path(), &state.join("halobox")] {
            if let Err(e) = DirBuilder::new().recursive(true).mode(0o700).create(d) {
                return Err(LockError::Unusable {
                    path: d.to_path_buf(),
                    message: e.to_string(),
                });
            }
        }
        dir
    };
    private_dir(&dir, uid.as_raw())?;
    Ok(dir)
}

/// The engine behind `address`, as the lock names it: a Unix socket by
/// its real path (symlinks resolved: `/var/run` is `/run`), any other
/// address as written.
pub fn engine_identity(address: &str) -> String {
    match address.strip_prefix("unix://") {
        Some(path) => match std::fs::canonicalize(path) {
            Ok(real) => format!("unix://{}", real.display()),
            Err(_) => address.to_string(),
        },
        None => address.to_string(),
    }
}

/// Creates `dir` 0700 if missing and checks it is a directory of `uid`'s
/// that no one else may write.
pub fn private_dir(dir: &Path, uid: u32) -> Result<(), LockError> {
    if let Err(e) = DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        return Err(LockError::Unusable {
            path: dir.to_path_buf(),
            message: e.to_string(),
        });
    }
    check_private(dir, uid)
}

/// Checks that an existing `dir` is a directory of `uid`'s that no one else
/// may write (not a symlink).
pub fn check_private(dir: &Path, uid: u32) -> Result<(), LockError> {
    let bad = |message: String| LockError::Unusable {
        path: dir.to_path_buf(),
        message,
    };
    let m = std::fs::symlink_metadata(dir).map_err(|e| bad(e.to_string()))?;
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o022 != 0 {
        return Err(bad(format!(
            "it must be a directory of uid {uid} that only its owner can write (it is {}, uid {}, mode {:o})\n  hint: remove it, halobox creates it again",
            if m.file_type().is_symlink() {
                "a symlink"
            } else if m.is_dir() {
                "a directory"
            } else {
                "a file"
            },
            m.uid(),
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

/// A short, file-name-safe key for an engine (its [`engine_identity`]) and
/// container name.
pub fn key(engine: &str, name: &str) -> String {
    let digest = Sha256::digest(engine_identity(engine).as_bytes());
    format!("{}-{name}", &hex::encode(digest)[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_engine_under_two_spellings_is_one_key() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("run");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("podman.sock"), "").unwrap();
        std::os::unix::fs::symlink(&real, d.path().join("var-run")).unwrap();
        let a = format!("unix://{}/podman.sock", real.display());
        let b = format!("unix://{}/var-run/podman.sock", d.path().display());
        assert_eq!(key(&a, "vllm"), key(&b, "vllm"));
        assert_ne!(key(&a, "vllm"), key(&a, "other"));
        assert_eq!(engine_identity("tcp://n1:2375"), "tcp://n1:2375");
        assert_ne!(key("tcp://n1:2375", "vllm"), key(&a, "vllm"));
    }
}
