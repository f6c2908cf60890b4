//! Runs a shell or a command inside a container: `toolbox enter`/`run` for
//! halobox's toolbox containers, `distrobox enter` for a shell in its
//! distrobox containers, and an exec through the engine's API for everything
//! else (a command in a distrobox container runs as distrobox's user and in
//! its directory, with the argv passed as a list: distrobox-enter would
//! `eval` it). A container that is not running is started first.

use std::time::{Duration, Instant};

use super::distrobox;
use super::owner::Owner;
use super::spec::LABEL_BACKEND;
use crate::container::ops::ContainerInfo;
use crate::engine::exec::ExecOptions;
use crate::engine::{self, Engine, block_on};
use crate::error::UsageError;

/// How long distrobox's init may take to set a started container up (on
/// first start it may install packages).
const DISTROBOX_SETUP: Duration = Duration::from_secs(600);

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

/// Whether a container in `state` must be started before a command can run
/// in it (`Ok(true)`), already runs (`Ok(false)`), or cannot take one now
/// (why, with the fix). Covers every state podman and docker report.
pub fn needs_start(name: &str, state: &str) -> Result<bool, String> {
    match state {
        "running" => Ok(false),
        "created" | "configured" | "initialized" | "exited" | "stopped" => Ok(true),
        "paused" => Err(format!(
            "container {name} is paused\n  hint: `podman unpause {name}` (or `docker unpause {name}`), then try again"
        )),
        "stopping" | "restarting" | "removing" => Err(format!(
            "container {name} is {state}\n  hint: wait until that is over (`podman ps -a` shows it), then try again"
        )),
        other => Err(format!(
            "container {name} is in state {other:?}, which cannot run a command\n  hint: `podman ps -a` / `docker ps -a` shows it; remove it or start it by hand"
        )),
    }
}

/// Runs `command` (a login shell when empty) in container `name` (resolved
/// as [`super::name::resolve`] does) on the engine `engine` names; returns
/// the command's exit status.
pub fn run(name: Option<&str>, engine: Option<&str>, command: &[String]) -> anyhow::Result<u8> {
    let name = super::name::resolve(name)?;
    let (engine, container) = block_on(async {
        let engine = engine::connect(engine).await?;
        let c = engine.container(&name).await?;
        anyhow::Ok((engine, c))
    })??;
    let Some(container) = container else {
        return Err(missing(&name).into());
    };
    let backend = backend_of(&container);
    match backend {
        Some("toolbox") => via(&name, "toolbox", &toolbox_words(&name, command)),
        Some("distrobox") if command.is_empty() => {
            let mut words = vec!["enter".to_string()];
            if !engine.info.rootless {
                words.push("--root".into());
            }
            words.push(name.clone());
            via(&name, "distrobox", &words)
        }
        _ => block_on(async {
            let opts = exec_options(&engine, &container).await?;
            let cmd = if command.is_empty() {
                default_shell()
            } else {
                command.to_vec()
            };
            anyhow::Ok(status_byte(engine.exec(&name, &cmd, &opts).await?))
        })?,
    }
}

/// The error for a container that does not exist.
pub fn missing(name: &str) -> UsageError {
    UsageError(format!(
        "there is no container {name}\n  hint: create it with `halobox refresh --name {name}`"
    ))
}

/// The tool that made `c`, as halobox recorded it (`dev.halobox.backend`);
/// `None` for a container halobox did not make: an inherited label may lie.
pub fn backend_of(c: &ContainerInfo) -> Option<&str> {
    (c.owner == Owner::Halobox)
        .then(|| c.labels.get(LABEL_BACKEND).map(String::as_str))
        .flatten()
}

/// `toolbox`'s arguments for `command` (a shell when empty) in `name`.
pub fn toolbox_words(name: &str, command: &[String]) -> Vec<String> {
    let mut words = vec![];
    if command.is_empty() {
        words.extend(["enter".to_string(), name.to_string()]);
    } else {
        words.extend(["run".to_string(), "-c".to_string(), name.to_string()]);
        words.extend(command.iter().cloned());
    }
    words
}

/// Why `program` (the backend's own tool) could not be started, with the fallback.
pub fn tool_error(program: &str, name: &str, e: &std::io::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot run {program}: {e}\n  hint: install {program}, or enter with the engine: podman exec -it {name} sh"
    )
}

/// Runs `program words…` (the backend's own tool) in the foreground.
fn via(name: &str, program: &str, words: &[String]) -> anyhow::Result<u8> {
    let status = crate::proc::command(program)
        .args(words)
        .status()
        .map_err(|e| tool_error(program, name, &e))?;
    Ok(status_byte(i64::from(status.code().unwrap_or(1))))
}

/// Starts the container when its state calls for it; returns whether it did.
async fn ensure_running(engine: &Engine, c: &ContainerInfo) -> anyhow::Result<bool> {
    let start = needs_start(&c.name, &c.state).map_err(UsageError)?;
    if start {
        engine.start(&c.name).await?;
    }
    Ok(start)
}

/// Makes `c` ready for an exec through the API (started when its state
/// calls for it) and says who runs it there: the container's user, or in a
/// distrobox container what `distrobox enter` would use (its user, the
/// current directory as seen inside, after distrobox's setup), so the argv
/// is passed as a list and never `eval`ed on the host.
pub async fn exec_options(engine: &Engine, c: &ContainerInfo) -> anyhow::Result<ExecOptions> {
    if backend_of(c) != Some("distrobox") {
        ensure_running(engine, c).await?;
        return Ok(ExecOptions::default());
    }
    let user = distrobox::user(&c.cmd).ok_or_else(|| {
        anyhow::anyhow!(
            "container {} is labelled distrobox but its command names no user ({:?})\n  hint: re-create it with `halobox refresh --backend distrobox --name {}`",
            c.name,
            c.cmd,
            c.name
        )
    })?;
    ensure_running(engine, c).await?;
    wait_for_setup(engine, &c.name).await?;
    let home = distrobox::home(&c.env);
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    Ok(ExecOptions {
        user: Some(user),
        workdir: Some(distrobox::workdir(home.as_deref(), &cwd)),
        env: vec![format!("CONTAINER_ID={}", c.name)],
    })
}

/// Waits until distrobox's init has set the container up since it last
/// started (it prints [`distrobox::SETUP_DONE`]), as `distrobox enter` does.
async fn wait_for_setup(engine: &Engine, name: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + DISTROBOX_SETUP;
    let mut said = false;
    loop {
        let state = engine
            .run_state(name)
            .await?
            .ok_or_else(|| anyhow::anyhow!("container {name} went away"))?;
        if !state.running {
            anyhow::bail!(
                "container {name} stopped during distrobox's setup (state {}, exit code {})\n  hint: `podman logs {name}` shows why",
                state.status,
                state.exit_code
            );
        }
        let since = chrono::DateTime::parse_from_rfc3339(&state.started_at)
            .map(|t| t.timestamp())
            .unwrap_or(0);
        let log = engine.logs_since(name, since).await?;
        if log.contains(distrobox::SETUP_DONE) {
            return Ok(());
        }
        if let Some(line) = log.lines().find(|l| l.contains("Error:")) {
            anyhow::bail!(
                "distrobox's setup of {name} failed: {}\n  hint: `podman logs {name}` shows the rest",
                line.trim()
            );
        }
        if Instant::now() >= deadline {
            anyhow::bail!(
                "distrobox's setup of {name} did not finish in {}s\n  hint: `podman logs -f {name}` shows where it is",
                DISTROBOX_SETUP.as_secs()
            );
        }
        if !said {
            eprintln!("halobox: waiting for distrobox to set up {name}");
            said = true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_an_answer() {
        assert_eq!(needs_start("c", "running"), Ok(false));
        for s in ["created", "configured", "initialized", "exited", "stopped"] {
            assert_eq!(needs_start("c", s), Ok(true), "{s}");
        }
        for s in [
            "paused",
            "stopping",
            "restarting",
            "removing",
            "dead",
            "unknown",
        ] {
            let e = needs_start("c", s).unwrap_err();
            assert!(e.contains("hint:"), "{s}: {e}");
        }
    }
}
