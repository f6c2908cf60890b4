//! `halobox enter [NAME] [-- CMD…]`: a shell or a command in the container,
//! through `toolbox`/`distrobox` for those backends and an API exec otherwise.
//! The command's exit code becomes halobox's.

use std::process::{Command, ExitCode};

use super::{UsageError, block_on, connect, container_name};
use crate::cli::EnterArgs;
use crate::container::spec::LABEL_BACKEND;

/// The shell started when no command is given.
fn default_shell() -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        "if command -v bash >/dev/null; then exec bash -l; else exec sh -l; fi".into(),
    ]
}

fn exit(code: i64) -> ExitCode {
    ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(1))
}

/// Enters the container.
pub fn run(args: &EnterArgs) -> anyhow::Result<ExitCode> {
    let name = container_name(args.name.as_deref())?;
    let info = block_on(async {
        let engine = connect(args.engine.engine.as_deref()).await?;
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
    let via = |program: &str, words: Vec<String>| -> anyhow::Result<ExitCode> {
        let status = Command::new(program)
            .args(&words)
            .status()
            .map_err(|e| anyhow::anyhow!("cannot run {program}: {e}\n  hint: install {program}, or enter with the engine: podman exec -it {name} sh"))?;
        Ok(exit(i64::from(status.code().unwrap_or(1))))
    };
    match backend {
        Some("toolbox") => {
            let mut words = vec![];
            if args.command.is_empty() {
                words.extend(["enter".to_string(), name.clone()]);
            } else {
                words.extend(["run".to_string(), "-c".to_string(), name.clone()]);
                words.extend(args.command.iter().cloned());
            }
            via("toolbox", words)
        }
        Some("distrobox") => {
            let mut words = vec!["enter".to_string(), name.clone()];
            if !args.command.is_empty() {
                words.push("--".into());
                words.extend(args.command.iter().cloned());
            }
            via("distrobox", words)
        }
        _ => {
            if container.state != "running" {
                block_on(engine.docker.start_container(&name, None))?
                    .map_err(|e| anyhow::anyhow!("starting {name}: {e}"))?;
            }
            let cmd = if args.command.is_empty() {
                default_shell()
            } else {
                args.command.clone()
            };
            let code = block_on(engine.exec(&name, &cmd, None))??;
            Ok(exit(code))
        }
    }
}
