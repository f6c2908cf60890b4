//! One `setup` or `setup --undo` at a time per tree (the live host, or one
//! snapshot): an `flock` on a file in halobox's private lock folder
//! ([`crate::lock::lock_dir`]), holding the pid of the run that
//! has it. The lock goes away with its process, however it ends.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};

use crate::lock::{holder, lock_dir, open_file, write_pid};

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
    let file = open_file(&path)
        .with_context(|| format!("cannot open the setup lock {}", path.display()))?;
    let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(f) => f,
        Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
            let holder = holder(&mut file)
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
    write_pid(&mut file).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(SetupLock { _file: file })
}
