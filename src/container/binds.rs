//! What halobox puts into the containers it makes besides devices: its own
//! binary, read-only (so `cluster join` and the bench servers run inside),
//! and the Hugging Face cache (so `refresh` never throws weights away).
//!
//! podman and docker containers get both as bind mounts. toolbox and
//! distrobox containers already see the host's `/` under `/run/host` and
//! share `$HOME`, so they get neither; halobox runs there from
//! `/run/host/<its real path>`.
//!
//! podman and docker containers get the folder of [`super::staged`], which
//! holds only halobox, never the folder the binary sits in. The *folder*
//! is bound, not the file: an upgrade by rename makes a new inode, which a
//! bound file would never show; halobox puts the new one into that folder
//! by a rename the next time it uses a container.
//!
//! An `HF_HOME` that is `/`, a system folder or the home folder itself (or
//! one above it) is refused ([`refuse_hf_home`]): the container would see
//! all of it.

use std::collections::HashMap;
use std::path::Path;

use super::model::{ContainerSpec, Mount};
use crate::backend::Backend;

/// Where a podman/docker container sees halobox's own folder
/// ([`super::staged`]).
pub const BIN_DIR: &str = "/run/halobox/bin";
/// Where toolbox and distrobox containers see the host's `/`.
pub const HOST_ROOT: &str = "/run/host";
/// Label with the path of halobox inside the container.
pub const LABEL_HALOBOX: &str = "dev.halobox.halobox";
/// The Hugging Face cache variable (`huggingface_hub` and vLLM read it).
pub const HF_HOME: &str = "HF_HOME";

/// The path of halobox inside a `backend` container, when the host binary
/// is at `exe` (its real path).
pub fn inside_path(backend: Backend, exe: &Path) -> String {
    match backend {
        Backend::Podman | Backend::Docker => format!("{BIN_DIR}/{}", super::staged::NAME),
        Backend::Toolbox | Backend::Distrobox => format!("{HOST_ROOT}{}", exe.display()),
    }
}

/// The path of halobox inside an existing container: its label (what it was
/// made with), else, for toolbox/distrobox, the host binary `exe` under
/// `/run/host`. `None`: a podman/docker container made without it.
pub fn existing_inside_path(
    labels: &HashMap<String, String>,
    backend: Option<&str>,
    exe: &Path,
) -> Option<String> {
    match backend {
        Some("toolbox") => Some(inside_path(Backend::Toolbox, exe)),
        Some("distrobox") => Some(inside_path(Backend::Distrobox, exe)),
        _ => labels.get(LABEL_HALOBOX).cloned(),
    }
}

/// The Hugging Face cache on the host: `HF_HOME` when set, else
/// `~/.cache/huggingface` (as `huggingface_hub` decides).
pub fn hf_home(env_hf_home: Option<&str>, home: Option<&str>) -> Option<String> {
    match env_hf_home.filter(|v| v.starts_with('/')) {
        Some(v) => Some(v.trim_end_matches('/').to_string()),
        None => home.map(|h| format!("{}/.cache/huggingface", h.trim_end_matches('/'))),
    }
}

/// Folders and files an `HF_HOME` may not be, or (the first list) be
/// under: the container would see them whole.
const SYSTEM_TREES: [&str; 12] = [
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/dev", "/proc", "/sys",
    "/run",
];
const SYSTEM_FOLDERS: [&str; 11] = [
    "/var", "/var/lib", "/var/tmp", "/root", "/home", "/tmp", "/opt", "/srv", "/mnt", "/media",
    "/snap",
];

/// Why `dir` (an absolute host path, symlinks resolved) cannot be the
/// Hugging Face cache bound into containers: `/`, a system folder (or
/// anything under /etc, /usr, /proc and the like), or the home folder
/// `home` or a folder above it. `None`: it may.
pub fn refuse_hf_home(dir: &str, home: Option<&str>) -> Option<String> {
    let dir = dir.trim_end_matches('/');
    let under = |top: &str| dir == top || dir.starts_with(&format!("{top}/"));
    let why = if dir.is_empty() {
        "the whole filesystem (/)"
    } else if SYSTEM_TREES.iter().any(|t| under(t)) || SYSTEM_FOLDERS.contains(&dir) {
        "a system folder"
    } else if home.is_some_and(|h| {
        let h = h.trim_end_matches('/');
        h == dir || h.starts_with(&format!("{dir}/"))
    }) {
        "the home folder (or a folder holding it)"
    } else {
        return None;
    };
    Some(format!(
        "HF_HOME={} is {why}: containers would see all of it (ssh keys, credentials)\n  hint: use a folder of its own, e.g. `export HF_HOME=$HOME/.cache/huggingface`",
        if dir.is_empty() { "/" } else { dir }
    ))
}

/// Adds halobox's binary and the Hugging Face cache (`hf_home` on the
/// host) to `spec`, as the backend needs them: `exe` (the binary's real
/// path) names it for toolbox and distrobox, which see the host's `/`;
/// podman and docker get `staged`, the folder that holds only halobox
/// ([`super::staged`]).
pub fn apply(
    spec: &mut ContainerSpec,
    backend: Backend,
    exe: Option<&Path>,
    staged: Option<&Path>,
    hf_home: Option<&str>,
) {
    match backend {
        Backend::Podman | Backend::Docker => {
            if let Some(dir) = staged {
                spec.labels
                    .insert(LABEL_HALOBOX.into(), inside_path(backend, dir));
                spec.mounts
                    .push(Mount::new(&dir.display().to_string(), BIN_DIR, &["ro"]));
            }
        }
        Backend::Toolbox | Backend::Distrobox => {
            if let Some(exe) = exe {
                spec.labels
                    .insert(LABEL_HALOBOX.into(), inside_path(backend, exe));
            }
        }
    }
    if !matches!(backend, Backend::Podman | Backend::Docker) {
        return;
    }
    match hf_home {
        Some(dir) => {
            spec.mounts.push(Mount::new(dir, dir, &[]));
            spec.ensure_dirs.push(dir.to_string());
            spec.env.push((HF_HOME.into(), dir.to_string()));
        }
        None => spec.notes.push(
            "no home folder and no HF_HOME: downloaded weights live in the container and go with it on the next refresh".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_paths() {
        let exe = Path::new("/usr/local/bin/halobox");
        assert_eq!(
            inside_path(Backend::Podman, exe),
            "/run/halobox/bin/halobox"
        );
        assert_eq!(
            inside_path(Backend::Toolbox, exe),
            "/run/host/usr/local/bin/halobox"
        );
        let mut labels = HashMap::new();
        assert_eq!(existing_inside_path(&labels, Some("podman"), exe), None);
        labels.insert(LABEL_HALOBOX.into(), "/run/halobox/bin/hb".into());
        assert_eq!(
            existing_inside_path(&labels, Some("docker"), exe).as_deref(),
            Some("/run/halobox/bin/hb")
        );
        assert_eq!(
            existing_inside_path(&labels, Some("distrobox"), exe).as_deref(),
            Some("/run/host/usr/local/bin/halobox")
        );
    }

    #[test]
    fn hf_home_that_exposes_the_system_or_the_home_is_refused() {
        let home = Some("/home/a");
        for bad in [
            "/",
            "/etc",
            "/etc/ssh",
            "/usr/share",
            "/var",
            "/root",
            "/home",
            "/home/a",
            "/home/a/",
            "/tmp",
            "/proc/1",
        ] {
            assert!(refuse_hf_home(bad, home).is_some(), "{bad}");
        }
        for good in [
            "/home/a/.cache/huggingface",
            "/var/lib/hf",
            "/srv/models",
            "/mnt/nvme/hf",
            "/root/.cache/huggingface",
            "/tmp/x/hf",
        ] {
            assert_eq!(refuse_hf_home(good, home), None, "{good}");
        }
        let why = refuse_hf_home("/home/a", home).unwrap();
        assert!(
            why.starts_with("HF_HOME=/home/a is the home folder"),
            "{why}"
        );
        assert!(why.contains("\n  hint: "), "{why}");
    }

    #[test]
    fn hf_home_from_env_or_home() {
        assert_eq!(
            hf_home(Some("/data/hf/"), Some("/home/a")).as_deref(),
            Some("/data/hf")
        );
        assert_eq!(
            hf_home(None, Some("/home/a")).as_deref(),
            Some("/home/a/.cache/huggingface")
        );
        assert_eq!(
            hf_home(Some("relative"), Some("/root")).as_deref(),
            Some("/root/.cache/huggingface")
        );
        assert_eq!(hf_home(None, None), None);
    }
}
