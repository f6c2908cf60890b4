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

/// How a command reaches a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The backend's own tool on the host: `program args…`.
    Tool {
        /// `toolbox` or `distrobox`.
        program: &'static str,
        /// Its arguments, the container and the command included.
        args: Vec<String>,
    },
    /// An exec through the engine's API (the container started first).
    Api {
        /// The command to exec.
        command: Vec<String>,
    },
}

/// The route for `command` (a login shell when empty) into container `name`
/// made by `backend` (its `dev.halobox.backend` label).
pub fn route(backend: Option<&str>, name: &str, command: &[String]) -> Route {
    let mut args = Vec::new();
    match backend {
        Some("toolbox") => {
            if command.is_empty() {
                args.extend(["enter".to_string(), name.to_string()]);
            } else {
                args.extend(["run".to_string(), "-c".to_string(), name.to_string()]);
                args.extend(command.iter().cloned());
            }
            Route::Tool {
                program: "toolbox",
                args,
            }
        }
        Some("distrobox") => {
            args.extend(["enter".to_string(), name.to_string()]);
            if !command.is_empty() {
                args.push("--".into());
                args.extend(command.iter().cloned());
            }
            Route::Tool {
                program: "distrobox",
                args,
            }
        }
        _ => Route::Api {
            command: if command.is_empty() {
                default_shell()
            } else {
                command.to_vec()
            },
        },
    }
}

/// Why `program` could not be started, with the fallback.
pub fn tool_error(program: &str, name: &str, e: &std::io::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot run {program}: {e}\n  hint: install {program}, or enter with the engine: podman exec -it {name} sh"
    )
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
        return Err(missing(&name).into());
    };
    let backend = container.labels.get(LABEL_BACKEND).map(String::as_str);
    match route(backend, &name, command) {
        Route::Tool { program, args } => {
            let status = Command::new(program)
                .args(&args)
                .status()
                .map_err(|e| tool_error(program, &name, &e))?;
            Ok(status_byte(i64::from(status.code().unwrap_or(1))))
        }
        Route::Api { command } => {
            if container.state != "running" {
                block_on(engine.docker.start_container(&name, None))?
                    .map_err(|e| anyhow::anyhow!("starting {name}: {e}"))?;
            }
            let code = block_on(engine.exec(&name, &command, None))??;
            Ok(status_byte(code))
        }
    }
}

/// The error for a container that does not exist.
pub fn missing(name: &str) -> UsageError {
    UsageError(format!(
        "there is no container {name}\n  hint: create it with `halobox refresh --name {name}`"
    ))
}
