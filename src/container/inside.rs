//! Running a command inside a halobox container on this node with stdin
//! attached, under a guard there that stops it when stdin closes (the
//! caller exited, was killed, or its ssh session dropped): the engine's own
//! CLI (`podman --url SOCKET exec -i`, `docker -H SOCKET exec -i`) against
//! the socket halobox uses, as the user the backend runs commands as.
//! `halobox` as the command's first word means halobox inside the
//! container ([`super::binds`]). The bench servers and clients run this way.

use serde::{Deserialize, Serialize};

use super::binds;
use super::spec::LABEL_BACKEND;
use crate::engine::{self, EngineKind, block_on};
use crate::error::UsageError;

/// A running halobox container and how to run commands in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inside {
    /// Container name.
    pub name: String,
    /// Its backend (`podman`, `docker`, `toolbox`, `distrobox`).
    pub backend: String,
    /// `podman` or `docker`: the CLI that execs.
    pub engine: String,
    /// The engine's socket.
    pub address: String,
    /// User to run as (toolbox and distrobox: the host user's uid).
    pub user: Option<String>,
    /// halobox inside the container.
    pub halobox: Option<String>,
}

impl Inside {
    /// Where commands run, for reports: `container vllm (podman)`.
    pub fn describe(&self) -> String {
        format!("container {} ({})", self.name, self.backend)
    }

    /// The argv on this node that runs `cmd` inside, guarded.
    pub fn argv(&self, cmd: &[String]) -> Vec<String> {
        let flag = if self.engine == "docker" {
            "-H"
        } else {
            "--url"
        };
        let mut a = vec![self.engine.clone(), flag.to_string()];
        a.push(self.address.clone());
        a.extend(["exec".to_string(), "-i".into()]);
        if let Some(u) = &self.user {
            a.extend(["--user".to_string(), u.clone()]);
        }
        a.push(self.name.clone());
        let mut inner: Vec<String> = cmd.to_vec();
        if inner.first().is_some_and(|c| c == "halobox")
            && let Some(h) = &self.halobox
        {
            inner[0] = h.clone();
        }
        a.extend(crate::remote::guard_argv(&inner));
        a
    }
}

/// The halobox container `name` on the engine `engine_flag` names (else the
/// usual discovery): `Ok(None)` when there is none of that name; an error
/// when it is not running or was made without halobox.
pub fn find(name: &str, engine_flag: Option<&str>) -> anyhow::Result<Option<Inside>> {
    let (info, c) = block_on(async {
        let engine = engine::connect(engine_flag).await?;
        let c = engine.container(name).await?;
        anyhow::Ok((engine.info, c))
    })??;
    let Some(c) = c else { return Ok(None) };
    if c.state != "running" {
        return Err(UsageError(format!(
            "container {name} is {}, not running\n  hint: start it with `halobox enter {name} -- true`, or pass --on host",
            c.state
        ))
        .into());
    }
    let backend = c
        .labels
        .get(LABEL_BACKEND)
        .cloned()
        .unwrap_or_else(|| info.kind.to_string());
    let exe = std::env::current_exe().and_then(|p| p.canonicalize())?;
    if !matches!(backend.as_str(), "toolbox" | "distrobox") {
        crate::container::staged::refresh_if_present();
    }
    let user = matches!(backend.as_str(), "toolbox" | "distrobox")
        .then(|| nix::unistd::getuid().as_raw().to_string());
    Ok(Some(Inside {
        name: name.to_string(),
        halobox: binds::existing_inside_path(&c.labels, Some(&backend), &exe),
        backend,
        engine: match info.kind {
            EngineKind::Podman => "podman".into(),
            EngineKind::Docker => "docker".into(),
        },
        address: info.address,
        user,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_execs_with_stdin_under_the_guard() {
        let i = Inside {
            name: "vllm".into(),
            backend: "podman".into(),
            engine: "podman".into(),
            address: "unix:///run/podman/podman.sock".into(),
            user: None,
            halobox: Some("/run/halobox/bin/halobox".into()),
        };
        let a = i.argv(&["halobox".into(), "bench".into(), "serve".into()]);
        assert_eq!(
            a[..7],
            [
                "podman",
                "--url",
                "unix:///run/podman/podman.sock",
                "exec",
                "-i",
                "vllm",
                "setsid"
            ]
        );
        assert_eq!(
            a[a.len() - 3..],
            ["/run/halobox/bin/halobox", "bench", "serve"]
        );
        let d = Inside {
            engine: "docker".into(),
            user: Some("1000".into()),
            ..i
        };
        let a = d.argv(&["iperf3".into(), "-s".into()]);
        assert_eq!(a[..2], ["docker", "-H"]);
        assert_eq!(a[5..8], ["--user", "1000", "vllm"]);
        assert_eq!(a[a.len() - 2..], ["iperf3", "-s"]);
        assert_eq!(d.describe(), "container vllm (podman)");
    }
}
