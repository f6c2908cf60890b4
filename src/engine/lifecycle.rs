//! A container's life after create: start, stop, the run state a start
//! check reads (running, StartedAt, restarts, exit), and what it changed in
//! its own filesystem (for a prompt that says what a removal loses).

use std::time::Duration;

use super::bound::CALL;
use super::{Context, Engine, EngineError};
use bollard::query_parameters::{InspectContainerOptionsBuilder, StopContainerOptionsBuilder};
use serde_json::Value;

/// What a container is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunState {
    /// Container id.
    pub id: String,
    /// Name (without the leading `/`).
    pub name: String,
    /// The engine's state word (`running`, `exited`, podman's transient
    /// `stopping`/`stopped`, …).
    pub status: String,
    /// The engine says it runs.
    pub running: bool,
    /// When it was last started (RFC 3339, as the engine reports it).
    pub started_at: String,
    /// How often the engine restarted it.
    pub restart_count: i64,
    /// Host pid of its first process (0 when not running).
    pub pid: i64,
    /// Exit code of its last run.
    pub exit_code: i64,
    /// The engine's error for its last start, if any.
    pub error: String,
}

/// A container's own filesystem changes (its writable layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changes {
    /// Paths added, changed or deleted.
    pub paths: usize,
    /// Bytes in its writable layer, when the engine reports them.
    pub bytes: Option<i64>,
}

/// The state part of a container inspect answer (any state word the
/// engine reports, podman's transient `stopped` included).
pub fn run_state(v: &Value) -> RunState {
    let text = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let int = |p: &str| v.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    RunState {
        id: text("/Id"),
        name: text("/Name").trim_start_matches('/').to_string(),
        status: text("/State/Status"),
        running: v
            .pointer("/State/Running")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        started_at: text("/State/StartedAt"),
        restart_count: int("/RestartCount"),
        pid: int("/State/Pid"),
        exit_code: int("/State/ExitCode"),
        error: text("/State/Error"),
    }
}

/// True for an HTTP status from the engine.
fn status_is(e: &bollard::errors::Error, code: u16) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code, .. } if *status_code == code)
}

impl Engine {
    /// Starts a container (one that already runs is fine).
    pub async fn start(&self, id: &str) -> Result<(), EngineError> {
        let what = format!("starting container {id}");
        match self
            .within(CALL, &what, self.docker.start_container(id, None))
            .await?
        {
            Err(e) if status_is(&e, 304) => Ok(()),
            r => r.ctx(|| format!("starting container {id}")),
        }
    }

    /// Stops a container: SIGTERM, then SIGKILL after `grace` (one that is
    /// not running is fine).
    pub async fn stop(&self, id: &str, grace: Duration) -> Result<(), EngineError> {
        let t = i32::try_from(grace.as_secs()).unwrap_or(i32::MAX);
        let opts = StopContainerOptionsBuilder::new().t(t).build();
        let what = format!("stopping container {id}");
        let bound = CALL + grace;
        match self
            .within(bound, &what, self.docker.stop_container(id, Some(opts)))
            .await?
        {
            Err(e) if status_is(&e, 304) => Ok(()),
            r => r.ctx(|| format!("stopping container {id}")),
        }
    }

    /// The run state of a container (any state the engine reports);
    /// `Ok(None)` when there is none.
    pub async fn run_state(&self, id: &str) -> Result<Option<RunState>, EngineError> {
        Ok(self.inspect_json(id).await?.as_ref().map(run_state))
    }

    /// What the container changed in its filesystem.
    pub async fn changes(&self, id: &str) -> Result<Changes, EngineError> {
        let paths = self
            .call(
                &format!("listing the changes of container {id}"),
                self.docker.container_changes(id),
            )
            .await?
            .map_or(0, |c| c.len());
        let sized = self
            .call(
                &format!("inspecting container {id}"),
                self.docker.inspect_container(
                    id,
                    Some(InspectContainerOptionsBuilder::new().size(true).build()),
                ),
            )
            .await?;
        Ok(Changes {
            paths,
            bytes: sized.size_rw,
        })
    }
}
