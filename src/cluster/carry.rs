//! vLLM's list of variables it must not copy from the driver to its Ray
//! workers: `ray_non_carry_over_env_vars.json` (a JSON array of names) in
//! vLLM's config folder (`$VLLM_CONFIG_ROOT`, else
//! `$XDG_CONFIG_HOME/vllm`, else `~/.config/vllm`) of the user vLLM runs as.
//! vLLM copies the driver's `NCCL_*`, `VLLM_*`, … to every worker
//! (vllm-project/vllm#14099); without this list the head's interface, HCA,
//! GID index and address would replace each worker's own.
//!
//! vLLM reads it where its driver runs (the head) and copies every other
//! variable of the driver to the workers, so the head's list must name
//! whatever differs between nodes: `join` writes the same list on every
//! node ([`super::env::per_node_names`]) where Ray starts (in the
//! container, as the user Ray and vLLM run as), adding halobox's names to
//! whatever the file already lists.
//!
//! Checked against vLLM v0.32.0 (VLLM_VERSION of
//! images/vllm-therock-gfx1151.toml): `vllm/ray/ray_env.py` reads
//! `ray_non_carry_over_env_vars.json` under `envs.VLLM_CONFIG_ROOT`, which
//! `vllm/envs.py` takes from `VLLM_CONFIG_ROOT`, else `$XDG_CONFIG_HOME/vllm`,
//! else `~/.config/vllm`.

use std::path::{Path, PathBuf};

/// The file's name in vLLM's config folder.
pub const FILE: &str = "ray_non_carry_over_env_vars.json";

/// The file for this process's user, from its environment.
pub fn path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    locate(
        var("VLLM_CONFIG_ROOT").as_deref(),
        var("XDG_CONFIG_HOME").as_deref(),
        var("HOME").as_deref(),
    )
}

/// Where vLLM looks, given its three variables (as vllm/envs.py decides).
pub fn locate(config_root: Option<&str>, xdg: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    let dir = match (config_root, xdg, home) {
        (Some(root), _, _) => PathBuf::from(root),
        (None, Some(x), _) => Path::new(x).join("vllm"),
        (None, None, Some(h)) => Path::new(h).join(".config/vllm"),
        (None, None, None) => return None,
    };
    Some(dir.join(FILE))
}

/// The file's new text: the names it lists (`existing`, when there is a
/// file) and `names`, sorted and without repeats. A file that is not a JSON
/// list of names is an error: it is the user's, and is left alone.
pub fn merge(existing: Option<&str>, names: &[String]) -> Result<String, String> {
    let mut all: Vec<String> = match existing.map(str::trim) {
        None | Some("") => Vec::new(),
        Some(text) => serde_json::from_str::<Vec<String>>(text)
            .map_err(|e| format!("it is not a JSON list of variable names ({e})"))?,
    };
    all.extend(names.iter().cloned());
    all.sort();
    all.dedup();
    Ok(serde_json::to_string_pretty(&all).expect("names serialise") + "\n")
}

/// Adds `names` to the file at `path` (made with its folder when missing,
/// replaced atomically).
pub fn write(path: &Path, names: &[String]) -> anyhow::Result<()> {
    let existing = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    };
    let text = merge(existing.as_deref(), names).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e}\n  hint: fix it (vLLM reads a list such as [\"NCCL_SOCKET_IFNAME\"]) or remove it (`rm {}`); halobox adds its names to it",
            path.display(),
            path.display()
        )
    })?;
    if existing.as_deref() == Some(text.as_str()) {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    crate::confine::write_atomic(path, text.as_bytes(), 0o666)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_vllm_looks() {
        assert_eq!(
            locate(Some("/etc/vllm"), Some("/x"), Some("/root")).unwrap(),
            Path::new("/etc/vllm/ray_non_carry_over_env_vars.json")
        );
        assert_eq!(
            locate(None, Some("/x"), Some("/root")).unwrap(),
            Path::new("/x/vllm/ray_non_carry_over_env_vars.json")
        );
        assert_eq!(
            locate(None, None, Some("/home/a")).unwrap(),
            Path::new("/home/a/.config/vllm/ray_non_carry_over_env_vars.json")
        );
        assert_eq!(locate(None, None, None), None);
    }

    #[test]
    fn merge_keeps_the_users_names() {
        let names = vec!["VLLM_HOST_IP".to_string(), "NCCL_IB_HCA".into()];
        assert_eq!(
            merge(None, &names).unwrap(),
            "[\n  \"NCCL_IB_HCA\",\n  \"VLLM_HOST_IP\"\n]\n"
        );
        let text = merge(Some("[\"MY_VAR\", \"VLLM_HOST_IP\"]"), &names).unwrap();
        let v: Vec<String> = serde_json::from_str(&text).unwrap();
        assert_eq!(v, ["MY_VAR", "NCCL_IB_HCA", "VLLM_HOST_IP"]);
        assert!(merge(Some("{\"a\": 1}"), &names).is_err());
    }

    #[test]
    fn write_adds_and_refuses_a_foreign_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vllm").join(FILE);
        write(&p, &["A".into()]).unwrap();
        write(&p, &["B".into()]).unwrap();
        let v: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v, ["A", "B"]);
        std::fs::write(&p, "not json").unwrap();
        let e = write(&p, &["C".into()]).unwrap_err().to_string();
        assert!(e.contains("not a JSON list") && e.contains("hint:"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "not json");
    }
}
