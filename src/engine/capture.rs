//! Running a command in a container through the API with its output
//! collected instead of shown (no terminal, no stdin), kept within bounds
//! and cleaned as the caller's [`Capture`] says.

use bollard::container::LogOutput;
use futures_util::StreamExt;

use super::exec::ExecOptions;
use super::{Context, Engine, EngineError};
use crate::proc::{Bounded, Capture};

/// What a command printed and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// Exit code (`None` when it never ended: killed or timed out).
    pub code: Option<i64>,
    /// stdout.
    pub stdout: String,
    /// stderr.
    pub stderr: String,
}

impl Engine {
    /// Runs `cmd` in `container` as `opts` say and collects stdout and
    /// stderr as `capture` says (the caller bounds how long it may take).
    pub async fn exec_captured(
        &self,
        container: &str,
        cmd: &[String],
        opts: &ExecOptions,
        capture: Capture,
    ) -> Result<Captured, EngineError> {
        let what = cmd.first().map(String::as_str).unwrap_or("");
        let mut started = self
            .start_attached(container, cmd, opts, opts.env.clone(), (false, false), what)
            .await?;
        let (mut stdout, mut stderr) = (Bounded::new(capture), Bounded::new(capture));
        while let Some(chunk) = started.output.next().await {
            match chunk.ctx(|| format!("reading the output of {what} in {container}"))? {
                LogOutput::StdErr { message } => stderr.push(&message),
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    stdout.push(&message)
                }
                LogOutput::StdIn { .. } => {}
            }
        }
        Ok(Captured {
            code: self
                .exit_code(&started.id, &format!("{what} in {container}"))
                .await?,
            stdout: stdout.text(),
            stderr: stderr.text(),
        })
    }
}
