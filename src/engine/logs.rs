//! What a container printed, for readiness markers (distrobox's
//! `container_setup_done`).

use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptionsBuilder;
use futures_util::StreamExt;

use super::{Engine, EngineError, bound};

impl Engine {
    /// stdout and stderr of `name` since `since` (unix seconds), as text.
    pub async fn logs_since(&self, name: &str, since: i64) -> Result<String, EngineError> {
        let what = format!("reading the log of container {name}");
        let opts = LogsOptionsBuilder::new()
            .stdout(true)
            .stderr(true)
            .follow(false)
            .since(i32::try_from(since).unwrap_or(0))
            .build();
        let collect = async {
            let mut text = String::new();
            let mut stream = self.docker.logs(name, Some(opts));
            while let Some(item) = stream.next().await {
                match item {
                    Ok(
                        LogOutput::StdOut { message }
                        | LogOutput::StdErr { message }
                        | LogOutput::Console { message },
                    ) => text.push_str(&String::from_utf8_lossy(&message)),
                    Ok(LogOutput::StdIn { .. }) => {}
                    Err(error) => {
                        return Err(EngineError::Api {
                            context: what.clone(),
                            error,
                        });
                    }
                }
            }
            Ok(text)
        };
        self.within(bound::CALL, &what, collect).await?
    }
}
