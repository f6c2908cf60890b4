//! Running a command in a container through the API: interactive (TTY in raw
//! mode, window resizes forwarded) or plain (output streamed, stdin passed
//! on as `podman exec -i` does), with the command's exit code passed through.
//! The argv goes to the engine as a list: no shell re-reads it.

use std::io::{IsTerminal, Write};

use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::query_parameters::ResizeExecOptionsBuilder;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::{Context, Engine, EngineError};

/// Who runs a command in a container, where, and with what environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOptions {
    /// `user`, `uid` or `uid:gid`; the container's user when `None`.
    pub user: Option<String>,
    /// The working directory; the container's when `None`.
    pub workdir: Option<String>,
    /// `NAME=value` pairs added to the container's environment.
    pub env: Vec<String>,
}

/// Restores the terminal when dropped.
struct RawMode {
    saved: nix::sys::termios::Termios,
}

impl RawMode {
    fn enter() -> Option<Self> {
        use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(&stdin, SetArg::TCSANOW, &raw).ok()?;
        Some(Self { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = nix::sys::termios::tcsetattr(
            std::io::stdin(),
            nix::sys::termios::SetArg::TCSANOW,
            &self.saved,
        );
    }
}

fn terminal_size() -> Option<(u16, u16)> {
    let mut ws = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes a winsize into the pointer we own.
    let rc = unsafe { nix::libc::ioctl(nix::libc::STDOUT_FILENO, nix::libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_row > 0).then_some((ws.ws_row, ws.ws_col))
}

/// An exec the engine started with its streams attached.
pub(super) struct Attached {
    /// The exec's id (for its exit code and resizes).
    pub id: String,
    /// What it prints, stdout and stderr apart.
    pub output: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
    >,
    /// Its stdin (closed at once unless `stdin` was asked for).
    pub input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
}

impl Engine {
    /// Creates and starts `cmd` in `container` as `opts` say, with `env`
    /// added, its stdin attached when `stdin`, on a terminal when `tty`;
    /// `what` names it in errors.
    pub(super) async fn start_attached(
        &self,
        container: &str,
        cmd: &[String],
        opts: &ExecOptions,
        env: Vec<String>,
        (stdin, tty): (bool, bool),
        what: &str,
    ) -> Result<Attached, EngineError> {
        let exec = self
            .call(
                &format!("preparing to run {what} in {container}"),
                self.docker.create_exec(
                    container,
                    ExecConfig {
                        attach_stdin: Some(stdin),
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        tty: Some(tty),
                        cmd: Some(cmd.to_vec()),
                        user: opts.user.clone(),
                        working_dir: opts.workdir.clone(),
                        env: Some(env),
                        ..Default::default()
                    },
                ),
            )
            .await?;
        let started = self
            .call(
                &format!("running {what} in {container}"),
                self.docker.start_exec(
                    &exec.id,
                    Some(StartExecOptions {
                        detach: false,
                        tty,
                        output_capacity: None,
                    }),
                ),
            )
            .await?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(EngineError::Stream {
                context: format!("running {what} in {container}"),
                message: "the engine detached the exec".into(),
            });
        };
        Ok(Attached {
            id: exec.id,
            output,
            input,
        })
    }

    /// The exit code of a finished exec (`None` when it never ended).
    pub(super) async fn exit_code(&self, id: &str, what: &str) -> Result<Option<i64>, EngineError> {
        let done = self
            .call(
                &format!("reading the exit code of {what}"),
                self.docker.inspect_exec(id),
            )
            .await?;
        Ok(done.exit_code)
    }

    /// Runs `cmd` in `container` as `opts` say; interactive when stdin and
    /// stdout are terminals. Returns the command's exit code.
    pub async fn exec(
        &self,
        container: &str,
        cmd: &[String],
        opts: &ExecOptions,
    ) -> Result<i64, EngineError> {
        let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
        let mut env = vec!["TERM=xterm-256color".to_string()];
        env.extend(opts.env.iter().cloned());
        let what = format!("{cmd:?}");
        let Attached {
            id,
            mut output,
            mut input,
        } = self
            .start_attached(container, cmd, opts, env, (true, tty), &what)
            .await?;
        let raw = if tty { RawMode::enter() } else { None };
        if tty {
            self.resize(&id).await;
            let docker = self.clone();
            let id = id.clone();
            tokio::spawn(async move {
                let Ok(mut winch) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
                else {
                    return;
                };
                while winch.recv().await.is_some() {
                    docker.resize(&id).await;
                }
            });
        }
        tokio::spawn(async move {
            let mut stdin = tokio::io::stdin();
            let _ = tokio::io::copy(&mut stdin, &mut input).await;
            let _ = input.shutdown().await;
        });
        let mut stdout = std::io::stdout();
        let mut stderr = std::io::stderr();
        while let Some(chunk) = output.next().await {
            match chunk.ctx(|| format!("reading output of {what}"))? {
                LogOutput::StdErr { message } => {
                    let _ = stderr.write_all(&message);
                    let _ = stderr.flush();
                }
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    let _ = stdout.write_all(&message);
                    let _ = stdout.flush();
                }
                LogOutput::StdIn { .. } => {}
            }
        }
        drop(raw);
        Ok(self.exit_code(&id, &what).await?.unwrap_or(0))
    }

    async fn resize(&self, exec_id: &str) {
        if let Some((rows, cols)) = terminal_size() {
            let _ = self
                .call(
                    "resizing the terminal",
                    self.docker.resize_exec(
                        exec_id,
                        ResizeExecOptionsBuilder::new()
                            .h(i32::from(rows))
                            .w(i32::from(cols))
                            .build(),
                    ),
                )
                .await;
        }
    }
}
