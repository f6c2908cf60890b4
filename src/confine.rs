//! Reading a tree (a host snapshot, an unpacked image archive) without
//! leaving it: paths are resolved one component at a time inside the tree,
//! so a symlink that is absolute or climbs out with `..` is refused (never
//! followed into this machine), and only regular files of bounded size are
//! read (a FIFO or device node is an error, not a hang or a driver's `open`).
//! And writing a file in place ([`write_atomic`]) through a temporary file
//! that is made new, never through a link planted at its name.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// Largest host file halobox reads (sysfs and procfs files are a few KiB;
/// `captured/ip-addr.json` of a large host well under this).
pub const MAX_HOST_FILE_BYTES: u64 = 16 << 20;

/// Symlinks followed in one lookup before giving up (Linux's limit).
const MAX_LINKS: u32 = 40;

fn refused(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, msg)
}

fn host_of(stack: &[OsString]) -> String {
    let parts: Vec<String> = stack
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    format!("/{}", parts.join("/"))
}

/// The real path of `host_path` (absolute or relative to the tree) inside
/// the tree at `base`, with every symlink on the way resolved inside it (the
/// last one only when `follow_last`). A missing component ends the walk:
/// the caller's open reports "not found" as usual.
pub fn resolve(base: &Path, host_path: &str, follow_last: bool) -> io::Result<PathBuf> {
    let mut stack: Vec<OsString> = Vec::new();
    let mut pending: Vec<OsString> = Vec::new();
    push_front(&mut pending, Path::new(host_path));
    let mut links = 0;
    while let Some(c) = pending.pop() {
        if c == ".." {
            if stack.pop().is_none() {
                return Err(refused(format!(
                    "{host_path} leads out of the tree with '..'; not followed"
                )));
            }
            continue;
        }
        let real = base.join(stack.iter().collect::<PathBuf>()).join(&c);
        if pending.is_empty() && !follow_last {
            stack.push(c);
            break;
        }
        let meta = match std::fs::symlink_metadata(&real) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                stack.push(c);
                stack.extend(pending.drain(..).rev());
                break;
            }
            Err(e) => return Err(e),
        };
        if !meta.file_type().is_symlink() {
            stack.push(c);
            continue;
        }
        links += 1;
        let target = std::fs::read_link(&real)?;
        stack.push(c);
        let link = host_of(&stack);
        stack.pop();
        if links > MAX_LINKS {
            return Err(refused(format!(
                "{host_path}: more than {MAX_LINKS} symlinks (a loop at {link}?)"
            )));
        }
        if target.is_absolute() {
            return Err(refused(format!(
                "symlink {link} -> {} is absolute: it would leave the tree for this machine's files; not followed",
                target.display()
            )));
        }
        let mut depth = stack.len();
        for part in target.components() {
            match part {
                Component::ParentDir if depth == 0 => {
                    return Err(refused(format!(
                        "symlink {link} -> {} climbs out of the tree; not followed",
                        target.display()
                    )));
                }
                Component::ParentDir => depth -= 1,
                Component::Normal(_) => depth += 1,
                _ => {}
            }
        }
        push_front(&mut pending, &target);
    }
    Ok(base.join(stack.iter().collect::<PathBuf>()))
}

/// Puts the components of `path` in front of `pending` (a stack: the next
/// component is last).
fn push_front(pending: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    pending.extend(parts.into_iter().rev());
}

/// What a non-regular file is, for messages.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

/// Reads a regular file of at most `cap` bytes. Anything else (FIFO,
/// device, socket, directory; with `nofollow` a symlink) is refused before
/// it is opened, and the opened file must be the one checked.
pub fn read_regular(path: &Path, nofollow: bool, cap: u64) -> io::Result<Vec<u8>> {
    let meta = if nofollow {
        std::fs::symlink_metadata(path)?
    } else {
        std::fs::metadata(path)?
    };
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {}, not a regular file; not read", kind_of(&meta)),
        ));
    }
    let mut flags = nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY;
    if nofollow {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    let opened = file.metadata()?;
    if !opened.is_file() || opened.ino() != meta.ino() || opened.dev() != meta.dev() {
        return Err(refused("changed while it was opened; not read".into()));
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {}; not read", crate::units::format_bytes(cap)),
        ));
    }
    Ok(bytes)
}

/// Writes `bytes` to `path` atomically: a new temporary file beside it
/// (made with `O_EXCL` under a random name, so a link or file planted there
/// is never followed or overwritten; `mode` less the umask), synced, then
/// renamed over `path`. A reader sees the old file or the whole new one.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn relative_links_inside_resolve_and_escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let b = dir.path();
        std::fs::create_dir_all(b.join("sys/devices/pci/net/eth0")).unwrap();
        std::fs::write(b.join("sys/devices/pci/net/eth0/mtu"), "9000\n").unwrap();
        std::fs::create_dir_all(b.join("sys/class/net")).unwrap();
        symlink("../../devices/pci/net/eth0", b.join("sys/class/net/eth0")).unwrap();
        symlink("/etc", b.join("sys/class/net/abs")).unwrap();
        symlink("../../../../..", b.join("sys/class/net/up")).unwrap();
        assert_eq!(
            resolve(b, "/sys/class/net/eth0/mtu", true).unwrap(),
            b.join("sys/devices/pci/net/eth0/mtu")
        );
        assert_eq!(
            resolve(b, "/sys/class/net/eth0", false).unwrap(),
            b.join("sys/class/net/eth0")
        );
        let e = resolve(b, "/sys/class/net/abs/passwd", true).unwrap_err();
        assert!(e.to_string().contains("/sys/class/net/abs -> /etc"), "{e}");
        let e = resolve(b, "/sys/class/net/up/etc/passwd", true).unwrap_err();
        assert!(e.to_string().contains("climbs out"), "{e}");
        symlink("loop", b.join("sys/loop")).unwrap();
        assert!(resolve(b, "/sys/loop", true).is_err());
        assert_eq!(
            resolve(b, "/sys/none/x", true).unwrap(),
            b.join("sys/none/x")
        );
    }
}
