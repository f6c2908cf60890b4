//! Where the container engine's API socket is: a pure decision from the
//! environment and which socket files exist.

use std::path::{Path, PathBuf};

/// Where one candidate address came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What named it (`--engine`, `CONTAINER_HOST`, …).
    pub source: &'static str,
    /// The address (`unix:///run/podman/podman.sock`, `tcp://host:2375`).
    pub address: String,
}

/// The environment discovery reads.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryEnv {
    /// `--engine URL` or the config file's `engine`.
    pub explicit: Option<String>,
    /// `CONTAINER_HOST`.
    pub container_host: Option<String>,
    /// `DOCKER_HOST`.
    pub docker_host: Option<String>,
    /// `XDG_RUNTIME_DIR`.
    pub xdg_runtime_dir: Option<PathBuf>,
}

impl DiscoveryEnv {
    /// Reads the process environment; `explicit` comes from flags or config.
    pub fn from_process(explicit: Option<String>) -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self {
            explicit,
            container_host: var("CONTAINER_HOST"),
            docker_host: var("DOCKER_HOST"),
            xdg_runtime_dir: var("XDG_RUNTIME_DIR").map(PathBuf::from),
        }
    }
}

/// Every place to try, in order: `--engine`/config, `CONTAINER_HOST`,
/// `DOCKER_HOST`, the rootless podman socket, the rootful podman socket,
/// the docker socket. Explicit settings are tried alone: naming an engine
/// and silently getting another would be worse than an error.
pub fn candidates(env: &DiscoveryEnv) -> Vec<Candidate> {
    let c = |source, address: String| Candidate { source, address };
    if let Some(e) = &env.explicit {
        return vec![c("--engine", normalize(e))];
    }
    if let Some(e) = &env.container_host {
        return vec![c("CONTAINER_HOST", normalize(e))];
    }
    if let Some(e) = &env.docker_host {
        return vec![c("DOCKER_HOST", normalize(e))];
    }
    let mut out = Vec::new();
    if let Some(dir) = &env.xdg_runtime_dir {
        out.push(c(
            "$XDG_RUNTIME_DIR",
            format!("unix://{}", dir.join("podman/podman.sock").display()),
        ));
    }
    out.push(c("rootful podman", "unix:///run/podman/podman.sock".into()));
    out.push(c("docker", "unix:///var/run/docker.sock".into()));
    out
}

/// A bare path becomes a `unix://` address.
pub fn normalize(address: &str) -> String {
    if address.starts_with('/') {
        format!("unix://{address}")
    } else {
        address.to_string()
    }
}

/// The socket path of a `unix://` address.
pub fn unix_path(address: &str) -> Option<&Path> {
    address.strip_prefix("unix://").map(Path::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_without_settings() {
        let env = DiscoveryEnv {
            xdg_runtime_dir: Some("/run/user/1000".into()),
            ..Default::default()
        };
        let got: Vec<String> = candidates(&env).into_iter().map(|c| c.address).collect();
        assert_eq!(
            got,
            [
                "unix:///run/user/1000/podman/podman.sock",
                "unix:///run/podman/podman.sock",
                "unix:///var/run/docker.sock"
            ]
        );
    }

    #[test]
    fn explicit_wins_and_is_alone() {
        let env = DiscoveryEnv {
            explicit: Some("/tmp/x.sock".into()),
            container_host: Some("unix:///a".into()),
            docker_host: Some("unix:///b".into()),
            xdg_runtime_dir: None,
        };
        assert_eq!(
            candidates(&env),
            [Candidate {
                source: "--engine",
                address: "unix:///tmp/x.sock".into()
            }]
        );
        let env = DiscoveryEnv {
            container_host: None,
            ..env.clone()
        };
        assert_eq!(candidates(&env)[0].address, "unix:///tmp/x.sock");
        let env = DiscoveryEnv {
            explicit: None,
            container_host: None,
            docker_host: Some("tcp://10.0.0.1:2375".into()),
            xdg_runtime_dir: None,
        };
        assert_eq!(candidates(&env)[0].source, "DOCKER_HOST");
    }
}
