//! The OCI runtime podman uses, from `containers.conf` (`[engine] runtime`),
//! read in podman's order: later files override earlier ones.

use super::reader::Reader;

/// The runtime podman uses when containers.conf names none (podman ≥ 4).
pub const PODMAN_DEFAULT_RUNTIME: &str = "crun";

/// `[engine] runtime` from the system and user containers.conf files.
pub fn read(r: &Reader, home: Option<&str>) -> Option<String> {
    let mut files = vec![
        "/usr/share/containers/containers.conf".to_string(),
        "/etc/containers/containers.conf".to_string(),
    ];
    if r.exists("/etc/containers/containers.conf.d") {
        files.extend(
            r.dir("/etc/containers/containers.conf.d")
                .unwrap_or_default()
                .into_iter()
                .filter(|f| f.ends_with(".conf"))
                .map(|f| format!("/etc/containers/containers.conf.d/{f}")),
        );
    }
    if let Some(home) = home {
        files.push(format!("{home}/.config/containers/containers.conf"));
    }
    let mut runtime = None;
    for f in files {
        let Some(text) = r.text_quiet(&f) else {
            continue;
        };
        match parse_runtime(&text) {
            Ok(Some(rt)) => runtime = Some(rt),
            Ok(None) => {}
            Err(e) => r.note(&f, e),
        }
    }
    runtime
}

/// `[engine] runtime = "…"` of one containers.conf text.
pub fn parse_runtime(text: &str) -> Result<Option<String>, String> {
    let v: toml::Table = toml::from_str(text).map_err(|e| format!("not TOML: {}", e.message()))?;
    Ok(v.get("engine")
        .and_then(|e| e.get("runtime"))
        .and_then(|r| r.as_str())
        .map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_key() {
        assert_eq!(
            parse_runtime("[containers]\ndefault_ulimits = []\n[engine]\nruntime = \"runc\"\n"),
            Ok(Some("runc".into()))
        );
        assert_eq!(
            parse_runtime("[engine]\ncgroup_manager = \"cgroupfs\"\n"),
            Ok(None)
        );
        assert!(parse_runtime("[engine\n").is_err());
    }
}
