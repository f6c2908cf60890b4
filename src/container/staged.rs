//! The folder podman and docker containers see as `/run/halobox/bin`: it
//! holds only halobox, under halobox's data folder
//! (`~/.local/share/halobox/bin`), never the folder the binary happens to
//! sit in (`$HOME`, `~/Downloads`), whose other files the image's code
//! could read.
//!
//! The binary there is a hard link to the running one where the filesystem
//! allows it, else a copy. An upgrade by rename makes a new binary; the
//! next halobox command that uses a container ([`stage`]) puts it there by
//! a rename inside this folder, which running containers see at once, as
//! they bind the folder, not the file.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The binary's name in the folder.
pub const NAME: &str = "halobox";

/// The folder: `$XDG_DATA_HOME/halobox/bin`, else
/// `~/.local/share/halobox/bin`; `None` without a home.
pub fn dir() -> Option<PathBuf> {
    dirs::data_dir()
        .or_else(|| dirs::home_dir().map(|h| h.join(".local/share")))
        .map(|d| d.join("halobox/bin"))
}

/// Makes the folder hold this halobox binary (when it does not already)
/// and returns the folder.
pub fn stage() -> io::Result<PathBuf> {
    let dir = dir().ok_or_else(|| {
        io::Error::other("no home folder to keep the copy of halobox that containers see in")
    })?;
    let exe = std::env::current_exe()?.canonicalize()?;
    stage_into(&exe, &dir)?;
    Ok(dir)
}

/// [`stage`] when the folder exists (a refresh made a container that
/// binds it), as commands that use a container do; failures are ignored:
/// the container keeps the halobox it had.
pub fn refresh_if_present() {
    if dir().is_some_and(|d| d.is_dir()) {
        let _ = stage();
    }
}

/// Makes `dir/halobox` the binary `exe`: nothing when it is that file
/// already (same inode) or a copy of it (same size and time); else a hard
/// link, or a copy with its time, under a name of this process, renamed
/// over it.
pub fn stage_into(exe: &Path, dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    if !fs::symlink_metadata(dir)?.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a folder (a symlink?)",
            dir.display()
        )));
    }
    let target = dir.join(NAME);
    let src = fs::metadata(exe)?;
    if let Ok(cur) = fs::symlink_metadata(&target) {
        let same_inode = cur.dev() == src.dev() && cur.ino() == src.ino();
        let same_copy = cur.is_file()
            && cur.len() == src.len()
            && cur.mtime() == src.mtime()
            && cur.mtime_nsec() == src.mtime_nsec();
        if same_inode || same_copy {
            return Ok(());
        }
    }
    let tmp = dir.join(format!(".{NAME}.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let placed = (|| {
        if fs::hard_link(exe, &tmp).is_err() {
            fs::copy(exe, &tmp)?;
            let f = fs::File::options().write(true).open(&tmp)?;
            f.set_modified(src.modified()?)?;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))?;
        }
        fs::rename(&tmp, &target)
    })();
    if placed.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_binary_replaces_the_copy_by_rename() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("halobox");
        fs::write(&exe, "one").unwrap();
        let dir = t.path().join("data/halobox/bin");
        stage_into(&exe, &dir).unwrap();
        let first = fs::metadata(dir.join(NAME)).unwrap().ino();
        assert_eq!(fs::read_to_string(dir.join(NAME)).unwrap(), "one");
        stage_into(&exe, &dir).unwrap();
        assert_eq!(fs::metadata(dir.join(NAME)).unwrap().ino(), first);
        let next = t.path().join(".new");
        fs::write(&next, "two!").unwrap();
        fs::rename(&next, &exe).unwrap();
        stage_into(&exe, &dir).unwrap();
        assert_eq!(fs::read_to_string(dir.join(NAME)).unwrap(), "two!");
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [NAME]);
    }
}
