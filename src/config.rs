//! The user's settings: `~/.config/halobox/config.toml` (or
//! `$XDG_CONFIG_HOME/halobox/config.toml`), then environment, then flags.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::backend::Backend;

/// The image `refresh` pulls by default: the channel this project publishes
/// (`images/vllm-therock-gfx1151.toml` `[publish] repository`, pushed by
/// `.github/workflows/publish.yml`). `image` in the config file,
/// `HALOBOX_IMAGE` or `--image` choose another.
pub const DEFAULT_IMAGE: &str = "ghcr.io/halobox/vllm-therock-gfx1151";
/// The community image the Strix Halo guides use, one flag away:
/// `halobox refresh --image docker.io/kyuz0/vllm-therock-gfx1151`.
pub const COMMUNITY_IMAGE: &str = "docker.io/kyuz0/vllm-therock-gfx1151";
/// The default container name (as in the guides).
pub const DEFAULT_NAME: &str = "vllm";

/// Settings from the config file; every key is optional.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Image repository (or full reference) to refresh from.
    pub image: Option<String>,
    /// Engine address (`unix:///run/podman/podman.sock`).
    pub engine: Option<String>,
    /// Default backend.
    pub backend: Option<Backend>,
    /// Default container name.
    pub name: Option<String>,
    /// Bind mounts for every container `refresh` makes, `SRC:DEST[:ro|rw]`
    /// (a model store, a venv); `--volume` adds to them.
    #[serde(default)]
    pub volumes: Vec<String>,
}

/// A config file that could not be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}: {message}\n  hint: keys are image, engine, backend (toolbox|distrobox|podman|docker), name and volumes: `$EDITOR {path}`"
)]
pub struct ConfigError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl<'de> Deserialize<'de> for Backend {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        <Backend as clap::ValueEnum>::from_str(&s, true).map_err(serde::de::Error::custom)
    }
}

/// The config file path (`HALOBOX_CONFIG` overrides it).
pub fn path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HALOBOX_CONFIG") {
        return Some(PathBuf::from(p));
    }
    dirs::config_dir().map(|d| d.join("halobox/config.toml"))
}

/// Loads the config file; a missing file is an empty config.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    let Some(path) = path else {
        return Ok(Config::default());
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(e) => {
            return Err(ConfigError {
                path: path.display().to_string(),
                message: e.to_string(),
            });
        }
    };
    toml::from_str(&text).map_err(|e| ConfigError {
        path: path.display().to_string(),
        message: e.message().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        let c: Config = toml::from_str("image = \"r/x\"\nbackend = \"Toolbox\"\n").unwrap();
        assert_eq!(c.backend, Some(Backend::Toolbox));
        assert!(toml::from_str::<Config>("imgae = \"x\"").is_err());
        assert!(toml::from_str::<Config>("backend = \"lxc\"").is_err());
    }
}
