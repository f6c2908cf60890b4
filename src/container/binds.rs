//! What halobox puts into the containers it makes besides devices: its own
//! binary, read-only (so `cluster join` and the bench servers run inside),
//! and the Hugging Face cache (so `refresh` never throws weights away).
//!
//! podman and docker containers get both as bind mounts. toolbox and
//! distrobox containers already see the host's `/` under `/run/host` and
//! share `$HOME`, so they get neither; halobox runs there from
//! `/run/host/<its real path>`.
//!
//! The binary's *folder* is bound, not the file: replacing the binary by a
//! rename (what `cargo install`, package managers and `install` do) makes a
//! new inode, and a bound file would keep showing the old one. With the
//! folder bound, an upgrade in place reaches every container at once; a
//! binary moved to another folder needs `halobox refresh`.

use std::collections::HashMap;
use std::path::Path;

use super::backend::Backend;
use super::model::{ContainerSpec, Mount};

/// Where a podman/docker container sees the folder of the halobox binary
/// that created it.
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
        Backend::Podman | Backend::Docker => {
            let name = exe
                .file_name()
                .map_or("halobox".into(), |n| n.to_string_lossy().into_owned());
            format!("{BIN_DIR}/{name}")
        }
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

/// Adds halobox's binary (`exe`, its real path) and the Hugging Face cache
/// (`hf_home` on the host) to `spec`, as the backend needs them.
pub fn apply(
    spec: &mut ContainerSpec,
    backend: Backend,
    exe: Option<&Path>,
    hf_home: Option<&str>,
) {
    if let Some(exe) = exe {
        spec.labels
            .insert(LABEL_HALOBOX.into(), inside_path(backend, exe));
        if matches!(backend, Backend::Podman | Backend::Docker)
            && let Some(dir) = exe.parent()
        {
            spec.mounts
                .push(Mount::new(&dir.display().to_string(), BIN_DIR, &["ro"]));
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
