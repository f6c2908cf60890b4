//! Runs a shell or a command inside a halobox container with the tool its
//! backend calls for: `toolbox enter`/`run`, `distrobox enter`, or an exec
//! through the engine's API (starting the container first).

use std::process::Command;

use super::spec::LABEL_BACKEND;
use crate::engine::{self, block_on};
use crate::error::UsageError;

/// The shell started when no command is given.
fn default_shell() -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        "if command -v bash >/dev/null; then exec bash -l; else exec sh -l; fi".into(),
    ]
}

/// An exit code as a process exit status (clamped to 0..=255).
fn status_byte(code: i64) -> u8 {
    u8::try_from(code.clamp(0, 255)).unwrap_or(1)
}

/// Runs `command` (a login shell when empty) in container `name` (resolved
/// as [`super::name::resolve`] does) on the engine `engine` names; returns
/// the command's exit status.
pub fn run(name: Option<&str>, engine: Option<&str>, command: &[String]) -> anyhow::Result<u8> {
    let name = super::name::resolve(name)?;
    let info = block_on(async {
        let engine = engine::connect(engine).await?;
        let c = engine.container(&name).await?;
        anyhow::Ok((engine, c))
    })??;
    let (engine, Some(container)) = info else {
        return Err(UsageError(format!(
            "there is no container {name}\n  hint: create it with `halobox refresh --name {name}`"
        ))
        .into());
    };
    let backend = container.labels.get(LABEL_BACKEND).map(String::as_str);
    let via = |program: &str, words: Vec<String>| -> anyhow::Result<u8> {
        let status = Command::new(program)
            .args(&words)
            .status()
            .map_err(|e| anyhow::anyhow!("cannot run {program}: {e}\n  hint: install {program}, or enter with the engine: podman exec -it {name} sh"))?;
        Ok(status_byte(i64::from(status.code().unwrap_or(1))))
    };
    match backend {
        Some("toolbox") => {
            let mut words = vec![];
            if command.is_empty() {
                words.extend(["enter".to_string(), name.clone()]);
            } else {
                words.extend(["run".to_string(), "-c".to_string(), name.clone()]);
                words.extend(command.iter().cloned());
            }
            via("toolbox", words)
        }
        Some("distrobox") => {
            let mut words = vec!["enter".to_string(), name.clone()];
            if !command.is_empty() {
                words.push("--".into());
                words.extend(command.iter().cloned());
            }
            via("distrobox", words)
        }
        _ => {
            if container.state != "running" {
                block_on(engine.docker.start_container(&name, None))?
                    .map_err(|e| anyhow::anyhow!("starting {name}: {e}"))?;
            }
            let cmd = if command.is_empty() {
                default_shell()
            } else {
                command.to_vec()
            };
            let code = block_on(engine.exec(&name, &cmd, None))??;
            Ok(status_byte(code))
        }
    }
}
