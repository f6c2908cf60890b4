//! Running a command in a container through the API with its output
//! collected instead of shown (no terminal, no stdin).

use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use futures_util::StreamExt;

use super::exec::ExecOptions;
use super::{Context, Engine, EngineError};

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
    /// stderr (the caller bounds how long it may take).
    pub async fn exec_captured(
        &self,
        container: &str,
        cmd: &[String],
        opts: &ExecOptions,
    ) -> Result<Captured, EngineError> {
        let what = cmd.first().map(String::as_str).unwrap_or("");
        let exec = self
            .call(
                &format!("preparing to run {what} in {container}"),
                self.docker.create_exec(
                    container,
                    ExecConfig {
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        cmd: Some(cmd.to_vec()),
                        user: opts.user.clone(),
                        working_dir: opts.workdir.clone(),
                        env: Some(opts.env.clone()),
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
                        tty: false,
                        output_capacity: None,
                    }),
                ),
            )
            .await?;
        let StartExecResults::Attached { mut output, .. } = started else {
            return Err(EngineError::Stream {
                context: format!("running {what} in {container}"),
                message: "the engine detached the exec".into(),
            });
        };
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        while let Some(chunk) = output.next().await {
            match chunk.ctx(|| format!("reading the output of {what} in {container}"))? {
                LogOutput::StdErr { message } => stderr.extend_from_slice(&message),
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    stdout.extend_from_slice(&message)
                }
                LogOutput::StdIn { .. } => {}
            }
        }
        let done = self
            .call(
                &format!("reading the exit code of {what} in {container}"),
                self.docker.inspect_exec(&exec.id),
            )
            .await?;
        Ok(Captured {
            code: done.exit_code,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }
}
