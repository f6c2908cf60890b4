//! Running a shell script inside a container the way `halobox enter`
//! reaches it (`toolbox run`, or an exec through the engine's API: as
//! distrobox's user in a distrobox container, see [`super::enter`]), with
//! its output collected within [`CAPTURE`]'s bounds, control and escape
//! characters removed (it comes from the image).

use std::path::Path;
use std::time::Duration;

use super::enter::{backend_of, exec_options, tool_error, toolbox_words};
use crate::container::ops::ContainerInfo;
use crate::engine::Engine;
use crate::proc::{self, Capture};

/// How a script's output is kept: the newest 1 MiB of each stream, lines
/// cut at half of it, each made [`crate::remote::printable`].
pub const CAPTURE: Capture = Capture {
    limit: crate::remote::OUTPUT_LIMIT,
    clean: Some(crate::remote::printable),
};

/// How a script run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRun {
    /// How it got in: `toolbox run`, `distrobox exec` (the API, as
    /// distrobox's user) or `engine exec`.
    pub via: String,
    /// Exit code; `None` when it was stopped at the time limit.
    pub code: Option<i64>,
    /// What it printed on stdout.
    pub stdout: String,
    /// stdout and stderr together (for error messages).
    pub log: String,
}

/// Runs `script` with `/bin/sh` in `container` within `timeout`. toolbox
/// gets the script on stdin (`sh -s`) and runs from `/` (toolbox 0.0.99
/// loses stdin when the caller's directory is missing in the container and
/// it retries elsewhere); an API exec gets it as `sh -c SCRIPT` (argv is
/// exact there).
pub async fn run_script(
    engine: &Engine,
    container: &ContainerInfo,
    script: &str,
    timeout: Duration,
) -> anyhow::Result<ScriptRun> {
    let name = &container.name;
    let backend = backend_of(container);
    if backend == Some("toolbox") {
        let stdin_shell = ["/bin/sh".to_string(), "-s".to_string()];
        let mut argv = vec!["toolbox".to_string()];
        argv.extend(toolbox_words(name, &stdin_shell));
        let input = script.as_bytes().to_vec();
        let done = tokio::task::spawn_blocking(move || {
            proc::run_with_input(&argv, Path::new("/"), &input, timeout, CAPTURE)
        })
        .await?
        .map_err(|e| tool_error("toolbox", name, &e))?;
        return Ok(ScriptRun {
            via: "toolbox run".into(),
            code: done.status.map(|s| i64::from(s.code().unwrap_or(-1))),
            stdout: done.stdout,
            log: done.output,
        });
    }
    let via = if backend == Some("distrobox") {
        "distrobox exec"
    } else {
        "engine exec"
    }
    .to_string();
    let command = vec!["/bin/sh".to_string(), "-c".to_string(), script.to_string()];
    let ran = tokio::time::timeout(timeout, async {
        let opts = exec_options(engine, container).await?;
        anyhow::Ok(engine.exec_captured(name, &command, &opts, CAPTURE).await?)
    })
    .await;
    match ran {
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
