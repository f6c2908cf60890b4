//! One `setup` or `setup --undo` at a time per tree (the live host, or one
//! snapshot): an `flock` on a file in halobox's private lock folder
//! ([`crate::refresh::lock::lock_dir`]), holding the pid of the run that
//! has it. The lock goes away with its process, however it ends.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};

use crate::refresh::lock::lock_dir;

/// A held setup lock; dropping it releases it.
#[derive(Debug)]
pub struct SetupLock {
    _file: Flock<File>,
}

/// Takes the lock of the tree at `root` (`/` for the live host), or fails
/// naming the run that has it.
pub fn acquire(root: &Path) -> anyhow::Result<SetupLock> {
    let real = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let key = hex::encode(&Sha256::digest(real.as_os_str().as_encoded_bytes())[..8]);
    let dir = lock_dir().map_err(|e| anyhow::anyhow!("{e}"))?;
    let path: PathBuf = dir.join(format!("setup-{key}.lock"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)
        .with_context(|| format!("cannot open the setup lock {}", path.display()))?;
    let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(f) => f,
        Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = text
                .trim()
                .parse::<u32>()
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default();
            bail!(
                "another halobox setup{holder} is changing {}; nothing changed (lock {})\n  hint: let it finish (`pgrep -a halobox` shows it), then run this `halobox setup` again",
                real.display(),
                path.display()
            );
        }
        Err((_, e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
    };
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| write!(file, "{}", std::process::id()))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(SetupLock { _file: file })
}
