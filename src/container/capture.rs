//! Running a shell script inside a container the way `halobox enter`
//! reaches it ([`super::enter::route`]: `toolbox run`, `distrobox enter`, or
//! an exec through the engine's API), with its output collected.

use std::path::Path;
use std::time::Duration;

use super::enter::{Route, route, tool_error};
use super::spec::LABEL_BACKEND;
use crate::engine::Engine;
use crate::engine::containers::ContainerInfo;
use crate::proc;

/// How a script run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRun {
    /// How it got in: `toolbox run`, `distrobox enter` or `engine exec`.
    pub via: String,
    /// Exit code; `None` when it was stopped at the time limit.
    pub code: Option<i64>,
    /// What it printed on stdout.
    pub stdout: String,
    /// stdout and stderr together (for error messages).
    pub log: String,
}

/// Runs `script` with `/bin/sh` in `container` within `timeout`. A backend
/// tool gets the script on stdin (`sh -s`: distrobox rebuilds a command
/// line as a string, so the script never travels as an argument there) and
/// runs from `/` (toolbox 0.0.99 loses stdin when the caller's directory is
/// missing in the container and it retries elsewhere); an API exec gets it
/// as `sh -c SCRIPT` (argv is exact there).
pub async fn run_script(
    engine: &Engine,
    container: &ContainerInfo,
    script: &str,
    timeout: Duration,
) -> anyhow::Result<ScriptRun> {
    let name = &container.name;
    let backend = container.labels.get(LABEL_BACKEND).map(String::as_str);
    let stdin_shell = ["/bin/sh".to_string(), "-s".to_string()];
    match route(backend, name, &stdin_shell) {
        Route::Tool { program, args } => {
            let mut argv = vec![program.to_string()];
            argv.extend(args);
            let input = script.as_bytes().to_vec();
            let done = tokio::task::spawn_blocking(move || {
                proc::run_with_input(&argv, Path::new("/"), &input, timeout)
            })
            .await?
            .map_err(|e| tool_error(program, name, &e))?;
            let verb = if program == "toolbox" { "run" } else { "enter" };
            Ok(ScriptRun {
                via: format!("{program} {verb}"),
                code: done.status.map(|s| i64::from(s.code().unwrap_or(-1))),
                stdout: done.stdout,
                log: done.output,
            })
        }
        Route::Api { .. } => {
            if container.state != "running" {
                engine
                    .docker
                    .start_container(name, None)
                    .await
                    .map_err(|e| anyhow::anyhow!("starting {name}: {e}"))?;
            }
            let command = vec!["/bin/sh".to_string(), "-c".to_string(), script.to_string()];
            let via = "engine exec".to_string();
            match tokio::time::timeout(timeout, engine.exec_captured(name, &command, None)).await {
                Ok(out) => {
                    let out = out?;
                    Ok(ScriptRun {
                        via,
                        code: out.code,
                        log: format!("{}{}", out.stdout, out.stderr),
                        stdout: out.stdout,
                    })
                }
                Err(_) => Ok(ScriptRun {
                    via,
                    code: None,
                    stdout: String::new(),
                    log: String::new(),
                }),
            }
        }
    }
}
